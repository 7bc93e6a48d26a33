//! Kilosort / phy output folders: the spike raster a lab has right after spike sorting.
//!
//! The folder layout is the one phy reads (Rossant et al., phy's "template-gui" format, as
//! written by Kilosort 1–4 and edited by phy 2; <https://phy.readthedocs.io/en/latest/sorting_user_guide/>):
//!
//! | file | shape, dtype | meaning |
//! |---|---|---|
//! | `spike_times.npy` | `[n]` or `[n, 1]`, any integer | spike times in **samples** of the recording |
//! | `spike_clusters.npy` | `[n]` or `[n, 1]`, any integer | each spike's cluster (after phy's curation) |
//! | `spike_templates.npy` | as above | each spike's template; used when `spike_clusters.npy` is absent (Kilosort's raw output: one cluster per template) |
//! | `params.py` | Python assignments | `sample_rate` in Hz (required unless given) |
//! | `cluster_group.tsv` | `cluster_id⇥group` | phy's curated label per cluster (`good`, `mua`, `noise`, …) |
//! | `cluster_info.tsv` | `cluster_id` (or `id`) … `group` … | phy 2's cluster table; its `group` column |
//! | `cluster_KSLabel.tsv` | `cluster_id⇥KSLabel` | Kilosort's automatic label (`good`, `mua`) |
//!
//! A cluster's **group** is its `cluster_group.tsv` label, else its non-empty `group` in
//! `cluster_info.tsv`, else its `KSLabel`, else `unsorted` (phy's own fallback order). Each
//! cluster becomes one unit labelled by its decimal id; units are numbered in ascending
//! cluster-id order. A spike at sample `k` is at `k / sample_rate` seconds (`f64`, exact for
//! every sample below 2⁵³).
//!
//! With [`PhyOptions::groups`] only the clusters of those groups are read; the others'
//! spikes are counted in [`PhyRecording::dropped_spikes`] and logged, never silently lost.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek};
use std::path::Path;

use npyz::{DType, TypeChar};

use super::IngestError;
use super::csv::cut;
use crate::event::{Alphabet, EventStream, EventType, Ordering};

/// The file whose presence makes a folder a phy/Kilosort folder.
pub(crate) const SPIKE_TIMES: &str = "spike_times.npy";

/// True when `dir` is a folder holding [`SPIKE_TIMES`].
#[must_use]
pub(crate) fn is_phy_folder(dir: &Path) -> bool {
    dir.is_dir() && dir.join(SPIKE_TIMES).is_file()
}

/// How to read a phy folder.
#[derive(Clone, Debug, Default)]
pub struct PhyOptions {
    /// Time order: Kilosort writes spikes in time order; with
    /// [`Ordering::RequireSorted`] anything else is an error.
    pub ordering: Ordering,
    /// Keep only the clusters whose group is one of these (e.g. `["good"]`); `None` keeps all.
    pub groups: Option<Vec<String>>,
    /// The sampling rate in Hz, overriding (or standing in for) `params.py`'s `sample_rate`.
    pub sample_rate_hz: Option<f64>,
}

/// One cluster of the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster id.
    pub id: i64,
    /// Its group (module docs for where it comes from).
    pub group: String,
    /// Its spikes in the folder.
    pub spikes: usize,
    /// Whether it was read (its group passed [`PhyOptions::groups`]).
    pub kept: bool,
}

/// A phy folder read into a stream.
#[derive(Clone, Debug)]
pub struct PhyRecording {
    /// The kept clusters' spikes, seconds; types are the kept clusters in ascending id order,
    /// labelled by their ids.
    pub stream: EventStream,
    /// The sampling rate used, Hz.
    pub sample_rate_hz: f64,
    /// Where it came from: `params.py` or the caller.
    pub sample_rate_source: &'static str,
    /// Every cluster with spikes, ascending id.
    pub clusters: Vec<Cluster>,
    /// Spikes of clusters left out by [`PhyOptions::groups`].
    pub dropped_spikes: usize,
    /// The file the cluster of each spike came from (`spike_clusters.npy` or
    /// `spike_templates.npy`).
    pub clusters_file: &'static str,
}

