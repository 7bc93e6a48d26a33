// Exhaustive shapelet discovery on the GPU (src/shapelet, src/device/shapelet.rs), after
// Chang, Deka, Hwu & Roth, "Efficient Pattern-Based Time Series Classification on GPU"
// (papers/shapelets-gpu.txt): the distance dynamic program of Eqs. 6-7 (Algorithm 4) with
// persistent warps (Section V-C), then the information gain of every candidate's best split
// (Eqs. 3-4) on the device.
//
// shapelet_stats: canonical mean and 1/sigma of every window (bit for bit the host's
//   shapelet::distance::Stats: __d*_rn intrinsics, sums in order, no fused multiply-add).
// shapelet_search: persistent warps take items (candidate series k, block of 32 starts, a
//   range of lengths) from an atomic counter. Lane i owns start s = s0 + i and walks the
//   target's windows u = 0..M-1; Omega(s, u) = Omega(s-1, u-1) - a[s-1] b[u-1] + a[s+l-1]
//   b[u+l-1] (Eq. 6) takes Omega(s-1, u-1) from lane i-1 by a warp shuffle, lane 0 reads the
//   block's first row Omega(s0, u) and every lane starts column 0 from Omega(s, 0); first row
//   and column carry over from one length to the next by adding the new terms (Eq. 7's
//   running sums). Each cell also bounds its rounding error, so the lane ends with an interval
//   [lo, hi] holding the canonical squared distance. Then the lane sorts its candidate's N
//   intervals and scans the splits: safe splits (bounds separated) give exact gains from the
//   n ln n table, clusters of overlapping bounds give upper bounds (shapelet::split).
// shapelet_max_gain / shapelet_max_gap / shapelet_compact: G*, gap* and the contenders
//   (shapelet::discovery), appended to a bounded pool the host re-measures canonically.
//
// Memory stays bounded (Section V-C): per persistent warp a scratch of N*(L + 128) + 32 doubles
// and 32*(N + 2C) words; records per launch; the host picks the number of warps and the length
// ranges per launch to fit its budget.

#include "common.cuh"

#define SHP_EPS 2.220446049250313e-16
#define SHP_MATCH_FLOOR 1e-6
#define SHP_WARP 32u
#define SHP_FULL 0xffffffffu
#define SHP_MAX_CLUSTER_CLASSES 8u
#define SHP_GAIN_SLACK 1e-12

// ---- canonical statistics (shapelet::distance::Stats::of) ----
__device__ void shp_stats(const double* __restrict__ w, unsigned l, double* mean, double* inv) {
    const double lf = (double)l;
    double sum = 0.0;
    for (unsigned t = 0; t < l; ++t) sum = __dadd_rn(sum, w[t]);
    const double mu = __ddiv_rn(sum, lf);
    double sq = 0.0;
    for (unsigned t = 0; t < l; ++t) {
        const double d = __dsub_rn(w[t], mu);
        sq = __dadd_rn(sq, __dmul_rn(d, d));
    }
    const double sigma = __dsqrt_rn(__ddiv_rn(sq, lf));
    *mean = mu;
    *inv = (sigma > __dmul_rn(1e-10, fabs(mu)) && sigma > 0.0) ? __ddiv_rn(1.0, sigma) : 0.0;
}

// ---- order-preserving keys for atomicMax over doubles ----
__device__ __forceinline__ synfire_u64 shp_order(double x) {
    const long long b = __double_as_longlong(x);
    return b < 0 ? ~(synfire_u64)b : ((synfire_u64)b | 0x8000000000000000ULL);
}

