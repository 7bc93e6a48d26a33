//! Piecewise Aggregate Approximation (Keogh et al. 2001; SING paper §2, "iSAX"): a series of
//! length `n` is cut into `w = 16` segments and each segment is summarised by its mean.
//!
//! Segment `j` covers samples `[floor(j n / w), floor((j + 1) n / w))`, so lengths differ by at
//! most one when `w` does not divide `n`, and segments are empty when `n < w` (their PAA value
//! is 0 and their weight 0, so they never contribute to a lower bound). The lower bound of
//! [`crate::search::isax`] weighs each segment by its length `l_j`:
//! `sum_i (q_i - x_i)^2 >= sum_j l_j (PAA_j(q) - PAA_j(x))^2` (Cauchy–Schwarz within each
//! segment), which is the paper's `n / w` factor when `w` divides `n`.

use std::ops::Range;

/// PAA segments per series (`w`, paper §2: "we use w = 16").
pub const SEGMENTS: usize = 16;

/// The segment boundaries of one series length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    len: usize,
    bounds: [usize; SEGMENTS + 1],
}

impl Segments {
    /// The segments of series of length `len` (samples).
    #[must_use]
    pub fn new(len: usize) -> Self {
        let mut bounds = [0; SEGMENTS + 1];
        for (j, b) in bounds.iter_mut().enumerate() {
            *b = j * len / SEGMENTS;
        }
        Self { len, bounds }
    }

    /// The series length, samples.
    #[must_use]
    pub fn series_len(&self) -> usize {
        self.len
    }

    /// Sample range of segment `j` (`j < 16`).
    ///
    /// # Panics
    /// When `j >= 16`.
    #[must_use]
    pub fn range(&self, j: usize) -> Range<usize> {
        self.bounds[j]..self.bounds[j + 1]
    }

    /// Length `l_j` of segment `j` as a weight of the lower bound.
    ///
    /// # Panics
    /// When `j >= 16`.
    #[must_use]
    pub fn weight(&self, j: usize) -> f64 {
        (self.bounds[j + 1] - self.bounds[j]) as f64
    }

    /// The PAA of `x` (shape `[len]`): the mean of each segment, accumulated in `f64`
    /// (0 for an empty segment).
    ///
    /// # Panics
    /// When `x.len()` differs from the series length.
    #[must_use]
    pub fn paa(&self, x: &[f32]) -> [f64; SEGMENTS] {
        assert_eq!(x.len(), self.len, "PAA of a series of the wrong length");
        let mut out = [0.0; SEGMENTS];
        for (j, o) in out.iter_mut().enumerate() {
            let r = self.range(j);
            if !r.is_empty() {
                let n = r.len() as f64;
                *o = x[r].iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_cover_the_series_and_differ_by_at_most_one() {
        for len in [1, 7, 16, 24, 96, 150, 256, 1000] {
            let s = Segments::new(len);
            let lens: Vec<usize> = (0..SEGMENTS).map(|j| s.range(j).len()).collect();
            assert_eq!(lens.iter().sum::<usize>(), len);
            let (lo, hi) = (lens.iter().min().unwrap(), lens.iter().max().unwrap());
            assert!(hi - lo <= 1, "{len}: {lens:?}");
        }
    }

    #[test]
    fn paa_is_the_segment_mean() {
        let s = Segments::new(32);
        let x: Vec<f32> = (0..32).map(|i| i as f32).collect();
        let p = s.paa(&x);
        for (j, v) in p.iter().enumerate() {
            assert_eq!(*v, (2 * j) as f64 + 0.5);
        }
        let short = Segments::new(3);
        let p = short.paa(&[1.0, 2.0, 3.0]);
        assert_eq!(p.iter().filter(|v| **v != 0.0).count(), 3);
    }
}
