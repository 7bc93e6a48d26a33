//! Soft-DTW barycenters (Cuturi & Blondel 2017, §4, Eq. 4): the series `z` minimising
//! `F(z) = Σ_k w_k sdtw_γ(z, x_k)` (weights normalised to sum 1), found by L-BFGS.
//!
//! # Optimiser
//!
//! Limited-memory BFGS (Nocedal & Wright 2006, Algorithm 7.4/7.5, the two-loop recursion)
//! with `memory` correction pairs, initial inverse-Hessian scale `sᵀy / yᵀy`, and a
//! backtracking Armijo line search: start at step 1 (at `1/‖∇F‖₂` on the first iteration,
//! when there is no curvature information yet), halve until
//! `F(z + t·p) ≤ F(z) + 10⁻⁴·t·∇Fᵀp`, at most 60 times. A pair with `sᵀy ≤ 10⁻¹²·‖s‖‖y‖` is
//! skipped, and a direction that is not a descent direction resets the memory to steepest
//! descent. Every accepted step strictly decreases `F`, so the recorded objective is
//! decreasing.
//!
//! It stops when `‖∇F‖₂ ≤ grad_tolerance`, when an iteration decreases `F` by at most
//! `f_tolerance · max(|F|, 1)`, when the line search fails (no decrease found at the
//! resolution of `f64`), or after `max_iterations`; [`Stop`] says which.

use rayon::prelude::*;

use super::backward::gradient_unchecked;
use super::forward::{Pair, finite};
use super::{Band, Options, Series, SoftDtwError, check_series};

/// Where the optimisation starts; the barycenter has the length of the start.
#[derive(Clone, Debug, PartialEq, Default)]
pub enum Init {
    /// The weighted mean when all series have one length, else the medoid.
    #[default]
    Auto,
    /// The weighted arithmetic mean, step by step (equal lengths required).
    Mean,
    /// The series `x_k` minimising `Σ_l w_l sdtw_γ(x_k, x_l)` (`B²` soft-DTW values).
    Medoid,
    /// A given series (same channels as the set).
    Series(Series),
}

/// Settings of [`barycenter`].
#[derive(Clone, Debug, PartialEq)]
pub struct BarycenterOptions {
    /// The soft-DTW settings (`γ`, band, checkpoints) of every term.
    pub soft: Options,
    /// The starting series.
    pub init: Init,
    /// One non-negative weight per series (normalised to sum 1); `None`: equal weights.
    pub weights: Option<Vec<f64>>,
    /// At most this many L-BFGS iterations.
    pub max_iterations: usize,
    /// Stop when the gradient's Euclidean norm is at most this.
    pub grad_tolerance: f64,
    /// Stop when one iteration decreases `F` by at most `f_tolerance · max(|F|, 1)`.
    pub f_tolerance: f64,
    /// L-BFGS correction pairs kept.
    pub memory: usize,
}

impl BarycenterOptions {
    /// Smoothing `gamma`, no band, [`Init::Auto`], equal weights, 100 iterations,
    /// `grad_tolerance = 1e-6`, `f_tolerance = 1e-12`, memory 10.
    #[must_use]
    pub fn new(gamma: f64) -> Self {
        Self {
            soft: Options::new(gamma),
            init: Init::Auto,
            weights: None,
            max_iterations: 100,
            grad_tolerance: 1e-6,
            f_tolerance: 1e-12,
            memory: 10,
        }
    }
}

/// Why the optimisation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// `‖∇F‖₂ ≤ grad_tolerance`.
    GradientSmall,
    /// An iteration decreased `F` by at most `f_tolerance · max(|F|, 1)`.
    NoProgress,
    /// The line search found no decrease.
    LineSearch,
    /// `max_iterations` reached.
    MaxIterations,
}

/// A barycenter and the optimisation's record.
#[derive(Clone, Debug, PartialEq)]
pub struct Barycenter {
    /// The barycenter `z` (length of the start, channels of the set).
    pub series: Series,
    /// `F` at the start and after each iteration (`iterations + 1` values, decreasing).
    pub objective: Vec<f64>,
    /// `‖∇F(z)‖₂` at the result.
    pub gradient_norm: f64,
    /// L-BFGS iterations taken.
    pub iterations: usize,
    /// Why it stopped.
    pub stop: Stop,
    /// The index of the series it started from, for [`Init::Medoid`] (and `Auto` when it
    /// picked the medoid).
    pub medoid: Option<usize>,
}