// ---- information gain from counts (shapelet::split::EntropyTable::gain) ----
// h_total = F(n) - sum_c F(t_c), computed by the host with the same operations.
// Left count of class c: base[c] + (in(c) ? extra[c] : 0), counts strided by 32 (per lane).
__device__ double shp_gain(const double* __restrict__ xlogx, const unsigned* __restrict__ totals,
                           unsigned classes, unsigned n, double h_total,
                           const unsigned* left, const unsigned* add, const unsigned* present,
                           unsigned npresent, unsigned mask) {
    unsigned nl = 0;
    double accl = 0.0, accr = 0.0;
    for (unsigned c = 0; c < classes; ++c) {
        unsigned lc = left[c * SHP_WARP];
        if (add) {
            for (unsigned b = 0; b < npresent; ++b)
                if (present[b] == c && (mask >> b & 1u)) lc = add[c * SHP_WARP];
        }
        nl += lc;
        accl = __dadd_rn(accl, xlogx[lc]);
        accr = __dadd_rn(accr, xlogx[totals[c] - lc]);
    }
    const double hl = __dsub_rn(xlogx[nl], accl);
    const double hr = __dsub_rn(xlogx[n - nl], accr);
    return __ddiv_rn(__dsub_rn(h_total, __dadd_rn(hl, hr)), (double)n);
}

__device__ __forceinline__ bool shp_less(double a1, unsigned i1, double a2, unsigned i2) {
    return a1 < a2 || (a1 == a2 && i1 < i2);
}

// Heapsort of one lane's items (keys a, payload e, index i; stride 32) by (a, i).
__device__ void shp_sort(double* a, double* e, unsigned* ix, unsigned n) {
    if (n < 2) return;
    for (unsigned start = n / 2; start-- > 0;) {
        unsigned root = start;
        for (;;) {
            unsigned child = 2 * root + 1;
            if (child >= n) break;
            if (child + 1 < n && shp_less(a[child * SHP_WARP], ix[child * SHP_WARP],
                                          a[(child + 1) * SHP_WARP], ix[(child + 1) * SHP_WARP]))
                ++child;
            if (!shp_less(a[root * SHP_WARP], ix[root * SHP_WARP], a[child * SHP_WARP],
                          ix[child * SHP_WARP]))
                break;
            double ta = a[root * SHP_WARP]; a[root * SHP_WARP] = a[child * SHP_WARP]; a[child * SHP_WARP] = ta;
            double te = e[root * SHP_WARP]; e[root * SHP_WARP] = e[child * SHP_WARP]; e[child * SHP_WARP] = te;
            unsigned ti = ix[root * SHP_WARP]; ix[root * SHP_WARP] = ix[child * SHP_WARP]; ix[child * SHP_WARP] = ti;
            root = child;
        }
    }
    for (unsigned end = n - 1; end > 0; --end) {
        double ta = a[0]; a[0] = a[end * SHP_WARP]; a[end * SHP_WARP] = ta;
        double te = e[0]; e[0] = e[end * SHP_WARP]; e[end * SHP_WARP] = te;
        unsigned ti = ix[0]; ix[0] = ix[end * SHP_WARP]; ix[end * SHP_WARP] = ti;
        unsigned root = 0;
        for (;;) {
            unsigned child = 2 * root + 1;
            if (child >= end) break;
            if (child + 1 < end && shp_less(a[child * SHP_WARP], ix[child * SHP_WARP],
                                            a[(child + 1) * SHP_WARP], ix[(child + 1) * SHP_WARP]))
                ++child;
            if (!shp_less(a[root * SHP_WARP], ix[root * SHP_WARP], a[child * SHP_WARP],
                          ix[child * SHP_WARP]))
                break;
            double t2 = a[root * SHP_WARP]; a[root * SHP_WARP] = a[child * SHP_WARP]; a[child * SHP_WARP] = t2;
            double e2 = e[root * SHP_WARP]; e[root * SHP_WARP] = e[child * SHP_WARP]; e[child * SHP_WARP] = e2;
            unsigned i2 = ix[root * SHP_WARP]; ix[root * SHP_WARP] = ix[child * SHP_WARP]; ix[child * SHP_WARP] = i2;
            root = child;
        }
    }
}

// Bound on |sqrt(a) - sqrt(c)| for |a - c| <= eps (shapelet::split::sqrt_bound).
__device__ __forceinline__ double shp_sqrt_bound(double a, double eps) {
    return (a > eps ? eps / sqrt(a) : sqrt(2.0 * eps)) + 4.0 * SHP_EPS;
}

