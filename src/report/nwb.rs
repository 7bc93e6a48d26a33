//! Mining results written back where the data lives, in one of two layouts ([`NwbLayout`]):
//!
//! - [`NwbLayout::Events`] (the default), NWB 2.10's events: one `EventsTable` per listed
//!   episode in the file's `/events` group, `/events/synfire_episode_<row>` (row = the
//!   episode's row in the `episodes` table below, zero-padded), one row per occurrence:
//!   `timestamp` (`TimestampVectorData`, its first spike, seconds), `duration`
//!   (`DurationVectorData`, to its last spike), `units` (a `DynamicTableRegion` into `/units`,
//!   one row per node) and `spikes` (ragged, one time per node); the `source_description` names
//!   synfire. The processing module `synfire` holds the `episodes` table below, with a column
//!   `events_table` naming each episode's table. The file's `nwb_version` is raised to 2.10.0.
//!   pynwb ≥ 4 reads them as `nwbfile.events["synfire_episode_0"].to_dataframe()`.
//! - [`NwbLayout::Legacy`], for readers on an older pynwb: the processing module `synfire` with
//!   two `DynamicTable`s, `episodes` and `occurrences`, and nothing else changed.
//!
//! Both are written by [`crate::ingest::nwb::dynamic`]; the tables:
//!
//! - `episodes`, one row per listed episode of two or more nodes: `episode` (the text
//!   output's notation, e.g. `6-(10,20]ms-2`), `units` (a `DynamicTableRegion` into
//!   `/units`, one row per node: the episode is linked to its units), `unit_labels`,
//!   `intervals` (per gap, notation in ms), `count` (non-overlapped occurrences), and with a
//!   significance test `tested`, `surrogate_mean`, `surrogate_std`, `statistic`, `p_value`,
//!   `p_adjusted`, `significant` (NaN and false where untested), and with a sample-split test
//!   `test_count` (the count in the test part; −1 where untested);
//! - `occurrences` (legacy layout), one row per occurrence: `episode` (a region into `episodes`),
//!   `start_time`, `stop_time` (seconds: its first and last spike) and `spike_times` (ragged,
//!   one per node) — the occurrences [`crate::episode::occurrences`] lists, exactly `count`
//!   per episode.
//!
//! The file is a copy of the input NWB (its own units table, rows = the stream's units in
//! `/units/id` order) or, for other inputs, a new NWB file with the stream's units
//! ([`crate::ingest::nwb::write_units`], rows in alphabet order).

use std::path::Path;
use std::str::FromStr;

use crate::episode::{Episode, MiningResult, TypeIndex};
use crate::event::EventStream;
use crate::ingest::IngestError;
use crate::ingest::nwb::dynamic::{
    Column, ColumnData, SecondsKind, Table, write_events_tables, write_processing_module,
};
use crate::significance::{Listing, SignificanceResult};

/// The processing module's name.
pub(crate) const MODULE: &str = "synfire";

/// How `--nwb-output` lays the results out (`--nwb-layout`; see the module's documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NwbLayout {
    /// NWB 2.10 events: an `EventsTable` per episode under `/events`, the `episodes` table in
    /// the processing module `synfire`.
    #[default]
    Events,
    /// The processing module `synfire` with the `episodes` and `occurrences` tables only, for
    /// readers on pynwb older than 4 (NWB < 2.10).
    Legacy,
}

impl NwbLayout {
    /// The layouts' names, as `--nwb-layout` takes them.
    pub const NAMES: [&'static str; 2] = ["events", "legacy"];

    /// The layout's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Events => "events",
            Self::Legacy => "legacy",
        }
    }
}

impl FromStr for NwbLayout {
    type Err = String;

    /// `events` or `legacy`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "events" => Ok(Self::Events),
            "legacy" => Ok(Self::Legacy),
            other => Err(format!(
                "unknown NWB layout `{other}`: expected `events` (NWB 2.10 EventsTables) or `legacy` (processing module tables only)"
            )),
        }
    }
}

