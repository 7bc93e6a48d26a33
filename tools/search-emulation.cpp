// Runs kernels/search.cu's device code on the host (through tools/kernel-shim.h) and checks
// that search_lower_bounds keeps exactly the series a plain loop keeps: the active-array
// walk over ranges, the byte order of the 16-byte words, the table sum and the pruning rule.
// One thread per block (so the block's table copy is complete before it is read), several
// blocks to exercise the grid-stride loop. On a GPU, tests/search.rs compares the GPU's
// survivors with the CPU producer's. Built and run by tools/check-kernels.sh.
#include "tools/kernel-shim.h"
#include "kernels/search.cu"
#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>
#include <vector>
int main() {
  std::mt19937_64 rng(11);
  long checked = 0, bad = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const unsigned n = 1 + rng() % 3000;
    std::vector<unsigned char> bytes(16 * (size_t)n);
    for (auto& b : bytes) b = rng() % 256;
    std::vector<double> table(16 * 256);
    for (auto& v : table) v = (rng() % 1000) * 1e-3;
    // Active ranges: a random set of disjoint ranges in random order.
    std::vector<std::pair<unsigned, unsigned>> ranges;
    for (unsigned s = 0; s < n;) {
      unsigned l = 1 + rng() % 200; if (s + l > n) l = n - s;
      if (rng() % 3) ranges.push_back({s, l});
      s += l;
    }
    if (ranges.empty()) continue;
    std::shuffle(ranges.begin(), ranges.end(), rng);
    std::vector<unsigned> starts, prefix{0};
    for (auto& r : ranges) { starts.push_back(r.first); prefix.push_back(prefix.back() + r.second); }
    const unsigned total = prefix.back();
    const double bsf = (rng() % 8000) * 1e-3;
    const unsigned begin = rng() % total, end = begin + 1 + rng() % (total - begin);
    std::vector<unsigned> out_pos(total); std::vector<double> out_lb(total); unsigned count = 0;
    gridDim = {1u + (unsigned)(rng() % 7), 1, 1}; blockDim = {1, 1, 1}; threadIdx = {0, 0, 0};
    for (unsigned b = 0; b < gridDim.x; ++b) {
      blockIdx = {b, 0, 0};
      search_lower_bounds(reinterpret_cast<const uint4*>(bytes.data()), table.data(), starts.data(),
                          prefix.data(), (unsigned)ranges.size(), begin, end, bsf, out_pos.data(),
                          out_lb.data(), &count);
    }
    std::vector<std::pair<unsigned, double>> got, want;
    for (unsigned k = 0; k < count; ++k) got.push_back({out_pos[k], out_lb[k]});
    unsigned i = 0;
    for (size_t r = 0; r < ranges.size(); ++r)
      for (unsigned a = 0; a < ranges[r].second; ++a, ++i) {
        if (i < begin || i >= end) continue;
        const unsigned pos = ranges[r].first + a;
        double acc = 0.0;
        for (int j = 0; j < 16; ++j) acc += table[j * 256 + bytes[16 * (size_t)pos + j]];
        if (!(acc > bsf * (1.0 + 1e-9) + 1e-9)) want.push_back({pos, acc});
      }
    std::sort(got.begin(), got.end()); std::sort(want.begin(), want.end());
    ++checked;
    if (got != want) { ++bad; if (bad < 5) printf("trial %d: %zu survivors, expected %zu\n", trial, got.size(), want.size()); }
  }
  printf("search: checked %ld chunks, mismatches %ld\n", checked, bad);
  return bad != 0;
}
