//! tdminer CSV reader and writer: one event per line, `label,time_seconds`.
//!
//! ```text
//! # comment lines and blank lines are skipped
//! label,time            <- optional header: a FIRST line whose time field is not a number
//! A,0.0105
//! B,0.0121
//! A,0.5
//! ```
//!
//! * `label` is any non-empty string without a comma (surrounding whitespace is trimmed);
//!   labels become event types in order of first appearance.
//! * `time_seconds` is parsed by Rust's correctly rounded `f64` parser (never via `f32`);
//!   it must be finite and ≥ 0.
//! * Lines must be in time order unless [`Ordering::SortIfNeeded`] is given.
//!
//! [`write_csv`] prints times with Rust's shortest round-trip `f64` formatting, so
//! [`parse_csv`] reads back bit-identical times.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::IngestError;
use crate::event::{Alphabet, EventStream, Ordering};

/// Reads a tdminer CSV file (see the [module docs](self) for the format).
///
/// # Errors
/// [`IngestError::Io`] if the file cannot be opened or read; otherwise as [`parse_csv`],
/// with the file's path in every message.
pub fn read_csv(path: &Path, ordering: Ordering) -> Result<EventStream, IngestError> {
    let file = File::open(path).map_err(|source| IngestError::Io {
        path: path.into(),
        source,
    })?;
    parse_csv(BufReader::new(file), &path.display().to_string(), ordering)
}

/// Parses tdminer CSV text (see the [module docs](self) for the format) into an
/// [`EventStream`]. `source_name` (usually the file path) starts every error message.
///
/// Blank lines and lines whose first non-blank character is `#` are skipped; so is the
/// first remaining line if its time field is not a number (a header).
///
/// # Errors
/// [`IngestError::Csv`] naming the 1-based line for: invalid UTF-8, a field count other
/// than 2, an empty label, an unparsable, non-finite or negative time, and — with
/// [`Ordering::RequireSorted`] — a time earlier than the previous event's (the message says
/// that `--sort` allows it). [`IngestError::NoEvents`] if no event line remains;
/// [`IngestError::Io`] if reading fails.
pub fn parse_csv<R: BufRead>(
    mut reader: R,
    source_name: &str,
    ordering: Ordering,
) -> Result<EventStream, IngestError> {
    let path = PathBuf::from(source_name);
    let csv_err = |line: usize, message: String| IngestError::Csv {
        path: path.clone(),
        line,
        message,
    };

    let mut alphabet = Alphabet::new();
    let mut times = Vec::new();
    let mut types = Vec::new();
    // (time, line) of the previous event, for the sortedness check.
    let mut previous: Option<(f64, usize)> = None;
    let mut unsorted = false;
    let mut seen_content = false;
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| IngestError::Io {
                path: path.clone(),
                source,
            })?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let Ok(text) = std::str::from_utf8(&buf) else {
            return Err(csv_err(line_no, "the line is not valid UTF-8 text".into()));
        };
        let line = text.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let first_content = !seen_content;
        seen_content = true;

        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != 2 {
            return Err(csv_err(
                line_no,
                format!(
                    "expected 2 comma-separated fields `label,time_seconds`, found {}: `{line}`",
                    fields.len()
                ),
            ));
        }
        let (label, time_text) = (fields[0].trim(), fields[1].trim());
        let time = match time_text.parse::<f64>() {
            Ok(t) => t,
            Err(_) if first_content => {
                tracing::debug!(
                    source = source_name,
                    line = line_no,
                    header = line,
                    "skipping CSV header"
                );
                continue;
            }
            Err(_) => {
                return Err(csv_err(
                    line_no,
                    format!("time `{time_text}` is not a number (expected seconds, e.g. `0.0125`)"),
                ));
            }
        };
        if label.is_empty() {
            return Err(csv_err(line_no, "the label (first field) is empty".into()));
        }
        if !time.is_finite() {
            return Err(csv_err(
                line_no,
                format!("time `{time_text}` is not finite"),
            ));
        }
        if time < 0.0 {
            return Err(csv_err(
                line_no,
                format!("time {time} s is negative; times are seconds and must be >= 0"),
            ));
        }
        if let Some((prev, prev_line)) = previous
            && time < prev
        {
            if ordering == Ordering::RequireSorted {
                return Err(csv_err(
                    line_no,
                    format!(
                        "time {time} s is earlier than the previous event's {prev} s (line \
                             {prev_line}); events must be sorted by time (pass `--sort` to sort \
                             them)"
                    ),
                ));
            }
            unsorted = true;
        }
        previous = Some((time, line_no));
        let ty = match alphabet.get(label) {
            Some(ty) => ty,
            None if u32::try_from(alphabet.len()).is_err() => {
                return Err(csv_err(
                    line_no,
                    format!("more than {} distinct labels", u32::MAX),
                ));
            }
            None => alphabet.intern(label),
        };
        times.push(time);
        types.push(ty);
    }
    if times.is_empty() {
        return Err(IngestError::NoEvents {
            path,
            what: "the CSV input (no `label,time` lines)".into(),
        });
    }
    if unsorted {
        tracing::info!(
            source = source_name,
            events = times.len(),
            "sorting CSV events by time"
        );
    }
    let events = times.len();
    let stream = EventStream::new(times, types, alphabet, ordering).map_err(|source| {
        IngestError::Event {
            path: path.clone(),
            source,
        }
    })?;
    tracing::debug!(
        source = source_name,
        events,
        types = stream.alphabet().len(),
        "read CSV events"
    );
    Ok(stream)
}

/// Writes `stream` as tdminer CSV: one `label,time` line per event in stream order, no
/// header. Times use Rust's shortest round-trip `f64` formatting (`{}`), so [`parse_csv`]
/// reads back the same bits.
///
/// # Errors
/// An [`std::io::Error`] of kind `InvalidInput` if a label cannot be read back unchanged
/// (empty, containing `,`, `\n` or `\r`, starting with `#`, or with leading or trailing
/// whitespace); otherwise any error of `writer`. Output may be partial on error.
pub fn write_csv<W: Write>(writer: W, stream: &EventStream) -> std::io::Result<()> {
    let labels = stream.alphabet().labels();
    for label in labels {
        if !label_round_trips(label) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "label {label:?} cannot be written to CSV: labels must be non-empty, \
                     without `,` or line breaks, not start with `#`, and have no surrounding \
                     whitespace"
                ),
            ));
        }
    }
    let mut w = BufWriter::new(writer);
    for (time, ty) in stream.iter() {
        writeln!(w, "{},{time}", labels[ty.index()])?;
    }
    w.flush()
}

/// True when `label` survives a `write_csv` → `parse_csv` round trip unchanged.
fn label_round_trips(label: &str) -> bool {
    !label.is_empty()
        && label.trim() == label
        && !label.starts_with('#')
        && !label.contains([',', '\n', '\r'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_rules() {
        assert!(label_round_trips("unit 7"));
        assert!(label_round_trips("a#b"));
        for bad in ["", " a", "a ", "#a", "a,b", "a\nb", "a\rb", "\u{a0}a"] {
            assert!(!label_round_trips(bad), "{bad:?}");
        }
    }
}
