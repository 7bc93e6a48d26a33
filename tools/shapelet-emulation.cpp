// Runs kernels/shapelet.cu's device code on the host, each warp as 32 lanes (user-level
// contexts switched round-robin, so every lane reaches a shuffle or __syncwarp before any
// lane passes it: a lane-accurate shim; tools/kernel-shim.h only syntax-checks),
// on random labelled sets with duplicates, constant stretches, affine copies and offsets, and
// checks it against a plain C++ version of the canonical definitions (src/shapelet):
//   1. shapelet_stats equals the two-pass statistics bit for bit;
//   2. every (candidate, series) interval [lo, hi] of shapelet_search holds the canonical
//      squared distance;
//   3. every record is sound: g_safe <= canonical gain <= max(g_safe, g_up), and where the
//      canonical best split is safe, gap_lo <= canonical gap <= gap_hi;
//   4. after shapelet_max_gain / shapelet_max_gap / shapelet_compact the pool holds the
//      canonical best candidate (plain shapelets and AND / OR terms).
// The GPU itself is checked against the CPU by tests/shapelet.rs on a GPU host. Built and run
// by tools/check-kernels.sh.
#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__
struct synfire_dim3 { unsigned x, y, z; };
synfire_dim3 threadIdx, blockIdx, blockDim, gridDim;
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { auto o = *p; if (v > o) *p = v; return o; }

// One warp: 32 lane contexts on this thread. A barrier lets the running lane hand over to
// the next one; lane 31 hands back to lane 0, so all 32 have arrived before any goes on.
struct Warp {
  ucontext_t main, lane[32];
  std::vector<char> stack[32];
  unsigned block;
  double d[32];
  unsigned u[32];
};
Warp* g_warp = nullptr;
inline unsigned lane_id() { return threadIdx.x % 32; }
inline void switch_to(unsigned from, unsigned to) {
  threadIdx = {to, 0, 0};
  swapcontext(&g_warp->lane[from], &g_warp->lane[to]);
  threadIdx = {from, 0, 0};
}
inline void __syncwarp(unsigned = 0xffffffffu) { const unsigned me = lane_id(); switch_to(me, (me + 1) % 32); }
inline double __shfl_up_sync(unsigned, double v, unsigned delta) {
  const unsigned lane = lane_id();
  g_warp->d[lane] = v;
  __syncwarp();
  const double r = lane >= delta ? g_warp->d[lane - delta] : v;
  __syncwarp();
  return r;
}
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
  const unsigned lane = lane_id();
  g_warp->u[lane] = v;
  __syncwarp();
  const unsigned r = g_warp->u[src];
  __syncwarp();
  return r;
}

#include "kernels/shapelet.cu"

typedef unsigned u32;