impl std::fmt::Display for NwbLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The name of the `EventsTable` of the episode in row `row` of `rows`: `synfire_episode_`
/// and the row, zero-padded to the digits of the last row.
#[must_use]
pub(crate) fn events_table_name(row: usize, rows: usize) -> String {
    let width = rows.saturating_sub(1).max(1).to_string().len();
    format!("synfire_episode_{row:0width$}")
}

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
    layout: NwbLayout,
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

    let table_names: Vec<String> = (0..rows).map(|r| events_table_name(r, rows)).collect();
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
    if layout == NwbLayout::Events {
        episode_columns.push(Column {
            name: "events_table",
            description: "the name of the episode's EventsTable in /events (its occurrences)",
            data: ColumnData::Text(&table_names),
        });
    }
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
    let occurrences: Vec<Vec<f64>> = listed
        .iter()
        .map(|(_, e, _)| crate::episode::occurrences(&index, e))
        .collect();
    match layout {
        NwbLayout::Legacy => {
            write_legacy(out, &listed, &occurrences, &description, episode_columns)
        }
        NwbLayout::Events => {
            write_processing_module(
                out,
                MODULE,
                "synfire: frequent serial episodes of the units (their occurrences: /events)",
                &[Table {
                    name: "episodes",
                    description: &description,
                    rows,
                    columns: episode_columns,
                }],
            )?;
            write_events(out, stream, &listed, &occurrences, &table_names)
        }
    }
}

/// One episode's occurrences as the columns of its `EventsTable`.
struct EventColumns {
    timestamp: Vec<f64>,
    duration: Vec<f64>,
    unit_rows: Vec<i64>,
    spike_times: Vec<f64>,
    ends: Vec<u64>,
    description: String,
}

/// The events layout's `EventsTable`s, one per listed episode (`names[row]`).
fn write_events(
    out: &Path,
    stream: &EventStream,
    listed: &[(usize, &Episode, u64)],
    occurrences: &[Vec<f64>],
    names: &[String],
) -> Result<(), IngestError> {
    let alphabet = stream.alphabet();
    let columns: Vec<EventColumns> = listed
        .iter()
        .zip(occurrences)
        .map(|((_, e, count), times)| {
            let n = e.len();
            let occ = times.len() / n.max(1);
            let mut c = EventColumns {
                timestamp: Vec::with_capacity(occ),
                duration: Vec::with_capacity(occ),
                unit_rows: Vec::with_capacity(times.len()),
                spike_times: times.clone(),
                ends: Vec::with_capacity(occ),
                description: format!(
                    "occurrences of the serial episode {} ({count} non-overlapped occurrences, the count's own): each row's timestamp is its first spike, its duration the time to its last spike; units and spikes list its spikes node by node",
                    e.display(alphabet)
                ),
            };
            for o in times.chunks(n) {
                c.timestamp.push(o[0]);
                c.duration.push(o[o.len() - 1] - o[0]);
                c.unit_rows.extend(e.types().iter().map(|t| i64::from(t.0)));
                c.ends.push(c.unit_rows.len() as u64);
            }
            c
        })
        .collect();
    let tables: Vec<Table<'_>> = columns
        .iter()
        .zip(names)
        .map(|(c, name)| Table {
            name,
            description: &c.description,
            rows: c.timestamp.len(),
            columns: vec![
                Column {
                    name: "timestamp",
                    description: "the occurrence's first spike, seconds",
                    data: ColumnData::Seconds {
                        values: &c.timestamp,
                        kind: SecondsKind::Timestamp,
                    },
                },
                Column {
                    name: "duration",
                    description: "from the occurrence's first spike to its last, seconds",
                    data: ColumnData::Seconds {
                        values: &c.duration,
                        kind: SecondsKind::Duration,
                    },
                },
                Column {
                    name: "units",
                    description: "the occurrence's units, node by node (rows of /units)",
                    data: ColumnData::RaggedRegion {
                        rows: &c.unit_rows,
                        ends: &c.ends,
                        table: "/units",
                    },
                },
                // Not `spike_times`: pynapple reads a table with a `*_times_index` column as
                // a units table (a TsGroup), which an episode's occurrences are not.
                Column {
                    name: "spikes",
                    description: "the occurrence's spikes, node by node, seconds",
                    data: ColumnData::RaggedFloat {
                        values: &c.spike_times,
                        ends: &c.ends,
                    },
                },
            ],
        })
        .collect();
    let source = format!(
        "synfire {}: frequent serial episodes mined from the units' spikes",
        env!("CARGO_PKG_VERSION")
    );
    write_events_tables(out, &source, &tables)
}

/// The legacy layout: the `episodes` and `occurrences` tables in the processing module.
fn write_legacy(
    out: &Path,
    listed: &[(usize, &Episode, u64)],
    occurrences: &[Vec<f64>],
    description: &str,
    episode_columns: Vec<Column<'_>>,
) -> Result<(), IngestError> {
    let mut occ_episode = Vec::new();
    let mut starts = Vec::new();
    let mut stops = Vec::new();
    let mut spike_times = Vec::new();
    let mut spike_ends = Vec::new();
    for (row, ((_, e, _), times)) in listed.iter().zip(occurrences).enumerate() {
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
            description,
            rows: listed.len(),
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
