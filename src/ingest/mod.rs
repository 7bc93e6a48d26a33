//! Readers and writers that turn spike-train files into an [`EventStream`].
//!
//! Four formats are supported:
//!
//! * **NWB** (Neurodata Without Borders 2.x, an HDF5 file): the units table
//!   `/units/{id, spike_times, spike_times_index}`, see [`nwb`].
//! * **CSV**: tdminer's `label,time_seconds` lines, or any columns named by a header
//!   (`spike_time_s,cluster_id`), see [`csv`].
//! * **phy / Kilosort folders** (`spike_times.npy` in samples, `spike_clusters.npy`,
//!   `params.py`, the cluster groups), see [`phy`].
//! * **Open Ephys binary recordings** (`structure.oebin` and the spike `.npy` arrays a Record
//!   Node writes, GUI 0.5 and 0.6+), see [`openephys_binary`]; units are named as the live
//!   Event Broadcaster source names them ([`openephys`]).
//!
//! [`read_spikes`] picks the reader from the path ([`InputFormat::from_path`]);
//! [`read_spikes_with`] takes the readers' options ([`ReadOptions`]).
//! Every reader validates its input completely: a malformed or hostile file gives an
//! [`IngestError`] that names the file and the dataset or line at fault; it never panics.
//!
//! # Units
//! Times are `f64` seconds exactly as stored in the file (NWB `spike_times` are read as
//! `f64`; `f32` storage is widened exactly; CSV text is parsed by Rust's correctly rounded
//! `f64` parser). They never pass through `f32`.

pub mod csv;
pub mod nwb;
pub mod openephys;
pub mod openephys_binary;
pub mod phy;
pub mod wire;

use std::fmt;
use std::path::{Path, PathBuf};

use crate::event::{EventError, EventStream, Ordering};

/// Extensions read as NWB/HDF5 files (compared case-insensitively).
pub const NWB_EXTENSIONS: &[&str] = &["nwb", "h5", "hdf5"];

/// Extensions read as tdminer CSV files (compared case-insensitively).
pub const CSV_EXTENSIONS: &[&str] = &["csv", "txt"];

/// The on-disk format of a spike-train file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputFormat {
    /// An NWB 2.x (HDF5) file with a `/units` table; read by [`nwb::read_units`].
    Nwb,
    /// A CSV file of `label,time_seconds` lines or named columns; read by
    /// `csv::read_csv_columns`.
    Csv,
    /// A phy/Kilosort output folder; read by [`phy::read_phy`].
    Phy,
    /// An Open Ephys binary recording (`structure.oebin` or a folder with one recording);
    /// read by [`openephys_binary::read_openephys_binary`].
    OpenEphysBinary,
}

impl InputFormat {
    /// Detects the format from the path: a folder holding `spike_times.npy` (or the
    /// folder's `params.py`) → [`InputFormat::Phy`]; a `structure.oebin`, or a folder holding
    /// one in itself, `recording*/`, `experiment*/recording*/` or `*/experiment*/recording*/`
    /// → [`InputFormat::OpenEphysBinary`]; by extension (case-insensitive):
    /// `.nwb`, `.h5`, `.hdf5` → [`InputFormat::Nwb`]; `.csv`, `.txt` → [`InputFormat::Csv`].
    ///
    /// The file is not opened (folders are listed).
    ///
    /// # Errors
    /// [`IngestError::UnknownFormat`] for any other extension or none, naming the path and
    /// listing what is accepted; [`IngestError::BadFile`] for a folder that is neither.
    pub fn from_path(path: &Path) -> Result<Self, IngestError> {
        if phy::is_phy_folder(path)
            || (path.file_name().is_some_and(|n| n == "params.py")
                && path.parent().is_some_and(phy::is_phy_folder))
        {
            return Ok(Self::Phy);
        }
        if openephys_binary::is_openephys_binary(path) {
            return Ok(Self::OpenEphysBinary);
        }
        if path.is_dir() {
            return Err(IngestError::BadFile {
                path: path.to_path_buf(),
                message: "is a folder without `spike_times.npy` or `structure.oebin`; a folder \
                          input must be a phy/Kilosort output (`spike_times.npy`, \
                          `spike_clusters.npy`, `params.py`) or an Open Ephys binary recording \
                          (a recording, experiment or Record Node folder)"
                    .into(),
            });
        }
        let extension = path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase());
        match extension.as_deref() {
            Some(e) if NWB_EXTENSIONS.contains(&e) => Ok(Self::Nwb),
            Some(e) if CSV_EXTENSIONS.contains(&e) => Ok(Self::Csv),
            _ => Err(IngestError::UnknownFormat {
                path: path.to_path_buf(),
                extension,
            }),
        }
    }
}

