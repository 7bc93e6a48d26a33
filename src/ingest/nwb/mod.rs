//! NWB 2.x (HDF5) units-table reader and writer.
//!
//! An NWB file stores spike-sorted units as a ragged array in the group `/units`:
//!
//! | dataset                      | shape     | contents                                           |
//! |------------------------------|-----------|----------------------------------------------------|
//! | `/units/id`                  | `[k]`     | integer unit ids                                   |
//! | `/units/spike_times`         | `[n]`     | spike times, `float64` seconds, grouped by unit    |
//! | `/units/spike_times_index`   | `[k]`     | cumulative END offsets into `spike_times`          |
//!
//! Unit `u`'s spikes are `spike_times[index[u-1]..index[u]]` (with `index[-1] = 0`).
//!
//! [`read_units`] validates all of it (see its errors), checks that each unit's times are
//! sorted (or sorts them), and k-way merges the units into one time-ordered
//! [`EventStream`] in `O(n log k)`. [`write_units`] writes the inverse: a minimal NWB file
//! with just a units table, which [`read_units`] reads back bit-exactly.
//!
//! Times are `f64` seconds throughout; `float32` storage is accepted and widened exactly.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::collections::HashMap;
use std::collections::binary_heap::PeekMut;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use hdf5::types::{FloatSize, TypeDescriptor, VarLenUnicode};
use hdf5::{Dataset, File, Group, H5Type, Location, ObjectReference, ObjectReference1};

pub mod dynamic;
mod tables;
pub use tables::{epochs, relabel, unit_column, within};

use super::IngestError;
use crate::event::{Alphabet, EventStream, EventType, Ordering};

/// HDF5 path of the units group.
pub(crate) const UNITS_GROUP: &str = "/units";
/// HDF5 path of the unit-id dataset.
pub(crate) const UNIT_IDS: &str = "/units/id";
/// HDF5 path of the spike-time dataset (seconds).
pub(crate) const SPIKE_TIMES: &str = "/units/spike_times";
/// HDF5 path of the spike-time index dataset (cumulative end offsets).
pub(crate) const SPIKE_TIMES_INDEX: &str = "/units/spike_times_index";

/// The NWB schema version written by [`write_units`].
pub(crate) const NWB_VERSION: &str = "2.4.0";

/// The units table of an NWB file, merged into one event stream.
#[derive(Clone, Debug, PartialEq)]
pub struct NwbUnits {
    /// All spikes of all units in time order (ties: lower unit index first). Event type `u`
    /// is the `u`-th unit of `/units/id`, labelled by the decimal string of its id. Units
    /// without spikes are in the alphabet all the same.
    pub stream: EventStream,
    /// The unit ids, in file order. Shape: `[k]` (= `stream.alphabet().len()`).
    pub unit_ids: Vec<i64>,
    /// Number of spikes of each unit, in file order. Shape: `[k]`; sums to `stream.len()`.
    pub spikes_per_unit: Vec<u64>,
}

