//! Labelled collections of series: the UCR/UEA archive formats and `.npy` batches.
//!
//! | extension            | format                                                                 |
//! |----------------------|------------------------------------------------------------------------|
//! | `.ts`                | aeon/sktime: `@` header lines (`@problemName`, `@univariate`, `@dimensions`, `@classLabel true 1 2`, …, `@data`), then one series per line: dimensions separated by `:`, values by `,`, the class label (or regression target) last; `?` is a missing value |
//! | `.tsv`               | UCR 2018: one series per line, tab-separated, the label first           |
//! | `.npy`               | shape `[B, L]` (univariate) or `[B, L, D]`; no labels                   |
//! | `.txt`, anything else | UCR 2015: one series per line, whitespace- or comma-separated, the label first |
//!
//! Lines that are empty or start with `#` are skipped in the text formats. Missing values
//! (`?`, `NaN`, `nan`) are read as NaN. The UCR 2018 archive pads variable-length series with
//! trailing NaN, so trailing NaN values of `.tsv`/`.txt` lines are dropped (interior NaN are
//! kept). Labels are kept as text, except that a label written as an integral number
//! (`1.0000000e+00`, `-1`, `2.0`) is normalised to its integer (`1`, `-1`, `2`), so the UCR 2015
//! and 2018 copies of one problem label alike.
//!
//! Every error names the file and, for text, the 1-based line.

use std::io::BufRead;
use std::path::Path;

use super::{SeriesError, npy, parse_value};

/// One series of `dims` channels, time-major: sample `t` of channel `d` is
/// `values[t * dims + d]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Number of channels (dimensions) per time step, at least 1 in series read from files.
    pub dims: usize,
    /// The samples, time-major; `values.len()` is a multiple of `dims`.
    pub values: Vec<f64>,
}

impl Series {
    /// A univariate series.
    #[must_use]
    pub fn univariate(values: Vec<f64>) -> Self {
        Self { dims: 1, values }
    }

    /// Number of time steps (`values.len() / dims`; 0 when `dims` is 0).
    #[must_use]
    pub fn len(&self) -> usize {
        self.values.len().checked_div(self.dims).unwrap_or(0)
    }

    /// Whether the series has no time steps.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `dims` values of time step `t`.
    ///
    /// # Panics
    /// If `t >= self.len()`.
    #[must_use]
    pub fn step(&self, t: usize) -> &[f64] {
        &self.values[t * self.dims..(t + 1) * self.dims]
    }
}

/// A collection of series, with one label per series when the format has labels.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// The series, in file order.
    pub series: Vec<Series>,
    /// One label per series (`.ts` with `@classLabel true` or `@targetLabel true`, `.tsv`,
    /// `.txt`); `None` for `.npy` and unlabelled `.ts` files.
    pub labels: Option<Vec<String>>,
}

impl Dataset {
    /// Number of series.
    #[must_use]
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether there are no series.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// The common length of all series.
    ///
    /// # Errors
    /// [`SeriesError::Empty`] if there are no series, [`SeriesError::Ragged`] (naming `input`
    /// and the first series of another length) if the lengths differ.
    pub fn equal_length(&self, input: &str) -> Result<usize, SeriesError> {
        let first = self.series.first().ok_or_else(|| SeriesError::Empty {
            input: input.into(),
        })?;
        let expected = first.len();
        match self.series.iter().position(|s| s.len() != expected) {
            None => Ok(expected),
            Some(index) => Err(SeriesError::Ragged {
                input: input.into(),
                index,
                len: self.series[index].len(),
                expected,
            }),
        }
    }
}

/// Reads a collection by its extension (see the module docs).
///
/// # Errors
/// [`SeriesError::Io`] if the file cannot be read, [`SeriesError::Parse`] naming the line of a
/// malformed entry, [`SeriesError::Npy`]/[`SeriesError::BadShape`] for an unusable `.npy`, and
/// [`SeriesError::Empty`] for a file without series.
pub fn read_dataset(path: &Path) -> Result<Dataset, SeriesError> {
    let ext = super::extension(path);
    let dataset = match ext.as_str() {
        "ts" => read_ts(path)?,
        "tsv" => read_ucr_text(path, Separator::Tab)?,
        "npy" => read_npy(path)?,
        _ => read_ucr_text(path, Separator::WhitespaceOrComma)?,
    };
    if dataset.is_empty() {
        return Err(SeriesError::Empty {
            input: path.display().to_string(),
        });
    }
    Ok(dataset)
}

