//! `kind = "jsonl"`: one JSON object per line, appended to a file or written to standard
//! output, flushed per line.
//!
//! ```toml
//! [sinks.out]
//! kind = "jsonl"
//! path = "results.jsonl"   # default `-`: standard output
//! stages = ["episodes"]    # default: every stage
//! ```

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    LineWriter, Opened, Sink, SinkConfig, SinkError, append_to, check_file_path, file_path,
};
use crate::live::config::section::ConfigError;

/// `[sinks.<name>]` with `kind = "jsonl"`.
#[derive(Clone, Debug, Deserialize)]
pub struct JsonlConfig {
    /// File to append to, or `-` for standard output (default).
    pub path: Option<PathBuf>,
    /// Stages whose results it writes (default: all).
    pub stages: Option<Vec<String>>,
}

impl SinkConfig for JsonlConfig {
    const KIND: &'static str = "jsonl";

    fn stages(&self) -> Option<&[String]> {
        self.stages.as_deref()
    }

    fn validate(&self) -> Vec<ConfigError> {
        check_file_path(self.path.as_deref())
    }

    fn open(&self, name: &str, _ctx: &zmq::Context) -> Result<Opened, SinkError> {
        sink(name, self.path.as_deref(), self.stages.clone()).map(Opened::Lines)
    }
}

/// A JSON-lines sink named `name` appending to `path`, or writing to standard output for
/// `None` / `-`, taking the results of `stages` (`None`: all).
///
/// # Errors
/// [`SinkError`] when the file cannot be opened.
pub fn sink(
    name: &str,
    path: Option<&Path>,
    stages: Option<Vec<String>>,
) -> Result<Sink, SinkError> {
    let target = match file_path(path) {
        None => JsonLines::Stdout(io::stdout()),
        Some(p) => JsonLines::File(BufWriter::new(append_to(name, p)?)),
    };
    Ok(Sink::custom(name, stages, Box::new(target)))
}

/// Where JSON lines go.
enum JsonLines {
    Stdout(io::Stdout),
    File(BufWriter<File>),
}

impl LineWriter for JsonLines {
    fn write_line(&mut self, _stage: &str, json: &str) -> io::Result<()> {
        match self {
            Self::Stdout(s) => {
                let mut s = s.lock();
                s.write_all(json.as_bytes())?;
                s.write_all(b"\n")?;
                s.flush()
            }
            Self::File(f) => {
                f.write_all(json.as_bytes())?;
                f.write_all(b"\n")
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Stdout(s) => s.flush(),
            Self::File(f) => f.flush(),
        }
    }
}
