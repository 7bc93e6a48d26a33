//! Distances between z-normalised subsequences: the canonical direct formula every path
//! reports (Eqs. 1–2), and the CPU dynamic program of Eqs. 6–7 with its error bound.
//!
//! # Canonical formula
//!
//! For a window `w` of `l` samples, [`Stats::of`] computes `μ = (Σ_t w_t) / l` and
//! `σ = sqrt((Σ_t (w_t − μ)²) / l)`, both sums in order `t = 0, 1, …`, and `1/σ`, or 0 when
//! the window is constant (`σ ≤ 1e-10 |μ|`, the motif module's rule). The z-normalised sample
//! is `(w_t − μ) · (1/σ)`. The squared distance of a z-normalised candidate `ẑ` to a window is
//! `D = (Σ_t (ẑ_t − (w_t − μ_w)(1/σ_w))²) / l` (Eq. 2 squared), the squared distance to a
//! series is the minimum of `D` over its windows (Eq. 1), set to exactly 0 below the
//! [`MATCH_FLOOR`] ([`snap`]), and the distance is `sqrt` of that.
//!
//! The floor makes windows that are equal up to rounding exact matches: without it, the
//! rounding noise of mathematically equal distances (every length-2 candidate is at
//! distance 0 from every series that rises and falls somewhere) would create splits decided
//! by the last bits.
//! The GPU kernels compute the statistics with the same IEEE operations (no fused
//! multiply-adds), so both agree bit for bit on which windows are constant.
//!
//! # Dynamic program (Eqs. 6–7)
//!
//! With `Ω(s, u) = Σ_t a_{s+t} b_{u+t}` (Eq. 5), `Ω(s, u) = Ω(s−1, u−1) − a_{s−1} b_{u−1} +
//! a_{s+l−1} b_{u+l−1}` (Eq. 6) along diagonals, and `D = q_a + q_b − 2 r` with
//! `r = (Ω − l μ_a μ_b) w_a w_b`, `w = (1/σ)/sqrt(l)` and `q = 1` for a non-constant window,
//! 0 for a constant one. The first row `Ω(0, u)` and column `Ω(s, 0)` of each length are kept
//! from the previous length by adding the new terms (`Ω_{l+1} = Ω_l + a_{s+l} b_{u+l}`), so no
//! cell costs more than `O(1)`. [`dp_error_terms`] bound `|D_dp − D_canonical|`.

use rayon::prelude::*;

/// `f64::EPSILON`, the unit of the error bounds.
pub const EPS: f64 = f64::EPSILON;

/// Squared distances below this are exact matches (0): a root-mean-square difference of the
/// z-normalised samples below `1e-3` standard deviations.
pub const MATCH_FLOOR: f64 = 1e-6;

/// The canonical squared distance `d2` with the [`MATCH_FLOOR`] applied.
#[must_use]
pub fn snap(d2: f64) -> f64 {
    if d2 < MATCH_FLOOR { 0.0 } else { d2 }
}

/// The interval `[lo, hi]` as `(centre, radius)`, the radius rounded up so the interval
/// still contains `[lo, hi]`.
#[must_use]
pub fn centre_radius(lo: f64, hi: f64) -> (f64, f64) {
    ((lo + hi) / 2.0, (hi - lo) / 2.0 + EPS * hi.abs())
}

/// The [`snap`] of an approximate squared distance `a` with `|a − D| <= eps`, as a new
/// `(a, eps)` pair that bounds `snap(D)`: exactly `(0, 0)` when `a + eps < MATCH_FLOOR`,
/// unchanged when `a − eps >= MATCH_FLOOR`, else the interval `[0, a + eps]`.
#[must_use]
pub fn snap_bounded(a: f64, eps: f64) -> (f64, f64) {
    if a + eps < MATCH_FLOOR {
        (0.0, 0.0)
    } else if a - eps >= MATCH_FLOOR {
        (a, eps)
    } else {
        let half = (a + eps) / 2.0;
        (half, half)
    }
}

