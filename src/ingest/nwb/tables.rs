//! NWB table columns beyond the spike times: unit labels from a column of the units table
//! (`location`, `group`, …) and epochs from a `TimeIntervals` table (`/intervals/epochs` with
//! its `tags`), as NWB 2.x lays them out (the `DynamicTable` of hdmf-common: one `VectorData`
//! per column, a ragged column followed by its `<name>_index` `VectorIndex` of cumulative end
//! offsets).

use std::path::Path;

use hdf5::dataset::Layout;
use hdf5::types::{TypeDescriptor, VarLenAscii, VarLenUnicode};
use hdf5::{Dataset, File};

use super::{Integers, Reader};
use crate::event::{Alphabet, EventStream, Ordering};
use crate::ingest::IngestError;

impl Reader<'_> {
    /// The dataset at absolute path `full`, or a missing-dataset error naming it.
    fn open_dataset(&self, file: &File, full: &str) -> Result<Dataset, IngestError> {
        if !link_exists(file, full) {
            return Err(self.missing(full));
        }
        file.dataset(full.trim_start_matches('/'))
            .map_err(|e| self.hdf5(full, "cannot open as a dataset", &e))
    }

    /// A 1-D dataset as text: strings as stored (UTF-8 or ASCII), integers and floats in
    /// decimal (`3`, `0.5`).
    fn read_text(&self, ds: &Dataset, name: &str) -> Result<Vec<String>, IngestError> {
        const EXPECTED: &str = "strings or numbers";
        let n = self.len_1d(ds, name)?;
        let descriptor = self.descriptor(ds, name, EXPECTED)?;
        if matches!(
            descriptor,
            TypeDescriptor::VarLenUnicode | TypeDescriptor::VarLenAscii
        ) {
            self.check_string_lengths(ds, name, n)?;
        }
        match descriptor {
            TypeDescriptor::VarLenUnicode => Ok(ds
                .read_raw::<VarLenUnicode>()
                .map_err(|e| self.hdf5(name, "cannot read the strings", &e))?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect()),
            TypeDescriptor::VarLenAscii => Ok(ds
                .read_raw::<VarLenAscii>()
                .map_err(|e| self.hdf5(name, "cannot read the strings", &e))?
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect()),
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => {
                Ok(match self.read_integers(ds, name)? {
                    Integers::Signed(v) => v.iter().map(i64::to_string).collect(),
                    Integers::Unsigned(v) => v.iter().map(u64::to_string).collect(),
                })
            }
            TypeDescriptor::Float(_) => Ok(self
                .read_raw::<f64>(ds, name)?
                .iter()
                .map(f64::to_string)
                .collect()),
            other => Err(self.bad_dtype(name, other.to_string(), EXPECTED)),
        }
    }

    /// Checks the stored length of every variable-length string of the 1-D dataset `ds`
    /// (`n` elements) against the file's size, before HDF5 converts them.
    ///
    /// HDF5 (2.0, `H5T__conv_vlen`) converts a variable-length element by allocating and
    /// zeroing a buffer of the length stored in the element, and only then reads its bytes
    /// from the global heap: a damaged length (up to 4 GiB per element) costs that much
    /// memory before the read fails. The bytes of a string live in the file's global heap,
    /// so no length can exceed the file's size: this bound is sound for every valid file.
    ///
    /// The element descriptors are read from the file as the HDF5 file format specification
    /// (version 3, section IV.A.2.d, datatype class 9, and III.E, global heap IDs) lays them
    /// out: a little-endian 4-byte length, the heap collection's address ("Size of Offsets"
    /// bytes) and a 4-byte object index. They are read where the layout stores them
    /// verbatim: contiguous storage and chunks. HDF5 refuses required filters on
    /// variable-length strings ("not suitable for filters", `H5Z_set_local`), so a filtered
    /// string column comes only from an old or foreign writer; that and compact storage (at
    /// most 64 KiB in the object header) are left to HDF5 unchecked.
    ///
    /// # Errors
    /// [`IngestError::BadValue`] naming the element, its stored length and the file's size;
    /// [`IngestError::Hdf5`] when the storage cannot be located or read.
    fn check_string_lengths(&self, ds: &Dataset, name: &str, n: usize) -> Result<(), IngestError> {
        use std::io::{Read, Seek, SeekFrom};
        if n == 0 {
            return Ok(());
        }
        let io = |what: &str, e: std::io::Error| IngestError::Hdf5 {
            path: self.path.into(),
            dataset: name.into(),
            message: format!("{what}: {e}"),
        };
        let mut file =
            std::fs::File::open(self.path).map_err(|e| io("cannot reopen the file", e))?;
        let file_len = file
            .metadata()
            .map_err(|e| io("cannot read the file's size", e))?
            .len();
        let sizeof_addr = ds
            .file()
            .and_then(|f| f.create_plist())
            .map_err(|e| self.hdf5(name, "cannot read the file's address size", &e))?
            .sizes()
            .sizeof_addr as u64;
        let descriptor = 4 + sizeof_addr + 4;
        // (absolute file offset, first element, elements) of each stored run of descriptors.
        let mut runs: Vec<(u64, u64, u64)> = Vec::new();
        match ds.layout() {
            Layout::Contiguous => match ds.offset() {
                Some(addr) => runs.push((addr, 0, n as u64)),
                None => return Ok(()), // never written: HDF5 gives fill values
            },
            Layout::Chunked if ds.filters().is_empty() => {
                let Some(&chunk) = ds.chunk().as_deref().and_then(<[usize]>::first) else {
                    return Ok(());
                };
                let chunk = chunk as u64;
                ds.chunks_visit(|c| {
                    let first = c.offset.first().copied().unwrap_or(0);
                    if first < n as u64 {
                        runs.push((c.addr, first, chunk.min(n as u64 - first)));
                    }
                    0
                })
                .map_err(|e| self.hdf5(name, "cannot list the chunks", &e))?;
            }
            _ => return Ok(()),
        }
        let mut bytes = Vec::new();
        for (addr, first, count) in runs {
            let len = count.saturating_mul(descriptor);
            if addr.checked_add(len).is_none_or(|end| end > file_len) {
                return Err(self.bad_value(
                    name,
                    format!(
                        "elements {first}..{} are stored at bytes {addr}..+{len}, past the \
                         end of the {file_len}-byte file",
                        first + count
                    ),
                ));
            }
            bytes.clear();
            file.seek(SeekFrom::Start(addr))
                .and_then(|_| (&mut file).take(len).read_to_end(&mut bytes))
                .map_err(|e| io("cannot read the string descriptors", e))?;
            for (i, d) in bytes.chunks_exact(descriptor as usize).enumerate() {
                let stored = u32::from_le_bytes([d[0], d[1], d[2], d[3]]);
                if u64::from(stored) > file_len {
                    return Err(self.bad_value(
                        name,
                        format!(
                            "string {} has a stored length of {stored} bytes, more than the \
                             {file_len}-byte file holds (a damaged file)",
                            first + i as u64
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A ragged column's cumulative end offsets (`<column>_index`), checked against the
    /// number of rows and the data's length.
    fn ragged_index(
        &self,
        ds: &Dataset,
        name: &str,
        rows: usize,
        data_len: usize,
    ) -> Result<Vec<usize>, IngestError> {
        let index: Vec<u64> = match self.read_integers(ds, name)? {
            Integers::Unsigned(v) => v,
            Integers::Signed(v) => v
                .into_iter()
                .map(|x| {
                    u64::try_from(x)
                        .map_err(|_| self.bad_value(name, format!("entry {x} is negative")))
                })
                .collect::<Result<_, _>>()?,
        };
        if index.len() != rows {
            return Err(
                self.bad_value(name, format!("has {} entries for {rows} rows", index.len()))
            );
        }
        let mut previous = 0u64;
        for (i, &end) in index.iter().enumerate() {
            if end < previous || end > data_len as u64 {
                return Err(self.bad_value(
                    name,
                    format!(
                        "entry {i} ({end}) is not a cumulative end offset in {previous}..={data_len}"
                    ),
                ));
            }
            previous = end;
        }
        Ok(index.into_iter().map(|e| e as usize).collect())
    }
}

fn link_exists(file: &File, full: &str) -> bool {
    // Every prefix must exist before asking for the next (HDF5 errors on a missing parent).
    let mut path = String::new();
    for part in full.trim_start_matches('/').split('/') {
        if !path.is_empty() {
            path.push('/');
        }
        path.push_str(part);
        if !file.link_exists(&path) {
            return false;
        }
    }
    true
}

/// The values of the units table's column `/units/<column>` as text, one per unit in
/// `/units/id` order (shape `[k]`): strings as stored, numbers in decimal.
///
/// # Errors
/// [`IngestError::MissingDataset`] naming the column (and the file's columns) when it is
/// absent; [`IngestError::BadShape`] unless it has one value per unit;
/// [`IngestError::BadDtype`] for values that are neither strings nor numbers (a ragged
/// column's data, references).
pub fn unit_column(path: &Path, column: &str) -> Result<Vec<String>, IngestError> {
    let r = Reader { path };
    let file = r.open()?;
    let full = format!("/units/{column}");
    if !link_exists(&file, &full) || column.contains('/') {
        let columns = file
            .group("units")
            .and_then(|g| g.member_names())
            .unwrap_or_default()
            .into_iter()
            .filter(|n| !n.ends_with("_index") && n != "id" && n != "spike_times")
            .collect::<Vec<_>>()
            .join(", ");
        return Err(IngestError::BadValue {
            path: path.into(),
            dataset: full,
            message: format!("no such column in the units table (its columns: {columns})"),
        });
    }
    let ds = r.open_dataset(&file, &full)?;
    let values = r.read_text(&ds, &full)?;
    let ids = r.len_1d(&r.open_dataset(&file, super::UNIT_IDS)?, super::UNIT_IDS)?;
    if values.len() != ids {
        return Err(r.bad_value(
            &full,
            format!(
                "has {} values for {ids} units; a label column has one value per unit",
                values.len()
            ),
        ));
    }
    Ok(values)
}

/// The rows of the `TimeIntervals` table `/intervals/<table>` tagged with any of `tags` (`*`:
/// every row), as `[start, stop)` in seconds, sorted and merged where they touch or overlap.
///
/// # Errors
/// The table or its `start_time`/`stop_time` missing (the message lists the file's
/// interval tables); a row with `stop < start` or a non-finite bound; no row with any of
/// the tags (the message lists the tags present); a malformed `tags_index`.
pub fn epochs(path: &Path, table: &str, tags: &[String]) -> Result<Vec<(f64, f64)>, IngestError> {
    let r = Reader { path };
    let file = r.open()?;
    let base = format!("/intervals/{table}");
    if !link_exists(&file, &format!("{base}/start_time")) {
        let tables = file
            .group("intervals")
            .and_then(|g| g.member_names())
            .unwrap_or_default()
            .join(", ");
        return Err(IngestError::BadValue {
            path: path.into(),
            dataset: base,
            message: format!(
                "no such TimeIntervals table (the file's interval tables: {})",
                if tables.is_empty() { "none" } else { &tables }
            ),
        });
    }
    let start_name = format!("{base}/start_time");
    let stop_name = format!("{base}/stop_time");
    let starts = r.read_raw::<f64>(&r.open_dataset(&file, &start_name)?, &start_name)?;
    let stops = r.read_raw::<f64>(&r.open_dataset(&file, &stop_name)?, &stop_name)?;
    if starts.len() != stops.len() {
        return Err(r.bad_value(
            &stop_name,
            format!(
                "{} stop times for {} start times",
                stops.len(),
                starts.len()
            ),
        ));
    }
    let every = tags.iter().any(|t| t == "*");
    let row_tags: Vec<Vec<String>> = if every {
        vec![Vec::new(); starts.len()]
    } else {
        let tags_name = format!("{base}/tags");
        let index_name = format!("{base}/tags_index");
        if !link_exists(&file, &tags_name) {
            return Err(r.bad_value(
                &base,
                "has no `tags` column; select every row with `*`".into(),
            ));
        }
        let values = r.read_text(&r.open_dataset(&file, &tags_name)?, &tags_name)?;
        let index = r.ragged_index(
            &r.open_dataset(&file, &index_name)?,
            &index_name,
            starts.len(),
            values.len(),
        )?;
        let mut rows = Vec::with_capacity(starts.len());
        let mut begin = 0;
        for &end in &index {
            rows.push(values[begin..end].to_vec());
            begin = end;
        }
        rows
    };
    let mut chosen: Vec<(f64, f64)> = Vec::new();
    for (i, ((&a, &b), row)) in starts.iter().zip(&stops).zip(&row_tags).enumerate() {
        if !(a.is_finite() && b.is_finite() && a <= b) {
            return Err(r.bad_value(
                &base,
                format!("row {i}: [{a}, {b}) is not an interval of seconds"),
            ));
        }
        if every || row.iter().any(|t| tags.contains(t)) {
            chosen.push((a, b));
        }
    }
    if chosen.is_empty() {
        let mut present: Vec<&str> = row_tags.iter().flatten().map(String::as_str).collect();
        present.sort_unstable();
        present.dedup();
        return Err(r.bad_value(
            &base,
            format!(
                "no row is tagged {} (tags present: {})",
                tags.join(" or "),
                present.join(", ")
            ),
        ));
    }
    chosen.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(chosen.len());
    for (a, b) in chosen {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    Ok(merged)
}

/// `stream` with its unit labels replaced by `"{value}:{label}"` (e.g. `adn:6`), `values`
/// one per unit in alphabet order.
///
/// # Errors
/// [`IngestError::Event`] if two units end up with one label (cannot happen when the old
/// labels are distinct, kept for the invariant).
pub fn relabel(
    path: &Path,
    stream: &EventStream,
    values: &[String],
) -> Result<EventStream, IngestError> {
    let labels = stream
        .alphabet()
        .labels()
        .iter()
        .zip(values)
        .map(|(old, v)| format!("{v}:{old}"));
    let alphabet = Alphabet::from_labels(labels).map_err(|source| IngestError::Event {
        path: path.into(),
        source,
    })?;
    EventStream::new(
        stream.times().to_vec(),
        stream.types().to_vec(),
        alphabet,
        Ordering::RequireSorted,
    )
    .map_err(|source| IngestError::Event {
        path: path.into(),
        source,
    })
}

/// The events of `stream` inside any of `epochs` (`[start, stop)`, sorted, disjoint); every
/// unit is kept in the alphabet.
///
/// # Errors
/// [`IngestError::NoEvents`] when no event falls inside.
pub fn within(
    path: &Path,
    stream: &EventStream,
    epochs: &[(f64, f64)],
) -> Result<EventStream, IngestError> {
    let mut times = Vec::new();
    let mut types = Vec::new();
    let mut e = 0;
    for (t, ty) in stream.iter() {
        while e < epochs.len() && t >= epochs[e].1 {
            e += 1;
        }
        if e < epochs.len() && t >= epochs[e].0 {
            times.push(t);
            types.push(ty);
        }
    }
    if times.is_empty() {
        return Err(IngestError::NoEvents {
            path: path.into(),
            what: "the chosen epochs".into(),
        });
    }
    EventStream::new(
        times,
        types,
        stream.alphabet().clone(),
        Ordering::RequireSorted,
    )
    .map_err(|source| IngestError::Event {
        path: path.into(),
        source,
    })
}
