//! Sinks: where results go. One kind per file beside its configuration ([`SinkConfig`]: the
//! options of its `[sinks.<name>]` section, their checks, and how it opens): JSON lines to a
//! file or standard output ([`jsonl`]), ZeroMQ PUB (two frames: the stage name as topic, then
//! the JSON object, so a dashboard can subscribe to the stages it shows; [`zmq_pub`]), and TTL
//! pulses in the Open Ephys GUI per occurrence of a detect stage ([`openephys_ttl`], on its own
//! thread, [`crate::live::ttl`]); from code, any [`LineWriter`] ([`Sink::custom`]).
//! [`kinds::KINDS`] is the one table the loader reads: a new kind is one file here and one row
//! there (`docs/adding-a-stage.md`).
//!
//! An opened sink ([`Opened`]) is what its kind decides: a [`Sink`] that writes result lines on
//! the pipeline's sink thread, or a [`SignalSink`] running on its own thread that detect stages
//! signal directly, never waiting.
//!
//! Each line sink records the **result latency** of every window line it writes: the
//! wall-clock seconds from the window's close to the line being written and flushed
//! ([`crate::live::telemetry::names::RESULT_LATENCY`], per stage; [`ResultLatency`]).
//!
//! # When a write fails
//! A line is written whole or not at all (`LineFile`: a failed append is cut back to the
//! file's length before it, so a full disk never leaves half a JSON line or CSV row). What
//! happens next is the sink's `on_error` ([`OnError`], one option of every file sink):
//! `"stop"` (default) stops the run as a signal would, every result the sink then receives is
//! counted lost, and the run ends with [`crate::live::LiveError::SinkFailed`] naming the sink,
//! its first error and the results lost (`synfire run` exits 1); `"retry"` keeps the results
//! not written (up to [`RETRY_BACKLOG`] lines, the oldest counted lost beyond) and tries them
//! again before each new result (at most every [`RETRY_EVERY`]) and at the end; the run goes
//! on, and whatever is still not written at the end is counted lost and logged.

pub mod csv;
pub mod jsonl;
pub mod kinds;
pub mod openephys_ttl;
pub mod zmq_pub;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{Counter, Histogram};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::live::config::kinds::{Erased, Family, Kind, KindConfig, Spec};
use crate::live::config::section::ConfigError;
use crate::live::stage::Output;
pub use crate::live::telemetry::ResultLatency;
use crate::live::ttl::{TtlSender, TtlSummary};

/// The options of one sink kind: its `[sinks.<name>]` table less `kind`. Defaults live in
/// the type.
pub trait SinkConfig: DeserializeOwned + std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name, as written in `kind = "…"`.
    const KIND: &'static str;

    /// `Some(why)` for a kind that takes detect stages only (its `stages` must name detect
    /// stages; the loader's error says `why`); `None` (default) for a kind that takes any
    /// stage's lines.
    const ONLY_DETECT_STAGES: Option<&'static str> = None;

    /// The stages it takes (`None`: all).
    fn stages(&self) -> Option<&[String]>;

    /// Phase 2 of validation: every problem found, fields relative to the section.
    fn validate(&self) -> Vec<ConfigError>;

    /// Opens the sink named `name` (file opened, socket bound or connected, a side thread
    /// started), on the thread that builds the pipeline.
    ///
    /// # Errors
    /// [`SinkError`] naming the sink and the file or endpoint.
    fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError>;
}

/// The sink family of the kinds table ([`kinds::KINDS`]).
#[derive(Debug)]
pub struct Sinks;

/// What a sink kind's row says besides its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkRow {
    /// [`SinkConfig::ONLY_DETECT_STAGES`].
    pub only_detect_stages: Option<&'static str>,
}

impl Family for Sinks {
    type Options = dyn AnySinkConfig;
    type Row = SinkRow;
}

impl<T: SinkConfig> KindConfig<Sinks> for T {
    const NAME: &'static str = T::KIND;
    const ROW: SinkRow = SinkRow {
        only_detect_stages: T::ONLY_DETECT_STAGES,
    };
    fn erase(self) -> Box<dyn AnySinkConfig> {
        Box::new(self)
    }
}

/// A sink kind's options with the type erased, as a [`SinkSpec`] holds them (every
/// [`SinkConfig`] is one).
pub trait AnySinkConfig: Erased {
    /// [`SinkConfig::stages`].
    fn stages(&self) -> Option<&[String]>;
    /// [`SinkConfig::validate`].
    fn validate(&self) -> Vec<ConfigError>;
    /// [`SinkConfig::open`].
    ///
    /// # Errors
    /// [`SinkError`] naming the sink and the file or endpoint.
    fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError>;
}

