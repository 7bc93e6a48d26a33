//! The series a search index holds: whole series (UCR files, `.npy` matrices) or the sliding
//! windows of one long series, z-normalised and stored as `f32`, and the one real distance
//! every search path reports.
//!
//! **Arithmetic.** Each series is z-normalised in `f64` (mean, population standard deviation,
//! two passes) and stored as `f32` (4 bytes per sample: 1 KiB per series of 256). A constant
//! series (standard deviation 0, or below `1e-10 · |mean|`) becomes the zero vector, as in
//! [`crate::motif::znorm`]. The real distance [`sq_dist`] reads the two `f32` vectors and
//! accumulates in `f64` in one fixed order; SING, its GPU variant and the brute-force scan all
//! call it, so their distances agree bit for bit and ties go to the smallest id everywhere.

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::SearchError;

/// Largest number of series an index holds (ids and positions are `u32`).
pub const MAX_SERIES: usize = u32::MAX as usize;

/// What a collection was made from (kept in the index header).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CollectionKind {
    /// Whole series; id = the series' 0-based number in the input.
    Series {
        /// The input it was read from.
        source: String,
    },
    /// Every length-`m` subsequence of one long series; id = the subsequence's start sample.
    Windows {
        /// The input it was read from.
        source: String,
        /// Subsequence length, samples.
        m: usize,
        /// Samples of the long series.
        samples: usize,
        /// Subsequences left out because they hold a NaN or infinite sample.
        skipped: usize,
    },
}

/// z-normalises `x` into `f32`: `(x_i − mean) / sigma` with the population standard deviation,
/// or the zero vector when `x` is constant (`sigma <= 1e-10 |mean|`). The caller checks that
/// `x` is finite.
#[must_use]
pub fn znormalize(x: &[f64]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    znormalize_into(x, &mut out);
    out
}

