// Exact non-overlapped counts from occurrence ends on the device, equal to the host's
// `src/episode/ends.rs` (Ends::extend_into, Ends::count_extension), end for end and count for
// count.
//
// The stream is grouped by type (`offsets [types + 1]`, `times [events]`, each type's times
// sorted). The ends of an episode α are the events of its last type that end an occurrence of
// α, each with its latest start (the largest first-event time over the occurrences ending
// there), in stream order; latest starts never decrease along them (proof in ends.rs). A
// single node's ends are every event of its type, each its own start (no buffer: `prev_idx`
// null). The ends of α·x (gap (low, high], `low` the interval's low_by_time) are the events y
// of x with some end e of α at low < t(y) - t(e) <= high; y's latest start is that of the last
// such e. Every delay is the same IEEE-754 subtraction t(y) - t(e) as on the host and every
// test the same comparison, so the ends, starts and counts are the host's:
//
//   ends_count    counts each candidate α·x, one thread per candidate sweeping its parent's
//                 ends against x's events with two galloping pointers as the host does, taking
//                 y greedily when its latest start is after the last end taken, and skipping
//                 after each occurrence taken to the first end whose latest start is later and
//                 to the first event of x it can reach;
//   ends_level    builds a prefix level (the ends of each item α·x at out_off[item], room for
//                 every event of x), data-parallel: one thread per (item, event y of x) finds
//                 y's window among the parent's ends by two binary searches (its latest start
//                 is the window's last end's), flags y and writes its start; three chunk
//                 kernels then pack each item's flagged events, in order, into its room and
//                 their number into out_len[item] (threads per chunk of events, and one per
//                 item to add up its chunks).
//
// Items of one launch share the parent level: `parent[item]` indexes the previous level's
// buffers (`prev_off`, `prev_len`), or, with `prev_idx` null, the parent is the single node
// `last[item]`.

#include "common.cuh"

// A parent's ends as the sweep reads them.
struct synfire_ends {
    const unsigned* idx;   // indices into the last type's events; null: every event
    const double* starts;  // latest starts; null: the events' own times
    const double* t_last;  // the last type's times
    unsigned n;            // number of ends
};

__device__ __forceinline__ double synfire_end_time(const synfire_ends& e, unsigned i) {
    return e.idx ? e.t_last[e.idx[i]] : e.t_last[i];
}

__device__ __forceinline__ double synfire_end_start(const synfire_ends& e, unsigned i) {
    return e.starts ? e.starts[i] : e.t_last[i];
}

// The first index in [from, to) where `holds` is false, for a predicate that holds on a
// prefix of the range (`to` when it holds throughout): exponential then binary search, as the
// host's `gallop`.
template <typename P>
__device__ __forceinline__ unsigned synfire_gallop(unsigned from, unsigned to, P holds) {
    if (from >= to || !holds(from)) return from;
    unsigned lo = from, hi = to;
    unsigned step = 1;
    for (;;) {
        const unsigned long long probe = (unsigned long long)lo + step;
        if (probe >= to) { hi = to; break; }
        if (!holds((unsigned)probe)) { hi = (unsigned)probe; break; }
        lo = (unsigned)probe;
        step = step < 0x40000000u ? step * 2 : step;
    }
    while (hi - lo > 1) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (holds(mid)) lo = mid; else hi = mid;
    }
    return hi;
}

