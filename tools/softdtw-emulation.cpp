// Runs the soft-DTW kernels' device code on the host, one warp as 32 threads whose shuffles
// and __syncwarp meet at a barrier, and checks values and gradients against a plain f64
// soft-DTW (Cuturi & Blondel 2017, Algorithms 1-2) written here independently: random series
// of unequal lengths, 1 and 3 channels, bands, every strip count of the batch kernels and the
// tiled long-pair kernel. The kernels are verified against the Rust CPU reference on a GPU by
// tests/softdtw_gpu.rs; this catches logic slips in CI, where there is no GPU. Built and run
// by tools/check-kernels.sh.
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "tools/kernel-shim.h"

static std::barrier<>* g_bar;
static unsigned char g_slots[32][16];

template <typename T> T emu_shfl(T v, int delta) {
    static_assert(sizeof(T) <= 16, "slot size");
    const int l = threadIdx.x & 31;
    std::memcpy(g_slots[l], &v, sizeof(T));
    g_bar->arrive_and_wait();
    const int src = l + delta;
    T r = v;
    if (src >= 0 && src < 32) std::memcpy(&r, g_slots[src], sizeof(T));
    g_bar->arrive_and_wait();
    return r;
}
#define SDTW_SHFL_UP(v, k) emu_shfl((v), -(k))
#define SDTW_SHFL_DOWN(v, k) emu_shfl((v), (k))
#define SDTW_SYNCWARP() g_bar->arrive_and_wait()
static bool emu_any(bool p) {
    const int l = threadIdx.x & 31;
    g_slots[l][0] = p;
    g_bar->arrive_and_wait();
    bool any = false;
    for (int k = 0; k < 32; ++k) any = any || g_slots[k][0];
    g_bar->arrive_and_wait();
    return any;
}
#define SDTW_ANY(p) emu_any(p)
// Pairs whose gradient took the marginal path (true) and the weights path (false).
static std::atomic<int> g_marginal{0}, g_weights{0};
#define SDTW_COUNT_PATH(m) do { if ((threadIdx.x & 31) == 0) ((m) ? g_marginal : g_weights)++; } while (0)

#include "kernels/softdtw.cu"

// Runs `body` as one warp: 32 threads with threadIdx.x = lane, block `block` of 32 threads.
static void run_warp(unsigned block, unsigned grid, const std::function<void()>& body) {
    std::barrier<> bar(32);
    g_bar = &bar;
    std::vector<std::thread> ts;
    for (unsigned l = 0; l < 32; ++l)
        ts.emplace_back([&, l] {
            threadIdx = {l, 0, 0};
            blockIdx = {block, 0, 0};
            blockDim = {32, 1, 1};
            gridDim = {grid, 1, 1};
            body();
        });
    for (auto& t : ts) t.join();
}

static bool in_band(long i, long j, long n, long m, long band) {
    if (band < 0) return true;
    return std::labs(i * m - j * n) <= band * std::min(n, m);
}

