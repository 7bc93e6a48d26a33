//! The Python extension module `synfire._synfire` (cargo feature `python`, built by maturin from
//! `pyproject.toml`). A thin layer over the library's entry points: the Python package
//! (`python/synfire/`) turns a lab's spike containers into `(times, unit index, labels)` arrays
//! or a file path and the options into [`MineOptions`]' JSON, and reads back the `synfire
//! mine` JSON document ([`MineReport`], `docs/mine-json.md`) as pandas frames. Long calls run
//! on a thread of their own with the GIL released and answer Ctrl-C ([`interrupt`]); mining
//! reports its progress to a Python callable and stops when interrupted.
//!
//! Errors become Python exceptions with the command line's messages: `ValueError` for bad
//! options or spikes, `FileNotFoundError` for a missing file, `synfire.SynfireError` for the
//! rest (device failures, unreadable files).

mod cluster;
mod defaults;
mod interrupt;
mod sensors;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::event::{Alphabet, EventStream, EventType, Ordering};
use crate::report::MineReport;
use crate::significance::{MineJob, MineOptions, SignificanceConfig, listing};
use interrupt::{MineProgress, interruptible};

pyo3::create_exception!(
    _synfire,
    SynfireError,
    PyException,
    "A synfire failure that is not a bad argument: a device, a file that cannot be read."
);

/// The options of `synfire mine` from their JSON (the Python keyword arguments), every
/// unknown one named, and the first invalid one by its path (`significance.correction`).
fn options(json: &str) -> PyResult<MineOptions> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let de = &mut serde_json::Deserializer::from_str(json);
    let de = serde_path_to_error::Deserializer::new(de, &mut track);
    let options: MineOptions = serde_ignored::deserialize(de, |path| {
        unknown.push(path.to_string());
    })
    .map_err(|e| {
        let path = track.path().to_string();
        if path.is_empty() || path == "." {
            PyValueError::new_err(format!("mining options: {e}"))
        } else {
            PyValueError::new_err(format!("mining options: `{path}`: {e}"))
        }
    })?;
    if !unknown.is_empty() {
        return Err(PyValueError::new_err(format!(
            "unknown mining option(s): {}",
            unknown.join(", ")
        )));
    }
    Ok(options)
}

/// The episodes of a report as columns (numpy arrays, built without a JSON round trip: a
/// frame of 10⁵ episodes parses slower from JSON than it mines). Keys: `lengths` (nodes per
/// episode, `[E]`), `types` (node type ids, all episodes back to back), `intervals` (each
/// gap's index into `params.intervals`, back to back), `count` (`[E]`), and with a test
/// `tested` (bool `[E]`) and the [`crate::significance::TestStats`] fields (`[E]`, NaN and
/// false where untested; `test_count` NaN also where the test was not sample-split); `type_labels` (each type id's label) is added with them.
#[derive(Default)]
struct Columns {
    lengths: Vec<u32>,
    types: Vec<u32>,
    intervals: Vec<u32>,
    count: Vec<u64>,
    tested: Vec<bool>,
    stats: [Vec<f64>; 5],
    significant: Vec<bool>,
    /// Sample splitting's count in the test part (NaN where untested or not split).
    test_count: Vec<f64>,
}

const STAT_NAMES: [&str; 5] = [
    "surrogate_mean",
    "surrogate_std",
    "statistic",
    "p_value",
    "p_adjusted",
];

impl Columns {
    fn of(report: &mut MineReport<'_>) -> Self {
        let index: HashMap<&str, u32> = report
            .params
            .interval_notation
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i as u32))
            .collect();
        let mut c = Self::default();
        for e in &report.episodes {
            c.lengths.push(e.types.len() as u32);
            c.types.extend(&e.types);
            c.intervals.extend(
                e.intervals
                    .iter()
                    .map(|n| index.get(n.as_str()).copied().unwrap_or(u32::MAX)),
            );
            c.count.push(e.count);
            let t = e.test.as_ref();
            c.tested.push(t.is_some());
            let values = t.map_or([f64::NAN; 5], |t| {
                [
                    t.surrogate_mean,
                    t.surrogate_std,
                    t.statistic,
                    t.p_value,
                    t.p_adjusted,
                ]
            });
            for (col, v) in c.stats.iter_mut().zip(values) {
                col.push(v);
            }
            c.significant.push(t.is_some_and(|t| t.significant));
            c.test_count
                .push(t.and_then(|t| t.test_count).map_or(f64::NAN, |n| n as f64));
        }
        report.episodes.clear();
        c
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("lengths", self.lengths.into_pyarray(py))?;
        d.set_item("types", self.types.into_pyarray(py))?;
        d.set_item("intervals", self.intervals.into_pyarray(py))?;
        d.set_item("count", self.count.into_pyarray(py))?;
        d.set_item("tested", self.tested.into_pyarray(py))?;
        for (name, col) in STAT_NAMES.iter().zip(self.stats) {
            d.set_item(name, col.into_pyarray(py))?;
        }
        d.set_item("significant", self.significant.into_pyarray(py))?;
        d.set_item("test_count", self.test_count.into_pyarray(py))?;
        Ok(d)
    }
}