// The host's Ends::count_extension: the sweep of the parent's ends against x's events (two
// galloping pointers), each event offered taken (its latest start, the window's last end's,
// is after the last occurrence taken), then a skip to the first end whose latest start is
// after it and to the first event of x that end reaches.
__device__ __forceinline__ unsigned synfire_count(const synfire_ends& a, const double* to,
                                                  unsigned m, double low, double high) {
    const unsigned n = a.n;
    unsigned lo = 0, hi = 0, need = 0, j = 0, c = 0;
    if (n == 0) return 0;
    while (j < m) {
        const double y = to[j];
        hi = synfire_gallop(hi, n, [&](unsigned i) { return y - synfire_end_time(a, i) > low; });
        lo = synfire_gallop(lo, hi, [&](unsigned i) { return y - synfire_end_time(a, i) > high; });
        unsigned first;
        if (lo < hi && hi > need) {
            ++c;
            // Every end before hi starts at or before y, so need >= hi.
            need = synfire_gallop(hi - 1, n,
                                  [&](unsigned i) { return synfire_end_start(a, i) <= y; });
            first = need;
        } else {
            first = hi > need ? hi : need;
        }
        if (first >= n) break;
        const double next = synfire_end_time(a, first);
        j = synfire_gallop(j + 1, m, [&](unsigned k) { return to[k] - next <= low; });
    }
    return c;
}

// The host's EarliestEnds::count_prefixed: the count of u·α, u's events `train [m]` (sorted),
// from α's first events `first [n]` and the earliest end of an occurrence starting at each
// (`earliest [n]`, finite and never decreasing, so a window's minimum is its first event's):
// each start s offers the earliest end of its window (the first events f with
// low < f - s <= high); greedy earliest-end scheduling takes the best end held when a later
// start comes after it.
__device__ __forceinline__ unsigned synfire_count_prefixed(const double* first,
                                                           const double* earliest, unsigned n,
                                                           const double* train, unsigned m,
                                                           double low, double high) {
    unsigned c = 0, lo = 0, j = 0;
    double best = SYNFIRE_INF;
    while (j < m) {
        const double s = train[j];
        lo = synfire_gallop(lo, n, [&](unsigned i) { return first[i] - s <= low; });
        if (lo >= n) break;
        if (first[lo] - s <= high) {
            if (s > best) {
                ++c;
                best = SYNFIRE_INF;
            }
            best = fmin(best, earliest[lo]);
            ++j;
        } else {
            const double next = first[lo];
            j = synfire_gallop(j + 1, m, [&](unsigned k) { return next - train[k] > high; });
        }
    }
    return c + (best < SYNFIRE_INF ? 1u : 0u);
}

__device__ __forceinline__ synfire_ends synfire_parent(
    const double* __restrict__ times, const unsigned* __restrict__ offsets, unsigned p,
    const unsigned* __restrict__ parent, const unsigned* __restrict__ last,
    const unsigned* __restrict__ prev_idx, const double* __restrict__ prev_starts,
    const synfire_u64* __restrict__ prev_off, const unsigned* __restrict__ prev_len) {
    synfire_ends a;
    const unsigned l = last[p];
    a.t_last = times + offsets[l];
    if (prev_idx) {
        const unsigned q = parent[p];
        a.idx = prev_idx + prev_off[q];
        a.starts = prev_starts + prev_off[q];
        a.n = prev_len[q];
    } else {
        a.idx = 0;
        a.starts = 0;
        a.n = offsets[l + 1] - offsets[l];
    }
    return a;
}

extern "C" {

// The exact non-overlapped count of each candidate α·x into count[item].
__global__ void ends_count(const double* __restrict__ times, const unsigned* __restrict__ offsets,
                           unsigned items, const unsigned* __restrict__ parent,
                           const unsigned* __restrict__ last, const unsigned* __restrict__ x,
                           const double* __restrict__ low, const double* __restrict__ high,
                           const unsigned* __restrict__ prev_idx,
                           const double* __restrict__ prev_starts,
                           const synfire_u64* __restrict__ prev_off,
                           const unsigned* __restrict__ prev_len, unsigned* __restrict__ count) {
    for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < items;
         p += gridDim.x * blockDim.x) {
        const synfire_ends a = synfire_parent(times, offsets, p, parent, last, prev_idx,
                                              prev_starts, prev_off, prev_len);
        const unsigned xt = x[p];
        const double* to = times + offsets[xt];
        const unsigned m = offsets[xt + 1] - offsets[xt];
        count[p] = synfire_count(a, to, m, low[p], high[p]);
    }
}