/// Reads the units table of an NWB file and merges all units into one time-ordered stream.
///
/// Reads `/units/id` (any integer type), `/units/spike_times` (`float64` seconds, the NWB
/// standard; `float32` is widened exactly) and `/units/spike_times_index` (cumulative end
/// offsets; any unsigned integer width, or a signed one whose entries are all ≥ 0).
///
/// Each unit's own spike times must be sorted when `ordering` is
/// [`Ordering::RequireSorted`]; with [`Ordering::SortIfNeeded`] unsorted units are sorted.
/// The units are then k-way merged in `O(n log k)`; equal times across units keep the lower
/// unit index first.
///
/// # Errors
/// Each message names the file and the dataset:
/// * [`IngestError::Io`] if the file cannot be accessed, [`IngestError::NotHdf5`] if it is
///   not an HDF5 file;
/// * [`IngestError::MissingDataset`] if `/units` or one of its three datasets is absent,
///   [`IngestError::Hdf5`] if one cannot be opened or read;
/// * [`IngestError::BadShape`] if a dataset is not 1-D, [`IngestError::BadDtype`] if ids or
///   index are not integers or times not floats (e.g. strings);
/// * [`IngestError::IndexLengthMismatch`] if index and ids differ in length,
///   [`IngestError::NonMonotonicIndex`] if the index decreases,
///   [`IngestError::IndexEndMismatch`] if its last entry is not `len(spike_times)`;
/// * [`IngestError::DuplicateUnitId`] for a repeated id; [`IngestError::BadValue`] for a
///   negative index entry, an id that does not fit `i64`, or a NaN, infinite or negative
///   spike time (naming the unit id and the spike's position);
/// * [`IngestError::UnsortedUnit`] if a unit's times are unsorted and `ordering` is
///   [`Ordering::RequireSorted`];
/// * [`IngestError::NoEvents`] if there are no spikes at all.
pub fn read_units(path: &Path, ordering: Ordering) -> Result<NwbUnits, IngestError> {
    let r = Reader { path };
    let file = r.open()?;
    if !file.link_exists("units") {
        return Err(r.missing(UNITS_GROUP));
    }
    let units = file
        .group("units")
        .map_err(|e| r.hdf5(UNITS_GROUP, "cannot open the group", &e))?;
    let ids_ds = r.dataset(&units, UNIT_IDS)?;
    let index_ds = r.dataset(&units, SPIKE_TIMES_INDEX)?;
    let times_ds = r.dataset(&units, SPIKE_TIMES)?;

    // Shapes first: metadata only, so inconsistent files are refused before any data read.
    let n_units = r.len_1d(&ids_ds, UNIT_IDS)?;
    let n_index = r.len_1d(&index_ds, SPIKE_TIMES_INDEX)?;
    let n_spikes = r.len_1d(&times_ds, SPIKE_TIMES)?;
    if n_index != n_units {
        return Err(IngestError::IndexLengthMismatch {
            path: path.into(),
            dataset: SPIKE_TIMES_INDEX.into(),
            index_len: n_index,
            ids_dataset: UNIT_IDS.into(),
            ids_len: n_units,
        });
    }
    if u32::try_from(n_units).is_err() {
        return Err(r.bad_value(
            UNIT_IDS,
            format!(
                "{n_units} units exceed the limit of {} event types",
                u32::MAX
            ),
        ));
    }

    let unit_ids = r.read_ids(&ids_ds)?;
    let index = r.read_index(&index_ds)?;
    let last = index.last().copied().unwrap_or(0);
    if u64::try_from(n_spikes).ok() != Some(last) {
        return Err(IngestError::IndexEndMismatch {
            path: path.into(),
            dataset: SPIKE_TIMES_INDEX.into(),
            last,
            data_dataset: SPIKE_TIMES.into(),
            data_len: n_spikes,
        });
    }
    if n_spikes == 0 {
        return Err(IngestError::NoEvents {
            path: path.into(),
            what: format!("dataset `{SPIKE_TIMES}` ({n_units} units)"),
        });
    }
    let mut times = r.read_times(&times_ds)?;
    if times.len() != n_spikes {
        return Err(r.bad_value(
            SPIKE_TIMES,
            format!("read {} values but the dataset has {n_spikes}", times.len()),
        ));
    }

    // Unit u owns times[bounds[u].0..bounds[u].1]; the index was checked monotonic and its
    // last entry equals times.len(), so every bound fits in usize and in range.
    let mut bounds = Vec::with_capacity(n_units);
    let mut start = 0usize;
    for &end in &index {
        let end = usize::try_from(end).map_err(|_| {
            r.bad_value(
                SPIKE_TIMES_INDEX,
                format!("offset {end} does not fit in memory"),
            )
        })?;
        bounds.push((start, end));
        start = end;
    }
    let spikes_per_unit: Vec<u64> = bounds.iter().map(|&(s, e)| (e - s) as u64).collect();

    let sorted_units = r.check_unit_times(&mut times, &bounds, &unit_ids, ordering)?;
    if sorted_units > 0 {
        tracing::info!(
            file = %path.display(),
            units = sorted_units,
            "sorted the spike times of units whose times were out of order"
        );
    }

    let (merged_times, types) = merge_sorted_units(&times, &bounds);
    let alphabet =
        Alphabet::from_labels(unit_ids.iter().map(i64::to_string)).map_err(|source| {
            IngestError::Event {
                path: path.into(),
                source,
            }
        })?;
    let stream = EventStream::new(merged_times, types, alphabet, Ordering::RequireSorted).map_err(
        |source| IngestError::Event {
            path: path.into(),
            source,
        },
    )?;
    tracing::debug!(
        file = %path.display(),
        units = n_units,
        spikes = stream.len(),
        "read NWB units table"
    );
    Ok(NwbUnits {
        stream,
        unit_ids,
        spikes_per_unit,
    })
}

/// One unit's cursor in the k-way merge. Ordered so that [`BinaryHeap`] (a max-heap) pops
/// the earliest time first, and on equal times the lower unit index first.
struct Head {
    time: f64,
    unit: u32,
    pos: usize,
    end: usize,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Times are validated finite, so partial_cmp never fails; -0.0 and +0.0 tie.
        other
            .time
            .partial_cmp(&self.time)
            .unwrap_or(CmpOrdering::Equal)
            .then_with(|| other.unit.cmp(&self.unit))
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == CmpOrdering::Equal
    }
}

impl Eq for Head {}

