//! Z-normalised subsequences: per-subsequence mean and scale, validity, and the exact
//! distance every motif path agrees on.

use rayon::prelude::*;

/// A series and its length-`m` subsequences, with the statistics of Eq. 3 of the motif
/// paper (`papers/motif-discovery-gpu-ru.txt`, §2.1).
///
/// Subsequence `i` is `x[i..i + m]`, `0 <= i < count()` (`N = n - m + 1`).
/// * Its z-normalised form is `(x[i + t] - mean[i]) * inv_std[i]`, with the population
///   standard deviation (divisor `m`).
/// * **Constant subsequences** (`sigma <= 1e-10 * |mean|`, i.e. flat to within floating-point
///   noise, including `sigma = 0`) have `inv_std = 0`: their z-normalised form is the zero
///   vector. Two constant subsequences are then at distance 0, and a constant and a
///   non-constant one at `sqrt(m)` (the convention of stumpy and SCAMP). The distance stays a
///   metric, so the triangle-inequality bounds of MK remain valid.
/// * Subsequences holding a **NaN or infinite sample** are invalid: they never pair, so no
///   distance is ever NaN.
#[derive(Clone, Debug)]
pub struct Subsequences<'a> {
    /// The series, shape `[n]`.
    pub x: &'a [f64],
    /// Subsequence length `m`, samples.
    pub m: usize,
    /// Mean of each subsequence, shape `[N]`.
    pub mean: Vec<f64>,
    /// `1 / sigma` of each subsequence (0 for a constant or invalid one), shape `[N]`.
    pub inv_std: Vec<f64>,
    /// Whether each subsequence is finite (usable), shape `[N]`.
    pub valid: Vec<bool>,
}

impl<'a> Subsequences<'a> {
    /// Computes the statistics with two passes per subsequence (no running-sum cancellation),
    /// in parallel. Requires `1 <= m <= x.len()` (checked by the callers).
    #[must_use]
    pub fn new(x: &'a [f64], m: usize) -> Self {
        let count = x.len() + 1 - m;
        // Prefix count of non-finite samples: subsequence i is valid when its window has none.
        let mut bad = Vec::with_capacity(x.len() + 1);
        bad.push(0u32);
        for v in x {
            bad.push(bad.last().copied().unwrap_or(0) + u32::from(!v.is_finite()));
        }
        let stats: Vec<(f64, f64, bool)> = (0..count)
            .into_par_iter()
            .with_min_len(1024)
            .map(|i| {
                if bad[i + m] != bad[i] {
                    return (0.0, 0.0, false);
                }
                let w = &x[i..i + m];
                let mean = w.iter().sum::<f64>() / m as f64;
                let var = w.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m as f64;
                let sigma = var.sqrt();
                let inv = if sigma > 1e-10 * mean.abs() && sigma > 0.0 {
                    1.0 / sigma
                } else {
                    0.0
                };
                (mean, inv, true)
            })
            .collect();
        let mut mean = Vec::with_capacity(count);
        let mut inv_std = Vec::with_capacity(count);
        let mut valid = Vec::with_capacity(count);
        for (mu, inv, ok) in stats {
            mean.push(mu);
            inv_std.push(inv);
            valid.push(ok);
        }
        Self {
            x,
            m,
            mean,
            inv_std,
            valid,
        }
    }

    /// Number of subsequences `N = n - m + 1`.
    #[must_use]
    pub fn count(&self) -> usize {
        self.mean.len()
    }

    /// Whether subsequence `i` is constant (z-normalised to the zero vector).
    #[must_use]
    pub fn is_constant(&self, i: usize) -> bool {
        self.valid[i] && self.inv_std[i] == 0.0
    }

    /// The z-normalised Euclidean distance between subsequences `a` and `b` (Eq. 2 on Eq. 3),
    /// computed directly in `O(m)`. Every path reports this value for its answer, so equal
    /// inputs give bit-identical distances; it is symmetric bit for bit (the pair is ordered
    /// first). Both must be valid.
    #[must_use]
    pub fn distance(&self, a: usize, b: usize) -> f64 {
        let (a, b) = if a <= b { (a, b) } else { (b, a) };
        let (ma, sa) = (self.mean[a], self.inv_std[a]);
        let (mb, sb) = (self.mean[b], self.inv_std[b]);
        let xa = &self.x[a..a + self.m];
        let xb = &self.x[b..b + self.m];
        xa.iter()
            .zip(xb)
            .map(|(p, q)| {
                let d = (p - ma) * sa - (q - mb) * sb;
                d * d
            })
            .sum::<f64>()
            .sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_and_nan_subsequences() {
        let x = [1.0, 1.0, 1.0, 2.0, 3.0, f64::NAN, 4.0, 4.0, 4.0];
        let s = Subsequences::new(&x, 3);
        assert_eq!(s.count(), 7);
        assert!(s.is_constant(0));
        assert!(!s.is_constant(1));
        assert_eq!(s.valid, [true, true, true, false, false, false, true]);
        assert!(s.is_constant(6));
        assert_eq!(s.distance(0, 6), 0.0);
        assert!((s.distance(0, 2) - 3f64.sqrt()).abs() < 1e-12);
        // z-normalised (1,2,3) vs (1,1,2): exact value from the definition.
        let z = |w: [f64; 3]| {
            let mu = w.iter().sum::<f64>() / 3.0;
            let sd = (w.iter().map(|v| (v - mu).powi(2)).sum::<f64>() / 3.0).sqrt();
            w.map(|v| (v - mu) / sd)
        };
        let (p, q) = (z([1.0, 2.0, 3.0]), z([1.0, 1.0, 2.0]));
        let want = p
            .iter()
            .zip(&q)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        assert!((s.distance(2, 1) - want).abs() < 1e-12);
        assert_eq!(s.distance(2, 1).to_bits(), s.distance(1, 2).to_bits());
    }

    #[test]
    fn offset_constant_is_constant() {
        let x = vec![0.1; 50];
        let s = Subsequences::new(&x, 10);
        assert!((0..s.count()).all(|i| s.is_constant(i)));
    }
}
