//! The extension's side of `synfire.cluster` (issue 22): a worker's warm [`Engine`] (GPU
//! counters kept between sessions: device threads, CUDA contexts, compiled kernels,
//! calibration) and a [`Session`] (one recording read once, its options resolved) with what a
//! cluster worker runs on it: the whole session ([`Session::run`], exactly what
//! `synfire.mine` computes), or one phase of its significance test over a range of surrogates
//! ([`crate::significance::phases`]: plan, first pass, union, second pass, finish), the plans
//! and parts moving between workers as JSON bytes. Results are written per session, each file
//! through a temporary file in the same folder and a rename, so a reader (or a retried
//! attempt) never sees half a file.
//!
//! Errors are Python exceptions as in the rest of the module: `FileNotFoundError` for a
//! missing session file, `ValueError` for bad options or parts, `synfire.SynfireError` for an
//! unreadable file, a device failure or a file that cannot be written.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::{Columns, SynfireError, read_file, resolve};
use crate::episode::{
    Counter, CpuCounter, GpuSettings, MinerConfig, MiningResult, NoProgress, mine_with,
};
use crate::event::EventStream;
use crate::report::{MineReport, write_json};
use crate::significance::phases::{
    FirstPart, Plan, SecondPart, Tester, Union, WarmCounters, finish,
};
use crate::significance::{SignificanceConfig, SignificanceError, SignificanceResult, listing};

