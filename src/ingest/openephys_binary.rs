//! Open Ephys GUI **binary format** recordings: the spikes a Record Node wrote.
//!
//! A recording is the folder `<session>/Record Node <id>/experiment<n>/recording<m>/` holding
//! `structure.oebin` (JSON: `GUI version` and the `continuous`, `events` and `spikes` entries)
//! and, per spike entry, a folder of `.npy` arrays under `spikes/`. The layouts below are the
//! ones the GUI writes and open-ephys-python-tools reads:
//!
//! - plugin-GUI `Source/Processors/RecordNode/BinaryFormat/BinaryRecording.cpp` (`openFiles`,
//!   `writeSpike`, `getProcessorString`; github.com/open-ephys/plugin-GUI, commit
//!   `7d8c513ae643d2d5cd37a7f95558343c8422873e`), and its 0.5 predecessor (the same file's
//!   `spike_times.npy` / `spike_electrode_indices.npy` / `spike_clusters.npy` version);
//! - open-ephys-python-tools `src/open_ephys/analysis/formats/BinaryRecording.py`
//!   (`BinaryRecording.Spikes`, `detect_recordings`; commit
//!   `eceddcaefbc01734a0a2a1cde4dd4b151da925e9`).
//!
//! **GUI 0.6 and later** (`GUI version` ≥ 0.6): one folder per electrode (spike channel),
//! `spikes/<source node name>-<source node id>.<stream name>/<electrode name>/`, named by the
//! entry's `folder`:
//!
//! | file | dtype, shape | meaning |
//! |---|---|---|
//! | `sample_numbers.npy` | int64 `[n]` | the spike's sample number in its stream |
//! | `timestamps.npy` | float64 `[n]` | its time, **seconds** (synchronised to the main stream when the GUI had one); optional here |
//! | `clusters.npy` | uint16 `[n]` | the sorted id; **0 = unsorted** |
//! | `electrode_indices.npy` | uint16 `[n]` | the electrode's index among the Record Node's spike channels; optional, length checked |
//! | `waveforms.npy` | int16 | not read |
//!
//! with the entry's `name` (the electrode's name, e.g. `Electrode 1`), `stream_name` and
//! `sample_rate` (Hz).
//!
//! **GUI 0.5** (`GUI version` 0.5.x): one folder per spike group, the entry's `folder_name`
//! (`Spike_Detector-110.0/spike_group_1/`), holding `spike_times.npy` (int64 sample numbers),
//! `spike_clusters.npy` (uint16 sorted ids), `spike_electrode_indices.npy` (uint16, **1-based**
//! into the entry's `channels`, whose `channel_name` names the electrode; optional when the
//! group has one electrode) and `spike_waveforms.npy` (not read); the stream is the folder's
//! processor part (`Spike_Detector-110.0`).
//!
//! # Units and times
//! A unit is the spikes of one electrode with one sorted id, named as the live Event
//! Broadcaster source names it ([`UnitKey`], default `{electrode}/{sorted_id}`, e.g.
//! `Electrode 1/0`; [`super::openephys`] module docs), so a lab's live results and archive
//! results name units alike. Units are numbered in entry order, then ascending sorted id. A
//! spike's time is its `timestamps.npy` value when the file is there, else its sample number
//! over the entry's `sample_rate` (seconds, `f64`).
//!
//! With [`OpenEphysOptions::units`] `["sorted"]` only spikes with a sorted id other than 0 are
//! read (`["unsorted"]`: only those with 0); the others are counted in
//! [`OpenEphysRecording::dropped_spikes`] and logged. Event (TTL) and continuous data are not
//! read: they are not spikes.
//!
//! Every error names the file and the field or entry at fault; no input panics.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use npyz::{DType, TypeChar};
use serde_json::Value;

use super::IngestError;
use super::csv::cut;
use super::openephys::UnitKey;
use super::phy::{open_npy, read_integers};
use crate::event::{Alphabet, EventStream, EventType, Ordering};

/// The JSON file that describes a recording.
pub(crate) const OEBIN: &str = "structure.oebin";

/// The values [`OpenEphysOptions::units`] accepts.
pub(crate) const UNIT_GROUPS: [&str; 2] = ["sorted", "unsorted"];

