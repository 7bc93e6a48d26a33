// Surrogates generated on the device from the uploaded recording, bit for bit the ones the
// host makes (`src/significance/surrogate.rs`, `Surrogates::unit_train`): the same
// Philox4x32-10 draws (Salmon et al., SC '11) addressed by the same counters
// `[spike, unit, surrogate, tag | (surrogate >> 32) << 8]` under `key = seed`, the same
// IEEE-754 double arithmetic in the same order (explicit round-to-nearest intrinsics, so the
// compiler cannot contract a multiply and an add into an FMA the host does not do), and the
// same sorted result per unit (the sorted multiset is unique, so any correct sort agrees).
//
// Layout: the recording grouped by unit (CSR): `offsets [units + 1]`, `original [events]`
// (each unit's times sorted). The surrogate is written to `out [events]` in the same layout.
//
// Hybrid trains (significance's `guided` test, `src/device/episodes/hybrids.rs`): many
// surrogates of a few units at once. Segment `g = a · per + jj` of `out` (`seg_off [segs + 1]`)
// is slot `a`'s surrogate `j0 + jj`; slot `a` is the unit `unit[a]` (its Philox unit id, the
// unit's index in the recording; `a` itself where `unit` is null) whose sorted times start at
// `original[src_off[a]]`. With `per` 1, `unit` null and `seg_off` = `src_off` = the CSR
// offsets, the same kernels make one surrogate of the whole recording (`trains_dead_time` is
// how the device makes `dither-dead-time` surrogates of the counted stream).

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

#define TAG_DITHER 0u
#define TAG_SHIFT 2u

#include "common.cuh"

struct Words { unsigned int w[4]; };

__device__ __forceinline__ Words philox4x32_10(unsigned int c0, unsigned int c1, unsigned int c2,
                                               unsigned int c3, unsigned int k0, unsigned int k1) {
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        unsigned long long p0 = (unsigned long long)PHILOX_M0 * c0;
        unsigned long long p1 = (unsigned long long)PHILOX_M1 * c2;
        unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
        unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
        unsigned int n0 = hi1 ^ c1 ^ k0;
        unsigned int n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
    }
    Words r; r.w[0] = c0; r.w[1] = c1; r.w[2] = c2; r.w[3] = c3;
    return r;
}

// The first double of the block, as `philox::uniform_pair(...)[0]`: words (0, 1), 53 bits.
__device__ __forceinline__ double first_uniform(unsigned int spike, unsigned int unit,
                                                unsigned long long s, unsigned int tag,
                                                unsigned int k0, unsigned int k1) {
    Words w = philox4x32_10(spike, unit, (unsigned int)s,
                            tag | ((unsigned int)(s >> 32) << 8), k0, k1);
    unsigned long long bits = (((unsigned long long)w.w[0] << 32) | w.w[1]) >> 11;
    return __dmul_rn((double)bits, 1.0 / 9007199254740992.0);
}

// The unit of event `e` (binary search over the CSR offsets).
__device__ __forceinline__ unsigned int unit_of(const unsigned int* offsets, unsigned int units,
                                                unsigned int e) {
    unsigned int lo = 0, hi = units;
    while (hi - lo > 1) {
        unsigned int mid = (lo + hi) / 2;
        if (offsets[mid] <= e) lo = mid; else hi = mid;
    }
    return lo;
}

// `lo + u (hi − lo)` kept within [lo, hi] (host: `draw`).
__device__ __forceinline__ double drawn(double lo, double hi, double u) {
    double v = __dadd_rn(lo, __dmul_rn(u, __dsub_rn(hi, lo)));
    return fmin(fmax(v, lo), hi);
}

