// Frequent-episode counting kernels (compiled at run time by NVRTC for the device's arch).
//
// Layout (uploaded once per device per mining run): the event stream grouped by type, CSR:
//   offsets[type .. type+1] indexes times[] (f64 seconds, non-decreasing within a type).
// Candidates (uploaded per batch): types[c * N + i], interval ids ivs[c * (N-1) + i] into the
// interval table lo[], hi[] (f64 seconds). PTPE: one thread counts one candidate (paper §5.1).
// MTPE: one thread per (candidate, time segment) counts, then one thread per candidate merges.
//
// Each thread merges its own types' lists by time (events of other types never change an
// episode's state), then runs the state machine. The host sorts each batch by (types,
// intervals), so the threads of a warp mostly walk the same merged sequence. Times stay f64 and every delay is
// computed as t_next - t_prev in f64 and compared with lo < d <= hi, exactly as the CPU
// reference (src/episode/count.rs), so counts are identical, not approximately equal.
// lo < 0 marks an interval that admits a zero delay ([0, x]): it fits between different types
// only, in the stream's order of equal times (by type id), which the merge reproduces.
//
// References: Cao et al., "Towards real-time data mining of spike train datasets using GPUs":
// Algorithm 1 (exact counting), Algorithm 3 (PreElim), Observation 1, Theorem 1.

#define SYNFIRE_MAX_GPU_NODES 16
// Capacity of each PTPE per-state list. A list that would exceed it makes the thread stop and
// report OVERFLOW; the host then recounts that candidate exactly on the CPU.
#define SYNFIRE_PTPE_LIST_CAP 32
#define SYNFIRE_COUNT_OVERFLOW 0xFFFFFFFFu
// Completion times (a) an MTPE segment tuple records; mtpe::RECORDED on the host.
#define SYNFIRE_MTPE_RECORDED 4

#include "common.cuh"

typedef unsigned int u32;

// Index of the first time > `after` in times[lo, hi) (non-decreasing), by binary search.
__device__ __forceinline__ u32 first_after(const double* __restrict__ times, u32 lo, u32 hi,
                                           double after) {
    while (lo < hi) {
        const u32 mid = lo + (hi - lo) / 2;
        if (times[mid] <= after) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// The candidate's distinct types merged by time. Every per-slot array is indexed only by
// compile-time constants after unrolling, so it lives in registers. Slots >= k stay at +inf.
// Ties between slots are taken by type id: the stream's order of equal times, which a gap
// that admits a zero delay depends on (src/episode/model.rs).
template <int N>
struct Merge {
    u32 head[N];
    u32 end[N];
    double next_t[N];
    u32 mask[N];
    u32 ty[N];

    // Positions each type's list at its first event with time > `after` (-inf: the start).
    __device__ __forceinline__ void init(const u32* __restrict__ offsets,
                                         const double* __restrict__ times,
                                         const u32* __restrict__ types,
                                         double after) {
        u32 slot_type[N];
        int k = 0;
#pragma unroll
        for (int j = 0; j < N; ++j) { mask[j] = 0; next_t[j] = SYNFIRE_INF; head[j] = 0; end[j] = 0; slot_type[j] = 0xFFFFFFFFu; }
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
                        end[j] = offsets[ty + 1];
                        head[j] = after == SYNFIRE_NEG_INF
                                      ? offsets[ty]
                                      : first_after(times, offsets[ty], end[j], after);
                        next_t[j] = head[j] < end[j] ? times[head[j]] : SYNFIRE_INF;
                    }
                    mask[j] |= 1u << i;
                }
            }
            if (found < 0) ++k;
        }
#pragma unroll
        for (int j = 0; j < N; ++j) ty[j] = slot_type[j];
    }

    // The next event's time and state mask; false when every list is exhausted.
    __device__ __forceinline__ bool next(const double* __restrict__ times, double* t, u32* m) {
        int best = 0;
        double bt = next_t[0];
        u32 bty = ty[0];
#pragma unroll
        for (int j = 1; j < N; ++j) {
            if (next_t[j] < bt || (next_t[j] == bt && ty[j] < bty)) {
                bt = next_t[j];
                bty = ty[j];
                best = j;
            }
        }
        if (bt == SYNFIRE_INF) return false;
#pragma unroll
        for (int j = 0; j < N; ++j) {
            if (j == best) {
                *m = mask[j];
                const u32 h = ++head[j];
                next_t[j] = h < end[j] ? times[h] : SYNFIRE_INF;
            }
        }
        *t = bt;
        return true;
    }
};