/// The non-overlapped occurrences of the listed episodes of two or more nodes, as the long
/// table of `synfire mine --occurrences FILE.csv`: one row per event of an occurrence. Keys:
/// `episode` (the episode's row in the frame, `[R]`), `occurrence` (0-based, in time order),
/// `node` (0-based), `unit` (the node's type id), `time_s` (seconds).
#[derive(Default)]
struct OccurrenceColumns {
    episode: Vec<u64>,
    occurrence: Vec<u64>,
    node: Vec<u32>,
    unit: Vec<u32>,
    time_s: Vec<f64>,
}

impl OccurrenceColumns {
    /// The occurrences of `listed` (the frame's rows in order), counted in `stream` by
    /// [`crate::episode::occurrences`] (Algorithm 1's greedy earliest-end occurrences, exactly
    /// `count` of them), a block of episodes at a time in parallel, checking `cancel` between
    /// blocks.
    fn of(
        stream: &EventStream,
        listed: &[&crate::episode::FrequentEpisode],
        cancel: &AtomicBool,
    ) -> PyResult<Self> {
        use rayon::prelude::*;
        const BLOCK: usize = 256;
        let index = crate::episode::TypeIndex::new(stream);
        let mut c = Self::default();
        let rows: Vec<(usize, &crate::episode::FrequentEpisode)> = listed
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, f)| f.episode.len() >= 2)
            .collect();
        for block in rows.chunks(BLOCK) {
            if cancel.load(AtomicOrdering::Relaxed) {
                return Err(PyKeyboardInterrupt::new_err("cancelled"));
            }
            let found: Vec<Vec<f64>> = block
                .par_iter()
                .map(|(_, f)| crate::episode::occurrences(&index, &f.episode))
                .collect();
            for ((row, f), times) in block.iter().zip(found) {
                let n = f.episode.len();
                if times.len() as u64 != f.count * n as u64 {
                    return Err(SynfireError::new_err(format!(
                        "internal error (please report it): episode {row} has count {} but {} \
                         occurrences",
                        f.count,
                        times.len() / n
                    )));
                }
                for (m, occ) in times.chunks(n).enumerate() {
                    for (node, (&t, ty)) in occ.iter().zip(f.episode.types()).enumerate() {
                        c.episode.push(*row as u64);
                        c.occurrence.push(m as u64);
                        c.node.push(node as u32);
                        c.unit.push(ty.0);
                        c.time_s.push(t);
                    }
                }
            }
        }
        Ok(c)
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("episode", self.episode.into_pyarray(py))?;
        d.set_item("occurrence", self.occurrence.into_pyarray(py))?;
        d.set_item("node", self.node.into_pyarray(py))?;
        d.set_item("unit", self.unit.into_pyarray(py))?;
        d.set_item("time_s", self.time_s.into_pyarray(py))?;
        Ok(d)
    }
}

/// What a mining call returns from its worker thread.
struct Mined {
    doc: String,
    columns: Columns,
    occurrences: Option<OccurrenceColumns>,
    labels: Vec<String>,
}

/// A library error of the mining thread as a Python exception: a cancelled run
/// `KeyboardInterrupt` (the caller has raised its own exception already), the rest
/// `SynfireError` with the library's message.
fn mine_err(e: &dyn std::fmt::Display, cancelled: bool) -> PyErr {
    if cancelled {
        PyKeyboardInterrupt::new_err("mining was cancelled")
    } else {
        SynfireError::new_err(e.to_string())
    }
}