// Spike `i` (at `t`) of unit `u` dithered in surrogate `s`: uniform within
// [max(t − Δ, T0), min(t + Δ, T1)] (host: `Surrogates::unit_train`, `Dither`).
__device__ __forceinline__ double dithered(double t, unsigned int i, unsigned int u,
                                           unsigned long long s, double delta, double t0,
                                           double t1, unsigned int k0, unsigned int k1) {
    double lo = fmax(__dsub_rn(t, delta), t0);
    double hi = fmin(__dadd_rn(t, delta), t1);
    return drawn(lo, hi, first_uniform(i, u, s, TAG_DITHER, k0, k1));
}

// A spike at `t` of unit `u` shifted in surrogate `s`: by the unit's one offset
// `−Δ + 2Δu`, wrapped circularly into [T0, T1) (host: `wrap_shift`, `rem_euclid`).
__device__ __forceinline__ double shifted(double t, unsigned int u, unsigned long long s,
                                          double delta, double t0, double t1, unsigned int k0,
                                          unsigned int k1) {
    double len = __dsub_rn(t1, t0);
    if (!(len > 0.0)) return t;
    double x = first_uniform(0u, u, s, TAG_SHIFT, k0, k1);
    double shift = __dadd_rn(-delta, __dmul_rn(__dmul_rn(2.0, delta), x));
    double y = __dadd_rn(__dsub_rn(t, t0), shift);
    double r = fmod(y, len);
    if (r < 0.0) r = __dadd_rn(r, fabs(len));
    double v = __dadd_rn(t0, r);
    return (v >= t1) ? t0 : v;
}

// Uniform dithering: each spike to `lo + u (hi − lo)` clamped, `lo = max(t − Δ, T0)`,
// `hi = min(t + Δ, T1)` (host: `draw`).
extern "C" __global__ void surrogate_dither(const unsigned int* offsets, unsigned int units,
                                            const double* original, double* out,
                                            unsigned int events, double delta, double t0,
                                            double t1, unsigned long long s, unsigned int k0,
                                            unsigned int k1) {
    unsigned int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= events) return;
    unsigned int u = unit_of(offsets, units, e);
    out[e] = dithered(original[e], e - offsets[u], u, s, delta, t0, t1, k0, k1);
}

// Train shifting: every spike of a unit by one offset `−Δ + 2Δu` (u drawn per unit), wrapped
// circularly into `[T0, T1)` (host: `wrap_shift`, `rem_euclid`).
extern "C" __global__ void surrogate_shift(const unsigned int* offsets, unsigned int units,
                                           const double* original, double* out,
                                           unsigned int events, double delta, double t0,
                                           double t1, unsigned long long s, unsigned int k0,
                                           unsigned int k1) {
    unsigned int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= events) return;
    unsigned int u = unit_of(offsets, units, e);
    out[e] = shifted(original[e], u, s, delta, t0, t1, k0, k1);
}

// One thread per unit: sorts the unit's times ascending in place. A shifted train is a
// rotation of a sorted one: rotated back first (three reversals, O(n)); then insertion sort,
// O(n + inversions), which finishes a dithered train (spikes move by at most 2Δ).
__device__ void reverse(double* x, unsigned int a, unsigned int b) {
    while (a + 1 < b) {
        --b;
        double t = x[a]; x[a] = x[b]; x[b] = t;
        ++a;
    }
}

extern "C" __global__ void surrogate_sort_units(const unsigned int* offsets, unsigned int units,
                                                double* x, int rotated) {
    unsigned int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= units) return;
    unsigned int a = offsets[u], b = offsets[u + 1];
    if (b - a < 2) return;
    if (rotated) {
        unsigned int k = a + 1;
        while (k < b && !(x[k] < x[k - 1])) ++k;
        if (k < b) {
            reverse(x, a, k);
            reverse(x, k, b);
            reverse(x, a, b);
        }
    }
    for (unsigned int i = a + 1; i < b; ++i) {
        double v = x[i];
        unsigned int j = i;
        while (j > a && x[j - 1] > v) {
            x[j] = x[j - 1];
            --j;
        }
        x[j] = v;
    }
}

