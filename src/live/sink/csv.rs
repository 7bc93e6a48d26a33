//! `kind = "csv"`: one CSV row per result line, for a spreadsheet or a lab's analysis script.
//!
//! ```toml
//! [sinks.table]
//! kind = "csv"
//! path = "results.csv"     # default `-`: standard output
//! stages = ["rates"]       # default: every stage
//! on_error = "stop"        # or "retry" (`super::OnError`; the sink module's "When a write fails")
//! ```
//!
//! The columns are the fields every window line carries, in the JSON line's order
//! ([`COLUMNS`]: `stage`, `window`, `source`, `window_index`, `window_start_s`,
//! `window_end_s`, `complete`, the line's `gap` as `gap_kind`, `gap_start_s`, `gap_end_s`,
//! `events`, `late`, `dropped`, `out_of_range`, `duplicate`, `overflow`, `epoch`, `run_id`,
//! `seconds`, `error`), then `result`: the stage's own fields as one compact JSON object (e.g.
//! `{"units":[…],"population_rate_hz":12.5}`), empty when the stage failed on the window. So a
//! row holds what the JSON line holds. A cell holds the line's value as written in the JSON
//! line (numbers and booleans as their JSON text, strings unquoted), empty when the line has
//! no such field (the gap columns of a window without a gap; a detect stage's occurrence line
//! has only `stage`, and its fields (`kind`, `seq`, `episode`, …) go to `result`). The header
//! row is written when the file is new or empty; appending to a file that has rows adds rows
//! only, and a file whose header is not this one (written by an older version, or another
//! file) is refused at startup, naming it, rather than mixing columns. Every row reaches the
//! file whole, in one write, like `jsonl` (`super::LineFile`).

use std::io::{self, Write};
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    LineFile, LineWriter, OnError, Opened, Sink, SinkConfig, SinkError, append_to, check_file_path,
    file_path,
};
use crate::live::config::section::ConfigError;

/// The envelope columns, in order (then `result`): the fields of
/// [`crate::live::stage::WindowEnvelope`], its `gap` as the three `gap_*` columns.
pub const COLUMNS: [&str; 20] = [
    "stage",
    "window",
    "source",
    "window_index",
    "window_start_s",
    "window_end_s",
    "complete",
    "gap_kind",
    "gap_start_s",
    "gap_end_s",
    "events",
    "late",
    "dropped",
    "out_of_range",
    "duplicate",
    "overflow",
    "epoch",
    "run_id",
    "seconds",
    "error",
];

/// The header row as written (the columns, then `result`), without its line end.
fn header_row() -> String {
    let mut h = COLUMNS.join(",");
    h.push_str(",result");
    h
}

/// `[sinks.<name>]` with `kind = "csv"`.
#[derive(Clone, Debug, Deserialize)]
pub struct CsvConfig {
    /// File to append to, or `-` for standard output (default).
    pub path: Option<PathBuf>,
    /// Stages whose results it writes (default: all).
    pub stages: Option<Vec<String>>,
    /// What a failed write does (default `"stop"`).
    #[serde(default)]
    pub on_error: OnError,
}

impl SinkConfig for CsvConfig {
    const KIND: &'static str = "csv";

    fn stages(&self) -> Option<&[String]> {
        self.stages.as_deref()
    }

    fn validate(&self) -> Vec<ConfigError> {
        check_file_path(self.path.as_deref())
    }

    fn open(&self, name: &str, _ctx: &zmq::Context) -> Result<Opened, SinkError> {
        let err = |e: io::Error, what: &str| SinkError {
            sink: name.into(),
            message: format!("cannot {what}: {e}"),
        };
        let (target, header) = match file_path(self.path.as_deref()) {
            None => (Target::Stdout(io::stdout()), true),
            Some(p) => {
                let file = append_to(name, p)?;
                let empty = file
                    .metadata()
                    .map_err(|e| err(e, &format!("read {}", p.display())))?
                    .len()
                    == 0;
                if !empty {
                    check_header(name, p)?;
                }
                (Target::File(LineFile::new(file)), empty)
            }
        };
        let mut rows = Rows { target };
        if header {
            rows.write_record(COLUMNS.iter().chain(&["result"]))
                .map_err(|e| err(e, "write the header"))?;
        }
        Ok(Opened::Lines(
            Sink::custom(name, self.stages.clone(), Box::new(rows)).on_error(self.on_error),
        ))
    }
}

/// Refuses to append to `path` unless its first line is this version's header.
fn check_header(name: &str, path: &std::path::Path) -> Result<(), SinkError> {
    use std::io::BufRead;
    let mut first = String::new();
    std::fs::File::open(path)
        .map(io::BufReader::new)
        .and_then(|mut r| r.read_line(&mut first))
        .map_err(|e| SinkError {
            sink: name.into(),
            message: format!("cannot read the header of {}: {e}", path.display()),
        })?;
    let first = first.trim_end_matches(['\n', '\r']);
    if first == header_row() {
        return Ok(());
    }
    Err(SinkError {
        sink: name.into(),
        message: format!(
            "{} has other columns (its first line is `{}`; this version writes `{}`): appending would mix columns; write to a new file",
            path.display(),
            first.chars().take(200).collect::<String>(),
            header_row()
        ),
    })
}