/// The options (JSON, as `synfire.mine` passes them) checked and resolved: the miner
/// configuration, the GPU settings and the significance test, every invalid option named in
/// one `ValueError`.
#[allow(clippy::type_complexity)]
pub(crate) fn resolve(
    options_json: &str,
) -> PyResult<(
    MineOptions,
    crate::episode::MinerConfig,
    crate::episode::GpuSettings,
    Option<SignificanceConfig>,
)> {
    let options = options(options_json)?;
    let (config, settings) = options.resolve().map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        PyValueError::new_err(lines.join("\n"))
    })?;
    let significance = match &options.significance {
        Some(o) => Some(o.config().map_err(|errors| {
            let lines: Vec<String> = errors
                .iter()
                .map(|e| format!("`significance.{}`: {}", e.field, e.message))
                .collect();
            PyValueError::new_err(lines.join("\n"))
        })?),
        None => None,
    };
    Ok((options, config, settings, significance))
}

/// Mines the stream `read` gives with the options (JSON) on a thread of its own (GIL
/// released, Ctrl-C answered, `progress(level, done, total)` called on this thread as levels
/// advance), and returns the `synfire mine` JSON document without its episodes, the
/// episodes as [`Columns`] (with `type_labels`) and, with `occurrences`, the
/// [`OccurrenceColumns`] (or None).
fn mine_stream<'py>(
    py: Python<'py>,
    read: impl FnOnce() -> PyResult<(EventStream, String)> + Send + 'static,
    json: &str,
    progress: Option<Bound<'py, PyAny>>,
    occurrences: bool,
) -> PyResult<(String, Bound<'py, PyDict>, Option<Bound<'py, PyDict>>)> {
    let (options, config, settings, significance) = resolve(json)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let watch = Arc::new(MineProgress::new(cancel.clone()));
    let (worker_watch, worker_cancel) = (watch.clone(), cancel.clone());
    let device = options.device;
    let work = move || -> PyResult<Mined> {
        let (stream, input) = read()?;
        let cancelled = || worker_cancel.load(AtomicOrdering::Relaxed);
        let err = |e: &dyn std::fmt::Display| mine_err(e, cancelled());
        // `synfire mine`'s job: the counter chosen, mining (`guided` to two nodes only), the
        // test on the same device, its episodes listed in the result.
        let job = MineJob::resolved(&stream, device, config, settings, significance)
            .map_err(|e| err(&e))?
            .cancel_on(worker_cancel.clone());
        let mined = job.run(worker_watch.as_ref()).map_err(|e| err(&e))?;
        let (config, significance) = (job.config(), job.test_config());
        let (result, tested) = (mined.result, mined.significance);
        let report = MineReport::new(&input, &stream, config, &result);
        let list = match (significance, &tested) {
            (Some(sig), Some(t)) => Some(listing(&result, Some(t), sig.significant_only, false)),
            _ => None,
        };
        let mut report = match (&list, &tested) {
            (Some(list), Some(t)) => report.annotated(Some(t), list),
            _ => report,
        };
        let occurrences = if occurrences {
            let listed: Vec<&crate::episode::FrequentEpisode> = match &list {
                Some(list) => result
                    .episodes
                    .iter()
                    .zip(&list.keep)
                    .filter(|(_, keep)| **keep)
                    .map(|(f, _)| f)
                    .collect(),
                None => result.episodes.iter().collect(),
            };
            Some(OccurrenceColumns::of(&stream, &listed, &worker_cancel)?)
        } else {
            None
        };
        let columns = Columns::of(&mut report);
        let doc = serde_json::to_string(&report).map_err(|e| err(&e))?;
        Ok(Mined {
            doc,
            columns,
            occurrences,
            labels: stream.alphabet().labels().to_vec(),
        })
    };
    let mined = interruptible(
        py,
        &cancel,
        |_| match &progress {
            Some(callback) => watch.report(callback),
            None => Ok(()),
        },
        work,
    )?;
    let dict = mined.columns.into_dict(py)?;
    dict.set_item("type_labels", mined.labels)?;
    let occurrences = mined.occurrences.map(|o| o.into_dict(py)).transpose()?;
    Ok((mined.doc, dict, occurrences))
}

/// What [`mine_arrays`] and [`mine_file`] return: the document, the episodes' columns and the
/// occurrences' columns (or None).
type MineOutput<'py> = (String, Bound<'py, PyDict>, Option<Bound<'py, PyDict>>);

