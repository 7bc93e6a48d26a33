/* Byte scans of the NWB targets' harness (src/lib.rs), in C so that they are NOT built with
 * the SanitizerCoverage instrumentation RUSTFLAGS gives every Rust crate: instrumented, these
 * loops over 0.4-7 MB inputs took half of each run and fed the fuzzer coverage of the
 * harness itself instead of synfire's. Compiled by build.rs (cc crate). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* HDF5 metadata signatures (src/lib.rs HDF5_SIGNATURES; the superblock by its first 4). */
static const char SIGS[][4] = {
    {'\x89', 'H', 'D', 'F'}, {'O', 'H', 'D', 'R'}, {'O', 'C', 'H', 'K'}, {'T', 'R', 'E', 'E'},
    {'H', 'E', 'A', 'P'},    {'G', 'C', 'O', 'L'}, {'S', 'N', 'O', 'D'}, {'B', 'T', 'H', 'D'},
    {'B', 'T', 'I', 'N'},    {'B', 'T', 'L', 'F'}, {'F', 'R', 'H', 'P'}, {'F', 'H', 'D', 'B'},
    {'F', 'H', 'I', 'B'},    {'F', 'S', 'H', 'D'}, {'F', 'S', 'S', 'E'}, {'E', 'A', 'H', 'D'},
    {'E', 'A', 'I', 'B'},    {'E', 'A', 'S', 'B'}, {'E', 'A', 'D', 'B'}, {'F', 'A', 'H', 'D'},
    {'F', 'A', 'D', 'B'},
};

/* Writes the offsets of every signature in d[0..n) to out (at most cap of them); returns how
 * many there are (which may exceed cap). */
size_t synfire_fuzz_hdf5_signatures(const uint8_t *d, size_t n, size_t *out, size_t cap) {
    static uint8_t first[256];
    static int ready = 0;
    size_t found = 0;
    if (!ready) {
        for (size_t s = 0; s < sizeof SIGS / sizeof SIGS[0]; s++) first[(uint8_t)SIGS[s][0]] = 1;
        ready = 1;
    }
    if (n < 4) return 0;
    for (size_t i = 0; i + 4 <= n; i++) {
        if (!first[d[i]]) continue;
        for (size_t s = 0; s < sizeof SIGS / sizeof SIGS[0]; s++) {
            if (memcmp(d + i, SIGS[s], 4) == 0) {
                if (found < cap) out[found] = i;
                found++;
                break;
            }
        }
    }
    return found;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = (v << 8) | p[k];
    return v;
}

/* 1 when a global heap collection ("GCOL") of d[0..n) makes HDF5 2.0.0's
 * H5HG__cache_heap_deserialize loop forever (src/lib.rs hdf5_known_hang has the why). */
int synfire_fuzz_gcol_hang(const uint8_t *d, size_t n) {
    const uint8_t *p = d;
    const uint8_t *end_of_data = d + n;
    while ((p = memmem(p, (size_t)(end_of_data - p), "GCOL", 4)) != NULL) {
        size_t start = (size_t)(p - d);
        p += 4;
        if (start + 16 > n) continue;
        uint64_t size = le64(d + start + 8);
        uint64_t end = (uint64_t)start + size;
        if (end < (uint64_t)start) end = UINT64_MAX;
        uint64_t q = (uint64_t)start + 16;
        while (q < end) {
            if (q + 16 > end) break; /* free space too small for an object header */
            if (q + 16 > n) break;   /* past the input */
            uint16_t idx = (uint16_t)(d[q] | (d[q + 1] << 8));
            uint64_t len = le64(d + q + 8);
            uint64_t need = idx > 0 ? 16 + (len + 7) / 8 * 8 : len; /* wraps as HDF5's does */
            if (need == 0) return 1;
            if (q + need < q || q + need > end) break; /* HDF5 reports an overflow here */
            q += need;
        }
    }
    return 0;
}

/* One step of HDF5 2.0.0's H5HL__fl_deserialize over a local heap's free list: the next
 * free-block offset after `off`, or 1 (H5HL_FREE_NULL, HDF5's end of list) where HDF5 stops,
 * whether at the list's end or with an error. */
static uint64_t fl_next(const uint8_t *blk, uint64_t dblk_size, uint64_t off) {
    if (off == 1) return 1;
    if (off > UINT64_MAX - 16 || off + 16 > dblk_size) return 1; /* "bad heap free list" */
    uint64_t next = le64(blk + off);
    uint64_t size = le64(blk + off + 8);
    if (next == 0) return 1;                                /* "free block size is zero?" */
    if (off + size < off || off + size > dblk_size) return 1; /* "bad heap free list" */
    return next;
}

/* 1 when a local heap ("HEAP", version 0) of d[0..n) has a free list that returns to a block
 * it has visited: HDF5 2.0.0's H5HL__fl_deserialize (H5HLcache.c) follows it with no cycle
 * check, allocating a node per step, until memory runs out (src/lib.rs hdf5_known_hang).
 * Brent's cycle detection over the same steps, so the walk is bounded by the list's length.
 * Assumes 8-byte lengths and addresses and base address 0, as the GCOL scan does. */
int synfire_fuzz_local_heap_cycle(const uint8_t *d, size_t n) {
    const uint8_t *p = d;
    const uint8_t *end_of_data = d + n;
    while ((p = memmem(p, (size_t)(end_of_data - p), "HEAP", 4)) != NULL) {
        size_t start = (size_t)(p - d);
        p += 4;
        if (start + 32 > n || d[start + 4] != 0) continue;
        uint64_t dblk_size = le64(d + start + 8);
        uint64_t head = le64(d + start + 16);
        uint64_t dblk_addr = le64(d + start + 24);
        if (head == 1) continue;
        if (head >= dblk_size) continue;                   /* HDF5 refuses the header */
        if (dblk_addr > n || dblk_size > n - dblk_addr) continue; /* HDF5 cannot read it */
        const uint8_t *blk = d + dblk_addr;
        /* Brent: power-of-two windows; a cycle shows as the hare meeting the tortoise. */
        uint64_t tortoise = head, hare = fl_next(blk, dblk_size, head);
        uint64_t power = 1, lam = 1;
        while (hare != 1) {
            if (hare == tortoise) return 1;
            if (power == lam) {
                tortoise = hare;
                power *= 2;
                lam = 0;
            }
            hare = fl_next(blk, dblk_size, hare);
            lam++;
        }
    }
    return 0;
}
