// Exact motif discovery on the GPU (src/motif, src/device/motif.rs).
//
// MK after "Parallel discovery of time series motifs on GPU" (papers/motif-discovery-gpu-ru.txt,
// §4.3): motif_reference_row = Alg. 3 (+ the sums of Alg. 4), motif_gather builds the
// distance matrix permuted into the order I_S, motif_mk_sweep fuses Algs. 6-8 (lower bounds,
// verify, BSF update) for a range of offsets, motif_mk_remaining counts the pairs the ordering
// bound still admits. motif_profile is the exact matrix profile by SCAMP's diagonal covariance
// recurrence (Zimmerman et al. 2019), the fallback when pruning fails.
//
// All arithmetic is f64. Distances are z-normalised Euclidean; constant subsequences have
// inv_std = 0 (their z-normalised form is the zero vector). The BSF lives in device memory as
// the bit pattern of a non-negative double, so unsigned atomicMin orders it numerically.
// Pairs that may be the motif are appended to a candidate list (distance, i, j); the host
// re-measures them exactly and breaks ties by the smallest (i, j).

typedef unsigned long long synfire_u64;

// +infinity (NVRTC has no <cmath> INFINITY).
#define SYNFIRE_INF __longlong_as_double(0x7ff0000000000000LL)

// Bounds are compared against bsf plus this slack, so rounding never prunes a tie.
__device__ __forceinline__ double synfire_slack(double bsf) { return bsf + 1e-9 * (1.0 + bsf); }

__device__ __forceinline__ double synfire_load_bsf(const synfire_u64* bsf_bits) {
    return __longlong_as_double((long long)(*(const volatile synfire_u64*)bsf_bits));
}

// z-normalised distance between subsequences a and b (ordered first, as on the host).
__device__ double synfire_zdist(const double* __restrict__ x, const double* __restrict__ mean,
                                const double* __restrict__ inv_std, int m, unsigned a,
                                unsigned b) {
    if (a > b) { unsigned t = a; a = b; b = t; }
    const double ma = mean[a], sa = inv_std[a], mb = mean[b], sb = inv_std[b];
    double s = 0.0;
    for (int t = 0; t < m; ++t) {
        const double d = (x[a + t] - ma) * sa - (x[b + t] - mb) * sb;
        s += d * d;
    }
    return sqrt(s);
}

// Lowers the BSF to d and records (d, i, j) when d is within rel * (1 + bsf) of the BSF it saw.
__device__ void synfire_offer(double d, double rel, unsigned i, unsigned j, synfire_u64* bsf_bits,
                              double* cand_d, unsigned* cand_i, unsigned* cand_j,
                              unsigned* cand_count, unsigned cap, unsigned* flags) {
    const synfire_u64 old = atomicMin(bsf_bits, (synfire_u64)__double_as_longlong(d));
    const double seen = __longlong_as_double((long long)old);
    if (d <= seen + rel * (1.0 + seen)) {
        const unsigned slot = atomicAdd(cand_count, 1u);
        if (slot < cap) {
            cand_d[slot] = d;
            cand_i[slot] = i < j ? i : j;
            cand_j[slot] = i < j ? j : i;
        } else {
            flags[0] = 1u;  // overflow: the host re-runs or gives up
        }
    }
}

extern "C" {

// Alg. 3 for one reference: row[j] = ED(ref, j) for valid j (+inf otherwise), and the sums
// of Alg. 4 (sums[0] += d, sums[1] += d*d, sums[2] += 1 over valid j).
__global__ void motif_reference_row(const double* __restrict__ x, const double* __restrict__ mean,
                                    const double* __restrict__ inv_std,
                                    const unsigned char* __restrict__ valid, unsigned n_sub, int m,
                                    unsigned ref, double* __restrict__ row, double* sums) {
    const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= n_sub) return;
    if (!valid[j]) {
        row[j] = SYNFIRE_INF;
        return;
    }
    const double d = synfire_zdist(x, mean, inv_std, m, ref, j);
    row[j] = d;
    atomicAdd(&sums[0], d);
    atomicAdd(&sums[1], d * d);
    atomicAdd(&sums[2], 1.0);
}