/// The soft-DTW barycenter of `set` (see the module docs for the objective and the
/// optimiser).
///
/// # Units
/// Every series `N_k × D`; the result `L × D` with `L` the length of the start.
///
/// # Errors
/// [`SoftDtwError::NoSeries`] for an empty set; [`SoftDtwError::Count`] or
/// [`SoftDtwError::Weights`] for bad weights; [`SoftDtwError::Barycenter`] for
/// [`Init::Mean`] on unequal lengths or `memory = 0`; and, naming `set[k]` or `init`, every
/// error of [`value`](super::value).
pub fn barycenter(set: &[Series], opts: &BarycenterOptions) -> Result<Barycenter, SoftDtwError> {
    barycenter_with(set, opts, None)
}

/// The gradients of the soft-DTW values of `copies[k]` against `set[k]` for every `k` (the
/// objective's terms), computed elsewhere than on this thread's CPU path: a GPU worker's
/// ([`super::gpu::barycenter`]).
pub(crate) type PairedGradients<'a> =
    &'a dyn Fn(&[Series], &[Series]) -> Result<Vec<super::Gradient>, SoftDtwError>;

/// [`barycenter`] with the objective's values and gradients from `paired` when given (a GPU
/// worker's, [`super::gpu::barycenter`]), else on the CPU. The start (mean or medoid) is
/// computed on the CPU either way.
///
/// # Errors
/// As [`barycenter`], plus `paired`'s first error.
pub(crate) fn barycenter_with(
    set: &[Series],
    opts: &BarycenterOptions,
    paired: Option<PairedGradients<'_>>,
) -> Result<Barycenter, SoftDtwError> {
    let soft = &opts.soft;
    soft.validate()?;
    if set.is_empty() {
        return Err(SoftDtwError::NoSeries {
            input: "set".into(),
        });
    }
    for (k, s) in set.iter().enumerate() {
        check_series(s, &|| format!("set[{k}]"))?;
        if s.dims != set[0].dims {
            return Err(SoftDtwError::Dims {
                input: format!("set[{k}]"),
                dims: s.dims,
                other: "set[0]".into(),
                other_dims: set[0].dims,
            });
        }
    }
    if opts.memory == 0 {
        return Err(SoftDtwError::Barycenter {
            message: "`memory` must be at least 1".into(),
        });
    }
    let weights = normalised_weights(opts.weights.as_deref(), set.len())?;
    let equal = set.iter().all(|s| s.len() == set[0].len());
    let (start, medoid) = match &opts.init {
        Init::Mean => {
            if !equal {
                return Err(SoftDtwError::Barycenter {
                    message:
                        "`init = mean` needs series of one length; use the medoid or give a start"
                            .into(),
                });
            }
            (mean(set, &weights), None)
        }
        Init::Auto if equal => (mean(set, &weights), None),
        Init::Auto | Init::Medoid => {
            let k = medoid_index(set, &weights, soft)?;
            (set[k].clone(), Some(k))
        }
        Init::Series(s) => {
            check_series(s, &|| "init".into())?;
            if s.dims != set[0].dims {
                return Err(SoftDtwError::Dims {
                    input: "init".into(),
                    dims: s.dims,
                    other: "set[0]".into(),
                    other_dims: set[0].dims,
                });
            }
            (s.clone(), None)
        }
    };
    for (k, s) in set.iter().enumerate() {
        Band::new(start.len(), s.len(), soft.band)
            .check()
            .map_err(|needed| SoftDtwError::BandTooNarrow {
                input: format!("(barycenter, set[{k}])"),
                band: soft.band.unwrap_or(0),
                n: start.len(),
                m: s.len(),
                needed,
            })?;
    }
    let device_failure: std::cell::RefCell<Option<SoftDtwError>> = Default::default();
    let objective = |z: &[f64]| -> (f64, Vec<f64>) {
        let zs = Series {
            dims: start.dims,
            values: z.to_vec(),
        };
        if let Some(paired) = paired {
            let copies = vec![zs.clone(); set.len()];
            return match paired(&copies, set) {
                Ok(gs) => {
                    let mut f = 0.0;
                    let mut grad = vec![0.0; z.len()];
                    for (g, &wt) in gs.iter().zip(&weights) {
                        f += wt * g.value;
                        for (a, b) in grad.iter_mut().zip(&g.dx) {
                            *a += wt * b;
                        }
                    }
                    (f, grad)
                }
                Err(e) => {
                    device_failure.borrow_mut().get_or_insert(e);
                    (f64::INFINITY, vec![0.0; z.len()])
                }
            };
        }
        let terms: Vec<(f64, Vec<f64>)> = set
            .par_iter()
            .zip(&weights)
            .map(|(x, &w)| {
                if w == 0.0 {
                    return (0.0, Vec::new());
                }
                let g = gradient_unchecked(&zs, x, soft);
                (w * g.value, g.dx)
            })
            .collect();
        let mut f = 0.0;
        let mut grad = vec![0.0; z.len()];
        for ((v, g), &w) in terms.iter().zip(&weights) {
            if w == 0.0 {
                continue;
            }
            f += v;
            for (a, b) in grad.iter_mut().zip(g) {
                *a += w * b;
            }
        }
        (f, grad)
    };
    let (z, record) = lbfgs(start.values.clone(), objective, opts);
    if let Some(e) = device_failure.into_inner() {
        return Err(e);
    }
    finite(*record.objective.last().unwrap_or(&f64::INFINITY), || {
        "(barycenter, set)".into()
    })?;
    Ok(Barycenter {
        series: Series {
            dims: start.dims,
            values: z,
        },
        objective: record.objective,
        gradient_norm: record.gradient_norm,
        iterations: record.iterations,
        stop: record.stop,
        medoid,
    })
}

