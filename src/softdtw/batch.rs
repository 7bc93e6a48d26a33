//! Batched soft-DTW: all pairs of two sets (`B1 × B2` values) and paired (the `i`-th with the
//! `i`-th), in parallel over pairs with rayon. Each pair uses the single-pair algorithms, so
//! memory is per pair as documented there, times the number of rayon threads.
//!
//! Inputs are named `a[i]` and `b[j]` in errors.

use std::collections::BTreeSet;

use rayon::prelude::*;

use super::backward::gradient_unchecked;
use super::divergence::{combine, self_gradient};
use super::forward::{Pair, finite};
use super::{Band, Gradient, Options, Series, SoftDtwError, check_series};

/// What a batch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Measure {
    /// `sdtw_γ(x, y)`.
    #[default]
    SoftDtw,
    /// The divergence `sdtw(x, y) − (sdtw(x, x) + sdtw(y, y)) / 2`; the self terms are
    /// computed once per series.
    Divergence,
}

/// Validates two sets: every series, one channel count for all, and the band for every pair
/// of lengths that `pairs` yields.
pub(crate) fn check_sets(
    a: &[Series],
    b: &[Series],
    opts: &Options,
    length_pairs: BTreeSet<(usize, usize)>,
) -> Result<(), SoftDtwError> {
    opts.validate()?;
    for (name, set) in [("a", a), ("b", b)] {
        for (i, s) in set.iter().enumerate() {
            check_series(s, &|| format!("{name}[{i}]"))?;
        }
    }
    let dims = a.first().or(b.first()).map_or(1, |s| s.dims);
    for (name, set) in [("a", a), ("b", b)] {
        if let Some(i) = set.iter().position(|s| s.dims != dims) {
            return Err(SoftDtwError::Dims {
                input: format!("{name}[{i}]"),
                dims: set[i].dims,
                other: if a.is_empty() { "b[0]" } else { "a[0]" }.into(),
                other_dims: dims,
            });
        }
    }
    for (n, m) in length_pairs {
        Band::new(n, m, opts.band)
            .check()
            .map_err(|needed| SoftDtwError::BandTooNarrow {
                input: format!("a series of length {n} against one of length {m}"),
                band: opts.band.unwrap_or(0),
                n,
                m,
                needed,
            })?;
    }
    Ok(())
}

pub(crate) fn all_length_pairs(a: &[Series], b: &[Series]) -> BTreeSet<(usize, usize)> {
    let la: BTreeSet<usize> = a.iter().map(Series::len).collect();
    let lb: BTreeSet<usize> = b.iter().map(Series::len).collect();
    la.iter()
        .flat_map(|&n| lb.iter().map(move |&m| (n, m)))
        .collect()
}

/// Self values `sdtw(s, s)` of a set (for the divergence).
fn self_values(set: &[Series], name: &str, opts: &Options) -> Result<Vec<f64>, SoftDtwError> {
    set.par_iter()
        .enumerate()
        .map(|(i, s)| {
            finite(Pair::new(s, s, opts).value(), || {
                format!("({name}[{i}], {name}[{i}])")
            })
        })
        .collect()
}