impl fmt::Display for InputFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Nwb => "NWB",
            Self::Csv => "CSV",
            Self::Phy => "phy/Kilosort",
            Self::OpenEphysBinary => "Open Ephys binary",
        })
    }
}

/// How [`read_spikes_with`] reads its input; each reader uses the fields that apply to it.
#[derive(Clone, Debug, Default)]
pub struct ReadOptions {
    /// Time order: unsorted input is an error ([`Ordering::RequireSorted`]) or sorted.
    pub ordering: Ordering,
    /// CSV: the unit and time columns by header name.
    pub columns: csv::Columns,
    /// phy: keep only the clusters of these groups (`good`, `mua`, …); Open Ephys binary:
    /// `sorted` (sorted id ≠ 0) or `unsorted` (sorted id 0) spikes only.
    pub groups: Option<Vec<String>>,
    /// phy: the sampling rate in Hz when `params.py` lacks it (or to override it).
    pub sample_rate_hz: Option<f64>,
    /// NWB: label each unit `"{value}:{id}"` by this column of the units table (e.g.
    /// `location` gives `adn:6`).
    pub unit_label: Option<String>,
    /// NWB: keep only the spikes inside the rows of [`ReadOptions::epochs_table`] tagged with
    /// any of these (`*`: every row), e.g. `wake`.
    pub epochs: Option<Vec<String>>,
    /// NWB: the `TimeIntervals` table under `/intervals/` the epochs come from (default
    /// `epochs`).
    pub epochs_table: Option<String>,
    /// Open Ephys binary: how units are named (default `{electrode}/{sorted_id}`, as the live
    /// Open Ephys source).
    pub unit_key: Option<openephys::UnitKey>,
}

/// Reads a spike-train file into a time-ordered [`EventStream`], choosing the reader from
/// the path (see [`InputFormat::from_path`]).
///
/// For NWB the event types are the units in `/units/id` order, labelled by their decimal
/// ids (units without spikes are kept); for CSV they are the labels in order of first
/// appearance; for phy the clusters in ascending id order. Times are seconds.
///
/// With [`Ordering::RequireSorted`] unsorted input (a CSV out of time order, or an NWB unit
/// whose own spike times are out of order) is an error; with [`Ordering::SortIfNeeded`] it
/// is sorted (stably).
///
/// # Errors
/// [`IngestError::UnknownFormat`] for an unsupported path, otherwise any error of
/// [`nwb::read_units`], [`csv::read_csv`], [`phy::read_phy`] or
/// [`openephys_binary::read_openephys_binary`].
pub fn read_spikes(path: &Path, ordering: Ordering) -> Result<EventStream, IngestError> {
    read_spikes_with(
        path,
        &ReadOptions {
            ordering,
            ..ReadOptions::default()
        },
    )
}