// ---- the canonical definitions (shapelet::distance, shapelet::split) ----
static void stats(const double* w, u32 l, double* mean, double* inv) {
  double sum = 0.0;
  for (u32 t = 0; t < l; ++t) sum += w[t];
  const double mu = sum / (double)l;
  double sq = 0.0;
  for (u32 t = 0; t < l; ++t) { const double d = w[t] - mu; sq += d * d; }
  const double sigma = std::sqrt(sq / (double)l);
  *mean = mu;
  *inv = (sigma > 1e-10 * std::fabs(mu) && sigma > 0.0) ? 1.0 / sigma : 0.0;
}
// Unsnapped min over windows of D (Eq. 1-2 squared).
static double raw_distance(const double* cand, u32 l, const double* series, u32 len) {
  double mu, inv;
  stats(cand, l, &mu, &inv);
  std::vector<double> z(l);
  for (u32 t = 0; t < l; ++t) z[t] = (cand[t] - mu) * inv;
  double best = INFINITY;
  for (u32 u = 0; u + l <= len; ++u) {
    double mb, ib;
    stats(series + u, l, &mb, &ib);
    double acc = 0.0;
    for (u32 t = 0; t < l; ++t) { const double d = z[t] - (series[u + t] - mb) * ib; acc += d * d; }
    best = std::min(best, acc / (double)l);
  }
  return best;
}
static double snap(double d2) { return d2 < 1e-6 ? 0.0 : d2; }
struct Table {
  std::vector<double> f;
  explicit Table(u32 n) { for (u32 k = 0; k <= n; ++k) f.push_back(k == 0 ? 0.0 : (double)k * std::log((double)k)); }
  double side(u32 size, const std::vector<u32>& c) const { double acc = 0.0; for (u32 v : c) acc += f[v]; return f[size] - acc; }
  double gain(const std::vector<u32>& left, const std::vector<u32>& total) const {
    u32 n = 0, nl = 0;
    std::vector<u32> right(total.size());
    for (size_t c = 0; c < total.size(); ++c) { n += total[c]; nl += left[c]; right[c] = total[c] - left[c]; }
    const double h = side(n, total), hl = side(nl, left), hr = side(n - nl, right);
    return (h - (hl + hr)) / (double)n;
  }
};
struct Split { bool some; double gain, gap; };
static Split best_split(const std::vector<double>& d2, const std::vector<u32>& cls, const std::vector<u32>& totals, const Table& t) {
  const u32 n = d2.size();
  std::vector<u32> order(n);
  for (u32 i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](u32 a, u32 b) { return d2[a] < d2[b] || (d2[a] == d2[b] && a < b); });
  std::vector<double> d(n), suffix(n + 1, 0.0);
  for (u32 k = 0; k < n; ++k) d[k] = std::sqrt(d2[order[k]]);
  for (u32 k = n; k-- > 0;) suffix[k] = suffix[k + 1] + d[k];
  std::vector<u32> left(totals.size(), 0);
  double sum_l = 0.0;
  Split best{false, 0, 0};
  for (u32 k = 1; k < n; ++k) {
    left[cls[order[k - 1]]] += 1;
    sum_l += d[k - 1];
    if (d[k - 1] >= d[k]) continue;
    const double g = t.gain(left, totals);
    const double gap = suffix[k] / (double)(n - k) - sum_l / (double)k;
    if (!best.some || g > best.gain || (g == best.gain && gap > best.gap)) best = {true, g, gap};
  }
  return best;
}

// ---- running kernels ----
template <class F> static void launch_threads(u32 grid, u32 block, F f) {
  blockDim = {block, 1, 1};
  gridDim = {grid, 1, 1};
  for (u32 b = 0; b < grid; ++b)
    for (u32 t = 0; t < block; ++t) { blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0}; f(); }
}
static void (*g_lane_body)(void*) = nullptr;
static void* g_lane_arg = nullptr;
static void lane_entry(int lane) {
  threadIdx = {(unsigned)lane, 0, 0};
  g_lane_body(g_lane_arg);
  // Lanes leave the kernel together (their exits are warp-uniform): hand on, the last one
  // back to the launcher.
  if (lane < 31) { threadIdx = {(unsigned)lane + 1, 0, 0}; setcontext(&g_warp->lane[lane + 1]); }
  setcontext(&g_warp->main);
}
template <class F> static void launch_warps(u32 warps, F f) {
  blockDim = {32, 1, 1};
  gridDim = {warps, 1, 1};
  g_lane_body = [](void* p) { (*static_cast<F*>(p))(); };
  g_lane_arg = &f;
  for (u32 b = 0; b < warps; ++b) {
    Warp w;
    g_warp = &w;
    blockIdx = {b, 0, 0};
    for (int t = 0; t < 32; ++t) {
      w.stack[t].resize(1 << 18);
      getcontext(&w.lane[t]);
      w.lane[t].uc_stack.ss_sp = w.stack[t].data();
      w.lane[t].uc_stack.ss_size = w.stack[t].size();
      w.lane[t].uc_link = nullptr;
      makecontext(&w.lane[t], (void (*)())lane_entry, 1, t);
    }
    threadIdx = {0, 0, 0};
    swapcontext(&w.main, &w.lane[0]);
    g_warp = nullptr;
  }
  g_lane_arg = nullptr;
}
static double unorder(synfire_u64 o) {
  return (o >> 63) ? __longlong_as_double((long long)(o & 0x7fffffffffffffffULL)) : __longlong_as_double((long long)~o);
}

static long checked = 0, failures = 0;
#define CHECK(cond, ...) do { ++checked; if (!(cond)) { if (++failures < 12) { printf(__VA_ARGS__); printf("\n"); } } } while (0)

struct Cand { u32 series, start, length; double gain, gap; bool some; std::vector<double> d2; };
static bool better(const Cand& a, const Cand& b) {
  if (!b.some) return a.some;
  if (!a.some) return false;
  if (a.gain != b.gain) return a.gain > b.gain;
  if (a.gap != b.gap) return a.gap > b.gap;
  return std::tie(a.series, a.start, a.length) < std::tie(b.series, b.start, b.length);
}

