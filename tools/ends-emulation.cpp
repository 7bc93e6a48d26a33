// Runs kernels/ends.cu's device code on the host (through tools/kernel-shim.h) and checks it
// against plain definitions: an episode's ends (the events of its last type that end some
// occurrence, each with the largest start over those occurrences, from every chain of events
// one per node whose every gap's delay d has low < d <= high) and its exact non-overlapped
// count (the largest set of occurrences whose spans are pairwise disjoint, the later starting
// strictly after the earlier ends: interval scheduling over every occurrence, enumerated).
// Streams on a coarse grid (equal times and delays on interval edges are common), gaps whose
// `low` admits a zero delay (between different types in id order only, as the host's
// Interval::low_by_time gives), repeated types, prefix trees of 2 to 5 nodes whose levels
// share parents, several blocks and threads to exercise the grid-stride loops. On a GPU,
// tests/gpu_equivalence.rs compares the kernels with the host's counter. Built and run by
// tools/check-kernels.sh.
#include "tools/kernel-shim.h"
#include "kernels/ends.cu"
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

static std::function<void()> current;

static void run_grid(std::mt19937_64& rng) {
  gridDim = {1u + (unsigned)(rng() % 4), 1, 1};
  blockDim = {1u + (unsigned)(rng() % 5), 1, 1};
  for (unsigned b = 0; b < gridDim.x; ++b)
    for (unsigned t = 0; t < blockDim.x; ++t) {
      blockIdx = {b, 0, 0};
      threadIdx = {t, 0, 0};
      current();
    }
}

// One node of a prefix tree: its parent at the previous level (unused at the first level,
// whose parent is the single node `last`), the parent's last type, its own type, its gap.
struct Item {
  unsigned parent, last, x;
  double low, high;
};

