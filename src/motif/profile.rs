//! The exact matrix profile on the CPU: every pair by the diagonal covariance recurrence of
//! SCAMP (Zimmerman et al., "Matrix Profile XIV", SoCC 2019, Eq. 5–6), `O(N^2)` in f64.
//!
//! Along diagonal `j = i + k` the centred covariance
//! `cov(i, j) = sum_t (x[i+t] - mean_i)(x[j+t] - mean_j)` follows
//! `cov(i, j) = cov(i-1, j-1) + df[i] dg[j] + df[j] dg[i]` with
//! `df[i] = (x[i+m-1] - x[i-1]) / 2` and `dg[i] = (x[i+m-1] - mean_i) + (x[i-1] - mean_{i-1})`;
//! the correlation is `rho = cov / (m sigma_i sigma_j)` and the distance `sqrt(2m(1 - rho))`.
//! Each diagonal is cut into tiles that start from a direct dot product, so rounding cannot
//! drift far; pairs within `1e-9 * 2m` (squared distance) of the best are then re-evaluated
//! with [`Subsequences::distance`] and the smallest `(distance, i, j)` wins.

use rayon::prelude::*;

use super::{Method, Motif, MotifError, PairSearch, SearchStats, Subsequences, valid_pairs};

/// Diagonal tile length (cells) between direct covariance computations.
const TILE: usize = 4096;
/// Near-tie candidates kept per tile.
const MAX_CANDIDATES: usize = 256;

/// CPU matrix-profile closest pair (see [`PairSearch`]).
#[derive(Debug)]
pub struct MatrixProfile<'s> {
    subs: &'s Subsequences<'s>,
    exclusion: usize,
    df: Vec<f64>,
    dg: Vec<f64>,
    inv_norm: Vec<f64>,
}

/// Approximate squared distances and the pairs within the tie tolerance of the best.
#[derive(Clone, Debug, Default)]
pub(crate) struct Candidates {
    pub(crate) best: f64,
    pub(crate) pairs: Vec<(f64, usize, usize)>,
    pub(crate) tolerance: f64,
}

impl Candidates {
    pub(crate) fn new(tolerance: f64) -> Self {
        Self {
            best: f64::INFINITY,
            pairs: Vec::new(),
            tolerance,
        }
    }

    /// Offers a pair with approximate squared distance `d2`. When the near-ties outgrow
    /// [`MAX_CANDIDATES`], the half with the best exact `(distance, i, j)` is kept, so the
    /// winner is never dropped.
    #[inline]
    pub(crate) fn offer(&mut self, d2: f64, i: usize, j: usize, subs: &Subsequences<'_>) {
        if d2 > self.best + self.tolerance {
            return;
        }
        if d2 < self.best {
            self.best = d2;
            let cut = self.best + self.tolerance;
            self.pairs.retain(|p| p.0 <= cut);
        }
        self.pairs.push((d2, i, j));
        if self.pairs.len() > MAX_CANDIDATES {
            let mut exact: Vec<(f64, usize, usize, f64)> = self
                .pairs
                .iter()
                .map(|&(a, i, j)| (subs.distance(i, j), i, j, a))
                .collect();
            exact.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then((a.1, a.2).cmp(&(b.1, b.2))));
            exact.truncate(MAX_CANDIDATES / 2);
            self.pairs = exact.into_iter().map(|(_, i, j, a)| (a, i, j)).collect();
        }
    }

    pub(crate) fn merge(mut self, other: Self, subs: &Subsequences<'_>) -> Self {
        for (d2, i, j) in other.pairs {
            self.offer(d2, i, j, subs);
        }
        self
    }

    /// The exact winner: candidates within the tolerance re-evaluated directly.
    pub(crate) fn resolve(&self, subs: &Subsequences<'_>) -> Option<Motif> {
        let cut = self.best + self.tolerance;
        super::best_exact(
            subs,
            self.pairs
                .iter()
                .filter(|p| p.0 <= cut)
                .map(|&(_, i, j)| (i, j)),
        )
    }
}

impl<'s> MatrixProfile<'s> {
    /// Precomputes `df`, `dg` and `1 / (sqrt(m) sigma)` for `subs`.
    #[must_use]
    pub fn new(subs: &'s Subsequences<'s>, exclusion: usize) -> Self {
        let (df, dg) = scamp_terms(subs);
        let sm = (subs.m as f64).sqrt();
        let inv_norm = subs.inv_std.iter().map(|s| s / sm).collect();
        Self {
            subs,
            exclusion,
            df,
            dg,
            inv_norm,
        }
    }

    fn direct_cov(&self, i: usize, j: usize) -> f64 {
        let s = self.subs;
        let (mi, mj) = (s.mean[i], s.mean[j]);
        s.x[i..i + s.m]
            .iter()
            .zip(&s.x[j..j + s.m])
            .map(|(a, b)| (a - mi) * (b - mj))
            .sum()
    }

    fn tile(&self, k: usize, i0: usize, allowed: &[bool], out: &mut Candidates) {
        let s = self.subs;
        let n = s.count();
        let end = (i0 + TILE).min(n - k);
        let m = s.m as f64;
        let root_m2 = m; // squared distance between a constant and a non-constant subsequence
        let mut cov = f64::NAN;
        for i in i0..end {
            let j = i + k;
            if !(s.valid[i] && s.valid[j]) {
                cov = f64::NAN;
                continue;
            }
            cov = if cov.is_nan() {
                self.direct_cov(i, j)
            } else {
                cov + self.df[i] * self.dg[j] + self.df[j] * self.dg[i]
            };
            if !(allowed[i] && allowed[j]) {
                continue;
            }
            let (ci, cj) = (self.inv_norm[i] == 0.0, self.inv_norm[j] == 0.0);
            let d2 = if ci || cj {
                if ci && cj { 0.0 } else { root_m2 }
            } else {
                (2.0 * m * (1.0 - cov * self.inv_norm[i] * self.inv_norm[j])).max(0.0)
            };
            out.offer(d2, i, j, s);
        }
    }
}

/// SCAMP's `df` and `dg` (index 0 unused: each tile starts from a direct covariance).
pub(crate) fn scamp_terms(subs: &Subsequences<'_>) -> (Vec<f64>, Vec<f64>) {
    let (x, m, n) = (subs.x, subs.m, subs.count());
    let mut df = vec![0.0; n];
    let mut dg = vec![0.0; n];
    for i in 1..n {
        df[i] = (x[i + m - 1] - x[i - 1]) / 2.0;
        dg[i] = (x[i + m - 1] - subs.mean[i]) + (x[i - 1] - subs.mean[i - 1]);
    }
    (df, dg)
}

impl PairSearch for MatrixProfile<'_> {
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        let n = self.subs.count();
        let tolerance = 1e-9 * 2.0 * self.subs.m as f64;
        let first = self.exclusion + 1;
        let tasks: Vec<(usize, usize)> = (first..n)
            .flat_map(|k| (0..n - k).step_by(TILE).map(move |i0| (k, i0)))
            .collect();
        let found = tasks
            .par_iter()
            .fold(
                || Candidates::new(tolerance),
                |mut c, &(k, i0)| {
                    self.tile(k, i0, allowed, &mut c);
                    c
                },
            )
            .reduce(|| Candidates::new(tolerance), |a, b| a.merge(b, self.subs));
        let pairs = valid_pairs(allowed, self.exclusion);
        let stats = SearchStats {
            pairs,
            distances: pairs,
            ..SearchStats::default()
        };
        Ok((found.resolve(self.subs), Method::MatrixProfile, stats))
    }
}
