//! Rendering of mining results: the JSON document of `synfire mine --format json`
//! (schema in `docs/mine-json.md`), tdminer-style text, the occurrences ([`write_occurrences`])
//! and NWB ([`nwb`]).

pub mod nwb;

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use crate::episode::{MinerConfig, MiningResult, Truncation};
use crate::event::EventStream;
use crate::significance::{Listing, SignificanceResult, TestStats};

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
    /// What looks wrong with the recording or the result ([`crate::episode::sanity`]): a span
    /// or rate outside physiology, a threshold above every count; empty when nothing does.
    pub warnings: Vec<String>,
    /// The significance test (`--surrogates`); absent without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub significance: Option<SignificanceJson>,
    /// Frequent episodes, level 1 included (with `--significant-only` or `--closed`, those
    /// listed).
    pub episodes: Vec<EpisodeJson>,
}

/// The `significance` object of the JSON document (and of each window of an episodes stage
/// that tests significance).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SignificanceJson {
    /// Surrogate method, e.g. `dither:0.015`.
    pub method: String,
    /// Number of surrogates.
    pub n_surrogates: usize,
    /// Level α.
    pub alpha: f64,
    /// `max-t`, `spectrum`, `fdr-bh`, `holm`, `bonferroni` or `none`.
    pub correction: String,
    /// Seed of the surrogates.
    pub seed: u64,
    /// Episodes tested.
    pub tested: usize,
    /// Episodes significant.
    pub significant: usize,
    /// Warnings (too few surrogates for the tests, a selection the procedure does not see).
    pub warnings: Vec<String>,
    /// `max-t` by sample splitting (`--sample-split`): the split and the selection
    /// (`fraction`, `split_s`, `selection_events`, `test_events`, `screened`,
    /// `screen_surrogates`, `family`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_split: Option<crate::significance::SplitSummary>,
}

impl SignificanceJson {
    /// The object of `r`.
    #[must_use]
    pub fn of(r: &SignificanceResult) -> Self {
        Self {
            method: r.method.clone(),
            n_surrogates: r.n_surrogates,
            alpha: r.alpha,
            correction: r.correction.name().to_owned(),
            seed: r.seed,
            tested: r.tested,
            significant: r.tests.iter().filter(|t| t.stats.significant).count(),
            warnings: r.warnings.clone(),
            sample_split: r.sample_split.clone(),
        }
    }
}

/// The `params` object.
#[derive(Debug, Serialize)]
pub struct Params<'a> {
    /// Intervals `[low, high]` as given, seconds (closedness in `interval_notation`).
    #[serde(flatten)]
    pub config: &'a MinerConfig,
    /// Each of `intervals` in the text output's notation, `(4,6]ms` or `[0,0.2]ms`.
    pub interval_notation: Vec<String>,
    /// The clock the intervals were given on, Hz, when they were given in samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_rate_hz: Option<f64>,
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
    /// `[low, high]` per gap as given, seconds (`(low, high]` or `[low, high]`: see
    /// `intervals`).
    pub intervals_s: Vec<[f64; 2]>,
    /// Each gap's interval in the text output's notation, `(4,6]ms` or `[0,0.2]ms`.
    pub intervals: Vec<String>,
    /// Non-overlapped count.
    pub count: u64,
    /// Its significance, when it was tested (the fields of [`TestStats`], flattened).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub test: Option<TestStats>,
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
                    .map(|iv| [iv.given().low_s(), iv.given().high_s()])
                    .collect(),
                intervals: f
                    .episode
                    .intervals()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
                count: f.count,
                test: None,
            })
            .collect();
        Self {
            input,
            events: stream.len(),
            span_s: stream.span(),
            params: Params {
                config,
                interval_notation: config.intervals.iter().map(ToString::to_string).collect(),
                sample_rate_hz: config
                    .intervals
                    .iter()
                    .find_map(|iv| match iv.given().unit {
                        crate::episode::IntervalUnit::Samples { rate_hz } => Some(rate_hz),
                        crate::episode::IntervalUnit::Seconds => None,
                    }),
                min_count: result.min_count,
                event_types: alphabet.len(),
            },
            levels: &result.levels,
            complete: true,
            truncated: result.truncated.as_ref(),
            warnings: crate::episode::sanity::check(stream, result),
            significance: None,
            episodes,
        }
    }

    /// Adds the significance test `sig` and lists only what `listing` keeps (it was made from
    /// the same result).
    #[must_use]
    pub fn annotated(mut self, sig: Option<&'a SignificanceResult>, listing: &Listing<'_>) -> Self {
        self.significance = sig.map(SignificanceJson::of);
        let episodes = std::mem::take(&mut self.episodes);
        self.episodes = episodes
            .into_iter()
            .zip(listing.keep.iter().zip(&listing.tests))
            .filter(|(_, (keep, _))| **keep)
            .map(|(mut e, (_, t))| {
                e.test = t.map(|t| t.stats.clone());
                e
            })
            .collect();
        self
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
/// `a3-(4,6]ms-a5 : 5111` (intervals in milliseconds, brackets as meant: `[0,0.2]ms` admits a
/// zero delay).
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
    write_text_header(out, input, stream, config, result)?;
    write_text_episodes(out, stream, result, None)
}

