//! Sinks: where results go. JSON lines (a file, or standard output) and ZeroMQ PUB (two
//! frames: the stage name as topic, then the JSON object), so a dashboard can subscribe to the
//! stages it shows; from code, any [`LineWriter`] ([`Sink::custom`]); and TTL pulses in the
//! Open Ephys GUI per occurrence of a detect stage ([`crate::live::ttl`], on its own thread).
//!
//! Each sink records the **result latency** of every window line it writes: the wall-clock
//! seconds from the window's close to the line being written and flushed
//! ([`crate::live::telemetry::names::RESULT_LATENCY`], per stage; [`ResultLatency`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use metrics::{Counter, Histogram};
use serde::Deserialize;

use crate::live::config::section::{ConfigError, SocketMode, typed};
use crate::live::stage::Output;
pub use crate::live::telemetry::ResultLatency;
use crate::live::ttl::{TtlConfig, TtlSink};

/// `[sinks.<name>]` with `kind = "jsonl"`.
#[derive(Clone, Debug, Deserialize)]
pub struct JsonlConfig {
    /// File to append to, or `-` for standard output (default).
    pub path: Option<PathBuf>,
    /// Stages whose results it writes (default: all).
    pub stages: Option<Vec<String>>,
}

/// `[sinks.<name>]` with `kind = "zmq_pub"`.
#[derive(Clone, Debug, Deserialize)]
pub struct ZmqPubConfig {
    /// Endpoint, e.g. `tcp://127.0.0.1:5560`.
    pub endpoint: String,
    /// `bind` (default) or `connect`.
    pub mode: Option<SocketMode>,
    /// Stages whose results it publishes (default: all).
    pub stages: Option<Vec<String>>,
}

/// A sink section: one variant per kind. The kinds are this enum and [`SinkConfig::KINDS`].
#[derive(Clone, Debug)]
pub enum SinkConfig {
    /// JSON lines.
    Jsonl(JsonlConfig),
    /// ZeroMQ PUB, topic = stage name.
    ZmqPub(ZmqPubConfig),
    /// A TTL pulse in the Open Ephys GUI per occurrence of detect stages
    /// ([`crate::live::ttl`]).
    OpenephysTtl(TtlConfig),
}

/// An opened sink: one that writes result lines (on the sink thread), or a TTL sink on its
/// own thread that detect stages signal directly.
#[derive(Debug)]
pub enum Opened {
    /// Writes lines.
    Lines(Sink),
    /// Sends TTL requests.
    Ttl(TtlSink),
}

impl SinkConfig {
    /// The kind names, as written in `kind = "…"`.
    pub const KINDS: &'static [&'static str] = &["jsonl", "zmq_pub", "openephys_ttl"];

    /// Parses a section of kind `kind` (one of [`Self::KINDS`]; phase 1, errors into
    /// `errors`).
    #[must_use]
    pub fn parse(
        kind: &str,
        options: toml::Value,
        prefix: &str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<Self> {
        match kind {
            "jsonl" => typed(options, prefix, errors).map(Self::Jsonl),
            "zmq_pub" => typed(options, prefix, errors).map(Self::ZmqPub),
            "openephys_ttl" => typed(options, prefix, errors).map(Self::OpenephysTtl),
            other => {
                errors.push(ConfigError::new(
                    format!("{prefix}.kind"),
                    format!(
                        "unknown kind \"{other}\"; expected one of {:?}",
                        Self::KINDS
                    ),
                ));
                None
            }
        }
    }

    /// The stages it takes (None: all).
    #[must_use]
    pub fn stages(&self) -> Option<&[String]> {
        match self {
            Self::Jsonl(j) => j.stages.as_deref(),
            Self::ZmqPub(z) => z.stages.as_deref(),
            Self::OpenephysTtl(t) => Some(&t.stages),
        }
    }

    /// Phase-2 checks of the sink's own options, fields relative to the section.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        match self {
            Self::ZmqPub(z) => {
                if !z.endpoint.contains("://") {
                    errors.push(ConfigError::new(
                        "endpoint",
                        format!(
                            "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5560`",
                            z.endpoint
                        ),
                    ));
                }
            }
            Self::Jsonl(JsonlConfig {
                path: Some(path), ..
            }) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                if path.as_os_str() != "-" && parent.is_some_and(|d| !d.is_dir()) {
                    errors.push(ConfigError::new(
                        "path",
                        format!("directory of {} does not exist", path.display()),
                    ));
                }
            }
            Self::Jsonl(_) => {}
            Self::OpenephysTtl(t) => errors.extend(t.validate()),
        }
        errors
    }

    /// Opens the sink named `name` (file opened, socket bound or connected; a TTL sink's
    /// thread started, its socket connecting on the first request).
    ///
    /// # Errors
    /// [`SinkError`] naming the sink and the file or endpoint.
    pub fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Opened, SinkError> {
        match self {
            Self::Jsonl(j) => {
                Sink::jsonl(name, j.path.as_deref(), j.stages.clone()).map(Opened::Lines)
            }
            Self::ZmqPub(z) => Sink::zmq_pub(
                name,
                ctx,
                &z.endpoint,
                z.mode != Some(SocketMode::Connect),
                z.stages.clone(),
            )
            .map(Opened::Lines),
            Self::OpenephysTtl(t) => {
                TtlSink::spawn(name, t, ctx)
                    .map(Opened::Ttl)
                    .map_err(|e| SinkError {
                        sink: name.into(),
                        message: format!("cannot start its thread: {e}"),
                    })
            }
        }
    }
}

