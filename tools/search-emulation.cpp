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
#include <tuple>
#include <vector>
// The batched kernels: search_batch_filter keeps exactly the (query, position) pairs a plain
// loop with the same f32 operations keeps (and counts past cap without writing past it);
// search_batch_refine gives exactly the bits of search::collection::sq_dist (written out here
// as in Rust: 32-sample chunks, eight lanes, the pairwise combine) for pairs within the limit.
static double sq_dist_rust(const float* q, const float* x, unsigned len) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  unsigned full = len / 32 * 32;
  for (unsigned c = 0; c < full; c += 32)
    for (int blk = 0; blk < 4; ++blk)
      for (int l = 0; l < 8; ++l) { double d = (double)q[c + blk * 8 + l] - (double)x[c + blk * 8 + l]; acc[l] += d * d; }
  for (unsigned i = 0; full + i < len; ++i) { double d = (double)q[full + i] - (double)x[full + i]; acc[i % 8] += d * d; }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}
static int check_batch() {
  std::mt19937_64 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  long filters = 0, refines = 0, bad = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const unsigned count = 1 + rng() % 700, nq = 1 + rng() % 150;
    std::vector<float> paa(16 * (size_t)count), qpaa(16 * (size_t)nq), w(16), thresh(nq);
    for (auto& v : paa) v = normal(rng);
    for (auto& v : qpaa) v = normal(rng);
    for (auto& v : w) v = (float)(rng() % 20);
    for (auto& v : thresh) v = (float)(rng() % 400) * 0.25f;
    // Half the thresholds equal some pair's bound exactly (a survivor at the boundary).
    for (unsigned q = 0; q < nq; ++q)
      if (rng() % 2) {
        const unsigned p = rng() % count;
        float acc = 0.0f;
        for (int j = 0; j < 16; ++j) { float d = qpaa[16 * q + j] - paa[16 * p + j]; float dd = d * d; float t = w[j] * dd; acc = acc + t; }
        thresh[q] = acc;
      }
    std::vector<std::pair<unsigned, unsigned>> want;
    std::vector<unsigned> want_per(nq, 0);
    for (unsigned q = 0; q < nq; ++q)
      for (unsigned p = 0; p < count; ++p) {
        float acc = 0.0f;
        for (int j = 0; j < 16; ++j) { float d = qpaa[16 * q + j] - paa[16 * p + j]; float dd = d * d; float t = w[j] * dd; acc = acc + t; }
        if (acc <= thresh[q]) { want.push_back({q, p}); ++want_per[q]; }
      }
    const unsigned cap = (trial % 4 == 3) ? (unsigned)(want.size() / 2) : (unsigned)want.size() + 1;
    std::vector<unsigned> out_q(cap + 1), out_pos(cap + 1), per(nq, 0);
    unsigned n = 0;
    gridDim = {1u + (unsigned)(rng() % 5), 1, 1}; blockDim = {1, 1, 1}; threadIdx = {0, 0, 0};
    for (unsigned b = 0; b < gridDim.x; ++b) {
      blockIdx = {b, 0, 0};
      search_batch_filter(paa.data(), count, w.data(), qpaa.data(), thresh.data(), nq, out_q.data(), out_pos.data(), cap, &n, per.data());
    }
    ++filters;
    std::vector<std::pair<unsigned, unsigned>> got;
    for (unsigned k = 0; k < std::min(n, cap); ++k) got.push_back({out_q[k], out_pos[k]});
    std::sort(got.begin(), got.end()); std::sort(want.begin(), want.end());
    bool ok = n == want.size() && per == want_per && out_q[cap] == 0 &&
              (cap >= n ? got == want : std::includes(want.begin(), want.end(), got.begin(), got.end()));
    if (!ok) { ++bad; if (bad < 5) printf("filter trial %d: %u survivors, expected %zu\n", trial, n, want.size()); }
    // Refine: rows of a length that may or may not be a multiple of 8.
    const unsigned len = 1 + rng() % 300, rowsn = 1 + rng() % 50, qn = 1 + rng() % 10, pairs = 1 + rng() % 200;
    std::vector<float> rows((size_t)rowsn * len), qrows((size_t)qn * len);
    for (auto& v : rows) v = normal(rng);
    for (auto& v : qrows) v = normal(rng);
    std::vector<unsigned> pq(pairs), pp(pairs);
    for (unsigned i = 0; i < pairs; ++i) { pq[i] = rng() % qn; pp[i] = rng() % rowsn; }
    std::vector<double> limit(qn);
    for (auto& l : limit) l = 2.0 * len * (double)(rng() % 100) / 100.0;
    std::vector<unsigned> rq(pairs), rp(pairs); std::vector<double> rs(pairs); unsigned rn = 0;
    gridDim = {1u + (unsigned)(rng() % 5), 1, 1};
    for (unsigned b = 0; b < gridDim.x; ++b) {
      blockIdx = {b, 0, 0};
      search_batch_refine(rows.data(), len, qrows.data(), pq.data(), pp.data(), pairs, limit.data(), rq.data(), rp.data(), rs.data(), &rn);
    }
    ++refines;
    std::vector<std::tuple<unsigned, unsigned, double>> rg, rw;
    for (unsigned k = 0; k < rn; ++k) rg.push_back({rq[k], rp[k], rs[k]});
    for (unsigned i = 0; i < pairs; ++i) {
      double s = sq_dist_rust(&qrows[(size_t)pq[i] * len], &rows[(size_t)pp[i] * len], len);
      if (s <= limit[pq[i]]) rw.push_back({pq[i], pp[i], s});
    }
    std::sort(rg.begin(), rg.end()); std::sort(rw.begin(), rw.end());
    if (rg != rw) { ++bad; if (bad < 5) printf("refine trial %d: %zu kept, expected %zu\n", trial, rg.size(), rw.size()); }
  }
  // The half-precision refine: the conversion against ldexp, the kept pairs against a loop.
  long halves = 0;
  for (unsigned h = 0; h < 65536; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf and NaN are never written
    const unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? std::ldexp((double)m, -24) : std::ldexp(1.0 + m / 1024.0, (int)e - 15);
    if (h & 0x8000) v = -v;
    if ((double)synfire_half_to_float((unsigned short)h) != v) { ++bad; if (bad < 5) printf("half %04x\n", h); }
    ++halves;
  }
  for (int trial = 0; trial < 60; ++trial) {
    const unsigned len = 1 + rng() % 300, rowsn = 1 + rng() % 40, qn = 1 + rng() % 8, pairs = 1 + rng() % 150;
    std::vector<unsigned short> rows16((size_t)rowsn * len);
    for (auto& h : rows16) { do h = (unsigned short)(rng() & 0xffff); while (((h >> 10) & 0x1f) > 17); }
    std::vector<float> qrows((size_t)qn * len);
    for (auto& v : qrows) v = normal(rng);
    std::vector<unsigned> pq(pairs), pp(pairs);
    for (unsigned i = 0; i < pairs; ++i) { pq[i] = rng() % qn; pp[i] = rng() % rowsn; }
    auto plain = [&](unsigned q, unsigned p) {
      float acc = 0.0f;
      for (unsigned t = 0; t < len; ++t) { float d = qrows[(size_t)q * len + t] - synfire_half_to_float(rows16[(size_t)p * len + t]); float dd = d * d; acc = acc + dd; }
      return acc;
    };
    std::vector<float> th(qn);
    for (unsigned q = 0; q < qn; ++q) th[q] = (rng() % 2) ? plain(q, pp[rng() % pairs]) : (float)(rng() % 1000);
    std::vector<unsigned> oq(pairs), op(pairs); unsigned on = 0;
    gridDim = {1u + (unsigned)(rng() % 5), 1, 1};
    for (unsigned b = 0; b < gridDim.x; ++b) {
      blockIdx = {b, 0, 0};
      search_batch_refine_half(rows16.data(), len, qrows.data(), pq.data(), pp.data(), pairs, th.data(), oq.data(), op.data(), &on);
    }
    std::vector<std::pair<unsigned, unsigned>> got, want;
    for (unsigned k = 0; k < on; ++k) got.push_back({oq[k], op[k]});
    for (unsigned i = 0; i < pairs; ++i) if (plain(pq[i], pp[i]) <= th[pq[i]]) want.push_back({pq[i], pp[i]});
    std::sort(got.begin(), got.end()); std::sort(want.begin(), want.end());
    if (got != want) { ++bad; if (bad < 5) printf("half refine trial %d: %zu kept, expected %zu\n", trial, got.size(), want.size()); }
  }
  printf("search batch: checked %ld filters, %ld refines, %ld half values and 60 half refines, mismatches %ld\n", filters, refines, halves, bad);
  return bad != 0;
}
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
  return (bad != 0) | check_batch();
}