fn normalised_weights(weights: Option<&[f64]>, n: usize) -> Result<Vec<f64>, SoftDtwError> {
    let Some(w) = weights else {
        return Ok(vec![1.0 / n as f64; n]);
    };
    if w.len() != n {
        return Err(SoftDtwError::Count {
            input: "weights".into(),
            len: w.len(),
            other: "set".into(),
            other_len: n,
        });
    }
    if let Some(k) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
        return Err(SoftDtwError::Weights {
            message: format!("weight {k} is {}; weights must be finite and ≥ 0", w[k]),
        });
    }
    let total: f64 = w.iter().sum();
    if !(total > 0.0 && total.is_finite()) {
        return Err(SoftDtwError::Weights {
            message: format!("the weights sum to {total}; at least one must be above 0"),
        });
    }
    Ok(w.iter().map(|v| v / total).collect())
}

fn mean(set: &[Series], weights: &[f64]) -> Series {
    let mut values = vec![0.0; set[0].values.len()];
    for (s, &w) in set.iter().zip(weights) {
        for (a, b) in values.iter_mut().zip(&s.values) {
            *a += w * b;
        }
    }
    Series {
        dims: set[0].dims,
        values,
    }
}

fn medoid_index(set: &[Series], weights: &[f64], soft: &Options) -> Result<usize, SoftDtwError> {
    let costs: Vec<f64> = (0..set.len())
        .into_par_iter()
        .map(|k| {
            let mut total = 0.0;
            for (l, (s, &w)) in set.iter().zip(weights).enumerate() {
                if w == 0.0 {
                    continue;
                }
                Band::new(set[k].len(), s.len(), soft.band)
                    .check()
                    .map_err(|needed| SoftDtwError::BandTooNarrow {
                        input: format!("(set[{k}], set[{l}])"),
                        band: soft.band.unwrap_or(0),
                        n: set[k].len(),
                        m: s.len(),
                        needed,
                    })?;
                let v = Pair::new(&set[k], s, soft).value();
                total += w * finite(v, || format!("(set[{k}], set[{l}])"))?;
            }
            Ok(total)
        })
        .collect::<Result<_, SoftDtwError>>()?;
    Ok(costs
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(k, _)| k))
}

