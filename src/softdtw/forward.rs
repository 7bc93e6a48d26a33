//! The forward recurrence (Cuturi & Blondel 2017, Algorithm 1): the stable soft-min, one row
//! of `R`, and the value with two rolling rows (`O(M)` memory).

use super::{Band, Options, Series, SoftDtwError, check_pair};

/// `softmin_γ(a, b, c) = −γ log(e^{−a/γ} + e^{−b/γ} + e^{−c/γ})`, computed as
/// `μ − γ log Σ_k e^{−(a_k − μ)/γ}` with `μ = min(a, b, c)` so that no exponential overflows
/// and the largest term is exactly 1. Arguments may be `+∞` (cells outside the matrix or the
/// band); the result is `+∞` only when all three are.
///
/// # References
/// Cuturi & Blondel 2017, Eq. 1 (the soft-min with smoothing γ).
#[inline]
#[must_use]
pub fn softmin3(a: f64, b: f64, c: f64, gamma: f64) -> f64 {
    let mu = a.min(b).min(c);
    if mu == f64::INFINITY {
        return f64::INFINITY;
    }
    let inv = -1.0 / gamma;
    let s = ((a - mu) * inv).exp() + ((b - mu) * inv).exp() + ((c - mu) * inv).exp();
    mu - gamma * s.ln()
}

/// The squared Euclidean distance between two time steps of equal channels.
#[inline]
pub(crate) fn cost(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum()
}

/// One pair being aligned: `x` (`n` steps) against `y` (`m` steps), both time-major.
pub(crate) struct Pair<'a> {
    pub x: &'a [f64],
    pub y: &'a [f64],
    pub dims: usize,
    pub n: usize,
    pub m: usize,
    pub gamma: f64,
    pub band: Band,
}

impl<'a> Pair<'a> {
    /// A validated pair.
    pub(super) fn new(x: &'a Series, y: &'a Series, opts: &Options) -> Self {
        let (n, m) = (x.len(), y.len());
        Self {
            x: &x.values,
            y: &y.values,
            dims: x.dims,
            n,
            m,
            gamma: opts.gamma,
            band: Band::new(n, m, opts.band),
        }
    }

    /// Time step `i` (1-based) of `x`.
    #[inline]
    pub(super) fn xi(&self, i: usize) -> &'a [f64] {
        &self.x[(i - 1) * self.dims..i * self.dims]
    }

    /// Time step `j` (1-based) of `y`.
    #[inline]
    pub(super) fn yj(&self, j: usize) -> &'a [f64] {
        &self.y[(j - 1) * self.dims..j * self.dims]
    }

    /// Writes row `i ≥ 1` of `R` into `cur` (length `m + 1`) from row `i − 1` in `prev`.
    ///
    /// `cur` must be `+∞` outside `old` (the columns it was last written on, `lo > hi` for
    /// none) and `prev` `+∞` outside its own columns; on return `cur` is `+∞` outside the
    /// returned columns, which are row `i`'s band columns.
    pub(super) fn row(
        &self,
        i: usize,
        prev: &[f64],
        cur: &mut [f64],
        old: (usize, usize),
    ) -> (usize, usize) {
        if old.0 <= old.1 {
            cur[old.0..=old.1].fill(f64::INFINITY);
        }
        let (lo, hi) = self.band.range(i);
        if lo > hi {
            return (lo, hi);
        }
        let gamma = self.gamma;
        if self.dims == 1 {
            let xi = self.x[i - 1];
            let y = &self.y[lo - 1..hi];
            let mut left = cur[lo - 1];
            for (k, &yj) in y.iter().enumerate() {
                let j = lo + k;
                let v = (xi - yj) * (xi - yj) + softmin3(prev[j - 1], prev[j], left, gamma);
                cur[j] = v;
                left = v;
            }
        } else {
            let xi = self.xi(i);
            for j in lo..=hi {
                cur[j] = cost(xi, self.yj(j)) + softmin3(prev[j - 1], prev[j], cur[j - 1], gamma);
            }
        }
        (lo, hi)
    }

    /// Row 0 of `R` in a fresh buffer: `R(0, 0) = 0`, `+∞` elsewhere; its columns are `(0, 0)`.
    pub(super) fn first_row(&self) -> Vec<f64> {
        let mut r = vec![f64::INFINITY; self.m + 1];
        r[0] = 0.0;
        r
    }

    /// `R(N, M)` with two rolling rows.
    pub(super) fn value(&self) -> f64 {
        let mut prev = self.first_row();
        let mut cur = vec![f64::INFINITY; self.m + 1];
        let mut prev_cols = (0, 0);
        let mut cur_cols = (1, 0);
        for i in 1..=self.n {
            cur_cols = self.row(i, &prev, &mut cur, cur_cols);
            std::mem::swap(&mut prev, &mut cur);
            std::mem::swap(&mut prev_cols, &mut cur_cols);
        }
        prev[self.m]
    }
}