/// [`znormalize`] into `out` (same length as `x`).
///
/// # Panics
/// When `out.len() != x.len()`.
pub fn znormalize_into(x: &[f64], out: &mut [f32]) {
    assert_eq!(
        x.len(),
        out.len(),
        "z-normalisation into a row of another length"
    );
    if x.is_empty() {
        return;
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let sigma = var.sqrt();
    let inv = if sigma > 0.0 && sigma > 1e-10 * mean.abs() {
        1.0 / sigma
    } else {
        0.0
    };
    for (o, v) in out.iter_mut().zip(x) {
        *o = ((v - mean) * inv) as f32;
    }
}

/// The squared Euclidean distance of two z-normalised series (same length), or `None` as
/// soon as a partial sum exceeds `limit` (early abandoning; `f64::INFINITY` never abandons).
///
/// Accumulates `(q_i − x_i)²` in `f64` over eight interleaved lanes, combines them as
/// `((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))`, and checks the bound every 32
/// samples. Partial sums of non-negative terms never decrease under rounding, so an abandoned
/// series is certainly above `limit`; a series that is not abandoned gets the same value as
/// with `limit = ∞`.
///
/// # Panics
/// Debug builds assert equal lengths.
#[inline]
#[must_use]
pub fn sq_dist(q: &[f32], x: &[f32], limit: f64) -> Option<f64> {
    debug_assert_eq!(q.len(), x.len());
    #[inline(always)]
    fn combine(a: &[f64; 8]) -> f64 {
        ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
    }
    let mut acc = [0.0f64; 8];
    let mut qc = q.chunks_exact(32);
    let mut xc = x.chunks_exact(32);
    for (a, b) in (&mut qc).zip(&mut xc) {
        for blk in 0..4 {
            for l in 0..8 {
                let d = f64::from(a[blk * 8 + l]) - f64::from(b[blk * 8 + l]);
                acc[l] += d * d;
            }
        }
        if combine(&acc) > limit {
            return None;
        }
    }
    for (i, (a, b)) in qc.remainder().iter().zip(xc.remainder()).enumerate() {
        let d = f64::from(*a) - f64::from(*b);
        acc[i % 8] += d * d;
    }
    let s = combine(&acc);
    (s <= limit).then_some(s)
}

/// A collection of z-normalised series of one length: rows `[count, len]` (`f32`) and an id
/// per row.
#[derive(Clone, Debug)]
pub struct Collection {
    len: usize,
    rows: Vec<f32>,
    ids: Vec<u32>,
    kind: CollectionKind,
}

fn check_finite(input: &str, what: &str, x: &[f64]) -> Result<(), SearchError> {
    if let Some(i) = x.iter().position(|v| !v.is_finite()) {
        return Err(SearchError::input(
            input,
            format!("{what} has a non-finite value ({}) at sample {i}", x[i]),
        ));
    }
    Ok(())
}

impl Collection {
    /// Whole series, each z-normalised; ids `0..count`.
    ///
    /// # Errors
    /// [`SearchError::Input`] naming `source` for an empty collection, empty or ragged series,
    /// a NaN or infinite sample, or more than 2^32 − 1 series.
    pub fn from_series(source: &str, series: &[Vec<f64>]) -> Result<Self, SearchError> {
        let Some(first) = series.first() else {
            return Err(SearchError::input(source, "the collection holds no series"));
        };
        let len = first.len();
        if len == 0 {
            return Err(SearchError::input(source, "series 0 is empty"));
        }
        if series.len() > MAX_SERIES {
            return Err(SearchError::input(
                source,
                format!("{} series, at most {MAX_SERIES}", series.len()),
            ));
        }
        for (i, s) in series.iter().enumerate() {
            if s.len() != len {
                return Err(SearchError::input(
                    source,
                    format!(
                        "series {i} has {} samples, series 0 has {len}: the index needs series of equal length",
                        s.len()
                    ),
                ));
            }
            check_finite(source, &format!("series {i}"), s)?;
        }
        let mut rows = vec![0.0f32; series.len() * len];
        rows.par_chunks_mut(len)
            .zip(series.par_iter())
            .for_each(|(row, s)| znormalize_into(s, row));
        Ok(Self {
            len,
            rows,
            ids: (0..series.len() as u32).collect(),
            kind: CollectionKind::Series {
                source: source.to_owned(),
            },
        })
    }

    /// A labelled dataset ([`crate::series::read_dataset`]): univariate series of equal length.
    ///
    /// # Errors
    /// As [`Collection::from_series`], and for multivariate series.
    pub fn from_dataset(source: &str, data: &crate::series::Dataset) -> Result<Self, SearchError> {
        if let Some((i, s)) = data.series.iter().enumerate().find(|(_, s)| s.dims != 1) {
            return Err(SearchError::input(
                source,
                format!(
                    "series {i} has {} dimensions; search needs univariate series",
                    s.dims
                ),
            ));
        }
        let series: Vec<Vec<f64>> = data.series.iter().map(|s| s.values.clone()).collect();
        Self::from_series(source, &series)
    }

    /// Every length-`m` subsequence of `x`, z-normalised; id = start sample. Subsequences with
    /// a NaN or infinite sample are left out (counted in [`CollectionKind::Windows`]).
    ///
    /// # Errors
    /// [`SearchError::Input`] naming `source` when `m = 0`, `m > x.len()`, no subsequence is
    /// finite, or the series is longer than 2^32 − 1 samples.
    pub fn sliding_windows(source: &str, x: &[f64], m: usize) -> Result<Self, SearchError> {
        if m == 0 {
            return Err(SearchError::input(source, "`--window` must be at least 1"));
        }
        if m > x.len() {
            return Err(SearchError::input(
                source,
                format!(
                    "window m = {m} is longer than the series ({} samples)",
                    x.len()
                ),
            ));
        }
        if x.len() > MAX_SERIES {
            return Err(SearchError::input(
                source,
                format!("{} samples, at most {MAX_SERIES}", x.len()),
            ));
        }
        let mut bad = Vec::with_capacity(x.len() + 1);
        bad.push(0u32);
        for v in x {
            bad.push(bad.last().copied().unwrap_or(0) + u32::from(!v.is_finite()));
        }
        let starts: Vec<u32> = (0..=x.len() - m)
            .filter(|&i| bad[i + m] == bad[i])
            .map(|i| i as u32)
            .collect();
        if starts.is_empty() {
            return Err(SearchError::input(
                source,
                format!("every length-{m} subsequence holds a NaN or infinite sample"),
            ));
        }
        let mut rows = vec![0.0f32; starts.len() * m];
        rows.par_chunks_mut(m)
            .zip(starts.par_iter())
            .for_each(|(row, &s)| znormalize_into(&x[s as usize..s as usize + m], row));
        let skipped = x.len() - m + 1 - starts.len();
        Ok(Self {
            len: m,
            rows,
            ids: starts,
            kind: CollectionKind::Windows {
                source: source.to_owned(),
                m,
                samples: x.len(),
                skipped,
            },
        })
    }

    /// Rows already z-normalised (`[count, len]`), with their ids (used by the incremental
    /// index to rebuild from what it holds).
    ///
    /// # Errors
    /// [`SearchError::Input`] for `len = 0`, a length that does not divide the rows, an id
    /// count that does not match, or no row.
    pub fn from_normalized(
        kind: CollectionKind,
        len: usize,
        rows: Vec<f32>,
        ids: Vec<u32>,
    ) -> Result<Self, SearchError> {
        if len == 0
            || !rows.len().is_multiple_of(len)
            || rows.len() / len != ids.len()
            || ids.is_empty()
        {
            return Err(SearchError::input(
                "collection",
                format!(
                    "{} values, {} ids: not a non-empty [count, {len}] matrix",
                    rows.len(),
                    ids.len()
                ),
            ));
        }
        Ok(Self {
            len,
            rows,
            ids,
            kind,
        })
    }

    /// Series length, samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Number of series.
    #[must_use]
    pub fn count(&self) -> usize {
        self.ids.len()
    }

    /// True when the collection holds no series (never, once constructed).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Row `i`, shape `[len]`.
    ///
    /// # Panics
    /// When `i >= count()`.
    #[must_use]
    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.len..(i + 1) * self.len]
    }

    /// All rows, shape `[count, len]`.
    #[must_use]
    pub fn rows(&self) -> &[f32] {
        &self.rows
    }

    /// The id of each row.
    #[must_use]
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// What the collection was made from.
    #[must_use]
    pub fn kind(&self) -> &CollectionKind {
        &self.kind
    }
}