/// Where a sink made from code ([`Sink::custom`]) writes its lines: an application's own
/// consumer, or a test's probe.
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

/// Where a sink writes.
enum Target {
    Stdout(io::Stdout),
    File(BufWriter<File>),
    Pub(zmq::Socket),
    Custom(Box<dyn LineWriter>),
}

/// One stage's latencies at one sink: the histogram and the exact collector.
struct StageLatency {
    histogram: Histogram,
    measured: ResultLatency,
}

/// One sink: its target, the stages it takes, its results counter and result latencies.
pub struct Sink {
    name: String,
    target: Target,
    stages: Option<Vec<String>>,
    written: Counter,
    count: u64,
    latency: HashMap<Arc<str>, StageLatency>,
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
    /// A JSON-lines sink appending to `path`, or writing to standard output for `None` / `-`.
    ///
    /// # Errors
    /// [`SinkError`] when the file cannot be opened.
    pub fn jsonl(
        name: &str,
        path: Option<&Path>,
        stages: Option<Vec<String>>,
    ) -> Result<Self, SinkError> {
        let target = match path.filter(|p| p.as_os_str() != "-") {
            None => Target::Stdout(io::stdout()),
            Some(p) => Target::File(BufWriter::new(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| SinkError {
                        sink: name.into(),
                        message: format!("cannot open {}: {e}", p.display()),
                    })?,
            )),
        };
        Ok(Self::with(name, target, stages))
    }

    /// A ZeroMQ PUB sink on `endpoint` (bound, or connected when `bind` is false).
    ///
    /// # Errors
    /// [`SinkError`] naming the endpoint.
    pub fn zmq_pub(
        name: &str,
        ctx: &zmq::Context,
        endpoint: &str,
        bind: bool,
        stages: Option<Vec<String>>,
    ) -> Result<Self, SinkError> {
        let err = |m: String| SinkError {
            sink: name.into(),
            message: format!("endpoint `{endpoint}`: {m}"),
        };
        let s = ctx
            .socket(zmq::PUB)
            .map_err(|e| err(format!("cannot create a PUB socket: {e}")))?;
        s.set_linger(1000)
            .map_err(|e| err(format!("cannot set options: {e}")))?;
        if bind {
            s.bind(endpoint)
                .map_err(|e| err(format!("cannot bind: {e}")))?;
        } else {
            s.connect(endpoint)
                .map_err(|e| err(format!("cannot connect: {e}")))?;
        }
        Ok(Self::with(name, Target::Pub(s), stages))
    }

    /// A sink named `name` writing through `writer` (results of `stages`, or of every stage
    /// for `None`): for an application that takes lines in process, given to
    /// [`crate::live::run`] in [`crate::live::RunOptions::sinks`]. It counts results and
    /// records result latencies like the sinks of a pipeline file.
    #[must_use]
    pub fn custom(name: &str, stages: Option<Vec<String>>, writer: Box<dyn LineWriter>) -> Self {
        Self::with(name, Target::Custom(writer), stages)
    }

    fn with(name: &str, target: Target, stages: Option<Vec<String>>) -> Self {
        Self {
            name: name.into(),
            target,
            stages,
            written: crate::live::telemetry::results_out(name),
            count: 0,
            latency: HashMap::new(),
        }
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
        match &mut self.target {
            Target::Stdout(s) => {
                let mut s = s.lock();
                s.write_all(out.json.as_bytes())?;
                s.write_all(b"\n")?;
                s.flush()?;
            }
            Target::File(f) => {
                f.write_all(out.json.as_bytes())?;
                f.write_all(b"\n")?;
                f.flush()?;
            }
            Target::Pub(s) => s
                .send_multipart([out.stage.as_bytes(), out.json.as_bytes()], 0)
                .map_err(io::Error::other)?,
            Target::Custom(w) => {
                w.write_line(&out.stage, &out.json)?;
                w.flush()?;
            }
        }
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
        match &mut self.target {
            Target::Stdout(s) => s.flush(),
            Target::File(f) => f.flush(),
            Target::Pub(_) => Ok(()),
            Target::Custom(w) => w.flush(),
        }
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