// The PreElim state machine (Algorithm 3 with Observation 1): per state the latest time and
// the latest time strictly before it; same interface as Machine below, never overflows. Its
// completions are those of the exact machine on the relaxed episode (gaps (0, high], or
// [0, high] where the gap admits a zero delay), so the MTPE segment/merge scheme applies to it
// unchanged (src/episode/mtpe.rs).
template <int N>
struct PreElimMachine {
    double high[N];
    bool zero_fits[N];
    double last[N], before[N];
    double last_end;

    __device__ __forceinline__ void init(const double* __restrict__ lo,
                                         const double* __restrict__ hi,
                                         const u32* __restrict__ types,
                                         const u32* __restrict__ ivs) {
#pragma unroll
        for (int i = 0; i < N; ++i) {
            high[i] = i + 1 < N ? hi[ivs[i]] : 0.0;
            zero_fits[i] = i + 1 < N && lo[ivs[i]] < 0.0 && types[i] != types[i + 1];
        }
        reset(SYNFIRE_NEG_INF);
    }

    __device__ __forceinline__ void reset(double at) {
#pragma unroll
        for (int i = 0; i < N; ++i) { last[i] = SYNFIRE_NEG_INF; before[i] = SYNFIRE_NEG_INF; }
        last_end = at;
    }

    // States from N-1 down to 0 (Algorithm 3 line 3), each with a compile-time index.
    __device__ __forceinline__ int step(double t, u32 mask) {
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {
            if (!(mask & (1u << i))) continue;
            if (i == 0) {
                if (t <= last_end) continue;
                if (N == 1) { last_end = t; return 1; }
                if (t > last[0]) { before[0] = last[0]; last[0] = t; }
                continue;
            }
            // The latest entry, or the latest strictly before t where a zero delay never fits.
            const double prev = (zero_fits[i - 1] || last[i - 1] < t) ? last[i - 1] : before[i - 1];
            if (t - prev > high[i - 1]) continue;
            if (i == N - 1) { reset(t); return 1; }
            if (t > last[i]) { before[i] = last[i]; last[i] = t; }
        }
        return 0;
    }
};

template <int N>
__device__ void preelim_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                            const double* __restrict__ lo, const double* __restrict__ hi,
                            const u32* __restrict__ types, const u32* __restrict__ ivs,
                            u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, times, types, SYNFIRE_NEG_INF);
    PreElimMachine<N> mc;
    mc.init(lo, hi, types, ivs);
    u32 count = 0;
    double t = 0.0;
    u32 mask = 0;
    while (m.next(times, &t, &mask)) count += mc.step(t, mask);
    *out = count;
}

// The exact state machine of Algorithm 1 (per-state lists with pruning), the same one as
// `ExactMachine` in src/episode/count.rs. After a completion at T its state is a function of T
// alone (empty lists, last_end = T); reset(T) puts it there. Lists live in fixed ring buffers
// in local memory; a list that would outgrow SYNFIRE_PTPE_LIST_CAP makes step() report an
// overflow and the host recounts that candidate exactly on the CPU.
enum StepResult { STEP_NONE = 0, STEP_COMPLETED = 1, STEP_OVERFLOW = 2 };

template <int N>
struct Machine {
    static constexpr int S = N > 1 ? N - 1 : 1;  // states that keep lists: 0 .. N-2
    static constexpr int CAP = SYNFIRE_PTPE_LIST_CAP;
    double low[S], high[S];
    int qh[S], ql[S];
    double buf[S * CAP];  // ring buffers; the only array indexed at run time (local memory)
    double last_end;

    __device__ __forceinline__ void init(const double* __restrict__ lo,
                                         const double* __restrict__ hi,
                                         const u32* __restrict__ types,
                                         const u32* __restrict__ ivs) {
#pragma unroll
        for (int s2 = 0; s2 < S; ++s2) {
            // A zero delay never fits between two events of one type (Interval::gap_low).
            const double l = s2 + 1 < N ? lo[ivs[s2]] : 0.0;
            low[s2] = (l < 0.0 && s2 + 1 < N && types[s2] == types[s2 + 1]) ? 0.0 : l;
            high[s2] = s2 + 1 < N ? hi[ivs[s2]] : 0.0;
        }
        reset(SYNFIRE_NEG_INF);
    }