// f64 reference: value, dX [n*d], dY [m*d].
static double reference(const std::vector<float>& x, int n, const std::vector<float>& y, int m, int d,
                        double gamma, long band, std::vector<double>* gx, std::vector<double>* gy) {
    const double inf = INFINITY;
    std::vector<double> R((n + 2) * (m + 2), inf), D((n + 2) * (m + 2), 0.0), E((n + 2) * (m + 2), 0.0);
    auto at = [&](std::vector<double>& a, int i, int j) -> double& { return a[i * (m + 2) + j]; };
    at(R, 0, 0) = 0;
    for (int i = 1; i <= n; ++i)
        for (int j = 1; j <= m; ++j) {
            double c = 0;
            for (int k = 0; k < d; ++k) { double t = (double)x[(i - 1) * d + k] - y[(j - 1) * d + k]; c += t * t; }
            at(D, i, j) = c;
            if (!in_band(i, j, n, m, band)) continue;
            double a = at(R, i - 1, j - 1), b = at(R, i - 1, j), e = at(R, i, j - 1);
            double mu = std::min(a, std::min(b, e));
            if (mu == inf) continue;
            at(R, i, j) = c + mu - gamma * std::log(std::exp(-(a - mu) / gamma) + std::exp(-(b - mu) / gamma) + std::exp(-(e - mu) / gamma));
        }
    at(E, n, m) = 1;
    for (int i = n; i >= 1; --i)
        for (int j = m; j >= 1; --j) {
            if (i == n && j == m) continue;
            double r = at(R, i, j);
            if (r == inf) continue;
            double s = 0;
            const int di[3] = {1, 0, 1}, dj[3] = {0, 1, 1};
            for (int q = 0; q < 3; ++q) {
                int a = i + di[q], b = j + dj[q];
                if (a > n || b > m || at(R, a, b) == inf) continue;
                s += at(E, a, b) * std::exp((at(R, a, b) - r - at(D, a, b)) / gamma);
            }
            at(E, i, j) = s;
        }
    gx->assign(n * d, 0.0);
    gy->assign(m * d, 0.0);
    for (int i = 1; i <= n; ++i)
        for (int j = 1; j <= m; ++j)
            for (int k = 0; k < d; ++k) {
                double t = 2 * at(E, i, j) * ((double)x[(i - 1) * d + k] - y[(j - 1) * d + k]);
                (*gx)[(i - 1) * d + k] += t;
                (*gy)[(j - 1) * d + k] -= t;
            }
    return at(R, n, m);
}

static int bad = 0, checked = 0;

static void expect(bool ok, const char* what, double got, double want, int trial) {
    ++checked;
    if (!ok && ++bad < 10) std::printf("mismatch %s (trial %d): got %.9g want %.9g\n", what, trial, got, want);
}

template <int ROWS, int DIMS>
static void batch_case(std::mt19937_64& rng, int trial) {
    const int d = DIMS == 1 ? 1 : 3;
    const int na = 1 + rng() % 3, nb = 1 + rng() % 3;
    const int maxlen = 32 * ROWS * 2 + 5;  // up to 3 strips
    std::vector<unsigned> aoff{0}, boff{0};
    std::normal_distribution<float> g(0, 1);
    std::vector<float> ax, bx;
    for (int s = 0; s < na; ++s) { int n = 1 + rng() % maxlen; float v = 0; for (int t = 0; t < n * d; ++t) ax.push_back(v += g(rng) * 0.3f); aoff.push_back(aoff.back() + n); }
    for (int s = 0; s < nb; ++s) { int m = 1 + rng() % maxlen; float v = 0; for (int t = 0; t < m * d; ++t) bx.push_back(v += g(rng) * 0.3f); boff.push_back(boff.back() + m); }
    const double gammas[4] = {0.01, 0.1, 1.0, 10.0};
    const double gamma = gammas[rng() % 4];
    int m_max = 0, n_max = 0;
    for (int s = 0; s < nb; ++s) m_max = std::max<int>(m_max, boff[s + 1] - boff[s]);
    for (int s = 0; s < na; ++s) n_max = std::max<int>(n_max, aoff[s + 1] - aoff[s]);
    long band = -1;
    if (rng() % 3 == 0) band = 1 + rng() % std::max(n_max, m_max);  // unreachable pairs are skipped
    const float scale = (float)(1.4426950408889634 / gamma);
    const int strips_max = (n_max + 32 * ROWS - 1) / (32 * ROWS);
    const long stride = 1 << 24;
    std::vector<char> scratch(stride);
    const unsigned pairs = na * nb;
    std::vector<double> values(pairs), values_g(pairs);
    std::vector<float> ga(ax.size(), 0.f), gb(bx.size(), 0.f);
    run_warp(0, 1, [&] {
        sdtw_batch<float, ROWS, DIMS, false>(ax.data(), aoff.data(), bx.data(), boff.data(), na, nb, pairs, 0, d, scale, band, values.data(), nullptr, nullptr, scratch.data(), stride, m_max, 0);
    });
    run_warp(0, 1, [&] {
        sdtw_batch<double, ROWS, DIMS, true>(ax.data(), aoff.data(), bx.data(), boff.data(), na, nb, pairs, 0, d, scale, band, values_g.data(), ga.data(), gb.data(), scratch.data(), stride, m_max, strips_max);
    });
    std::vector<double> ra(ax.size(), 0.0), rb(bx.size(), 0.0);
    bool unreachable = false;
    for (int i = 0; i < na; ++i)
        for (int j = 0; j < nb; ++j) {
            int n = aoff[i + 1] - aoff[i], m = boff[j + 1] - boff[j];
            std::vector<float> x(ax.begin() + aoff[i] * d, ax.begin() + aoff[i + 1] * d), y(bx.begin() + boff[j] * d, bx.begin() + boff[j + 1] * d);
            std::vector<double> gx, gy;
            double v = reference(x, n, y, m, d, gamma, band, &gx, &gy);
            if (std::isinf(v)) { unreachable = true; continue; }
            const double tol = 1e-4 * std::max(1.0, std::fabs(v));
            expect(std::fabs(values[i * nb + j] - v) <= tol, "value", values[i * nb + j], v, trial);
            expect(std::fabs(values_g[i * nb + j] - v) <= tol, "value (grad kernel)", values_g[i * nb + j], v, trial);
            for (int k = 0; k < n * d; ++k) ra[aoff[i] * d + k] += gx[k];
            for (int k = 0; k < m * d; ++k) rb[boff[j] * d + k] += gy[k];
        }
    if (unreachable) return;  // some pair unreachable: the host rejects such bands
    double na_ = 1e-12, nb_ = 1e-12;
    for (double v : ra) na_ = std::max(na_, std::fabs(v));
    for (double v : rb) nb_ = std::max(nb_, std::fabs(v));
    for (size_t k = 0; k < ra.size(); ++k) expect(std::fabs(ga[k] - ra[k]) <= 1e-3 * na_, "grad a", ga[k], ra[k], trial);
    for (size_t k = 0; k < rb.size(); ++k) expect(std::fabs(gb[k] - rb[k]) <= 1e-3 * nb_, "grad b", gb[k], rb[k], trial);
}