// The bounded scan of one candidate (shapelet::split::bounded_scan) over a lane's sorted
// items. Writes g_safe, gap_lo, gap_hi, g_up.
__device__ void shp_scan(const double* a, const double* e, const unsigned* ix, double* sufmin,
                         unsigned* cnt, unsigned* bas, unsigned n,
                         const unsigned* __restrict__ cls, const unsigned* __restrict__ totals,
                         unsigned classes, const double* __restrict__ xlogx, double h_total,
                         double out[4]) {
    double g_safe = -SYNFIRE_INF, gap_lo = -SYNFIRE_INF, gap_hi = -SYNFIRE_INF, g_up = -SYNFIRE_INF;
    if (n >= 2) {
        sufmin[n * SHP_WARP] = SYNFIRE_INF;
        for (unsigned k = n; k-- > 0;)
            sufmin[k * SHP_WARP] = fmin(sufmin[(k + 1) * SHP_WARP], a[k * SHP_WARP] - e[k * SHP_WARP]);
        double total_d = 0.0, total_b = 0.0;
        for (unsigned k = 0; k < n; ++k) {
            const double ak = a[k * SHP_WARP];
            total_d += sqrt(fmax(ak, 0.0));
            total_b += shp_sqrt_bound(ak, e[k * SHP_WARP]);
        }
        const double slack = 16.0 * SHP_EPS * ((double)n + 1.0);
        for (unsigned c = 0; c < classes; ++c) { cnt[c * SHP_WARP] = 0; bas[c * SHP_WARP] = 0; }
        double pre_max = -SYNFIRE_INF, sum_d = 0.0, sum_b = 0.0;
        unsigned cluster_start = 0;
        bool tie = true;
        for (unsigned k = 1; k <= n; ++k) {
            const double ak = a[(k - 1) * SHP_WARP], ek = e[(k - 1) * SHP_WARP];
            cnt[cls[ix[(k - 1) * SHP_WARP]] * SHP_WARP] += 1;
            pre_max = fmax(pre_max, ak + ek);
            sum_d += sqrt(fmax(ak, 0.0));
            sum_b += shp_sqrt_bound(ak, ek);
            tie = tie && ek == 0.0 && ak == a[cluster_start * SHP_WARP];
            const bool safe = k == n || sqrt(fmax(pre_max, 0.0)) < sqrt(fmax(sufmin[k * SHP_WARP], 0.0));
            if (!safe) continue;
            if (k - cluster_start >= 2 && !tie) {
                // The classes of the cluster; each proper subset wholly left is a vertex.
                unsigned pl[SHP_MAX_CLUSTER_CLASSES];
                unsigned np = 0;
                for (unsigned c = 0; c < classes; ++c) {
                    if (cnt[c * SHP_WARP] > bas[c * SHP_WARP]) {
                        if (np < SHP_MAX_CLUSTER_CLASSES) pl[np] = c;
                        ++np;
                    }
                }
                if (np > SHP_MAX_CLUSTER_CLASSES) {
                    g_up = SYNFIRE_INF;
                } else if (np >= 2) {
                    for (unsigned mask = 1; mask + 1 < (1u << np); ++mask)
                        g_up = fmax(g_up, shp_gain(xlogx, totals, classes, n, h_total, bas, cnt,
                                                   pl, np, mask));
                }
            }
            cluster_start = k;
            tie = true;
            for (unsigned c = 0; c < classes; ++c) bas[c * SHP_WARP] = cnt[c * SHP_WARP];
            if (k == n) break;
            const double gain = shp_gain(xlogx, totals, classes, n, h_total, cnt, 0, 0, 0, 0);
            const double nl = (double)k, nr = (double)(n - k);
            const double gap = (total_d - sum_d) / nr - sum_d / nl;
            const double err = (total_b - sum_b) / nr + sum_b / nl + slack;
            if (gain > g_safe) {
                g_safe = gain;
                gap_lo = gap - err;
                gap_hi = gap + err;
            } else if (gain == g_safe) {
                gap_lo = fmax(gap_lo, gap - err);
                gap_hi = fmax(gap_hi, gap + err);
            }
        }
    }
    out[0] = g_safe;
    out[1] = gap_lo;
    out[2] = gap_hi;
    out[3] = g_up;
}