/// Reads the phy/Kilosort folder `dir` (module docs for the layout).
///
/// # Errors
/// Every error names the file at fault: [`IngestError::Io`] for an unreadable file,
/// [`IngestError::BadFile`] for a missing `spike_times.npy` or cluster file, a non-integer
/// or non-1-D array (or one whose declared shape holds more than 2^64 elements), negative
/// samples, arrays of different lengths, no `sample_rate` in `params.py` (and none given) or
/// a non-positive one, a malformed TSV; an unsorted
/// `spike_times.npy` with [`Ordering::RequireSorted`]; [`IngestError::NoEvents`] when no
/// spike remains (e.g. no cluster of the chosen groups).
pub fn read_phy(dir: &Path, options: &PhyOptions) -> Result<PhyRecording, IngestError> {
    let bad = |file: &str, message: String| IngestError::BadFile {
        path: dir.join(file),
        message,
    };
    if !dir.is_dir() {
        return Err(IngestError::BadFile {
            path: dir.to_path_buf(),
            message: "is not a folder; a phy/Kilosort output is a folder with \
                      `spike_times.npy`, `spike_clusters.npy` (or `spike_templates.npy`) and \
                      `params.py`"
                .into(),
        });
    }
    if !dir.join(SPIKE_TIMES).is_file() {
        return Err(bad(
            SPIKE_TIMES,
            "is missing; a phy/Kilosort folder has `spike_times.npy` (samples) and \
             `spike_clusters.npy` or `spike_templates.npy`"
                .into(),
        ));
    }
    let (sample_rate_hz, sample_rate_source) = match options.sample_rate_hz {
        Some(rate) => (rate, "the caller"),
        None => (read_sample_rate(&dir.join("params.py"))?, "params.py"),
    };
    if !(sample_rate_hz.is_finite() && sample_rate_hz > 0.0) {
        return Err(bad(
            "params.py",
            format!("`sample_rate` {sample_rate_hz} must be a positive number of Hz"),
        ));
    }
    let samples = read_integers(&dir.join(SPIKE_TIMES))?;
    let clusters_file = if dir.join("spike_clusters.npy").is_file() {
        "spike_clusters.npy"
    } else if dir.join("spike_templates.npy").is_file() {
        "spike_templates.npy"
    } else {
        return Err(bad(
            "spike_clusters.npy",
            "is missing, and so is `spike_templates.npy`: one of them gives each spike's \
             cluster"
                .into(),
        ));
    };
    let ids = read_integers(&dir.join(clusters_file))?;
    if ids.len() != samples.len() {
        return Err(bad(
            clusters_file,
            format!(
                "has {} entries but `{SPIKE_TIMES}` has {}; there must be one cluster per spike",
                ids.len(),
                samples.len()
            ),
        ));
    }
    if let Some(i) = samples.iter().position(|&s| s < 0) {
        return Err(bad(
            SPIKE_TIMES,
            format!("entry {i} is {} samples; times must be ≥ 0", samples[i]),
        ));
    }
    let groups = read_groups(dir)?;
    let mut spikes_of: BTreeMap<i64, usize> = BTreeMap::new();
    for &id in &ids {
        *spikes_of.entry(id).or_default() += 1;
    }
    let clusters: Vec<Cluster> = spikes_of
        .iter()
        .map(|(&id, &spikes)| {
            let group = groups
                .get(&id)
                .cloned()
                .unwrap_or_else(|| "unsorted".to_owned());
            let kept = options
                .groups
                .as_ref()
                .is_none_or(|wanted| wanted.iter().any(|g| g == &group));
            Cluster {
                id,
                group,
                spikes,
                kept,
            }
        })
        .collect();
    let mut alphabet = Alphabet::new();
    let mut type_of: BTreeMap<i64, EventType> = BTreeMap::new();
    for c in clusters.iter().filter(|c| c.kept) {
        type_of.insert(c.id, alphabet.intern(&c.id.to_string()));
    }
    let mut times = Vec::with_capacity(samples.len());
    let mut types = Vec::with_capacity(samples.len());
    let mut previous: Option<(usize, i64)> = None;
    for (i, (&sample, id)) in samples.iter().zip(&ids).enumerate() {
        if let Some((j, prev)) = previous
            && sample < prev
            && options.ordering == Ordering::RequireSorted
        {
            return Err(bad(
                SPIKE_TIMES,
                format!(
                    "entry {i} ({sample} samples) comes before entry {j} ({prev} samples); \
                     spike times must be sorted (pass `--sort` to sort them)"
                ),
            ));
        }
        previous = Some((i, sample));
        if let Some(&ty) = type_of.get(id) {
            times.push(sample as f64 / sample_rate_hz);
            types.push(ty);
        }
    }
    let dropped_spikes = samples.len() - times.len();
    if times.is_empty() {
        let what = match &options.groups {
            Some(g) => format!(
                "the folder's clusters of group {} (groups present: {})",
                g.join(", "),
                clusters
                    .iter()
                    .map(|c| c.group.as_str())
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => format!("`{SPIKE_TIMES}`"),
        };
        return Err(IngestError::NoEvents {
            path: dir.to_path_buf(),
            what,
        });
    }
    if dropped_spikes > 0 {
        let left_out = clusters.iter().filter(|c| !c.kept).count();
        tracing::warn!(
            folder = %dir.display(),
            clusters_left_out = left_out,
            spikes_left_out = dropped_spikes,
            clusters_kept = type_of.len(),
            "Left out the clusters of other groups."
        );
    }
    let stream = EventStream::new(times, types, alphabet, options.ordering).map_err(|source| {
        IngestError::Event {
            path: dir.to_path_buf(),
            source,
        }
    })?;
    Ok(PhyRecording {
        stream,
        sample_rate_hz,
        sample_rate_source,
        clusters,
        dropped_spikes,
        clusters_file,
    })
}

/// `sample_rate` from a phy `params.py` (lines `name = value`; comments and other names
/// ignored).
fn read_sample_rate(path: &Path) -> Result<f64, IngestError> {
    let text = std::fs::read_to_string(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => IngestError::BadFile {
            path: path.to_path_buf(),
            message: "is missing, so the sampling rate is unknown; give it with \
                      `--sample-rate-hz` (e.g. 30000 for Neuropixels)"
                .into(),
        },
        _ => IngestError::Io {
            path: path.to_path_buf(),
            source,
        },
    })?;
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("");
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        if name.trim() != "sample_rate" {
            continue;
        }
        let value = value.trim();
        let rate = value
            .trim_end_matches('.')
            .parse::<f64>()
            .or_else(|_| value.parse::<f64>())
            .map_err(|_| IngestError::BadFile {
                path: path.to_path_buf(),
                message: format!(
                    "line {}: `sample_rate = {}` is not a number of Hz",
                    n + 1,
                    cut(value)
                ),
            })?;
        return Ok(rate);
    }
    Err(IngestError::BadFile {
        path: path.to_path_buf(),
        message: "has no `sample_rate = …` line; give the rate with `--sample-rate-hz`".into(),
    })
}