/// The `#` lines of the text format: input, stream, threshold, intervals, levels, truncation.
fn write_text_header(
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
    let clock = config
        .intervals
        .iter()
        .find_map(|iv| match iv.given().unit {
            crate::episode::IntervalUnit::Samples { rate_hz } => Some(rate_hz),
            crate::episode::IntervalUnit::Seconds => None,
        });
    match clock {
        Some(rate) => writeln!(
            out,
            "# intervals: {} (given in samples at {rate} Hz)",
            ivs.join(" ")
        )?,
        None => writeln!(out, "# intervals: {}", ivs.join(" "))?,
    }
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
    for w in crate::episode::sanity::check(stream, result) {
        writeln!(out, "# warning: {w}")?;
    }
    Ok(())
}

/// [`write_text`] with a significance test: a `# significance:` header, and after each tested
/// episode's count `| surrogate_mean M surrogate_std S statistic T p_value P p_adjusted Q
/// significant|not significant`; only the episodes `listing` keeps.
///
/// # Errors
/// I/O errors of `out`.
pub fn write_text_annotated(
    out: &mut dyn Write,
    input: &str,
    stream: &EventStream,
    config: &MinerConfig,
    result: &MiningResult,
    sig: Option<&SignificanceResult>,
    listing: &Listing<'_>,
) -> io::Result<()> {
    write_text_header(out, input, stream, config, result)?;
    if let Some(s) = sig {
        let j = SignificanceJson::of(s);
        writeln!(
            out,
            "# significance: {}, {} surrogates ({}, seed {}), alpha {}: {} of {} tested episodes significant",
            j.correction, j.n_surrogates, j.method, j.seed, j.alpha, j.significant, j.tested
        )?;
        if let Some(p) = &s.sample_split {
            writeln!(
                out,
                "# sample split at {:.6} s (fraction {}): family of {} chosen among {} episodes frequent in the selection part ({} events, ranked against {} surrogates), tested on the rest ({} events); test_count is the count there",
                p.split_s,
                p.fraction,
                p.family,
                p.screened,
                p.selection_events,
                p.screen_surrogates,
                p.test_events
            )?;
        }
        for w in &s.warnings {
            writeln!(out, "# warning: {w}")?;
        }
    }
    write_text_episodes(out, stream, result, Some(listing))
}