/// [`read_spikes`] with every reader's options.
///
/// # Errors
/// As [`read_spikes`]; [`IngestError::Option`] for an option the format has no use for
/// (cluster groups for a CSV file, CSV columns for a phy folder, …).
pub fn read_spikes_with(path: &Path, options: &ReadOptions) -> Result<EventStream, IngestError> {
    let format = InputFormat::from_path(path)?;
    let unused = |option: &str| IngestError::Option {
        path: path.to_path_buf(),
        message: format!("{option} applies to phy/Kilosort folders, not to {format} input"),
    };
    let csv_given = options.columns != csv::Columns::default();
    if !matches!(format, InputFormat::Phy | InputFormat::OpenEphysBinary)
        && options.groups.is_some()
    {
        return Err(IngestError::Option {
            path: path.to_path_buf(),
            message: format!(
                "`--units` applies to phy/Kilosort folders (cluster groups) and Open Ephys \
                 recordings (`sorted`, `unsorted`), not to {format} input"
            ),
        });
    }
    if format != InputFormat::OpenEphysBinary && options.unit_key.is_some() {
        return Err(IngestError::Option {
            path: path.to_path_buf(),
            message: format!(
                "`--unit-key` names Open Ephys units; {format} input names its own units"
            ),
        });
    }
    if format != InputFormat::Phy && options.sample_rate_hz.is_some() {
        return Err(unused("a sampling rate for the spike times"));
    }
    if format != InputFormat::Nwb && (options.unit_label.is_some() || options.epochs.is_some()) {
        return Err(IngestError::Option {
            path: path.to_path_buf(),
            message: format!("`--unit-label`/`--epochs` read NWB tables; {format} input has none"),
        });
    }
    if format != InputFormat::Csv && csv_given {
        return Err(IngestError::Option {
            path: path.to_path_buf(),
            message: format!(
                "`--time-column`/`--unit-column` apply to CSV files, not to {format} input"
            ),
        });
    }
    match format {
        InputFormat::Nwb => {
            let mut stream = nwb::read_units(path, options.ordering)?.stream;
            if let Some(column) = &options.unit_label {
                let values = nwb::unit_column(path, column)?;
                stream = nwb::relabel(path, &stream, &values)?;
            }
            if let Some(tags) = &options.epochs {
                let table = options.epochs_table.as_deref().unwrap_or("epochs");
                let epochs = nwb::epochs(path, table, tags)?;
                let before = stream.len();
                stream = nwb::within(path, &stream, &epochs)?;
                tracing::info!(
                    file = %path.display(),
                    table,
                    epochs = epochs.len(),
                    seconds = epochs.iter().map(|(a, b)| b - a).sum::<f64>(),
                    spikes_kept = stream.len(),
                    spikes_outside = before - stream.len(),
                    "Kept the spikes inside the chosen epochs."
                );
            }
            Ok(stream)
        }
        InputFormat::Csv => csv::read_csv_columns(path, options.ordering, &options.columns),
        InputFormat::Phy => {
            let dir = if path.is_dir() {
                path
            } else {
                path.parent().unwrap_or(path)
            };
            let phy = phy::read_phy(
                dir,
                &phy::PhyOptions {
                    ordering: options.ordering,
                    groups: options.groups.clone(),
                    sample_rate_hz: options.sample_rate_hz,
                },
            )?;
            tracing::info!(
                folder = %dir.display(),
                sample_rate_hz = phy.sample_rate_hz,
                from = phy.sample_rate_source,
                clusters = phy.clusters.iter().filter(|c| c.kept).count(),
                clusters_from = phy.clusters_file,
                "Read the phy/Kilosort folder."
            );
            Ok(phy.stream)
        }
        InputFormat::OpenEphysBinary => {
            let rec = openephys_binary::read_openephys_binary(
                path,
                &openephys_binary::OpenEphysOptions {
                    ordering: options.ordering,
                    units: options.groups.clone(),
                    unit_key: options.unit_key.unwrap_or_default(),
                },
            )?;
            tracing::info!(
                file = %rec.oebin.display(),
                gui_version = %rec.gui_version,
                units = rec.units.iter().filter(|u| u.kept).count(),
                spikes = rec.stream.len(),
                spikes_left_out = rec.dropped_spikes,
                entries_with_timestamps = rec.entries_with_timestamps,
                "Read the Open Ephys binary recording."
            );
            Ok(rec.stream)
        }
    }
}