    __device__ __forceinline__ void reset(double at) {
#pragma unroll
        for (int s2 = 0; s2 < S; ++s2) { qh[s2] = 0; ql[s2] = 0; }
        last_end = at;
    }

    // Feeds the event at t whose type is at the states in `mask`; states N-1 down to 0.
    __device__ __forceinline__ int step(double t, u32 mask) {
#pragma unroll
        for (int i = N - 1; i >= 0; --i) {
            if (!(mask & (1u << i))) continue;
            if (i == 0) {
                if (t <= last_end) continue;
                if (N == 1) { last_end = t; return STEP_COMPLETED; }
            } else {
                // Prune entries of state i-1 that no later event can pair with.
                const int p = i - 1;
                while (ql[p] > 0 && t - buf[p * CAP + qh[p]] > high[p]) {
                    qh[p] = (qh[p] + 1) % CAP;
                    --ql[p];
                }
                if (!(ql[p] > 0 && t - buf[p * CAP + qh[p]] > low[p])) continue;
                if (i == N - 1) { reset(t); return STEP_COMPLETED; }
            }
            if (i < S) {
                // Append t to state i's list, first pruning what t already proves stale.
                while (ql[i] > 0 && t - buf[i * CAP + qh[i]] > high[i]) {
                    qh[i] = (qh[i] + 1) % CAP;
                    --ql[i];
                }
                if (ql[i] == CAP) return STEP_OVERFLOW;
                buf[i * CAP + (qh[i] + ql[i]) % CAP] = t;
                ++ql[i];
            }
        }
        return STEP_NONE;
    }
};

template <int N>
__device__ void ptpe_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                         const double* __restrict__ lo, const double* __restrict__ hi,
                         const u32* __restrict__ types, const u32* __restrict__ ivs,
                         u32* __restrict__ out) {
    Merge<N> m;
    m.init(offsets, times, types, SYNFIRE_NEG_INF);
    Machine<N> mc;
    mc.init(lo, hi, types, ivs);
    u32 count = 0;
    double t = 0.0;
    u32 mask = 0;
    while (m.next(times, &t, &mask)) {
        const int r = mc.step(t, mask);
        if (r == STEP_OVERFLOW) { *out = SYNFIRE_COUNT_OVERFLOW; return; }
        count += r;
    }
    *out = count;
}

// ---- MTPE (paper §5.1, Figs. 5-7, with the exact in-order merge of
// docs/adr/0001-mtpe-exact-merge.md; CPU reference: src/episode/mtpe.rs) ----

// W' = sum(high) * (1 + 1e-6): a safe bound on an occurrence's span, seconds.
template <int N>
__device__ __forceinline__ double mtpe_lookback(const double* __restrict__ hi,
                                                const u32* __restrict__ ivs) {
    double w = 0.0;
#pragma unroll
    for (int i = 0; i + 1 < N; ++i) w = __dadd_rn(w, hi[ivs[i]]);
    return __dmul_rn(w, 1.0 + 1e-6);
}

// S_p = tau - W' - |tau| * 1e-14, rounded exactly as mtpe::free_start (no FMA contraction).
__device__ __forceinline__ double mtpe_free_start(double tau, double w) {
    return __dsub_rn(__dsub_rn(tau, w), __dmul_rn(fabs(tau), 1e-14));
}