/// z-normalises a query after checking it: its length must be `len` and its samples finite.
///
/// # Errors
/// [`SearchError::QueryLength`], or [`SearchError::Input`] naming query `number` for a NaN
/// or infinite sample.
pub fn normalize_query(number: usize, q: &[f64], len: usize) -> Result<Vec<f32>, SearchError> {
    if q.len() != len {
        return Err(SearchError::QueryLength {
            query: number,
            got: q.len(),
            expected: len,
        });
    }
    check_finite(&format!("query {number}"), "the query", q)?;
    Ok(znormalize(q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn znormalize_has_zero_mean_unit_variance_and_flat_is_zero() {
        let z = znormalize(&[1.0, 2.0, 3.0, 4.0]);
        let mean: f64 = z.iter().map(|&v| f64::from(v)).sum::<f64>() / 4.0;
        let var: f64 = z.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / 4.0;
        assert!(mean.abs() < 1e-7 && (var - 1.0).abs() < 1e-6);
        assert_eq!(znormalize(&[5.0; 7]), vec![0.0; 7]);
    }

    #[test]
    fn sq_dist_matches_the_plain_sum_and_abandons() {
        let a: Vec<f32> = (0..77).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..77).map(|i| (i as f32 * 0.11).cos()).collect();
        let plain: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
            .sum();
        let d = sq_dist(&a, &b, f64::INFINITY).unwrap();
        assert!((d - plain).abs() <= 1e-12 * plain);
        assert_eq!(sq_dist(&a, &b, d), Some(d));
        assert_eq!(sq_dist(&a, &b, d * 0.999), None);
        assert_eq!(sq_dist(&a, &a, 0.0), Some(0.0));
    }

    #[test]
    fn bad_collections_are_named_errors() {
        let e = Collection::from_series("x.tsv", &[vec![1.0, 2.0], vec![1.0]]).unwrap_err();
        assert!(e.to_string().contains("x.tsv") && e.to_string().contains("series 1"));
        let e = Collection::from_series("x.tsv", &[vec![1.0, f64::NAN]]).unwrap_err();
        assert!(e.to_string().contains("non-finite"));
        assert!(Collection::from_series("x", &[]).is_err());
        assert!(Collection::sliding_windows("s", &[1.0, 2.0], 3).is_err());
        assert!(Collection::sliding_windows("s", &[1.0, 2.0], 0).is_err());
        let w = Collection::sliding_windows("s", &[1.0, 2.0, f64::NAN, 4.0, 5.0, 6.0], 2).unwrap();
        assert_eq!(w.ids(), &[0, 3, 4]);
        assert!(matches!(
            w.kind(),
            CollectionKind::Windows { skipped: 2, .. }
        ));
        assert!(matches!(
            normalize_query(3, &[1.0], 2),
            Err(SearchError::QueryLength { query: 3, .. })
        ));
    }
}
