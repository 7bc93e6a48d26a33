// Helpers shared by the kernel files (each kernels/*.cu that uses them includes this file).
//
// NVRTC compiles each file from its text alone, without an include path: src/device/kernels.rs
// replaces that include line by this file's text when it compiles a kernel (and the text enters
// the kernel cache's key), while the host checks (tools/check-kernels.sh and the
// tools/*-emulation.cpp programs) find this file next to the including one. NVRTC has no host
// headers, so nothing here includes one.
#ifndef SYNFIRE_COMMON_CUH
#define SYNFIRE_COMMON_CUH

typedef unsigned long long synfire_u64;

// +infinity and -infinity as f64 (NVRTC has no <cmath> INFINITY).
#define SYNFIRE_INF (__longlong_as_double(0x7FF0000000000000ULL))
#define SYNFIRE_NEG_INF (__longlong_as_double(0xFFF0000000000000ULL))

// Index of the item owning flattened element g (item_off [items + 1], increasing): the last
// lo with item_off[lo] <= g, by binary search.
__device__ __forceinline__ unsigned synfire_item_of(const unsigned* __restrict__ item_off,
                                                    unsigned items, unsigned g) {
    unsigned lo = 0, hi = items;  // item_off[lo] <= g < item_off[hi]
    while (hi - lo > 1) {
        const unsigned mid = lo + (hi - lo) / 2;
        if (item_off[mid] <= g) lo = mid; else hi = mid;
    }
    return lo;
}

#endif  // SYNFIRE_COMMON_CUH
