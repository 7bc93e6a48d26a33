//! The JSON documents of `synfire softdtw` and `synfire barycenter` (see `docs/softdtw.md`).
//!
//! A series is written as a flat list of numbers when it has one channel, and as a list of
//! time steps, each a list of `dims` numbers, otherwise.

use serde::Serialize;
use serde_json::Value;

use super::{Barycenter, Measure, Stop};

/// A time-major series of `dims` channels as JSON: `[v, …]` for one channel, `[[v, …], …]`
/// (one inner list per time step) for more.
#[must_use]
pub fn series_json(dims: usize, values: &[f64]) -> Value {
    if dims <= 1 {
        Value::from(values.to_vec())
    } else {
        Value::from(
            values
                .chunks(dims)
                .map(|step| Value::from(step.to_vec()))
                .collect::<Vec<_>>(),
        )
    }
}

/// `synfire softdtw`'s document.
#[derive(Debug, Serialize)]
pub struct PairwiseReport {
    /// The smoothing γ.
    pub gamma: f64,
    /// The Sakoe-Chiba half-width, `null` for none.
    pub band: Option<usize>,
    /// `"soft_dtw"` or `"divergence"`.
    pub measure: &'static str,
    /// Channels of every series.
    pub dims: usize,
    /// `values[i][j]`: series `i` of A against series `j` of B.
    pub values: Vec<Vec<f64>>,
    /// Per series `i` of A: `∂(Σ_j values[i][j]) / ∂A_i` (with `--grad`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_a: Option<Vec<Value>>,
    /// Per series `j` of B: `∂(Σ_i values[i][j]) / ∂B_j` (with `--grad`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grad_b: Option<Vec<Value>>,
}

/// The name of a measure in reports.
#[must_use]
pub fn measure_name(m: Measure) -> &'static str {
    match m {
        Measure::SoftDtw => "soft_dtw",
        Measure::Divergence => "divergence",
    }
}

/// `synfire barycenter`'s document.
#[derive(Debug, Serialize)]
pub struct BarycenterReport {
    /// The smoothing γ.
    pub gamma: f64,
    /// The Sakoe-Chiba half-width, `null` for none.
    pub band: Option<usize>,
    /// Number of series averaged.
    pub series: usize,
    /// Time steps of the barycenter.
    pub length: usize,
    /// Channels.
    pub dims: usize,
    /// The barycenter (see the module docs for the layout).
    pub barycenter: Value,
    /// The objective `Σ_k w_k sdtw(z, x_k)` at the start and after each iteration.
    pub objective: Vec<f64>,
    /// `‖∇F‖₂` at the result.
    pub gradient_norm: f64,
    /// Iterations taken.
    pub iterations: usize,
    /// Why the optimiser stopped.
    pub stop: Stop,
    /// Index of the series it started from when that was the medoid.
    pub medoid: Option<usize>,
}

impl BarycenterReport {
    /// The document of `b`, computed with `gamma` and `band` over `series` series.
    #[must_use]
    pub fn new(b: &Barycenter, gamma: f64, band: Option<usize>, series: usize) -> Self {
        Self {
            gamma,
            band,
            series,
            length: b.series.len(),
            dims: b.series.dims,
            barycenter: series_json(b.series.dims, &b.series.values),
            objective: b.objective.clone(),
            gradient_norm: b.gradient_norm,
            iterations: b.iterations,
            stop: b.stop,
            medoid: b.medoid,
        }
    }
}
