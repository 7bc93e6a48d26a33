// The threshold search's join bounds on the device (`src/significance/spectrum.rs`, the
// successor bound of `src/episode/bound.rs`), on the stream a counter holds (grouped by type:
// `offsets [types + 1]`, `times [events]`, each type's times sorted), equal to the host's:
//
//   Ends(α)        bits over the last type's events: event y of type b ends an occurrence of
//                  the prefix α when some event e of the previous type that ends α's prefix
//                  has low < t(y) - t(e) <= high (reach_into, from all events of the first
//                  type at the first gap);
//   Succ(a, iv, x) bits over a's events: event e of a has some event y of x with
//                  low < t(y) - t(e) <= high (successor_bits);
//   bound(join)    popcount(Ends(α) & Succ(last pair)).
//
// `low` is the gap's low_by_time (the largest delay that does not fit: -0⁻ where a zero
// delay fits, else the interval's low). Every delay is the same IEEE-754 subtraction
// t(y) - t(e) as on the host and every test the same comparison, so the bits are the host's.
// Delays t(y) - t(e) are non-increasing in e (times sorted), so the events e that fit y form
// one range [i0, i1) found by two binary searches.

#include "common.cuh"

extern "C" {

// One step of each prefix chain: every event y of `to[p]` whose range of `from[p]` events at
// a fitting delay holds an end of the previous step (`prev == 0`: every event is one) gets its
// bit in `out` (zeroed before). One thread per (item, event y); item_off: prefix sums of the
// items' `to` event counts; prev_off/out_off: each item's first word.
__global__ void bounds_chain_step(const double* __restrict__ times,
                                  const unsigned* __restrict__ offsets, unsigned items,
                                  const unsigned* __restrict__ from, const unsigned* __restrict__ to,
                                  const double* __restrict__ low, const double* __restrict__ high,
                                  const synfire_u64* __restrict__ prev,
                                  const unsigned* __restrict__ prev_off,
                                  synfire_u64* __restrict__ out, const unsigned* __restrict__ out_off,
                                  const unsigned* __restrict__ item_off) {
    const unsigned total = item_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        const unsigned p = synfire_item_of(item_off, items, g);
        const unsigned j = g - item_off[p];
        const double t = times[offsets[to[p]] + j];
        const double* tf = times + offsets[from[p]];
        const unsigned nf = offsets[from[p] + 1] - offsets[from[p]];
        const double lo = low[p], hi = high[p];
        // i0: first e with t - tf[e] <= hi; i1: first e with t - tf[e] <= lo.
        unsigned a = 0, b = nf;
        while (a < b) {
            const unsigned m = a + (b - a) / 2;
            if (t - tf[m] <= hi) b = m; else a = m + 1;
        }
        const unsigned i0 = a;
        b = nf;
        while (a < b) {
            const unsigned m = a + (b - a) / 2;
            if (t - tf[m] <= lo) b = m; else a = m + 1;
        }
        const unsigned i1 = a;
        bool hit = false;
        if (i0 < i1) {
            if (prev == 0) {
                hit = true;
            } else {
                const synfire_u64* pb = prev + prev_off[p];
                for (unsigned w = i0 / 64; w <= (i1 - 1) / 64 && !hit; ++w) {
                    synfire_u64 word = pb[w];
                    const unsigned first = w * 64, last = first + 63;
                    if (i0 > first) word &= ~0ull << (i0 - first);
                    if (i1 - 1 < last) word &= ~0ull >> (last - (i1 - 1));
                    hit = word != 0;
                }
            }
        }
        if (hit) atomicOr(&out[out_off[p] + j / 64], 1ull << (j % 64));
    }
}