/// Field separators of the UCR text formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Separator {
    /// UCR 2018 `.tsv`.
    Tab,
    /// UCR 2015 `.txt`: spaces, tabs or commas (runs of whitespace count once).
    WhitespaceOrComma,
}

/// The lines of a text file with their 1-based numbers; a read failure is an
/// [`SeriesError::Io`].
fn lines(path: &Path) -> Result<Vec<(usize, String)>, SeriesError> {
    super::open(path)?
        .lines()
        .enumerate()
        .map(|(i, l)| {
            l.map(|l| (i + 1, l)).map_err(|source| SeriesError::Io {
                path: path.into(),
                source,
            })
        })
        .collect()
}

/// Reads UCR 2015 (`.txt`) or UCR 2018 (`.tsv`) text: label first, then the values.
fn read_ucr_text(path: &Path, sep: Separator) -> Result<Dataset, SeriesError> {
    let parse = |line: usize, message: String| SeriesError::Parse {
        path: path.into(),
        line,
        message,
    };
    let mut series = Vec::new();
    let mut labels = Vec::new();
    for (n, line) in lines(path)? {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let mut fields: Vec<&str> = match sep {
            Separator::Tab => text.split('\t').collect(),
            Separator::WhitespaceOrComma => text
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect(),
        };
        if fields.len() < 2 {
            return Err(parse(
                n,
                "a label and at least one value are expected".into(),
            ));
        }
        let label = normalise_label(fields.remove(0).trim());
        if label.is_empty() {
            return Err(parse(n, "the label (first field) is empty".into()));
        }
        let mut values = Vec::with_capacity(fields.len());
        for (k, f) in fields.iter().enumerate() {
            values.push(missing_or_value(f).ok_or_else(|| {
                parse(n, format!("value {} `{}` is not a number", k + 1, f.trim()))
            })?);
        }
        while values.last().is_some_and(|v| v.is_nan()) {
            values.pop();
        }
        if values.is_empty() {
            return Err(parse(n, "the series has no values".into()));
        }
        series.push(Series::univariate(values));
        labels.push(label);
    }
    Ok(Dataset {
        series,
        labels: Some(labels),
    })
}

/// `?`, `NaN`, `nan` → NaN; otherwise a number.
fn missing_or_value(text: &str) -> Option<f64> {
    let t = text.trim();
    if t == "?" {
        Some(f64::NAN)
    } else {
        parse_value(t)
    }
}

/// A label written as an integral number becomes that integer's text; other labels are kept.
fn normalise_label(text: &str) -> String {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
        _ => text.to_owned(),
    }
}

/// What the `.ts` header declared.
#[derive(Debug, Default)]
struct TsHeader {
    /// `@classLabel true ...` or `@targetLabel true`: the last `:` field is the label.
    labelled: bool,
    /// The declared class labels (normalised), if any.
    classes: Option<Vec<String>>,
    /// `@dimensions D`, or 1 when `@univariate true`.
    dims: Option<usize>,
}