/// Everything that can go wrong while reading or writing a spike-train file.
///
/// Every message starts with the file and names the dataset (NWB) or the 1-based line
/// (CSV) at fault, then says what is wrong, e.g.
/// ``fixtures/x.nwb: dataset `/units/spike_times_index`: entry 3 (12) is smaller than
/// entry 2 (40); the index must be non-decreasing cumulative end offsets``.
#[derive(Debug, thiserror::Error)]
#[must_use]
#[non_exhaustive]
pub enum IngestError {
    /// The file extension is not one of [`NWB_EXTENSIONS`] or [`CSV_EXTENSIONS`].
    #[error(
        "{}: unsupported file extension {}; accepted: .nwb, .h5, .hdf5 (NWB/HDF5), .csv, .txt \
         (CSV of `label,time_seconds` lines or named columns), a phy/Kilosort folder (with \
         `spike_times.npy`) or an Open Ephys binary recording (`structure.oebin`)",
        .path.display(),
        .extension.as_deref().map_or_else(|| "(none)".to_owned(), |e| format!("`.{e}`"))
    )]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Its extension (lower-cased), if it has one.
        extension: Option<String>,
    },
    /// The operating system failed to open, read, create or write the file.
    #[error("{}: cannot access the file: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file could not be opened (or created) as an HDF5 file.
    #[error("{}: cannot open as an HDF5 (NWB) file: {message}", .path.display())]
    NotHdf5 {
        /// The file.
        path: PathBuf,
        /// The HDF5 library's explanation.
        message: String,
    },
    /// The HDF5 library failed on a dataset, group or attribute.
    #[error("{}: dataset `{dataset}`: {message}", .path.display())]
    Hdf5 {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the object, e.g. `/units/spike_times`.
        dataset: String,
        /// What failed and the HDF5 library's explanation.
        message: String,
    },
    /// A group or dataset that an NWB units table needs is absent.
    #[error(
        "{}: dataset `{dataset}` is missing; an NWB units table needs the datasets \
         `/units/id`, `/units/spike_times` and `/units/spike_times_index`",
        .path.display()
    )]
    MissingDataset {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the missing group or dataset.
        dataset: String,
    },
    /// A dataset has an element type the reader cannot use (e.g. strings for times).
    #[error("{}: dataset `{dataset}` has element type {found}; expected {expected}", .path.display())]
    BadDtype {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the dataset.
        dataset: String,
        /// The element type found, in words.
        found: String,
        /// The element types accepted, in words.
        expected: &'static str,
    },
    /// A dataset is not one-dimensional.
    #[error("{}: dataset `{dataset}` has shape {shape:?}; expected a 1-D array", .path.display())]
    BadShape {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the dataset.
        dataset: String,
        /// Its shape.
        shape: Vec<usize>,
    },
    /// The index dataset does not have one entry per unit id.
    #[error(
        "{}: dataset `{dataset}` has {index_len} entries but `{ids_dataset}` has {ids_len}; \
         the index needs one cumulative end offset per unit id",
        .path.display()
    )]
    IndexLengthMismatch {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the index dataset.
        dataset: String,
        /// Number of index entries.
        index_len: usize,
        /// Absolute HDF5 path of the id dataset.
        ids_dataset: String,
        /// Number of unit ids.
        ids_len: usize,
    },
    /// The index decreases somewhere.
    #[error(
        "{}: dataset `{dataset}`: entry {position} ({value}) is smaller than entry {} \
         ({previous}); the index must be non-decreasing cumulative end offsets",
        .path.display(),
        .position.saturating_sub(1)
    )]
    NonMonotonicIndex {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the index dataset.
        dataset: String,
        /// 0-based position of the first entry smaller than its predecessor (≥ 1).
        position: usize,
        /// Its value.
        value: u64,
        /// The predecessor's value.
        previous: u64,
    },
    /// The index's last entry is not the length of the data it indexes.
    #[error(
        "{}: dataset `{dataset}`: the last entry is {last} but `{data_dataset}` has \
         {data_len} elements; the last cumulative end offset must equal that length",
        .path.display()
    )]
    IndexEndMismatch {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the index dataset.
        dataset: String,
        /// The index's last entry (0 when the index is empty).
        last: u64,
        /// Absolute HDF5 path of the indexed dataset.
        data_dataset: String,
        /// Its length.
        data_len: usize,
    },
    /// A value in a dataset is invalid (negative offset, NaN or negative time, id out of
    /// range, …); `message` says which entry and why.
    #[error("{}: dataset `{dataset}`: {message}", .path.display())]
    BadValue {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the dataset.
        dataset: String,
        /// Which entry (and unit, for spike times) and what is wrong with it.
        message: String,
    },
    /// Two units share an id.
    #[error(
        "{}: dataset `{dataset}`: unit id {id} occurs at entries {first} and {second}; \
         unit ids must be unique",
        .path.display()
    )]
    DuplicateUnitId {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the id dataset.
        dataset: String,
        /// The repeated id.
        id: i64,
        /// 0-based position of its first occurrence.
        first: usize,
        /// 0-based position of its second occurrence.
        second: usize,
    },
    /// A unit's spike times are out of order and sorting was not allowed.
    #[error(
        "{}: dataset `{dataset}`: unit {unit_id} (entry {unit_position} of the units table): \
         spike {spike} at {time} s comes after {previous} s; each unit's spike times must be \
         sorted (pass `--sort` to sort them)",
        .path.display()
    )]
    UnsortedUnit {
        /// The file.
        path: PathBuf,
        /// Absolute HDF5 path of the spike-time dataset.
        dataset: String,
        /// The unit's id.
        unit_id: i64,
        /// 0-based position of the unit in the units table.
        unit_position: usize,
        /// 0-based position of the offending spike within the unit.
        spike: usize,
        /// Its time, seconds.
        time: f64,
        /// The preceding spike's time, seconds.
        previous: f64,
    },
    /// The file holds no events at all.
    #[error("{}: {what} holds no events; there is nothing to mine", .path.display())]
    NoEvents {
        /// The file.
        path: PathBuf,
        /// Where the events were looked for (e.g. ``dataset `/units/spike_times` ``).
        what: String,
    },
    /// A CSV line is malformed.
    #[error("{}: line {line}: {message}", .path.display())]
    Csv {
        /// The file (or source name given to [`csv::parse_csv`]).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        message: String,
    },
    /// A file of a folder input (phy, Open Ephys) is missing or malformed; `message` says
    /// which entry or field and why.
    #[error("{}: {message}", .path.display())]
    BadFile {
        /// The file (or folder).
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A CSV's columns look swapped (spike times read as unit labels, or the reverse).
    #[error("{}: {message}", .path.display())]
    SwappedColumns {
        /// The file.
        path: PathBuf,
        /// What looks wrong and how to name the columns.
        message: String,
    },
    /// A reading option that the input's format has no use for.
    #[error("{}: {message}", .path.display())]
    Option {
        /// The input.
        path: PathBuf,
        /// Which option and why.
        message: String,
    },
    /// The events read break an [`EventStream`] invariant not caught earlier.
    #[error("{}: {source}", .path.display())]
    Event {
        /// The file.
        path: PathBuf,
        /// The invariant broken.
        source: EventError,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_format_from_extension() {
        assert_eq!(
            InputFormat::from_path(Path::new("a/b.nwb")).unwrap(),
            InputFormat::Nwb
        );
        assert_eq!(
            InputFormat::from_path(Path::new("b.H5")).unwrap(),
            InputFormat::Nwb
        );
        assert_eq!(
            InputFormat::from_path(Path::new("b.hdf5")).unwrap(),
            InputFormat::Nwb
        );
        assert_eq!(
            InputFormat::from_path(Path::new("b.csv")).unwrap(),
            InputFormat::Csv
        );
        assert_eq!(
            InputFormat::from_path(Path::new("b.TXT")).unwrap(),
            InputFormat::Csv
        );
        let err = InputFormat::from_path(Path::new("dir/spikes.mat"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("dir/spikes.mat") && err.contains("`.mat`"),
            "{err}"
        );
        assert!(
            err.contains(".nwb") && err.contains(".csv") && err.contains(".txt"),
            "{err}"
        );
        let err = InputFormat::from_path(Path::new("noext"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("noext") && err.contains("(none)"), "{err}");
    }

    #[test]
    fn index_error_reads_like_the_house_example() {
        let err = IngestError::NonMonotonicIndex {
            path: "fixtures/x.nwb".into(),
            dataset: "/units/spike_times_index".into(),
            position: 3,
            value: 12,
            previous: 40,
        };
        assert_eq!(
            err.to_string(),
            "fixtures/x.nwb: dataset `/units/spike_times_index`: entry 3 (12) is smaller than \
             entry 2 (40); the index must be non-decreasing cumulative end offsets"
        );
    }
}
