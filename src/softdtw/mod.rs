//! Soft-DTW (Cuturi & Blondel 2017) on the CPU in `f64`: values, gradients with respect to
//! both inputs, the soft-DTW divergence, barycenters, and batched all-pairs / paired APIs
//! (rayon over pairs). This is the reference that a GPU path must reproduce.
//!
//! # Definitions
//!
//! For `x` of `N` time steps and `y` of `M` time steps, both of `D` channels (time-major, see
//! [`Series`]), the cost is the squared Euclidean distance `d(i, j) = ‖x_i − y_j‖²` and
//!
//! ```text
//! R(0, 0) = 0,   R(i, 0) = R(0, j) = +∞   (i, j ≥ 1)
//! R(i, j) = d(i, j) + softmin_γ(R(i−1, j−1), R(i−1, j), R(i, j−1))
//! softmin_γ(a, b, c) = −γ log(e^{−a/γ} + e^{−b/γ} + e^{−c/γ})
//!                    = μ − γ log Σ_k e^{−(a_k − μ)/γ},   μ = min(a, b, c)
//! sdtw_γ(x, y) = R(N, M)
//! ```
//!
//! (Cuturi & Blondel 2017, Eq. 1 and Algorithm 1; the shifted form is the numerically stable
//! log-sum-exp). Cells outside the band are `+∞`. The gradient comes from the backward pass
//! (their Algorithm 2): `E(i, j) = ∂R(N, M)/∂R(i, j)` with `E(N, M) = 1` and
//!
//! ```text
//! E(i, j) = E(i+1, j)   · e^{(R(i+1, j)   − R(i, j) − d(i+1, j))/γ}
//!         + E(i, j+1)   · e^{(R(i, j+1)   − R(i, j) − d(i, j+1))/γ}
//!         + E(i+1, j+1) · e^{(R(i+1, j+1) − R(i, j) − d(i+1, j+1))/γ}
//! ```
//!
//! (terms whose cell lies outside the matrix or the band, or is unreachable, are 0), so
//! `∂sdtw/∂x_i = Σ_j 2 E(i, j) (x_i − y_j)` and `∂sdtw/∂y_j = Σ_i 2 E(i, j) (y_j − x_i)`.
//!
//! The **divergence** (Blondel, Mensch & Vert 2021) is
//! `D(x, y) = sdtw(x, y) − (sdtw(x, x) + sdtw(y, y)) / 2`; it is 0 for `x = y` and ≥ 0.
//!
//! # Sakoe-Chiba band
//!
//! With half-width `W` ([`Options::band`]), cell `(i, j)` (1-based) is inside the band iff
//! `|i·M − j·N| ≤ W·min(N, M)`. Both series are stretched to the longer length `L = max(N, M)`
//! and the cell must lie within `W` steps of that length from the diagonal from `(0, 0)` to
//! `(N, M)`; for `N = M` this is the usual `|i − j| ≤ W`. The definition is symmetric in
//! `x` and `y`, and the end cell `(N, M)` is always inside. A band too narrow for any warping
//! path to reach `(N, M)` (e.g. `W = 0` with `N ≠ M`) is an error, [`SoftDtwError::BandTooNarrow`].
//! `W ≥ max(N, M)` equals no band.
//!
//! # Memory
//!
//! The value keeps two rows of `R`: `O(M)` per pair (plus the inputs). The gradient stores
//! the whole `R` when `(N+1)(M+1) ≤` [`FULL_MATRIX_CELLS`]; above that it stores every `K`-th
//! row of `R` during a forward pass (`K = ⌈√N⌉`, or [`Options::checkpoint_every`]) and, going
//! backwards block by block, recomputes the `K` rows of one block from its checkpoint:
//! `O((N/K + K)·M) = O(√N·M)` memory for about twice the forward work. Nothing is ever
//! `N × M` for long pairs, and there is no length limit.
//!
//! # Errors
//!
//! Every entry point validates its inputs first and returns a [`SoftDtwError`] that names
//! the input (`x`, `y`, `a[3]`, …): an empty series, zero channels, a value that is NaN or
//! infinite, mismatched channel counts, `γ ≤ 0` or not finite, a band too narrow to reach the
//! end cell. No input makes these functions panic.
//!
//! # References
//!
//! - M. Cuturi, M. Blondel, "Soft-DTW: a Differentiable Loss Function for Time-Series",
//!   ICML 2017: Eq. 1 (soft-min, `dtw_γ`), Algorithm 1 (forward), Algorithm 2 (backward,
//!   the `E` matrix), §4 (barycenters, Eq. 4).
//! - M. Blondel, A. Mensch, J.-P. Vert, "Differentiable Divergences Between Time Series",
//!   AISTATS 2021 (the divergence).
//! - The cuTimeWarp report (`../shared/papers/soft-dtw-gpu-cutimewarp.tex`): the same
//!   recurrences on the GPU, anti-diagonal wavefronts, tiling, Sakoe-Chiba bands.

