// Runs the episode kernels' device code on the host (through tools/kernel-shim.h) and checks
// that MTPE (segment counting + merge, exact and PreElim machines) equals the one-thread-per-
// episode functions for random bursty streams (many equal times, so gaps that admit a zero
// delay, lo < 0, meet ties between and within types) and 1..256 segments. The kernels are verified
// against the CPU reference on a GPU by tests/gpu_equivalence.rs; this catches logic slips in
// CI, where there is no GPU. Built and run by tools/check-kernels.sh.
#include "tools/kernel-shim.h"
#include "kernels/episodes.cu"
#include <vector>
#include <random>
#include <cstdio>
#include <algorithm>
int main() {
  std::mt19937_64 rng(7);
  // [0, x] intervals: lo just below zero (seconds, closed) or half a sample below (a clock).
  double LO[] = {0.0, 0.002, 0.001, 0.004, 0.0, 0.01, -4.9406564584124654e-324, -1e-5};
  double HI[] = {0.003, 0.005, 0.002, 0.006, 0.001, 0.05, 0.0015, 0.0};
  long checked = 0, bad = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int k = 1 + rng() % 3; int n = 100 + rng() % 1500;
    std::vector<std::vector<double>> by(k);
    double t = 0;
    for (int i = 0; i < n; ++i) { t += (rng()%5 < 4) ? (rng()%15)*1e-4 : (rng()%500)*1e-4; by[rng()%k].push_back(t); }
    std::vector<u32> off(k+1,0); std::vector<double> times;
    for (int j=0;j<k;++j){ off[j]=times.size(); times.insert(times.end(), by[j].begin(), by[j].end()); }
    off[k]=times.size();
    std::vector<double> all(times); std::sort(all.begin(), all.end());
    for (int rep=0; rep<6; ++rep) {
      const int N = 3; // template arg fixed; types random
      u32 types[N]; u32 ivs[N-1];
      for (int i=0;i<N;++i) types[i]=rng()%k; for(int i=0;i<N-1;++i) ivs[i]=rng()%8;
      u32 ref; ptpe_one<N>(times.data(), off.data(), LO, HI, types, ivs, &ref);
      for (int R : {1,2,7,64,256}) {
        std::vector<double> b; b.push_back(SYNFIRE_NEG_INF);
        for (int p=1;p<R;++p){ double x = all[p*all.size()/R]; if (x > b.back()) b.push_back(x);} b.push_back(SYNFIRE_INF);
        u32 rs = b.size()-1;
        std::vector<u32> cnt(rs); std::vector<double> first(rs*SYNFIRE_MTPE_RECORDED), last(rs);
        for (u32 p=0;p<rs;++p) mtpe_count_one<N, Machine<N>>(times.data(), off.data(), LO, HI, types, ivs, b[p], b[p+1], &cnt[p], &first[p*SYNFIRE_MTPE_RECORDED], &last[p]);
        u32 got; mtpe_merge_one<N, Machine<N>>(times.data(), off.data(), LO, HI, types, ivs, b.data(), rs, cnt.data(), first.data(), last.data(), &got);
        ++checked; if (got != ref) { ++bad; if (bad < 5) printf("mismatch R=%d ref=%u got=%u\n", R, ref, got); }
        u32 pref; preelim_one<N>(times.data(), off.data(), LO, HI, types, ivs, &pref);
        for (u32 p=0;p<rs;++p) mtpe_count_one<N, PreElimMachine<N>>(times.data(), off.data(), LO, HI, types, ivs, b[p], b[p+1], &cnt[p], &first[p*SYNFIRE_MTPE_RECORDED], &last[p]);
        mtpe_merge_one<N, PreElimMachine<N>>(times.data(), off.data(), LO, HI, types, ivs, b.data(), rs, cnt.data(), first.data(), last.data(), &got);
        ++checked; if (got != pref) { ++bad; if (bad < 5) printf("preelim mismatch R=%d ref=%u got=%u\n", R, pref, got); }
      }
    }
  }
  printf("checked %ld, mismatches %ld\n", checked, bad);
  return bad != 0;
}