// Counting step for (candidate c, segment p): the free machine reset at S_p runs over
// (S_p, tau_{p+1}] and records the tuple (a[0..K), count, b) of its completions in
// (tau_p, tau_{p+1}].
template <int N, class M>
__device__ void mtpe_count_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                               const double* __restrict__ lo, const double* __restrict__ hi,
                               const u32* __restrict__ types, const u32* __restrict__ ivs,
                               double tau, double tau_next, u32* __restrict__ out_count,
                               double* __restrict__ out_first, double* __restrict__ out_last) {
    const double start = mtpe_free_start(tau, mtpe_lookback<N>(hi, ivs));
    Merge<N> m;
    m.init(offsets, times, types, start);
    M mc;
    mc.init(lo, hi, types, ivs);
    mc.reset(start);
    u32 count = 0;
    double first[SYNFIRE_MTPE_RECORDED];
#pragma unroll
    for (int k = 0; k < SYNFIRE_MTPE_RECORDED; ++k) first[k] = SYNFIRE_INF;
    double last = SYNFIRE_NEG_INF;
    double t = 0.0;
    u32 mask = 0;
    while (m.next(times, &t, &mask)) {
        if (t > tau_next) break;
        const int r = mc.step(t, mask);
        if (r == STEP_OVERFLOW) { count = SYNFIRE_COUNT_OVERFLOW; break; }
        if (r == STEP_COMPLETED && t > tau) {
#pragma unroll
            for (int k = 0; k < SYNFIRE_MTPE_RECORDED; ++k) if (k == (int)count) first[k] = t;
            ++count;
            last = t;
        }
    }
    *out_count = count;
#pragma unroll
    for (int k = 0; k < SYNFIRE_MTPE_RECORDED; ++k) out_first[k] = first[k];
    *out_last = last;
}

// Merging step for candidate c: segments in order; the fast path adds the free machine's tuple
// when the true last completion is at or before S_p, otherwise a catch-up machine restarts
// from that completion until it meets a recorded a[k] (same time, same state from then on) or
// the segment ends.
template <int N, class M>
__device__ void mtpe_merge_one(const double* __restrict__ times, const u32* __restrict__ offsets,
                               const double* __restrict__ lo, const double* __restrict__ hi,
                               const u32* __restrict__ types, const u32* __restrict__ ivs,
                               const double* __restrict__ bounds, u32 r_segs,
                               const u32* __restrict__ seg_count,
                               const double* __restrict__ seg_first,
                               const double* __restrict__ seg_last, u32* __restrict__ out) {
    const double w = mtpe_lookback<N>(hi, ivs);
    u32 total = 0;
    double last = SYNFIRE_NEG_INF;
    for (u32 p = 0; p < r_segs; ++p) {
        const u32 cnt = seg_count[p];
        if (cnt == SYNFIRE_COUNT_OVERFLOW) { *out = SYNFIRE_COUNT_OVERFLOW; return; }
        const double tau = bounds[p];
        const double tau_next = bounds[p + 1];
        if (last <= mtpe_free_start(tau, w)) {
            total += cnt;
            if (cnt > 0) last = seg_last[p];
            continue;
        }
        Merge<N> m;
        m.init(offsets, times, types, last);
        M mc;
        mc.init(lo, hi, types, ivs);
        mc.reset(last);
        const u32 recorded = cnt < SYNFIRE_MTPE_RECORDED ? cnt : SYNFIRE_MTPE_RECORDED;
        const double* a = seg_first + (size_t)p * SYNFIRE_MTPE_RECORDED;
        u32 k = 0, own = 0;
        bool joined = false;
        double t = 0.0;
        u32 mask = 0;
        while (m.next(times, &t, &mask)) {
            if (t > tau_next) break;
            const int r = mc.step(t, mask);
            if (r == STEP_OVERFLOW) { *out = SYNFIRE_COUNT_OVERFLOW; return; }
            if (r != STEP_COMPLETED) continue;
            ++own;
            last = t;
            while (k < recorded && a[k] < t) ++k;
            if (k < recorded && a[k] == t) {
                total += own + (cnt - k - 1);
                last = seg_last[p];
                joined = true;
                break;
            }
        }
        if (!joined) total += own;
    }
    *out = total;
}