/// Merges per-unit sorted runs `times[s..e]` (one per entry of `bounds`, unit index =
/// position in `bounds`) into one sorted stream. `O(n log k)`.
///
/// `bounds.len()` must fit in `u32` (checked by the caller).
fn merge_sorted_units(times: &[f64], bounds: &[(usize, usize)]) -> (Vec<f64>, Vec<EventType>) {
    let n: usize = bounds.iter().map(|&(s, e)| e - s).sum();
    let mut out_times = Vec::with_capacity(n);
    let mut out_types = Vec::with_capacity(n);
    let mut heap: BinaryHeap<Head> = bounds
        .iter()
        .zip(0u32..)
        .filter(|&(&(s, e), _)| s < e)
        .map(|(&(s, e), unit)| Head {
            time: times[s],
            unit,
            pos: s,
            end: e,
        })
        .collect();
    while let Some(mut top) = heap.peek_mut() {
        out_times.push(top.time);
        out_types.push(EventType(top.unit));
        top.pos += 1;
        if top.pos < top.end {
            top.time = times[top.pos];
            // Dropping `top` restores the heap order.
        } else {
            PeekMut::pop(top);
        }
    }
    (out_times, out_types)
}

/// Error construction and typed reads for one input file.
struct Reader<'a> {
    path: &'a Path,
}

