// SING lower bounds on the GPU (src/search, src/device/search.rs).
//
// "SING: Sequence Indexing Using GPUs" (papers/sing-gpu-similarity-search.txt), Algorithm 12
// (LowerBoundDistanceCalculation) for one chunk of the active array, with two changes:
// * exact breakpoints instead of BreakPoly: the host fills, per query, the table
//   T[j][s] = l_j * gap(q_j, B[s], B[s+1])^2 (16 x 256 doubles), and a series' squared
//   MINDIST is sum_j T[j][word_j], summed in segment order from 0.0 exactly as the host's
//   QueryTable::lb_sq does, so both compute the same bits;
// * stream compaction: instead of the float map of every bound, only the series that the
//   pruning rule keeps, (position, bound), are appended to a list through an atomic counter.
//
// The active array is the concatenation of leaf-order ranges (one per active root subtree):
// range r covers active indices [prefix[r], prefix[r+1]) at positions starts[r] + (i - prefix[r]).

#define SYNFIRE_SEGMENTS 16
#define SYNFIRE_CARDINALITY 256

// The pruning rule of search::isax::prunable (same constants).
__device__ __forceinline__ bool synfire_prunable(double lb_sq, double bsf_sq) {
    return lb_sq > bsf_sq * (1.0 + 1e-9) + 1e-9;
}

// The range holding active index i: the largest r with prefix[r] <= i (prefix[0] = 0 <= i).
__device__ __forceinline__ unsigned synfire_range_of(const unsigned* __restrict__ prefix,
                                                      unsigned ranges, unsigned i) {
    unsigned lo = 0, hi = ranges;  // invariant: prefix[lo] <= i < prefix[hi]
    while (hi - lo > 1) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (prefix[mid] <= i) lo = mid; else hi = mid;
    }
    return lo;
}

// Squared MINDIST of one 16-byte word from the table (word bytes in memory order = segment).
__device__ __forceinline__ double synfire_word_lb(const double* t, uint4 w) {
    const unsigned parts[4] = {w.x, w.y, w.z, w.w};
    double acc = 0.0;
    for (int p = 0; p < 4; ++p) {
        for (int b = 0; b < 4; ++b) {
            const int j = p * 4 + b;
            acc += t[j * SYNFIRE_CARDINALITY + ((parts[p] >> (8 * b)) & 0xffu)];
        }
    }
    return acc;
}

extern "C" {

// One chunk [begin, end) of the active array; grid-stride over it. The block copies the
// table to shared memory first (32 KiB). Survivors go to out_pos/out_lb[atomicAdd(count)];
// the host sizes them to at least end - begin, so the list never overflows.
__global__ void search_lower_bounds(const uint4* __restrict__ sax,
                                    const double* __restrict__ table,
                                    const unsigned* __restrict__ starts,
                                    const unsigned* __restrict__ prefix, unsigned ranges,
                                    unsigned begin, unsigned end, double bsf_sq,
                                    unsigned* __restrict__ out_pos, double* __restrict__ out_lb,
                                    unsigned* __restrict__ count) {
    __shared__ double t[SYNFIRE_SEGMENTS * SYNFIRE_CARDINALITY];
    for (unsigned k = threadIdx.x; k < SYNFIRE_SEGMENTS * SYNFIRE_CARDINALITY; k += blockDim.x) {
        t[k] = table[k];
    }
    __syncthreads();
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = begin + blockIdx.x * blockDim.x + threadIdx.x; i < end; i += stride) {
        const unsigned r = synfire_range_of(prefix, ranges, i);
        const unsigned pos = starts[r] + (i - prefix[r]);
        const double lb = synfire_word_lb(t, sax[pos]);
        if (!synfire_prunable(lb, bsf_sq)) {
            const unsigned slot = atomicAdd(count, 1u);
            out_pos[slot] = pos;
            out_lb[slot] = lb;
        }
    }
}

}  // extern "C"

