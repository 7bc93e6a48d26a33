//! Rendering of mining results: the JSON document of `synfire mine --format json`
//! (schema in `docs/mine-json.md`) and tdminer-style text.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use crate::episode::{MinerConfig, MiningResult, Truncation};
use crate::event::EventStream;

/// The JSON document of a mining run. Field order and names are the documented schema.
#[derive(Debug, Serialize)]
pub struct MineReport<'a> {
    /// Input path as given.
    pub input: &'a str,
    /// Number of events in the stream.
    pub events: usize,
    /// Span of the stream (last − first event time), seconds.
    pub span_s: f64,
    /// The settings used.
    pub params: Params<'a>,
    /// Per-level statistics.
    pub levels: &'a [crate::episode::LevelStats],
    /// False in a document written between levels while mining went on (a killed run leaves
    /// one); true in the final document, truncated or not.
    pub complete: bool,
    /// Why the run stopped early (`null` when it did not).
    pub truncated: Option<&'a Truncation>,
    /// Frequent episodes, level 1 included.
    pub episodes: Vec<EpisodeJson>,
}

/// The `params` object.
#[derive(Debug, Serialize)]
pub struct Params<'a> {
    /// Intervals `[low, high]` (meaning `(low, high]`), seconds.
    #[serde(flatten)]
    pub config: &'a MinerConfig,
    /// The minimum count the threshold resolved to.
    pub min_count: u64,
    /// Number of event types in the stream.
    pub event_types: usize,
}

/// One frequent episode in the JSON output.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EpisodeJson {
    /// Original labels of the nodes (NWB unit ids, CSV labels).
    pub labels: Vec<String>,
    /// Dense event-type ids of the nodes.
    pub types: Vec<u32>,
    /// `[low, high]` per gap, seconds (the interval is `(low, high]`).
    pub intervals_s: Vec<[f64; 2]>,
    /// Non-overlapped count.
    pub count: u64,
}

impl<'a> MineReport<'a> {
    /// Assembles the report of `result`, mined from `stream` (read from `input`) with `config`.
    #[must_use]
    pub fn new(
        input: &'a str,
        stream: &EventStream,
        config: &'a MinerConfig,
        result: &'a MiningResult,
    ) -> Self {
        let alphabet = stream.alphabet();
        let episodes = result
            .episodes
            .iter()
            .map(|f| EpisodeJson {
                labels: f
                    .episode
                    .types()
                    .iter()
                    .map(|&t| alphabet.label(t).to_owned())
                    .collect(),
                types: f.episode.types().iter().map(|t| t.0).collect(),
                intervals_s: f
                    .episode
                    .intervals()
                    .iter()
                    .map(|iv| [iv.low(), iv.high()])
                    .collect(),
                count: f.count,
            })
            .collect();
        Self {
            input,
            events: stream.len(),
            span_s: stream.span(),
            params: Params {
                config,
                min_count: result.min_count,
                event_types: alphabet.len(),
            },
            levels: &result.levels,
            complete: true,
            truncated: result.truncated.as_ref(),
            episodes,
        }
    }
}

/// Writes `report` as pretty JSON followed by a newline.
///
/// # Errors
/// I/O errors of `out`.
pub fn write_json(out: &mut dyn Write, report: &MineReport<'_>) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    writeln!(out)
}

/// Writes the result in tdminer's text style: `#` comment lines with the settings and per-level
/// statistics, then one `episode : count` line per frequent episode, e.g.
/// `a3-[0.004000,0.006000]-a5 : 5111`.
///
/// # Errors
/// I/O errors of `out`.
pub fn write_text(
    out: &mut dyn Write,
    input: &str,
    stream: &EventStream,
    config: &MinerConfig,
    result: &MiningResult,
) -> io::Result<()> {
    writeln!(out, "# synfire mine {input}")?;
    writeln!(
        out,
        "# events {}, event types {}, span {:.3} s, min count {} ({}), strategy {}",
        stream.len(),
        stream.alphabet().len(),
        stream.span(),
        result.min_count,
        config.threshold,
        match config.strategy {
            crate::episode::Strategy::OnePass => "one-pass",
            crate::episode::Strategy::TwoPass => "two-pass (PreElim, then exact)",
        }
    )?;
    let ivs: Vec<String> = config.intervals.iter().map(ToString::to_string).collect();
    writeln!(out, "# intervals (low, high] s: {}", ivs.join(" "))?;
    for l in &result.levels {
        writeln!(
            out,
            "# level {}: {} candidates, {} removed by bounds, {} eliminated by PreElim, {} \
             frequent, {:.4} s",
            l.level,
            l.candidates,
            l.removed_by_bounds,
            l.eliminated_by_preelim,
            l.frequent,
            l.seconds
        )?;
    }
    if let Some(t) = &result.truncated {
        writeln!(out, "# truncated: {t}")?;
    }
    for f in &result.episodes {
        writeln!(
            out,
            "{} : {}",
            f.episode.display(stream.alphabet()),
            f.count
        )?;
    }
    Ok(())
}