/// Cluster groups from `cluster_group.tsv`, `cluster_info.tsv` and `cluster_KSLabel.tsv`,
/// the first file naming a cluster winning (module docs).
fn read_groups(dir: &Path) -> Result<BTreeMap<i64, String>, IngestError> {
    let mut groups = BTreeMap::new();
    for (file, column) in [
        ("cluster_group.tsv", "group"),
        ("cluster_info.tsv", "group"),
        ("cluster_KSLabel.tsv", "KSLabel"),
    ] {
        let path = dir.join(file);
        if !path.is_file() {
            continue;
        }
        for (id, label) in read_tsv_column(&path, column)? {
            if !label.is_empty() {
                groups.entry(id).or_insert(label);
            }
        }
    }
    Ok(groups)
}

/// `(cluster id, value of column)` for every row of a phy cluster TSV.
fn read_tsv_column(path: &Path, column: &str) -> Result<Vec<(i64, String)>, IngestError> {
    let bad = |message: String| IngestError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .flexible(true)
        .from_path(path)
        .map_err(|e| bad(e.to_string()))?;
    let headers = reader.headers().map_err(|e| bad(e.to_string()))?.clone();
    let find = |names: &[&str]| headers.iter().position(|h| names.contains(&h.trim()));
    let Some(id_col) = find(&["cluster_id", "id"]) else {
        return Err(bad(format!(
            "has no `cluster_id` column (header: {})",
            cut(&headers.iter().collect::<Vec<_>>().join(" "))
        )));
    };
    // phy 1 wrote `cluster_group.tsv` with the column `group`; some versions `KSLabel`.
    let Some(value_col) = find(&[column]).or_else(|| {
        // Lazily: with more than two columns `id_col` may be 2 or more.
        (headers.len() == 2 && path.ends_with("cluster_group.tsv")).then(|| 1 - id_col)
    }) else {
        // cluster_info.tsv without a group column: nothing to read.
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| bad(format!("row {}: {e}", i + 2)))?;
        let id_text = record.get(id_col).unwrap_or("").trim();
        let id = id_text.parse::<i64>().map_err(|_| {
            bad(format!(
                "row {}: cluster id `{}` is not an integer",
                i + 2,
                cut(id_text)
            ))
        })?;
        rows.push((id, record.get(value_col).unwrap_or("").trim().to_owned()));
    }
    Ok(rows)
}