// dp[q * len + k] = rows[rank[q] * n_sub + order[k]]: D permuted into the order I_S, the
// references by descending standard deviation (I_SD). Grid: (ceil(len / block), r).
__global__ void motif_gather(const double* __restrict__ rows, const unsigned* __restrict__ order,
                             const unsigned* __restrict__ rank, unsigned len, unsigned n_sub,
                             double* __restrict__ dp) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned q = blockIdx.y;
    if (k >= len) return;
    dp[(size_t)q * len + k] = rows[(size_t)rank[q] * n_sub + order[k]];
}

// Algs. 6-8 fused, one thread per k, offsets [o_begin, o_end): pair (order[k], order[k + o]).
// The ordering reference's bound grows with o, so a thread stops at the first o where it
// exceeds the BSF; flags[1] is set when some thread reached o_end still inside its window
// (another launch is needed). counters[0] += lower bounds, counters[1] += true distances.
__global__ void motif_mk_sweep(const double* __restrict__ dp, unsigned r, unsigned len,
                               const unsigned* __restrict__ order,
                               const unsigned char* __restrict__ allowed, unsigned exclusion,
                               unsigned o_begin, unsigned o_end, const double* __restrict__ x,
                               const double* __restrict__ mean, const double* __restrict__ inv_std,
                               int m, synfire_u64* bsf_bits, double* cand_d, unsigned* cand_i,
                               unsigned* cand_j, unsigned* cand_count, unsigned cap,
                               unsigned* flags, synfire_u64* counters) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= len) return;
    const unsigned a = order[k];
    if (!allowed[a]) return;
    const double base = dp[k];
    synfire_u64 lbs = 0, dists = 0;
    unsigned o = o_begin;
    bool open = true;
    for (; o < o_end; ++o) {
        const unsigned p = k + o;
        if (p >= len) { open = false; break; }
        const double limit = synfire_slack(synfire_load_bsf(bsf_bits));
        if (dp[p] - base > limit) { open = false; break; }
        const unsigned b = order[p];
        if (!allowed[b]) continue;
        if ((a > b ? a - b : b - a) <= exclusion) continue;
        ++lbs;
        bool pass = true;
        for (unsigned q = 1; q < r; ++q) {
            const double* row = dp + (size_t)q * len;
            if (fabs(row[p] - row[k]) > limit) { pass = false; break; }
        }
        if (!pass) continue;
        ++dists;
        const double d = synfire_zdist(x, mean, inv_std, m, a, b);
        if (d <= limit) synfire_offer(d, 1e-9, a, b, bsf_bits, cand_d, cand_i, cand_j, cand_count, cap, flags);
    }
    if (open && k + o_end < len) flags[1] = 1u;
    if (lbs) atomicAdd(&counters[0], lbs);
    if (dists) atomicAdd(&counters[1], dists);
}

// out[0] += pairs (k, p), p > k + major, with dp0[p] - dp0[k] <= limit (binary search).
__global__ void motif_mk_remaining(const double* __restrict__ dp0, unsigned len, double limit,
                                   unsigned major, synfire_u64* out) {
    const unsigned k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= len) return;
    const double top = dp0[k] + limit;
    unsigned lo = k + 1, hi = len;  // first p with dp0[p] > top
    while (lo < hi) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (dp0[mid] <= top) lo = mid + 1; else hi = mid;
    }
    const unsigned first = k + 1 + major;
    if (lo > first) atomicAdd(out, (synfire_u64)(lo - first));
}

