//! Z-normalised subsequences: per-subsequence mean and scale, validity, and the exact
//! distance every motif path agrees on.

use std::sync::Arc;

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
    /// Mean of each subsequence, shape `[N]` (shared, so a device upload needs no copy).
    pub mean: Arc<[f64]>,
    /// `1 / sigma` of each subsequence (0 for a constant or invalid one), shape `[N]`
    /// (shared like `mean`).
    pub inv_std: Arc<[f64]>,
    /// Whether each subsequence is finite (usable), shape `[N]`.
    pub valid: Vec<bool>,
}

impl<'a> Subsequences<'a> {
    /// Computes the statistics with two passes per subsequence (no running-sum cancellation),
    /// in parallel. Requires `1 <= m <= x.len()` (checked by the callers).
    ///
    /// Each window's sums run over its samples in order, exactly as a sequential sum would;
    /// Eight neighbouring windows are summed side by side (window `i + l` at step
    /// `t` reads `x[i + l + t]`, one contiguous load for all lanes), which the compiler turns
    /// into vector adds without changing any window's order of operations.
    #[must_use]
    pub fn new(x: &'a [f64], m: usize) -> Self {
        let count = x.len() + 1 - m;
        let mut mean = vec![0.0; count];
        let mut inv_std = vec![0.0; count];
        let mut valid = vec![false; count];
        const BLOCK: usize = 4096;
        mean.par_chunks_mut(BLOCK)
            .zip(inv_std.par_chunks_mut(BLOCK))
            .zip(valid.par_chunks_mut(BLOCK))
            .enumerate()
            .for_each(|(b, ((mean, inv_std), valid))| {
                let first = b * BLOCK;
                let mut k = 0;
                while k < mean.len() {
                    let lanes = (mean.len() - k).min(WINDOW_LANES);
                    let i = first + k;
                    let mut mu = [0.0; WINDOW_LANES];
                    let mut var = [0.0; WINDOW_LANES];
                    if lanes == WINDOW_LANES {
                        window_lanes(x, i, m, &mut mu, &mut var);
                    } else {
                        for l in 0..lanes {
                            let w = &x[i + l..i + l + m];
                            mu[l] = w.iter().sum::<f64>() / m as f64;
                            var[l] =
                                w.iter().map(|v| (v - mu[l]) * (v - mu[l])).sum::<f64>() / m as f64;
                        }
                    }
                    for l in 0..lanes {
                        // A window with a non-finite sample has a non-finite sum, so only
                        // those (or sums that overflowed) need looking at.
                        let j = i + l;
                        if !mu[l].is_finite() && !x[j..j + m].iter().all(|v| v.is_finite()) {
                            continue;
                        }
                        let sigma = var[l].sqrt();
                        mean[k + l] = mu[l];
                        inv_std[k + l] = if sigma > 1e-10 * mu[l].abs() && sigma > 0.0 {
                            1.0 / sigma
                        } else {
                            0.0
                        };
                        valid[k + l] = true;
                    }
                    k += lanes;
                }
            });
        Self {
            x,
            m,
            mean: mean.into(),
            inv_std: inv_std.into(),
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

/// Windows whose statistics [`Subsequences::new`] computes side by side.
const WINDOW_LANES: usize = 8;

/// Mean and population variance of the windows `x[i + l..i + l + m]`, `l < WINDOW_LANES`:
/// each a sequential sum in sample order from `-0.0` (what `Iterator::sum` does), so the bits
/// equal `w.iter().sum::<f64>() / m` and the two-pass variance of each window on its own.
#[inline]
fn window_lanes(
    x: &[f64],
    i: usize,
    m: usize,
    mean: &mut [f64; WINDOW_LANES],
    var: &mut [f64; WINDOW_LANES],
) {
    // Sample t of the lanes' windows, one contiguous load (the caller passes full lanes).
    let lanes_at = |t: usize| -> &[f64; WINDOW_LANES] {
        x[i + t..i + t + WINDOW_LANES]
            .try_into()
            .expect("the caller passes WINDOW_LANES whole windows")
    };
    let mut s = [-0.0; WINDOW_LANES];
    for t in 0..m {
        let xs = lanes_at(t);
        for l in 0..WINDOW_LANES {
            s[l] += xs[l];
        }
    }
    for l in 0..WINDOW_LANES {
        mean[l] = s[l] / m as f64;
    }
    let mut q = [-0.0; WINDOW_LANES];
    for t in 0..m {
        let xs = lanes_at(t);
        for l in 0..WINDOW_LANES {
            let d = xs[l] - mean[l];
            q[l] += d * d;
        }
    }
    for l in 0..WINDOW_LANES {
        var[l] = q[l] / m as f64;
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

    proptest::proptest! {
        /// The side-by-side sums give every window's statistics bit for bit as summing that
        /// window alone (the previous implementation): walks with large offsets, NaN and
        /// infinite samples, flat stretches, lengths around the lane and block sizes.
        #[test]
        fn statistics_equal_the_per_window_sums_bit_for_bit(
            steps in proptest::collection::vec(-3.0f64..3.0, 1..9000),
            m in 1usize..130,
            offset in -1e6f64..1e6,
            holes in proptest::collection::vec(0usize..9000, 0..3),
            flat in 0usize..400,
        ) {
            let mut acc = offset;
            let mut x: Vec<f64> = steps.iter().enumerate().map(|(t, s)| {
                if t >= flat { acc += s; }
                acc
            }).collect();
            for (k, &h) in holes.iter().enumerate() {
                if h < x.len() {
                    x[h] = if k % 2 == 0 { f64::NAN } else { f64::INFINITY };
                }
            }
            proptest::prop_assume!(m <= x.len());
            let subs = Subsequences::new(&x, m);
            for i in 0..x.len() + 1 - m {
                let w = &x[i..i + m];
                if !w.iter().all(|v| v.is_finite()) {
                    proptest::prop_assert!(!subs.valid[i]);
                    continue;
                }
                let mean = w.iter().sum::<f64>() / m as f64;
                let var = w.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / m as f64;
                let sigma = var.sqrt();
                let inv = if sigma > 1e-10 * mean.abs() && sigma > 0.0 { 1.0 / sigma } else { 0.0 };
                proptest::prop_assert!(subs.valid[i]);
                proptest::prop_assert_eq!(subs.mean[i].to_bits(), mean.to_bits(), "mean {}", i);
                proptest::prop_assert_eq!(subs.inv_std[i].to_bits(), inv.to_bits(), "inv_std {}", i);
            }
        }
    }
}