fn write_text_episodes(
    out: &mut dyn Write,
    stream: &EventStream,
    result: &MiningResult,
    listing: Option<&Listing<'_>>,
) -> io::Result<()> {
    for (i, f) in result.episodes.iter().enumerate() {
        if listing.is_some_and(|l| !l.keep[i]) {
            continue;
        }
        write!(
            out,
            "{} : {}",
            f.episode.display(stream.alphabet()),
            f.count
        )?;
        if let Some(t) = listing.and_then(|l| l.tests[i]) {
            write!(out, " |")?;
            if let Some(c) = t.stats.test_count {
                write!(out, " test_count {c}")?;
            }
            write!(
                out,
                " surrogate_mean {:.3} surrogate_std {:.3} statistic {:.3} p_value {:.6} p_adjusted {:.6} {}",
                t.stats.surrogate_mean,
                t.stats.surrogate_std,
                t.stats.statistic,
                t.stats.p_value,
                t.stats.p_adjusted,
                if t.stats.significant {
                    "significant"
                } else {
                    "not significant"
                }
            )?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// How [`write_occurrences`] writes the occurrences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OccurrenceFormat {
    /// A long table, one row per event of an occurrence:
    /// `episode_index,episode,occurrence,node,unit,time_s` (0-based indices; `episode` in the
    /// text output's notation, quoted; ready for pandas, polars or a Parquet converter).
    Csv,
    /// `{"input", "episodes": [{"episode", "labels", "intervals", "count", "occurrences":
    /// [[t₀, …, t_{N−1}], …]}]}`, times in seconds.
    Json,
}

impl OccurrenceFormat {
    /// The format a path's extension names: `.csv` or `.json`.
    ///
    /// # Errors
    /// Any other extension, as a message naming the path.
    pub fn from_path(path: &std::path::Path) -> Result<Self, String> {
        match path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .as_deref()
        {
            Some("csv") => Ok(Self::Csv),
            Some("json") => Ok(Self::Json),
            _ => Err(format!(
                "{}: occurrences are written as `.csv` (a long table) or `.json`",
                path.display()
            )),
        }
    }
}

/// Writes the occurrences of the episodes `keep` selects (`None`: all) of `episodes`
/// (`(episode, count)`), as counted in `stream` by [`crate::episode::occurrences`]: the
/// non-overlapped occurrences Algorithm 1 counts, so each episode has exactly `count` of
/// them. Episodes are worked on in parallel, a block at a time (memory stays bounded).
///
/// # Errors
/// I/O errors of `out`.
///
/// # Panics
/// If a count differs from the occurrences found (the episode was counted in another stream).
pub fn write_occurrences(
    out: &mut dyn Write,
    format: OccurrenceFormat,
    input: &str,
    stream: &EventStream,
    episodes: &[(&crate::episode::Episode, u64)],
) -> io::Result<()> {
    use rayon::prelude::*;
    enum Sink<'w> {
        Csv(Box<csv::Writer<&'w mut dyn Write>>),
        Json(&'w mut dyn Write),
    }
    let index = crate::episode::TypeIndex::new(stream);
    let alphabet = stream.alphabet();
    let mut sink = match format {
        OccurrenceFormat::Csv => {
            let mut w = csv::Writer::from_writer(out);
            w.write_record([
                "episode_index",
                "episode",
                "occurrence",
                "node",
                "unit",
                "time_s",
            ])?;
            Sink::Csv(Box::new(w))
        }
        OccurrenceFormat::Json => {
            write!(
                out,
                "{{\"input\":{},\"episodes\":[",
                serde_json::to_string(input)?
            )?;
            Sink::Json(out)
        }
    };
    const BLOCK: usize = 1024;
    for (b, block) in episodes.chunks(BLOCK).enumerate() {
        let found: Vec<Vec<f64>> = block
            .par_iter()
            .map(|(e, _)| crate::episode::occurrences(&index, e))
            .collect();
        for (k, ((episode, count), times)) in block.iter().zip(found).enumerate() {
            let i = b * BLOCK + k;
            let n = episode.len();
            assert_eq!(
                times.len() as u64,
                count * n as u64,
                "occurrences of an episode counted in another stream"
            );
            let name = episode.display(alphabet).to_string();
            let labels: Vec<&str> = episode.types().iter().map(|&t| alphabet.label(t)).collect();
            match &mut sink {
                Sink::Csv(w) => {
                    for (m, occ) in times.chunks(n).enumerate() {
                        for (node, t) in occ.iter().enumerate() {
                            w.write_record([
                                i.to_string(),
                                name.clone(),
                                m.to_string(),
                                node.to_string(),
                                labels[node].to_owned(),
                                format!("{t}"),
                            ])?;
                        }
                    }
                }
                Sink::Json(out) => {
                    let doc = serde_json::json!({
                        "episode": name,
                        "labels": labels,
                        "intervals": episode
                            .intervals()
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>(),
                        "count": count,
                        "occurrences": times.chunks(n).collect::<Vec<_>>(),
                    });
                    if i > 0 {
                        out.write_all(b",")?;
                    }
                    writeln!(out)?;
                    serde_json::to_writer(&mut **out, &doc)?;
                }
            }
        }
    }
    match sink {
        Sink::Csv(mut w) => w.flush(),
        Sink::Json(out) => writeln!(out, "\n]}}"),
    }
}