// A prefix level, element by element: event y (the j-th of x[item]) ends an occurrence of
// α·x when some end e of the parent α has low < t(y) - t(e) <= high; its latest start is then
// the last such end's (latest starts never decrease along the ends). The window of ends is
// found by two binary searches over the parent's ends by time (at the first level, prev_idx
// null, the parent is the single node last[item]: every event an end, its own start). Writes
// the flag (1 or 0) at flags[out_off + j] and the start at starts[out_off + j]; the chunk
// kernels below pack them. item_off: prefix sums of the items' x event counts (the threads).
__global__ void ends_level(const double* __restrict__ times, const unsigned* __restrict__ offsets,
                           unsigned items, const unsigned* __restrict__ parent,
                           const unsigned* __restrict__ last, const unsigned* __restrict__ x,
                           const double* __restrict__ low, const double* __restrict__ high,
                           const unsigned* __restrict__ prev_idx,
                           const double* __restrict__ prev_starts,
                           const synfire_u64* __restrict__ prev_off,
                           const unsigned* __restrict__ prev_len, unsigned* __restrict__ flags,
                           double* __restrict__ starts, const synfire_u64* __restrict__ out_off,
                           const unsigned* __restrict__ item_off) {
    const unsigned total = item_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        const unsigned p = synfire_item_of(item_off, items, g);
        const unsigned j = g - item_off[p];
        const double y = times[offsets[x[p]] + j];
        const synfire_ends e = synfire_parent(times, offsets, p, parent, last, prev_idx,
                                              prev_starts, prev_off, prev_len);
        const double lo = low[p], hi = high[p];
        // i0: first end with y - t(e) <= high; i1: first end with y - t(e) <= low.
        unsigned a = 0, b = e.n;
        while (a < b) {
            const unsigned m = a + (b - a) / 2;
            if (y - synfire_end_time(e, m) <= hi) b = m; else a = m + 1;
        }
        const unsigned i0 = a;
        b = e.n;
        while (a < b) {
            const unsigned m = a + (b - a) / 2;
            if (y - synfire_end_time(e, m) <= lo) b = m; else a = m + 1;
        }
        const unsigned i1 = a;
        const bool end = i0 < i1;
        flags[out_off[p] + j] = end ? 1u : 0u;
        starts[out_off[p] + j] = end ? synfire_end_start(e, i1 - 1) : 0.0;
    }
}

// Packing, in three steps over chunks of `chunk` events of each item (thread g of a chunk
// launch is chunk k = g - chunk_off[item] of its item; chunk_off: prefix sums of the items'
// chunk counts): ends_chunk_count counts each chunk's flagged events, ends_chunk_scan gives
// each chunk its first position (the flagged events of the item's earlier chunks) and each
// item its number of ends, ends_chunk_pack copies each chunk's flagged events, in order, to
// out_idx (their indices among x's events) and out_starts from that position.
__device__ __forceinline__ void synfire_chunk(const unsigned* __restrict__ item_off,
                                              const unsigned* __restrict__ chunk_off,
                                              unsigned items, unsigned chunk, unsigned g,
                                              unsigned* p, unsigned* from, unsigned* to) {
    *p = synfire_item_of(chunk_off, items, g);
    const unsigned n = item_off[*p + 1] - item_off[*p];
    *from = (g - chunk_off[*p]) * chunk;
    *to = n - *from < chunk ? n : *from + chunk;
}

__global__ void ends_chunk_count(unsigned items, const unsigned* __restrict__ item_off,
                                 const unsigned* __restrict__ chunk_off, unsigned chunk,
                                 const unsigned* __restrict__ flags,
                                 const synfire_u64* __restrict__ out_off,
                                 unsigned* __restrict__ counts) {
    const unsigned total = chunk_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        unsigned p, from, to;
        synfire_chunk(item_off, chunk_off, items, chunk, g, &p, &from, &to);
        const unsigned* f = flags + out_off[p];
        unsigned c = 0;
        for (unsigned j = from; j < to; ++j) c += f[j];
        counts[g] = c;
    }
}