/// The soft-DTW value `sdtw_γ(x, y) = R(N, M)` (see the module docs of [`crate::softdtw`]).
///
/// # Units
/// `x` is `N × D`, `y` is `M × D` (time-major); the value is in squared units of the series
/// (a sum of squared distances, smoothed); it may be negative (the soft-min is below the min).
/// Memory: two rows of `M + 1` values.
///
/// # Errors
/// [`SoftDtwError`] naming `x` or `y`: `γ` not finite or ≤ 0, an empty series, a NaN or
/// infinite value, different channel counts, a band too narrow to reach `(N, M)`, or an
/// overflow to `+∞`.
///
/// # References
/// Cuturi & Blondel 2017, Algorithm 1.
pub fn value(x: &Series, y: &Series, opts: &Options) -> Result<f64, SoftDtwError> {
    check_pair(x, y, opts, &|| "x".into(), &|| "y".into())?;
    finite(Pair::new(x, y, opts).value(), || "(x, y)".into())
}

/// `v` if it is finite, else [`SoftDtwError::Overflow`] naming `input`.
pub(crate) fn finite(v: f64, input: impl Fn() -> String) -> Result<f64, SoftDtwError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(SoftDtwError::Overflow { input: input() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmin_is_stable_and_bounded() {
        // Far below the min only by γ log 3 at most, never above it.
        for &(a, b, c) in &[(1.0, 2.0, 3.0), (1e300, 1e300, 1e300), (-5.0, 0.0, 7.0)] {
            for &g in &[1e-3, 1.0, 100.0] {
                let s = softmin3(a, b, c, g);
                let m = f64::min(a, f64::min(b, c));
                assert!(
                    s <= m && s >= m - g * 3f64.ln() * (1.0 + 1e-12),
                    "{a} {b} {c} {g}: {s}"
                );
            }
        }
        assert_eq!(
            softmin3(f64::INFINITY, f64::INFINITY, f64::INFINITY, 1.0),
            f64::INFINITY
        );
        assert_eq!(softmin3(2.0, f64::INFINITY, f64::INFINITY, 0.5), 2.0);
        // Equal arguments: a − γ log 3.
        assert!((softmin3(1.0, 1.0, 1.0, 2.0) - (1.0 - 2.0 * 3f64.ln())).abs() < 1e-15);
    }

    #[test]
    fn band_zero_on_equal_lengths_is_squared_euclidean() {
        let x = Series::univariate(vec![0.0, 1.0, 3.0]);
        let y = Series::univariate(vec![1.0, 1.0, 1.0]);
        let v = value(&x, &y, &Options::new(0.7).with_band(0)).unwrap();
        assert!((v - 5.0).abs() < 1e-12, "{v}");
    }

    #[test]
    fn one_by_one_is_the_cost() {
        let x = Series {
            dims: 2,
            values: vec![1.0, 2.0],
        };
        let y = Series {
            dims: 2,
            values: vec![0.0, 4.0],
        };
        assert_eq!(value(&x, &y, &Options::new(1.0)).unwrap(), 5.0);
    }

    #[test]
    fn bad_inputs_are_named_errors() {
        let x = Series::univariate(vec![1.0, 2.0]);
        let e = value(&x, &x, &Options::new(0.0)).unwrap_err();
        assert!(matches!(e, SoftDtwError::Gamma { .. }));
        assert!(matches!(
            value(&x, &x, &Options::new(f64::NAN)),
            Err(SoftDtwError::Gamma { .. })
        ));
        let empty = Series::univariate(vec![]);
        let e = value(&x, &empty, &Options::new(1.0)).unwrap_err();
        assert_eq!(e, SoftDtwError::Empty { input: "y".into() });
        let nan = Series::univariate(vec![1.0, f64::NAN]);
        let e = value(&nan, &x, &Options::new(1.0)).unwrap_err().to_string();
        assert!(e.starts_with("x: time step 1"), "{e}");
        let two = Series {
            dims: 2,
            values: vec![1.0, 2.0],
        };
        let e = value(&x, &two, &Options::new(1.0)).unwrap_err();
        assert!(
            matches!(
                e,
                SoftDtwError::Dims {
                    dims: 1,
                    other_dims: 2,
                    ..
                }
            ),
            "{e}"
        );
        let odd = Series {
            dims: 2,
            values: vec![1.0, 2.0, 3.0],
        };
        assert!(matches!(
            value(&odd, &odd, &Options::new(1.0)),
            Err(SoftDtwError::Shape { .. })
        ));
        let zero = Series {
            dims: 0,
            values: vec![],
        };
        assert!(matches!(
            value(&zero, &zero, &Options::new(1.0)),
            Err(SoftDtwError::Shape { .. })
        ));
        let long = Series::univariate(vec![0.0; 10]);
        let e = value(&x, &long, &Options::new(1.0).with_band(1)).unwrap_err();
        assert!(
            matches!(e, SoftDtwError::BandTooNarrow { needed: 4, .. }),
            "{e}"
        );
        let huge = Series::univariate(vec![1e200, -1e200]);
        let e = value(&huge, &x, &Options::new(1.0)).unwrap_err();
        assert!(matches!(e, SoftDtwError::Overflow { .. }), "{e}");
    }
}