/// How to read a recording.
#[derive(Clone, Debug, Default)]
pub struct OpenEphysOptions {
    /// Time order within each electrode's files: the GUI writes spikes in time order; with
    /// [`Ordering::RequireSorted`] anything else is an error.
    pub ordering: Ordering,
    /// Keep only `sorted` (sorted id ≠ 0) or `unsorted` (sorted id 0) spikes; `None` keeps all.
    pub units: Option<Vec<String>>,
    /// How units are named (default `{electrode}/{sorted_id}`).
    pub unit_key: UnitKey,
}

/// The `structure.oebin` layout of a recording.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// GUI 0.5.x: `spike_times.npy`, `spike_clusters.npy`, `spike_electrode_indices.npy`.
    V05,
    /// GUI 0.6 and later: `sample_numbers.npy`, `timestamps.npy`, `clusters.npy`.
    V06,
}

/// One unit of the recording: an electrode and a sorted id.
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    /// Its name under [`OpenEphysOptions::unit_key`].
    pub name: String,
    /// The stream's name (0.5: the spike folder's processor part).
    pub stream: String,
    /// The electrode's name.
    pub electrode: String,
    /// The sorted id (0: unsorted).
    pub sorted_id: i64,
    /// Its spikes in the files.
    pub spikes: usize,
    /// Whether they were read ([`OpenEphysOptions::units`]).
    pub kept: bool,
}

/// A recording's spikes read into a stream.
#[derive(Clone, Debug)]
pub struct OpenEphysRecording {
    /// The kept spikes, seconds; types are the kept units (entry order, then sorted id).
    pub stream: EventStream,
    /// The `structure.oebin` read.
    pub oebin: PathBuf,
    /// Its `GUI version`.
    pub gui_version: String,
    /// Its layout.
    pub layout: Layout,
    /// Every unit with spikes (several units may share a name under
    /// [`UnitKey::Electrode`]).
    pub units: Vec<Unit>,
    /// Spikes left out by [`OpenEphysOptions::units`].
    pub dropped_spikes: usize,
    /// Entries whose times came from `timestamps.npy` (the others: sample numbers over the
    /// sample rate).
    pub entries_with_timestamps: usize,
}

/// True when `path` is a `structure.oebin` file or a folder holding at least one recording
/// (see [`find_recordings`]).
#[must_use]
pub(crate) fn is_openephys_binary(path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n == OEBIN) {
        return path.is_file();
    }
    path.is_dir() && !find_recordings(path).is_empty()
}

/// The `structure.oebin` files of the recordings in `dir`: its own, else those of
/// `recording*/` (an experiment folder), else of `experiment*/recording*/` (a Record Node
/// folder), else of `*/experiment*/recording*/` (a session folder of Record Nodes), the first
/// of these that finds any, in natural order (`recording2` before `recording10`).
#[must_use]
pub(crate) fn find_recordings(dir: &Path) -> Vec<PathBuf> {
    if dir.join(OEBIN).is_file() {
        return vec![dir.join(OEBIN)];
    }
    let children = |d: &Path, prefix: Option<&str>| -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(d) else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .filter(|p| {
                prefix.is_none_or(|pre| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(pre))
                })
            })
            .collect();
        found.sort_by_key(|p| natural_key(&p.to_string_lossy()));
        found
    };
    let with_oebin = |dirs: Vec<PathBuf>| -> Vec<PathBuf> {
        dirs.into_iter()
            .map(|d| d.join(OEBIN))
            .filter(|f| f.is_file())
            .collect()
    };
    let recordings = with_oebin(children(dir, Some("recording")));
    if !recordings.is_empty() {
        return recordings;
    }
    let in_node = |node: &Path| -> Vec<PathBuf> {
        children(node, Some("experiment"))
            .iter()
            .flat_map(|e| with_oebin(children(e, Some("recording"))))
            .collect()
    };
    let recordings = in_node(dir);
    if !recordings.is_empty() {
        return recordings;
    }
    children(dir, None)
        .iter()
        .flat_map(|n| in_node(n))
        .collect()
}