impl<T: SinkConfig> AnySinkConfig for T {
    fn stages(&self) -> Option<&[String]> {
        SinkConfig::stages(self)
    }
    fn validate(&self) -> Vec<ConfigError> {
        SinkConfig::validate(self)
    }
    fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError> {
        SinkConfig::open(self, name, ctx)
    }
}

/// One row of [`kinds::KINDS`]: a sink kind's name, [`SinkRow`], and how its section is
/// parsed.
pub type SinkKind = Kind<Sinks>;

/// A parsed sink section: its kind and typed options ([`SinkSpec::options`] /
/// [`SinkSpec::options_mut`] give them back as the kind's type, e.g.
/// [`jsonl::JsonlConfig`]).
pub type SinkSpec = Spec<Sinks>;

impl SinkSpec {
    /// The stages it takes (`None`: all).
    #[must_use]
    pub fn stages(&self) -> Option<&[String]> {
        self.erased().stages()
    }

    /// Phase-2 checks of the sink's own options, fields relative to the section.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        self.erased().validate()
    }

    /// Opens the sink named `name`.
    ///
    /// # Errors
    /// [`SinkError`] naming the sink and the file or endpoint.
    pub fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError> {
        self.erased().open(name, ctx)
    }
}

/// An opened sink, as its kind decides: one that writes result lines (on the sink thread),
/// or one on its own thread that detect stages signal directly.
#[derive(Debug)]
pub enum Opened {
    /// Writes lines.
    Lines(Sink),
    /// Takes occurrence signals from the detect stages it names, on its own thread.
    Signals(Box<dyn SignalSink>),
}

/// A sink on its own thread that detect stages signal per occurrence, never waiting (the
/// `openephys_ttl` kind: [`crate::live::ttl::TtlSink`]).
pub trait SignalSink: Send + std::fmt::Debug {
    /// A handle for one detect stage (enqueues, never blocks).
    fn sender(&self) -> TtlSender;

    /// Waits for the sink to finish (after every handle is dropped) and returns its summary
    /// ([`crate::live::RunSummary::ttl`]).
    fn join(self: Box<Self>) -> TtlSummary;
}

/// The file a file sink (`jsonl`, `csv`) writes: `None` for standard output (`path` absent or
/// `-`).
#[must_use]
pub(crate) fn file_path(path: Option<&Path>) -> Option<&Path> {
    path.filter(|p| p.as_os_str() != "-")
}

/// Phase-2 check of a file sink's `path`: its folder exists.
#[must_use]
pub(crate) fn check_file_path(path: Option<&Path>) -> Vec<ConfigError> {
    let mut errors = Vec::new();
    if let Some(path) = file_path(path) {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|d| !d.is_dir()) {
            errors.push(ConfigError::new(
                "path",
                format!("directory of {} does not exist", path.display()),
            ));
        }
    }
    errors
}

/// Opens `path` for sink `name` to append to (created when absent).
///
/// # Errors
/// [`SinkError`] naming the file.
pub(crate) fn append_to(name: &str, path: &Path) -> Result<File, SinkError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| SinkError {
            sink: name.into(),
            message: format!("cannot open {}: {e}", path.display()),
        })
}

/// A file written one whole line at a time: each line goes to the file in one `write_all` of
/// its bytes (newline included), and a write that fails part way (a full disk) is cut back
/// to the file's length before it, so the file never ends in half a line.
#[derive(Debug)]
pub(crate) struct LineFile {
    file: File,
}

impl LineFile {
    /// Wraps `file` (opened to append, [`append_to`]).
    #[must_use]
    pub(crate) fn new(file: File) -> Self {
        Self { file }
    }

    /// Appends `line` (its bytes, newline included) whole, or nothing.
    ///
    /// # Errors
    /// The write's error (the file is then as it was before, when it is a regular file that
    /// can be cut back; a device like `/dev/full` keeps nothing anyway).
    pub(crate) fn append(&mut self, line: &[u8]) -> io::Result<()> {
        let before = self.file.metadata().map(|m| m.len()).ok();
        match self.file.write_all(line) {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Some(len) = before
                    && self
                        .file
                        .metadata()
                        .is_ok_and(|m| m.is_file() && m.len() > len)
                {
                    let _ = self.file.set_len(len);
                }
                Err(e)
            }
        }
    }
}

