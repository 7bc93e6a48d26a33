// Frequent-episode counting kernels (compiled at run time by NVRTC for the device's arch).
//
// Layout (uploaded once per device per mining run): the event stream grouped by type, CSR:
//   offsets[type .. type+1] indexes times[] (f64 seconds, non-decreasing within a type).
// Candidates (uploaded per batch): types[c * N + i], interval ids ivs[c * (N-1) + i] into the
// interval table lo[], hi[] (f64 seconds). One thread counts one candidate (PTPE, paper §5.1).
//
// Each thread merges its own types' lists by time (events of other types never change an
// episode's state), then runs the state machine. The host sorts each batch by (types,
// intervals), so the threads of a warp mostly walk the same merged sequence. Times stay f64 and every delay is
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

#define SYNFIRE_POS_INF (__longlong_as_double(0x7FF0000000000000ULL))

// The candidate's distinct types merged by time. Every per-slot array is indexed only by
// compile-time constants after unrolling, so it lives in registers. Slots >= k stay at +inf.
// Ties between slots are taken in slot order: counts do not depend on the order of equal-time
// events (a zero delay never fits, and a completion blocks starts at its own end time).
template <int N>
struct Merge {
    u32 head[N];
    u32 end[N];
    double next_t[N];
    u32 mask[N];

    __device__ __forceinline__ void init(const u32* __restrict__ offsets,
                                         const double* __restrict__ times,
                                         const u32* __restrict__ types) {
        u32 slot_type[N];
        int k = 0;
#pragma unroll
        for (int j = 0; j < N; ++j) { mask[j] = 0; next_t[j] = SYNFIRE_POS_INF; head[j] = 0; end[j] = 0; slot_type[j] = 0xFFFFFFFFu; }
#pragma unroll
        for (int i = 0; i < N; ++i) {
            const u32 ty = types[i];
            int found = -1;
#pragma unroll
            for (int j = 0; j < N; ++j) if (found < 0 && j < k && slot_type[j] == ty) found = j;
            const int slot = found >= 0 ? found : k;
#pragma unroll
            for (int j = 0; j < N; ++j) {
                if (j == slot) {
                    if (found < 0) {
                        slot_type[j] = ty;
                        head[j] = offsets[ty];
                        end[j] = offsets[ty + 1];
                        next_t[j] = head[j] < end[j] ? times[head[j]] : SYNFIRE_POS_INF;
                    }
                    mask[j] |= 1u << i;
                }
            }
            if (found < 0) ++k;
        }
    }

    // The next event's time and state mask; false when every list is exhausted.
    __device__ __forceinline__ bool next(const double* __restrict__ times, double* t, u32* m) {
        int best = 0;
        double bt = next_t[0];
#pragma unroll
        for (int j = 1; j < N; ++j) if (next_t[j] < bt) { bt = next_t[j]; best = j; }
        if (bt == SYNFIRE_POS_INF) return false;
#pragma unroll
        for (int j = 0; j < N; ++j) {
            if (j == best) {
                *m = mask[j];
                const u32 h = ++head[j];
                next_t[j] = h < end[j] ? times[h] : SYNFIRE_POS_INF;
            }
        }
        *t = bt;
        return true;
    }
};

template <int N>
__device__ void preelim_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                            const double* __restrict__ hi, const u32* __restrict__ types,
                            const u32* __restrict__ ivs, u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, times, types);
    double high[N];
    double last[N], before[N];
#pragma unroll
    for (int i = 0; i < N; ++i) {
        high[i] = i + 1 < N ? hi[ivs[i]] : 0.0;
        last[i] = SYNFIRE_NEG_INF;
        before[i] = SYNFIRE_NEG_INF;
    }
    u32 count = 0;
    double last_end = SYNFIRE_NEG_INF;
    double t;
    u32 mask;
    while (m.next(times, &t, &mask)) {
        // States from N-1 down to 0 (Algorithm 3 line 3), each with a compile-time index.
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {
            if (!(mask & (1u << i))) continue;
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
#pragma unroll
                for (int s2 = 0; s2 < N; ++s2) { last[s2] = SYNFIRE_NEG_INF; before[s2] = SYNFIRE_NEG_INF; }
                break;
            }
            if (t > last[i]) { before[i] = last[i]; last[i] = t; }
        }
    }
    *out = count;
}

