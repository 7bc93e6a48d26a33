//! Writing hdmf-common `DynamicTable`s into an NWB file's processing modules, as HDMF (and so
//! pynwb) writes and reads them: one `VectorData` dataset per column with a `description`;
//! a ragged column's values followed by its `<name>_index` `VectorIndex` (cumulative end
//! offsets, attribute `target` an object reference to the values); a
//! `DynamicTableRegion` column of row indices into another table (attribute `table` an object
//! reference to it); `id` the `ElementIdentifiers` `0..rows`; the table's `colnames` and
//! `description` attributes; every typed object its `neurodata_type`, `namespace` and a
//! random `object_id` (hdmf-common 1.5 schema, `table.yaml`). NWB 2.10's `EventsTable`s
//! (`nwb.event.yaml`: a `DynamicTable` of namespace `core` with a `timestamp`
//! `TimestampVectorData` column, an optional `duration` `DurationVectorData`, both with
//! `unit = "seconds"`, and a `source_description`) go into the file's `/events` group
//! ([`write_events_tables`]).
//!
//! Domain-free: the result tables themselves are built by `crate::report::nwb`.

use std::path::Path;

use hdf5::types::VarLenUnicode;
use hdf5::{File, Group, H5Type, ObjectReference, ObjectReference1};

use super::Writer;
use crate::ingest::IngestError;

/// One column's values, one entry per row unless ragged.
#[derive(Clone, Copy, Debug)]
pub enum ColumnData<'a> {
    /// Integers.
    Int(&'a [i64]),
    /// Floating-point numbers.
    Float(&'a [f64]),
    /// Booleans (HDF5 enum `FALSE = 0, TRUE = 1`, as h5py writes `bool`).
    Bool(&'a [bool]),
    /// UTF-8 strings.
    Text(&'a [String]),
    /// Row `i` holds `values[ends[i-1]..ends[i]]` (`ends` cumulative, one per row).
    RaggedText {
        /// All rows' values, concatenated.
        values: &'a [String],
        /// Cumulative end offsets, one per row.
        ends: &'a [u64],
    },
    /// As [`ColumnData::RaggedText`] with numbers.
    RaggedFloat {
        /// All rows' values, concatenated.
        values: &'a [f64],
        /// Cumulative end offsets, one per row.
        ends: &'a [u64],
    },
    /// Row indices into the table at absolute path `table` (a `DynamicTableRegion`), ragged.
    RaggedRegion {
        /// All rows' indices, concatenated.
        rows: &'a [i64],
        /// Cumulative end offsets, one per row.
        ends: &'a [u64],
        /// Absolute HDF5 path of the referenced table, e.g. `/units`.
        table: &'a str,
    },
    /// Seconds: a column of NWB 2.10's type `TimestampVectorData` or `DurationVectorData`
    /// (namespace `core`, attribute `unit = "seconds"`), one value per row.
    Seconds {
        /// The values, seconds.
        values: &'a [f64],
        /// Which of the two types.
        kind: SecondsKind,
    },
    /// One row index per row into the table at absolute path `table`.
    Region {
        /// The indices.
        rows: &'a [i64],
        /// Absolute HDF5 path of the referenced table.
        table: &'a str,
    },
}

/// The NWB 2.10 column types of times in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecondsKind {
    /// `TimestampVectorData`: times from the session's start.
    Timestamp,
    /// `DurationVectorData`: durations.
    Duration,
}

/// A named column with its description.
#[derive(Clone, Copy, Debug)]
pub struct Column<'a> {
    /// Column name (an HDF5 link name: no `/`).
    pub name: &'a str,
    /// What the column holds, with units.
    pub description: &'a str,
    /// Its values.
    pub data: ColumnData<'a>,
}

/// A table to write: `rows` rows of `columns`.
#[derive(Clone, Debug)]
pub struct Table<'a> {
    /// Link name inside the processing module.
    pub name: &'a str,
    /// The table's description.
    pub description: &'a str,
    /// Number of rows.
    pub rows: usize,
    /// Its columns, in order.
    pub columns: Vec<Column<'a>>,
}

/// The type of an `EventsTable` ([`write_events_tables`]) and the NWB version that defines it.
pub const EVENTS_NWB_VERSION: &str = "2.10.0";