/// Digits compared as numbers, the rest as text.
fn natural_key(s: &str) -> Vec<(u64, String)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                key.push((
                    digits.parse().unwrap_or(u64::MAX),
                    std::mem::take(&mut text),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    key.push((digits.parse().unwrap_or(0), text));
    key
}

/// The `structure.oebin` that `path` names: the file itself, or the one recording of a
/// recording, experiment, Record Node or session folder.
///
/// # Errors
/// [`IngestError::BadFile`] for a file that is not a `structure.oebin`, a folder holding no
/// recording, or one holding several (listed, with how to pick one).
pub fn locate(path: &Path) -> Result<PathBuf, IngestError> {
    if path.is_file() {
        if path.file_name().is_some_and(|n| n == OEBIN) {
            return Ok(path.to_path_buf());
        }
        return Err(IngestError::BadFile {
            path: path.to_path_buf(),
            message: "is not an Open Ephys `structure.oebin`".into(),
        });
    }
    let found = find_recordings(path);
    match found.len() {
        0 => Err(IngestError::BadFile {
            path: path.to_path_buf(),
            message: "holds no Open Ephys recording (`structure.oebin`, in the folder or in \
                      `recording*/`, `experiment*/recording*/`)"
                .into(),
        }),
        1 => Ok(found.into_iter().next().unwrap_or_default()),
        n => Err(IngestError::BadFile {
            path: path.to_path_buf(),
            message: format!(
                "holds {n} Open Ephys recordings: {}; pass one recording folder (or its \
                 `structure.oebin`) as the input",
                found
                    .iter()
                    .map(|f| {
                        let folder = f.parent().unwrap_or(f);
                        format!(
                            "`{}`",
                            folder.strip_prefix(path).unwrap_or(folder).display()
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// One spike entry's arrays, read and checked.
struct EntrySpikes {
    stream: String,
    /// Electrode names; a spike's electrode indexes this.
    electrodes: Vec<String>,
    /// Per spike: time (s), electrode, sorted id.
    spikes: Vec<(f64, usize, i64)>,
    from_timestamps: bool,
}

/// Reads the spikes of the Open Ephys binary recording at `path` (a `structure.oebin` or a
/// folder holding exactly one recording; module docs for the layout, names and times).
///
/// # Errors
/// Every error names the file and the field or entry at fault: [`IngestError::BadFile`] for
/// a path without exactly one recording, a `structure.oebin` that is not JSON or lacks
/// `GUI version` or `spikes` (or a spike entry's `name`, `stream_name`, `folder`/
/// `folder_name`, `sample_rate`, `channels`), a spike folder outside the recording, a missing,
/// truncated or non-`.npy` array, a wrong dtype (integers for samples, ids and indices,
/// floats for timestamps), arrays of different lengths, negative sample numbers or sorted ids,
/// a non-finite or negative timestamp, an electrode index outside the entry's channels, two
/// electrodes given one unit name, an unknown `units` group, unsorted times with
/// [`Ordering::RequireSorted`]; [`IngestError::Io`] for an unreadable file;
/// [`IngestError::NoEvents`] when no spike remains.
pub fn read_openephys_binary(
    path: &Path,
    options: &OpenEphysOptions,
) -> Result<OpenEphysRecording, IngestError> {
    let oebin = locate(path)?;
    let bad = |message: String| IngestError::BadFile {
        path: oebin.clone(),
        message,
    };
    if let Some(wanted) = &options.units
        && let Some(g) = wanted.iter().find(|g| !UNIT_GROUPS.contains(&g.as_str()))
    {
        return Err(IngestError::Option {
            path: path.to_path_buf(),
            message: format!(
                "`--units {}`: Open Ephys spikes are `sorted` (sorted id ≠ 0) or `unsorted` \
                 (sorted id 0)",
                cut(g)
            ),
        });
    }
    let recording = oebin.parent().unwrap_or(Path::new(".")).to_path_buf();
    let text = std::fs::read(&oebin).map_err(|source| IngestError::Io {
        path: oebin.clone(),
        source,
    })?;
    let json: Value =
        serde_json::from_slice(&text).map_err(|e| bad(format!("is not valid JSON: {e}")))?;
    let Some(version_value) = json.get("GUI version") else {
        return Err(bad(
            "`GUI version` is missing; a `structure.oebin` names the GUI version that wrote it"
                .into(),
        ));
    };
    let Some(gui_version) = version_value.as_str().map(str::to_owned) else {
        return Err(bad(format!(
            "`GUI version` is {}; expected a string like \"0.6.7\"",
            cut(&version_value.to_string())
        )));
    };
    let layout = layout_of(&gui_version).ok_or_else(|| {
        bad(format!(
            "`GUI version` \"{}\" is not a version like \"0.6.7\"",
            cut(&gui_version)
        ))
    })?;
    let Some(entries_value) = json.get("spikes") else {
        return Err(bad(
            "`spikes` is missing; the spike channels a Record Node recorded are listed there"
                .into(),
        ));
    };
    let Some(entries) = entries_value.as_array() else {
        return Err(bad(format!(
            "`spikes` is {}; expected a list of spike channels",
            kind(entries_value)
        )));
    };
    let mut read = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        read.push(read_entry(
            &oebin,
            &recording,
            layout,
            i,
            entry,
            options.ordering,
        )?);
    }

    // Units: (entry, electrode, sorted id) → spikes, in entry, electrode, sorted-id order.
    let mut counts: BTreeMap<(usize, usize, i64), usize> = BTreeMap::new();
    for (e, entry) in read.iter().enumerate() {
        for &(_, electrode, sorted) in &entry.spikes {
            *counts.entry((e, electrode, sorted)).or_default() += 1;
        }
    }
    let wanted = |sorted: i64| {
        options
            .units
            .as_ref()
            .is_none_or(|groups| groups.iter().any(|g| (g == "sorted") == (sorted != 0)))
    };
    let mut alphabet = Alphabet::new();
    let mut type_of: BTreeMap<(usize, usize, i64), EventType> = BTreeMap::new();
    let mut owner: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut units = Vec::with_capacity(counts.len());
    for (&(e, electrode, sorted), &spikes) in &counts {
        let entry = &read[e];
        let electrode_name = &entry.electrodes[electrode];
        let name = options
            .unit_key
            .name(&entry.stream, electrode_name, &sorted.to_string());
        match owner.get(&name) {
            Some(&(e0, el0)) if (e0, el0) != (e, electrode) => {
                return Err(bad(format!(
                    "`spikes[{e}]` electrode `{}` (stream `{}`) and `spikes[{e0}]` electrode `{}` \
                     (stream `{}`) both give the unit name `{}`; their spikes would merge. \
                     Name units with their stream (`--unit-key full`)",
                    cut(electrode_name),
                    cut(&entry.stream),
                    cut(&read[e0].electrodes[el0]),
                    cut(&read[e0].stream),
                    cut(&name)
                )));
            }
            _ => {
                owner.insert(name.clone(), (e, electrode));
            }
        }
        let kept = wanted(sorted);
        if kept {
            type_of.insert((e, electrode, sorted), alphabet.intern(&name));
        }
        units.push(Unit {
            name,
            stream: entry.stream.clone(),
            electrode: electrode_name.clone(),
            sorted_id: sorted,
            spikes,
            kept,
        });
    }
    let total: usize = read.iter().map(|e| e.spikes.len()).sum();
    let mut events: Vec<(f64, EventType)> = Vec::with_capacity(total);
    for (e, entry) in read.iter().enumerate() {
        for &(t, electrode, sorted) in &entry.spikes {
            if let Some(&ty) = type_of.get(&(e, electrode, sorted)) {
                events.push((t, ty));
            }
        }
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let dropped_spikes = total - events.len();
    if events.is_empty() {
        let what = match &options.units {
            Some(g) if total > 0 => format!(
                "the `{}` spikes of `spikes` (sorted ids present: {})",
                g.join("`, `"),
                units
                    .iter()
                    .map(|u| u.sorted_id.to_string())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => "`spikes`".to_owned(),
        };
        return Err(IngestError::NoEvents { path: oebin, what });
    }
    if dropped_spikes > 0 {
        tracing::warn!(
            file = %oebin.display(),
            units_left_out = units.iter().filter(|u| !u.kept).count(),
            spikes_left_out = dropped_spikes,
            units_kept = type_of.len(),
            "Left out the Open Ephys spikes of the other sorting state."
        );
    }
    let (times, types): (Vec<f64>, Vec<EventType>) = events.into_iter().unzip();
    let stream =
        EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).map_err(|source| {
            IngestError::Event {
                path: oebin.clone(),
                source,
            }
        })?;
    Ok(OpenEphysRecording {
        stream,
        entries_with_timestamps: read.iter().filter(|e| e.from_timestamps).count(),
        oebin,
        gui_version,
        layout,
        units,
        dropped_spikes,
    })
}

/// The layout of a `GUI version` (`major.minor[.…]`), or `None` when it is not one.
fn layout_of(version: &str) -> Option<Layout> {
    let mut parts = version.trim().split('.');
    let major: u64 = parts.next()?.trim().parse().ok()?;
    let minor: u64 = parts.next()?.trim().parse().ok()?;
    Some(if (major, minor) < (0, 6) {
        Layout::V05
    } else {
        Layout::V06
    })
}

/// A JSON value's kind, in words, for errors.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Reads spike entry `i` of `structure.oebin` and its arrays.
fn read_entry(
    oebin: &Path,
    recording: &Path,
    layout: Layout,
    i: usize,
    entry: &Value,
    ordering: Ordering,
) -> Result<EntrySpikes, IngestError> {
    let bad = |message: String| IngestError::BadFile {
        path: oebin.to_path_buf(),
        message,
    };
    let string = |field: &str| -> Result<String, IngestError> {
        match entry.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(bad(format!(
                "`spikes[{i}].{field}` is {}; expected a string",
                kind(other)
            ))),
            None => Err(bad(format!("`spikes[{i}].{field}` is missing"))),
        }
    };
    if !entry.is_object() {
        return Err(bad(format!(
            "`spikes[{i}]` is {}; expected a spike channel (an object)",
            kind(entry)
        )));
    }
    let rate = match entry.get("sample_rate") {
        Some(v) => v.as_f64().ok_or_else(|| {
            bad(format!(
                "`spikes[{i}].sample_rate` is {}; expected a number of Hz",
                kind(v)
            ))
        })?,
        None => return Err(bad(format!("`spikes[{i}].sample_rate` is missing"))),
    };
    if !(rate.is_finite() && rate > 0.0) {
        return Err(bad(format!(
            "`spikes[{i}].sample_rate` is {rate}; it must be a positive number of Hz"
        )));
    }
    let folder_field = match layout {
        Layout::V06 => "folder",
        Layout::V05 => "folder_name",
    };
    let folder = string(folder_field)?;
    let relative = Path::new(&folder);
    if folder.trim().is_empty()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(bad(format!(
            "`spikes[{i}].{folder_field}` \"{}\" is not a folder under `spikes/`",
            cut(&folder)
        )));
    }
    let dir = recording.join("spikes").join(relative);
    let (stream, electrodes) = match layout {
        Layout::V06 => (string("stream_name")?, vec![string("name")?]),
        Layout::V05 => {
            let stream = relative
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .unwrap_or_default();
            let channels = match entry.get("channels") {
                Some(Value::Array(a)) if !a.is_empty() => a,
                Some(other) => {
                    return Err(bad(format!(
                        "`spikes[{i}].channels` is {}; expected a list of the group's \
                         electrodes",
                        if other.as_array().is_some() {
                            "an empty list"
                        } else {
                            kind(other)
                        }
                    )));
                }
                None => return Err(bad(format!("`spikes[{i}].channels` is missing"))),
            };
            let mut names = Vec::with_capacity(channels.len());
            for (k, ch) in channels.iter().enumerate() {
                match ch.get("channel_name") {
                    Some(Value::String(s)) => names.push(s.trim().to_owned()),
                    Some(other) => {
                        return Err(bad(format!(
                            "`spikes[{i}].channels[{k}].channel_name` is {}; expected a string",
                            kind(other)
                        )));
                    }
                    None => {
                        return Err(bad(format!(
                            "`spikes[{i}].channels[{k}].channel_name` is missing"
                        )));
                    }
                }
            }
            (stream, names)
        }
    };
    let (samples_file, clusters_file, electrodes_file) = match layout {
        Layout::V06 => (
            "sample_numbers.npy",
            "clusters.npy",
            "electrode_indices.npy",
        ),
        Layout::V05 => (
            "spike_times.npy",
            "spike_clusters.npy",
            "spike_electrode_indices.npy",
        ),
    };
    let need = |file: &str| -> Result<PathBuf, IngestError> {
        let p = dir.join(file);
        if p.is_file() {
            Ok(p)
        } else {
            Err(IngestError::BadFile {
                path: p,
                message: format!(
                    "is missing; `spikes[{i}]` of `{}` ({}) needs it",
                    oebin.display(),
                    cut(&electrodes.join(", "))
                ),
            })
        }
    };
    let samples_path = need(samples_file)?;
    let samples = read_integers(&samples_path)?;
    let clusters_path = need(clusters_file)?;
    let clusters = read_integers(&clusters_path)?;
    let length = |path: &Path, len: usize| -> Result<(), IngestError> {
        if len == samples.len() {
            Ok(())
        } else {
            Err(IngestError::BadFile {
                path: path.to_path_buf(),
                message: format!(
                    "has {len} entries but `{samples_file}` has {}; there must be one per spike",
                    samples.len()
                ),
            })
        }
    };
    length(&clusters_path, clusters.len())?;
    if let Some(k) = samples.iter().position(|&s| s < 0) {
        return Err(IngestError::BadFile {
            path: samples_path,
            message: format!(
                "entry {k} is {} samples; sample numbers must be ≥ 0",
                samples[k]
            ),
        });
    }
    if let Some(k) = clusters.iter().position(|&c| c < 0) {
        return Err(IngestError::BadFile {
            path: clusters_path,
            message: format!("entry {k} is {}; sorted ids are ≥ 0", clusters[k]),
        });
    }
    let electrodes_path = dir.join(electrodes_file);
    let electrode_of: Vec<usize> = if electrodes_path.is_file() {
        let indices = read_integers(&electrodes_path)?;
        length(&electrodes_path, indices.len())?;
        match layout {
            // One electrode per folder; the index is the Record Node's, not the folder's.
            Layout::V06 => vec![0; samples.len()],
            Layout::V05 => {
                let mut of = Vec::with_capacity(indices.len());
                for (k, &index) in indices.iter().enumerate() {
                    let Some(e) = usize::try_from(index)
                        .ok()
                        .and_then(|x| x.checked_sub(1))
                        .filter(|&e| e < electrodes.len())
                    else {
                        return Err(IngestError::BadFile {
                            path: electrodes_path,
                            message: format!(
                                "entry {k} is {index}; the group's electrodes are numbered 1 to \
                                 {} (`spikes[{i}].channels`)",
                                electrodes.len()
                            ),
                        });
                    };
                    of.push(e);
                }
                of
            }
        }
    } else if electrodes.len() == 1 {
        vec![0; samples.len()]
    } else {
        return Err(IngestError::BadFile {
            path: electrodes_path,
            message: format!(
                "is missing; `spikes[{i}]` has {} electrodes, so each spike's must be given",
                electrodes.len()
            ),
        });
    };
    let timestamps_path = dir.join("timestamps.npy");
    let timestamps = if layout == Layout::V06 && timestamps_path.is_file() {
        let ts = read_floats(&timestamps_path)?;
        length(&timestamps_path, ts.len())?;
        if let Some(k) = ts.iter().position(|t| !t.is_finite() || *t < 0.0) {
            return Err(IngestError::BadFile {
                path: timestamps_path,
                message: format!(
                    "entry {k} is {} s; spike times must be finite and ≥ 0",
                    ts[k]
                ),
            });
        }
        Some(ts)
    } else {
        None
    };
    let from_timestamps = timestamps.is_some();
    let times: Vec<f64> = match timestamps {
        Some(ts) => ts,
        None => samples.iter().map(|&s| s as f64 / rate).collect(),
    };
    if ordering == Ordering::RequireSorted
        && let Some(k) = times.windows(2).position(|w| w[1] < w[0])
    {
        let file = if from_timestamps {
            timestamps_path
        } else {
            samples_path
        };
        return Err(IngestError::BadFile {
            path: file,
            message: format!(
                "entry {} ({} s) comes before entry {k} ({} s); spike times must be sorted \
                 (pass `--sort` to sort them)",
                k + 1,
                times[k + 1],
                times[k]
            ),
        });
    }
    let spikes = times
        .into_iter()
        .zip(electrode_of)
        .zip(clusters)
        .map(|((t, e), c)| (t, e, c))
        .collect();
    Ok(EntrySpikes {
        stream,
        electrodes,
        spikes,
        from_timestamps,
    })
}

/// A 1-D (or `[n, 1]`) float `.npy` array (`f8`, or `f4` widened exactly) as `f64`.
fn read_floats(path: &Path) -> Result<Vec<f64>, IngestError> {
    let bad = |message: String| IngestError::BadFile {
        path: path.to_path_buf(),
        message,
    };
    let npy = open_npy(path)?;
    let DType::Plain(ts) = npy.dtype() else {
        return Err(bad(format!(
            "has dtype {}; expected float64 seconds",
            cut(&npy.dtype().descr())
        )));
    };
    let read_err = |e: std::io::Error| bad(format!("cannot read the values: {e}"));
    match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 8) => npy.into_vec::<f64>().map_err(read_err),
        (TypeChar::Float, 4) => Ok(npy
            .into_vec::<f32>()
            .map_err(read_err)?
            .into_iter()
            .map(f64::from)
            .collect()),
        _ => Err(bad(format!(
            "has dtype `{ts}`; expected float64 seconds (the GUI writes `<f8`)"
        ))),
    }
}