/// Mines spikes given as arrays: `times` (seconds, shape `[n]`), `units` (each spike's index
/// into `labels`, shape `[n]`), `labels` (the units' names). Unsorted spikes are sorted (equal
/// times in unit order). Returns the `synfire mine` JSON document without its episodes, the
/// episodes as columns ([`Columns`]) and with `occurrences` their occurrences
/// ([`OccurrenceColumns`], else None). `progress` is called `(level, done, total)` as levels
/// advance; Ctrl-C raises `KeyboardInterrupt` and stops the run.
#[pyfunction]
#[pyo3(signature = (times, units, labels, options_json, progress = None, occurrences = false))]
fn mine_arrays<'py>(
    py: Python<'py>,
    times: PyReadonlyArray1<'_, f64>,
    units: PyReadonlyArray1<'_, u32>,
    labels: Vec<String>,
    options_json: &str,
    progress: Option<Bound<'py, PyAny>>,
    occurrences: bool,
) -> PyResult<MineOutput<'py>> {
    let times = times
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .to_vec();
    let units = units
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    if let Some(bad) = units.iter().find(|&&u| u as usize >= labels.len()) {
        return Err(PyValueError::new_err(format!(
            "spikes: unit index {bad} but only {} unit labels",
            labels.len()
        )));
    }
    let types: Vec<EventType> = units.iter().map(|&u| EventType(u)).collect();
    let alphabet =
        Alphabet::from_labels(labels).map_err(|e| PyValueError::new_err(format!("units: {e}")))?;
    let read = move || {
        EventStream::new(times, types, alphabet, Ordering::SortIfNeeded)
            .map(|s| (s, "<arrays>".to_owned()))
            .map_err(|e| PyValueError::new_err(format!("spikes: {e}")))
    };
    mine_stream(py, read, options_json, progress, occurrences)
}

/// How Python asks a file to be read (`units`, `sample_rate_hz`, `time_column`,
/// `unit_column`, `sort`, `unit_label`, `epochs`, `epochs_table`, `unit_key`), as JSON.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Reader {
    #[serde(default)]
    units: Option<Vec<String>>,
    #[serde(default)]
    sample_rate_hz: Option<f64>,
    #[serde(default)]
    time_column: Option<String>,
    #[serde(default)]
    unit_column: Option<String>,
    #[serde(default)]
    sort: bool,
    #[serde(default)]
    unit_label: Option<String>,
    #[serde(default)]
    epochs: Option<Vec<String>>,
    #[serde(default)]
    epochs_table: Option<String>,
    #[serde(default)]
    unit_key: Option<crate::ingest::openephys::UnitKey>,
}

/// A spike file or folder read as `synfire mine PATH` reads it: `FileNotFoundError` when it
/// does not exist, `SynfireError` (naming the file, dataset or line) when it cannot be read.
fn read_file(path: &str, reader_json: &str) -> PyResult<EventStream> {
    if !Path::new(path).exists() {
        return Err(PyFileNotFoundError::new_err(format!(
            "spike file {path} does not exist"
        )));
    }
    let reader: Reader = serde_json::from_str(reader_json)
        .map_err(|e| PyValueError::new_err(format!("reader options: {e}")))?;
    let phy = crate::ingest::InputFormat::from_path(Path::new(path))
        .is_ok_and(|f| f == crate::ingest::InputFormat::Phy);
    let options = crate::ingest::ReadOptions {
        ordering: if reader.sort {
            Ordering::SortIfNeeded
        } else {
            Ordering::RequireSorted
        },
        columns: crate::ingest::csv::Columns {
            time: reader.time_column,
            unit: reader.unit_column,
        },
        groups: reader.units,
        sample_rate_hz: reader.sample_rate_hz.filter(|_| phy),
        unit_label: reader.unit_label,
        epochs: reader.epochs,
        epochs_table: reader.epochs_table,
        unit_key: reader.unit_key,
    };
    crate::ingest::read_spikes_with(Path::new(path), &options)
        .map_err(|e| SynfireError::new_err(e.to_string()))
}

/// Mines a spike file or folder (NWB units table, CSV, phy/Kilosort, Open Ephys), as
/// `synfire mine PATH`, read with `reader_json` ([`Reader`]) on the mining thread. Returns
/// what [`mine_arrays`] returns.
#[pyfunction]
#[pyo3(signature = (path, options_json, reader_json, progress = None, occurrences = false))]
fn mine_file<'py>(
    py: Python<'py>,
    path: String,
    options_json: &str,
    reader_json: String,
    progress: Option<Bound<'py, PyAny>>,
    occurrences: bool,
) -> PyResult<MineOutput<'py>> {
    let read = move || read_file(&path, &reader_json).map(|s| (s, path));
    mine_stream(py, read, options_json, progress, occurrences)
}