/// Mean and inverse standard deviation of one window (the canonical formula above).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// `1/σ` (population), or 0 for a constant window.
    pub inv_std: f64,
}

impl Stats {
    /// The statistics of `w` (two passes, sums in order). `w` must not be empty.
    #[must_use]
    pub fn of(w: &[f64]) -> Self {
        let l = w.len() as f64;
        let mut sum = 0.0;
        for &v in w {
            sum += v;
        }
        let mean = sum / l;
        let mut sq = 0.0;
        for &v in w {
            let d = v - mean;
            sq += d * d;
        }
        let sigma = (sq / l).sqrt();
        let inv_std = if sigma > 1e-10 * mean.abs() && sigma > 0.0 {
            1.0 / sigma
        } else {
            0.0
        };
        Self { mean, inv_std }
    }

    /// Whether the window is constant (z-normalised to the zero vector).
    #[must_use]
    pub fn is_constant(&self) -> bool {
        self.inv_std == 0.0
    }
}

/// The z-normalised form of `w`, shape `[l]`.
#[must_use]
pub fn znormalize(w: &[f64]) -> Vec<f64> {
    let s = Stats::of(w);
    w.iter().map(|&v| (v - s.mean) * s.inv_std).collect()
}

/// Squared distance `D` (Eq. 2 squared) of the z-normalised candidate `z` to the window `w`
/// of the same length.
#[must_use]
pub fn window_distance_sq(z: &[f64], w: &[f64]) -> f64 {
    let s = Stats::of(w);
    let mut acc = 0.0;
    for (&za, &v) in z.iter().zip(w) {
        let d = za - (v - s.mean) * s.inv_std;
        acc += d * d;
    }
    acc / z.len() as f64
}

/// Squared distance of the z-normalised candidate `z` to `series` (Eq. 1 squared): the
/// minimum of [`window_distance_sq`] over the windows of `series`, [`snap`]ped. `O(len · l)`.
///
/// Requires `1 <= z.len() <= series.len()` (callers check; otherwise +∞).
#[must_use]
pub fn distance_sq(z: &[f64], series: &[f64]) -> f64 {
    if z.is_empty() {
        return f64::INFINITY;
    }
    snap(
        series
            .windows(z.len())
            .map(|w| window_distance_sq(z, w))
            .fold(f64::INFINITY, f64::min),
    )
}

/// The per-window rounding bound of the dynamic program (Eqs. 5–6: recursive sums of `l`
/// products, `chain` diagonal steps) and of the canonical formula, with a factor of two to
/// spare: `|D_dp(u) − D_canonical(u)| <= coef · w_b(u) + floor` with
/// `coef = 4 ε (l + 2 chain + 16) l x_a x_b w_a` and `floor = 16 ε (l + 16)`, where `x_a`,
/// `x_b` are the largest `|sample|` of the two series and `w` as in the module docs.
#[must_use]
pub fn dp_error_terms(l: usize, chain: usize, x_a: f64, x_b: f64, w_a: f64) -> (f64, f64) {
    let lf = l as f64;
    (
        4.0 * EPS * (lf + 2.0 * chain as f64 + 16.0) * lf * x_a * x_b * w_a,
        16.0 * EPS * (lf + 16.0),
    )
}

/// Per-window statistics of some series at some lengths, as the dynamic program reads them.
///
/// Row `(lidx, k)` holds, for series `k` of the table and length `lengths[lidx]`, per start
/// `u < L − l + 1`: the mean, `w = (1/σ)/sqrt(l)` (0 if constant) and `q` (1, or 0 if
/// constant); plus the series' `max |x|`.
#[derive(Clone, Debug)]
pub struct StatsTable {
    /// The lengths, ascending.
    pub lengths: Vec<usize>,
    /// Series length `L`.
    pub series_length: usize,
    n: usize,
    mean: Vec<f64>,
    w: Vec<f64>,
    q: Vec<f64>,
    xmax: Vec<f64>,
}