/// What a file sink does when a write fails: its `on_error` option (`jsonl`, `csv`; default
/// `"stop"`). See the module's "When a write fails".
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// Stop the run; it ends with [`crate::live::LiveError::SinkFailed`] (exit status 1).
    #[default]
    Stop,
    /// Keep the results not written (bounded, [`RETRY_BACKLOG`]) and try them again; the run
    /// goes on.
    Retry,
}

/// Results a sink with `on_error = "retry"` keeps while its writes fail; beyond, the oldest
/// is counted lost.
pub const RETRY_BACKLOG: usize = 65_536;

/// The shortest wait between two retries of a failing sink (`on_error = "retry"`).
pub const RETRY_EVERY: Duration = Duration::from_millis(200);

/// What [`Sink::offer`] did with a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    /// Written (with any results kept from earlier failures).
    Written,
    /// Not written yet: kept to retry (`on_error = "retry"`).
    Kept,
    /// Lost (counted): this write failed and the sink stops the run (`on_error = "stop"`);
    /// the sink thread then sets the stop flag.
    Failed,
    /// Lost (counted), the sink having failed before.
    Lost,
}

/// Where a line sink ([`Sink::custom`]) writes its lines: a kind's file or socket, an
/// application's own consumer, or a test's probe.
pub trait LineWriter: Send {
    /// Writes one result line of stage `stage`: `json` is one JSON object, no trailing
    /// newline.
    ///
    /// # Errors
    /// Whatever the writer fails with; the pipeline logs it and goes on.
    fn write_line(&mut self, stage: &str, json: &str) -> io::Result<()>;

    /// Flushes what was written; called after every line (as the JSON-lines sinks flush per
    /// line) and at the end. Default: nothing to flush.
    ///
    /// # Errors
    /// Whatever the writer fails with.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One stage's latencies at one sink: the histogram and the exact collector.
struct StageLatency {
    histogram: Histogram,
    measured: ResultLatency,
}

/// One sink: its target, the stages it takes, its results counter and result latencies.
pub struct Sink {
    name: String,
    target: Box<dyn LineWriter>,
    stages: Option<Vec<String>>,
    written: Counter,
    count: u64,
    latency: HashMap<Arc<str>, StageLatency>,
    on_error: OnError,
    /// What failed and what was lost (boxed: rarely touched).
    f: Box<Failures>,
}

/// A sink's failures: its first error, the results lost and those kept to retry.
struct Failures {
    /// The first write error, once the sink failed.
    error: Option<String>,
    /// Results not written and never to be (counted).
    lost: u64,
    lost_metric: Counter,
    /// Results kept to retry (`on_error = "retry"`), oldest first.
    backlog: VecDeque<Output>,
    last_try: Option<Instant>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Errors opening a sink.
#[derive(Debug, thiserror::Error)]
#[error("sink `{sink}`: {message}")]
pub struct SinkError {
    /// The sink.
    pub sink: String,
    /// What failed.
    pub message: String,
}

impl Sink {
    /// A sink named `name` writing through `writer` (results of `stages`, or of every stage
    /// for `None`). Every line sink is one: the kinds of a pipeline file build theirs here
    /// ([`jsonl`], [`zmq_pub`]), and an application that takes lines in process gives its
    /// own to [`crate::live::run`] in [`crate::live::RunOptions::sinks`]. It counts results
    /// and records result latencies.
    #[must_use]
    pub fn custom(name: &str, stages: Option<Vec<String>>, writer: Box<dyn LineWriter>) -> Self {
        Self {
            name: name.into(),
            target: writer,
            stages,
            written: crate::live::telemetry::results_out(name),
            count: 0,
            latency: HashMap::new(),
            on_error: OnError::Stop,
            f: Box::new(Failures {
                error: None,
                lost: 0,
                lost_metric: crate::live::telemetry::results_lost(name),
                backlog: VecDeque::new(),
                last_try: None,
            }),
        }
    }

    /// The same sink with failure policy `on_error` (default [`OnError::Stop`]).
    #[must_use]
    pub fn on_error(mut self, on_error: OnError) -> Self {
        self.on_error = on_error;
        self
    }

