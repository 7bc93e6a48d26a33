//! Sinks: where window results go. JSON lines (a file, or standard output) and ZeroMQ PUB
//! (two frames: the stage name as topic, then the JSON object), so a dashboard can subscribe
//! to the stages it shows.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::Path;

use metrics::Counter;

use crate::stage::Output;

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
            written: crate::telemetry::results_out(name),
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