mod backward;
mod band;
pub mod barycenter;
pub mod batch;
mod divergence;
mod forward;
pub mod gpu;
pub mod report;

use std::num::NonZeroUsize;

pub use crate::series::Series;
pub use backward::{gradient, stored_cells};
pub use band::Band;
pub use barycenter::{Barycenter, BarycenterOptions, Init, Stop, barycenter};
pub use batch::{Measure, PairwiseGradient, paired, paired_gradient, pairwise, pairwise_gradient};
pub use divergence::{divergence, divergence_gradient};
pub use forward::{softmin3, value};

/// Above this many cells of `R` (`(N+1)(M+1)`), the gradient uses checkpoints instead of the
/// full matrix: 2^20 cells = 8 MiB of `f64` per pair.
pub const FULL_MATRIX_CELLS: usize = 1 << 20;

/// Settings of one soft-DTW computation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Smoothing `γ > 0` (same units as the cost: squared units of the series). Small `γ`
    /// approaches DTW, large `γ` averages over all alignments.
    pub gamma: f64,
    /// Sakoe-Chiba half-width `W` in time steps of the longer series (see the module docs);
    /// `None`: no band.
    pub band: Option<usize>,
    /// Rows between checkpoints of `R` in the backward pass; `None`: the full matrix when it
    /// has at most [`FULL_MATRIX_CELLS`] cells, else `⌈√N⌉`. Changes memory and time only,
    /// never the result (beyond rounding, and the rounding is identical as the same
    /// recurrence is evaluated in the same order).
    pub checkpoint_every: Option<NonZeroUsize>,
}

impl Options {
    /// Options with smoothing `gamma`, no band and automatic checkpointing.
    #[must_use]
    pub fn new(gamma: f64) -> Self {
        Self {
            gamma,
            band: None,
            checkpoint_every: None,
        }
    }

    /// The same options with a Sakoe-Chiba band of half-width `w`.
    #[must_use]
    pub fn with_band(self, w: usize) -> Self {
        Self {
            band: Some(w),
            ..self
        }
    }

    /// Checks `gamma`.
    ///
    /// # Errors
    /// [`SoftDtwError::Gamma`] if `gamma` is not a finite number above 0.
    pub fn validate(&self) -> Result<(), SoftDtwError> {
        if self.gamma.is_finite() && self.gamma > 0.0 {
            Ok(())
        } else {
            Err(SoftDtwError::Gamma { gamma: self.gamma })
        }
    }
}

