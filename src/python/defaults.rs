//! `synfire._synfire.defaults()`: the default of every mining and significance option as the
//! library defines it, so that the Python package takes its defaults (`synfire.mine`'s
//! keywords, the `significance=` dict, `synfire.cluster`) from the one place the command line
//! takes them too (`--max-level`, `--n-surrogates`, … read the same constants and `Default`
//! impls through `default_value_t`).

use pyo3::prelude::*;
use serde_json::{Value, json};

use crate::significance::options::DEFAULT_WINDOW_SURROGATES;
use crate::significance::surrogate::{DEFAULT_DEAD_TIME_S, DEFAULT_DELTA_S};
use crate::significance::{MineOptions, SignificanceOptions, SurrogateMethod};

/// The defaults as JSON: `mining` (each [`MineOptions`] field but the intervals, as the
/// options JSON reads it when the key is absent), `significance` (each
/// [`SignificanceOptions`] field but `surrogates`, which has none: those of `synfire mine
/// --surrogates …`, [`SignificanceOptions::new`], serialised as the options JSON reads them),
/// `window_n_surrogates` (a pipeline window's surrogates, [`DEFAULT_WINDOW_SURROGATES`]) and
/// `surrogate_method` (`delta_s`, `dead_time_s`: the method's parameters when
/// `METHOD[:Δ[:d]]` leaves them out, seconds).
///
/// # Panics
/// Never: `{}` is a valid [`MineOptions`] document (every field has a default), and the
/// options serialise.
fn defaults_json() -> Value {
    // The serde defaults: what the extension reads for a key Python leaves out.
    let options: MineOptions =
        serde_json::from_str("{}").expect("every mining option has a default");
    // Every field named, so that a new option cannot be left out of the defaults.
    let MineOptions {
        intervals_s: _,
        intervals_samples: _,
        sample_rate_hz,
        min_count,
        support,
        support_per,
        max_level,
        one_pass,
        bounds,
        max_candidates,
        time_budget_s,
        memory_budget,
        device,
        gpus,
        exact_kernel,
        calibration,
        significance,
    } = options;
    // Every option of a test but its method, at `synfire mine`'s defaults.
    let mut test = serde_json::to_value(SignificanceOptions::new(SurrogateMethod::Dither {
        delta_s: DEFAULT_DELTA_S,
    }))
    .expect("the significance options serialise");
    if let Value::Object(fields) = &mut test {
        fields.remove("surrogates");
    }
    json!({
        "mining": {
            "sample_rate_hz": sample_rate_hz,
            "min_count": min_count,
            "support": support,
            "support_per": support_per,
            "max_level": max_level,
            "one_pass": one_pass,
            "bounds": bounds,
            "max_candidates": max_candidates,
            "time_budget_s": time_budget_s,
            "memory_budget": memory_budget,
            "device": device,
            "gpus": gpus,
            "exact_kernel": exact_kernel,
            "calibration": calibration,
            "significance": significance,
        },
        "significance": test,
        "window_n_surrogates": DEFAULT_WINDOW_SURROGATES,
        "surrogate_method": {
            "delta_s": DEFAULT_DELTA_S,
            "dead_time_s": DEFAULT_DEAD_TIME_S,
        },
    })
}

/// The default of every mining and significance option (a dict, [`defaults_json`]):
/// `{"mining": {"max_level": 10, "device": "auto", …}, "significance": {"n_surrogates": 200,
/// "alpha": 0.05, "correction": "guided", "seed": 0, …}, "window_n_surrogates": 19,
/// "surrogate_method": {"delta_s": 0.015, "dead_time_s": 0.002}}`.
#[pyfunction]
fn defaults(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let text = defaults_json().to_string();
    py.import("json")?.call_method1("loads", (text,))
}

/// Adds `defaults` to the extension module.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(defaults, m)?)
}
