//! Mining results written back where the data lives: an NWB file's processing module
//! `synfire` with two `DynamicTable`s (written by [`crate::ingest::nwb::dynamic`], read by
//! pynwb as `nwbfile.processing["synfire"]["episodes"].to_dataframe()`):
//!
//! - `episodes`, one row per listed episode of two or more nodes: `episode` (the text
//!   output's notation, e.g. `6-(10,20]ms-2`), `units` (a `DynamicTableRegion` into
//!   `/units`, one row per node: the episode is linked to its units), `unit_labels`,
//!   `intervals` (per gap, notation in ms), `count` (non-overlapped occurrences), and with a
//!   significance test `tested`, `surrogate_mean`, `surrogate_std`, `statistic`, `p_value`,
//!   `p_adjusted`, `significant` (NaN and false where untested), and with a sample-split test
//!   `test_count` (the count in the test part; −1 where untested);
//! - `occurrences`, one row per occurrence: `episode` (a region into `episodes`),
//!   `start_time`, `stop_time` (seconds: its first and last spike) and `spike_times` (ragged,
//!   one per node) — the occurrences [`crate::episode::occurrences`] lists, exactly `count`
//!   per episode.
//!
//! The file is a copy of the input NWB (its own units table, rows = the stream's units in
//! `/units/id` order) or, for other inputs, a new NWB file with the stream's units
//! ([`crate::ingest::nwb::write_units`], rows in alphabet order).

use std::path::Path;

use crate::episode::{Episode, MiningResult, TypeIndex};
use crate::event::EventStream;
use crate::ingest::IngestError;
use crate::ingest::nwb::dynamic::{Column, ColumnData, Table, write_processing_module};
use crate::significance::{Listing, SignificanceResult};

/// The processing module's name.
pub const MODULE: &str = "synfire";