/// Reads a spike file or folder (NWB units table, CSV, phy/Kilosort, Open Ephys) as `synfire
/// mine` reads it, with `reader_json` ([`Reader`]), on a thread of its own (GIL released,
/// Ctrl-C answered): spike times (seconds, `[n]`, in stream order), each spike's unit index
/// (`[n]`) and the units' labels.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn read_spikes<'py>(
    py: Python<'py>,
    path: String,
    reader_json: String,
) -> PyResult<(
    Bound<'py, numpy::PyArray1<f64>>,
    Bound<'py, numpy::PyArray1<u32>>,
    Vec<String>,
)> {
    let cancel = Arc::new(AtomicBool::new(false));
    let stream = interruptible(
        py,
        &cancel,
        |_| Ok(()),
        move || read_file(&path, &reader_json),
    )?;
    let labels = stream.alphabet().labels().to_vec();
    let units: Vec<u32> = stream.types().iter().map(|t| t.0).collect();
    Ok((
        stream.times().to_vec().into_pyarray(py),
        units.into_pyarray(py),
        labels,
    ))
}

/// The exact top-k motifs of a series (`synfire motif`): `x` samples (`[n]`), subsequence
/// length `m`, pairs `j − i > exclusion` (default `ceil(m / 4)`), on `device` (`auto`, `cpu`,
/// `gpu`). Returns `([(i, j, distance)], method, device)`, distances z-normalised Euclidean.
#[pyfunction]
#[pyo3(signature = (x, m, top_k = 1, exclusion = None, device = "auto"))]
#[allow(clippy::type_complexity)]
fn motif(
    py: Python<'_>,
    x: PyReadonlyArray1<'_, f64>,
    m: usize,
    top_k: usize,
    exclusion: Option<usize>,
    device: &str,
) -> PyResult<(Vec<(usize, usize, f64)>, String, String)> {
    let choice: crate::device::DeviceChoice = serde_json::from_value(serde_json::json!(device))
        .map_err(|_| {
            PyValueError::new_err(format!("device: `{device}` is not auto, cpu or gpu"))
        })?;
    let x = x
        .as_slice()
        .map_err(|e| PyValueError::new_err(e.to_string()))?
        .to_vec();
    let mut cfg = crate::motif::MotifConfig::new(m);
    cfg.top_k = top_k;
    if let Some(e) = exclusion {
        cfg.exclusion = e;
    }
    let result = interruptible(
        py,
        &Arc::new(AtomicBool::new(false)),
        |_| Ok(()),
        move || {
            crate::motif::find_motifs(&x, &cfg, choice).map_err(|e| match e {
                crate::motif::MotifError::Device(d) => SynfireError::new_err(d.to_string()),
                other => PyValueError::new_err(other.to_string()),
            })
        },
    )?;
    Ok((
        result
            .motifs
            .iter()
            .map(|mo| (mo.i, mo.j, mo.distance))
            .collect(),
        result.method.as_str().to_owned(),
        result.device,
    ))
}

/// The GPUs this process can use ([`crate::device::probe`], as the GPU tests and `--device
/// auto` find them): one dict per GPU (`ordinal`, `name`, `compute_capability` `(major,
/// minor)`, `multiprocessors`, `total_memory` bytes, `driver_version`). The CUDA driver and
/// NVRTC are loaded at run time, never linked.
///
/// # Errors
/// `SynfireError` saying why none is usable (no driver library, no device, a driver failure).
#[pyfunction]
fn gpus(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let found = py
        .detach(crate::device::probe)
        .map_err(|e| SynfireError::new_err(e.to_string()))?;
    found
        .into_iter()
        .map(|d| {
            let dict = PyDict::new(py);
            dict.set_item("ordinal", d.ordinal)?;
            dict.set_item("name", d.name)?;
            dict.set_item("compute_capability", d.compute_capability)?;
            dict.set_item("multiprocessors", d.multiprocessors)?;
            dict.set_item("total_memory", d.total_memory)?;
            dict.set_item("driver_version", d.driver_version)?;
            Ok(dict)
        })
        .collect()
}

/// The extension module.
#[pymodule]
fn _synfire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gpus, m)?)?;
    m.add_function(wrap_pyfunction!(read_spikes, m)?)?;
    m.add_function(wrap_pyfunction!(motif, m)?)?;
    m.add_function(wrap_pyfunction!(mine_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(mine_file, m)?)?;
    sensors::register(m)?;
    cluster::register(m)?;
    defaults::register(m)?;
    m.add("SynfireError", m.py().get_type::<SynfireError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
