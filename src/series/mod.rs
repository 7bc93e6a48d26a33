//! Numeric series for the sensor stages (motif discovery, soft-DTW, shapelets, SING): readers
//! for one long series and for collections of series.
//!
//! One series ([`read_series`]) comes from an input *spec*:
//!
//! | spec                                   | format                                                   |
//! |----------------------------------------|----------------------------------------------------------|
//! | `ecg.txt`, `x.dat`, anything else      | text: one value per line; blank lines and `#` comments skipped |
//! | `x.npy`                                | NumPy array of f32/f64 (or integers), shape `[n]`, `[n, 1]` or `[1, n]` |
//! | `x.csv`, `x.csv:2`, `x.csv:voltage`    | a CSV column, by 0-based index or header name (default: the only column) |
//! | `file.nwb:/acquisition/...`            | an HDF5/NWB dataset, or the `data` of a `TimeSeries` group |
//!
//! Collections of labelled series (UCR/UEA `.ts`, `.tsv`, `.txt`, and `.npy` batches) come
//! from [`ucr::read_dataset`].
//!
//! `NaN` and `nan` are accepted in text and CSV and kept (the stages document what they do
//! with missing samples); anything else that is not a number is an error naming the file,
//! the line and the text.

pub mod npy;
pub mod ucr;

use std::io::BufRead;
use std::path::{Path, PathBuf};

use crate::ingest::IngestError;

pub use npy::Array;
pub use ucr::{Dataset, Series, read_dataset};

/// Errors of the series readers. Every message names the input.
#[derive(Debug, thiserror::Error)]
pub enum SeriesError {
    /// The file could not be opened or read.
    #[error("{}: cannot read the file: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A line or field is not a number (or the file is otherwise malformed).
    #[error("{}: line {line}: {message}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong, quoting the text.
        message: String,
    },
    /// A `.npy` file that is not a NumPy array of numbers.
    #[error("{}: not a usable .npy array: {message}", .path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The data has the wrong number of dimensions or sizes.
    #[error("{input}: shape {shape:?}: {expected}")]
    BadShape {
        /// The input spec.
        input: String,
        /// The shape found.
        shape: Vec<usize>,
        /// What was expected.
        expected: String,
    },
    /// The input holds no values.
    #[error("{input}: the series is empty")]
    Empty {
        /// The input spec.
        input: String,
    },
    /// A CSV column that is not in the file.
    #[error("{}: no column `{column}`: {message}", .path.display())]
    Column {
        /// The file.
        path: PathBuf,
        /// The column asked for.
        column: String,
        /// The columns there are.
        message: String,
    },
    /// An HDF5/NWB input failed.
    #[error(transparent)]
    Hdf5(#[from] IngestError),
    /// A collection of series whose lengths differ where equal lengths are required.
    #[error(
        "{input}: series {index} has {len} samples, series 0 has {expected}; equal lengths are required"
    )]
    Ragged {
        /// The input spec.
        input: String,
        /// 0-based index of the first series of another length.
        index: usize,
        /// Its length.
        len: usize,
        /// The length of series 0.
        expected: usize,
    },
}

/// Extensions read as HDF5/NWB when the spec has a `:/path` suffix.
const HDF5_EXTENSIONS: &[&str] = &["nwb", "h5", "hdf5"];

/// Where one series comes from: a parsed input spec (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeriesSpec {
    /// A text file, one value per line.
    Text(PathBuf),
    /// A `.npy` file.
    Npy(PathBuf),
    /// A CSV file and the column (index or header name; `None`: the only column).
    Csv(PathBuf, Option<String>),
    /// An HDF5/NWB file and the object path inside it.
    Hdf5(PathBuf, String),
}

impl SeriesSpec {
    /// Parses `spec`: `file.nwb:/path`, `file.csv[:column]`, `file.npy`, or a text file.
    #[must_use]
    pub fn parse(spec: &str) -> Self {
        if let Some((file, object)) = spec.rsplit_once(':') {
            let ext = extension(Path::new(file));
            if HDF5_EXTENSIONS.contains(&ext.as_str()) {
                return Self::Hdf5(file.into(), object.into());
            }
            if ext == "csv" && !object.is_empty() {
                return Self::Csv(file.into(), Some(object.into()));
            }
        }
        let path = PathBuf::from(spec);
        match extension(&path).as_str() {
            "npy" => Self::Npy(path),
            "csv" => Self::Csv(path, None),
            _ => Self::Text(path),
        }
    }
}

