//! Sinks: where window results go. JSON lines (a file, or standard output) and ZeroMQ PUB
//! (two frames: the stage name as topic, then the JSON object), so a dashboard can subscribe
//! to the stages it shows.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use metrics::Counter;
use serde::Deserialize;

use crate::live::config::section::{ConfigError, SocketMode, typed};
use crate::live::stage::Output;

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
}

impl SinkConfig {
    /// The kind names, as written in `kind = "…"`.
    pub const KINDS: &'static [&'static str] = &["jsonl", "zmq_pub"];

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
        }
        errors
    }

    /// Opens the sink named `name` (file opened, socket bound or connected).
    ///
    /// # Errors
    /// [`SinkError`] naming the sink and the file or endpoint.
    pub fn open(&self, name: &str, ctx: &zmq::Context) -> Result<Sink, SinkError> {
        match self {
            Self::Jsonl(j) => Sink::jsonl(name, j.path.as_deref(), j.stages.clone()),
            Self::ZmqPub(z) => Sink::zmq_pub(
                name,
                ctx,
                &z.endpoint,
                z.mode != Some(SocketMode::Connect),
                z.stages.clone(),
            ),
        }
    }
}

/// Where a sink writes.
enum Target {
    Stdout(io::Stdout),
    File(BufWriter<File>),
    Pub(zmq::Socket),
}

/// One sink: its target, the stages it takes, its results counter.
pub struct Sink {
    name: String,
    target: Target,
    stages: Option<Vec<String>>,
    written: Counter,
    count: u64,
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

    fn with(name: &str, target: Target, stages: Option<Vec<String>>) -> Self {
        Self {
            name: name.into(),
            target,
            stages,
            written: crate::live::telemetry::results_out(name),
            count: 0,
        }
    }

    /// Whether this sink takes results of `stage`.
    #[must_use]
    pub fn takes(&self, stage: &str) -> bool {
        self.stages
            .as_ref()
            .is_none_or(|s| s.iter().any(|x| x == stage))
    }

    /// Writes one result (a line, flushed; or one PUB message).
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
        }
        self.count += 1;
        self.written.increment(1);
        Ok(())
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
