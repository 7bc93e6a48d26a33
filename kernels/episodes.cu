// Frequent-episode counting kernels (compiled at run time by NVRTC for the device's arch).
//
// Layout (uploaded once per device per mining run): the event stream grouped by type, CSR:
//   offsets[type .. type+1] indexes times[] (f64 seconds) and positions[] (u32 stream positions).
// Candidates (uploaded per batch): types[c * N + i], interval ids ivs[c * (N-1) + i] into the
// interval table lo[], hi[] (f64 seconds). One thread counts one candidate (PTPE, paper §5.1).
//
// Each thread merges its own types' lists by stream position (events of other types never
// change an episode's state), then runs the state machine. Times stay f64 and every delay is
// computed as t_next - t_prev in f64 and compared with lo < d <= hi, exactly as the CPU
// reference (src/episode/count.rs), so counts are identical, not approximately equal.
//
// References: Cao et al., "Towards real-time data mining of spike train datasets using GPUs":
// Algorithm 1 (exact counting), Algorithm 3 (PreElim), Observation 1, Theorem 1.

#define SYNFIRE_MAX_GPU_NODES 16
// Capacity of each PTPE per-state list. A list that would exceed it makes the thread stop and
// report OVERFLOW; the host then recounts that candidate exactly on the CPU.
#define SYNFIRE_PTPE_LIST_CAP 32
#define SYNFIRE_COUNT_OVERFLOW 0xFFFFFFFFu
// -inf without <cmath> (NVRTC compiles without host headers).
#define SYNFIRE_NEG_INF (__longlong_as_double(0xFFF0000000000000ULL))

typedef unsigned int u32;

// Distinct types of the candidate, their list cursors and state masks.
template <int N>
struct Merge {
    int k;
    u32 head[N];
    u32 end[N];
    u32 next_pos[N];  // position of the head event, or 0xFFFFFFFF when exhausted
    u32 mask[N];

    __device__ __forceinline__ void init(const u32* __restrict__ offsets,
                                         const u32* __restrict__ positions,
                                         const u32* __restrict__ types) {
        u32 slot_type[N];
        k = 0;
        for (int i = 0; i < N; ++i) {
            u32 ty = types[i];
            int j = 0;
            while (j < k && slot_type[j] != ty) ++j;
            if (j == k) {
                slot_type[k] = ty;
                head[k] = offsets[ty];
                end[k] = offsets[ty + 1];
                next_pos[k] = head[k] < end[k] ? positions[head[k]] : 0xFFFFFFFFu;
                mask[k] = 0;
                ++k;
            }
            mask[j] |= 1u << i;
        }
    }

    // Returns the slot of the next event in stream order (or -1) and advances it.
    __device__ __forceinline__ int next(const u32* __restrict__ positions, u32* index) {
        int best = -1;
        u32 bp = 0xFFFFFFFFu;
        for (int j = 0; j < k; ++j) {
            if (next_pos[j] < bp) {
                bp = next_pos[j];
                best = j;
            }
        }
        if (best >= 0) {
            *index = head[best];
            u32 h = ++head[best];
            next_pos[best] = h < end[best] ? positions[h] : 0xFFFFFFFFu;
        }
        return best;
    }
};

template <int N>
__device__ void preelim_one(const double* __restrict__ times, const u32* __restrict__ positions,
                            const u32* __restrict__ offsets, const double* __restrict__ hi,
                            const u32* __restrict__ types, const u32* __restrict__ ivs,
                            u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, positions, types);
    double high[N > 1 ? N - 1 : 1];
    for (int i = 0; i + 1 < N; ++i) high[i] = hi[ivs[i]];
    double last[N], before[N];
    for (int i = 0; i < N; ++i) { last[i] = SYNFIRE_NEG_INF; before[i] = SYNFIRE_NEG_INF; }
    u32 count = 0;
    double last_end = SYNFIRE_NEG_INF;
    u32 idx;
    int slot;
    while ((slot = m.next(positions, &idx)) >= 0) {
        const double t = times[idx];
        u32 mask = m.mask[slot];
        while (mask) {
            const int i = 31 - __clz(mask);
            mask &= ~(1u << i);
            if (i == 0) {
                if (t <= last_end) continue;
                if (N == 1) { ++count; last_end = t; break; }
                if (t > last[0]) { before[0] = last[0]; last[0] = t; }
                continue;
            }
            // Latest entry strictly before t (entries at t have delay 0 and never fit).
            const double prev = last[i - 1] < t ? last[i - 1] : before[i - 1];
            if (t - prev > high[i - 1]) continue;
            if (i == N - 1) {
                ++count;
                last_end = t;
                for (int s = 0; s < N; ++s) { last[s] = SYNFIRE_NEG_INF; before[s] = SYNFIRE_NEG_INF; }
                break;
            }
            if (t > last[i]) { before[i] = last[i]; last[i] = t; }
        }
    }
    *out = count;
}