extern "C" {

// Canonical statistics of every window: thread per (lidx, k, u); rows [nlen][n][len]
// (u < len - l + 1 written). w = (1/sigma) / sqrt(l) (0 if constant), q = 1 or 0.
__global__ void shapelet_stats(const double* __restrict__ x, const unsigned* __restrict__ subset,
                               unsigned n, unsigned len, const unsigned* __restrict__ lengths,
                               unsigned nlen, double* __restrict__ mean, double* __restrict__ w,
                               double* __restrict__ q) {
    const synfire_u64 id = (synfire_u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (synfire_u64)nlen * n * len) return;
    const unsigned u = (unsigned)(id % len);
    const unsigned k = (unsigned)((id / len) % n);
    const unsigned lidx = (unsigned)(id / ((synfire_u64)len * n));
    const unsigned l = lengths[lidx];
    if (u + l > len) return;
    double mu, inv;
    shp_stats(x + (synfire_u64)subset[k] * len + u, l, &mu, &inv);
    mean[id] = mu;
    w[id] = inv * (1.0 / sqrt((double)l));
    q[id] = inv > 0.0 ? 1.0 : 0.0;
}

// The search: see the file comment. Items are (length sub-range lc, block b, series k),
// item = (lc * blocks + b) * n + k, shortest lengths (the heaviest items) first.
// Candidate (k, lidx, s) writes its record at k * per_series + len_off[lidx] + s.
// base: for a logical term, the rule's canonical squared distances [n] (op 1 = AND (max),
// 2 = OR (min), 0 = none). debug: if non-null, [records][n][2] of (lo, hi) for host checks.
__global__ void shapelet_search(
    const double* __restrict__ x, const unsigned* __restrict__ subset,
    const unsigned* __restrict__ cls, const unsigned* __restrict__ totals, unsigned n,
    unsigned len, unsigned classes, const unsigned* __restrict__ lengths, unsigned nlen,
    const unsigned* __restrict__ len_off, const double* __restrict__ st_mean,
    const double* __restrict__ st_w, const double* __restrict__ st_q,
    const double* __restrict__ xmax, const double* __restrict__ xlogx, double h_total,
    const double* __restrict__ base, int op, unsigned lsub, unsigned blocks, unsigned items,
    unsigned* next_item, double* scratch, unsigned* uscratch, double* rec_g_safe,
    double* rec_gap_lo, double* rec_gap_hi, double* rec_g_up, double* debug) {
    const unsigned lane = threadIdx.x & (SHP_WARP - 1);
    const synfire_u64 warp = ((synfire_u64)blockIdx.x * blockDim.x + threadIdx.x) / SHP_WARP;
    const synfire_u64 per_warp = (synfire_u64)n * len + SHP_WARP * (4ull * n + 1);
    double* rowinit = scratch + warp * per_warp;             // [n][len]
    double* colinit = rowinit + (synfire_u64)n * len;        // [n][32]
    double* it_a = colinit + (synfire_u64)n * SHP_WARP;      // [n][32]: lo, then a
    double* it_e = it_a + (synfire_u64)n * SHP_WARP;         // [n][32]: hi, then eps
    double* sufmin = it_e + (synfire_u64)n * SHP_WARP;       // [n+1][32]
    unsigned* it_i = uscratch + warp * (SHP_WARP * ((synfire_u64)n + 2ull * classes));
    unsigned* cnt = it_i + (synfire_u64)n * SHP_WARP;        // [C][32]
    unsigned* bas = cnt + (synfire_u64)classes * SHP_WARP;   // [C][32]
    const unsigned lchunks = (nlen + lsub - 1) / lsub;
    const synfire_u64 per_series = len_off[nlen];
    for (;;) {
        unsigned item = 0;
        if (lane == 0) item = atomicAdd(next_item, 1u);
        item = __shfl_sync(SHP_FULL, item, 0);
        if (item >= items) break;
        const unsigned k = item % n;
        const unsigned b = (item / n) % blocks;
        const unsigned lc = item / (n * blocks);
        if (lc >= lchunks) break;
        const unsigned s0 = b * SHP_WARP, s = s0 + lane;
        const double* a = x + (synfire_u64)subset[k] * len;
        const double xa = xmax[k];
        const unsigned lid1 = (lc + 1) * lsub < nlen ? (lc + 1) * lsub : nlen;
        unsigned done = 0;
        for (unsigned lidx = lc * lsub; lidx < lid1; ++lidx) {
            const unsigned l = lengths[lidx];
            const unsigned m = len - l + 1;
            if (s0 >= m) break;
            const bool active = s < m;
            const synfire_u64 row_a = ((synfire_u64)lidx * n + k) * len + (active ? s : 0);
            const double ca = active ? (double)l * st_mean[row_a] : 0.0;
            const double wa = active ? st_w[row_a] : 0.0;
            const double qa = active ? st_q[row_a] : 0.0;
            const double twa = 2.0 * wa;
            const double alo = (active && s >= 1) ? a[s - 1] : 0.0;
            const double ahi = active ? a[s + l - 1] : 0.0;
            const double lf = (double)l;
            const double coef_a = 4.0 * SHP_EPS * (lf + 2.0 * lane + 16.0) * lf * xa * wa;
            const double floor_e = 16.0 * SHP_EPS * (lf + 16.0);
            for (unsigned jj = 0; jj < n; ++jj) {
                const double* bs = x + (synfire_u64)subset[jj] * len;
                double* ri = rowinit + (synfire_u64)jj * len;
                // First row of the block, Omega(s0, u), u < m: all terms, or the new ones.
                for (unsigned u = lane; u < m; u += SHP_WARP) {
                    double acc = done == 0 ? 0.0 : ri[u];
                    for (unsigned t = done; t < l; ++t) acc = fma(a[s0 + t], bs[u + t], acc);
                    ri[u] = acc;
                }
                // Column 0 of my row, Omega(s, 0).
                double ci = done == 0 ? 0.0 : colinit[jj * SHP_WARP + lane];
                if (active)
                    for (unsigned t = done; t < l; ++t) ci = fma(a[s + t], bs[t], ci);
                colinit[jj * SHP_WARP + lane] = ci;
                __syncwarp();
                const synfire_u64 row_b = ((synfire_u64)lidx * n + jj) * len;
                const double* mb = st_mean + row_b;
                const double* wb = st_w + row_b;
                const double* qb = st_q + row_b;
                const double coef = coef_a * xmax[jj];
                double prev = 0.0, hv = -SYNFIRE_INF, lv = -SYNFIRE_INF;
                for (unsigned u = 0; u < m; ++u) {
                    const double in = __shfl_up_sync(SHP_FULL, prev, 1);
                    const double r0 = ri[u];
                    double om;
                    if (lane == 0) om = r0;
                    else if (u == 0) om = ci;
                    else om = fma(ahi, bs[u + l - 1], fma(-alo, bs[u - 1], in));
                    prev = om;
                    const double wbu = wb[u];
                    const double v = fma(fma(-ca, mb[u], om) * wbu, twa, -qb[u]);
                    const double err = coef * wbu;
                    hv = fmax(hv, v + err);
                    lv = fmax(lv, v - err);
                }
                const double lo = fmax(qa - hv - floor_e, 0.0);
                const double hi = fmax(qa - lv + floor_e, lo);
                it_a[jj * SHP_WARP + lane] = lo;
                it_e[jj * SHP_WARP + lane] = hi;
                __syncwarp();
            }
            done = l;
            if (active) {
                const synfire_u64 cand = k * per_series + len_off[lidx] + s;
                for (unsigned jj = 0; jj < n; ++jj) {
                    const double lo = it_a[jj * SHP_WARP + lane], hi = it_e[jj * SHP_WARP + lane];
                    if (debug) {
                        debug[(cand * n + jj) * 2] = lo;
                        debug[(cand * n + jj) * 2 + 1] = hi;
                    }
                    double av, ev;
                    if (jj == k) {
                        av = 0.0;  // a window's own series: exactly 0 on every path
                        ev = 0.0;
                    } else {
                        // centre_radius, then snap_bounded (shapelet::distance).
                        av = (lo + hi) / 2.0;
                        ev = (hi - lo) / 2.0 + SHP_EPS * fabs(hi);
                        if (av + ev < SHP_MATCH_FLOOR) {
                            av = 0.0;
                            ev = 0.0;
                        } else if (av - ev < SHP_MATCH_FLOOR) {
                            const double half = (av + ev) / 2.0;
                            av = half;
                            ev = half;
                        }
                    }
                    if (op == 1) av = fmax(av, base[jj]);
                    else if (op == 2) av = fmin(av, base[jj]);
                    it_a[jj * SHP_WARP + lane] = av;
                    it_e[jj * SHP_WARP + lane] = ev;
                    it_i[jj * SHP_WARP + lane] = jj;
                }
                shp_sort(it_a + lane, it_e + lane, it_i + lane, n);
                double rec[4];
                shp_scan(it_a + lane, it_e + lane, it_i + lane, sufmin + lane, cnt + lane,
                         bas + lane, n, cls, totals, classes, xlogx, h_total, rec);
                rec_g_safe[cand] = rec[0];
                rec_gap_lo[cand] = rec[1];
                rec_gap_hi[cand] = rec[2];
                rec_g_up[cand] = rec[3];
            }
            __syncwarp();
        }
    }
}

// G* of a launch: out = max over records of order(g_safe).
__global__ void shapelet_max_gain(const double* __restrict__ g_safe, synfire_u64 count,
                                  synfire_u64* out) {
    for (synfire_u64 i = (synfire_u64)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (synfire_u64)gridDim.x * blockDim.x)
        atomicMax(out, shp_order(g_safe[i]));
}

// gap* of a launch: out = max of order(gap_lo) over the records with g_safe == g.
__global__ void shapelet_max_gap(const double* __restrict__ g_safe,
                                 const double* __restrict__ gap_lo, synfire_u64 count, double g,
                                 synfire_u64* out) {
    for (synfire_u64 i = (synfire_u64)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (synfire_u64)gridDim.x * blockDim.x)
        if (g_safe[i] == g) atomicMax(out, shp_order(gap_lo[i]));
}

// Appends the records that may hold the best candidate (g, gap: G*, gap* so far) to the pool:
// pool_u [cap][3] = (series, start, length), pool_r [cap][4] = record. flags[0] = overflow.
__global__ void shapelet_compact(const double* __restrict__ g_safe,
                                 const double* __restrict__ gap_lo,
                                 const double* __restrict__ gap_hi,
                                 const double* __restrict__ g_up, synfire_u64 count, double g,
                                 double gap, const unsigned* __restrict__ subset,
                                 const unsigned* __restrict__ lengths, unsigned nlen,
                                 const unsigned* __restrict__ len_off, unsigned* pool_u,
                                 double* pool_r, unsigned* pool_count, unsigned cap,
                                 unsigned* flags) {
    const synfire_u64 per_series = len_off[nlen];
    for (synfire_u64 i = (synfire_u64)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (synfire_u64)gridDim.x * blockDim.x) {
        const double gs = g_safe[i], gh = gap_hi[i], gu = g_up[i];
        const bool keep = (gs >= g - SHP_GAIN_SLACK && gh >= gap) || gu >= g - SHP_GAIN_SLACK;
        if (!keep) continue;
        const unsigned slot = atomicAdd(pool_count, 1u);
        if (slot >= cap) {
            flags[0] = 1u;
            continue;
        }
        const unsigned k = (unsigned)(i / per_series);
        const unsigned r = (unsigned)(i % per_series);
        unsigned lo = 0, hi = nlen;  // largest lidx with len_off[lidx] <= r
        while (hi - lo > 1) {
            const unsigned mid = (lo + hi) / 2;
            if (len_off[mid] <= r) lo = mid; else hi = mid;
        }
        pool_u[3 * slot] = subset[k];
        pool_u[3 * slot + 1] = r - len_off[lo];
        pool_u[3 * slot + 2] = lengths[lo];
        pool_r[4 * slot] = gs;
        pool_r[4 * slot + 1] = gap_lo[i];
        pool_r[4 * slot + 2] = gh;
        pool_r[4 * slot + 3] = gu;
    }
}

}  // extern "C"