// ---------------------------------------------------------------------------------------------
// Batched queries (src/search/batch.rs, src/device/search.rs): every series of the index
// against a batch of queries, on a GPU that holds the series' PAA (16 f32 per series, leaf
// order) and, when they fit, the series themselves.
//
// search_batch_filter: the PAA lower bound (Keogh et al. 2001; the bound iSAX's MINDIST
// relaxes) of every (query, series) pair, in f32 with explicit round-to-nearest operations
// (no fused multiply-add), so the host's model (search::batch::lb_f32) computes the same bits:
//   acc = 0; for j in 0..16: d = q[j] - x[j]; acc = acc + w[j] * (d * d)
// A pair survives when acc <= thresh[query]; the host rounds the threshold up from the query's
// BSF by the proven error bound of these operations (batch.rs, filter_threshold), so no series
// whose distance is within the BSF is ever dropped.
#define SYNFIRE_BATCH_QUERY_TILE 64

__device__ __forceinline__ float synfire_paa_lb(const float* q, const float* x, const float* w) {
    float acc = 0.0f;
    for (int j = 0; j < SYNFIRE_SEGMENTS; ++j) {
        const float d = __fsub_rn(q[j], x[j]);
        acc = __fadd_rn(acc, __fmul_rn(w[j], __fmul_rn(d, d)));
    }
    return acc;
}

extern "C" {

// Grid-stride over series positions (uniform per block, so every thread meets every
// __syncthreads); queries in tiles of 64 through shared memory. Survivors (query, position)
// go to out_q/out_pos[atomicAdd(count)] while the slot is below cap (count keeps counting, so
// the host sees an overflow); per_query[q] counts each query's survivors.
__global__ void search_batch_filter(const float* __restrict__ paa, unsigned count,
                                    const float* __restrict__ weights,
                                    const float* __restrict__ qpaa,
                                    const float* __restrict__ thresh, unsigned nq,
                                    unsigned* __restrict__ out_q, unsigned* __restrict__ out_pos,
                                    unsigned cap, unsigned* __restrict__ out_count,
                                    unsigned* __restrict__ per_query) {
    __shared__ float qs[SYNFIRE_BATCH_QUERY_TILE * SYNFIRE_SEGMENTS];
    __shared__ float th[SYNFIRE_BATCH_QUERY_TILE];
    __shared__ float w[SYNFIRE_SEGMENTS];
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned base = blockIdx.x * blockDim.x; base < count; base += stride) {
        const unsigned pos = base + threadIdx.x;
        const bool valid = pos < count;
        float x[SYNFIRE_SEGMENTS];
        for (int j = 0; j < SYNFIRE_SEGMENTS; ++j) {
            x[j] = valid ? paa[(size_t)pos * SYNFIRE_SEGMENTS + j] : 0.0f;
        }
        for (unsigned q0 = 0; q0 < nq; q0 += SYNFIRE_BATCH_QUERY_TILE) {
            const unsigned nt =
                nq - q0 < SYNFIRE_BATCH_QUERY_TILE ? nq - q0 : SYNFIRE_BATCH_QUERY_TILE;
            __syncthreads();
            for (unsigned k = threadIdx.x; k < nt * SYNFIRE_SEGMENTS; k += blockDim.x) {
                qs[k] = qpaa[(size_t)q0 * SYNFIRE_SEGMENTS + k];
            }
            for (unsigned k = threadIdx.x; k < nt; k += blockDim.x) th[k] = thresh[q0 + k];
            for (unsigned k = threadIdx.x; k < SYNFIRE_SEGMENTS; k += blockDim.x) w[k] = weights[k];
            __syncthreads();
            if (!valid) continue;
            for (unsigned t = 0; t < nt; ++t) {
                if (synfire_paa_lb(qs + t * SYNFIRE_SEGMENTS, x, w) <= th[t]) {
                    const unsigned slot = atomicAdd(out_count, 1u);
                    if (slot < cap) {
                        out_q[slot] = q0 + t;
                        out_pos[slot] = pos;
                    }
                    atomicAdd(per_query + q0 + t, 1u);
                }
            }
        }
    }
}