/// Reads an aeon/sktime `.ts` file.
fn read_ts(path: &Path) -> Result<Dataset, SeriesError> {
    let parse = |line: usize, message: String| SeriesError::Parse {
        path: path.into(),
        line,
        message,
    };
    let mut header = TsHeader::default();
    let mut in_data = false;
    let mut series = Vec::new();
    let mut labels = Vec::new();
    for (n, line) in lines(path)? {
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        if !in_data {
            let Some(tag_line) = text.strip_prefix('@') else {
                return Err(parse(
                    n,
                    format!(
                        "a header line (`@...`) or `@data` is expected, found `{}`",
                        clip(text)
                    ),
                ));
            };
            let mut words = tag_line.split_whitespace();
            let tag = words.next().unwrap_or("").to_ascii_lowercase();
            let rest: Vec<&str> = words.collect();
            let flag = |rest: &[&str]| -> Result<bool, SeriesError> {
                match rest.first().map(|w| w.to_ascii_lowercase()).as_deref() {
                    Some("true") => Ok(true),
                    Some("false") => Ok(false),
                    _ => Err(parse(n, format!("`@{tag}` needs `true` or `false`"))),
                }
            };
            match tag.as_str() {
                "data" => in_data = true,
                "classlabel" if flag(&rest)? => {
                    header.labelled = true;
                    header.classes = Some(rest[1..].iter().map(|l| normalise_label(l)).collect());
                }
                "targetlabel" if flag(&rest)? => header.labelled = true,
                "univariate" if flag(&rest)? => header.dims = Some(1),
                "dimensions" | "dimension" => {
                    let d = rest
                        .first()
                        .and_then(|d| d.parse::<usize>().ok())
                        .filter(|&d| d > 0)
                        .ok_or_else(|| parse(n, "`@dimensions` needs a positive integer".into()))?;
                    header.dims = Some(d);
                }
                "timestamps" if flag(&rest)? => {
                    return Err(parse(
                        n,
                        "`@timeStamps true` (time-stamped values) is not supported".into(),
                    ));
                }
                // Informative only: lengths and missing values are checked on the data.
                _ => {}
            }
            continue;
        }
        let mut parts: Vec<&str> = text.split(':').collect();
        let label = if header.labelled {
            let raw = parts.pop().unwrap_or("").trim();
            if raw.is_empty() || parts.is_empty() {
                return Err(parse(
                    n,
                    "a label after the last `:` and at least one dimension are expected".into(),
                ));
            }
            let label = normalise_label(raw);
            if let Some(classes) = &header.classes
                && !classes.is_empty()
                && !classes.contains(&label)
            {
                return Err(parse(
                    n,
                    format!("label `{raw}` is not among the declared `@classLabel` {classes:?}"),
                ));
            }
            Some(label)
        } else {
            None
        };
        let dims = parts.len();
        if let Some(declared) = header.dims {
            if dims != declared {
                return Err(parse(
                    n,
                    format!("{dims} dimensions, the header declares {declared}"),
                ));
            }
        } else if let Some(first) = series.first().map(|s: &Series| s.dims)
            && dims != first
        {
            return Err(parse(
                n,
                format!("{dims} dimensions, the first series has {first}"),
            ));
        }
        let mut channels: Vec<Vec<f64>> = Vec::with_capacity(dims);
        for (d, part) in parts.iter().enumerate() {
            let mut channel = Vec::new();
            for (k, f) in part.split(',').enumerate() {
                channel.push(missing_or_value(f).ok_or_else(|| {
                    parse(
                        n,
                        format!(
                            "dimension {d}, value {}: `{}` is not a number or `?`",
                            k + 1,
                            clip(f.trim())
                        ),
                    )
                })?);
            }
            if let Some(first) = channels.first()
                && channel.len() != first.len()
            {
                return Err(parse(
                    n,
                    format!(
                        "dimension {d} has {} values, dimension 0 has {}; the dimensions of one series must have equal lengths",
                        channel.len(),
                        first.len()
                    ),
                ));
            }
            channels.push(channel);
        }
        let len = channels[0].len();
        let mut values = vec![0.0; len * dims];
        for (d, channel) in channels.iter().enumerate() {
            for (t, &v) in channel.iter().enumerate() {
                values[t * dims + d] = v;
            }
        }
        series.push(Series { dims, values });
        if let Some(label) = label {
            labels.push(label);
        }
    }
    if !in_data {
        return Err(SeriesError::Parse {
            path: path.into(),
            line: 0,
            message: "no `@data` line: not a .ts file".into(),
        });
    }
    Ok(Dataset {
        series,
        labels: header.labelled.then_some(labels),
    })
}