fn extension(path: &Path) -> String {
    path.extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default()
}

/// Reads one series (f64 values, in order) from an input spec (see the module docs).
///
/// # Errors
/// [`SeriesError`] naming the input: unreadable file, a value that is not a number (with its
/// line), a `.npy` or HDF5 array that is not one-dimensional (or one column), a missing CSV
/// column or HDF5 object, or no values at all ([`SeriesError::Empty`]).
pub fn read_series(spec: &str) -> Result<Vec<f64>, SeriesError> {
    let values = match SeriesSpec::parse(spec) {
        SeriesSpec::Text(path) => read_text(&path)?,
        SeriesSpec::Npy(path) => one_dimensional(spec, npy::read(&path)?)?,
        SeriesSpec::Csv(path, column) => read_csv_column(&path, column.as_deref())?,
        SeriesSpec::Hdf5(path, object) => {
            let (shape, data) = crate::ingest::nwb::read_numeric(&path, &object)?;
            one_dimensional(spec, Array { shape, data })?
        }
    };
    if values.is_empty() {
        return Err(SeriesError::Empty { input: spec.into() });
    }
    Ok(values)
}

/// A `[n]`, `[n, 1]` or `[1, n]` array as a vector.
fn one_dimensional(input: &str, a: Array) -> Result<Vec<f64>, SeriesError> {
    match *a.shape.as_slice() {
        [_] | [_, 1] | [1, _] => Ok(a.data),
        _ => Err(SeriesError::BadShape {
            input: input.into(),
            shape: a.shape,
            expected: "one series is needed: shape [n], [n, 1] or [1, n]".into(),
        }),
    }
}

fn open(path: &Path) -> Result<std::io::BufReader<std::fs::File>, SeriesError> {
    std::fs::File::open(path)
        .map(std::io::BufReader::new)
        .map_err(|source| SeriesError::Io {
            path: path.into(),
            source,
        })
}

/// Parses one number; `NaN`/`nan` are NaN, surrounding whitespace is ignored.
pub(crate) fn parse_value(text: &str) -> Option<f64> {
    text.trim().parse::<f64>().ok()
}

/// Reads a text file of one value per line.
///
/// # Errors
/// [`SeriesError::Io`] if it cannot be read, [`SeriesError::Parse`] for a line that is not
/// one number.
pub(crate) fn read_text(path: &Path) -> Result<Vec<f64>, SeriesError> {
    let mut values = Vec::new();
    for (i, line) in open(path)?.lines().enumerate() {
        let line = line.map_err(|source| SeriesError::Io {
            path: path.into(),
            source,
        })?;
        let text = line.split('#').next().unwrap_or("").trim();
        if text.is_empty() {
            continue;
        }
        values.push(parse_value(text).ok_or_else(|| SeriesError::Parse {
            path: path.into(),
            line: i + 1,
            message: format!("`{text}` is not a number (one value per line is expected)"),
        })?);
    }
    Ok(values)
}

