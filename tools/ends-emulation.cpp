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
#include <array>
#include <cmath>
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
  const bool ends_ok = bad == 0 && nonzero > 200;

  // hybrid_count: a parent alpha of 1 to 3 distinct units, a unit u outside it added at the
  // end or at the start, counted against several trains of u laid out as the hybrid trains
  // are (segment a * per + jj), against the count of every occurrence of the whole episode
  // enumerated with that train as u's.
  long h_checked = 0, h_bad = 0, h_nonzero = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const unsigned types = 2 + rng() % 3;
    std::vector<std::vector<double>> by_type(types);
    for (auto& v : by_type) {
      const unsigned n = rng() % 25;
      for (unsigned i = 0; i < n; ++i) v.push_back((double)(rng() % 60) * 0.001);
      std::sort(v.begin(), v.end());
    }
    const double highs[] = {0.0, 0.003, 0.005, 0.01, 0.02};
    auto gap = [&](unsigned a, unsigned b, double& lo, double& hi) {
      const double lows[] = {a < b ? std::nextafter(0.0, -1.0) : 0.0, 0.0, 0.002, 0.005};
      do {
        lo = lows[rng() % 4];
        hi = highs[rng() % 5];
      } while (!(hi > lo));
    };
    // Occurrences (start, end, first event, last event) of a chain whose node k's events are
    // ev[k], gaps g[k].
    auto occurrences = [](const std::vector<const std::vector<double>*>& ev,
                          const std::vector<std::pair<double, double>>& g) {
      std::vector<std::array<double, 4>> occ;
      std::function<void(unsigned, unsigned, unsigned)> walk = [&](unsigned k, unsigned e, unsigned first) {
        if (k + 1 == ev.size()) {
          occ.push_back({(*ev[0])[first], (*ev[k])[e], (double)first, (double)e});
          return;
        }
        for (unsigned y = 0; y < ev[k + 1]->size(); ++y) {
          const double dl = (*ev[k + 1])[y] - (*ev[k])[e];
          if (dl > g[k].first && dl <= g[k].second) walk(k + 1, y, first);
        }
      };
      for (unsigned e = 0; e < ev[0]->size(); ++e) walk(0, e, e);
      return occ;
    };
    auto schedule = [](std::vector<std::array<double, 4>> occ) {
      std::sort(occ.begin(), occ.end(), [](auto a, auto b) { return a[1] < b[1]; });
      double last_end = -INFINITY;
      unsigned c = 0;
      for (auto& o : occ)
        if (o[0] > last_end) { ++c; last_end = o[1]; }
      return c;
    };
    // The added units' trains: `slots` units, `per` trains each (segment a * per + jj).
    const unsigned per = 1 + rng() % 4;
    const unsigned slots = 1 + rng() % 2;
    std::vector<unsigned> seg_off{0};
    std::vector<double> trains;
    std::vector<std::vector<std::vector<double>>> train(slots, std::vector<std::vector<double>>(per));
    for (unsigned a = 0; a < slots; ++a)
      for (unsigned jj = 0; jj < per; ++jj) {
        const unsigned n = rng() % 25;
        for (unsigned i = 0; i < n; ++i) train[a][jj].push_back((double)(rng() % 60) * 0.001);
        std::sort(train[a][jj].begin(), train[a][jj].end());
        trains.insert(trains.end(), train[a][jj].begin(), train[a][jj].end());
        seg_off.push_back((unsigned)trains.size());
      }
    if (trains.empty()) trains.push_back(0.0);
    // Hypotheses: a parent chain over the recording's types, the added slot, where.
    const unsigned hyps = 1 + rng() % 6;
    std::vector<unsigned> unit(hyps), prefixed(hyps), parent_off{0};
    std::vector<double> low(hyps), high(hyps), parent_times, parent_values;
    std::vector<std::vector<unsigned>> want(hyps, std::vector<unsigned>(per));
    for (unsigned h = 0; h < hyps; ++h) {
      const unsigned len = 1 + rng() % std::min(3u, types);
      std::vector<unsigned> ty;
      while (ty.size() < len) {
        const unsigned t = rng() % types;
        if (std::find(ty.begin(), ty.end(), t) == ty.end()) ty.push_back(t);
      }
      std::vector<std::pair<double, double>> g(len - 1);
      for (unsigned k = 0; k + 1 < len; ++k) gap(ty[k], ty[k + 1], g[k].first, g[k].second);
      std::vector<const std::vector<double>*> ev;
      for (unsigned t : ty) ev.push_back(&by_type[t]);
      const auto occ = occurrences(ev, g);
      unit[h] = rng() % slots;
      prefixed[h] = rng() % 2;
      // The added unit's id sits above the recording's types (ties: the host orders by id).
      const unsigned u = types + unit[h];
      if (prefixed[h]) {
        gap(u, ty[0], low[h], high[h]);
        std::vector<double> earliest(ev[0]->size(), INFINITY);
        for (auto& o : occ) earliest[(unsigned)o[2]] = std::min(earliest[(unsigned)o[2]], o[1]);
        for (unsigned e = 0; e < ev[0]->size(); ++e)
          if (earliest[e] != INFINITY) { parent_times.push_back((*ev[0])[e]); parent_values.push_back(earliest[e]); }
      } else {
        gap(ty.back(), u, low[h], high[h]);
        std::vector<double> latest(ev.back()->size(), -INFINITY);
        for (auto& o : occ) latest[(unsigned)o[3]] = std::max(latest[(unsigned)o[3]], o[0]);
        for (unsigned e = 0; e < ev.back()->size(); ++e)
          if (latest[e] != -INFINITY) { parent_times.push_back((*ev.back())[e]); parent_values.push_back(latest[e]); }
      }
      parent_off.push_back((unsigned)parent_times.size());
      for (unsigned jj = 0; jj < per; ++jj) {
        auto ev2 = ev;
        auto g2 = g;
        if (prefixed[h]) {
          ev2.insert(ev2.begin(), &train[unit[h]][jj]);
          g2.insert(g2.begin(), {low[h], high[h]});
        } else {
          ev2.push_back(&train[unit[h]][jj]);
          g2.push_back({low[h], high[h]});
        }
        want[h][jj] = schedule(occurrences(ev2, g2));
      }
    }
    if (parent_times.empty()) { parent_times.push_back(0.0); parent_values.push_back(0.0); }
    std::vector<unsigned> count(hyps * per, 12345);
    current = [&] { hybrid_count(hyps, per, unit.data(), prefixed.data(), low.data(), high.data(), parent_off.data(), parent_times.data(), parent_values.data(), seg_off.data(), trains.data(), count.data()); };
    run_grid(rng);
    for (unsigned h = 0; h < hyps; ++h)
      for (unsigned jj = 0; jj < per; ++jj) {
        ++h_checked;
        h_nonzero += want[h][jj] > 0;
        if (count[h * per + jj] != want[h][jj]) {
          ++h_bad;
          if (h_bad < 10) std::printf("hybrid trial %d hyp %u train %u (%s): count %u, want %u\n", trial, h, jj, prefixed[h] ? "prefixed" : "appended", count[h * per + jj], want[h][jj]);
        }
      }
  }
  std::printf("hybrid emulation: checked %ld counts (%ld nonzero), mismatches %ld\n", h_checked, h_nonzero, h_bad);
  return ends_ok && h_bad == 0 && h_nonzero > 200 ? 0 : 1;
}