#define SYNFIRE_EPISODE_KERNELS(NN)                                                           \
    extern "C" __global__ void episodes_preelim_n##NN(                                        \
        const double* __restrict__ times, const u32* __restrict__ offsets,                    \
        const double* __restrict__ lo, const double* __restrict__ hi,                         \
        const u32* __restrict__ types, const u32* __restrict__ ivs, u32 n_cands,              \
        u32* __restrict__ out) {                                                              \
        const u32 c = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        if (c >= n_cands) return;                                                             \
        preelim_one<NN>(times, offsets, lo, hi, types + (size_t)c * NN,                       \
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
    }                                                                                         \
    SYNFIRE_MTPE_KERNELS(NN, mtpe, Machine<NN>)                                                \
    SYNFIRE_MTPE_KERNELS(NN, preelim_mtpe, PreElimMachine<NN>)

// MTPE kernels for one machine: counting (thread g -> candidate g % n_cands, segment
// g / n_cands, so a warp holds neighbouring candidates, sorted by types by the host, in one
// segment and reads the same events, as PTPE's warps do) and merging (thread per candidate).
// Tuples are stored candidate-major: index c * r_segs + p.
#define SYNFIRE_MTPE_KERNELS(NN, NAME, MACHINE)                                                \
    extern "C" __global__ void episodes_##NAME##_count_n##NN(                                 \
        const double* __restrict__ times, const u32* __restrict__ offsets,                    \
        const double* __restrict__ lo, const double* __restrict__ hi,                         \
        const u32* __restrict__ types, const u32* __restrict__ ivs, u32 n_cands,              \
        const double* __restrict__ bounds, u32 r_segs, u32* __restrict__ seg_count,           \
        double* __restrict__ seg_first, double* __restrict__ seg_last) {                      \
        const size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                       \
        const size_t c = g % n_cands, p = g / n_cands;                                        \
        if (p >= r_segs) return;                                                              \
        const size_t o = c * r_segs + p;                                                      \
        mtpe_count_one<NN, MACHINE>(times, offsets, lo, hi, types + c * NN,                   \
                                    ivs + c * (NN > 1 ? NN - 1 : 0), bounds[p], bounds[p + 1], \
                                    seg_count + o, seg_first + o * SYNFIRE_MTPE_RECORDED,     \
                                    seg_last + o);                                            \
    }                                                                                         \
    extern "C" __global__ void episodes_##NAME##_merge_n##NN(                                 \
        const double* __restrict__ times, const u32* __restrict__ offsets,                    \
        const double* __restrict__ lo, const double* __restrict__ hi,                         \
        const u32* __restrict__ types, const u32* __restrict__ ivs, u32 n_cands,              \
        const double* __restrict__ bounds, u32 r_segs, const u32* __restrict__ seg_count,     \
        const double* __restrict__ seg_first, const double* __restrict__ seg_last,            \
        u32* __restrict__ out) {                                                              \
        const size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;                       \
        if (c >= n_cands) return;                                                             \
        const size_t base = c * r_segs;                                                       \
        mtpe_merge_one<NN, MACHINE>(times, offsets, lo, hi, types + c * NN,                   \
                                    ivs + c * (NN > 1 ? NN - 1 : 0), bounds, r_segs,          \
                                    seg_count + base, seg_first + base * SYNFIRE_MTPE_RECORDED, \
                                    seg_last + base, out + c);                                \
    }

// One program per N when compiled with -DSYNFIRE_ONLY_N=n (the host compiles the 16 in
// parallel and loads each as its own module), all of them otherwise.
#ifndef SYNFIRE_ONLY_N
#define SYNFIRE_ONLY_N 0
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 1
SYNFIRE_EPISODE_KERNELS(1)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 2
SYNFIRE_EPISODE_KERNELS(2)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 3
SYNFIRE_EPISODE_KERNELS(3)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 4
SYNFIRE_EPISODE_KERNELS(4)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 5
SYNFIRE_EPISODE_KERNELS(5)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 6
SYNFIRE_EPISODE_KERNELS(6)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 7
SYNFIRE_EPISODE_KERNELS(7)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 8
SYNFIRE_EPISODE_KERNELS(8)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 9
SYNFIRE_EPISODE_KERNELS(9)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 10
SYNFIRE_EPISODE_KERNELS(10)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 11
SYNFIRE_EPISODE_KERNELS(11)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 12
SYNFIRE_EPISODE_KERNELS(12)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 13
SYNFIRE_EPISODE_KERNELS(13)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 14
SYNFIRE_EPISODE_KERNELS(14)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 15
SYNFIRE_EPISODE_KERNELS(15)
#endif
#if SYNFIRE_ONLY_N == 0 || SYNFIRE_ONLY_N == 16
SYNFIRE_EPISODE_KERNELS(16)
#endif