template <int N>
__device__ void ptpe_one(const double* __restrict__ times, const u32* __restrict__ positions,
                         const u32* __restrict__ offsets, const double* __restrict__ lo,
                         const double* __restrict__ hi, const u32* __restrict__ types,
                         const u32* __restrict__ ivs, u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, positions, types);
    constexpr int S = N > 1 ? N - 1 : 1;  // states that keep lists: 0 .. N-2
    double low[S], high[S];
    for (int i = 0; i + 1 < N; ++i) { low[i] = lo[ivs[i]]; high[i] = hi[ivs[i]]; }
    double buf[S * SYNFIRE_PTPE_LIST_CAP];
    int qh[S], ql[S];
    for (int s = 0; s < S; ++s) { qh[s] = 0; ql[s] = 0; }
    u32 count = 0;
    double last_end = SYNFIRE_NEG_INF;
    u32 idx;
    int slot;
    while ((slot = m.next(positions, &idx)) >= 0) {
        const double t = times[idx];
        u32 mask = m.mask[slot];
        while (mask) {
            const int i = 31 - __clz(mask);
            mask &= ~(1u << i);
            if (i == 0) {
                if (t <= last_end) continue;
                if (N == 1) { ++count; last_end = t; break; }
            } else {
                // Prune entries of state i-1 that no later event can pair with.
                const int p = i - 1;
                while (ql[p] > 0 && t - buf[p * SYNFIRE_PTPE_LIST_CAP + qh[p]] > high[p]) {
                    qh[p] = (qh[p] + 1) % SYNFIRE_PTPE_LIST_CAP;
                    --ql[p];
                }
                if (!(ql[p] > 0 && t - buf[p * SYNFIRE_PTPE_LIST_CAP + qh[p]] > low[p])) continue;
                if (i == N - 1) {
                    ++count;
                    last_end = t;
                    for (int s = 0; s < S; ++s) { qh[s] = 0; ql[s] = 0; }
                    break;
                }
            }
            // Append t to state i's list, first pruning what t already proves stale.
            while (ql[i] > 0 && t - buf[i * SYNFIRE_PTPE_LIST_CAP + qh[i]] > high[i]) {
                qh[i] = (qh[i] + 1) % SYNFIRE_PTPE_LIST_CAP;
                --ql[i];
            }
            if (ql[i] == SYNFIRE_PTPE_LIST_CAP) {
                *out = SYNFIRE_COUNT_OVERFLOW;
                return;
            }
            buf[i * SYNFIRE_PTPE_LIST_CAP + (qh[i] + ql[i]) % SYNFIRE_PTPE_LIST_CAP] = t;
            ++ql[i];
        }
    }
    *out = count;
}

#define SYNFIRE_EPISODE_KERNELS(NN)                                                           \
    extern "C" __global__ void episodes_preelim_n##NN(                                        \
        const double* __restrict__ times, const u32* __restrict__ positions,                  \
        const u32* __restrict__ offsets, const double* __restrict__ hi,                       \
        const u32* __restrict__ types, const u32* __restrict__ ivs, u32 n_cands,              \
        u32* __restrict__ out) {                                                              \
        const u32 c = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (c >= n_cands) return;                                                             \
        preelim_one<NN>(times, positions, offsets, hi, types + (size_t)c * NN,                \
                        ivs + (size_t)c * (NN > 1 ? NN - 1 : 0), out + c);                    \
    }                                                                                         \
    extern "C" __global__ void episodes_ptpe_n##NN(                                           \
        const double* __restrict__ times, const u32* __restrict__ positions,                  \
        const u32* __restrict__ offsets, const double* __restrict__ lo,                       \
        const double* __restrict__ hi, const u32* __restrict__ types,                         \
        const u32* __restrict__ ivs, u32 n_cands, u32* __restrict__ out) {                    \
        const u32 c = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (c >= n_cands) return;                                                             \
        ptpe_one<NN>(times, positions, offsets, lo, hi, types + (size_t)c * NN,               \
                     ivs + (size_t)c * (NN > 1 ? NN - 1 : 0), out + c);                       \
    }

SYNFIRE_EPISODE_KERNELS(1)
SYNFIRE_EPISODE_KERNELS(2)
SYNFIRE_EPISODE_KERNELS(3)
SYNFIRE_EPISODE_KERNELS(4)
SYNFIRE_EPISODE_KERNELS(5)
SYNFIRE_EPISODE_KERNELS(6)
SYNFIRE_EPISODE_KERNELS(7)
SYNFIRE_EPISODE_KERNELS(8)
SYNFIRE_EPISODE_KERNELS(9)
SYNFIRE_EPISODE_KERNELS(10)
SYNFIRE_EPISODE_KERNELS(11)
SYNFIRE_EPISODE_KERNELS(12)
SYNFIRE_EPISODE_KERNELS(13)
SYNFIRE_EPISODE_KERNELS(14)
SYNFIRE_EPISODE_KERNELS(15)
SYNFIRE_EPISODE_KERNELS(16)