/// The CSV writer of one sink: each row is formatted into a buffer, then written whole to the
/// target.
struct Rows {
    target: Target,
}

/// Where the rows go.
enum Target {
    Stdout(io::Stdout),
    File(LineFile),
}

impl Rows {
    /// Formats one record and writes it, with its line end, in one write.
    fn write_record<I, T>(&mut self, record: I) -> io::Result<()>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        let mut row = csv::WriterBuilder::new().from_writer(Vec::new());
        row.write_record(record).map_err(io::Error::other)?;
        let bytes = row
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?;
        match &mut self.target {
            Target::Stdout(s) => {
                let mut s = s.lock();
                s.write_all(&bytes).and_then(|()| s.flush())
            }
            Target::File(f) => f.append(&bytes),
        }
    }
}

/// A cell: a string as is, a number or boolean as its JSON text, nothing for null or absent.
fn cell(value: Option<Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(v) => v.to_string(),
    }
}

impl LineWriter for Rows {
    fn write_line(&mut self, _stage: &str, json: &str) -> io::Result<()> {
        let mut fields: Map<String, Value> =
            serde_json::from_str(json).map_err(io::Error::other)?;
        if let Some(Value::Object(mut gap)) = fields.shift_remove("gap") {
            for (key, column) in [
                ("kind", "gap_kind"),
                ("start_s", "gap_start_s"),
                ("end_s", "gap_end_s"),
            ] {
                if let Some(v) = gap.shift_remove(key) {
                    fields.insert(column.into(), v);
                }
            }
        }
        let mut row: Vec<String> = COLUMNS
            .iter()
            .map(|c| cell(fields.shift_remove(*c)))
            .collect();
        row.push(if fields.is_empty() {
            String::new()
        } else {
            Value::Object(fields).to_string()
        });
        self.write_record(&row)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::live::config::PipelineConfig;
    use crate::live::{RunOptions, run};

    /// The bundled archive's spike stream in 5-minute windows, one rate stage, written both
    /// as JSON lines and as CSV.
    fn pipeline(dir: &Path) -> String {
        format!(
            r#"
[sources.a2929]
kind = "hdf5"
path = "{nwb}"
overflow = "block"

[windows.w300]
source = "a2929"
length_s = 300.0
hop_s = 150.0

[stages.rates]
kind = "rate"
window = "w300"
min_rate_hz = 1.0

[sinks.lines]
kind = "jsonl"
path = "{jsonl}"

[sinks.table]
kind = "csv"
path = "{csv}"
"#,
            nwb = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/fixtures/spikes/A2929-200711/A2929-200711.nwb"
            ),
            jsonl = dir.join("out.jsonl").display(),
            csv = dir.join("out.csv").display(),
        )
    }

    #[test]
    fn csv_rows_equal_the_json_lines_windows() {
        let dir = tempfile::tempdir().unwrap();
        let config = PipelineConfig::parse(&pipeline(dir.path()), Path::new("t.toml")).unwrap();
        assert_eq!(config.sinks["table"].kind.name, "csv");
        let summary = run(&config, RunOptions::default()).unwrap();
        let lines: Vec<Map<String, Value>> = std::fs::read_to_string(dir.path().join("out.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(lines.len() >= 7, "{} lines", lines.len());
        assert_eq!(summary.sinks["table"], lines.len() as u64);
        let mut reader = csv::Reader::from_path(dir.path().join("out.csv")).unwrap();
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        let mut want: Vec<&str> = COLUMNS.to_vec();
        want.push("result");
        assert_eq!(header, want);
        let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), lines.len());
        for (row, line) in rows.iter().zip(&lines) {
            let col = |name: &str| &row[header.iter().position(|h| h == name).unwrap()];
            assert_eq!(col("stage"), "rates");
            assert_eq!(col("window"), "w300");
            assert_eq!(
                col("window_index").parse::<u64>().unwrap(),
                line["window_index"].as_u64().unwrap()
            );
            for f in ["window_start_s", "window_end_s", "seconds"] {
                assert_eq!(
                    col(f).parse::<f64>().unwrap(),
                    line[f].as_f64().unwrap(),
                    "{f}"
                );
            }
            assert_eq!(
                col("complete").parse::<bool>().unwrap(),
                line["complete"].as_bool().unwrap()
            );
            for f in [
                "events",
                "late",
                "dropped",
                "out_of_range",
                "duplicate",
                "overflow",
                "epoch",
            ] {
                assert_eq!(
                    col(f).parse::<u64>().unwrap(),
                    line[f].as_u64().unwrap(),
                    "{f}"
                );
            }
            assert_eq!(col("run_id"), line["run_id"].as_str().unwrap());
            assert!(!col("run_id").is_empty());
            for f in ["gap_kind", "gap_start_s", "gap_end_s"] {
                assert_eq!(col(f), "", "no gap in this archive");
            }
            assert_eq!(col("error"), "");
            // The result column is the line less the envelope, keys in order.
            let mut rest = line.clone();
            for c in COLUMNS {
                rest.shift_remove(c);
            }
            let result: Map<String, Value> = serde_json::from_str(col("result")).unwrap();
            assert_eq!(result, rest);
            assert_eq!(
                result.keys().collect::<Vec<_>>(),
                rest.keys().collect::<Vec<_>>()
            );
        }
        // Appending to a file with rows adds rows, not a second header.
        run(&config, RunOptions::default()).unwrap();
        let text = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
        assert_eq!(text.lines().filter(|l| l.starts_with("stage,")).count(), 1);
        assert_eq!(text.lines().count(), 1 + 2 * lines.len());
    }