// Element `e` of the hybrid trains: its segment's slot `a`, surrogate `s` and position `i`.
__device__ __forceinline__ void train_element(const unsigned int* seg_off, unsigned int segs,
                                              unsigned int per, unsigned long long j0,
                                              unsigned int e, unsigned int* a,
                                              unsigned long long* s, unsigned int* i,
                                              unsigned int* n) {
    unsigned int g = synfire_item_of(seg_off, segs, e);
    *a = g / per;
    *s = j0 + (g - *a * per);
    *i = e - seg_off[g];
    *n = seg_off[g + 1] - seg_off[g];
}

// Hybrid trains, uniform dithering (then `surrogate_sort_units` over the segments).
extern "C" __global__ void trains_dither(const unsigned int* seg_off, unsigned int segs,
                                         unsigned int per, const unsigned int* src_off,
                                         const unsigned int* unit, const double* original,
                                         double* out, unsigned int total, double delta,
                                         double t0, double t1, unsigned long long j0,
                                         unsigned int k0, unsigned int k1) {
    unsigned int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    unsigned int a, i, n;
    unsigned long long s;
    train_element(seg_off, segs, per, j0, e, &a, &s, &i, &n);
    out[e] = dithered(original[src_off[a] + i], i, unit ? unit[a] : a, s, delta, t0, t1, k0, k1);
}

// Hybrid trains, train shifting (then `surrogate_sort_units` with `rotated`).
extern "C" __global__ void trains_shift(const unsigned int* seg_off, unsigned int segs,
                                        unsigned int per, const unsigned int* src_off,
                                        const unsigned int* unit, const double* original,
                                        double* out, unsigned int total, double delta,
                                        double t0, double t1, unsigned long long j0,
                                        unsigned int k0, unsigned int k1) {
    unsigned int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    unsigned int a, i, n;
    unsigned long long s;
    train_element(seg_off, segs, per, j0, e, &a, &s, &i, &n);
    out[e] = shifted(original[src_off[a] + i], unit ? unit[a] : a, s, delta, t0, t1, k0, k1);
}

// Hybrid trains, dithering that keeps the unit's dead time `dead[a]` (host: `unit_train`,
// `DitherDeadTime`): two passes, `parity` 0 then 1. Spike `i` of that parity moves uniformly
// within [max(t − Δ, prev + d, T0), min(t + Δ, next − d, T1)] (kept where that is empty),
// `prev`/`next` its neighbours' current times (`T0`/`T1` at the ends), draw tag `parity`.
// Pass 0 reads the originals (its neighbours are odd, not yet moved) and copies the odd
// spikes; pass 1 reads the moved even neighbours in `out`. The result stays sorted.
extern "C" __global__ void trains_dead_time(const unsigned int* seg_off, unsigned int segs,
                                            unsigned int per, const unsigned int* src_off,
                                            const unsigned int* unit, const double* dead,
                                            const double* original, double* out,
                                            unsigned int total, double delta, double t0,
                                            double t1, unsigned long long j0, unsigned int k0,
                                            unsigned int k1, unsigned int parity) {
    unsigned int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    unsigned int a, i, n;
    unsigned long long s;
    train_element(seg_off, segs, per, j0, e, &a, &s, &i, &n);
    const double* x = parity == 0 ? original + src_off[a] : out + (e - i);
    if ((i & 1u) != parity) {
        if (parity == 0) out[e] = x[i];
        return;
    }
    double d = dead[a];
    double t = x[i];
    double prev = i > 0 ? __dadd_rn(x[i - 1], d) : t0;
    double next = i + 1 < n ? __dsub_rn(x[i + 1], d) : t1;
    double lo = fmax(fmax(__dsub_rn(t, delta), prev), t0);
    double hi = fmin(fmin(__dadd_rn(t, delta), next), t1);
    out[e] = lo <= hi ? drawn(lo, hi, first_uniform(i, unit ? unit[a] : a, s, parity, k0, k1)) : t;
}
