// Soft-DTW on the GPU (src/softdtw/gpu.rs, src/device/softdtw.rs).
//
// Cuturi & Blondel 2017: R(i, j) = d(i, j) + softmin_g(R(i-1, j-1), R(i-1, j), R(i, j-1)),
// d = squared Euclidean cost (fused: computed from the inputs, never stored), E from the
// backward pass (their Algorithm 2) gives the gradients. Layout after the cuTimeWarp report
// (papers/soft-dtw-gpu-cutimewarp.tex): the DP runs as an anti-diagonal wavefront, here *inside
// a warp*: lane l owns ROWS consecutive rows of a strip of 32 * ROWS rows and handles column
// j at step j + l, so the cell above arrives from lane l - 1 by one register shuffle per step
// and the matrix is never stored. Rows longer than one strip are done strip by strip through a
// boundary row (O(M) per warp). One long pair is tiled: tiles of 32 * ROWS rows by TILE_COLS
// columns, one warp each, launched one tile anti-diagonal at a time; tile boundaries go through
// three rotating row and column buffers (O(N + M)).
//
// Arithmetic: everything is scaled to base 2, r = R * log2(e) / gamma, so the soft-min is
// mu - log2(1 + 2^(mu - b) + 2^(mu - c)) with the MUFU ex2/lg2 instructions on arguments that
// are differences of neighbouring cells (exact enough in f32; the smallest term is exactly 1,
// so two exponentials per cell). Values keep r in f32 (relative error ~ cells along the path *
// 2^-24). Gradients keep r in f64 (differences of neighbouring cells are converted to f32 for
// ex2): f32 r of magnitude |R| / gamma would put an error of ulp(|R| / gamma) into every
// weight (1e-3 at gamma = 0.01, |R| = 100). (A double-float r = hi + lo in f32 arithmetic was
// tried: exact enough, but 25% slower on an H100.)
//
// Gradients, two paths per pair (sdtw_batch chooses):
// - Marginals (the fast path): E(i, j) = 2^(r(n, m) - alpha(i, j) - beta(i, j) + d(i, j)),
//   the forward-backward form of Cuturi & Blondel's E: alpha is the forward pass, beta the
//   same recursion run from (n, m) backwards. The forward pass stores alpha in 4 bytes a cell
//   (fixed-point offsets from a base per lane and step, coalesced), the backward pass runs beta
//   in f64 and forms each E on its own, so rounding does not build up along paths. When a
//   relevant cell's offset exceeds the fixed-point range (2^19 base-2 units: gamma far below
//   0.01 with costs in the thousands), the pair is redone by weights.
// - Weights (exact at any magnitude): the forward pass stores each cell's three incoming
//   soft-min weights (8 bytes, laid out [step][lane][row]: the two smaller ones, the largest as
//   1 - their sum, its index in the low mantissa bits of the first), and the backward pass is
//   their Algorithm 2 as multiply-adds: E(i, j) = sum over successors s of E(s) * w_s(i, j),
//   E(N, M) = 1.