/// A cluster worker's engine: GPU counters kept warm between sessions
/// ([`WarmCounters`]), and the number of sessions it has run. One per actor; its methods run
/// one at a time.
#[pyclass(module = "synfire._synfire")]
pub struct Engine {
    warm: Mutex<WarmCounters>,
    sessions: std::sync::atomic::AtomicU64,
    /// The GPU counters kept, for [`Engine::gpu_counters`] without waiting for a session.
    counters: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl Engine {
    /// A new engine; its GPU counters start on the first session that counts on a GPU.
    #[new]
    fn new() -> Self {
        Self {
            warm: Mutex::new(WarmCounters::new()),
            sessions: std::sync::atomic::AtomicU64::new(0),
            counters: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Sessions this engine has mined (whole runs and recordings of split tests).
    #[getter]
    fn sessions(&self) -> u64 {
        self.sessions.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The GPU counters kept (0: the CPU counts, or no session ran yet); answered at once,
    /// also while a session runs.
    #[getter]
    fn gpu_counters(&self) -> usize {
        self.counters.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// One session: its spikes read once, its options resolved (`synfire mine`'s JSON options
/// and the reader's, as `synfire.mine` passes them), and the recording's mining kept once
/// done.
#[pyclass(module = "synfire._synfire")]
pub struct Session {
    /// The session as named in results (the path or URI as given).
    input: String,
    /// The local file or folder read.
    path: PathBuf,
    stream: EventStream,
    options: crate::significance::MineOptions,
    config: MinerConfig,
    settings: GpuSettings,
    significance: Option<SignificanceConfig>,
    mined: Mutex<Option<MiningResult>>,
}

fn device_err(e: &dyn std::fmt::Display) -> PyErr {
    SynfireError::new_err(e.to_string())
}

/// Errors of a split test: bad plans and parts are `ValueError`, the rest `SynfireError`.
fn split_err(e: SignificanceError) -> PyErr {
    match e {
        SignificanceError::Config(m) => PyValueError::new_err(m),
        other => SynfireError::new_err(other.to_string()),
    }
}

fn text(bytes: &[u8], what: &str) -> PyResult<String> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| PyValueError::new_err(format!("the {what} is not UTF-8 JSON")))
}

impl Session {
    /// The recording's mining result: kept from before, or mined now on `engine`'s counters.
    fn data(&self, engine: &Engine) -> PyResult<MiningResult> {
        if let Some(d) = self.mined.lock().as_ref() {
            return Ok(d.clone());
        }
        let mut warm = engine.warm.lock();
        let gpus = warm
            .load(
                &self.stream,
                &self.config,
                self.options.device,
                &self.settings,
            )
            .map_err(|e| device_err(&e))?;
        engine
            .counters
            .store(gpus.len(), std::sync::atomic::Ordering::Relaxed);
        let cpu;
        let counter: &dyn Counter = match gpus.first() {
            Some(g) => g,
            None => {
                cpu = CpuCounter::new(&self.stream);
                &cpu
            }
        };
        // `guided` mines to two nodes only (`SignificanceConfig::mining_config`).
        let config = self.significance.as_ref().map_or_else(
            || self.config.clone(),
            |sig| sig.mining_config(&self.config),
        );
        let result =
            mine_with(&self.stream, &config, counter, &NoProgress).map_err(|e| device_err(&e))?;
        engine
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.mined.lock() = Some(result.clone());
        Ok(result)
    }

    /// Runs `f` on a [`Tester`] of this session on `engine`'s counters.
    fn with_tester<T>(
        &self,
        engine: &Engine,
        f: impl FnOnce(&Tester<'_>) -> Result<T, SignificanceError>,
    ) -> PyResult<T> {
        let mut warm = engine.warm.lock();
        let gpus = warm
            .load(
                &self.stream,
                &self.config,
                self.options.device,
                &self.settings,
            )
            .map_err(|e| device_err(&e))?;
        engine
            .counters
            .store(gpus.len(), std::sync::atomic::Ordering::Relaxed);
        let tester = Tester::with_gpus(&self.stream, &self.config, gpus);
        f(&tester).map_err(split_err)
    }

    fn sig(&self) -> PyResult<&SignificanceConfig> {
        self.significance.as_ref().ok_or_else(|| {
            PyValueError::new_err(format!(
                "session {}: no `significance` options, so there is nothing to split",
                self.input
            ))
        })
    }

    fn plan_of(&self, bytes: &[u8]) -> PyResult<Plan> {
        Plan::from_json(&text(bytes, "plan")?, &self.stream, &self.config).map_err(split_err)
    }

    fn first_of(&self, bytes: &[u8]) -> PyResult<FirstPart> {
        FirstPart::from_json(&text(bytes, "first-pass part")?, &self.stream, &self.config)
            .map_err(split_err)
    }

    /// The report of `data` with its test, the outputs written, and the document without its
    /// episodes with the episodes as columns (what `synfire.mine` returns).
    fn report(
        &self,
        data: &MiningResult,
        tested: Option<&SignificanceResult>,
        outputs: &Outputs,
    ) -> PyResult<(String, Columns)> {
        let significant_only = self
            .significance
            .as_ref()
            .is_some_and(|s| s.significant_only);
        // `guided`'s tested episodes beyond what mining listed.
        let listed;
        let data = match tested {
            Some(t) if !t.extra_episodes.is_empty() => {
                let mut d = data.clone();
                t.list_in(&mut d);
                listed = d;
                &listed
            }
            _ => data,
        };
        let list = listing(data, tested, tested.is_some() && significant_only, false);
        let report = MineReport::new(&self.input, &self.stream, &self.config, data);
        let mut report = match tested {
            Some(t) => report.annotated(Some(t), &list),
            None => report,
        };
        outputs.write(self, data, tested, &list, &report)?;
        let columns = Columns::of(&mut report);
        let doc = serde_json::to_string(&report).map_err(|e| device_err(&e))?;
        Ok((doc, columns))
    }

    fn to_python<'py>(
        &self,
        py: Python<'py>,
        (doc, columns): (String, Columns),
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        let dict = columns.into_dict(py)?;
        dict.set_item("type_labels", self.stream.alphabet().labels())?;
        Ok((doc, dict))
    }
}

/// Where a session's results go: an NWB file ([`crate::report::nwb::write_results`]: a copy
/// of an NWB input with the `synfire` processing module, or a new file with the units) and the
/// `synfire mine --format json` document (`docs/mine-json.md`), each written to
/// `PATH.partial-PID` and renamed, the JSON last.
struct Outputs {
    nwb: Option<PathBuf>,
    json: Option<PathBuf>,
}

impl Outputs {
    fn write(
        &self,
        session: &Session,
        data: &MiningResult,
        tested: Option<&SignificanceResult>,
        list: &crate::significance::Listing<'_>,
        report: &MineReport<'_>,
    ) -> PyResult<()> {
        let mut done: Vec<(PathBuf, PathBuf)> = Vec::new();
        let result = (|| -> Result<(), String> {
            if let Some(out) = &self.nwb {
                let same = std::fs::canonicalize(out)
                    .ok()
                    .zip(std::fs::canonicalize(&session.path).ok())
                    .is_some_and(|(a, b)| a == b);
                if same {
                    return Err(format!(
                        "{}: is the session's own file; results go into another file",
                        out.display()
                    ));
                }
                let tmp = partial(out)?;
                done.push((tmp.clone(), out.clone()));
                let nwb_input = crate::ingest::InputFormat::from_path(&session.path).ok()
                    == Some(crate::ingest::InputFormat::Nwb);
                crate::report::nwb::write_results(
                    &tmp,
                    nwb_input.then_some(session.path.as_path()),
                    &session.stream,
                    data,
                    tested,
                    list,
                    crate::report::nwb::NwbLayout::default(),
                )
                .map_err(|e| format!("{}: {e}", out.display()))?;
            }
            if let Some(out) = &self.json {
                let tmp = partial(out)?;
                done.push((tmp.clone(), out.clone()));
                let file =
                    std::fs::File::create(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
                let mut w = std::io::BufWriter::new(file);
                write_json(&mut w, report)
                    .and_then(|()| std::io::Write::flush(&mut w))
                    .map_err(|e| format!("{}: {e}", tmp.display()))?;
            }
            for (tmp, out) in &done {
                std::fs::rename(tmp, out)
                    .map_err(|e| format!("renaming {} to {}: {e}", tmp.display(), out.display()))?;
            }
            Ok(())
        })();
        result.map_err(|message| {
            for (tmp, _) in &done {
                let _ = std::fs::remove_file(tmp);
            }
            SynfireError::new_err(format!("writing the results: {message}"))
        })
    }
}

/// The temporary path of `out` for this process (`OUT.partial-PID`), after removing the
/// partial files an earlier attempt at `out` left (a worker killed while writing).
fn partial(out: &Path) -> Result<PathBuf, String> {
    let name = out
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", out.display()))?
        .to_string_lossy()
        .into_owned();
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(format!("{}: the folder does not exist", dir.display()));
    }
    let stale = format!("{name}.partial-");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&stale) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(dir.join(format!("{name}.partial-{}", std::process::id())))
}

#[pymethods]
impl Session {
    /// Reads the session `path` (NWB units table, CSV, phy/Kilosort folder, Open Ephys
    /// binary) with the reader options `reader_json` and resolves the mining options
    /// `options_json` (both as `synfire.mine` passes them); `input` names the session in its
    /// results (default: `path`).
    ///
    /// Raises `FileNotFoundError` (no such path), `synfire.SynfireError` (unreadable, named),
    /// `ValueError` (bad options, each named).
    #[new]
    #[pyo3(signature = (path, options_json, reader_json, input = None))]
    fn new(
        py: Python<'_>,
        path: &str,
        options_json: &str,
        reader_json: &str,
        input: Option<String>,
    ) -> PyResult<Self> {
        let (options, config, settings, significance) = resolve(options_json)?;
        let stream = py.detach(|| read_file(path, reader_json))?;
        Ok(Self {
            input: input.unwrap_or_else(|| path.to_owned()),
            path: PathBuf::from(path),
            stream,
            options,
            config,
            settings,
            significance,
            mined: Mutex::new(None),
        })
    }

    /// The session's name in results (the path or URI as given).
    #[getter]
    fn input(&self) -> &str {
        &self.input
    }

    /// Spikes in the session.
    fn __len__(&self) -> usize {
        self.stream.len()
    }

    /// Whether the options ask for a significance test.
    #[getter]
    fn tests_significance(&self) -> bool {
        self.significance.is_some()
    }

    /// The whole session on `engine`, exactly as `synfire.mine` computes it (mining, then the
    /// significance test over every surrogate if asked), the results written to `nwb_output`
    /// and `json_output` when given. Returns the `synfire mine` JSON document without its
    /// episodes and the episodes as columns (`synfire._synfire.mine_file`'s return).
    ///
    /// Raises `synfire.SynfireError` for a device failure or an output that cannot be written.
    #[pyo3(signature = (engine, nwb_output = None, json_output = None))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
        nwb_output: Option<PathBuf>,
        json_output: Option<PathBuf>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        let outputs = Outputs {
            nwb: nwb_output,
            json: json_output,
        };
        let out = py.detach(|| -> PyResult<(String, Columns)> {
            let data = self.data(engine)?;
            let tested = match &self.significance {
                Some(sig) => Some(self.with_tester(engine, |t| t.run(&data, sig))?),
                None => None,
            };
            self.report(&data, tested.as_ref(), &outputs)
        })?;
        self.to_python(py, out)
    }

    /// The plan of the session's significance test (the recording mined on `engine` if it
    /// was not yet), as JSON bytes, with `S` and the number of passes:
    /// `(plan, n_surrogates, passes)`.
    ///
    /// Raises `ValueError` when the options ask for no test.
    fn plan<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
    ) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let sig = self.sig()?;
        let (json, n, passes) = py.detach(|| -> PyResult<(String, usize, usize)> {
            let data = self.data(engine)?;
            let plan = self.with_tester(engine, |t| t.plan(&data, sig))?;
            let json = plan.to_json(&self.config).map_err(split_err)?;
            Ok((json, plan.n_surrogates(), plan.passes()))
        })?;
        Ok((PyBytes::new(py, json.as_bytes()), n, passes))
    }