/// Reads one column of a CSV file: by 0-based index or header name; `None` means the file
/// must have exactly one column. A first row that is not all numbers is the header.
///
/// # Errors
/// [`SeriesError::Io`], [`SeriesError::Parse`] (malformed CSV or a non-number in the
/// column), [`SeriesError::Column`] for a column that is not there.
pub(crate) fn read_csv_column(path: &Path, column: Option<&str>) -> Result<Vec<f64>, SeriesError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(open(path)?);
    let parse_err = |line: usize, e: csv::Error| SeriesError::Parse {
        path: path.into(),
        line,
        message: e.to_string(),
    };
    let mut records = reader.records();
    let Some(first) = records.next() else {
        return Ok(Vec::new());
    };
    let first = first.map_err(|e| parse_err(1, e))?;
    let header = first.iter().any(|f| parse_value(f).is_none());
    let names: Vec<String> = first.iter().map(str::to_owned).collect();
    let col =
        match column {
            None if names.len() == 1 => 0,
            None => {
                return Err(SeriesError::Column {
                    path: path.into(),
                    column: String::new(),
                    message: format!(
                        "the file has {} columns; name one as `{}:COLUMN` (index or header)",
                        names.len(),
                        path.display()
                    ),
                });
            }
            Some(c) => match c.parse::<usize>() {
                Ok(i) if i < names.len() => i,
                _ => names.iter().position(|n| header && n == c).ok_or_else(|| {
                    SeriesError::Column {
                        path: path.into(),
                        column: c.into(),
                        message: if header {
                            format!("the header has {names:?}")
                        } else {
                            format!("the file has {} columns and no header", names.len())
                        },
                    }
                })?,
            },
        };
    let mut values = Vec::new();
    let mut push = |record: &csv::StringRecord, line: usize| -> Result<(), SeriesError> {
        let field = record.get(col).ok_or_else(|| SeriesError::Parse {
            path: path.into(),
            line,
            message: format!("has {} fields, column {col} is missing", record.len()),
        })?;
        values.push(parse_value(field).ok_or_else(|| SeriesError::Parse {
            path: path.into(),
            line,
            message: format!("column {col}: `{field}` is not a number"),
        })?);
        Ok(())
    };
    if !header {
        push(&first, 1)?;
    }
    for record in records {
        let record = record.map_err(|e| {
            let line = e.position().map_or(0, |p| p.line() as usize);
            parse_err(line, e)
        })?;
        let line = record.position().map_or(0, |p| p.line() as usize);
        push(&record, line)?;
    }
    Ok(values)
}

/// Writes `text` to a file `name` in a fresh temporary directory (kept alive by the guard).
#[cfg(test)]
pub(crate) fn test_file(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[cfg(test)]
mod tests {
    use super::test_file as file;
    use super::*;

    #[test]
    fn specs_parse_by_extension_and_suffix() {
        assert_eq!(
            SeriesSpec::parse("a.nwb:/acquisition/x"),
            SeriesSpec::Hdf5("a.nwb".into(), "/acquisition/x".into())
        );
        assert_eq!(
            SeriesSpec::parse("a.csv:volts"),
            SeriesSpec::Csv("a.csv".into(), Some("volts".into()))
        );
        assert_eq!(
            SeriesSpec::parse("a.csv"),
            SeriesSpec::Csv("a.csv".into(), None)
        );
        assert_eq!(SeriesSpec::parse("a.NPY"), SeriesSpec::Npy("a.NPY".into()));
        assert_eq!(
            SeriesSpec::parse("C:x.txt"),
            SeriesSpec::Text("C:x.txt".into())
        );
    }

    #[test]
    fn text_reads_values_nan_and_names_bad_lines() {
        let (_d, p) = file("x.txt", "1.5\n# comment\n\n-2e-3\nNaN\n");
        let v = read_text(&p).unwrap();
        assert_eq!(v[..2], [1.5, -2e-3]);
        assert!(v[2].is_nan());
        let (_d, p) = file("y.txt", "1\nabc\n");
        let e = read_text(&p).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("`abc`"), "{e}");
    }

    #[test]
    fn csv_columns_by_index_and_header() {
        let (_d, p) = file("x.csv", "t,volts\n0,1.0\n1,2.5\n");
        assert_eq!(read_csv_column(&p, Some("volts")).unwrap(), [1.0, 2.5]);
        assert_eq!(read_csv_column(&p, Some("0")).unwrap(), [0.0, 1.0]);
        let e = read_csv_column(&p, Some("amps")).unwrap_err().to_string();
        assert!(e.contains("amps") && e.contains("volts"), "{e}");
        let e = read_csv_column(&p, None).unwrap_err().to_string();
        assert!(e.contains("2 columns"), "{e}");
        let (_d, p) = file("y.csv", "3\n4\n");
        assert_eq!(read_csv_column(&p, None).unwrap(), [3.0, 4.0]);
        let (_d, p) = file("z.csv", "a\n4\nfour\n");
        let e = read_csv_column(&p, None).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("`four`"), "{e}");
    }

    #[test]
    fn empty_input_is_an_error() {
        let (_d, p) = file("e.txt", "# nothing\n");
        let e = read_series(p.to_str().unwrap()).unwrap_err();
        assert!(matches!(e, SeriesError::Empty { .. }), "{e}");
    }
}