// Succ(a, iv, x) of each pair: bit e over a's events when the first event y of x with
// t(y) - t(e) > low also has t(y) - t(e) <= high. One thread per (pair, event e).
__global__ void bounds_successors(const double* __restrict__ times,
                                  const unsigned* __restrict__ offsets, unsigned items,
                                  const unsigned* __restrict__ from, const unsigned* __restrict__ to,
                                  const double* __restrict__ low, const double* __restrict__ high,
                                  synfire_u64* __restrict__ out, const unsigned* __restrict__ out_off,
                                  const unsigned* __restrict__ item_off) {
    const unsigned total = item_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        const unsigned p = synfire_item_of(item_off, items, g);
        const unsigned e = g - item_off[p];
        const double t = times[offsets[from[p]] + e];
        const double* tx = times + offsets[to[p]];
        const unsigned nx = offsets[to[p] + 1] - offsets[to[p]];
        const double lo = low[p];
        // First y with tx[y] - t > lo (non-decreasing in y).
        unsigned a = 0, b = nx;
        while (a < b) {
            const unsigned m = a + (b - a) / 2;
            if (tx[m] - t > lo) b = m; else a = m + 1;
        }
        if (a < nx && tx[a] - t <= high[p]) atomicOr(&out[out_off[p] + e / 64], 1ull << (e % 64));
    }
}

// popcount(a & b) over n words: the successor bound of a join.
__device__ __forceinline__ unsigned synfire_and_count(const synfire_u64* __restrict__ a,
                                                      const synfire_u64* __restrict__ b,
                                                      unsigned n) {
    unsigned c = 0;
    for (unsigned w = 0; w < n; ++w) c += __popcll(a[w] & b[w]);
    return c;
}

// bound[i] = popcount(ends[join_prefix[i]] & succ[join_pair[i]]) over `words[i]` words.
__global__ void bounds_and_count(unsigned joins, const unsigned* __restrict__ join_prefix,
                                 const unsigned* __restrict__ join_pair,
                                 const synfire_u64* __restrict__ ends,
                                 const unsigned* __restrict__ ends_off,
                                 const synfire_u64* __restrict__ succ,
                                 const unsigned* __restrict__ succ_off,
                                 const unsigned* __restrict__ words, unsigned* __restrict__ bound) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < joins;
         i += gridDim.x * blockDim.x) {
        bound[i] = synfire_and_count(ends + ends_off[join_prefix[i]],
                                     succ + succ_off[join_pair[i]], words[i]);
    }
}

// The joins of one size at one floor, many surrogates at once (the one-floor pass of
// `src/significance/spectrum.rs`, `max_count_at_floor`; driven by `src/device/floor.rs`):
// prefix item i (its ends bits at ends + ends_off[i], `words[i]` words over its last type's
// events, its count cnt[i]) joins every suffix item j of [part_lo[i], part_hi[i]) (the
// successor bits of j's last pair at succ + succ_off[j], over the same events; its count
// scnt[j]); the join's bound is min(cnt[i], scnt[j], popcount(ends_i & succ_j)) and the
// joins whose bound reaches `floor` are appended as (i, j) to out_i/out_j, up to `capacity`;
// `found` counts them all (the host retries with room for all when it exceeds `capacity`).
// One thread per join g of [0, join_off[items]): its prefix item by binary search over
// join_off (prefix sums of the items' partner counts), j = part_lo[i] + g - join_off[i].
__global__ void bounds_floor_joins(unsigned items, const unsigned* __restrict__ join_off,
                                   const unsigned* __restrict__ part_lo,
                                   const synfire_u64* __restrict__ ends,
                                   const unsigned* __restrict__ ends_off,
                                   const unsigned* __restrict__ words,
                                   const unsigned* __restrict__ cnt,
                                   const synfire_u64* __restrict__ succ,
                                   const unsigned* __restrict__ succ_off,
                                   const unsigned* __restrict__ scnt, unsigned floor,
                                   unsigned capacity, unsigned* __restrict__ found,
                                   unsigned* __restrict__ out_i, unsigned* __restrict__ out_j) {
    const unsigned total = join_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        const unsigned i = synfire_item_of(join_off, items, g);
        const unsigned j = part_lo[i] + (g - join_off[i]);
        if (cnt[i] < floor || scnt[j] < floor) continue;
        const unsigned c = synfire_and_count(ends + ends_off[i], succ + succ_off[j], words[i]);
        if (c >= floor) {
            const unsigned k = atomicAdd(found, 1u);
            if (k < capacity) {
                out_i[k] = i;
                out_j[k] = j;
            }
        }
    }
}

}  // extern "C"