impl StatsTable {
    /// Bytes a table of `n` series, `lengths` lengths and series length `len` takes.
    #[must_use]
    pub fn bytes(n: usize, lengths: usize, len: usize) -> usize {
        n.saturating_mul(lengths)
            .saturating_mul(len)
            .saturating_mul(24)
    }

    /// Builds the table of `series` (each of length `len`) for `lengths` (in parallel).
    #[must_use]
    pub fn new(series: &[&[f64]], len: usize, lengths: &[usize]) -> Self {
        let n = series.len();
        let rows: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = (0..lengths.len() * n)
            .into_par_iter()
            .map(|row| {
                let (lidx, k) = (row / n, row % n);
                let l = lengths[lidx];
                let scale = 1.0 / (l as f64).sqrt();
                let mut mean = vec![0.0; len];
                let mut w = vec![0.0; len];
                let mut q = vec![0.0; len];
                for (u, win) in series[k].windows(l).enumerate() {
                    let s = Stats::of(win);
                    mean[u] = s.mean;
                    if !s.is_constant() {
                        w[u] = s.inv_std * scale;
                        q[u] = 1.0;
                    }
                }
                (mean, w, q)
            })
            .collect();
        let mut t = Self {
            lengths: lengths.to_vec(),
            series_length: len,
            n,
            mean: Vec::with_capacity(rows.len() * len),
            w: Vec::with_capacity(rows.len() * len),
            q: Vec::with_capacity(rows.len() * len),
            xmax: series
                .iter()
                .map(|s| s.iter().fold(0.0f64, |m, v| m.max(v.abs())))
                .collect(),
        };
        for (mean, w, q) in rows {
            t.mean.extend(mean);
            t.w.extend(w);
            t.q.extend(q);
        }
        t
    }

    fn row(&self, lidx: usize, k: usize) -> std::ops::Range<usize> {
        let start = (lidx * self.n + k) * self.series_length;
        start..start + self.series_length
    }

    /// Means of series `k`'s windows at length index `lidx`, shape `[L]` (the first
    /// `L − l + 1` are used).
    ///
    /// # Panics
    /// If `lidx` or `k` is out of range (also for [`StatsTable::w`], [`StatsTable::q`],
    /// [`StatsTable::xmax`]).
    #[must_use]
    pub fn mean(&self, lidx: usize, k: usize) -> &[f64] {
        &self.mean[self.row(lidx, k)]
    }

    /// `w` of series `k`'s windows at length index `lidx`, shape `[L]`.
    #[must_use]
    pub fn w(&self, lidx: usize, k: usize) -> &[f64] {
        &self.w[self.row(lidx, k)]
    }

    /// `q` of series `k`'s windows at length index `lidx`, shape `[L]`.
    #[must_use]
    pub fn q(&self, lidx: usize, k: usize) -> &[f64] {
        &self.q[self.row(lidx, k)]
    }

    /// The largest `|x|` of series `k`.
    #[must_use]
    pub fn xmax(&self, k: usize) -> f64 {
        self.xmax[k]
    }
}