/// Writes the episodes `listing` keeps (two or more nodes) and their occurrences into the
/// NWB file `out`: a copy of `input_nwb` when given (the recording the stream was read
/// from), else a new file holding `stream`'s units. `sig` adds the significance columns.
///
/// # Errors
/// [`IngestError::Option`] when `out` is `input_nwb` itself (the input is never modified);
/// [`IngestError::Io`] when the copy fails; [`IngestError::Hdf5`] naming the object that
/// cannot be written.
pub fn write_results(
    out: &Path,
    input_nwb: Option<&Path>,
    stream: &EventStream,
    result: &MiningResult,
    sig: Option<&SignificanceResult>,
    listing: &Listing<'_>,
) -> Result<(), IngestError> {
    match input_nwb {
        Some(input) => {
            let same = std::fs::canonicalize(input)
                .ok()
                .zip(std::fs::canonicalize(out).ok())
                .is_some_and(|(a, b)| a == b);
            if same {
                return Err(IngestError::Option {
                    path: out.into(),
                    message: "is the input itself; results go into a copy (give another path)"
                        .into(),
                });
            }
            std::fs::copy(input, out).map_err(|source| IngestError::Io {
                path: out.into(),
                source,
            })?;
        }
        None => crate::ingest::nwb::write_units(out, stream)?,
    }
    let alphabet = stream.alphabet();
    let listed: Vec<(usize, &Episode, u64)> = result
        .episodes
        .iter()
        .enumerate()
        .filter(|(i, f)| listing.keep[*i] && f.episode.len() >= 2)
        .map(|(i, f)| (i, &f.episode, f.count))
        .collect();
    let rows = listed.len();
    let names: Vec<String> = listed
        .iter()
        .map(|(_, e, _)| e.display(alphabet).to_string())
        .collect();
    let mut unit_rows = Vec::new();
    let mut unit_labels = Vec::new();
    let mut unit_ends = Vec::with_capacity(rows);
    let mut intervals = Vec::new();
    let mut interval_ends = Vec::with_capacity(rows);
    for (_, e, _) in &listed {
        for &t in e.types() {
            unit_rows.push(i64::from(t.0));
            unit_labels.push(alphabet.label(t).to_owned());
        }
        unit_ends.push(unit_rows.len() as u64);
        intervals.extend(e.intervals().iter().map(ToString::to_string));
        interval_ends.push(intervals.len() as u64);
    }
    let counts: Vec<i64> = listed
        .iter()
        .map(|(_, _, c)| i64::try_from(*c).unwrap_or(i64::MAX))
        .collect();
    let tests: Vec<Option<&crate::significance::TestStats>> = listed
        .iter()
        .map(|(i, _, _)| listing.tests[*i].map(|t| &t.stats))
        .collect();
    let stat = |f: fn(&crate::significance::TestStats) -> f64| -> Vec<f64> {
        tests.iter().map(|t| t.map_or(f64::NAN, f)).collect()
    };
    let tested: Vec<bool> = tests.iter().map(Option::is_some).collect();
    let mean = stat(|t| t.surrogate_mean);
    let std = stat(|t| t.surrogate_std);
    let statistic = stat(|t| t.statistic);
    let p_value = stat(|t| t.p_value);
    let p_adjusted = stat(|t| t.p_adjusted);
    let significant: Vec<bool> = tests
        .iter()
        .map(|t| t.is_some_and(|t| t.significant))
        .collect();
    // Sample splitting: each tested episode's count in the test part (-1: untested).
    let test_counts: Vec<i64> = tests
        .iter()
        .map(|t| {
            t.and_then(|t| t.test_count)
                .map_or(-1, |c| i64::try_from(c).unwrap_or(i64::MAX))
        })
        .collect();

    let mut episode_columns = vec![
        Column {
            name: "episode",
            description: "the episode in synfire's text notation (units and gaps, intervals in ms)",
            data: ColumnData::Text(&names),
        },
        Column {
            name: "units",
            description: "the episode's units, node by node (rows of /units)",
            data: ColumnData::RaggedRegion {
                rows: &unit_rows,
                ends: &unit_ends,
                table: "/units",
            },
        },
        Column {
            name: "unit_labels",
            description: "the units' labels as synfire names them, node by node",
            data: ColumnData::RaggedText {
                values: &unit_labels,
                ends: &unit_ends,
            },
        },
        Column {
            name: "intervals",
            description: "each gap's delay interval, `(lo,hi]` or `[lo,hi]`, in ms",
            data: ColumnData::RaggedText {
                values: &intervals,
                ends: &interval_ends,
            },
        },
        Column {
            name: "count",
            description: "non-overlapped occurrences (the rows of the occurrences table)",
            data: ColumnData::Int(&counts),
        },
    ];
    if sig.is_some() {
        episode_columns.extend([
            Column {
                name: "tested",
                description: "whether the episode was tested against surrogates",
                data: ColumnData::Bool(&tested),
            },
            Column {
                name: "surrogate_mean",
                description: "mean count over the surrogates (NaN: untested)",
                data: ColumnData::Float(&mean),
            },
            Column {
                name: "surrogate_std",
                description: "standard deviation of the count over the surrogates",
                data: ColumnData::Float(&std),
            },
            Column {
                name: "statistic",
                description: "the test statistic (docs/significance.md)",
                data: ColumnData::Float(&statistic),
            },
            Column {
                name: "p_value",
                description: "raw empirical p-value",
                data: ColumnData::Float(&p_value),
            },
            Column {
                name: "p_adjusted",
                description: "p-value adjusted by the multiple-testing procedure",
                data: ColumnData::Float(&p_adjusted),
            },
            Column {
                name: "significant",
                description: "p_adjusted <= alpha",
                data: ColumnData::Bool(&significant),
            },
        ]);
        if sig.is_some_and(|s| s.sample_split.is_some()) {
            episode_columns.push(Column {
                name: "test_count",
                description: "sample splitting: the count in the test part, which the statistic and p-values compare with its surrogates (-1: untested)",
                data: ColumnData::Int(&test_counts),
            });
        }
    }
    let description = match sig {
        Some(s) => format!(
            "frequent serial episodes mined by synfire {}; significance: {} surrogates ({}), {}, alpha {}",
            env!("CARGO_PKG_VERSION"),
            s.n_surrogates,
            s.method,
            s.correction,
            s.alpha
        ),
        None => format!(
            "frequent serial episodes mined by synfire {} (min count {})",
            env!("CARGO_PKG_VERSION"),
            result.min_count
        ),
    };

    // Occurrences, the count's own (Algorithm 1's greedy earliest-end choice).
    let index = TypeIndex::new(stream);
    let mut occ_episode = Vec::new();
    let mut starts = Vec::new();
    let mut stops = Vec::new();
    let mut spike_times = Vec::new();
    let mut spike_ends = Vec::new();
    for (row, (_, e, _)) in listed.iter().enumerate() {
        let times = crate::episode::occurrences(&index, e);
        for occ in times.chunks(e.len()) {
            occ_episode.push(row as i64);
            starts.push(occ[0]);
            stops.push(occ[occ.len() - 1]);
            spike_times.extend_from_slice(occ);
            spike_ends.push(spike_times.len() as u64);
        }
    }
    let episodes_path = format!("/processing/{MODULE}/episodes");
    let tables = [
        Table {
            name: "episodes",
            description: &description,
            rows,
            columns: episode_columns,
        },
        Table {
            name: "occurrences",
            description: "the non-overlapped occurrences each episode's count is made of",
            rows: occ_episode.len(),
            columns: vec![
                Column {
                    name: "episode",
                    description: "the episode (a row of the episodes table)",
                    data: ColumnData::Region {
                        rows: &occ_episode,
                        table: &episodes_path,
                    },
                },
                Column {
                    name: "start_time",
                    description: "the occurrence's first spike, seconds",
                    data: ColumnData::Float(&starts),
                },
                Column {
                    name: "stop_time",
                    description: "the occurrence's last spike, seconds",
                    data: ColumnData::Float(&stops),
                },
                Column {
                    name: "spike_times",
                    description: "the occurrence's spikes, node by node, seconds",
                    data: ColumnData::RaggedFloat {
                        values: &spike_times,
                        ends: &spike_ends,
                    },
                },
            ],
        },
    ];
    write_processing_module(
        out,
        MODULE,
        "synfire: frequent serial episodes of the units and their occurrences",
        &tables,
    )
}