/// At most 40 characters of `text`, for messages.
fn clip(text: &str) -> String {
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Reads a `.npy` batch of shape `[B, L]` or `[B, L, D]`.
fn read_npy(path: &Path) -> Result<Dataset, SeriesError> {
    let a = npy::read(path)?;
    let (b, l, d) = match *a.shape.as_slice() {
        [b, l] => (b, l, 1),
        [b, l, d] => (b, l, d),
        _ => {
            return Err(SeriesError::BadShape {
                input: path.display().to_string(),
                shape: a.shape,
                expected: "a batch of series is needed: shape [B, L] or [B, L, D]".into(),
            });
        }
    };
    if l == 0 || d == 0 {
        return Err(SeriesError::BadShape {
            input: path.display().to_string(),
            shape: a.shape,
            expected: "series of at least one time step and one dimension".into(),
        });
    }
    let stride = l * d;
    let series = (0..b)
        .map(|i| Series {
            dims: d,
            values: a.data[i * stride..(i + 1) * stride].to_vec(),
        })
        .collect();
    Ok(Dataset {
        series,
        labels: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::series::test_file as file;

    #[test]
    fn ucr2015_text_whitespace_and_commas() {
        let (_d, p) = file("a.txt", "  1.0e+00  0.5  -1\n\n2,3,4,NaN\n");
        let ds = read_dataset(&p).unwrap();
        assert_eq!(ds.labels.as_deref().unwrap(), ["1", "2"]);
        assert_eq!(ds.series[0].values, [0.5, -1.0]);
        // Trailing NaN padding is dropped.
        assert_eq!(ds.series[1].values, [3.0, 4.0]);
        assert_eq!(ds.equal_length("a").unwrap(), 2);
    }

    #[test]
    fn ucr2018_tsv_and_ragged() {
        let (_d, p) = file("a.tsv", "-1\t1\t2\t3\nyes\t4\tNaN\t6\n1\t7\tNaN\tNaN\n");
        let ds = read_dataset(&p).unwrap();
        assert_eq!(ds.labels.as_deref().unwrap(), ["-1", "yes", "1"]);
        assert!(ds.series[1].values[1].is_nan());
        assert_eq!(ds.series[2].len(), 1);
        let e = ds.equal_length("a.tsv").unwrap_err();
        assert!(
            matches!(
                e,
                SeriesError::Ragged {
                    index: 2,
                    len: 1,
                    expected: 3,
                    ..
                }
            ),
            "{e}"
        );
        let (_d, p) = file("b.tsv", "1\t2\n1\tx\n");
        let e = read_dataset(&p).unwrap_err().to_string();
        assert!(
            e.contains("b.tsv") && e.contains("line 2") && e.contains("`x`"),
            "{e}"
        );
    }

    #[test]
    fn ts_multivariate_missing_and_labels() {
        let text = "# comment\n@problemName X\n@univariate false\n@dimensions 2\n\
                    @classLabel true a b\n@data\n1,2,3:4,?,6:a\n7,8,9:1,2,3:b\n";
        let (_d, p) = file("x.ts", text);
        let ds = read_dataset(&p).unwrap();
        assert_eq!(ds.labels.as_deref().unwrap(), ["a", "b"]);
        let s = &ds.series[0];
        assert_eq!((s.dims, s.len()), (2, 3));
        assert_eq!(s.step(0), [1.0, 4.0]);
        assert!(s.step(1)[1].is_nan());
        assert_eq!(s.step(2), [3.0, 6.0]);
        let bad = text.replace("7,8,9:1,2,3:b", "7,8,9:1,2,3:c");
        let (_d, p) = file("y.ts", &bad);
        let e = read_dataset(&p).unwrap_err().to_string();
        assert!(
            e.contains("y.ts") && e.contains("line 8") && e.contains("`c`"),
            "{e}"
        );
        let bad = text.replace("7,8,9:1,2,3:b", "7,8,9:1,2:b");
        let (_d, p) = file("z.ts", &bad);
        let e = read_dataset(&p).unwrap_err().to_string();
        assert!(e.contains("line 8") && e.contains("equal lengths"), "{e}");
        let (_d, p) = file("w.ts", "@problemName X\n1,2\n");
        assert!(read_dataset(&p).is_err());
    }

    #[test]
    fn ts_unlabelled() {
        let (_d, p) = file("u.ts", "@classLabel false\n@data\n1,2\n3,4\n");
        let ds = read_dataset(&p).unwrap();
        assert_eq!(ds.labels, None);
        assert_eq!(ds.series[1].values, [3.0, 4.0]);
    }

    #[test]
    fn npy_batches() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("b.npy");
        npy::write_f64(&p, &[2, 3, 2], &(0..12).map(f64::from).collect::<Vec<_>>()).unwrap();
        let ds = read_dataset(&p).unwrap();
        assert_eq!(ds.len(), 2);
        assert_eq!((ds.series[1].dims, ds.series[1].len()), (2, 3));
        assert_eq!(ds.series[1].step(0), [6.0, 7.0]);
        npy::write_f64(&p, &[4], &[1.0; 4]).unwrap();
        let e = read_dataset(&p).unwrap_err();
        assert!(matches!(e, SeriesError::BadShape { .. }), "{e}");
    }

    #[test]
    fn empty_file_is_an_error() {
        let (_d, p) = file("e.txt", "\n# nothing\n");
        assert!(matches!(
            read_dataset(&p).unwrap_err(),
            SeriesError::Empty { .. }
        ));
    }
}
