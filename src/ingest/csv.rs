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

/// Which columns of a CSV with a header hold the unit and the time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Columns {
    /// The header name of the time column (seconds); `None`: found by name (module docs).
    pub time: Option<String>,
    /// The header name of the unit (label) column; `None`: found by name.
    pub unit: Option<String>,
}

/// Header names read as the time column when none is given (compared case-insensitively).
pub const TIME_NAMES: &[&str] = &[
    "time",
    "time_s",
    "times",
    "t",
    "t_s",
    "seconds",
    "timestamp",
    "timestamps",
    "spike_time",
    "spike_time_s",
    "spike_times",
    "spike_times_s",
];

/// Header names read as the unit column when none is given (compared case-insensitively).
pub const UNIT_NAMES: &[&str] = &[
    "label",
    "unit",
    "unit_id",
    "units",
    "cluster",
    "cluster_id",
    "clusters",
    "neuron",
    "neuron_id",
    "id",
    "channel",
    "electrode",
    "type",
];

/// Reads a tdminer CSV file (see the [module docs](self) for the format).
///
/// # Errors
/// [`IngestError::Io`] if the file cannot be opened or read; otherwise as [`parse_csv`],
/// with the file's path in every message.
pub fn read_csv(path: &Path, ordering: Ordering) -> Result<EventStream, IngestError> {
    read_csv_columns(path, ordering, &Columns::default())
}

/// [`read_csv`] with the unit and time columns chosen by header name.
///
/// # Errors
/// As [`read_csv`] and [`parse_csv_columns`].
pub(crate) fn read_csv_columns(
    path: &Path,
    ordering: Ordering,
    columns: &Columns,
) -> Result<EventStream, IngestError> {
    let file = File::open(path).map_err(|source| IngestError::Io {
        path: path.into(),
        source,
    })?;
    parse_csv_columns(
        BufReader::new(file),
        &path.display().to_string(),
        ordering,
        columns,
    )
}

/// Parses tdminer CSV text (see the [module docs](self) for the format) into an
/// [`EventStream`]. `source_name` (usually the file path) starts every error message.
///
/// Blank lines and lines whose first non-blank character is `#` are skipped; so is the
/// first remaining line if its time field is not a number (a header).
///
/// # Errors
/// As [`parse_csv_columns`] with no columns given.
pub fn parse_csv<R: BufRead>(
    reader: R,
    source_name: &str,
    ordering: Ordering,
) -> Result<EventStream, IngestError> {
    parse_csv_columns(reader, source_name, ordering, &Columns::default())
}

/// Where the unit and time of a line are.
#[derive(Clone, Copy)]
struct Layout {
    unit: usize,
    time: usize,
    fields: usize,
}

/// The layout a header line gives (`None`: not a header, read it as data).
fn header_layout(
    fields: &[&str],
    columns: &Columns,
    line: usize,
    csv_err: &dyn Fn(usize, String) -> IngestError,
) -> Result<Option<Layout>, IngestError> {
    let names: Vec<String> = fields
        .iter()
        .map(|f| f.trim().to_ascii_lowercase())
        .collect();
    let listing = || cut(&fields.join(","));
    let given = |name: &Option<String>, what: &str| -> Result<Option<usize>, IngestError> {
        let Some(name) = name else { return Ok(None) };
        names
            .iter()
            .position(|n| *n == name.to_ascii_lowercase())
            .map(Some)
            .ok_or_else(|| {
                csv_err(
                    line,
                    format!(
                        "the {what} column `{name}` is not in the header `{}`",
                        listing()
                    ),
                )
            })
    };
    let by_name = |known: &[&str]| names.iter().position(|n| known.contains(&n.as_str()));
    let time = given(&columns.time, "time")?.or_else(|| by_name(TIME_NAMES));
    let unit = given(&columns.unit, "unit")?.or_else(|| by_name(UNIT_NAMES));
    let numeric = fields.iter().any(|f| f.trim().parse::<f64>().is_ok());
    // Two columns, one of them named: the other is the other one.
    let (unit, time) = match (unit, time, fields.len()) {
        (Some(u), None, 2) if !numeric => (Some(u), Some(1 - u)),
        (None, Some(t), 2) if !numeric => (Some(1 - t), Some(t)),
        found => (found.0, found.1),
    };
    match (unit, time) {
        (Some(unit), Some(time)) if unit != time => Ok(Some(Layout {
            unit,
            time,
            fields: fields.len(),
        })),
        (Some(_), Some(_)) => Err(csv_err(
            line,
            "the unit and time columns are the same column".into(),
        )),
        // A tdminer header such as `label,t` or `a,b`: two fields, the second not a number.
        _ if fields.len() == 2 && fields[1].trim().parse::<f64>().is_err() => Ok(Some(Layout {
            unit: 0,
            time: 1,
            fields: 2,
        })),
        _ if columns.time.is_some() || columns.unit.is_some() || !numeric => Err(csv_err(
            line,
            format!(
                "cannot tell which columns hold the unit and the time in the header `{}`; \
                 give them with `--unit-column NAME --time-column NAME`",
                listing()
            ),
        )),
        _ => Ok(None),
    }
}

/// At most 80 characters of `s`, for error messages (a whole 8 KB line helps nobody).
pub(crate) fn cut(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}… ({} bytes)", &s[..i], s.len()),
        None => s.to_owned(),
    }
}