/// Values of all pairs: `values[i][j]` is the measure of `a[i]` against `b[j]`.
///
/// # Units
/// `values` is `B1 × B2` (`a.len()` rows); empty sets give empty rows or no rows.
///
/// # Errors
/// [`SoftDtwError`] naming `a[i]` or `b[j]` (see [`value`](super::value)); all inputs are
/// checked before any work.
pub fn pairwise(
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<Vec<f64>>, SoftDtwError> {
    check_sets(a, b, opts, all_length_pairs(a, b))?;
    let (sa, sb) = match measure {
        Measure::SoftDtw => (Vec::new(), Vec::new()),
        Measure::Divergence => (self_values(a, "a", opts)?, self_values(b, "b", opts)?),
    };
    let cells: Vec<f64> = (0..a.len() * b.len())
        .into_par_iter()
        .map(|k| {
            let (i, j) = (k / b.len(), k % b.len());
            let v = finite(Pair::new(&a[i], &b[j], opts).value(), || {
                format!("(a[{i}], b[{j}])")
            })?;
            Ok(match measure {
                Measure::SoftDtw => v,
                Measure::Divergence => combine(v, sa[i], sb[j]),
            })
        })
        .collect::<Result<_, SoftDtwError>>()?;
    Ok(rows(&cells, a.len(), b.len()))
}

/// `na` rows of `nb` values from the row-major `cells` of all pairs (`na` empty rows when
/// `nb = 0`).
pub(crate) fn rows(cells: &[f64], na: usize, nb: usize) -> Vec<Vec<f64>> {
    (0..na)
        .map(|i| cells[i * nb..(i + 1) * nb].to_vec())
        .collect()
}

/// Values of paired series: `values[i]` is the measure of `a[i]` against `b[i]`.
///
/// # Errors
/// [`SoftDtwError::Count`] if the sets differ in size, else as [`pairwise`].
pub fn paired(
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<f64>, SoftDtwError> {
    check_paired(a, b, opts)?;
    a.par_iter()
        .zip(b)
        .enumerate()
        .map(|(i, (x, y))| {
            let name = |what: &str| format!("({what})");
            let v = finite(Pair::new(x, y, opts).value(), || {
                name(&format!("a[{i}], b[{i}]"))
            })?;
            Ok(match measure {
                Measure::SoftDtw => v,
                Measure::Divergence => {
                    let xx = finite(Pair::new(x, x, opts).value(), || {
                        name(&format!("a[{i}], a[{i}]"))
                    })?;
                    let yy = finite(Pair::new(y, y, opts).value(), || {
                        name(&format!("b[{i}], b[{i}]"))
                    })?;
                    combine(v, xx, yy)
                }
            })
        })
        .collect()
}

pub(crate) fn check_paired(a: &[Series], b: &[Series], opts: &Options) -> Result<(), SoftDtwError> {
    if a.len() != b.len() {
        return Err(SoftDtwError::Count {
            input: "a".into(),
            len: a.len(),
            other: "b".into(),
            other_len: b.len(),
        });
    }
    let lengths = a.iter().zip(b).map(|(x, y)| (x.len(), y.len())).collect();
    check_sets(a, b, opts, lengths)
}

/// Values and gradients of paired series: entry `i` holds the measure of `a[i]` against
/// `b[i]` and its gradients with respect to `a[i]` (`dx`) and `b[i]` (`dy`).
///
/// # Errors
/// As [`paired`].
pub fn paired_gradient(
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<Vec<Gradient>, SoftDtwError> {
    check_paired(a, b, opts)?;
    a.par_iter()
        .zip(b)
        .enumerate()
        .map(|(i, (x, y))| {
            let g = gradient_unchecked(x, y, opts);
            finite(g.value, || format!("(a[{i}], b[{i}])"))?;
            Ok(match measure {
                Measure::SoftDtw => g,
                Measure::Divergence => {
                    let (xx, gx) = self_gradient(x, opts);
                    finite(xx, || format!("(a[{i}], a[{i}])"))?;
                    let (yy, gy) = self_gradient(y, opts);
                    finite(yy, || format!("(b[{i}], b[{i}])"))?;
                    Gradient {
                        value: combine(g.value, xx, yy),
                        dx: g.dx.iter().zip(&gx).map(|(d, s)| d - 0.5 * s).collect(),
                        dy: g.dy.iter().zip(&gy).map(|(d, s)| d - 0.5 * s).collect(),
                    }
                }
            })
        })
        .collect()
}

/// All-pairs values with summed gradients.
#[derive(Clone, Debug, PartialEq)]
pub struct PairwiseGradient {
    /// `values[i][j]`: the measure of `a[i]` against `b[j]` (`B1 × B2`).
    pub values: Vec<Vec<f64>>,
    /// `grad_a[i] = ∂(Σ_j values[i][j]) / ∂a[i]`, shaped like `a[i].values` (`N_i × D`).
    pub grad_a: Vec<Vec<f64>>,
    /// `grad_b[j] = ∂(Σ_i values[i][j]) / ∂b[j]`, shaped like `b[j].values` (`M_j × D`).
    pub grad_b: Vec<Vec<f64>>,
}

/// All pairs with gradients: the values of [`pairwise`] and, for each series, the gradient of
/// the sum of its row (for `a[i]`) or column (for `b[j]`) with respect to it — the gradient of
/// `Σ_ij values[i][j]` with respect to every input.
///
/// # Units
/// Memory: per rayon task, one pair's gradient workspace plus a `grad_b` accumulator the
/// size of `b`. `grad_b` sums per-task partial sums, so its last bits may differ between
/// runs; `values` and `grad_a` are deterministic.
///
/// # Errors
/// As [`pairwise`].
pub fn pairwise_gradient(
    a: &[Series],
    b: &[Series],
    opts: &Options,
    measure: Measure,
) -> Result<PairwiseGradient, SoftDtwError> {
    check_sets(a, b, opts, all_length_pairs(a, b))?;
    let zeros_b = || {
        b.iter()
            .map(|s| vec![0.0; s.values.len()])
            .collect::<Vec<_>>()
    };
    type Rows = Vec<(usize, Vec<f64>, Vec<f64>)>;
    // Each rayon task folds whole rows i: their values and grad_a[i], and adds their
    // contributions into its own grad_b accumulator; the accumulators are then summed.
    let (mut rows, mut grad_b) = a
        .par_iter()
        .enumerate()
        .try_fold(
            || (Rows::new(), zeros_b()),
            |(mut rows, mut gb), (i, x)| {
                let mut ga = vec![0.0; x.values.len()];
                let mut row = Vec::with_capacity(b.len());
                for (j, y) in b.iter().enumerate() {
                    let g = gradient_unchecked(x, y, opts);
                    row.push(finite(g.value, || format!("(a[{i}], b[{j}])"))?);
                    add(&mut ga, &g.dx, 1.0);
                    add(&mut gb[j], &g.dy, 1.0);
                }
                rows.push((i, row, ga));
                Ok::<_, SoftDtwError>((rows, gb))
            },
        )
        .try_reduce(
            || (Rows::new(), zeros_b()),
            |(mut r1, mut g1), (r2, g2)| {
                r1.extend(r2);
                for (acc, g) in g1.iter_mut().zip(&g2) {
                    add(acc, g, 1.0);
                }
                Ok((r1, g1))
            },
        )?;
    rows.sort_by_key(|r| r.0);
    let mut values = Vec::with_capacity(a.len());
    let mut grad_a = Vec::with_capacity(a.len());
    for (_, row, ga) in rows {
        values.push(row);
        grad_a.push(ga);
    }
    if measure == Measure::Divergence {
        let self_a = self_gradients(a, "a", opts)?;
        let self_b = self_gradients(b, "b", opts)?;
        for (i, row) in values.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = combine(*v, self_a[i].0, self_b[j].0);
            }
        }
        for (ga, (_, s)) in grad_a.iter_mut().zip(&self_a) {
            add(ga, s, -0.5 * b.len() as f64);
        }
        for (gb, (_, s)) in grad_b.iter_mut().zip(&self_b) {
            add(gb, s, -0.5 * a.len() as f64);
        }
    }
    Ok(PairwiseGradient {
        values,
        grad_a,
        grad_b,
    })
}

/// Self values and gradients `∇_s sdtw(s, s)` of a set.
fn self_gradients(
    set: &[Series],
    name: &str,
    opts: &Options,
) -> Result<Vec<(f64, Vec<f64>)>, SoftDtwError> {
    set.par_iter()
        .enumerate()
        .map(|(i, s)| {
            let (v, g) = self_gradient(s, opts);
            finite(v, || format!("({name}[{i}], {name}[{i}])"))?;
            Ok((v, g))
        })
        .collect()
}

/// `acc += scale · v`.
fn add(acc: &mut [f64], v: &[f64], scale: f64) {
    for (a, x) in acc.iter_mut().zip(v) {
        *a += scale * x;
    }
}
