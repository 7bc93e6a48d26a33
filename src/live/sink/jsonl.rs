//! `kind = "jsonl"`: one JSON object per line, appended to a file or written to standard
//! output, flushed per line.
//!
//! ```toml
//! [sinks.out]
//! kind = "jsonl"
//! path = "results.jsonl"   # default `-`: standard output
//! stages = ["episodes"]    # default: every stage
//! on_error = "stop"        # or "retry" (`super::OnError`; the sink module's "When a write fails")
//! ```
//!
//! Each line reaches the file whole or not at all (`super::LineFile`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{
    LineFile, LineWriter, OnError, Opened, Sink, SinkConfig, SinkError, append_to, check_file_path,
    file_path,
};
use crate::live::config::section::ConfigError;

/// `[sinks.<name>]` with `kind = "jsonl"`.
#[derive(Clone, Debug, Deserialize)]
pub struct JsonlConfig {
    /// File to append to, or `-` for standard output (default).
    pub path: Option<PathBuf>,
    /// Stages whose results it writes (default: all).
    pub stages: Option<Vec<String>>,
    /// What a failed write does (default `"stop"`).
    #[serde(default)]
    pub on_error: OnError,
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
        sink(name, self.path.as_deref(), self.stages.clone())
            .map(|s| Opened::Lines(s.on_error(self.on_error)))
    }
}

/// A JSON-lines sink named `name` appending to `path`, or writing to standard output for
/// `None` / `-`, taking the results of `stages` (`None`: all); a failed write stops the run
/// ([`OnError::Stop`]; [`Sink::on_error`] changes it).
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
        Some(p) => JsonLines::File(LineFile::new(append_to(name, p)?), String::new()),
    };
    Ok(Sink::custom(name, stages, Box::new(target)))
}

/// Where JSON lines go; each line is written with its newline in one write.
enum JsonLines {
    Stdout(io::Stdout),
    /// The file and a buffer to assemble a line in.
    File(LineFile, String),
}

impl LineWriter for JsonLines {
    fn write_line(&mut self, _stage: &str, json: &str) -> io::Result<()> {
        match self {
            Self::Stdout(s) => {
                let mut s = s.lock();
                let mut line = String::with_capacity(json.len() + 1);
                line.push_str(json);
                line.push('\n');
                s.write_all(line.as_bytes())?;
                s.flush()
            }
            Self::File(f, line) => {
                line.clear();
                line.push_str(json);
                line.push('\n');
                f.append(line.as_bytes())
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Self::Stdout(s) => s.flush(),
            Self::File(..) => Ok(()),
        }
    }
}