/// Parses CSV text into an [`EventStream`]: without a header, tdminer's `label,time_seconds`
/// lines; with a header, the unit and time columns are `columns` (by name) or found by name
/// ([`UNIT_NAMES`], [`TIME_NAMES`]), e.g. `spike_time_s,cluster_id`; other columns are
/// ignored. `source_name` (usually the file path) starts every error message.
///
/// After reading, a result that looks like swapped columns is an error: as many distinct
/// labels as events, or times that are few distinct integers (labels read as times).
///
/// # Errors
/// [`IngestError::Csv`] naming the 1-based line for: invalid UTF-8, a field count other
/// than the header's (2 without one), an empty label, an unparsable, non-finite or negative
/// time, a named column absent from the header, a header whose columns cannot be told
/// apart, and — with [`Ordering::RequireSorted`] — a time earlier than the previous event's
/// (the message says that `--sort` allows it). [`IngestError::NoEvents`] if no event line
/// remains; [`IngestError::SwappedColumns`] for the look of swapped columns;
/// [`IngestError::Io`] if reading fails. Lines are cut to 80 characters in messages.
pub fn parse_csv_columns<R: BufRead>(
    mut reader: R,
    source_name: &str,
    ordering: Ordering,
    columns: &Columns,
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
    let mut layout: Option<Layout> = None;
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
        let fields: Vec<&str> = line.split(',').collect();
        let current = match layout {
            Some(l) => l,
            None => {
                let found = header_layout(&fields, columns, line_no, &csv_err)?;
                let l = found.unwrap_or(Layout {
                    unit: 0,
                    time: 1,
                    fields: 2,
                });
                layout = Some(l);
                if found.is_some() {
                    tracing::debug!(
                        source = source_name,
                        line = line_no,
                        header = %cut(line),
                        unit_column = l.unit,
                        time_column = l.time,
                        "read the CSV header"
                    );
                    continue;
                }
                l
            }
        };
        read_event(
            &fields,
            current,
            (line_no, line),
            ordering,
            &csv_err,
            (&mut alphabet, &mut times, &mut types),
            (&mut previous, &mut unsorted),
        )?;
    }
    if times.is_empty() {
        return Err(IngestError::NoEvents {
            path,
            what: "the CSV input (no `label,time` lines)".into(),
        });
    }
    check_columns(&path, &times, alphabet.len())?;
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

/// Reads one event line into the columns being built.
fn read_event(
    fields: &[&str],
    layout: Layout,
    (line_no, line): (usize, &str),
    ordering: Ordering,
    csv_err: &dyn Fn(usize, String) -> IngestError,
    (alphabet, times, types): (
        &mut Alphabet,
        &mut Vec<f64>,
        &mut Vec<crate::event::EventType>,
    ),
    (previous, unsorted): (&mut Option<(f64, usize)>, &mut bool),
) -> Result<(), IngestError> {
    if fields.len() != layout.fields {
        let expected = if layout.fields == 2 {
            "2 comma-separated fields `label,time_seconds`".to_owned()
        } else {
            format!("{} comma-separated fields (as the header)", layout.fields)
        };
        return Err(csv_err(
            line_no,
            format!(
                "expected {expected}, found {}: `{}`",
                fields.len(),
                cut(line)
            ),
        ));
    }
    let (label, time_text) = (fields[layout.unit].trim(), fields[layout.time].trim());
    let Ok(time) = time_text.parse::<f64>() else {
        return Err(csv_err(
            line_no,
            format!(
                "time `{}` is not a number (expected seconds, e.g. `0.0125`)",
                cut(time_text)
            ),
        ));
    };
    if label.is_empty() {
        return Err(csv_err(line_no, "the label (unit) is empty".into()));
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
    if let Some((prev, prev_line)) = *previous
        && time < prev
    {
        if ordering == Ordering::RequireSorted {
            return Err(csv_err(
                line_no,
                format!(
                    "time {time} s is earlier than the previous event's {prev} s (line \
                     {prev_line}); events must be sorted by time (pass `--sort` to sort them)"
                ),
            ));
        }
        *unsorted = true;
    }
    *previous = Some((time, line_no));
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
    Ok(())
}

/// Events from which a swap of the columns is told apart (fewer prove nothing).
const SWAP_MIN_EVENTS: usize = 200;

/// The look of swapped columns: nearly one label per event (spike times read as labels), or
/// times that are a handful of integers (labels read as times).
fn check_columns(path: &Path, times: &[f64], labels: usize) -> Result<(), IngestError> {
    let n = times.len();
    if n < SWAP_MIN_EVENTS {
        return Ok(());
    }
    if labels * 2 > n {
        return Err(IngestError::SwappedColumns {
            path: path.to_path_buf(),
            message: format!(
                "{labels} distinct unit labels for {n} events: the labels look like spike \
                 times. Name the columns with a header and `--unit-column NAME --time-column \
                 NAME`"
            ),
        });
    }
    let integers = times.iter().all(|t| t.fract() == 0.0);
    if integers {
        let mut distinct: Vec<u64> = times.iter().map(|t| t.to_bits()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() * 20 < n {
            return Err(IngestError::SwappedColumns {
                path: path.to_path_buf(),
                message: format!(
                    "the {n} times take only {} distinct integer values: they look like unit \
                     labels. Name the columns with a header and `--unit-column NAME \
                     --time-column NAME`",
                    distinct.len()
                ),
            });
        }
    }
    Ok(())
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
