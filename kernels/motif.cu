// Exact motif discovery on the GPU (src/motif, src/device/motif.rs).
//
// MK after "Parallel discovery of time series motifs on GPU" (papers/motif-discovery-gpu-ru.txt,
// §4.3): motif_reference_row = Alg. 3 (+ the sums of Alg. 4), motif_gather builds the
// distance matrix permuted into the order I_S, motif_mk_sweep fuses Algs. 6-8 (lower bounds,
// verify, BSF update) for a range of offsets. motif_profile is the exact matrix profile by SCAMP's diagonal covariance
// recurrence (Zimmerman et al. 2019), the fallback when pruning fails.
//
// All arithmetic is f64. Distances are z-normalised Euclidean; constant subsequences have
// inv_std = 0 (their z-normalised form is the zero vector). The BSF lives in device memory as
// the bit pattern of a non-negative double, so unsigned atomicMin orders it numerically.
// Pairs that may be the motif are appended to a candidate list (distance, i, j); the host
// re-measures them exactly and breaks ties by the smallest (i, j).

#include "common.cuh"

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

// synfire_offer for a squared distance d2 known to within tol (matrix-profile rounding): the
// record window is tol wide in d2, i.e. tol / (2 d) in d, and never below 1e-7 relative.
__device__ void synfire_offer_sq(double d2, double tol, unsigned i, unsigned j,
                                 synfire_u64* bsf_bits, double* cand_d, unsigned* cand_i,
                                 unsigned* cand_j, unsigned* cand_count, unsigned cap,
                                 unsigned* flags) {
    const double d = sqrt(d2);
    const double rel = fmax(1e-7, tol / (2.0 * fmax(d, 1e-300) * (1.0 + d)));
    synfire_offer(d, rel, i, j, bsf_bits, cand_d, cand_i, cand_j, cand_count, cap, flags);
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
            // Near-ties of the running best are offered, so the host's exact re-measurement
            // sees every pair that could tie the thread's final best.
            if (d2 < best) {
                if (best - d2 <= tol) synfire_offer_sq(best, tol, bi, bj, bsf_bits, cand_d, cand_i, cand_j, cand_count, cap, flags);
                best = d2; bi = i; bj = j;
            } else if (d2 <= best + tol) {
                synfire_offer_sq(d2, tol, i, j, bsf_bits, cand_d, cand_i, cand_j, cand_count, cap, flags);
            }
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
        synfire_offer_sq(best, tol, bi, bj, bsf_bits, cand_d, cand_i, cand_j, cand_count, cap,
                         flags);
    }
}

}  // extern "C"

// ---- The projection join (src/motif/join.rs) ----------------------------------------------
// Lower bounds from the first K <= 16 DCT-II coefficients of each z-normalised subsequence
// (GEMINI: an orthonormal projection never lengthens a difference), a grid over the first
// coordinates built on the host, and an all-pairs scan of each cell against itself and its
// forward neighbours. Survivors are measured in f64 (synfire_zdist) and offered to the BSF.

#define SYNFIRE_JOIN_DIMS 16
#define SYNFIRE_JOIN_TILE 128

extern "C" {

// coords[f * n_sub + i] = sum_t basis[f * m + t] (x[i + t] - mean_i) inv_std_i for f < dims,
// in f64, stored as f32 (0 for invalid and constant subsequences). One thread per subsequence;
// the basis is read uniformly across the warp (broadcast).
__global__ void motif_project(const double* __restrict__ x, const double* __restrict__ mean,
                              const double* __restrict__ inv_std,
                              const unsigned char* __restrict__ valid, unsigned n_sub, int m,
                              int dims, const double* __restrict__ basis,
                              float* __restrict__ coords) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_sub) return;
    double acc[SYNFIRE_JOIN_DIMS];
#pragma unroll
    for (int f = 0; f < SYNFIRE_JOIN_DIMS; ++f) acc[f] = 0.0;
    const double s = inv_std[i];
    if (valid[i] && s != 0.0) {
        const double mu = mean[i];
        for (int t = 0; t < m; ++t) {
            const double v = x[i + t] - mu;
#pragma unroll
            for (int f = 0; f < SYNFIRE_JOIN_DIMS; ++f) {
                if (f < dims) acc[f] = fma(basis[f * m + t], v, acc[f]);
            }
        }
    }
#pragma unroll
    for (int f = 0; f < SYNFIRE_JOIN_DIMS; ++f) {
        if (f < dims) coords[(size_t)f * n_sub + i] = (float)(acc[f] * s);
    }
}

// pts[pos] = the 16 (zero-padded) coordinates of subsequence order[pos], as 4 float4.
__global__ void motif_join_gather(const float* __restrict__ coords, unsigned n_sub, int dims,
                                  const unsigned* __restrict__ order, unsigned len,
                                  float4* __restrict__ pts) {
    const unsigned pos = blockIdx.x * blockDim.x + threadIdx.x;
    if (pos >= len) return;
    const unsigned i = order[pos];
    float v[SYNFIRE_JOIN_DIMS];
#pragma unroll
    for (int f = 0; f < SYNFIRE_JOIN_DIMS; ++f) v[f] = f < dims ? coords[(size_t)f * n_sub + i] : 0.0f;
#pragma unroll
    for (int q = 0; q < 4; ++q)
        pts[(size_t)pos * 4 + q] = make_float4(v[4 * q], v[4 * q + 1], v[4 * q + 2], v[4 * q + 3]);
}