// One discovery on all series of `x` (n x len) with `lengths`; op/base as the kernel's.
// Returns the canonical best candidate (for a logical term to follow).
static Cand run(const std::vector<double>& x, u32 n, u32 len, const std::vector<u32>& labels, u32 classes,
                const std::vector<u32>& lengths, int op, const std::vector<double>& base) {
  const u32 nlen = lengths.size();
  std::vector<u32> subset(n), totals(classes, 0);
  for (u32 i = 0; i < n; ++i) { subset[i] = i; totals[labels[i]]++; }
  Table table(n);
  const double h_total = table.side(n, totals);
  std::vector<double> xmax(n, 0.0);
  for (u32 i = 0; i < n; ++i) for (u32 t = 0; t < len; ++t) xmax[i] = std::max(xmax[i], std::fabs(x[i * len + t]));
  std::vector<u32> len_off(nlen + 1, 0);
  for (u32 i = 0; i < nlen; ++i) len_off[i + 1] = len_off[i] + (len - lengths[i] + 1);
  const size_t records = (size_t)n * len_off[nlen];
  // 1. statistics
  const size_t cells = (size_t)nlen * n * len;
  std::vector<double> mean(cells, 0.0), w(cells, 0.0), q(cells, 0.0);
  launch_threads((cells + 63) / 64, 64, [&] {
    shapelet_stats(x.data(), subset.data(), n, len, lengths.data(), nlen, mean.data(), w.data(), q.data());
  });
  for (u32 li = 0; li < nlen; ++li)
    for (u32 k = 0; k < n; ++k)
      for (u32 u = 0; u + lengths[li] <= len; ++u) {
        double mu, inv;
        stats(&x[k * len + u], lengths[li], &mu, &inv);
        const size_t id = ((size_t)li * n + k) * len + u;
        CHECK(std::memcmp(&mu, &mean[id], 8) == 0 && (inv > 0.0) == (q[id] > 0.0),
              "stats differ at l=%u k=%u u=%u", lengths[li], k, u);
      }
  // 2. search with the debug intervals
  const u32 lsub = 3, blocks = (len - lengths[0] + 1 + 31) / 32;
  const u32 items = ((nlen + lsub - 1) / lsub) * blocks * n;
  const u32 warps = 2;
  const size_t per_warp = (size_t)n * len + 32 * (4 * (size_t)n + 1);
  std::vector<double> scratch(per_warp * warps), debug(records * n * 2, -1.0);
  std::vector<u32> uscratch((size_t)32 * (n + 2 * classes) * warps);
  std::vector<double> g_safe(records), gap_lo(records), gap_hi(records), g_up(records);
  u32 next = 0;
  launch_warps(warps, [&] {
    shapelet_search(x.data(), subset.data(), labels.data(), totals.data(), n, len, classes, lengths.data(), nlen,
                    len_off.data(), mean.data(), w.data(), q.data(), xmax.data(), table.f.data(), h_total,
                    base.data(), op, lsub, blocks, items, &next, scratch.data(), uscratch.data(), g_safe.data(),
                    gap_lo.data(), gap_hi.data(), g_up.data(), debug.data());
  });
  // 3. canonical values of every candidate, interval and record checks
  Cand best{0, 0, 0, 0, 0, false, {}};
  for (u32 k = 0; k < n; ++k)
    for (u32 li = 0; li < nlen; ++li) {
      const u32 l = lengths[li];
      for (u32 s = 0; s + l <= len; ++s) {
        const size_t cand = (size_t)k * len_off[nlen] + len_off[li] + s;
        std::vector<double> d2(n);
        for (u32 j = 0; j < n; ++j) {
          const double raw = raw_distance(&x[k * len + s], l, &x[j * len], len);
          const double lo = debug[(cand * n + j) * 2], hi = debug[(cand * n + j) * 2 + 1];
          if (j != k) CHECK(lo <= raw && raw <= hi, "interval [%g, %g] misses %.17g (k=%u l=%u s=%u j=%u)", lo, hi, raw, k, l, s, j);
          d2[j] = snap(raw);
          if (op == 1) d2[j] = std::max(d2[j], base[j]);
          if (op == 2) d2[j] = std::min(d2[j], base[j]);
        }
        const Split sp = best_split(d2, labels, totals, table);
        const double gs = g_safe[cand], gu = g_up[cand];
        if (sp.some) {
          CHECK(sp.gain >= gs, "safe gain %.17g above canonical %.17g", gs, sp.gain);
          CHECK(sp.gain <= std::max(gs, gu), "canonical gain %.17g above bounds %.17g, %.17g", sp.gain, gs, gu);
          if (sp.gain == gs && gu < gs)
            CHECK(gap_lo[cand] <= sp.gap && sp.gap <= gap_hi[cand], "gap %.17g outside [%.17g, %.17g]", sp.gap, gap_lo[cand], gap_hi[cand]);
        } else {
          CHECK(gs == -INFINITY, "a safe split where the canonical distances have none");
        }
        Cand c{k, s, l, sp.gain, sp.gap, sp.some, d2};
        if (better(c, best)) best = c;
      }
    }
  // 4. selection on the device
  synfire_u64 gkey = 0;
  launch_threads(2, 32, [&] { shapelet_max_gain(g_safe.data(), records, &gkey); });
  const double g = unorder(gkey);
  synfire_u64 gapkey = 0;
  launch_threads(2, 32, [&] { shapelet_max_gap(g_safe.data(), gap_lo.data(), records, g, &gapkey); });
  const double gap = gapkey == 0 ? -INFINITY : unorder(gapkey);
  const u32 cap = records;
  std::vector<u32> pool_u(3 * cap);
  std::vector<double> pool_r(4 * cap);
  u32 count = 0, flags[2] = {0, 0};
  launch_threads(2, 32, [&] {
    shapelet_compact(g_safe.data(), gap_lo.data(), gap_hi.data(), g_up.data(), records, g, gap, subset.data(),
                     lengths.data(), nlen, len_off.data(), pool_u.data(), pool_r.data(), &count, cap, flags);
  });
  if (best.some) {
    bool found = false;
    for (u32 i = 0; i < count; ++i)
      found = found || (pool_u[3 * i] == best.series && pool_u[3 * i + 1] == best.start && pool_u[3 * i + 2] == best.length);
    CHECK(found, "the canonical best (%u, %u, %u) is not among %u contenders", best.series, best.start, best.length, count);
  }
  return best;
}