#if defined(__CUDA_ARCH__)
__device__ __forceinline__ float sdtw_ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float sdtw_lg2(float x) { float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
#define SDTW_SHFL_UP(v, k) sdtw_shfl_up((v), (k))
#define SDTW_SHFL_DOWN(v, k) sdtw_shfl_down((v), (k))
#define SDTW_SYNCWARP() __syncwarp()
#define SDTW_ANY(p) __any_sync(0xffffffffu, (p))
#else
// Host builds (tools/check-kernels.sh): tools/softdtw-emulation.cpp defines the warp
// primitives with 32 threads before including this file; the syntax check uses stand-ins.
__device__ __forceinline__ float sdtw_ex2(float x) { return exp2f(x); }
__device__ __forceinline__ float sdtw_lg2(float x) { return log2f(x); }
#ifndef SDTW_SHFL_UP
#define SDTW_SHFL_UP(v, k) (v)
#define SDTW_SHFL_DOWN(v, k) (v)
#define SDTW_SYNCWARP()
#define SDTW_ANY(p) (p)
#endif
#endif

// tools/softdtw-emulation.cpp counts which gradient path each pair took.
#ifndef SDTW_COUNT_PATH
#define SDTW_COUNT_PATH(marginals)
#endif

#define SDTW_INF_F __int_as_float(0x7f800000)
#define SDTW_INF_D __longlong_as_double(0x7ff0000000000000LL)

typedef unsigned int sdtw_u32;
typedef long long sdtw_i64;

template <typename T> __device__ __forceinline__ T sdtw_inf();
template <> __device__ __forceinline__ float sdtw_inf<float>() { return SDTW_INF_F; }
template <> __device__ __forceinline__ double sdtw_inf<double>() { return SDTW_INF_D; }

#if defined(__CUDA_ARCH__)
template <typename T> __device__ __forceinline__ T sdtw_shfl_up(T v, int k) { return __shfl_up_sync(0xffffffffu, v, k); }
template <typename T> __device__ __forceinline__ T sdtw_shfl_down(T v, int k) { return __shfl_down_sync(0xffffffffu, v, k); }
#endif

template <typename T> __device__ __forceinline__ T sdtw_zero() { return (T)0; }

__device__ __forceinline__ bool sdtw_less(float a, float b) { return a < b; }
__device__ __forceinline__ bool sdtw_less(double a, double b) { return a < b; }
// Minimum and (lo, hi) of values that are never NaN: FMNMX in f32; in f64 one comparison and
// selects (fmin on doubles adds NaN fix-ups and moves).
__device__ __forceinline__ float sdtw_min(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double sdtw_min(double a, double b) { return a < b ? a : b; }
__device__ __forceinline__ void sdtw_sort2(float a, float b, float* lo, float* hi) {
    *lo = fminf(a, b);
    *hi = fmaxf(a, b);
}
__device__ __forceinline__ void sdtw_sort2(double a, double b, double* lo, double* hi) {
    const bool ab = a < b;
    *lo = ab ? a : b;
    *hi = ab ? b : a;
}
__device__ __forceinline__ bool sdtw_finite(float a) { return a < SDTW_INF_F; }
__device__ __forceinline__ bool sdtw_finite(double a) { return a < SDTW_INF_D; }
// a - b as f32 (a finite; b may be +inf, giving -inf).
__device__ __forceinline__ float sdtw_diff(float a, float b) { return a - b; }
__device__ __forceinline__ float sdtw_diff(double a, double b) { return (float)(a - b); }
// a + t (a finite).
__device__ __forceinline__ float sdtw_add(float a, float t) { return a + t; }
__device__ __forceinline__ double sdtw_add(double a, float t) { return a + (double)t; }
__device__ __forceinline__ double sdtw_to_double(float a) { return (double)a; }
__device__ __forceinline__ double sdtw_to_double(double a) { return a; }

// Cell (i, j), 1-based, lies inside the Sakoe-Chiba band (|i M - j N| <= W min(N, M);
// band < 0: no band). Same rule as softdtw::Band on the host.
__device__ __forceinline__ bool sdtw_in_band(sdtw_i64 i, sdtw_i64 j, sdtw_i64 n, sdtw_i64 m,
                                             sdtw_i64 band) {
    if (band < 0) return true;
    sdtw_i64 a = i * m - j * n;
    if (a < 0) a = -a;
    return a <= band * (n < m ? n : m);
}

// One soft-min step in base-2 units. Returns r(i, j); with W, also the three incoming
// weights (diag, up, left), all 0 when the cell is unreachable.
template <typename Acc, bool W>
__device__ __forceinline__ Acc sdtw_cell(Acc diag, Acc up, Acc left, float cost, float* w) {
    Acc mu = sdtw_less(diag, up) ? diag : up;
    mu = sdtw_less(mu, left) ? mu : left;
    if (!sdtw_finite(mu)) {
        if (W) { w[0] = 0.f; w[1] = 0.f; w[2] = 0.f; }
        return sdtw_inf<Acc>();
    }
    const float ed = sdtw_ex2(sdtw_diff(mu, diag));
    const float eu = sdtw_ex2(sdtw_diff(mu, up));
    const float el = sdtw_ex2(sdtw_diff(mu, left));
    const float s = ed + eu + el;  // >= 1: the minimum's term is exactly 1
    if (W) {
        const float inv = 1.0f / s;
        w[0] = ed * inv; w[1] = eu * inv; w[2] = el * inv;
    }
    return sdtw_add(mu, cost - sdtw_lg2(s));
}

// r(i, j) = cost + soft-min of the three neighbours, without weights: the smallest neighbour's
// term is exactly 1, so only the other two need an exponential (and, with Acc = double, a
// conversion each). Also returns the soft-min's parts: r = mu + (cost - l), l = log2 of the
// sum of the three terms (mu = +inf, l = 0 when the cell is unreachable).
template <typename Acc>
__device__ __forceinline__ Acc sdtw_cell_parts(Acc a, Acc b, Acc c, float cost, Acc* mu_out,
                                               float* l_out) {
    // Two comparisons: mu is the smallest; the other two terms need no order.
    Acc lo, hi, mu, mid;
    sdtw_sort2(a, b, &lo, &hi);
    sdtw_sort2(lo, c, &mu, &mid);
    const float l = sdtw_lg2(1.0f + sdtw_ex2(sdtw_diff(mu, mid)) + sdtw_ex2(sdtw_diff(mu, hi)));
    // Unreachable (mu = +inf): the differences are NaN; r = +inf and l = 0, without a branch.
    *l_out = sdtw_finite(mu) ? l : 0.f;
    *mu_out = mu;
    return sdtw_add(mu, cost - *l_out);
}

template <typename Acc>
__device__ __forceinline__ Acc sdtw_cell_value(Acc a, Acc b, Acc c, float cost) {
    Acc mu;
    float l;
    return sdtw_cell_parts<Acc>(a, b, c, cost, &mu, &l);
}

// Packs three weights summing to 1 into 8 bytes: the two smaller ones exactly, the index of
// the largest in the low two mantissa bits of the first (a relative change below 2^-21).
__device__ __forceinline__ float2 sdtw_pack(const float* w) {
    int big = 0;
    if (w[1] > w[big]) big = 1;
    if (w[2] > w[big]) big = 2;
    const float a = big == 0 ? w[1] : w[0];
    const float b = big == 2 ? w[1] : w[2];
    // Unreachable cells (all weights 0) get index 3.
    if (!(w[big] > 0.f)) big = 3;
    const int bits = (__float_as_int(a) & ~3) | big;
    return make_float2(__int_as_float(bits), b);
}

__device__ __forceinline__ void sdtw_unpack(float2 p, float* w) {
    const int bits = __float_as_int(p.x);
    const int big = bits & 3;
    const float a = __int_as_float(bits & ~3);
    const float b = p.y;
    const float rest = 1.0f - (a + b);
    const float c = rest > 0.f ? rest : 0.f;
    if (big == 0) { w[0] = c; w[1] = a; w[2] = b; }
    else if (big == 1) { w[0] = a; w[1] = c; w[2] = b; }
    else if (big == 2) { w[0] = a; w[1] = b; w[2] = c; }
    else { w[0] = 0.f; w[1] = 0.f; w[2] = 0.f; }
}

// The input rows a lane owns (DIMS = 1: in registers; DIMS = 0: `dims` channels read from
// global memory through the cache).
template <int ROWS, int DIMS>
struct SdtwRows {
    float x[DIMS == 1 ? ROWS : 1];
    const float* base;  // first row of the lane, time-major
    int dims;
    __device__ __forceinline__ void load(const float* xs, int first, int n, int d) {
        base = xs + (sdtw_i64)first * d;
        dims = d;
        if (DIMS == 1) {
#pragma unroll
            for (int k = 0; k < ROWS; ++k) x[k] = first + k < n ? xs[first + k] : 0.f;
        }
    }
    __device__ __forceinline__ float cost(int k, const float* y, float y0) const {
        if (DIMS == 1) {
            const float t = x[k] - y0;
            return t * t;
        }
        float s = 0.f;
        for (int c = 0; c < dims; ++c) {
            const float t = base[(sdtw_i64)k * dims + c] - y[c];
            s = fmaf(t, t, s);
        }
        return s;
    }
};

// The marginal path's forward values: alpha - base in fixed point, SDTW_FIX_BITS fractional
// bits in an int (range +-2^(31 - SDTW_FIX_BITS) base-2 units, absolute error at most
// 2^-(SDTW_FIX_BITS + 1)). Offsets at or beyond the range are stored as SDTW_FIX_FAR, +inf
// (unreachable cells) as SDTW_FIX_INF: the backward pass gives both E = 0, and sends the pair
// to the weights path if a far cell might be relevant. Fixed point, not f32: an f32 offset of
// size 2^k keeps only 23 - k fractional bits, and at small gamma relevant cells lie 10^4-10^5
// units above their lane's smallest (soft-DTW of random walks, gamma = 0.01).
#define SDTW_FIX_BITS 12
#define SDTW_FIX_FAR 0x7fffffff
#define SDTW_FIX_INF 0x7ffffffe
// Offsets are never below -|base| 2^-24 (alpha >= the lane's smallest, of which the base is
// the f32 rounding), so within range while |base| < SDTW_FIX_BASE_MAX = 2^41; the backward
// pass sends a pair whose base reaches it to the weights path (once per lane and step, not
// per cell).
#define SDTW_FIX_BASE_MAX 2199023255552.0f
// Offsets below this are stored; 2^(31 - SDTW_FIX_BITS) - 2 units, so rounding stays below the
// sentinels.
#define SDTW_FIX_MAX 524286.0
__device__ __forceinline__ int sdtw_fix(double d) {
    if (!(d < SDTW_FIX_MAX)) return d < SDTW_INF_D ? SDTW_FIX_FAR : SDTW_FIX_INF;
    // d > -2^17 while the base is below SDTW_FIX_BASE_MAX (else the pair is redone by
    // weights): round to nearest through the 1.5 * 2^52 magic number, whose low word is then
    // the two's complement integer.
    const double t = fma(d, (double)(1 << SDTW_FIX_BITS), 6755399441055744.0);
    return (int)(unsigned)__double_as_longlong(t);
}
// The offset back in base-2 units, exactly (an int times a power of two): the double with
// the bits of 2^52 + (a + 2^31), minus 2^52 + 2^31, on the f64 pipe rather than the
// conversion unit (which the soft-min's exponentials keep busy).
__device__ __forceinline__ double sdtw_unfix(int a) {
    const double t = __hiloint2double(0x43300000, a ^ (int)0x80000000);
    return (t - 4503601774854144.0) * (1.0 / (double)(1 << SDTW_FIX_BITS));
}

// One strip of 32 * ROWS rows (1-based rows i0 + 1 ..) against columns j0 + 1 .. j0 + ncols
// of a pair of lengths n x m. Boundaries, all in base-2 units:
//   top[c]  = r(i0, j0 + 1 + c) for c < ncols (null: row 0, all +inf);
//   corner  = r(i0, j0);
//   left[k] = r(i0 + 1 + k, j0) (null: +inf).
// Outputs (null to skip): bottom[c] = r(i0 + 32 ROWS, j0 + 1 + c) (lane 31), right[k] =
// r(i0 + 1 + k, j0 + ncols), *last = r(n, j0 + ncols) if row n lies in the strip. `store`
// (STORE, per strip, indexed by step t and the lane's row k):
//   SDTW_STORE_WEIGHTS: float2 [(t * 32 + lane) * ROWS + k], packed incoming weights;
//   SDTW_STORE_ALPHA:   int    [(t * ROWS + k) * 32 + lane], r - base by sdtw_fix (+inf:
//                       unreachable or beyond row n), then float [t * 32 + lane], base: the
//                       smallest r of the lane's rows at step t rounded to f32 (0 if none is
//                       finite); both coalesced across the warp in both passes.
// `bottom` may alias `top` (each top[c] is read at step c, bottom[c] written at step c + 31).
#define SDTW_STORE_NONE 0
#define SDTW_STORE_WEIGHTS 1
#define SDTW_STORE_ALPHA 2
template <typename Acc, int ROWS, int DIMS, int STORE>
__device__ void sdtw_strip(const float* __restrict__ xs, int n, const float* __restrict__ ys, int m,
                           int dims, float scale, sdtw_i64 band, int i0, int j0, int ncols,
                           const Acc* top, Acc corner, const Acc* left, Acc* bottom, Acc* right,
                           Acc* last, void* store) {
    const bool W = STORE == SDTW_STORE_WEIGHTS;
    float2* weights = (float2*)store;
    float* alpha = (float*)store;
    float* alpha_base = alpha + (sdtw_i64)(ncols + 31) * 32 * ROWS;
    const int lane = threadIdx.x & 31;
    const int first = i0 + lane * ROWS;  // 0-based first row of this lane
    const bool full = first + ROWS <= n && band < 0;
    SdtwRows<ROWS, DIMS> rows;
    rows.load(xs, first, n, dims);
    Acc prev[ROWS];
#pragma unroll
    for (int k = 0; k < ROWS; ++k) prev[k] = left ? left[lane * ROWS + k] : sdtw_inf<Acc>();
    Acc diag0 = lane == 0 ? corner : (left ? left[lane * ROWS - 1] : sdtw_inf<Acc>());
    Acc recv = sdtw_inf<Acc>();
    float ycarry = 0.f;
    const int steps = ncols + 31;
    for (int t = 0; t < steps; ++t) {
        const int c = t - lane;  // column within the strip, 0-based
        // y for this lane's column arrives from lane - 1 (lane 0 loads it).
        float yv = DIMS == 1 ? (float)SDTW_SHFL_UP(ycarry, 1) : 0.f;
        Acc up0 = SDTW_SHFL_UP(recv, 1);
        if (lane == 0) {
            up0 = top && c < ncols ? top[c] : sdtw_inf<Acc>();
            if (DIMS == 1 && c < ncols) yv = ys[j0 + c];
        }
        Acc mine = sdtw_inf<Acc>();
        if (c >= 0 && c < ncols) {
            const int j = j0 + c;  // 0-based column
            const float* y = ys + (sdtw_i64)j * dims;
            Acc diag = diag0, up = up0;
            if (!W && full) {
                // All of the lane's rows exist and there is no band: no checks per cell.
#pragma unroll
                for (int k = 0; k < ROWS; ++k) {
                    const Acc r = sdtw_cell_value<Acc>(diag, up, prev[k], rows.cost(k, y, yv) * scale);
                    diag = prev[k];
                    prev[k] = r;
                    up = r;
                }
            } else {
#pragma unroll
                for (int k = 0; k < ROWS; ++k) {
                    const sdtw_i64 i1 = first + k + 1, j1 = j + 1;
                    float w[3];
                    Acc r;
                    if (first + k < n && sdtw_in_band(i1, j1, n, m, band)) {
                        const float cost = rows.cost(k, y, yv) * scale;
                        if (W) r = sdtw_cell<Acc, true>(diag, up, prev[k], cost, w);
                        else r = sdtw_cell_value<Acc>(diag, up, prev[k], cost);
                    } else {
                        r = sdtw_inf<Acc>();
                        w[0] = w[1] = w[2] = 0.f;
                    }
                    if (W) weights[(t * 32 + lane) * ROWS + k] = sdtw_pack(w);
                    diag = prev[k];
                    prev[k] = r;
                    up = r;
                }
            }
            if (last && c == ncols - 1) {
#pragma unroll
                for (int k = 0; k < ROWS; ++k)
                    if (first + k + 1 == n) *last = prev[k];
            }
            if (STORE == SDTW_STORE_ALPHA) {
                // r relative to the smallest of the lane's rows at this step, rounded to f32
                // (0 when none is finite), as fixed point: the offsets of cells near the
                // alignment stay small.
                Acc lo = prev[0];
#pragma unroll
                for (int k = 1; k < ROWS; ++k) lo = sdtw_min(lo, prev[k]);
                const float b = sdtw_finite(lo) ? (float)lo : 0.f;
                alpha_base[t * 32 + lane] = b;
                int* out = (int*)alpha + (sdtw_i64)t * ROWS * 32 + lane;
#pragma unroll
                for (int k = 0; k < ROWS; ++k)
                    out[k * 32] = sdtw_fix(sdtw_to_double(prev[k]) - (double)b);
            }
            diag0 = up0;
            mine = prev[ROWS - 1];
            if (lane == 31 && bottom) bottom[c] = mine;
            if (right && c == ncols - 1) {
#pragma unroll
                for (int k = 0; k < ROWS; ++k) right[lane * ROWS + k] = prev[k];
            }
        } else if (W) {
#pragma unroll
            for (int k = 0; k < ROWS; ++k) weights[(t * 32 + lane) * ROWS + k] = make_float2(0.f, 0.f);
        }
        recv = mine;
        ycarry = yv;
        SDTW_SYNCWARP();
    }
}

// The backward pass over one strip (after sdtw_strip with W stored `weights`): E per cell,
// gradients accumulated into gx (this strip's rows, [32 ROWS][dims], registers or global) and
// gy ([m][dims], global, this warp's own). `below` carries the contributions of the strip
// below's first row: below[c] = (E * w_up, E * w_diag) at column c; this strip writes the same
// for the strip above into `above` (may alias `below`: each below[c] is read before above[c]
// is written). `end_here`: row n lies in this strip (E(n, m) = 1).
template <int ROWS, int DIMS>
__device__ void sdtw_strip_backward(const float* __restrict__ xs, int n, const float* __restrict__ ys,
                                    int m, int dims, int i0, const float2* weights,
                                    const float2* below, float2* above, float* gx, float* gy,
                                    bool accumulate_y) {
    const int lane = threadIdx.x & 31;
    const int first = i0 + lane * ROWS;
    SdtwRows<ROWS, DIMS> rows;
    rows.load(xs, first, n, dims);
    float accx[DIMS == 1 ? ROWS : 1];
#pragma unroll
    for (int k = 0; k < (DIMS == 1 ? ROWS : 1); ++k) accx[k] = 0.f;
    float pl[ROWS], pd[ROWS];  // pushes to the left and diagonal from the previous column
#pragma unroll
    for (int k = 0; k < ROWS; ++k) { pl[k] = 0.f; pd[k] = 0.f; }
    float shU = 0.f, shD = 0.f, shDprev = 0.f, shY = 0.f, ysum = 0.f;
    const int steps = m + 31;
    for (int t = 0; t < steps; ++t) {
        const int c = m - 1 - (t - (31 - lane));  // column, 0-based, going left
        float inU = shU, inD = shDprev;
        if (lane == 31) {
            inU = below && c >= 0 && c < m ? below[c].x : 0.f;
            inD = below && c + 1 < m && c + 1 >= 0 ? below[c + 1].y : 0.f;
        }
        float push_u0 = 0.f, push_d0 = 0.f;
        if (c >= 0 && c < m) {
            const float* y = ys + (sdtw_i64)c * dims;
            const float y0 = DIMS == 1 ? ys[c] : 0.f;
            // The forward step at which this lane handled column c.
            const int tf = c + lane;
            float fromBelow = inU, fromDiag = inD;
            float sumy = 0.f;
#pragma unroll
            for (int kk = 0; kk < ROWS; ++kk) {
                const int k = ROWS - 1 - kk;
                const int i = first + k;  // 0-based row
                float e = 0.f;
                if (i < n) e = (i == n - 1 && c == m - 1) ? 1.0f : fromBelow + fromDiag + pl[k];
                float w[3];
                sdtw_unpack(weights[(tf * 32 + lane) * ROWS + k], w);
                const float pu = e * w[1];
                const float old_pd = pd[k];
                pd[k] = e * w[0];
                pl[k] = e * w[2];
                fromBelow = pu;
                fromDiag = old_pd;
                if (e != 0.f) {
                    if (DIMS == 1) {
                        const float diff = rows.x[k] - y0;
                        accx[k] = fmaf(e, diff, accx[k]);
                        sumy = fmaf(e, -diff, sumy);
                    } else {
                        for (int ch = 0; ch < dims; ++ch) {
                            const float diff = rows.base[(sdtw_i64)k * dims + ch] - y[ch];
                            gx[(sdtw_i64)(lane * ROWS + k) * dims + ch] += e * diff;
                            gy[(sdtw_i64)c * dims + ch] -= e * diff;
                        }
                    }
                }
                if (k == 0) { push_u0 = pu; push_d0 = pd[0]; }
            }
            if (DIMS == 1) {
                // Column sums ride down the lanes with the wavefront: lane l + 1 handled this
                // column one step earlier and passed on the sum of the lanes below.
                ysum = sumy + (lane == 31 ? 0.f : shY);
                if (lane == 0) {
                    if (accumulate_y) gy[c] += ysum; else gy[c] = ysum;
                }
            }
            if (lane == 0 && above) above[c] = make_float2(push_u0, push_d0);
        }
        shY = SDTW_SHFL_DOWN(ysum, 1);
        ysum = 0.f;
        shDprev = shD;
        shU = SDTW_SHFL_DOWN(push_u0, 1);
        shD = SDTW_SHFL_DOWN(push_d0, 1);
        SDTW_SYNCWARP();
    }
    if (DIMS == 1) {
#pragma unroll
        for (int k = 0; k < ROWS; ++k) gx[lane * ROWS + k] += accx[k];
    }
}

// Marginals below 2^-40 are negligible (a pair has far fewer than 2^20 cells).
#define SDTW_RELEVANT 40.0f

// The backward pass over one strip by marginals (after sdtw_strip with SDTW_STORE_ALPHA stored
// alpha in `alpha`). beta(i, j) = cost(i, j) + softmin(beta(i + 1, j), beta(i, j + 1),
// beta(i + 1, j + 1)), beta(n, m) = cost(n, m), runs in f64 as the mirror image of the forward
// pass (columns right to left, lane 31 first), and the alignment marginal of every cell is
//   E(i, j) = 2^(r(n, m) - alpha(i, j) - beta(i, j) + cost(i, j))
// (all paths through the cell over all paths: the forward-backward identity behind Cuturi &
// Blondel 2017, Algorithm 2, whose E is the same matrix). Each E is computed on its own, so
// rounding does not build up along paths as it does in the recursion over weights. Gradients
// go into gx (this strip's rows, stored) and gy as in sdtw_strip_backward. `below` holds
// beta of the row under the strip (null: +inf), `above` receives beta of its first row (may
// alias `below`). `alpha` is the strip's SDTW_STORE_ALPHA store (offsets, then bases).
// Returns true in a lane that met a cell beyond the fixed-point range that may be relevant (E
// above 2^-40): the caller then redoes the pair by weights.
// One cell of sdtw_strip_beta: beta(i, c) from its successors, the marginal E and its
// gradient terms, the range check (`unsafe`). Returns beta.
template <int ROWS, int DIMS>
__device__ __forceinline__ double sdtw_beta_cell(const SdtwRows<ROWS, DIMS>& rows, int k,
                                                 const float* y, float yv, float scale,
                                                 double diag, double down, double right,
                                                 double rb, int a, int lane, int c, int dims,
                                                 float* accx, float& sumy, float* gx, float* gy,
                                                 bool& unsafe) {
    const float cost = rows.cost(k, y, yv) * scale;
    double mu;
    float l;
    const double r = sdtw_cell_parts<double>(diag, down, right, cost, &mu, &l);
    // The exponent of E relative to the base b of the forward pass:
    //   r_nm - alpha - beta + cost = ((r_nm - b - mu) - (alpha - b)) + l
    // with beta = mu + cost - l: the large terms cancel in f64, whatever the magnitude of r and
    // of the cell's cost; alpha - b is exact (fixed point), so the exponent is off by at most
    // 2^-13 plus the f64 and f32 roundings.
    const float ex = (float)((rb - mu) - sdtw_unfix(a)) + l;
    // Offsets beyond the fixed-point range: SDTW_FIX_FAR decodes to 2^19 - 2^-12, at most 2
    // units above the true offset (stored as FAR from SDTW_FIX_MAX = 2^19 - 2 up), so the
    // true exponent is at most ex + 2; if that may make the cell relevant, the pair goes to
    // the weights path.
    const bool far = a >= SDTW_FIX_INF;
    const float e = far ? 0.f : sdtw_ex2(ex);
    if (a == SDTW_FIX_FAR && ex > -(SDTW_RELEVANT + 2.0f)) unsafe = true;
    if (DIMS == 1) {
        const float diff = rows.x[k] - yv;
        accx[k] = fmaf(e, diff, accx[k]);
        sumy = fmaf(e, -diff, sumy);
    } else if (e != 0.f) {
        for (int ch = 0; ch < dims; ++ch) {
            const float diff = rows.base[(sdtw_i64)k * dims + ch] - y[ch];
            gx[(sdtw_i64)(lane * ROWS + k) * dims + ch] += e * diff;
            gy[(sdtw_i64)c * dims + ch] -= e * diff;
        }
    }
    return r;
}

template <int ROWS, int DIMS>
__device__ bool sdtw_strip_beta(const float* __restrict__ xs, int n, const float* __restrict__ ys,
                                int m, int dims, float scale, sdtw_i64 band, int i0,
                                const float* alpha, double r_nm, const double* below,
                                double* above, float* gx, float* gy, bool accumulate_y) {
    const int lane = threadIdx.x & 31;
    const int first = i0 + lane * ROWS;
    const bool full = first + ROWS <= n && band < 0;
    SdtwRows<ROWS, DIMS> rows;
    rows.load(xs, first, n, dims);
    float accx[DIMS == 1 ? ROWS : 1];
#pragma unroll
    for (int k = 0; k < (DIMS == 1 ? ROWS : 1); ++k) accx[k] = 0.f;
    // beta(first + k, c + 1), the previous step's column. Row n (beyond the last) starts at 0
    // so that cell (n, m) gets beta = cost (its diagonal successor is "0"); after the first
    // step it is +inf like every missing cell.
    double prev[ROWS];
#pragma unroll
    for (int k = 0; k < ROWS; ++k) prev[k] = first + k == n ? 0.0 : SDTW_INF_D;
    double diag0 = first + ROWS == n ? 0.0 : SDTW_INF_D;  // beta(first + ROWS, c + 1)
    double recv = SDTW_INF_D;
    float ycarry = 0.f, shY = 0.f, ysum = 0.f;
    bool unsafe = false;
    const int steps = m + 31;
    // At step t every lane reads the forward pass's step m + 30 - t (the step at which it
    // handled the same column); the next step's offsets and base are loaded one step ahead.
    const float* alpha_base = alpha + (sdtw_i64)steps * 32 * ROWS;
    const int* alpha_fix = (const int*)alpha;
    int a_next[ROWS];
    float b_next;
    {
        const int* in = alpha_fix + (sdtw_i64)(steps - 1) * ROWS * 32 + lane;
#pragma unroll
        for (int k = 0; k < ROWS; ++k) a_next[k] = in[k * 32];
        b_next = alpha_base[(steps - 1) * 32 + lane];
    }
    for (int t = 0; t < steps; ++t) {
        const int c = m - 1 - (t - (31 - lane));  // column, 0-based, going left
        int a_cur[ROWS];
#pragma unroll
        for (int k = 0; k < ROWS; ++k) a_cur[k] = a_next[k];
        const float b_cur = b_next;
        if (t + 1 < steps) {
            const int tf = steps - 2 - t;
            const int* in = alpha_fix + (sdtw_i64)tf * ROWS * 32 + lane;
#pragma unroll
            for (int k = 0; k < ROWS; ++k) a_next[k] = in[k * 32];
            b_next = alpha_base[tf * 32 + lane];
        }
        // Lane l + 1 handled column c one step earlier: its first row's beta and the y value.
        float yv = DIMS == 1 ? (float)SDTW_SHFL_DOWN(ycarry, 1) : 0.f;
        double down0 = SDTW_SHFL_DOWN(recv, 1);
        if (lane == 31) {
            down0 = below && c >= 0 && c < m ? below[c] : SDTW_INF_D;
            if (DIMS == 1 && c >= 0 && c < m) yv = ys[c];
        }
        double mine = SDTW_INF_D;
        float sumy = 0.f;
        if (c >= 0 && c < m) {
            const float* y = ys + (sdtw_i64)c * dims;
            const double rb = r_nm - (double)b_cur;
            if (!(fabsf(b_cur) < SDTW_FIX_BASE_MAX)) unsafe = true;
            double down = down0, diag = diag0;
            if (full) {
                // All of the lane's rows exist and there is no band: no checks per cell.
#pragma unroll
                for (int kk = 0; kk < ROWS; ++kk) {
                    const int k = ROWS - 1 - kk;
                    const double r = sdtw_beta_cell<ROWS, DIMS>(
                        rows, k, y, yv, scale, diag, down, prev[k], rb, a_cur[k], lane, c, dims,
                        accx, sumy, gx, gy, unsafe);
                    diag = prev[k];
                    prev[k] = r;
                    down = r;
                }
            } else {
#pragma unroll
                for (int kk = 0; kk < ROWS; ++kk) {
                    const int k = ROWS - 1 - kk;
                    const int i = first + k;  // 0-based row
                    double r = SDTW_INF_D;
                    if (i < n && sdtw_in_band(i + 1, c + 1, n, m, band))
                        r = sdtw_beta_cell<ROWS, DIMS>(rows, k, y, yv, scale, diag, down, prev[k],
                                                       rb, a_cur[k], lane, c, dims, accx, sumy,
                                                       gx, gy, unsafe);
                    diag = prev[k];
                    prev[k] = r;
                    down = r;
                }
            }
            diag0 = down0;
            mine = prev[0];
            if (DIMS == 1) {
                ysum = sumy + (lane == 31 ? 0.f : shY);
                if (lane == 0) {
                    if (accumulate_y) gy[c] += ysum; else gy[c] = ysum;
                }
            }
            if (lane == 0 && above) above[c] = mine;
        }
        shY = SDTW_SHFL_DOWN(ysum, 1);
        ysum = 0.f;
        recv = mine;
        ycarry = yv;
        SDTW_SYNCWARP();
        // A pair the marginals cannot take stops early (the caller redoes it by weights).
        if ((t & 15) == 15 && SDTW_ANY(unsafe)) return true;
    }
    if (DIMS == 1) {
#pragma unroll
        for (int k = 0; k < ROWS; ++k) gx[lane * ROWS + k] = accx[k];
    }
    return unsafe;
}

// Which pair a warp handles: mode 0 = all pairs (p = ia * nb + ib), mode 1 = paired (ia = ib).
__device__ __forceinline__ void sdtw_pair(sdtw_u32 p, sdtw_u32 na, sdtw_u32 nb, sdtw_u32 mode,
                                          sdtw_u32* ia, sdtw_u32* ib) {
    // All pairs are visited in a skewed order (ia = (p / nb + p % nb) mod na): warps running
    // at the same time then work on different series of both sets, so their gradient sums
    // (f32 atomics into ga and gb) do not queue on the same addresses.
    if (mode == 0) { *ib = p % nb; *ia = (p / nb + *ib) % na; }
    else { *ia = p; *ib = p; }
}

// Bytes of a warp's scratch, in this order (the host computes the same, src/device/softdtw.rs):
//   hrow   Acc    [m_max + 1]        strip boundary row
//   last   Acc    [2]                r(n, m) of the pair
//   GRAD only:
//   wts    float2 [strips_max * (m_max + 31) * 32 * ROWS]  weights (exact path), or alpha as
//                                    f32 in its first half (marginal path)
//   eb     8 bytes [m_max]           strip-to-strip backward boundary (float2 or double)
//   gy     float  [m_max * dims]
//   gx     float  [strips_max * 32 * ROWS * dims]
// Every part starts on a 16-byte boundary.
__device__ __forceinline__ sdtw_i64 sdtw_align(sdtw_i64 b) { return (b + 15) & ~(sdtw_i64)15; }

// Batched soft-DTW, one warp per pair, persistent over pairs. A and B are concatenated
// time-major f32 series with offsets in time steps, aoff [na + 1], boff [nb + 1]. values[p] =
// sdtw_gamma(a_ia, b_ib) in the inputs' units (scale = log2(e) / gamma). With GRAD, also
// d/da_ia and d/db_ib, added (mode 0: atomically, summed over the other set) or stored (mode
// 1) into ga / gb, shaped like ax / bx.
//
// Gradients take one of two paths per pair, both with r in f64:
//   marginals (sdtw_strip_beta): the forward pass stores alpha as fixed-point offsets from a
//     base per lane and step (4.5 bytes a cell for 8 rows), the backward pass runs beta and
//     forms each E directly. Taken when every relevant cell's offset is within range;
//   weights (sdtw_strip_backward): the forward pass stores each cell's soft-min weights (8
//     bytes), the backward pass runs the recursion over E. Accurate at any magnitude (small
//     gamma with large costs), with almost twice the memory traffic.
// A pair the marginals could not take is redone by weights, and the warp starts its next
// pairs there, 1, 2, 4, .. 64 of them after consecutive misses, so a batch the marginals do
// not suit pays for few wasted passes.
template <typename Acc, int ROWS, int DIMS, bool GRAD>
__device__ void sdtw_batch(const float* __restrict__ ax, const sdtw_u32* __restrict__ aoff,
                           const float* __restrict__ bx, const sdtw_u32* __restrict__ boff,
                           sdtw_u32 na, sdtw_u32 nb, sdtw_u32 pairs, sdtw_u32 mode, int dims,
                           float scale, sdtw_i64 band, double* __restrict__ values, float* ga, float* gb,
                           char* scratch, sdtw_i64 stride, int m_max, int strips_max) {
    const int lane = threadIdx.x & 31;
    const sdtw_i64 warp = ((sdtw_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const sdtw_i64 warps = ((sdtw_i64)gridDim.x * blockDim.x) >> 5;
    char* base = scratch + warp * stride;
    sdtw_i64 off = 0;
    Acc* hrow = (Acc*)(base + off);
    off = sdtw_align(off + (sdtw_i64)(m_max + 1) * (sdtw_i64)sizeof(Acc));
    Acc* lastv = (Acc*)(base + off);
    off = sdtw_align(off + 2 * sizeof(Acc));
    float2* wts = (float2*)(base + off);
    off = sdtw_align(off + (sdtw_i64)strips_max * (m_max + 31) * 32 * ROWS * sizeof(float2));
    float2* eb = (float2*)(base + off);
    off = sdtw_align(off + (sdtw_i64)m_max * sizeof(float2));
    float* gy = (float*)(base + off);
    off = sdtw_align(off + (sdtw_i64)m_max * dims * sizeof(float));
    float* gx = (float*)(base + off);
    const int strip_rows = 32 * ROWS;
    // Warp-uniform: pairs still to start on the weights path, and the next such run's length
    // (doubling after each pair the marginals could not take, up to 64; 1 after a success).
    int skip = 0, backoff = 1;
    for (sdtw_i64 p = warp; p < pairs; p += warps) {
        sdtw_u32 ia, ib;
        sdtw_pair((sdtw_u32)p, na, nb, mode, &ia, &ib);
        const sdtw_i64 slot = mode == 0 ? (sdtw_i64)ia * nb + ib : p;
        const int n = (int)(aoff[ia + 1] - aoff[ia]);
        const int m = (int)(boff[ib + 1] - boff[ib]);
        const float* xs = ax + (sdtw_i64)aoff[ia] * dims;
        const float* ys = bx + (sdtw_i64)boff[ib] * dims;
        const int strips = (n + strip_rows - 1) / strip_rows;
        const sdtw_i64 strip_cells = (sdtw_i64)(m + 31) * 32 * ROWS;
        if (!GRAD) {
            for (int s = 0; s < strips; ++s) {
                SDTW_SYNCWARP();
                sdtw_strip<Acc, ROWS, DIMS, SDTW_STORE_NONE>(
                    xs, n, ys, m, dims, scale, band, s * strip_rows, 0, m,
                    s == 0 ? (const Acc*)0 : hrow, s == 0 ? sdtw_zero<Acc>() : sdtw_inf<Acc>(),
                    (const Acc*)0, s + 1 < strips ? hrow : (Acc*)0, (Acc*)0, lastv, (void*)0);
            }
            SDTW_SYNCWARP();
            if (lane == 0) values[slot] = sdtw_to_double(lastv[0]) / (double)scale;
            continue;
        }
        bool done = false;
        if (skip > 0) {
            --skip;
        } else {
            for (int k = lane; k < m * dims; k += 32) gy[k] = 0.f;
            float* alpha = (float*)wts;
            const sdtw_i64 alpha_cells = (sdtw_i64)(m + 31) * 32 * (ROWS + 1);
            for (int s = 0; s < strips; ++s) {
                SDTW_SYNCWARP();
                sdtw_strip<Acc, ROWS, DIMS, SDTW_STORE_ALPHA>(
                    xs, n, ys, m, dims, scale, band, s * strip_rows, 0, m,
                    s == 0 ? (const Acc*)0 : hrow, s == 0 ? sdtw_zero<Acc>() : sdtw_inf<Acc>(),
                    (const Acc*)0, s + 1 < strips ? hrow : (Acc*)0, (Acc*)0, lastv,
                    alpha + s * alpha_cells);
            }
            SDTW_SYNCWARP();
            const double r_nm = sdtw_to_double(lastv[0]);
            if (lane == 0) values[slot] = r_nm / (double)scale;
            bool unsafe = false;
            for (int s = strips - 1; s >= 0; --s) {
                float* gxs = gx + (sdtw_i64)s * strip_rows * dims;
                if (DIMS != 1)
                    for (int k = lane; k < strip_rows * dims; k += 32) gxs[k] = 0.f;
                SDTW_SYNCWARP();
                unsafe |= sdtw_strip_beta<ROWS, DIMS>(
                    xs, n, ys, m, dims, scale, band, s * strip_rows, alpha + s * alpha_cells,
                    r_nm, s + 1 < strips ? (const double*)eb : (const double*)0,
                    s > 0 ? (double*)eb : (double*)0, gxs, gy, s + 1 < strips);
                SDTW_SYNCWARP();
                if (SDTW_ANY(unsafe)) break;
            }
            done = !SDTW_ANY(unsafe);
            if (done) {
                backoff = 1;
            } else {
                skip = backoff;
                backoff = backoff < 64 ? 2 * backoff : 64;
            }
        }
        SDTW_COUNT_PATH(done);
        if (!done) {
            for (int k = lane; k < m * dims; k += 32) gy[k] = 0.f;
            for (int s = 0; s < strips; ++s) {
                SDTW_SYNCWARP();
                sdtw_strip<Acc, ROWS, DIMS, SDTW_STORE_WEIGHTS>(
                    xs, n, ys, m, dims, scale, band, s * strip_rows, 0, m,
                    s == 0 ? (const Acc*)0 : hrow, s == 0 ? sdtw_zero<Acc>() : sdtw_inf<Acc>(),
                    (const Acc*)0, s + 1 < strips ? hrow : (Acc*)0, (Acc*)0, lastv,
                    wts + s * strip_cells);
            }
            SDTW_SYNCWARP();
            const double r_nm = sdtw_to_double(lastv[0]);
            if (lane == 0) values[slot] = r_nm / (double)scale;
            for (int s = strips - 1; s >= 0; --s) {
                float* gxs = gx + (sdtw_i64)s * strip_rows * dims;
                for (int k = lane; k < strip_rows * dims; k += 32) gxs[k] = 0.f;
                SDTW_SYNCWARP();
                sdtw_strip_backward<ROWS, DIMS>(xs, n, ys, m, dims, s * strip_rows,
                                                wts + s * strip_cells,
                                                s + 1 < strips ? eb : (const float2*)0,
                                                s > 0 ? eb : (float2*)0, gxs, gy, s + 1 < strips);
                SDTW_SYNCWARP();
            }
        }
        SDTW_SYNCWARP();
        float* out = ga + (sdtw_i64)aoff[ia] * dims;
        for (int k = lane; k < n * dims; k += 32) {
            const float g = 2.0f * gx[k];
            if (mode == 0) atomicAdd(out + k, g); else out[k] = g;
        }
        float* outy = gb + (sdtw_i64)boff[ib] * dims;
        for (int k = lane; k < m * dims; k += 32) {
            const float g = 2.0f * gy[k];
            if (mode == 0) atomicAdd(outy + k, g); else outy[k] = g;
        }
    }
}

// One tile of a long pair on tile anti-diagonal `diag` (one warp per tile, tiles of 32 * ROWS
// rows by tile_cols columns). hrow: 3 rotating buffers of m + 1 base-2 values (row boundary,
// 1-based columns), vcol: 3 rotating buffers of strips * 32 * ROWS + 1 (column boundary,
// 1-based rows). *last receives r(n, m) (base-2 units, f32).
template <int ROWS, int DIMS>
__device__ void sdtw_tile(const float* __restrict__ xs, int n, const float* __restrict__ ys, int m,
                          int dims, float scale, sdtw_i64 band, int tile_cols, int diag,
                          float* hrow, float* vcol, float* last) {
    const int strip_rows = 32 * ROWS;
    const int strips = (n + strip_rows - 1) / strip_rows;
    const int blocks = (m + tile_cols - 1) / tile_cols;
    const int warp = (int)(((sdtw_i64)blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int s_min = diag - blocks + 1 > 0 ? diag - blocks + 1 : 0;
    const int s_max = diag < strips - 1 ? diag : strips - 1;
    const int s = s_min + warp;
    if (s > s_max) return;
    const int c = diag - s;
    const int i0 = s * strip_rows, j0 = c * tile_cols;
    const int ncols = m - j0 < tile_cols ? m - j0 : tile_cols;
    const sdtw_i64 hlen = (sdtw_i64)m + 1;
    const sdtw_i64 vlen = (sdtw_i64)strips * strip_rows + 1;
    float* h_prev = hrow + ((diag + 2) % 3) * hlen;  // diag - 1
    float* h_prev2 = hrow + ((diag + 1) % 3) * hlen;  // diag - 2
    float* h_out = hrow + (diag % 3) * hlen;
    float* v_prev = vcol + ((diag + 2) % 3) * vlen;
    float* v_out = vcol + (diag % 3) * vlen;
    const float corner = c == 0 ? (s == 0 ? 0.f : SDTW_INF_F) : (s == 0 ? SDTW_INF_F : h_prev2[j0]);
    sdtw_strip<float, ROWS, DIMS, SDTW_STORE_NONE>(
        xs, n, ys, m, dims, scale, band, i0, j0, ncols, s == 0 ? (const float*)0 : h_prev + j0 + 1,
        corner, c == 0 ? (const float*)0 : v_prev + i0 + 1, h_out + j0 + 1, v_out + i0 + 1,
        c == blocks - 1 ? last : (float*)0, (void*)0);
}

// The gradient kernels are capped at 128 registers a thread (blocks of SDTW_GRAD_BLOCK = the
// host's BLOCK threads, 4 blocks an SM: 16 warps instead of the 12 that the 146 registers of the
// kernel's last profile allowed). The kernel is latency-bound, and the extra warps hide more of it: 1.195e11
// -> 1.369e11 cells/s forward+backward on an H100 (1024 x 1024 pairs of length 256; caps of 96,
// 104, 112 and 120 registers gave 1.26, 1.28, 1.34 and 1.36e11).
#define SDTW_GRAD_BLOCK 128
#define SDTW_GRAD_MIN_BLOCKS 4

#define SDTW_BATCH(R, D)                                                                          \
    extern "C" __global__ void softdtw_values_r##R##_d##D(                                        \
        const float* ax, const sdtw_u32* aoff, const float* bx, const sdtw_u32* boff,             \
        sdtw_u32 na, sdtw_u32 nb, sdtw_u32 pairs, sdtw_u32 mode, int dims, float scale,           \
        sdtw_i64 band, double* values, char* scratch, sdtw_i64 stride, int m_max) {               \
        sdtw_batch<float, R, D, false>(ax, aoff, bx, boff, na, nb, pairs, mode, dims, scale, band,    \
                                       values, (float*)0, (float*)0, scratch, stride, m_max, 0);  \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(SDTW_GRAD_BLOCK, SDTW_GRAD_MIN_BLOCKS)         \
        softdtw_grad_r##R##_d##D(                                                                 \
        const float* ax, const sdtw_u32* aoff, const float* bx, const sdtw_u32* boff,             \
        sdtw_u32 na, sdtw_u32 nb, sdtw_u32 pairs, sdtw_u32 mode, int dims, float scale,           \
        sdtw_i64 band, double* values, float* ga, float* gb, char* scratch, sdtw_i64 stride,      \
        int m_max, int strips_max) {                                                              \
        sdtw_batch<double, R, D, true>(ax, aoff, bx, boff, na, nb, pairs, mode, dims, scale, band,    \
                                       values, ga, gb, scratch, stride, m_max, strips_max);       \
    }

SDTW_BATCH(1, 1)
SDTW_BATCH(2, 1)
SDTW_BATCH(4, 1)
SDTW_BATCH(8, 1)
SDTW_BATCH(1, 0)
SDTW_BATCH(2, 0)
SDTW_BATCH(4, 0)
SDTW_BATCH(8, 0)

#define SDTW_TILE(R, D)                                                                           \
    extern "C" __global__ void softdtw_tile_r##R##_d##D(                                          \
        const float* x, int n, const float* y, int m, int dims, float scale, sdtw_i64 band,       \
        int tile_cols, int diag, float* hrow, float* vcol, float* last) {                         \
        sdtw_tile<R, D>(x, n, y, m, dims, scale, band, tile_cols, diag, hrow, vcol, last);        \
    }

SDTW_TILE(8, 1)
SDTW_TILE(8, 0)