template <int DIMS>
static void tile_case(std::mt19937_64& rng, int trial) {
    const int d = DIMS == 1 ? 1 : 2;
    const int n = 1 + rng() % 600, m = 1 + rng() % 600;
    const int tile_cols = 1 + rng() % 300;
    std::normal_distribution<float> g(0, 1);
    std::vector<float> x, y;
    float v = 0;
    for (int t = 0; t < n * d; ++t) x.push_back(v += g(rng) * 0.3f);
    v = 0;
    for (int t = 0; t < m * d; ++t) y.push_back(v += g(rng) * 0.3f);
    const double gamma = rng() % 2 ? 0.1 : 1.0;
    const long band = rng() % 2 ? -1 : std::max(n, m) / 2 + std::abs(n - m);
    const float scale = (float)(1.4426950408889634 / gamma);
    const int strips = (n + 255) / 256, blocks = (m + tile_cols - 1) / tile_cols;
    std::vector<float> hrow(3 * (m + 1), 0.f), vcol(3 * (strips * 256 + 1), 0.f);
    float last = NAN;
    for (int dg = 0; dg < strips + blocks - 1; ++dg) {
        const int tiles = std::min(dg, strips - 1) - std::max(0, dg - blocks + 1) + 1;
        for (int w = 0; w < tiles; ++w)
            run_warp(w, tiles, [&] { sdtw_tile<8, DIMS>(x.data(), n, y.data(), m, d, scale, band, tile_cols, dg, hrow.data(), vcol.data(), &last); });
    }
    std::vector<double> gx, gy;
    const double want = reference(x, n, y, m, d, gamma, band, &gx, &gy);
    if (std::isinf(want)) return;  // band too narrow for this pair
    const double got = last / (double)scale;
    expect(std::fabs(got - want) <= 1e-4 * std::max(1.0, std::fabs(want)), "tile value", got, want, trial);
}