/// A `.npy` file opened for reading one value per spike: the header is checked before npyz
/// parses it (nesting depth, shape overflow: see [`MAX_HEADER_BRACKETS`] and
/// `overflowing_shape`) and the shape must be `[n]`, `[n, 1]` or `[1, n]`.
///
/// # Errors
/// [`IngestError::Io`] when the file cannot be read, [`IngestError::BadFile`] (naming the file)
/// for a header refused by the checks, a file that is not a `.npy` array, or another shape.
pub(super) fn open_npy(
    path: &Path,
) -> Result<npyz::NpyFile<std::io::BufReader<std::fs::File>>, IngestError> {
    let bad = |message: String| IngestError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let io_err = |source| IngestError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io_err)?;
    let header = npy_header(&mut file).map_err(io_err)?;
    let brackets = header
        .iter()
        .filter(|b| matches!(b, b'(' | b'[' | b'{'))
        .count();
    if brackets > MAX_HEADER_BRACKETS {
        return Err(bad(format!(
            "has {brackets} brackets in its header; the header of a spike array is a flat \
             dictionary (`descr`, `fortran_order`, `shape`), and nested ones take the `.npy` \
             parser exponential time"
        )));
    }
    if let Some(shape) = overflowing_shape(&header) {
        return Err(bad(format!(
            "declares the shape ({shape}): more elements than fit in 64 bits"
        )));
    }
    file.rewind().map_err(io_err)?;
    let npy = npyz::NpyFile::new(std::io::BufReader::new(file))
        .map_err(|e| bad(format!("is not a NumPy `.npy` array: {e}")))?;
    let shape = npy.shape().to_vec();
    if !(shape.len() == 1 || (shape.len() == 2 && (shape[1] == 1 || shape[0] == 1))) {
        return Err(bad(format!(
            "has shape {shape:?}; expected one value per spike ([n] or [n, 1])"
        )));
    }
    Ok(npy)
}

/// A 1-D (or `[n, 1]`) integer `.npy` array as `i64`.
///
/// # Errors
/// As [`open_npy`]; [`IngestError::BadFile`] for a non-integer dtype, a `u64` value above
/// `i64::MAX`, or values that cannot be read (a truncated file).
pub(super) fn read_integers(path: &Path) -> Result<Vec<i64>, IngestError> {
    let bad = |message: String| IngestError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let npy = open_npy(path)?;
    let DType::Plain(ts) = npy.dtype() else {
        return Err(bad(format!(
            "has dtype {}; expected integers",
            npy.dtype().descr()
        )));
    };
    let read_err = |e: std::io::Error| bad(format!("cannot read the values: {e}"));
    let too_big = |v: u64| bad(format!("value {v} is too large for a sample or cluster id"));
    let values = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Int, 1) => widen(npy.into_vec::<i8>().map_err(read_err)?),
        (TypeChar::Int, 2) => widen(npy.into_vec::<i16>().map_err(read_err)?),
        (TypeChar::Int, 4) => widen(npy.into_vec::<i32>().map_err(read_err)?),
        (TypeChar::Int, 8) => npy.into_vec::<i64>().map_err(read_err)?,
        (TypeChar::Uint, 1) => widen(npy.into_vec::<u8>().map_err(read_err)?),
        (TypeChar::Uint, 2) => widen(npy.into_vec::<u16>().map_err(read_err)?),
        (TypeChar::Uint, 4) => widen(npy.into_vec::<u32>().map_err(read_err)?),
        (TypeChar::Uint, 8) => npy
            .into_vec::<u64>()
            .map_err(read_err)?
            .into_iter()
            .map(|v| i64::try_from(v).map_err(|_| too_big(v)))
            .collect::<Result<_, _>>()?,
        (TypeChar::Float, _) => {
            return Err(bad(format!(
                "has dtype `{ts}`; this file holds integers (spike times in samples, cluster or \
                 sorted ids). Times in seconds belong in a CSV (`unit,time_s`) or NWB file"
            )));
        }
        _ => return Err(bad(format!("has dtype `{ts}`; expected integers"))),
    };
    Ok(values)
}