/// Adds (or replaces) the processing module `/processing/<module>` of the NWB file at `path`
/// (opened read-write) holding `tables`, in order (a region column may reference a table
/// written before it, or any object already in the file).
///
/// # Errors
/// [`IngestError::Hdf5`] naming the object that cannot be written; [`IngestError::BadValue`]
/// for a column whose length does not fit its table (a bug of the caller, reported, not a
/// panic).
pub fn write_processing_module(
    path: &Path,
    module: &str,
    description: &str,
    tables: &[Table<'_>],
) -> Result<(), IngestError> {
    let w = Writer { path };
    let file = File::open_rw(path).map_err(|e| w.err("/", "cannot open for writing", &e))?;
    let processing = if file.link_exists("processing") {
        file.group("processing")
            .map_err(|e| w.err("/processing", "cannot open", &e))?
    } else {
        file.create_group("processing")
            .map_err(|e| w.err("/processing", "cannot create", &e))?
    };
    let full = format!("/processing/{module}");
    if processing.link_exists(module) {
        processing
            .unlink(module)
            .map_err(|e| w.err(&full, "cannot replace the old module", &e))?;
    }
    let group = processing
        .create_group(module)
        .map_err(|e| w.err(&full, "cannot create", &e))?;
    w.typed(&group, &full, "ProcessingModule", "core")?;
    w.str_attr(&group, &full, "description", description)?;
    for table in tables {
        write_table(&w, &file, &group, &full, table)?;
    }
    file.flush()
        .map_err(|e| w.err("/", "cannot flush the file", &e))
}

/// Adds `tables` as NWB 2.10 `EventsTable`s (attribute `source_description`) to the file's
/// `/events` group (created if missing; a table of the same name is replaced), and raises the
/// file's `nwb_version` to [`EVENTS_NWB_VERSION`] where it is older (the version whose schema
/// defines the type; every earlier 2.x file is valid under it). Each table should have a
/// [`ColumnData::Seconds`] column `timestamp` ([`SecondsKind::Timestamp`]).
///
/// # Errors
/// As [`write_processing_module`].
pub fn write_events_tables(
    path: &Path,
    source_description: &str,
    tables: &[Table<'_>],
) -> Result<(), IngestError> {
    let w = Writer { path };
    let file = File::open_rw(path).map_err(|e| w.err("/", "cannot open for writing", &e))?;
    let events = if file.link_exists("events") {
        file.group("events")
            .map_err(|e| w.err("/events", "cannot open", &e))?
    } else {
        file.create_group("events")
            .map_err(|e| w.err("/events", "cannot create", &e))?
    };
    for table in tables {
        let full = format!("/events/{}", table.name);
        if events.link_exists(table.name) {
            events
                .unlink(table.name)
                .map_err(|e| w.err(&full, "cannot replace the old table", &e))?;
        }
        let group = write_table_typed(
            &w,
            &file,
            &events,
            "/events",
            table,
            ("EventsTable", "core"),
        )?;
        w.str_attr(&group, &full, "source_description", source_description)?;
    }
    raise_nwb_version(&w, &file, EVENTS_NWB_VERSION)?;
    file.flush()
        .map_err(|e| w.err("/", "cannot flush the file", &e))
}

/// Sets the root attribute `nwb_version` to `version` where it is missing or older (compared
/// as dotted numbers); a newer one is kept.
fn raise_nwb_version(w: &Writer<'_>, file: &File, version: &str) -> Result<(), IngestError> {
    let numbers = |v: &str| -> Vec<u64> {
        v.trim_start_matches('v')
            .split(['.', '-'])
            .map_while(|p| p.parse().ok())
            .collect()
    };
    let current = file.attr("nwb_version").ok().and_then(|a| {
        a.read_scalar::<VarLenUnicode>()
            .map(|s| s.as_str().to_owned())
            .or_else(|_| {
                a.read_scalar::<hdf5::types::VarLenAscii>()
                    .map(|s| s.as_str().to_owned())
            })
            .ok()
    });
    if current
        .as_deref()
        .is_some_and(|c| numbers(c) >= numbers(version))
    {
        return Ok(());
    }
    if file.attr("nwb_version").is_ok() {
        file.delete_attr("nwb_version")
            .map_err(|e| w.err("/", "cannot replace attribute `nwb_version`", &e))?;
    }
    w.str_attr(file, "/", "nwb_version", version)
}

fn write_table(
    w: &Writer<'_>,
    file: &File,
    module: &Group,
    module_path: &str,
    table: &Table<'_>,
) -> Result<(), IngestError> {
    write_table_typed(
        w,
        file,
        module,
        module_path,
        table,
        ("DynamicTable", "hdmf-common"),
    )
    .map(|_| ())
}

/// Writes `table` into `parent` as a table of type `(neurodata_type, namespace)`.
fn write_table_typed(
    w: &Writer<'_>,
    file: &File,
    parent: &Group,
    parent_path: &str,
    table: &Table<'_>,
    (data_type, namespace): (&str, &str),
) -> Result<Group, IngestError> {
    let path = format!("{parent_path}/{}", table.name);
    let group = parent
        .create_group(table.name)
        .map_err(|e| w.err(&path, "cannot create", &e))?;
    w.typed(&group, &path, data_type, namespace)?;
    w.str_attr(&group, &path, "description", table.description)?;
    let colnames = table
        .columns
        .iter()
        .map(|c| w.vlu(&path, c.name))
        .collect::<Result<Vec<_>, _>>()?;
    group
        .new_attr_builder()
        .with_data(&colnames[..])
        .create("colnames")
        .map_err(|e| w.err(&path, "cannot write attribute `colnames`", &e))?;
    let ids: Vec<i64> = (0..table.rows as i64).collect();
    let id_path = format!("{path}/id");
    let ds = group
        .new_dataset_builder()
        .with_data(&ids[..])
        .create("id")
        .map_err(|e| w.err(&id_path, "cannot write", &e))?;
    w.typed(&ds, &id_path, "ElementIdentifiers", "hdmf-common")?;
    for column in &table.columns {
        write_column(w, file, &group, &path, table.rows, column)?;
    }
    Ok(group)
}

fn write_column(
    w: &Writer<'_>,
    file: &File,
    group: &Group,
    table_path: &str,
    rows: usize,
    column: &Column<'_>,
) -> Result<(), IngestError> {
    let path = format!("{table_path}/{}", column.name);
    let check = |n: usize, what: &str| {
        if n == rows {
            Ok(())
        } else {
            Err(IngestError::BadValue {
                path: w.path.into(),
                dataset: path.clone(),
                message: format!("{n} {what} for {rows} rows"),
            })
        }
    };
    let (data_type, namespace) = match column.data {
        ColumnData::Region { .. } | ColumnData::RaggedRegion { .. } => {
            ("DynamicTableRegion", "hdmf-common")
        }
        ColumnData::Seconds {
            kind: SecondsKind::Timestamp,
            ..
        } => ("TimestampVectorData", "core"),
        ColumnData::Seconds {
            kind: SecondsKind::Duration,
            ..
        } => ("DurationVectorData", "core"),
        _ => ("VectorData", "hdmf-common"),
    };
    let ends = match column.data {
        ColumnData::Int(v) => {
            check(v.len(), "values")?;
            dataset(w, group, &path, column.name, v)?;
            None
        }
        ColumnData::Float(v) | ColumnData::Seconds { values: v, .. } => {
            check(v.len(), "values")?;
            dataset(w, group, &path, column.name, v)?;
            None
        }
        ColumnData::Bool(v) => {
            check(v.len(), "values")?;
            dataset(w, group, &path, column.name, v)?;
            None
        }
        ColumnData::Text(v) => {
            check(v.len(), "values")?;
            text(w, group, &path, column.name, v)?;
            None
        }
        ColumnData::RaggedText { values, ends } => {
            text(w, group, &path, column.name, values)?;
            Some(ends)
        }
        ColumnData::RaggedFloat { values, ends } => {
            dataset(w, group, &path, column.name, values)?;
            Some(ends)
        }
        ColumnData::RaggedRegion { rows: r, ends, .. } => {
            dataset(w, group, &path, column.name, r)?;
            Some(ends)
        }
        ColumnData::Region { rows: r, .. } => {
            check(r.len(), "row indices")?;
            dataset(w, group, &path, column.name, r)?;
            None
        }
    };
    let ds = group
        .dataset(column.name)
        .map_err(|e| w.err(&path, "cannot reopen", &e))?;
    w.typed(&ds, &path, data_type, namespace)?;
    w.str_attr(&ds, &path, "description", column.description)?;
    if let ColumnData::Seconds { .. } = column.data {
        w.str_attr(&ds, &path, "unit", "seconds")?;
    }
    if let ColumnData::Region { table, .. } | ColumnData::RaggedRegion { table, .. } = column.data {
        reference_attr(w, file, &ds, &path, "table", table)?;
    }
    if let Some(ends) = ends {
        check(ends.len(), "index entries")?;
        let name = format!("{}_index", column.name);
        let index_path = format!("{table_path}/{name}");
        let index = group
            .new_dataset_builder()
            .with_data(ends)
            .create(name.as_str())
            .map_err(|e| w.err(&index_path, "cannot write", &e))?;
        w.typed(&index, &index_path, "VectorIndex", "hdmf-common")?;
        w.str_attr(
            &index,
            &index_path,
            "description",
            &format!("index into the {} column", column.name),
        )?;
        reference_attr(w, file, &index, &index_path, "target", &path)?;
    }
    Ok(())
}

fn dataset<T: H5Type>(
    w: &Writer<'_>,
    group: &Group,
    path: &str,
    name: &str,
    values: &[T],
) -> Result<(), IngestError> {
    group
        .new_dataset_builder()
        .with_data(values)
        .create(name)
        .map(|_| ())
        .map_err(|e| w.err(path, "cannot write", &e))
}

fn text(
    w: &Writer<'_>,
    group: &Group,
    path: &str,
    name: &str,
    values: &[String],
) -> Result<(), IngestError> {
    let v: Vec<VarLenUnicode> = values
        .iter()
        .map(|s| w.vlu(path, s))
        .collect::<Result<_, _>>()?;
    dataset(w, group, path, name, &v)
}

fn reference_attr(
    w: &Writer<'_>,
    file: &File,
    on: &hdf5::Dataset,
    path: &str,
    name: &str,
    target: &str,
) -> Result<(), IngestError> {
    let reference = ObjectReference1::create(file, target)
        .map_err(|e| w.err(path, &format!("cannot reference `{target}`"), &e))?;
    on.new_attr::<ObjectReference1>()
        .create(name)
        .and_then(|a| a.write_scalar(&reference))
        .map_err(|e| w.err(path, &format!("cannot write attribute `{name}`"), &e))
}