// The exact matrix profile's closest pair. Each thread walks SYNFIRE_MP_DIAGS adjacent
// diagonals j - i = k0 .. k0 + 3 (k0 = first_diag + 4 * global x index) over the rows
// [row_offset + blockIdx.y * tile, + tile): the values at j = i + k0 + d slide through
// registers, so each step loads one new j and reuses three. SCAMP's recurrence
//   cov(i, j) = cov(i-1, j-1) + df[i] dg[j] + df[j] dg[i]
// restarts from a direct dot product at each tile start and after invalid subsequences.
// st packs each subsequence's state: NaN = invalid (restart), st >= 0 = allowed with
// st = 1 / (sqrt(m) sigma) (0 = constant), st < 0 = valid but not allowed.
// Each thread offers its best pair; near-ties keep the earlier (smaller) (i, j).
#define SYNFIRE_MP_DIAGS 4
__global__ void motif_profile(const double* __restrict__ x, const double* __restrict__ mean,
                              const double* __restrict__ st, const double* __restrict__ df,
                              const double* __restrict__ dg, unsigned n_sub, int m,
                              unsigned first_diag, unsigned tile, unsigned row_offset,
                              synfire_u64* bsf_bits, double* cand_d, unsigned* cand_i,
                              unsigned* cand_j, unsigned* cand_count, unsigned cap,
                              unsigned* flags) {
    const unsigned k0 = first_diag + (blockIdx.x * blockDim.x + threadIdx.x) * SYNFIRE_MP_DIAGS;
    const unsigned i0 = row_offset + blockIdx.y * tile;
    if (k0 >= n_sub || i0 >= n_sub - k0) return;
    const unsigned end = (n_sub - k0 - i0 < tile) ? n_sub - k0 : i0 + tile;
    const double two_m = 2.0 * m, tol = 1e-9 * two_m;
    double best = SYNFIRE_INF;
    unsigned bi = 0, bj = 0;
    double cov[SYNFIRE_MP_DIAGS];
    bool fresh[SYNFIRE_MP_DIAGS];
    double wdf[SYNFIRE_MP_DIAGS], wdg[SYNFIRE_MP_DIAGS], wst[SYNFIRE_MP_DIAGS];
#pragma unroll
    for (int d = 0; d < SYNFIRE_MP_DIAGS; ++d) {
        cov[d] = 0.0;
        fresh[d] = true;
        const unsigned j = i0 + k0 + d;
        const bool in = j < n_sub;
        wdf[d] = in ? df[j] : 0.0;
        wdg[d] = in ? dg[j] : 0.0;
        wst[d] = in ? st[j] : -1.0;
    }
    for (unsigned i = i0; i < end; ++i) {
        const double dfi = df[i], dgi = dg[i], si = st[i];
#pragma unroll
        for (int d = 0; d < SYNFIRE_MP_DIAGS; ++d) {
            const unsigned j = i + k0 + d;
            if (j >= n_sub) continue;
            const double sj = wst[d];
            if (si != si || sj != sj) { fresh[d] = true; continue; }  // NaN: invalid
            if (fresh[d]) {
                const double mi = mean[i], mj = mean[j];
                double c = 0.0;
                for (int t = 0; t < m; ++t) c += (x[i + t] - mi) * (x[j + t] - mj);
                cov[d] = c;
                fresh[d] = false;
            } else {
                cov[d] += dfi * wdg[d] + wdf[d] * dgi;
            }
            if (si < 0.0 || sj < 0.0) continue;
            double d2;
            if (si == 0.0 || sj == 0.0) {
                d2 = (si == 0.0 && sj == 0.0) ? 0.0 : (double)m;
            } else {
                d2 = fmax(0.0, two_m * (1.0 - cov[d] * si * sj));
            }
            if (d2 < best - tol) { best = d2; bi = i; bj = j; }
        }
        // Slide the window: j-values for row i + 1.
#pragma unroll
        for (int d = 0; d + 1 < SYNFIRE_MP_DIAGS; ++d) {
            wdf[d] = wdf[d + 1];
            wdg[d] = wdg[d + 1];
            wst[d] = wst[d + 1];
        }
        const unsigned jn = i + 1 + k0 + SYNFIRE_MP_DIAGS - 1;
        const bool in = jn < n_sub;
        wdf[SYNFIRE_MP_DIAGS - 1] = in ? df[jn] : 0.0;
        wdg[SYNFIRE_MP_DIAGS - 1] = in ? dg[jn] : 0.0;
        wst[SYNFIRE_MP_DIAGS - 1] = in ? st[jn] : -1.0;
    }
    if (best < SYNFIRE_INF) {
        // The recurrence's rounding is far below 1e-7 relative: near-ties within that are
        // kept for the host's exact re-measurement.
        synfire_offer(sqrt(best), 1e-7, bi, bj, bsf_bits, cand_d, cand_i, cand_j, cand_count,
                      cap, flags);
    }
}

}  // extern "C"
