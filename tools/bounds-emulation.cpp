// Runs kernels/bounds.cu's device code on the host (through tools/kernel-shim.h) and checks
// the threshold search's join bounds against plain definitions: a prefix chain's ends (an
// event of the last type is an end when some chain of events, one per node, has every gap's
// delay d with low < d <= high), each pair's successor bits, and each join's popcount of
// their intersection, and the one-floor pass's joins (bounds_floor_joins: which joins reach a
// floor, found through each prefix's range of partners). Streams on a coarse grid (equal times and delays on interval edges are
// common), gaps whose `low` admits a zero delay, repeated types; several blocks and threads
// to exercise the grid-stride loops. On a GPU, tests/significance_gpu.rs compares the
// kernels with the host's join_bounds_cpu. Built and run by tools/check-kernels.sh.
#include "tools/kernel-shim.h"
#include "kernels/bounds.cu"
#include <cstdio>
#include <random>
#include <vector>
#include <algorithm>
#include <functional>

static void run_grid(unsigned total, std::mt19937_64& rng, void (*launch)()) {
  gridDim = {1u + (unsigned)(rng() % 4), 1, 1};
  blockDim = {1u + (unsigned)(rng() % 5), 1, 1};
  (void)total;
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; launch(); }
}

static std::function<void()> current;
static void call_current() { current(); }