    /// Writes `out` under the sink's failure policy ([`OnError`]; the module's "When a write
    /// fails"): written, kept to retry, or counted lost. The sink thread calls this; on
    /// [`Offered::Failed`] it stops the run.
    pub fn offer(&mut self, out: &Output) -> Offered {
        if self.on_error == OnError::Stop && self.f.error.is_some() {
            self.lose(1);
            return Offered::Lost;
        }
        if !self.f.backlog.is_empty() {
            let due = self.f.last_try.is_none_or(|t| t.elapsed() >= RETRY_EVERY);
            if due && self.retry() {
                tracing::info!(sink = %self.name, "Sink writes again; the results kept were written.");
            }
            if !self.f.backlog.is_empty() {
                self.keep(out.clone());
                return Offered::Kept;
            }
        }
        match self.write(out) {
            Ok(()) => Offered::Written,
            Err(e) => {
                let first = self.f.error.is_none();
                if first {
                    self.f.error = Some(e.to_string());
                }
                match self.on_error {
                    OnError::Stop => {
                        self.lose(1);
                        tracing::error!(sink = %self.name, error = %e, "Sink write failed; stopping the run (on_error = \"stop\"); results it receives from now on are counted lost.");
                        Offered::Failed
                    }
                    OnError::Retry => {
                        tracing::warn!(sink = %self.name, error = %e, "Sink write failed; keeping its results to retry (on_error = \"retry\").");
                        self.f.last_try = Some(Instant::now());
                        self.keep(out.clone());
                        Offered::Kept
                    }
                }
            }
        }
    }

    /// Tries the results kept, oldest first; true when none is left.
    fn retry(&mut self) -> bool {
        self.f.last_try = Some(Instant::now());
        while let Some(out) = self.f.backlog.pop_front() {
            if self.write(&out).is_err() {
                self.f.backlog.push_front(out);
                return false;
            }
        }
        true
    }

    fn keep(&mut self, out: Output) {
        if self.f.backlog.len() >= RETRY_BACKLOG {
            self.f.backlog.pop_front();
            self.lose(1);
        }
        self.f.backlog.push_back(out);
    }

    fn lose(&mut self, n: u64) {
        self.f.lost += n;
        self.f.lost_metric.increment(n);
    }

    /// At the end of the run: one last try of the results kept (`on_error = "retry"`), the
    /// rest counted lost; then flushes.
    ///
    /// # Errors
    /// The flush's error.
    pub fn finish(&mut self) -> io::Result<()> {
        if !self.f.backlog.is_empty() && !self.retry() {
            let n = self.f.backlog.len() as u64;
            self.f.backlog.clear();
            self.lose(n);
            tracing::error!(sink = %self.name, lost = n, "Sink still failing at the end; the results kept are lost.");
        }
        self.target.flush()
    }

    /// Results this sink will never write (counted: failed writes, results received after
    /// it failed, results kept to retry beyond [`RETRY_BACKLOG`] or still not written at the
    /// end).
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.f.lost
    }

    /// The sink's first write error, if a write failed.
    #[must_use]
    pub fn error(&self) -> Option<&str> {
        self.f.error.as_deref()
    }

    /// The sink's failure policy.
    #[must_use]
    pub fn failure_policy(&self) -> OnError {
        self.on_error
    }

    /// Whether this sink takes results of `stage`.
    #[must_use]
    pub fn takes(&self, stage: &str) -> bool {
        self.stages
            .as_ref()
            .is_none_or(|s| s.iter().any(|x| x == stage))
    }

    /// Writes one result (a line, flushed; or one PUB message), then records its result
    /// latency: the wall-clock seconds from `out.closed_at` to now, in
    /// [`crate::live::telemetry::names::RESULT_LATENCY`] (labels `stage`, `sink`) and in
    /// [`Self::result_latency`]. A preview's result (`out.preview`) is written but not
    /// measured; a failed write is not measured.
    ///
    /// # Errors
    /// I/O or socket errors.
    pub fn write(&mut self, out: &Output) -> io::Result<()> {
        self.target.write_line(&out.stage, &out.json)?;
        self.target.flush()?;
        let written_at = Instant::now();
        self.count += 1;
        self.written.increment(1);
        if !out.preview && out.complete {
            let seconds = written_at
                .saturating_duration_since(out.closed_at)
                .as_secs_f64();
            self.record_latency(&out.stage, seconds);
        } else if !out.preview {
            self.stage_latency(&out.stage).measured.incomplete += 1;
        }
        Ok(())
    }

    fn stage_latency(&mut self, stage: &Arc<str>) -> &mut StageLatency {
        let sink = &self.name;
        self.latency
            .entry(stage.clone())
            .or_insert_with(|| StageLatency {
                histogram: crate::live::telemetry::result_latency(stage, sink),
                measured: ResultLatency::default(),
            })
    }

    fn record_latency(&mut self, stage: &Arc<str>, seconds: f64) {
        let entry = self.stage_latency(stage);
        entry.histogram.record(seconds);
        entry.measured.seconds.push(seconds);
    }