int main() {
  std::mt19937_64 rng(77);
  long checked = 0, bad = 0, nonzero = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const unsigned types = 1 + rng() % 4;
    std::vector<std::vector<double>> by_type(types);
    for (auto& v : by_type) {
      const unsigned n = rng() % 30;
      for (unsigned i = 0; i < n; ++i) v.push_back((double)(rng() % 80) * 0.001);
      std::sort(v.begin(), v.end());
    }
    std::vector<unsigned> offsets{0};
    std::vector<double> times;
    for (auto& v : by_type) {
      times.insert(times.end(), v.begin(), v.end());
      offsets.push_back((unsigned)times.size());
    }
    if (times.empty()) times.push_back(0.0);
    auto n_of = [&](unsigned t) { return offsets[t + 1] - offsets[t]; };
    // A gap from `a` to `b`: (low, high] with low = -0- only where a zero delay may fit.
    const double highs[] = {0.0, 0.003, 0.005, 0.01, 0.02};
    auto gap = [&](unsigned a, unsigned b, double& lo, double& hi) {
      const double lows[] = {a < b ? std::nextafter(0.0, -1.0) : 0.0, 0.0, 0.002, 0.005};
      do {
        lo = lows[rng() % 4];
        hi = highs[rng() % 5];
      } while (!(hi > lo));
    };
    // Levels of the tree: level 0 holds 2-node prefixes (parent: the single node `last`).
    const unsigned depth = 1 + rng() % 4;  // candidates have depth + 1 nodes
    std::vector<std::vector<Item>> levels(depth);
    std::vector<std::vector<std::vector<unsigned>>> chain(depth);  // types per item
    std::vector<std::vector<std::vector<std::pair<double, double>>>> gaps(depth);
    for (unsigned d = 0; d < depth; ++d) {
      const unsigned items = 1 + rng() % 7;
      for (unsigned i = 0; i < items; ++i) {
        Item it{};
        std::vector<unsigned> ty;
        std::vector<std::pair<double, double>> gp;
        if (d == 0) {
          it.last = rng() % types;
          ty.push_back(it.last);
        } else {
          it.parent = rng() % levels[d - 1].size();
          ty = chain[d - 1][it.parent];
          gp = gaps[d - 1][it.parent];
          it.last = ty.back();
        }
        it.x = rng() % types;
        gap(it.last, it.x, it.low, it.high);
        ty.push_back(it.x);
        gp.push_back({it.low, it.high});
        levels[d].push_back(it);
        chain[d].push_back(ty);
        gaps[d].push_back(gp);
      }
    }
    // The kernels, level by level as src/device/episodes.rs runs them: every level but the
    // last builds ends, the last is counted.
    std::vector<unsigned> prev_idx, prev_len;
    std::vector<double> prev_starts;
    std::vector<unsigned long long> prev_off;
    for (unsigned d = 0; d < depth; ++d) {
      const auto& lv = levels[d];
      const unsigned items = (unsigned)lv.size();
      std::vector<unsigned> parent(items), last(items), x(items);
      std::vector<double> lo(items), hi(items);
      for (unsigned i = 0; i < items; ++i) {
        parent[i] = lv[i].parent; last[i] = lv[i].last; x[i] = lv[i].x;
        lo[i] = lv[i].low; hi[i] = lv[i].high;
      }
      const unsigned* pi = d == 0 ? nullptr : prev_idx.data();
      const double* ps = d == 0 ? nullptr : prev_starts.data();
      const unsigned long long* po = d == 0 ? nullptr : prev_off.data();
      const unsigned* pl = d == 0 ? nullptr : prev_len.data();
      // Plain definitions for every item of this level: all occurrences, by chains.
      std::vector<unsigned> want_count(items);
      std::vector<std::vector<double>> want_start(items);  // per event of x: -inf when none
      for (unsigned i = 0; i < items; ++i) {
        const auto& ty = chain[d][i];
        const auto& gp = gaps[d][i];
        std::vector<std::pair<double, double>> occ;  // (start, end)
        std::function<void(unsigned, unsigned, double)> walk = [&](unsigned k, unsigned e, double start) {
          if (k + 1 == ty.size()) {
            occ.push_back({start, by_type[ty[k]][e]});
            return;
          }
          for (unsigned y = 0; y < by_type[ty[k + 1]].size(); ++y) {
            const double dl = by_type[ty[k + 1]][y] - by_type[ty[k]][e];
            if (dl > gp[k].first && dl <= gp[k].second) walk(k + 1, y, start);
          }
        };
        want_start[i].assign(n_of(ty.back()), -INFINITY);
        for (unsigned e = 0; e < by_type[ty[0]].size(); ++e) walk(0, e, by_type[ty[0]][e]);
        std::sort(occ.begin(), occ.end(), [](auto a, auto b) { return a.second < b.second; });
        double last_end = -INFINITY;
        unsigned c = 0;
        for (auto& o : occ)
          if (o.first > last_end) { ++c; last_end = o.second; }
        want_count[i] = c;
        // Ends: per event of the last type, the largest start of the occurrences ending there.
        std::function<void(unsigned, unsigned, double)> mark = [&](unsigned k, unsigned e, double start) {
          if (k + 1 == ty.size()) {
            want_start[i][e] = std::max(want_start[i][e], start);
            return;
          }
          for (unsigned y = 0; y < by_type[ty[k + 1]].size(); ++y) {
            const double dl = by_type[ty[k + 1]][y] - by_type[ty[k]][e];
            if (dl > gp[k].first && dl <= gp[k].second) mark(k + 1, y, start);
          }
        };
        for (unsigned e = 0; e < by_type[ty[0]].size(); ++e) mark(0, e, by_type[ty[0]][e]);
      }
      // Counts of this level's items.
      std::vector<unsigned> count(items, 12345);
      current = [&] { ends_count(times.data(), offsets.data(), items, parent.data(), last.data(), x.data(), lo.data(), hi.data(), pi, ps, po, pl, count.data()); };
      run_grid(rng);
      for (unsigned i = 0; i < items; ++i) {
        ++checked;
        nonzero += want_count[i] > 0;
        if (count[i] != want_count[i]) {
          ++bad;
          if (bad < 10) std::printf("trial %d level %u item %u: count %u, want %u\n", trial, d, i, count[i], want_count[i]);
        }
      }
      // Ends of this level's items (the next level's parents): ends_level, then the packing.
      std::vector<unsigned long long> out_off{0};
      std::vector<unsigned> item_off{0};
      for (unsigned i = 0; i < items; ++i) {
        out_off.push_back(out_off.back() + n_of(x[i]));
        item_off.push_back(item_off.back() + n_of(x[i]));
      }
      std::vector<unsigned> flags(out_off.back() + 1, 7), out_idx(out_off.back() + 1, 7), out_len(items, 0);
      std::vector<double> starts(out_off.back() + 1, -1.0), out_starts(out_off.back() + 1, -1.0);
      current = [&] { ends_level(times.data(), offsets.data(), items, parent.data(), last.data(), x.data(), lo.data(), hi.data(), pi, ps, po, pl, flags.data(), starts.data(), out_off.data(), item_off.data()); };
      run_grid(rng);
      // Packed in chunks of a random size (1 to 70 events), as src/device/episodes.rs does.
      const unsigned chunk = 1 + rng() % 70;
      std::vector<unsigned> chunk_off{0};
      for (unsigned i = 0; i < items; ++i) chunk_off.push_back(chunk_off.back() + (n_of(x[i]) + chunk - 1) / chunk);
      std::vector<unsigned> counts(chunk_off.back() + 1, 99), bases(chunk_off.back() + 1, 99);
      current = [&] { ends_chunk_count(items, item_off.data(), chunk_off.data(), chunk, flags.data(), out_off.data(), counts.data()); };
      run_grid(rng);
      current = [&] { ends_chunk_scan(items, chunk_off.data(), counts.data(), bases.data(), out_len.data()); };
      run_grid(rng);
      current = [&] { ends_chunk_pack(items, item_off.data(), chunk_off.data(), chunk, flags.data(), starts.data(), out_off.data(), bases.data(), out_idx.data(), out_starts.data()); };
      run_grid(rng);
      for (unsigned i = 0; i < items; ++i) {
        std::vector<unsigned> idx;
        std::vector<double> st;
        for (unsigned y = 0; y < want_start[i].size(); ++y)
          if (want_start[i][y] != -INFINITY) { idx.push_back(y); st.push_back(want_start[i][y]); }
        ++checked;
        bool same = out_len[i] == idx.size();
        for (unsigned k = 0; same && k < idx.size(); ++k)
          same = out_idx[out_off[i] + k] == idx[k] && out_starts[out_off[i] + k] == st[k];
        if (!same) {
          ++bad;
          if (bad < 10) std::printf("trial %d level %u item %u: %u ends, want %zu\n", trial, d, i, out_len[i], idx.size());
        }
      }
      prev_idx = out_idx; prev_starts = out_starts; prev_off = out_off; prev_len = out_len;
    }
  }
  std::printf("ends emulation: checked %ld counts and end lists (%ld counts nonzero), mismatches %ld\n", checked, nonzero, bad);
  return bad == 0 && nonzero > 200 ? 0 : 1;
}