/// The dynamic program for one candidate series `a` (table row `ka`) and one target series
/// `b` (table row `kb`) at length index `lidx`: calls `out(s, lo, hi)` for every start `s`
/// with bounds `lo <= min_u D_canonical(s, u) <= hi` (Eqs. 6–7, before the [`snap`]).
///
/// `row0[u] = Ω(0, u)` and `col0[s] = Ω(s, 0)` for this length, shape `[≥ L − l + 1]`;
/// `prev`, `cur` are scratch rows. Cell `(s, u)` is `s`-or-fewer diagonal steps from a
/// directly summed `Ω`, so `chain = s` in [`dp_error_terms`]; the bounds are the extremes of
/// `D_dp(u) ∓ (coef · w_b(u) + floor)` over `u`, so an ill-conditioned window widens them
/// only where it competes for the minimum.
///
/// # Panics
/// If `a`, `b` are shorter than the table's series length, `row0`/`col0` shorter than the
/// number of windows, or `lidx`, `ka`, `kb` out of the table's range.
#[allow(clippy::too_many_arguments)] // the DP's inputs: two series, two tables, two init vectors, scratch
pub fn dp_pair(
    a: &[f64],
    b: &[f64],
    table: &StatsTable,
    lidx: usize,
    (ka, kb): (usize, usize),
    (row0, col0): (&[f64], &[f64]),
    (prev, cur): (&mut Vec<f64>, &mut Vec<f64>),
    mut out: impl FnMut(usize, f64, f64),
) {
    let l = table.lengths[lidx];
    let len = table.series_length;
    let m = len + 1 - l;
    let (mean_a, w_a, q_a) = (table.mean(lidx, ka), table.w(lidx, ka), table.q(lidx, ka));
    let (mean_b, w_b, q_b) = (
        &table.mean(lidx, kb)[..m],
        &table.w(lidx, kb)[..m],
        &table.q(lidx, kb)[..m],
    );
    let (xa, xb) = (table.xmax(ka), table.xmax(kb));
    prev.clear();
    prev.extend_from_slice(&row0[..m]);
    cur.clear();
    cur.resize(m, 0.0);
    let lf = l as f64;
    for s in 0..m {
        if s > 0 {
            let (alo, ahi) = (a[s - 1], a[s + l - 1]);
            cur[0] = col0[s];
            for (((c, &p), &blo), &bhi) in cur[1..]
                .iter_mut()
                .zip(&prev[..m - 1])
                .zip(&b[..m - 1])
                .zip(&b[l..l + m - 1])
            {
                *c = p - alo * blo + ahi * bhi;
            }
            std::mem::swap(prev, cur);
        }
        // `prev` now holds row s. v = 2r − q_b; the bounds shift it by ± coef · w_b.
        let ca = lf * mean_a[s];
        let twa = 2.0 * w_a[s];
        let (coef, floor) = dp_error_terms(l, s, xa, xb, w_a[s]);
        let mut hi_v = [f64::NEG_INFINITY; 2];
        let mut lo_v = [f64::NEG_INFINITY; 2];
        let row = &prev[..m];
        for u in 0..m {
            let wb = w_b[u];
            let v = (row[u] - ca * mean_b[u]) * wb * twa - q_b[u];
            let e = coef * wb;
            hi_v[u & 1] = hi_v[u & 1].max(v + e);
            lo_v[u & 1] = lo_v[u & 1].max(v - e);
        }
        let lo = (q_a[s] - hi_v[0].max(hi_v[1]) - floor).max(0.0);
        let hi = (q_a[s] - lo_v[0].max(lo_v[1]) + floor).max(lo);
        out(s, lo, hi);
    }
}