/// Errors of the soft-DTW functions; each names the input it is about.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[must_use]
pub enum SoftDtwError {
    /// `γ` is not a finite number above 0.
    #[error("`gamma` must be a finite number above 0, got {gamma}")]
    Gamma {
        /// The value given.
        gamma: f64,
    },
    /// A series without time steps.
    #[error("{input}: the series is empty")]
    Empty {
        /// Which input (`x`, `y`, `a[3]`, …).
        input: String,
    },
    /// A series whose `values` do not hold a whole number of `dims`-channel steps, or 0 channels.
    #[error("{input}: {len} values do not make time steps of {dims} channels")]
    Shape {
        /// Which input.
        input: String,
        /// `values.len()`.
        len: usize,
        /// `dims`.
        dims: usize,
    },
    /// A NaN or infinite sample.
    #[error("{input}: time step {t}, channel {dim} is {value}; soft-DTW needs finite values")]
    NonFinite {
        /// Which input.
        input: String,
        /// 0-based time step.
        t: usize,
        /// 0-based channel.
        dim: usize,
        /// The value.
        value: f64,
    },
    /// Two inputs with different numbers of channels.
    #[error("{input} has {dims} channels, {other} has {other_dims}; they must match")]
    Dims {
        /// One input.
        input: String,
        /// Its channels.
        dims: usize,
        /// The input it is compared with.
        other: String,
        /// Its channels.
        other_dims: usize,
    },
    /// No warping path inside the band reaches `(N, M)`.
    #[error(
        "{input}: a band of half-width {band} cannot reach the end of a {n} x {m} alignment; widen `band` (at least {needed} for these lengths)"
    )]
    BandTooNarrow {
        /// Which pair.
        input: String,
        /// The half-width asked for.
        band: usize,
        /// Length of the first series.
        n: usize,
        /// Length of the second series.
        m: usize,
        /// The narrowest band that reaches the end.
        needed: usize,
    },
    /// The result overflowed (`+∞`): the costs are too large for `f64`.
    #[error("{input}: soft-DTW overflowed to infinity; rescale the series")]
    Overflow {
        /// Which pair.
        input: String,
    },
    /// Paired inputs (or weights) whose counts differ.
    #[error("{input} has {len} entries, {other} has {other_len}; they must match")]
    Count {
        /// One input.
        input: String,
        /// Its count.
        len: usize,
        /// The other input.
        other: String,
        /// Its count.
        other_len: usize,
    },
    /// The GPU path failed (`--device gpu`), or an input does not fit its f32 arithmetic.
    #[error("soft-DTW on the GPU: {message}")]
    Device {
        /// What went wrong (the driver's or NVRTC's message).
        message: String,
    },
    /// A set that must not be empty is empty (a barycenter of nothing).
    #[error("{input}: no series")]
    NoSeries {
        /// Which input.
        input: String,
    },
    /// Barycenter weights that are negative, not finite, or all zero.
    #[error("`weights`: {message}")]
    Weights {
        /// What is wrong.
        message: String,
    },
    /// A barycenter setting out of range.
    #[error("barycenter: {message}")]
    Barycenter {
        /// What is wrong.
        message: String,
    },
}

/// Validates one series: channels, shape, length, finiteness.
pub(crate) fn check_series(s: &Series, input: &dyn Fn() -> String) -> Result<(), SoftDtwError> {
    if s.dims == 0 || !s.values.len().is_multiple_of(s.dims) {
        return Err(SoftDtwError::Shape {
            input: input(),
            len: s.values.len(),
            dims: s.dims,
        });
    }
    if s.values.is_empty() {
        return Err(SoftDtwError::Empty { input: input() });
    }
    if let Some(k) = s.values.iter().position(|v| !v.is_finite()) {
        return Err(SoftDtwError::NonFinite {
            input: input(),
            t: k / s.dims,
            dim: k % s.dims,
            value: s.values[k],
        });
    }
    Ok(())
}

/// Validates a pair (each series, equal channels, the band) under `opts`.
pub(crate) fn check_pair(
    x: &Series,
    y: &Series,
    opts: &Options,
    xname: &dyn Fn() -> String,
    yname: &dyn Fn() -> String,
) -> Result<(), SoftDtwError> {
    opts.validate()?;
    check_series(x, xname)?;
    check_series(y, yname)?;
    if x.dims != y.dims {
        return Err(SoftDtwError::Dims {
            input: xname(),
            dims: x.dims,
            other: yname(),
            other_dims: y.dims,
        });
    }
    Band::new(x.len(), y.len(), opts.band)
        .check()
        .map_err(|needed| SoftDtwError::BandTooNarrow {
            input: format!("({}, {})", xname(), yname()),
            band: opts.band.unwrap_or(0),
            n: x.len(),
            m: y.len(),
            needed,
        })
}

/// The soft-DTW value and its gradients with respect to both inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient {
    /// `sdtw_γ(x, y)` (or the divergence, for [`divergence_gradient`]).
    pub value: f64,
    /// `∂value/∂x`, shape `N × D`, time-major like `x.values`.
    pub dx: Vec<f64>,
    /// `∂value/∂y`, shape `M × D`, time-major like `y.values`.
    pub dy: Vec<f64>,
}