int main() {
  std::mt19937_64 rng(41);
  long checked = 0, bad = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const unsigned types = 1 + rng() % 5;
    std::vector<std::vector<double>> by_type(types);
    for (auto& v : by_type) {
      const unsigned n = rng() % 40;
      for (unsigned i = 0; i < n; ++i) v.push_back((double)(rng() % 60) * 0.001);
      std::sort(v.begin(), v.end());
    }
    std::vector<unsigned> offsets{0};
    std::vector<double> times;
    for (auto& v : by_type) { times.insert(times.end(), v.begin(), v.end()); offsets.push_back((unsigned)times.size()); }
    if (times.empty()) times.push_back(0.0);
    // Gaps: (low, high] with low = -0- (a zero delay fits), 0, or positive.
    const double lows[] = {std::nextafter(0.0, -1.0), 0.0, 0.002, 0.005};
    const double highs[] = {0.0, 0.003, 0.005, 0.01};
    auto gap = [&](double& lo, double& hi) {
      do { lo = lows[rng() % 4]; hi = highs[rng() % 4]; } while (!(hi > lo));
    };
    const unsigned nodes = 2 + rng() % 3, prefixes = 1 + rng() % 6, pairs = 1 + rng() % 6;
    std::vector<unsigned> ct(prefixes * nodes);
    std::vector<double> clo(prefixes * (nodes - 1)), chi(prefixes * (nodes - 1));
    for (auto& t : ct) t = rng() % types;
    for (size_t g = 0; g < clo.size(); ++g) gap(clo[g], chi[g]);
    std::vector<unsigned> pf(pairs), pt(pairs);
    std::vector<double> plo(pairs), phi(pairs);
    for (unsigned q = 0; q < pairs; ++q) { pf[q] = rng() % types; pt[q] = rng() % types; gap(plo[q], phi[q]); }
    auto n_of = [&](unsigned t) { return offsets[t + 1] - offsets[t]; };
    auto words = [](unsigned n) { return (n + 63) / 64; };
    // Plain definitions.
    std::vector<std::vector<bool>> want_ends(prefixes);
    for (unsigned p = 0; p < prefixes; ++p) {
      std::vector<bool> cur(n_of(ct[p * nodes]), true);
      for (unsigned d = 1; d < nodes; ++d) {
        const unsigned a = ct[p * nodes + d - 1], b = ct[p * nodes + d];
        std::vector<bool> next(n_of(b), false);
        for (unsigned y = 0; y < n_of(b); ++y)
          for (unsigned e = 0; e < n_of(a); ++e) {
            const double dl = by_type[b][y] - by_type[a][e];
            if (cur[e] && dl > clo[p * (nodes - 1) + d - 1] && dl <= chi[p * (nodes - 1) + d - 1]) next[y] = true;
          }
        cur = next;
      }
      want_ends[p] = cur;
    }
    std::vector<std::vector<bool>> want_succ(pairs);
    for (unsigned q = 0; q < pairs; ++q) {
      want_succ[q].assign(n_of(pf[q]), false);
      for (unsigned e = 0; e < n_of(pf[q]); ++e)
        for (unsigned y = 0; y < n_of(pt[q]); ++y) {
          const double dl = by_type[pt[q]][y] - by_type[pf[q]][e];
          if (dl > plo[q] && dl <= phi[q]) want_succ[q][e] = true;
        }
    }
    // The kernels, step by step as src/device/episodes.rs runs them.
    std::vector<unsigned long long> prev;
    std::vector<unsigned> prev_off;
    for (unsigned d = 1; d < nodes; ++d) {
      std::vector<unsigned> from(prefixes), to(prefixes), item_off{0}, out_off{0};
      std::vector<double> lo(prefixes), hi(prefixes);
      for (unsigned p = 0; p < prefixes; ++p) {
        from[p] = ct[p * nodes + d - 1]; to[p] = ct[p * nodes + d];
        lo[p] = clo[p * (nodes - 1) + d - 1]; hi[p] = chi[p * (nodes - 1) + d - 1];
        item_off.push_back(item_off.back() + n_of(to[p]));
        out_off.push_back(out_off.back() + words(n_of(to[p])));
      }
      std::vector<unsigned long long> out(out_off.back() + 1, 0);
      const unsigned long long* pv = d == 1 ? nullptr : prev.data();
      const unsigned* po = d == 1 ? nullptr : prev_off.data();
      current = [&] { bounds_chain_step(times.data(), offsets.data(), prefixes, from.data(), to.data(), lo.data(), hi.data(), pv, po, out.data(), out_off.data(), item_off.data()); };
      run_grid(item_off.back(), rng, call_current);
      prev = out; prev_off = out_off;
    }
    std::vector<unsigned> item_off{0}, succ_off{0};
    for (unsigned q = 0; q < pairs; ++q) { item_off.push_back(item_off.back() + n_of(pf[q])); succ_off.push_back(succ_off.back() + words(n_of(pf[q]))); }
    std::vector<unsigned long long> succ(succ_off.back() + 1, 0);
    current = [&] { bounds_successors(times.data(), offsets.data(), pairs, pf.data(), pt.data(), plo.data(), phi.data(), succ.data(), succ_off.data(), item_off.data()); };
    run_grid(item_off.back(), rng, call_current);
    for (unsigned p = 0; p < prefixes; ++p)
      for (unsigned y = 0; y < want_ends[p].size(); ++y) {
        ++checked;
        bad += ((prev[prev_off[p] + y / 64] >> (y % 64)) & 1) != want_ends[p][y];
      }
    for (unsigned q = 0; q < pairs; ++q)
      for (unsigned e = 0; e < want_succ[q].size(); ++e) {
        ++checked;
        bad += ((succ[succ_off[q] + e / 64] >> (e % 64)) & 1) != want_succ[q][e];
      }
    // Joins: every prefix with every pair starting at its last type.
    std::vector<unsigned> jp, jq, jw;
    for (unsigned p = 0; p < prefixes; ++p)
      for (unsigned q = 0; q < pairs; ++q)
        if (pf[q] == ct[p * nodes + nodes - 1]) { jp.push_back(p); jq.push_back(q); jw.push_back(words(n_of(pf[q]))); }
    std::vector<unsigned> bound(jp.size() + 1, 0);
    current = [&] { bounds_and_count((unsigned)jp.size(), jp.data(), jq.data(), prev.data(), prev_off.data(), succ.data(), succ_off.data(), jw.data(), bound.data()); };
    run_grid((unsigned)jp.size(), rng, call_current);
    for (size_t i = 0; i < jp.size(); ++i) {
      unsigned want = 0;
      for (unsigned e = 0; e < want_succ[jq[i]].size(); ++e) want += want_ends[jp[i]][e] && want_succ[jq[i]][e];
      ++checked;
      bad += bound[i] != want;
    }
    // The one-floor pass's joins (bounds_floor_joins): the pairs ordered by first type, each
    // prefix joined with the range of pairs starting at its last type; counts drawn at random;
    // the joins whose min(count, count, popcount) reaches the floor, appended up to a capacity
    // (too small half the time: `found` must still count them all).
    {
      std::vector<unsigned> order(pairs);
      for (unsigned q = 0; q < pairs; ++q) order[q] = q;
      std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return pf[a] < pf[b]; });
      std::vector<unsigned> cnt(prefixes), scnt(pairs), part_lo(prefixes), join_off{0}, ends_off(prefixes), wds(prefixes), soff(pairs);
      for (auto& c : cnt) c = rng() % 12;
      for (auto& c : scnt) c = rng() % 12;
      const unsigned fl = 1 + rng() % 6;
      for (unsigned p = 0; p < prefixes; ++p) {
        const unsigned last = ct[p * nodes + nodes - 1];
        unsigned lo = 0;
        while (lo < pairs && pf[order[lo]] < last) ++lo;
        unsigned hi = lo;
        while (hi < pairs && pf[order[hi]] == last) ++hi;
        part_lo[p] = lo;
        join_off.push_back(join_off.back() + (hi - lo));
        ends_off[p] = prev_off[p];
        wds[p] = words(n_of(last));
      }
      for (unsigned j = 0; j < pairs; ++j) soff[j] = succ_off[order[j]];
      std::vector<unsigned> sc(pairs);
      for (unsigned j = 0; j < pairs; ++j) sc[j] = scnt[order[j]];
      std::vector<std::pair<unsigned, unsigned>> want_joins;
      for (unsigned p = 0; p < prefixes; ++p)
        for (unsigned j = part_lo[p]; j < part_lo[p] + (join_off[p + 1] - join_off[p]); ++j) {
          unsigned c = 0;
          for (unsigned e = 0; e < want_succ[order[j]].size(); ++e) c += want_ends[p][e] && want_succ[order[j]][e];
          if (std::min(std::min(cnt[p], sc[j]), c) >= fl) want_joins.push_back({p, j});
        }
      const unsigned capacity = (rng() % 2) ? (unsigned)want_joins.size() + 1 : (unsigned)(want_joins.size() / 2);
      std::vector<unsigned> out_i(capacity + 1), out_j(capacity + 1);
      unsigned found = 0;
      current = [&] { bounds_floor_joins(prefixes, join_off.data(), part_lo.data(), prev.data(), ends_off.data(), wds.data(), cnt.data(), succ.data(), soff.data(), sc.data(), fl, capacity, &found, out_i.data(), out_j.data()); };
      run_grid(join_off.back(), rng, call_current);
      ++checked;
      bad += found != want_joins.size();
      if (found <= capacity) {
        std::vector<std::pair<unsigned, unsigned>> got;
        for (unsigned k = 0; k < found; ++k) got.push_back({out_i[k], out_j[k]});
        std::sort(got.begin(), got.end());
        ++checked;
        bad += got != want_joins;
      }
    }
  }
  std::printf("bounds emulation: checked %ld bits and bounds, mismatches %ld\n", checked, bad);
  return bad == 0 ? 0 : 1;
}