/// Opening brackets a `.npy` header may hold. numpy writes 2 for a plain array (the
/// dictionary and the shape); npyz's header parser (py_literal, a PEG) backtracks
/// exponentially in the nesting depth (found by the `phy` fuzz target as hangs: the time
/// doubles per level, 16 levels take 2 s, 30 hours), and the depth is at most this count.
const MAX_HEADER_BRACKETS: usize = 8;

/// The header text of a `.npy` file (after magic, version and header length), or less when
/// the file is shorter.
fn npy_header(file: &mut std::fs::File) -> std::io::Result<Vec<u8>> {
    let mut head = Vec::new();
    file.by_ref().take(12).read_to_end(&mut head)?;
    // Version 1 has a 2-byte header length at 8, versions 2 and 3 a 4-byte one.
    let len = match head.get(6) {
        Some(1) if head.len() >= 10 => u64::from(u16::from_le_bytes([head[8], head[9]])) + 10,
        Some(_) if head.len() >= 12 => {
            u64::from(u32::from_le_bytes([head[8], head[9], head[10], head[11]])) + 12
        }
        _ => return Ok(Vec::new()),
    };
    file.by_ref()
        .take(len.saturating_sub(head.len() as u64))
        .read_to_end(&mut head)?;
    let text_start = if head.get(6) == Some(&1) { 10 } else { 12 };
    Ok(head.split_off(text_start.min(head.len())))
}

/// The dimensions of a `.npy` header's shape (its text) when their product overflows `u64`,
/// as written.
///
/// npyz multiplies a header's dimensions unchecked (the element count and the strides), which
/// panics where overflow checks are on (debug builds and the fuzz targets' build) and
/// wraps where they are off, so such a file is refused before npyz parses it. Every innermost
/// parenthesised or bracketed group of integers is checked (the shape, whatever the spelling
/// of its key, and subarray shapes of the dtype), running products from either end as npyz
/// computes them; integers written as Python writes them (`12`, `1_000`, `0x10`, `0o7`,
/// `0b1`); a group holding anything else is npyz's to refuse.
fn overflowing_shape(header: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(header);
    let python_uint = |item: &str| -> Option<u64> {
        let digits = item.replace('_', "");
        let (radix, digits) = match digits.get(..2) {
            Some("0x" | "0X") => (16, &digits[2..]),
            Some("0o" | "0O") => (8, &digits[2..]),
            Some("0b" | "0B") => (2, &digits[2..]),
            _ => (10, &digits[..]),
        };
        u64::from_str_radix(digits, radix).ok()
    };
    fn overflows(mut dims: impl Iterator<Item = u64>) -> bool {
        dims.try_fold(1u64, u64::checked_mul).is_none()
    }
    let mut open = None;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => open = Some(i),
            ')' | ']' => {
                let Some(start) = open.take() else { continue };
                let group = &text[start + 1..i];
                let dims: Option<Vec<u64>> = group
                    .split(',')
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .map(python_uint)
                    .collect();
                if let Some(dims) = dims
                    && (overflows(dims.iter().copied()) || overflows(dims.iter().rev().copied()))
                {
                    return Some(cut(group.trim()));
                }
            }
            _ => {}
        }
    }
    None
}

fn widen<T: Into<i64>>(v: Vec<T>) -> Vec<i64> {
    v.into_iter().map(Into::into).collect()
}
