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