int main() {
  std::mt19937_64 rng(11);
  auto uni = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  for (int trial = 0; trial < 24; ++trial) {
    const u32 n = 3 + rng() % 6, len = 6 + rng() % 24, classes = 2 + rng() % 2, hazards = rng() % 16;
    std::vector<double> x(n * len);
    std::vector<u32> labels(n);
    for (u32 i = 0; i < n; ++i) {
      labels[i] = i % classes;
      for (u32 t = 0; t < len; ++t) x[i * len + t] = uni(-1, 1);
      const u32 width = 2 + labels[i], at = rng() % (len - width);
      for (u32 t = at; t < at + width; ++t) x[i * len + t] += 2.0 * (labels[i] + 1) * std::fabs((double)(t - at) - width / 2.0);
    }
    if (hazards & 1) { std::copy(x.begin(), x.begin() + len, x.begin() + (n - 1) * len); labels[n - 1] = (labels[0] + 1) % classes; }
    if (hazards & 2) for (u32 t = 1; t < 5; ++t) x[len + t] = 0.25;
    if ((hazards & 4) && n >= 4) for (u32 t = 0; t < len; ++t) x[2 * len + t] = 3.0 * x[len + t] + 5.0;
    if (hazards & 8) for (u32 t = 0; t < len; ++t) x[(n - 1) * len + t] = 1000.0 + 0.01 * x[(n - 1) * len + t];
    std::vector<u32> lengths;
    const u32 lo = 2 + rng() % 3, step = 1 + rng() % 3;
    for (u32 l = lo; l <= len && lengths.size() < 9; l += step) lengths.push_back(l);
    const std::vector<double> none(n, 0.0);
    const Cand first = run(x, n, len, labels, classes, lengths, 0, none);
    if (first.some) {
      run(x, n, len, labels, classes, lengths, 1, first.d2);
      run(x, n, len, labels, classes, lengths, 2, first.d2);
    }
  }
  printf("shapelet emulation: checked %ld, failures %ld\n", checked, failures);
  return failures != 0;
}