impl Reader<'_> {
    /// Opens the file: an I/O error if it cannot be read at all, `NotHdf5` if HDF5 refuses it.
    fn open(&self) -> Result<File, IngestError> {
        std::fs::metadata(self.path).map_err(|source| IngestError::Io {
            path: self.path.into(),
            source,
        })?;
        File::open(self.path).map_err(|e| IngestError::NotHdf5 {
            path: self.path.into(),
            message: e.to_string(),
        })
    }

    fn missing(&self, dataset: &str) -> IngestError {
        IngestError::MissingDataset {
            path: self.path.into(),
            dataset: dataset.into(),
        }
    }

    fn hdf5(&self, dataset: &str, what: &str, e: &hdf5::Error) -> IngestError {
        IngestError::Hdf5 {
            path: self.path.into(),
            dataset: dataset.into(),
            message: format!("{what}: {e}"),
        }
    }

    fn bad_value(&self, dataset: &str, message: String) -> IngestError {
        IngestError::BadValue {
            path: self.path.into(),
            dataset: dataset.into(),
            message,
        }
    }

    fn bad_dtype(&self, dataset: &str, found: String, expected: &'static str) -> IngestError {
        IngestError::BadDtype {
            path: self.path.into(),
            dataset: dataset.into(),
            found,
            expected,
        }
    }

    /// Opens `/units/<name>` given its absolute path `full`.
    fn dataset(&self, units: &Group, full: &str) -> Result<Dataset, IngestError> {
        let name = full.rsplit('/').next().unwrap_or(full);
        if !units.link_exists(name) {
            return Err(self.missing(full));
        }
        units
            .dataset(name)
            .map_err(|e| self.hdf5(full, "cannot open as a dataset", &e))
    }

    /// The length of a 1-D dataset.
    fn len_1d(&self, ds: &Dataset, name: &str) -> Result<usize, IngestError> {
        let shape = ds
            .get_shape()
            .map_err(|e| self.hdf5(name, "cannot read the shape", &e))?;
        match *shape.as_slice() {
            [n] => Ok(n),
            _ => Err(IngestError::BadShape {
                path: self.path.into(),
                dataset: name.into(),
                shape,
            }),
        }
    }

    fn descriptor(
        &self,
        ds: &Dataset,
        name: &str,
        expected: &'static str,
    ) -> Result<TypeDescriptor, IngestError> {
        ds.dtype()
            .and_then(|t| t.to_descriptor())
            .map_err(|e| self.bad_dtype(name, format!("unsupported ({e})"), expected))
    }

    /// Reads a whole dataset, converting to `T`. The buffer is reserved fallibly, so a
    /// hostile shape (billions of elements in a tiny file) gives an error, not an abort.
    fn read_raw<T: H5Type + Copy + Default>(
        &self,
        ds: &Dataset,
        name: &str,
    ) -> Result<Vec<T>, IngestError> {
        let n = ds.size();
        let mut buf: Vec<T> = Vec::new();
        buf.try_reserve_exact(n).map_err(|e| {
            self.bad_value(
                name,
                format!("cannot allocate memory for {n} elements: {e}"),
            )
        })?;
        buf.resize(n, T::default());
        ds.read_into_raw(&mut buf)
            .map_err(|e| self.hdf5(name, "cannot read the data", &e))?;
        Ok(buf)
    }

    /// Reads an integer dataset as `u64`, or as `i64` for signed storage, without letting
    /// HDF5 clamp out-of-range values.
    fn read_integers(&self, ds: &Dataset, name: &str) -> Result<Integers, IngestError> {
        const EXPECTED: &str = "an integer type (uint8/16/32/64 or int8/16/32/64)";
        match self.descriptor(ds, name, EXPECTED)? {
            // Widening unsigned → u64 and signed → i64 is exact in HDF5's conversions.
            TypeDescriptor::Unsigned(_) => Ok(Integers::Unsigned(self.read_raw::<u64>(ds, name)?)),
            TypeDescriptor::Integer(_) => Ok(Integers::Signed(self.read_raw::<i64>(ds, name)?)),
            other => Err(self.bad_dtype(name, other.to_string(), EXPECTED)),
        }
    }

    fn read_ids(&self, ds: &Dataset) -> Result<Vec<i64>, IngestError> {
        let ids = match self.read_integers(ds, UNIT_IDS)? {
            Integers::Signed(v) => v,
            Integers::Unsigned(v) => v
                .into_iter()
                .enumerate()
                .map(|(i, id)| {
                    i64::try_from(id).map_err(|_| {
                        self.bad_value(
                            UNIT_IDS,
                            format!("entry {i}: id {id} does not fit in int64"),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let mut seen: HashMap<i64, usize> = HashMap::with_capacity(ids.len());
        for (i, &id) in ids.iter().enumerate() {
            if let Some(&first) = seen.get(&id) {
                return Err(IngestError::DuplicateUnitId {
                    path: self.path.into(),
                    dataset: UNIT_IDS.into(),
                    id,
                    first,
                    second: i,
                });
            }
            seen.insert(id, i);
        }
        Ok(ids)
    }

    /// Reads the cumulative end offsets and checks they are ≥ 0 and non-decreasing.
    fn read_index(&self, ds: &Dataset) -> Result<Vec<u64>, IngestError> {
        let index = match self.read_integers(ds, SPIKE_TIMES_INDEX)? {
            Integers::Unsigned(v) => v,
            Integers::Signed(v) => v
                .into_iter()
                .enumerate()
                .map(|(i, x)| {
                    u64::try_from(x).map_err(|_| {
                        self.bad_value(
                            SPIKE_TIMES_INDEX,
                            format!(
                                "entry {i} is negative ({x}); the index holds cumulative end \
                                 offsets, which are >= 0"
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        if let Some(i) = (1..index.len()).find(|&i| index[i] < index[i - 1]) {
            return Err(IngestError::NonMonotonicIndex {
                path: self.path.into(),
                dataset: SPIKE_TIMES_INDEX.into(),
                position: i,
                value: index[i],
                previous: index[i - 1],
            });
        }
        Ok(index)
    }

    /// Checks every spike time (finite, >= 0) and each unit's order; sorts unsorted units
    /// when `ordering` allows it. Returns how many units were sorted.
    fn check_unit_times(
        &self,
        times: &mut [f64],
        bounds: &[(usize, usize)],
        unit_ids: &[i64],
        ordering: Ordering,
    ) -> Result<usize, IngestError> {
        let mut sorted_units = 0usize;
        for (u, &(s, e)) in bounds.iter().enumerate() {
            let unit = &mut times[s..e];
            let id = unit_ids[u];
            for (j, &t) in unit.iter().enumerate() {
                if !t.is_finite() {
                    return Err(self.bad_value(
                        SPIKE_TIMES,
                        format!(
                            "unit {id} (entry {u} of the units table): spike {j} (element {} of \
                             the dataset) has a non-finite time ({t})",
                            s + j
                        ),
                    ));
                }
                if t < 0.0 {
                    return Err(self.bad_value(
                        SPIKE_TIMES,
                        format!(
                            "unit {id} (entry {u} of the units table): spike {j} (element {} of \
                             the dataset) has a negative time ({t} s); spike times are seconds \
                             from the session's reference time and must be >= 0",
                            s + j
                        ),
                    ));
                }
            }
            if let Some(j) = (1..unit.len()).find(|&j| unit[j] < unit[j - 1]) {
                match ordering {
                    Ordering::RequireSorted => {
                        return Err(IngestError::UnsortedUnit {
                            path: self.path.into(),
                            dataset: SPIKE_TIMES.into(),
                            unit_id: id,
                            unit_position: u,
                            spike: j,
                            time: unit[j],
                            previous: unit[j - 1],
                        });
                    }
                    Ordering::SortIfNeeded => {
                        // All finite: total_cmp agrees with `<` except that -0.0 < +0.0.
                        unit.sort_by(f64::total_cmp);
                        sorted_units += 1;
                    }
                }
            }
        }
        Ok(sorted_units)
    }

    /// Reads spike times as `f64` seconds (`float32` storage widened exactly in Rust).
    fn read_times(&self, ds: &Dataset) -> Result<Vec<f64>, IngestError> {
        const EXPECTED: &str = "float64 seconds (the NWB standard) or float32";
        match self.descriptor(ds, SPIKE_TIMES, EXPECTED)? {
            TypeDescriptor::Float(FloatSize::U8) => self.read_raw::<f64>(ds, SPIKE_TIMES),
            TypeDescriptor::Float(FloatSize::U4) => {
                tracing::warn!(
                    file = %self.path.display(),
                    dataset = SPIKE_TIMES,
                    "spike times are stored as float32 (NWB uses float64); widening exactly, \
                     but the file's time resolution is limited"
                );
                Ok(self
                    .read_raw::<f32>(ds, SPIKE_TIMES)?
                    .into_iter()
                    .map(f64::from)
                    .collect())
            }
            other => Err(self.bad_dtype(SPIKE_TIMES, other.to_string(), EXPECTED)),
        }
    }
}

/// An NWB `TimeSeries` (or `SpatialSeries`) read whole.
#[derive(Clone, Debug, PartialEq)]
pub struct TimeSeries {
    /// Channels per sample: 1 for a 1-D `data`, the second dimension of a 2-D one.
    pub channels: usize,
    /// Sample-major values, shape `[samples, channels]`, converted to f64 (NaN kept).
    pub values: Vec<f64>,
    /// When each sample was taken.
    pub time: SeriesTime,
}

/// The time base of a [`TimeSeries`].
#[derive(Clone, Debug, PartialEq)]
pub enum SeriesTime {
    /// `starting_time` (seconds) and its attribute `rate` (Hz): sample k at
    /// `start_s + k / rate_hz`.
    Regular {
        /// Time of sample 0, seconds.
        start_s: f64,
        /// Sampling rate, Hz (> 0).
        rate_hz: f64,
    },
    /// `timestamps`, seconds, one per sample, non-decreasing.
    Timestamps(Vec<f64>),
}

impl TimeSeries {
    /// Number of samples.
    #[must_use]
    pub fn samples(&self) -> usize {
        self.values.len() / self.channels.max(1)
    }

    /// Time of sample `k`, seconds.
    #[must_use]
    pub fn time_of(&self, k: usize) -> f64 {
        match &self.time {
            SeriesTime::Regular { start_s, rate_hz } => start_s + k as f64 / rate_hz,
            SeriesTime::Timestamps(t) => t.get(k).copied().unwrap_or(f64::NAN),
        }
    }

    /// Samples `samples` (a range of sample indices) as a [`SensorFrame`](crate::record::SensorFrame) at the nominal rate.
    ///
    /// # Panics
    /// If the range is empty or goes past the last sample.
    #[must_use]
    pub fn frame(&self, samples: std::ops::Range<usize>) -> crate::record::SensorFrame {
        let ch = self.channels;
        crate::record::SensorFrame {
            first_sample: samples.start as u64,
            t0_s: self.time_of(samples.start),
            rate_hz: self.rate_hz(),
            channels: ch,
            values: self.values[samples.start * ch..samples.end * ch].to_vec(),
        }
    }

    /// The nominal rate, Hz: `rate` for a regular series, else (samples − 1) over the
    /// timestamps' span (1 Hz for fewer than two distinct timestamps).
    #[must_use]
    pub fn rate_hz(&self) -> f64 {
        match &self.time {
            SeriesTime::Regular { rate_hz, .. } => *rate_hz,
            SeriesTime::Timestamps(t) => {
                let span = t.last().copied().unwrap_or(0.0) - t.first().copied().unwrap_or(0.0);
                if t.len() > 1 && span > 0.0 {
                    (t.len() - 1) as f64 / span
                } else {
                    1.0
                }
            }
        }
    }
}

/// Reads the NWB time series at HDF5 path `series` (e.g. `/acquisition/CompassDirection/rz`):
/// `<series>/data` (1-D or 2-D `[samples, channels]`, any float or integer type) and either
/// `<series>/timestamps` (f64 seconds) or `<series>/starting_time` with attribute `rate` (Hz).
///
/// # Errors
/// [`IngestError`] naming the file and dataset: a missing group or dataset, a shape that is
/// not 1-D/2-D, a non-numeric type, timestamps of the wrong length, NaN or decreasing, a
/// missing or non-positive `rate`, or no samples at all.
pub fn read_timeseries(path: &Path, series: &str) -> Result<TimeSeries, IngestError> {
    let r = Reader { path };
    let file = r.open()?;
    let series = format!("/{}", series.trim_matches('/'));
    let missing = |what: &str, why: &str| IngestError::BadValue {
        path: path.into(),
        dataset: what.into(),
        message: why.into(),
    };
    let group = file.group(&series).map_err(|_| {
        missing(
            &series,
            "no such group; a time series is a group holding `data` and `timestamps` or \
             `starting_time`",
        )
    })?;
    let data_name = format!("{series}/data");
    let data = group
        .dataset("data")
        .map_err(|_| missing(&data_name, "missing (a time series needs `data`)"))?;
    let shape = data
        .get_shape()
        .map_err(|e| r.hdf5(&data_name, "cannot read the shape", &e))?;
    let (samples, channels) = match *shape.as_slice() {
        [n] => (n, 1),
        [n, c] if c > 0 => (n, c),
        _ => {
            return Err(IngestError::BadShape {
                path: path.into(),
                dataset: data_name,
                shape,
            });
        }
    };
    if samples == 0 {
        return Err(IngestError::NoEvents {
            path: path.into(),
            what: format!("dataset `{data_name}`"),
        });
    }
    const NUMERIC: &str = "a float or integer type";
    match r.descriptor(&data, &data_name, NUMERIC)? {
        TypeDescriptor::Float(_) | TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {}
        other => return Err(r.bad_dtype(&data_name, other.to_string(), NUMERIC)),
    }
    let values = r.read_raw::<f64>(&data, &data_name)?;
    let time = if group.link_exists("timestamps") {
        let ts_name = format!("{series}/timestamps");
        let ds = group
            .dataset("timestamps")
            .map_err(|e| r.hdf5(&ts_name, "cannot open as a dataset", &e))?;
        let n = r.len_1d(&ds, &ts_name)?;
        if n != samples {
            return Err(r.bad_value(
                &ts_name,
                format!("{n} timestamps for {samples} samples of `{data_name}`"),
            ));
        }
        let t = r.read_raw::<f64>(&ds, &ts_name)?;
        for (i, w) in t.windows(2).enumerate() {
            if w[1] < w[0] || w[1].is_nan() {
                return Err(r.bad_value(
                    &ts_name,
                    format!(
                        "entry {}: {} s after {} s; timestamps must be non-decreasing",
                        i + 1,
                        w[1],
                        w[0]
                    ),
                ));
            }
        }
        if t.iter().any(|x| !x.is_finite() || *x < 0.0) {
            return Err(r.bad_value(&ts_name, "NaN, infinite or negative timestamp".into()));
        }
        SeriesTime::Timestamps(t)
    } else if group.link_exists("starting_time") {
        let st_name = format!("{series}/starting_time");
        let ds = group
            .dataset("starting_time")
            .map_err(|e| r.hdf5(&st_name, "cannot open as a dataset", &e))?;
        let start_s = ds
            .read_scalar::<f64>()
            .map_err(|e| r.hdf5(&st_name, "cannot read a scalar", &e))?;
        let rate_hz = ds
            .attr("rate")
            .and_then(|a| a.read_scalar::<f64>())
            .map_err(|e| r.hdf5(&st_name, "cannot read the attribute `rate` (Hz)", &e))?;
        if !(start_s.is_finite() && start_s >= 0.0) {
            return Err(r.bad_value(&st_name, format!("starting time {start_s} s")));
        }
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(r.bad_value(&st_name, format!("rate {rate_hz} Hz must be positive")));
        }
        SeriesTime::Regular { start_s, rate_hz }
    } else {
        return Err(missing(
            &series,
            "has neither `timestamps` nor `starting_time` (with attribute `rate`)",
        ));
    };
    Ok(TimeSeries {
        channels,
        values,
        time,
    })
}

/// Integer column contents, by signedness of the stored type.
enum Integers {
    Unsigned(Vec<u64>),
    Signed(Vec<i64>),
}

/// Writes `stream` as a minimal NWB 2.x file holding only a units table.
///
/// The file (created or truncated) has the root attributes `nwb_version = "2.4.0"`,
/// `neurodata_type = "NWBFile"`, `namespace = "core"`; the string datasets `/identifier`,
/// `/session_description`, `/session_start_time` and `/timestamps_reference_time` (both
/// `1970-01-01T00:00:00+00:00`: the real session start is unknown, and spike times are
/// seconds from it) and `/file_create_date` (now, UTC, ISO 8601); and the group `/units`
/// (`neurodata_type = "Units"`) with
/// * `/units/id` (`int64`, shape `[k]`): each event type's label parsed as an integer when
///   every label is the canonical decimal form of an `i64` (so labels round-trip), else
///   `0..k` in alphabet order;
/// * `/units/spike_times` (`float64` seconds, shape `[n]`): grouped by unit in alphabet
///   order, each unit's times in stream order;
/// * `/units/spike_times_index` (`uint64`, shape `[k]`): cumulative end offsets.
///
/// Every typed object also gets `neurodata_type`, `namespace` and a random `object_id`
/// attribute, and `spike_times_index` a `target` object reference to `spike_times`, as
/// HDMF writes them.
///
/// [`read_units`] on the result returns the same times bit-exactly and the same per-unit
/// counts (event types without events are kept as units with no spikes).
///
/// # Errors
/// [`IngestError::Hdf5`] naming the file and the object if the file cannot be created or
/// any attribute or dataset cannot be written.
pub fn write_units(path: &Path, stream: &EventStream) -> Result<(), IngestError> {
    let w = Writer { path };
    let labels = stream.alphabet().labels();
    let parsed: Option<Vec<i64>> = labels
        .iter()
        .map(|l| l.parse::<i64>().ok().filter(|id| id.to_string() == *l))
        .collect();
    let unit_ids: Vec<i64> = parsed.unwrap_or_else(|| {
        tracing::info!(
            file = %path.display(),
            "event labels are not all integers; writing unit ids 0..{} in alphabet order",
            labels.len()
        );
        (0i64..).take(labels.len()).collect()
    });

    // Counting sort by unit: unit u's run starts at start[u], in stream order.
    let k = stream.alphabet().len();
    let mut start = vec![0usize; k + 1];
    for ty in stream.types() {
        start[ty.index() + 1] += 1;
    }
    for u in 0..k {
        start[u + 1] += start[u];
    }
    let index: Vec<u64> = start[1..].iter().map(|&end| end as u64).collect();
    let mut grouped = vec![0.0f64; stream.len()];
    for (t, ty) in stream.iter() {
        let slot = &mut start[ty.index()];
        grouped[*slot] = t;
        *slot += 1;
    }

    let file = File::create(path).map_err(|e| w.err("/", "cannot create the file", &e))?;
    let root: &Location = &file;
    w.str_attr(root, "/", "nwb_version", NWB_VERSION)?;
    w.typed(root, "/", "NWBFile", "core")?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let identifier = format!("synfire-{}.{:09}", now.as_secs(), now.subsec_nanos());
    w.str_dataset(&file, "/identifier", &identifier)?;
    w.str_dataset(
        &file,
        "/session_description",
        &format!(
            "spike trains exported by synfire {}",
            env!("CARGO_PKG_VERSION")
        ),
    )?;
    w.str_dataset(&file, "/session_start_time", "1970-01-01T00:00:00+00:00")?;
    w.str_dataset(
        &file,
        "/timestamps_reference_time",
        "1970-01-01T00:00:00+00:00",
    )?;
    let created = w.vlu("/file_create_date", &iso8601_utc(now.as_secs()))?;
    file.new_dataset_builder()
        .with_data(&[created][..])
        .create("file_create_date")
        .map_err(|e| w.err("/file_create_date", "cannot write", &e))?;

    // The groups every NWB file has (NWB 2.x `NWBFile`), empty here.
    for group in [
        "acquisition",
        "analysis",
        "general",
        "processing",
        "stimulus",
        "stimulus/presentation",
        "stimulus/templates",
    ] {
        file.create_group(group)
            .map_err(|e| w.err(&format!("/{group}"), "cannot create", &e))?;
    }
    let units = file
        .create_group("units")
        .map_err(|e| w.err(UNITS_GROUP, "cannot create", &e))?;
    w.typed(&units, UNITS_GROUP, "Units", "core")?;
    w.str_attr(
        &units,
        UNITS_GROUP,
        "description",
        "spike-sorted units exported by synfire",
    )?;
    let colnames = [w.vlu(UNITS_GROUP, "spike_times")?];
    units
        .new_attr_builder()
        .with_data(&colnames[..])
        .create("colnames")
        .map_err(|e| w.err(UNITS_GROUP, "cannot write attribute `colnames`", &e))?;

    let ids = units
        .new_dataset_builder()
        .with_data(&unit_ids[..])
        .create("id")
        .map_err(|e| w.err(UNIT_IDS, "cannot write", &e))?;
    w.typed(&ids, UNIT_IDS, "ElementIdentifiers", "hdmf-common")?;

    let times = units
        .new_dataset_builder()
        .with_data(&grouped[..])
        .create("spike_times")
        .map_err(|e| w.err(SPIKE_TIMES, "cannot write", &e))?;
    w.typed(&times, SPIKE_TIMES, "VectorData", "hdmf-common")?;
    w.str_attr(
        &times,
        SPIKE_TIMES,
        "description",
        "the spike times for each unit in seconds",
    )?;

    let index_ds = units
        .new_dataset_builder()
        .with_data(&index[..])
        .create("spike_times_index")
        .map_err(|e| w.err(SPIKE_TIMES_INDEX, "cannot write", &e))?;
    w.typed(&index_ds, SPIKE_TIMES_INDEX, "VectorIndex", "hdmf-common")?;
    w.str_attr(
        &index_ds,
        SPIKE_TIMES_INDEX,
        "description",
        "index into the spike_times dataset",
    )?;
    let target = ObjectReference1::create(&file, SPIKE_TIMES).map_err(|e| {
        w.err(
            SPIKE_TIMES_INDEX,
            "cannot reference `/units/spike_times`",
            &e,
        )
    })?;
    index_ds
        .new_attr::<ObjectReference1>()
        .create("target")
        .and_then(|a| a.write_scalar(&target))
        .map_err(|e| w.err(SPIKE_TIMES_INDEX, "cannot write attribute `target`", &e))?;

    file.flush()
        .map_err(|e| w.err("/", "cannot flush the file", &e))?;
    tracing::debug!(
        file = %path.display(),
        units = unit_ids.len(),
        spikes = stream.len(),
        "wrote NWB units table"
    );
    Ok(())
}

/// Error construction and string helpers for one output file.
struct Writer<'a> {
    path: &'a Path,
}

impl Writer<'_> {
    fn err(&self, object: &str, what: &str, e: &hdf5::Error) -> IngestError {
        IngestError::Hdf5 {
            path: self.path.into(),
            dataset: object.into(),
            message: format!("{what}: {e}"),
        }
    }

    fn vlu(&self, object: &str, s: &str) -> Result<VarLenUnicode, IngestError> {
        s.parse::<VarLenUnicode>().map_err(|e| IngestError::Hdf5 {
            path: self.path.into(),
            dataset: object.into(),
            message: format!("cannot store the string {s:?}: {e}"),
        })
    }

    /// Writes the `neurodata_type`, `namespace` and `object_id` (a random UUID) attributes
    /// that NWB/HDMF expect on every typed object.
    fn typed(&self, loc: &Location, object: &str, ty: &str, ns: &str) -> Result<(), IngestError> {
        self.str_attr(loc, object, "neurodata_type", ty)?;
        self.str_attr(loc, object, "namespace", ns)?;
        self.str_attr(loc, object, "object_id", &uuid4())
    }

    fn str_attr(
        &self,
        loc: &Location,
        object: &str,
        name: &str,
        value: &str,
    ) -> Result<(), IngestError> {
        let v = self.vlu(object, value)?;
        loc.new_attr::<VarLenUnicode>()
            .create(name)
            .and_then(|a| a.write_scalar(&v))
            .map_err(|e| self.err(object, &format!("cannot write attribute `{name}`"), &e))
    }

    fn str_dataset(&self, file: &File, full: &str, value: &str) -> Result<(), IngestError> {
        let v = self.vlu(full, value)?;
        file.new_dataset::<VarLenUnicode>()
            .create(full.trim_start_matches('/'))
            .and_then(|d| d.write_scalar(&v))
            .map_err(|e| self.err(full, "cannot write", &e))
    }
}

/// A random RFC 4122 version-4 UUID, e.g. `0b7c5a4e-2f1d-4c3b-9a8e-1f2d3c4b5a69`.
fn uuid4() -> String {
    let r = rand::random::<u128>() & !(0xF000 << 64) & !(0xC << 60) | (0x4000 << 64) | (0x8 << 60);
    let h = format!("{r:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// `secs` since the Unix epoch as an ISO 8601 UTC timestamp, e.g. `2024-05-01T12:00:00+00:00`.
fn iso8601_utc(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Reads any numeric HDF5 dataset as `f64`, or the `data` of a group (an NWB `TimeSeries`).
///
/// `object` is an absolute HDF5 path such as `/acquisition/CompassDirection/rz` (a group:
/// its `data` is read) or `/acquisition/CompassDirection/rz/data` (a dataset). Returns the
/// shape and the values in C (row-major) order; integers are widened to `f64`.
///
/// # Errors
/// [`IngestError::Io`]/[`IngestError::NotHdf5`] for the file; [`IngestError::MissingDataset`]
/// if `object` is neither a dataset nor a group with `data`; [`IngestError::BadDtype`] for a
/// non-numeric dataset; [`IngestError::NoEvents`] for an empty one; [`IngestError::Hdf5`] if
/// reading fails.
pub(crate) fn read_numeric(
    path: &Path,
    object: &str,
) -> Result<(Vec<usize>, Vec<f64>), IngestError> {
    let r = Reader { path };
    let file = r.open()?;
    let object = format!("/{}", object.trim_matches('/'));
    let (name, ds) = match file.dataset(&object) {
        Ok(ds) => (object.clone(), ds),
        Err(_) => {
            let data = format!("{object}/data");
            match file.dataset(&data) {
                Ok(ds) => (data, ds),
                Err(_) => return Err(r.missing(&object)),
            }
        }
    };
    let shape = ds
        .get_shape()
        .map_err(|e| r.hdf5(&name, "cannot read the shape", &e))?;
    if shape.iter().product::<usize>() == 0 {
        return Err(IngestError::NoEvents {
            path: path.into(),
            what: format!("dataset `{name}`"),
        });
    }
    const NUMERIC: &str = "a float or integer type";
    match r.descriptor(&ds, &name, NUMERIC)? {
        TypeDescriptor::Float(_) | TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {}
        other => return Err(r.bad_dtype(&name, other.to_string(), NUMERIC)),
    }
    let values = r.read_raw::<f64>(&ds, &name)?;
    Ok((shape, values))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid4_has_version_and_variant() {
        for _ in 0..100 {
            let u = uuid4();
            assert_eq!(u.len(), 36);
            assert_eq!(&u[14..15], "4", "{u}");
            assert!("89ab".contains(&u[19..20]), "{u}");
        }
    }

    #[test]
    fn iso8601_known_dates() {
        assert_eq!(iso8601_utc(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(iso8601_utc(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(iso8601_utc(1_700_000_000), "2023-11-14T22:13:20+00:00");
    }

    #[test]
    fn merge_orders_ties_by_unit() {
        // unit 0: [1, 3], unit 1: [], unit 2: [1, 2]
        let times = [1.0, 3.0, 1.0, 2.0];
        let bounds = [(0, 2), (2, 2), (2, 4)];
        let (t, ty) = merge_sorted_units(&times, &bounds);
        assert_eq!(t, vec![1.0, 1.0, 2.0, 3.0]);
        assert_eq!(
            ty,
            vec![EventType(0), EventType(2), EventType(2), EventType(0)]
        );
    }
}