__global__ void ends_chunk_scan(unsigned items, const unsigned* __restrict__ chunk_off,
                                const unsigned* __restrict__ counts,
                                unsigned* __restrict__ bases, unsigned* __restrict__ out_len) {
    for (unsigned p = blockIdx.x * blockDim.x + threadIdx.x; p < items;
         p += gridDim.x * blockDim.x) {
        unsigned c = 0;
        for (unsigned g = chunk_off[p]; g < chunk_off[p + 1]; ++g) {
            bases[g] = c;
            c += counts[g];
        }
        out_len[p] = c;
    }
}

__global__ void ends_chunk_pack(unsigned items, const unsigned* __restrict__ item_off,
                                const unsigned* __restrict__ chunk_off, unsigned chunk,
                                const unsigned* __restrict__ flags,
                                const double* __restrict__ starts,
                                const synfire_u64* __restrict__ out_off,
                                const unsigned* __restrict__ bases, unsigned* __restrict__ out_idx,
                                double* __restrict__ out_starts) {
    const unsigned total = chunk_off[items];
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        unsigned p, from, to;
        synfire_chunk(item_off, chunk_off, items, chunk, g, &p, &from, &to);
        const synfire_u64 o = out_off[p];
        unsigned c = bases[g];
        for (unsigned j = from; j < to; ++j) {
            if (flags[o + j]) {
                out_idx[o + c] = j;
                out_starts[o + c] = starts[o + j];
                ++c;
            }
        }
    }
}

// Hybrids (significance's `guided` test): hypothesis h counted in hybrid jj, one thread per
// (h, jj), thread g = h * per + jj. The hypothesis adds unit slot `unit[h]`, whose surrogate
// jj is segment `unit[h] * per + jj` of `trains` (`seg_off`, as `kernels/surrogates.cu`'s
// hybrid trains lay them out). Its parent is `parent_times`/`parent_values` from
// `parent_off[h]` to `parent_off[h + 1]`: for a unit added at the end (`prefixed[h]` 0) the
// parent's ends (times, latest starts), counted as `ends_count` does; for a unit added at the
// start (1) its first events and their earliest ends (`synfire_count_prefixed`). `low` and
// `high` bound the new gap. Shapes: every per-hypothesis array [hyps], `count [hyps * per]`.
__global__ void hybrid_count(unsigned hyps, unsigned per, const unsigned* __restrict__ unit,
                             const unsigned* __restrict__ prefixed,
                             const double* __restrict__ low, const double* __restrict__ high,
                             const unsigned* __restrict__ parent_off,
                             const double* __restrict__ parent_times,
                             const double* __restrict__ parent_values,
                             const unsigned* __restrict__ seg_off,
                             const double* __restrict__ trains, unsigned* __restrict__ count) {
    const unsigned total = hyps * per;
    for (unsigned g = blockIdx.x * blockDim.x + threadIdx.x; g < total;
         g += gridDim.x * blockDim.x) {
        const unsigned h = g / per;
        const unsigned seg = unit[h] * per + (g - h * per);
        const double* to = trains + seg_off[seg];
        const unsigned m = seg_off[seg + 1] - seg_off[seg];
        const unsigned off = parent_off[h];
        const unsigned n = parent_off[h + 1] - off;
        if (prefixed[h]) {
            count[g] = synfire_count_prefixed(parent_times + off, parent_values + off, n, to, m,
                                              low[h], high[h]);
        } else {
            synfire_ends a;
            a.idx = 0;
            a.starts = parent_values + off;
            a.t_last = parent_times + off;
            a.n = n;
            count[g] = synfire_count(a, to, m, low[h], high[h]);
        }
    }
}

}  // extern "C"