// One block = up to SYNFIRE_JOIN_TILE points of cell blocks[2b] starting at position
// blocks[2b + 1]; each thread owns one point a and scans the cell's own later points and every
// point of its forward neighbours, staged in shared memory. A pair survives when its f32
// squared bound is <= r2 = radius(min(width, BSF))^2 (radius = limit (1 + 1e-5) + slack, the
// host's Projection::radius); survivors outside the exclusion zone and not both constant get
// their f64 distance, offered to the BSF. counters[0] += bounds, counters[1] += distances;
// once counters[1] passes `budget`, flags[2] = 1 and blocks stop (auto mode then runs the
// matrix profile).
__global__ void motif_join(const float4* __restrict__ pts, const unsigned* __restrict__ order,
                           const unsigned* __restrict__ cell_start,
                           const unsigned* __restrict__ nb_start,
                           const unsigned* __restrict__ nb_cell,
                           const unsigned* __restrict__ blocks, unsigned exclusion, double width,
                           double slack, synfire_u64 budget, const double* __restrict__ x,
                           const double* __restrict__ mean, const double* __restrict__ inv_std,
                           int m, synfire_u64* bsf_bits, double* cand_d, unsigned* cand_i,
                           unsigned* cand_j, unsigned* cand_count, unsigned cap,
                           unsigned* flags, synfire_u64* counters) {
    __shared__ float4 tile[SYNFIRE_JOIN_TILE * 4];
    __shared__ unsigned tile_id[SYNFIRE_JOIN_TILE];
    __shared__ int stop;
    const unsigned c = blocks[2 * blockIdx.x], first = blocks[2 * blockIdx.x + 1];
    const unsigned cend = cell_start[c + 1];
    const unsigned apos = first + threadIdx.x;
    const bool active = apos < cend && threadIdx.x < SYNFIRE_JOIN_TILE;
    float4 a0 = make_float4(0.f, 0.f, 0.f, 0.f), a1 = a0, a2 = a0, a3 = a0;
    unsigned ia = 0;
    bool aconst = false;
    if (active) {
        a0 = pts[(size_t)apos * 4];
        a1 = pts[(size_t)apos * 4 + 1];
        a2 = pts[(size_t)apos * 4 + 2];
        a3 = pts[(size_t)apos * 4 + 3];
        ia = order[apos];
        aconst = inv_std[ia] == 0.0;
    }
    synfire_u64 bounds = 0;
    const unsigned e_end = nb_start[c + 1];
    for (unsigned e = nb_start[c]; e < e_end; ++e) {
        const unsigned nc = nb_cell[e];
        const unsigned from = nc == c ? first : cell_start[nc];
        const unsigned to = cell_start[nc + 1];
        for (unsigned t0 = from; t0 < to; t0 += SYNFIRE_JOIN_TILE) {
            __syncthreads();
            const unsigned p = t0 + threadIdx.x;
            if (threadIdx.x < SYNFIRE_JOIN_TILE && p < to) {
#pragma unroll
                for (int q = 0; q < 4; ++q) tile[threadIdx.x * 4 + q] = pts[(size_t)p * 4 + q];
                tile_id[threadIdx.x] = order[p];
            }
            if (threadIdx.x == 0) stop = flags[2] != 0;
            __syncthreads();
            if (stop) goto done;
            if (!active) continue;
            const double lim = fmin(width, synfire_load_bsf(bsf_bits));
            const double r = lim * (1.0 + 1e-5) + slack;
            const float r2 = (float)(r * r * (1.0 + 1e-6));
            const unsigned cnt = to - t0 < SYNFIRE_JOIN_TILE ? to - t0 : SYNFIRE_JOIN_TILE;
            // Within the own cell only later points pair (each pair once).
            unsigned j0 = 0;
            if (nc == c) j0 = apos + 1 > t0 ? apos + 1 - t0 : 0;
            if (j0 < cnt) bounds += cnt - j0;
            for (unsigned j = j0; j < cnt; ++j) {
                float4 b = tile[j * 4];
                float d0 = a0.x - b.x, d1 = a0.y - b.y, d2 = a0.z - b.z, d3 = a0.w - b.w;
                float s = (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
                if (s > r2) continue;
                b = tile[j * 4 + 1];
                d0 = a1.x - b.x; d1 = a1.y - b.y; d2 = a1.z - b.z; d3 = a1.w - b.w;
                s += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
                if (s > r2) continue;
                b = tile[j * 4 + 2];
                d0 = a2.x - b.x; d1 = a2.y - b.y; d2 = a2.z - b.z; d3 = a2.w - b.w;
                s += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
                if (s > r2) continue;
                b = tile[j * 4 + 3];
                d0 = a3.x - b.x; d1 = a3.y - b.y; d2 = a3.z - b.z; d3 = a3.w - b.w;
                s += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
                if (s > r2) continue;
                const unsigned ib = tile_id[j];
                if ((ia > ib ? ia - ib : ib - ia) <= exclusion) continue;
                if (aconst && inv_std[ib] == 0.0) continue;
                if (atomicAdd(&counters[1], 1ull) >= budget) {
                    flags[2] = 1u;  // the block stops at its next tile (a uniform check)
                    break;
                }
                const double d = synfire_zdist(x, mean, inv_std, m, ia, ib);
                if (d <= synfire_slack(synfire_load_bsf(bsf_bits)))
                    synfire_offer(d, 1e-7, ia, ib, bsf_bits, cand_d, cand_i, cand_j, cand_count,
                                  cap, flags);
            }
        }
    }
done:
    if (bounds) atomicAdd(&counters[0], bounds);
}

}  // extern "C"
