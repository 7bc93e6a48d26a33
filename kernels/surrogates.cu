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

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

#define TAG_DITHER 0u
#define TAG_SHIFT 2u

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
    unsigned int i = e - offsets[u];
    double t = original[e];
    double lo = fmax(__dsub_rn(t, delta), t0);
    double hi = fmin(__dadd_rn(t, delta), t1);
    double x = first_uniform(i, u, s, TAG_DITHER, k0, k1);
    double v = __dadd_rn(lo, __dmul_rn(x, __dsub_rn(hi, lo)));
    out[e] = fmin(fmax(v, lo), hi);
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
    double len = __dsub_rn(t1, t0);
    double t = original[e];
    if (!(len > 0.0)) {
        out[e] = t;
        return;
    }
    double x = first_uniform(0u, u, s, TAG_SHIFT, k0, k1);
    double shift = __dadd_rn(-delta, __dmul_rn(__dmul_rn(2.0, delta), x));
    double y = __dadd_rn(__dsub_rn(t, t0), shift);
    double r = fmod(y, len);
    if (r < 0.0) r = __dadd_rn(r, fabs(len));
    double v = __dadd_rn(t0, r);
    out[e] = (v >= t1) ? t0 : v;
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