template <int N>
__device__ void ptpe_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                         const double* __restrict__ lo, const double* __restrict__ hi,
                         const u32* __restrict__ types, const u32* __restrict__ ivs,
                         u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, times, types);
    constexpr int S = N > 1 ? N - 1 : 1;  // states that keep lists: 0 .. N-2
    constexpr int CAP = SYNFIRE_PTPE_LIST_CAP;
    double low[S], high[S];
    int qh[S], ql[S];
#pragma unroll
    for (int s2 = 0; s2 < S; ++s2) {
        low[s2] = s2 + 1 < N ? lo[ivs[s2]] : 0.0;
        high[s2] = s2 + 1 < N ? hi[ivs[s2]] : 0.0;
        qh[s2] = 0;
        ql[s2] = 0;
    }
    double buf[S * CAP];  // ring buffers; the only array indexed at run time (local memory)
    u32 count = 0;
    double last_end = SYNFIRE_NEG_INF;
    double t;
    u32 mask;
    while (m.next(times, &t, &mask)) {
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {
            if (!(mask & (1u << i))) continue;
            if (i == 0) {
                if (t <= last_end) continue;
                if (N == 1) { ++count; last_end = t; break; }
            } else {
                // Prune entries of state i-1 that no later event can pair with.
                const int p = i - 1;
                while (ql[p] > 0 && t - buf[p * CAP + qh[p]] > high[p]) {
                    qh[p] = (qh[p] + 1) % CAP;
                    --ql[p];
                }
                if (!(ql[p] > 0 && t - buf[p * CAP + qh[p]] > low[p])) continue;
                if (i == N - 1) {
                    ++count;
                    last_end = t;
#pragma unroll
                    for (int s2 = 0; s2 < S; ++s2) { qh[s2] = 0; ql[s2] = 0; }
                    break;
                }
            }
            if (i < S) {
                // Append t to state i's list, first pruning what t already proves stale.
                while (ql[i] > 0 && t - buf[i * CAP + qh[i]] > high[i]) {
                    qh[i] = (qh[i] + 1) % CAP;
                    --ql[i];
                }
                if (ql[i] == CAP) {
                    *out = SYNFIRE_COUNT_OVERFLOW;
                    return;
                }
                buf[i * CAP + (qh[i] + ql[i]) % CAP] = t;
                ++ql[i];
            }
        }
    }
    *out = count;
}

#define SYNFIRE_EPISODE_KERNELS(NN)                                                           \
    extern "C" __global__ void episodes_preelim_n##NN(                                        \
        const double* __restrict__ times, const u32* __restrict__ offsets,                    \
        const double* __restrict__ hi, const u32* __restrict__ types,                         \
        const u32* __restrict__ ivs, u32 n_cands, u32* __restrict__ out) {                    \
        const u32 c = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (c >= n_cands) return;                                                             \
        preelim_one<NN>(times, offsets, hi, types + (size_t)c * NN,                           \
                        ivs + (size_t)c * (NN > 1 ? NN - 1 : 0), out + c);                    \
    }                                                                                         \
    extern "C" __global__ void episodes_ptpe_n##NN(                                           \
        const double* __restrict__ times, const u32* __restrict__ offsets,                    \
        const double* __restrict__ lo, const double* __restrict__ hi,                         \
        const u32* __restrict__ types, const u32* __restrict__ ivs, u32 n_cands,              \
        u32* __restrict__ out) {                                                              \
        const u32 c = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (c >= n_cands) return;                                                             \
        ptpe_one<NN>(times, offsets, lo, hi, types + (size_t)c * NN,                          \
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