    /// The result latencies measured so far for stage `stage` (`None`: no line of it
    /// written).
    #[must_use]
    pub fn result_latency(&self, stage: &str) -> Option<&ResultLatency> {
        self.latency.get(stage).map(|l| &l.measured)
    }

    /// Takes the result latencies measured so far, per stage name, leaving none.
    pub fn take_result_latencies(&mut self) -> BTreeMap<String, ResultLatency> {
        self.latency
            .drain()
            .map(|(stage, l)| (stage.to_string(), l.measured))
            .collect()
    }

    /// Flushes buffered output.
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&mut self) -> io::Result<()> {
        self.target.flush()
    }

    /// The sink's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Results written so far.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::*;

    /// Records each line with the instant its `write_line` finished.
    struct Probe(Arc<Mutex<Vec<(String, Instant)>>>);

    impl LineWriter for Probe {
        fn write_line(&mut self, _stage: &str, json: &str) -> io::Result<()> {
            self.0
                .lock()
                .unwrap()
                .push((json.to_owned(), Instant::now()));
            Ok(())
        }
    }

    fn output(stage: &str, json: &str, closed_at: Instant, preview: bool) -> Output {
        Output {
            stage: Arc::from(stage),
            json: json.to_owned(),
            closed_at,
            preview,
            complete: true,
            published_at: None,
            value: None,
        }
    }

    #[test]
    fn a_line_records_its_latency_from_the_close_and_a_preview_none() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut sink = Sink::custom("probe", None, Box::new(Probe(lines.clone())));
        let closed = Instant::now()
            .checked_sub(Duration::from_millis(50))
            .unwrap_or_else(Instant::now);
        sink.write(&output("a", "{\"w\":0}", closed, false))
            .unwrap();
        sink.write(&output("a", "{\"w\":1}", Instant::now(), true))
            .unwrap();
        sink.write(&output("b", "{\"w\":2}", closed, false))
            .unwrap();
        let after = Instant::now();
        // An incomplete window (the end of the input) is written and counted, not measured.
        let mut incomplete = output("b", "{\"w\":3}", closed, false);
        incomplete.complete = false;
        sink.write(&incomplete).unwrap();
        // Every line is written, previews included; only the complete windows are measured.
        assert_eq!(sink.count(), 4);
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 4);
        let a = sink.result_latency("a").unwrap().seconds.clone();
        assert_eq!(a.len(), 1, "the preview is not a window latency");
        // Between the probe's own write instant and the end of `write`.
        let probe = lines[0].1.duration_since(closed).as_secs_f64();
        assert!(a[0] >= probe, "{} < {probe}", a[0]);
        assert!(a[0] <= after.duration_since(closed).as_secs_f64());
        assert!(a[0] >= 0.05);
        assert_eq!(sink.result_latency("b").unwrap().windows(), 1);
        assert_eq!(sink.result_latency("b").unwrap().incomplete, 1);
        assert_eq!(sink.result_latency("a").unwrap().incomplete, 0);
        let taken = sink.take_result_latencies();
        assert_eq!(taken.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(taken["a"].seconds, a);
        assert!(sink.result_latency("a").is_none());
    }

    #[test]
    fn quantiles_are_nearest_ranks_of_every_measurement() {
        let l = ResultLatency {
            seconds: vec![0.5, 0.1, 0.3, 0.2, 0.4],
            incomplete: 0,
        };
        assert_eq!(l.windows(), 5);
        assert_eq!(l.p50(), Some(0.3));
        assert_eq!(l.p99(), Some(0.5));
        assert_eq!(l.max(), Some(0.5));
        assert_eq!(l.quantile(0.0), Some(0.1));
        assert_eq!(l.quantile(0.2), Some(0.1));
        assert_eq!(l.quantile(0.21), Some(0.2));
        assert_eq!(l.quantile(1.0), Some(0.5));
        assert_eq!(l.quantile(7.0), Some(0.5));
        assert_eq!(l.quantile(-1.0), Some(0.1));
        assert_eq!(l.quantile(f64::NAN), Some(0.1));
        let hundred = ResultLatency {
            seconds: (1..=100).rev().map(f64::from).collect(),
            incomplete: 0,
        };
        assert_eq!(hundred.p50(), Some(50.0));
        assert_eq!(hundred.p99(), Some(99.0));
        let empty = ResultLatency::default();
        assert_eq!((empty.p50(), empty.p99(), empty.max()), (None, None, None));
    }
}
