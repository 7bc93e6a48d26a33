//! The Python extension module `synfire._synfire` (cargo feature `python`, built by maturin from
//! `pyproject.toml`). A thin layer over the library's entry points: the Python package
//! (`python/synfire/`) turns a lab's spike containers into `(times, unit index, labels)` arrays
//! or a file path and the options into [`MiningOptions`]' JSON, and reads back the `synfire
//! mine` JSON document ([`MineReport`], `docs/mine-json.md`) as pandas frames. Mining runs with
//! the GIL released.
//!
//! Errors become Python exceptions with the command line's messages: `ValueError` for bad
//! options or spikes, `FileNotFoundError` for a missing file, `synfire.SynfireError` for the
//! rest (device failures, unreadable files).

use std::path::Path;

use numpy::PyReadonlyArray1;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;

use crate::episode::{MiningOptions, NoProgress, mine_with, select_counter};
use crate::event::{Alphabet, EventStream, EventType, Ordering};
use crate::report::MineReport;
use crate::significance::{SignificanceConfig, listing, test_episodes_on};

pyo3::create_exception!(
    _synfire,
    SynfireError,
    PyException,
    "A synfire failure that is not a bad argument: a device, a file that cannot be read."
);

/// The options of `synfire mine` from their JSON (the Python keyword arguments), every
/// unknown or invalid one named.
fn options(json: &str) -> PyResult<MiningOptions> {
    let mut unknown = Vec::new();
    let de = &mut serde_json::Deserializer::from_str(json);
    let options: MiningOptions = serde_ignored::deserialize(de, |path| {
        unknown.push(path.to_string());
    })
    .map_err(|e| PyValueError::new_err(format!("mining options: {e}")))?;
    if !unknown.is_empty() {
        return Err(PyValueError::new_err(format!(
            "unknown mining option(s): {}",
            unknown.join(", ")
        )));
    }
    Ok(options)
}

/// Mines `stream` with the options and returns the `synfire mine` JSON document.
fn mine_stream(py: Python<'_>, stream: &EventStream, input: &str, json: &str) -> PyResult<String> {
    let options = options(json)?;
    let (config, settings) = options.resolve().map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        PyValueError::new_err(lines.join("\n"))
    })?;
    let significance = match &options.significance {
        Some(o) => Some(SignificanceConfig::from_options(o).map_err(|errors| {
            let lines: Vec<String> = errors
                .iter()
                .map(|(f, m)| format!("`significance.{f}`: {m}"))
                .collect();
            PyValueError::new_err(lines.join("\n"))
        })?),
        None => None,
    };
    py.detach(|| -> PyResult<String> {
        let err = |e: &dyn std::fmt::Display| SynfireError::new_err(e.to_string());
        let counter = select_counter(stream, &config.intervals, options.device, &settings)
            .map_err(|e| err(&e))?;
        let result =
            mine_with(stream, &config, counter.as_ref(), &NoProgress).map_err(|e| err(&e))?;
        let report = MineReport::new(input, stream, &config, &result);
        let report = match &significance {
            Some((sig, significant_only)) => {
                let tested =
                    test_episodes_on(stream, &config, &result, sig, options.device, &settings)
                        .map_err(|e| err(&e))?;
                let list = listing(&result, Some(&tested), *significant_only, false);
                let annotated = report.annotated(Some(&tested), &list);
                serde_json::to_string(&annotated)
            }
            None => serde_json::to_string(&report),
        };
        report.map_err(|e| err(&e))
    })
}

/// Mines spikes given as arrays: `times` (seconds, shape `[n]`), `units` (each spike's index
/// into `labels`, shape `[n]`), `labels` (the units' names). Unsorted spikes are sorted (equal
/// times in unit order). Returns the `synfire mine` JSON document.
#[pyfunction]
fn mine_arrays(
    py: Python<'_>,
    times: PyReadonlyArray1<'_, f64>,
    units: PyReadonlyArray1<'_, u32>,
    labels: Vec<String>,
    options_json: &str,
) -> PyResult<String> {
    let times = times
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    let units = units
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(bad) = units.iter().find(|&&u| u as usize >= labels.len()) {
        return Err(PyValueError::new_err(format!(
            "spikes: unit index {bad} but only {} unit labels",
            labels.len()
        )));
    }
    let alphabet =
        Alphabet::from_labels(labels).map_err(|e| PyValueError::new_err(format!("units: {e}")))?;
    let stream = EventStream::new(
        times.to_vec(),
        units.iter().map(|&u| EventType(u)).collect(),
        alphabet,
        Ordering::SortIfNeeded,
    )
    .map_err(|e| PyValueError::new_err(format!("spikes: {e}")))?;
    mine_stream(py, &stream, "<arrays>", options_json)
}

/// Mines a spike file (NWB units table, tdminer CSV), as `synfire mine PATH`. Returns the
/// `synfire mine` JSON document.
#[pyfunction]
fn mine_file(py: Python<'_>, path: &str, options_json: &str) -> PyResult<String> {
    let p = Path::new(path);
    if !p.exists() {
        return Err(PyFileNotFoundError::new_err(format!(
            "spike file {path} does not exist"
        )));
    }
    let stream = crate::ingest::read_spikes(p, Ordering::RequireSorted)
        .map_err(|e| SynfireError::new_err(e.to_string()))?;
    mine_stream(py, &stream, path, options_json)
}

/// The extension module.
#[pymodule]
fn _synfire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mine_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(mine_file, m)?)?;
    m.add("SynfireError", m.py().get_type::<SynfireError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