/// What [`lbfgs`] did.
struct Record {
    objective: Vec<f64>,
    gradient_norm: f64,
    iterations: usize,
    stop: Stop,
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Minimises `f` from `z` by L-BFGS with backtracking Armijo steps (module docs).
fn lbfgs(
    mut z: Vec<f64>,
    f: impl Fn(&[f64]) -> (f64, Vec<f64>),
    opts: &BarycenterOptions,
) -> (Vec<f64>, Record) {
    const C1: f64 = 1e-4;
    const MAX_HALVINGS: usize = 60;
    let (mut fz, mut g) = f(&z);
    let mut objective = vec![fz];
    let mut pairs: std::collections::VecDeque<(Vec<f64>, Vec<f64>, f64)> = Default::default();
    let mut iterations = 0;
    let stop = loop {
        let gnorm = dot(&g, &g).sqrt();
        if !fz.is_finite() {
            break Stop::LineSearch;
        }
        if gnorm <= opts.grad_tolerance {
            break Stop::GradientSmall;
        }
        if iterations >= opts.max_iterations {
            break Stop::MaxIterations;
        }
        // Two-loop recursion: p = −H g.
        let mut q = g.clone();
        let mut alphas = Vec::with_capacity(pairs.len());
        for (s, y, rho) in pairs.iter().rev() {
            let a = rho * dot(s, &q);
            for (qi, yi) in q.iter_mut().zip(y) {
                *qi -= a * yi;
            }
            alphas.push(a);
        }
        let scale = pairs.back().map_or(1.0, |(s, y, _)| dot(s, y) / dot(y, y));
        for qi in &mut q {
            *qi *= scale;
        }
        for ((s, y, rho), a) in pairs.iter().zip(alphas.iter().rev()) {
            let b = rho * dot(y, &q);
            for (qi, si) in q.iter_mut().zip(s) {
                *qi += (a - b) * si;
            }
        }
        let mut p: Vec<f64> = q.iter().map(|v| -v).collect();
        let mut slope = dot(&g, &p);
        if !(slope < 0.0 && slope.is_finite()) {
            pairs.clear();
            p = g.iter().map(|v| -v).collect();
            slope = -gnorm * gnorm;
        }
        let mut t = if pairs.is_empty() { 1.0 / gnorm } else { 1.0 };
        let mut accepted = None;
        for _ in 0..MAX_HALVINGS {
            let zn: Vec<f64> = z.iter().zip(&p).map(|(a, b)| a + t * b).collect();
            let (fn_, gn) = f(&zn);
            if fn_.is_finite() && fn_ <= fz + C1 * t * slope && fn_ < fz {
                accepted = Some((zn, fn_, gn));
                break;
            }
            t *= 0.5;
        }
        let Some((zn, fn_, gn)) = accepted else {
            break Stop::LineSearch;
        };
        iterations += 1;
        let s: Vec<f64> = zn.iter().zip(&z).map(|(a, b)| a - b).collect();
        let y: Vec<f64> = gn.iter().zip(&g).map(|(a, b)| a - b).collect();
        let sy = dot(&s, &y);
        if sy > 1e-12 * dot(&s, &s).sqrt() * dot(&y, &y).sqrt() && sy.is_finite() {
            if pairs.len() == opts.memory {
                pairs.pop_front();
            }
            pairs.push_back((s, y, 1.0 / sy));
        }
        let decrease = fz - fn_;
        (z, fz, g) = (zn, fn_, gn);
        objective.push(fz);
        if decrease <= opts.f_tolerance * fz.abs().max(1.0) {
            break Stop::NoProgress;
        }
    };
    let gradient_norm = dot(&g, &g).sqrt();
    (
        z,
        Record {
            objective,
            gradient_norm,
            iterations,
            stop,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lbfgs_minimises_a_quadratic() {
        // F(z) = Σ c_i (z_i − i)², minimum 0 at z_i = i.
        let c = [1.0, 10.0, 100.0, 0.5];
        let f = |z: &[f64]| {
            let v = z
                .iter()
                .enumerate()
                .map(|(i, x)| c[i] * (x - i as f64).powi(2))
                .sum();
            let g = z
                .iter()
                .enumerate()
                .map(|(i, x)| 2.0 * c[i] * (x - i as f64))
                .collect();
            (v, g)
        };
        let mut opts = BarycenterOptions::new(1.0);
        opts.grad_tolerance = 1e-9;
        opts.f_tolerance = 0.0;
        let (z, r) = lbfgs(vec![5.0; 4], f, &opts);
        assert_eq!(r.stop, Stop::GradientSmall, "{:?}", r.objective);
        for (i, v) in z.iter().enumerate() {
            assert!((v - i as f64).abs() < 1e-8, "{z:?}");
        }
        assert!(r.objective.windows(2).all(|w| w[1] < w[0]));
    }

    #[test]
    fn bad_settings_are_errors() {
        let set = [
            Series::univariate(vec![1.0, 2.0]),
            Series::univariate(vec![1.0]),
        ];
        let mut o = BarycenterOptions::new(1.0);
        assert!(matches!(
            barycenter(&[], &o),
            Err(SoftDtwError::NoSeries { .. })
        ));
        o.init = Init::Mean;
        assert!(matches!(
            barycenter(&set, &o),
            Err(SoftDtwError::Barycenter { .. })
        ));
        o.init = Init::Auto;
        o.weights = Some(vec![1.0]);
        assert!(matches!(
            barycenter(&set, &o),
            Err(SoftDtwError::Count { .. })
        ));
        o.weights = Some(vec![0.0, 0.0]);
        assert!(matches!(
            barycenter(&set, &o),
            Err(SoftDtwError::Weights { .. })
        ));
        o.weights = Some(vec![-1.0, 2.0]);
        assert!(matches!(
            barycenter(&set, &o),
            Err(SoftDtwError::Weights { .. })
        ));
        o.weights = None;
        let r = barycenter(&set, &o).unwrap();
        // Unequal lengths: Auto starts from the medoid.
        assert!(r.medoid.is_some());
    }
}