    /// The first pass of the test over surrogates `start..end` (JSON bytes).
    ///
    /// Raises `ValueError` for a plan of another session or options, a range outside
    /// `0..S`.
    fn first_pass<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
        plan: &[u8],
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let json = py.detach(|| -> PyResult<String> {
            let plan = self.plan_of(plan)?;
            let part = self.with_tester(engine, |t| t.first_pass(&plan, start..end))?;
            part.to_json(&self.config).map_err(split_err)
        })?;
        Ok(PyBytes::new(py, json.as_bytes()))
    }

    /// `max-t` between the passes: the union of the first passes' `parts` (every range of
    /// `0..S` once) with its counts in the recording (JSON bytes).
    ///
    /// Raises `ValueError` for parts that do not cover `0..S` once or belong to another test.
    fn union<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
        plan: &[u8],
        parts: Vec<Vec<u8>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let json = py.detach(|| -> PyResult<String> {
            let plan = self.plan_of(plan)?;
            let parts = parts
                .iter()
                .map(|p| self.first_of(p))
                .collect::<PyResult<Vec<_>>>()?;
            let union = self.with_tester(engine, |t| t.union(&plan, &parts))?;
            union.to_json(&self.config).map_err(split_err)
        })?;
        Ok(PyBytes::new(py, json.as_bytes()))
    }

    /// `max-t`'s second pass over the surrogates of the first-pass `part` (JSON bytes).
    ///
    /// Raises `ValueError` for a union or part of another test.
    fn second_pass<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
        plan: &[u8],
        union: &[u8],
        part: &[u8],
    ) -> PyResult<Bound<'py, PyBytes>> {
        let json = py.detach(|| -> PyResult<String> {
            let plan = self.plan_of(plan)?;
            let union = Union::from_json(&text(union, "union")?, &self.stream, &self.config)
                .map_err(split_err)?;
            let part = self.first_of(part)?;
            let second = self.with_tester(engine, |t| t.second_pass(&plan, &union, &part))?;
            second.to_json().map_err(split_err)
        })?;
        Ok(PyBytes::new(py, json.as_bytes()))
    }

    /// Combines the parts into the test and finishes the session as [`Session::run`] does
    /// (the recording's mining kept or redone on `engine`; the plan must be the one this
    /// recording and these options give), writing the outputs when given. Returns what
    /// [`Session::run`] returns.
    ///
    /// Raises `ValueError` for parts that do not cover `0..S` once, belong to another test,
    /// or a plan that this recording does not give (the file changed between the phases).
    #[pyo3(signature = (engine, plan, first, union = None, second = Vec::new(), nwb_output = None, json_output = None))]
    #[allow(clippy::too_many_arguments)]
    fn finish<'py>(
        &self,
        py: Python<'py>,
        engine: &Engine,
        plan: &[u8],
        first: Vec<Vec<u8>>,
        union: Option<Vec<u8>>,
        second: Vec<Vec<u8>>,
        nwb_output: Option<PathBuf>,
        json_output: Option<PathBuf>,
    ) -> PyResult<(String, Bound<'py, PyDict>)> {
        let sig = self.sig()?;
        let outputs = Outputs {
            nwb: nwb_output,
            json: json_output,
        };
        let out = py.detach(|| -> PyResult<(String, Columns)> {
            let plan = self.plan_of(plan)?;
            let data = self.data(engine)?;
            let own = self.with_tester(engine, |t| t.plan(&data, sig))?;
            if own != plan {
                return Err(PyValueError::new_err(format!(
                    "session {}: the plan is not the one this recording and these options give (did the file change between the phases?)",
                    self.input
                )));
            }
            let first = first
                .iter()
                .map(|p| self.first_of(p))
                .collect::<PyResult<Vec<_>>>()?;
            let union = union
                .map(|u| {
                    Union::from_json(&text(&u, "union")?, &self.stream, &self.config)
                        .map_err(split_err)
                })
                .transpose()?;
            let second = second
                .iter()
                .map(|p| SecondPart::from_json(&text(p, "second-pass part")?).map_err(split_err))
                .collect::<PyResult<Vec<_>>>()?;
            let tested = finish(&plan, &first, union.as_ref().map(|u| (u, second.as_slice())))
                .map_err(split_err)?;
            self.report(&data, Some(&tested), &outputs)
        })?;
        self.to_python(py, out)
    }
}

/// Checks mining options (JSON, as `synfire.mine` passes them) without any spikes: every
/// invalid option is named in one `ValueError`, as a session would raise it.
#[pyfunction]
fn check_options(options_json: &str) -> PyResult<()> {
    resolve(options_json).map(|_| ())
}

/// Registers the classes and functions.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_options, m)?)?;
    m.add_class::<Engine>()?;
    m.add_class::<Session>()?;
    Ok(())
}
