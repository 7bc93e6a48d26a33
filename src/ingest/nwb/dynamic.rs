//! Writing hdmf-common `DynamicTable`s into an NWB file's processing modules, as HDMF (and so
//! pynwb) writes and reads them: one `VectorData` dataset per column with a `description`;
//! a ragged column's values followed by its `<name>_index` `VectorIndex` (cumulative end
//! offsets, attribute `target` an object reference to the values); a
//! `DynamicTableRegion` column of row indices into another table (attribute `table` an object
//! reference to it); `id` the `ElementIdentifiers` `0..rows`; the table's `colnames` and
//! `description` attributes; every typed object its `neurodata_type`, `namespace` and a
//! random `object_id` (hdmf-common 1.5 schema, `table.yaml`).
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
    /// One row index per row into the table at absolute path `table`.
    Region {
        /// The indices.
        rows: &'a [i64],
        /// Absolute HDF5 path of the referenced table.
        table: &'a str,
    },
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

fn write_table(
    w: &Writer<'_>,
    file: &File,
    module: &Group,
    module_path: &str,
    table: &Table<'_>,
) -> Result<(), IngestError> {
    let path = format!("{module_path}/{}", table.name);
    let group = module
        .create_group(table.name)
        .map_err(|e| w.err(&path, "cannot create", &e))?;
    w.typed(&group, &path, "DynamicTable", "hdmf-common")?;
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
    Ok(())
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
    let data_type = match column.data {
        ColumnData::Region { .. } | ColumnData::RaggedRegion { .. } => "DynamicTableRegion",
        _ => "VectorData",
    };
    let ends = match column.data {
        ColumnData::Int(v) => {
            check(v.len(), "values")?;
            dataset(w, group, &path, column.name, v)?;
            None
        }
        ColumnData::Float(v) => {
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
    w.typed(&ds, &path, data_type, "hdmf-common")?;
    w.str_attr(&ds, &path, "description", column.description)?;
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