/// Adds the terms `t ∈ [from, to)` to the first row and column of `(a, b)`:
/// `row0[u] += a_t b_{u+t}` for `u < m`, `col0[s] += a_{s+t} b_t` for `s < m`, where `m` is
/// the number of windows at length `to` (Eq. 7's running sums, here for `Ω`).
///
/// # Panics
/// If `to + m − 1` exceeds `a` or `b`, or `row0`/`col0` hold fewer than `m` values.
pub fn advance_inits(
    a: &[f64],
    b: &[f64],
    (from, to): (usize, usize),
    m: usize,
    row0: &mut [f64],
    col0: &mut [f64],
) {
    for t in from..to {
        let at = a[t];
        for (r, &bv) in row0[..m].iter_mut().zip(&b[t..t + m]) {
            *r += at * bv;
        }
        let bt = b[t];
        for (c, &av) in col0[..m].iter_mut().zip(&a[t..t + m]) {
            *c += av * bt;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn naive(z: &[f64], w: &[f64]) -> f64 {
        // Eq. 2 squared from the definition, with its own mean and deviation.
        let l = w.len() as f64;
        let mu = w.iter().sum::<f64>() / l;
        let sd = (w.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / l).sqrt();
        z.iter()
            .zip(w)
            .map(|(a, b)| (a - (b - mu) / sd).powi(2))
            .sum::<f64>()
            / l
    }

    #[test]
    fn canonical_distance_matches_the_definition() {
        let a = [1.0, 3.0, 2.0, 5.0];
        let b = [10.0, 10.5, 9.0, 12.0, 11.0, 2.0];
        let z = znormalize(&a);
        let want = b
            .windows(4)
            .map(|w| naive(&z, w))
            .fold(f64::INFINITY, f64::min);
        assert!((distance_sq(&z, &b) - want).abs() < 1e-12);
        // Affine invariance: 3b + 7 is at the same distance.
        let b2: Vec<f64> = b.iter().map(|v| 3.0 * v + 7.0).collect();
        assert!((distance_sq(&z, &b2) - want).abs() < 1e-12);
        // A subsequence is at distance 0 from its own series.
        assert_eq!(distance_sq(&znormalize(&b[1..4]), &b), 0.0);
    }

    #[test]
    fn constant_windows() {
        let flat = [0.1, 0.1, 0.1, 0.1];
        assert!(Stats::of(&flat).is_constant());
        assert!(Stats::of(&[0.0, 0.0]).is_constant());
        assert!(!Stats::of(&[1.0, 2.0]).is_constant());
        let z = znormalize(&[1.0, 2.0, 4.0]);
        // Non-constant vs constant: D = Σ ẑ² / l = 1; constant vs constant: 0.
        assert!((distance_sq(&z, &[5.0, 5.0, 5.0]) - 1.0).abs() < 1e-15);
        assert_eq!(
            distance_sq(&znormalize(&[2.0; 3]), &[5.0, 5.0, 5.0, 1.0]),
            0.0
        );
        assert!((distance_sq(&znormalize(&[2.0; 3]), &[1.0, 5.0, 2.0]) - 1.0).abs() < 1e-15);
    }

    /// The DP's bounds contain the canonical squared distances, also for series with a large
    /// offset and nearly flat stretches, and are tight on well-conditioned series.
    #[test]
    fn dp_bounds_contain_the_canonical_distance() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let len = 40;
        let mut series: Vec<Vec<f64>> = (0..5)
            .map(|_| (0..len).map(|_| rng.random_range(-2.0..2.0)).collect())
            .collect();
        series[1] = series[1].iter().map(|v| 1000.0 + 0.01 * v).collect();
        for (t, v) in series[2].iter_mut().enumerate().take(25).skip(10) {
            *v = 3.0 + 1e-7 * (t as f64).sin();
        }
        series[3] = series[0].iter().map(|v| -2.0 * v + 1.0).collect();
        let refs: Vec<&[f64]> = series.iter().map(Vec::as_slice).collect();
        let lengths = [2, 3, 7, 16, 40];
        let table = StatsTable::new(&refs, len, &lengths);
        let (mut prev, mut cur) = (Vec::new(), Vec::new());
        let mut widest: f64 = 0.0;
        for ka in 0..refs.len() {
            for kb in 0..refs.len() {
                let (mut row0, mut col0) = (vec![0.0; len], vec![0.0; len]);
                let mut done = 0;
                for (lidx, &l) in lengths.iter().enumerate() {
                    let m = len + 1 - l;
                    advance_inits(refs[ka], refs[kb], (done, l), m, &mut row0, &mut col0);
                    done = l;
                    dp_pair(
                        refs[ka],
                        refs[kb],
                        &table,
                        lidx,
                        (ka, kb),
                        (&row0, &col0),
                        (&mut prev, &mut cur),
                        |s, lo, hi| {
                            let z = znormalize(&refs[ka][s..s + l]);
                            let want = refs[kb]
                                .windows(l)
                                .map(|w| window_distance_sq(&z, w))
                                .fold(f64::INFINITY, f64::min);
                            assert!(
                                lo <= want && want <= hi,
                                "a={ka} b={kb} l={l} s={s}: canonical {want} not in [{lo}, {hi}]"
                            );
                            if ka != 2 && kb != 2 && ka != 1 && kb != 1 {
                                widest = widest.max(hi - lo);
                            }
                        },
                    );
                }
            }
        }
        assert!(widest > 0.0 && widest < 1e-9, "{widest}");
    }
}