// Pairs like `synfire bench softdtw`'s (random walks of uniform steps in [-0.5, 0.5), length
// 256), paired (mode 1) so that each gradient is checked on its own: at small gamma the
// marginals must hold their accuracy where alpha reaches 10^5-10^6 base-2 units, and `amp`
// scales the walks until relevant offsets leave the fixed-point range (the weights path).
// Returns the largest gradient error relative to its pair's largest entry.
static double walk_case(std::mt19937_64& rng, double gamma, float amp, int pairs) {
    const int len = 256, d = 1;
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    std::vector<unsigned> off{0};
    std::vector<float> ax, bx;
    for (int p = 0; p < pairs; ++p) {
        float v = 0, w = 0;
        for (int t = 0; t < len; ++t) { ax.push_back(v += amp * u(rng)); bx.push_back(w += amp * u(rng)); }
        off.push_back(off.back() + len);
    }
    const float scale = (float)(1.4426950408889634 / gamma);
    const long stride = 1 << 24;
    std::vector<char> scratch(stride);
    std::vector<double> values(pairs);
    std::vector<float> ga(ax.size(), 0.f), gb(bx.size(), 0.f);
    for (int p = 0; p < pairs; ++p)
        run_warp(0, 1, [&] {
            // One pair per warp run: the pair index is the warp's, so shift the inputs.
            sdtw_batch<double, 8, 1, true>(ax.data() + p * len, off.data(), bx.data() + p * len, off.data(), 1, 1, 1, 1, d, scale, -1,
                                           values.data() + p, ga.data() + p * len, gb.data() + p * len, scratch.data(), stride, len, 1);
        });
    double worst = 0;
    for (int p = 0; p < pairs; ++p) {
        std::vector<float> x(ax.begin() + p * len, ax.begin() + (p + 1) * len), y(bx.begin() + p * len, bx.begin() + (p + 1) * len);
        std::vector<double> gx, gy;
        const double v = reference(x, len, y, len, d, gamma, -1, &gx, &gy);
        expect(std::fabs(values[p] - v) <= 1e-4 * std::max(1.0, std::fabs(v)), "walk value", values[p], v, p);
        double big = 1e-12, err = 0;
        for (int k = 0; k < len; ++k) big = std::max({big, std::fabs(gx[k]), std::fabs(gy[k])});
        for (int k = 0; k < len; ++k) {
            err = std::max(err, std::fabs(ga[p * len + k] - gx[k]));
            err = std::max(err, std::fabs(gb[p * len + k] - gy[k]));
        }
        expect(err <= 1e-3 * big, "walk gradient", err / big, 1e-3, p);
        worst = std::max(worst, err / big);
    }
    return worst;
}

int main() {
    std::mt19937_64 rng(11);
    for (int trial = 0; trial < 4; ++trial) {
        batch_case<1, 1>(rng, trial);
        batch_case<2, 1>(rng, trial);
        batch_case<4, 0>(rng, trial);
        batch_case<8, 1>(rng, trial);
        if (trial % 2 == 0) batch_case<8, 0>(rng, trial);
    }
    for (int trial = 0; trial < 3; ++trial) { tile_case<1>(rng, trial); tile_case<0>(rng, trial); }
    const int before = g_weights.load();
    for (double gamma : {0.01, 0.1}) {
        const int m0 = g_marginal.load();
        const double worst = walk_case(rng, gamma, 1.0f, 6);
        std::printf("softdtw emulation: benchmark walks, gamma %g: %d of 6 pairs by marginals, gradient error <= %.2e of the largest entry\n",
                    gamma, g_marginal.load() - m0, worst);
    }
    // Walks 100 times as steep at gamma = 0.01: relevant offsets beyond the fixed-point range.
    const double worst = walk_case(rng, 0.01, 100.0f, 2);
    std::printf("softdtw emulation: steep walks, gamma 0.01: %d of 2 pairs by weights, gradient error <= %.2e\n",
                g_weights.load() - before, worst);
    std::printf("softdtw emulation: checked %d, mismatches %d; gradient pairs by marginals %d, by weights %d\n",
                checked, bad, g_marginal.load(), g_weights.load());
    // Both gradient paths must have run (the steep walks exceed the marginals' fixed-point
    // range; the others stay inside it).
    return bad != 0 || g_marginal.load() == 0 || g_weights.load() == 0;
}