    #[test]
    fn an_occurrence_line_keeps_its_fields_in_the_result_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.csv");
        let config = CsvConfig {
            path: Some(path.clone()),
            stages: None,
            on_error: OnError::Stop,
        };
        let Ok(Opened::Lines(mut sink)) = config.open("t", &zmq::Context::new()) else {
            panic!("a csv sink writes lines");
        };
        let out = crate::live::stage::Output {
            stage: "d".into(),
            json: r#"{"stage":"d","kind":"occurrence","seq":0,"times_s":[1.5,1.75]}"#.into(),
            closed_at: std::time::Instant::now(),
            preview: false,
            complete: true,
            published_at: None,
            value: None,
        };
        sink.write(&out).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row,
            r#"d,,,,,,,,,,,,,,,,,,,,"{""kind"":""occurrence"",""seq"":0,""times_s"":[1.5,1.75]}""#
        );
    }

    #[test]
    fn a_window_with_a_gap_has_it_in_three_columns_and_the_row_holds_the_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.csv");
        let config = CsvConfig {
            path: Some(path.clone()),
            stages: None,
            on_error: OnError::Stop,
        };
        let Ok(Opened::Lines(mut sink)) = config.open("t", &zmq::Context::new()) else {
            panic!("a csv sink writes lines");
        };
        let json = r#"{"stage":"r","window":"w","source":"s","window_index":7,"window_start_s":7.0,"window_end_s":8.0,"complete":false,"gap":{"kind":"jump","start_s":7.25,"end_s":19.5},"events":3,"late":1,"dropped":2,"out_of_range":4,"duplicate":5,"overflow":6,"epoch":1,"run_id":"1-2","seconds":0.5,"units":[]}"#;
        let out = crate::live::stage::Output {
            stage: "r".into(),
            json: json.into(),
            closed_at: std::time::Instant::now(),
            preview: false,
            complete: false,
            published_at: None,
            value: None,
        };
        sink.write(&out).unwrap();
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
        let row = reader.records().next().unwrap().unwrap();
        let got: Map<String, Value> = header
            .iter()
            .zip(row.iter())
            .filter(|(_, v)| !v.is_empty())
            .map(|(h, v)| {
                let v = if h == "result" {
                    serde_json::from_str(v).unwrap()
                } else {
                    serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.into()))
                };
                (h.clone(), v)
            })
            .collect();
        // Every field of the line is in the row: the gap as three columns.
        let mut want: Map<String, Value> = serde_json::from_str(json).unwrap();
        let gap = want.shift_remove("gap").unwrap();
        want.insert("gap_kind".into(), gap["kind"].clone());
        want.insert("gap_start_s".into(), gap["start_s"].clone());
        want.insert("gap_end_s".into(), gap["end_s"].clone());
        let result = want.shift_remove("units").unwrap();
        want.insert("result".into(), serde_json::json!({ "units": result }));
        let mut got_sorted: Vec<_> = got.into_iter().collect();
        let mut want_sorted: Vec<_> = want.into_iter().collect();
        got_sorted.sort_by(|a, b| a.0.cmp(&b.0));
        want_sorted.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got_sorted, want_sorted);
    }

    #[test]
    fn a_file_with_other_columns_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.csv");
        std::fs::write(&path, "stage,window,source,events,result\nr,w,s,3,{}\n").unwrap();
        let config = CsvConfig {
            path: Some(path.clone()),
            stages: None,
            on_error: OnError::Stop,
        };
        let Err(e) = config.open("table", &zmq::Context::new()) else {
            panic!("a file with other columns must be refused");
        };
        let message = e.to_string();
        assert!(
            message.contains("table")
                && message.contains("old.csv")
                && message.contains("other columns"),
            "{message}"
        );
        // Untouched.
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "stage,window,source,events,result\nr,w,s,3,{}\n"
        );
    }
}