// The exact squared distance of each surviving pair, computed as search::collection::sq_dist
// computes it (eight f64 accumulators, sample t into accumulator t % 8 in sample order, then
// ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))), so the bits are the host's; a pair whose
// distance is within its query's limit (the BSF, f64) goes to out_*[atomicAdd(out_count)]. The
// host sizes out_* to n, so the list never overflows. rows: [count * len] leaf order; qrows:
// [nq * len].
__global__ void search_batch_refine(const float* __restrict__ rows, unsigned len,
                                    const float* __restrict__ qrows,
                                    const unsigned* __restrict__ pair_q,
                                    const unsigned* __restrict__ pair_pos, unsigned n,
                                    const double* __restrict__ limit,
                                    unsigned* __restrict__ out_q, unsigned* __restrict__ out_pos,
                                    double* __restrict__ out_sq,
                                    unsigned* __restrict__ out_count) {
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned q = pair_q[i], pos = pair_pos[i];
        const float* a = qrows + (size_t)q * len;
        const float* b = rows + (size_t)pos * len;
        double acc[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
        unsigned t = 0;
        if (len % 8 == 0) {
            // Rows start on 32-byte boundaries here (len a multiple of 8 floats).
            for (; t < len; t += 8) {
                const float4 a0 = *reinterpret_cast<const float4*>(a + t);
                const float4 a1 = *reinterpret_cast<const float4*>(a + t + 4);
                const float4 b0 = *reinterpret_cast<const float4*>(b + t);
                const float4 b1 = *reinterpret_cast<const float4*>(b + t + 4);
                const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                for (int l = 0; l < 8; ++l) {
                    const double d = __dsub_rn((double)av[l], (double)bv[l]);
                    acc[l] = __dadd_rn(acc[l], __dmul_rn(d, d));
                }
            }
        }
        for (; t < len; ++t) {
            const double d = __dsub_rn((double)a[t], (double)b[t]);
            acc[t % 8] = __dadd_rn(acc[t % 8], __dmul_rn(d, d));
        }
        const double s = __dadd_rn(__dadd_rn(__dadd_rn(acc[0], acc[1]), __dadd_rn(acc[2], acc[3])),
                                   __dadd_rn(__dadd_rn(acc[4], acc[5]), __dadd_rn(acc[6], acc[7])));
        if (s <= limit[q]) {
            const unsigned slot = atomicAdd(out_count, 1u);
            out_q[slot] = q;
            out_pos[slot] = pos;
            out_sq[slot] = s;
        }
    }
}

// The exact value of an IEEE binary16 bit pattern (finite: the host writes no inf or NaN).
__device__ __forceinline__ float synfire_half_to_float(unsigned short h) {
    const unsigned sign = ((unsigned)h & 0x8000u) << 16;
    const unsigned exp = ((unsigned)h >> 10) & 0x1fu;
    const unsigned man = (unsigned)h & 0x3ffu;
    if (exp == 0) {
        // Zero or subnormal: man * 2^-24, exact in f32.
        const float v = __fmul_rn((float)man, 5.9604644775390625e-8f);
        return sign ? -v : v;
    }
    return __int_as_float((int)(sign | ((exp + 112u) << 23) | (man << 13)));
}

// The second filter when the GPU holds the series in half precision only: for each filter
// survivor, the f32 squared distance between the query and the series' f16 copy,
//   acc = 0; for t in 0..len: d = q[t] - x16[t]; acc = acc + d * d
// (round-to-nearest operations, none fused: search::batch::half_sq_f32 computes the same
// bits), kept when acc <= thresh2[query]; the host rounds thresh2 up from the BSF by the
// proven bound of the f16 rounding and of these operations (batch.rs, half_threshold) and
// computes the exact distances of the pairs kept. out_* are sized to n by the host.
__global__ void search_batch_refine_half(const unsigned short* __restrict__ rows16, unsigned len,
                                         const float* __restrict__ qrows,
                                         const unsigned* __restrict__ pair_q,
                                         const unsigned* __restrict__ pair_pos, unsigned n,
                                         const float* __restrict__ thresh2,
                                         unsigned* __restrict__ out_q,
                                         unsigned* __restrict__ out_pos,
                                         unsigned* __restrict__ out_count) {
    const unsigned stride = gridDim.x * blockDim.x;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned q = pair_q[i], pos = pair_pos[i];
        const float* a = qrows + (size_t)q * len;
        const unsigned short* b = rows16 + (size_t)pos * len;
        float acc = 0.0f;
        for (unsigned t = 0; t < len; ++t) {
            const float d = __fsub_rn(a[t], synfire_half_to_float(b[t]));
            acc = __fadd_rn(acc, __fmul_rn(d, d));
        }
        if (acc <= thresh2[q]) {
            const unsigned slot = atomicAdd(out_count, 1u);
            out_q[slot] = q;
            out_pos[slot] = pos;
        }
    }
}

}  // extern "C"
