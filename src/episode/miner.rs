//! The level-wise frequent-episode miner with one-pass or two-pass (PreElim, then exact)
//! counting.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`): §2 (problem), §5 (level-wise mining),
//! Algorithm 4 (two-pass elimination), Theorem 1.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::episode::candidates;
use crate::episode::count::MAX_EPISODE_LEN;
use crate::episode::counter::{CountError, CountKind, Counter, CpuCounter};
use crate::episode::model::{Episode, Interval};
use crate::event::{EventStream, EventType};

/// The support threshold θ: an episode is frequent when its count is ≥ the minimum count.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Threshold {
    /// An absolute number of non-overlapped occurrences (≥ 1).
    MinCount(u64),
    /// A fraction in (0, 1] of the number of events in the stream (tdminer's default).
    FractionOfEvents(f64),
    /// Occurrences per second of the stream's span (> 0).
    PerSecond(f64),
}

impl Threshold {
    /// The minimum count this threshold means for a stream of `events` events spanning
    /// `span_s` seconds: `ceil(F · events)` or `ceil(F · span_s)`, and at least 1.
    ///
    /// # Errors
    /// [`MineError::Threshold`] for a zero count, a fraction outside (0, 1], a non-positive or
    /// non-finite rate.
    pub fn min_count(self, events: usize, span_s: f64) -> Result<u64, MineError> {
        self.validate()?;
        let raw = match self {
            Self::MinCount(n) => return Ok(n),
            Self::FractionOfEvents(f) => f * events as f64,
            Self::PerSecond(r) => r * span_s,
        };
        // `raw` is finite and ≥ 0 here; the cast saturates for absurdly large values.
        Ok((raw.ceil() as u64).max(1))
    }

    /// Checks the threshold without a stream.
    ///
    /// # Errors
    /// [`MineError::Threshold`] naming the command-line option: a zero `--min-count`, a
    /// `--support` fraction outside (0, 1], a non-positive or non-finite `--support` rate.
    pub fn validate(self) -> Result<(), MineError> {
        let bad = |why: String| Err(MineError::Threshold(why));
        match self {
            Self::MinCount(0) => bad("`--min-count` must be at least 1, got 0".into()),
            Self::FractionOfEvents(f) if !(f > 0.0 && f <= 1.0) => bad(format!(
                "`--support` {f} must be a fraction in (0, 1] of the number of events \
                 (or a rate with `--support-per seconds`)"
            )),
            Self::PerSecond(r) if !(r.is_finite() && r > 0.0) => bad(format!(
                "`--support` {r} with `--support-per seconds` must be a positive number of \
                 occurrences per second"
            )),
            _ => Ok(()),
        }
    }
}

/// What a `support` threshold is relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupportPer {
    /// A fraction of the number of events in the stream.
    #[default]
    Events,
    /// Occurrences per second of the stream's span.
    Seconds,
}

impl Threshold {
    /// The threshold the `mine` options describe: `min_count` if given, else `support`
    /// relative to `per`, else a fraction 0.001 of the events (tdminer's default).
    #[must_use]
    pub fn from_options(min_count: Option<u64>, support: Option<f64>, per: SupportPer) -> Self {
        match (min_count, support, per) {
            (Some(n), _, _) => Self::MinCount(n),
            (None, Some(f), SupportPer::Seconds) => Self::PerSecond(f),
            (None, Some(f), SupportPer::Events) => Self::FractionOfEvents(f),
            (None, None, _) => Self::FractionOfEvents(0.001),
        }
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MinCount(n) => write!(f, "min count {n}"),
            Self::FractionOfEvents(x) => write!(f, "support {x} of events"),
            Self::PerSecond(r) => write!(f, "support {r} per second"),
        }
    }
}

/// Single-pass exact counting or the paper's two-pass elimination (Algorithm 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Exact counting of every candidate.
    OnePass,
    /// PreElim on every candidate, exact counting only of those whose bound reaches the
    /// threshold (identical results, by Theorem 1); levels where the counter's PreElim is no
    /// cheaper than its exact count ([`Counter::preelim_cheaper`], e.g. level 2 on the CPU)
    /// are counted exactly in one pass.
    #[default]
    TwoPass,
}

/// Miner settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MinerConfig {
    /// The discrete set of inter-event intervals `(low, high]`, seconds.
    #[serde(serialize_with = "serialize_intervals")]
    pub intervals: Vec<Interval>,
    /// Support threshold.
    pub threshold: Threshold,
    /// Largest episode size N mined (≥ 1).
    pub max_level: usize,
    /// One-pass or two-pass counting.
    pub strategy: Strategy,
}

fn serialize_intervals<S: serde::Serializer>(ivs: &[Interval], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(ivs.len()))?;
    for iv in ivs {
        seq.serialize_element(&[iv.low(), iv.high()])?;
    }
    seq.end()
}

impl MinerConfig {
    /// Checks the settings without a stream (thresholds, intervals, `max_level`).
    ///
    /// # Errors
    /// The [`MineError`] that [`mine`] would return for these settings.
    pub fn validate(&self) -> Result<(), MineError> {
        if self.intervals.is_empty() {
            return Err(MineError::NoIntervals);
        }
        if self.max_level == 0 || self.max_level > MAX_EPISODE_LEN {
            return Err(MineError::MaxLevel);
        }
        self.threshold.validate()
    }

    /// Default settings for the given intervals and threshold: up to 10 nodes, two-pass.
    #[must_use]
    pub fn new(intervals: Vec<Interval>, threshold: Threshold) -> Self {
        Self {
            intervals,
            threshold,
            max_level: 10,
            strategy: Strategy::TwoPass,
        }
    }
}

/// Errors of a mining run.
#[derive(Debug, thiserror::Error)]
#[must_use]
pub enum MineError {
    /// A bad threshold; the message names the option.
    #[error("bad support threshold: {0}")]
    Threshold(String),
    /// No intervals.
    #[error("no inter-event intervals given: `--intervals` needs at least one `LOW-HIGH`")]
    NoIntervals,
    /// `max_level` outside `1..=MAX_EPISODE_LEN`.
    #[error("`--max-level` must be between 1 and 64")]
    MaxLevel,
    /// The counting back end failed.
    #[error(transparent)]
    Count(#[from] CountError),
}

/// What happened at one level (read back from JSON, e.g. a pipeline's line, without
/// `candidate_events`, which is not written: 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelStats {
    /// Episode size N.
    pub level: usize,
    /// Candidates generated.
    pub candidates: usize,
    /// Candidates whose PreElim bound was below the threshold (0 in one-pass mode, at level 1,
    /// where PreElim equals the exact count, and at levels the counter counts in one pass).
    pub eliminated_by_preelim: usize,
    /// Frequent episodes found.
    pub frequent: usize,
    /// Wall-clock seconds for the level (candidate generation and counting).
    pub seconds: f64,
    /// Events read by the counters at this level, summed over candidates and passes.
    #[serde(skip)]
    pub candidate_events: u64,
}

/// A frequent episode and its count.
#[derive(Clone, Debug, PartialEq)]
pub struct FrequentEpisode {
    /// The episode.
    pub episode: Episode,
    /// Its non-overlapped count (support), occurrences.
    pub count: u64,
}

/// The outcome of [`mine`].
#[derive(Clone, Debug, PartialEq)]
pub struct MiningResult {
    /// The minimum count the threshold resolved to.
    pub min_count: u64,
    /// Per-level statistics, level 1 first.
    pub levels: Vec<LevelStats>,
    /// Frequent episodes: by level, then count (descending), then types.
    pub episodes: Vec<FrequentEpisode>,
}

/// Observes a mining run (a progress bar, say). All methods default to doing nothing.
pub trait Progress: Sync {
    /// Level `level` has `candidates` candidates, about to be counted (`two_pass`: PreElim
    /// first, then the exact count of the survivors). Called before [`Progress::level_started`].
    fn level_candidates(&self, _level: usize, _candidates: u64, _two_pass: bool) {}
    /// A level starts with `work` candidate countings to do (over all passes).
    fn level_started(&self, _level: usize, _work: u64) {}
    /// `n` more candidates were counted.
    fn advanced(&self, _n: u64) {}
    /// A level is done.
    fn level_finished(&self, _stats: &LevelStats) {}
}

/// A [`Progress`] that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {}

/// Mines `stream` on the CPU reference counter.
///
/// # Errors
/// [`MineError`] for bad settings.
pub fn mine(stream: &EventStream, config: &MinerConfig) -> Result<MiningResult, MineError> {
    mine_with(stream, config, &CpuCounter::new(stream), &NoProgress)
}

/// Mines `stream` level by level with the given counter (which must have been built for the
/// same stream).
///
/// Within a level, candidates are generated on a separate thread in batches of
/// [`Counter::preferred_batch`] and counted as they arrive, so generating batch k+1 overlaps
/// counting batch k (paper §6.2: "tasks 2 and 3 are interleaved with candidate generation").
/// In two-pass mode each batch gets PreElim, then the exact count of its survivors.
///
/// # Errors
/// [`MineError`] for bad settings or a failing counter.
pub fn mine_with(
    stream: &EventStream,
    config: &MinerConfig,
    counter: &dyn Counter,
    progress: &dyn Progress,
) -> Result<MiningResult, MineError> {
    config.validate()?;
    let min_count = config.threshold.min_count(stream.len(), stream.span())?;
    let mut levels = Vec::new();
    let mut episodes: Vec<FrequentEpisode> = Vec::new();
    let mut frequent: Vec<Episode> = Vec::new();
    let batch = counter.preferred_batch().max(1);
    for level in 1..=config.max_level {
        let started = Instant::now();
        let join;
        let (total, cands): (usize, Box<dyn Iterator<Item = Episode> + Send + '_>) = match level {
            1 => {
                let c = candidates::level_one(stream.alphabet().len());
                (c.len(), Box::new(c.into_iter()))
            }
            2 => {
                let types: Vec<EventType> = frequent.iter().map(|e| e.types()[0]).collect();
                let c = candidates::level_two(&types, &config.intervals);
                (c.len(), Box::new(c.into_iter()))
            }
            _ => {
                join = candidates::Join::new(&frequent);
                (join.len(), Box::new(join.iter()))
            }
        };
        if total == 0 {
            break;
        }
        let two_pass =
            config.strategy == Strategy::TwoPass && level > 1 && counter.preelim_cheaper(level);
        progress.level_candidates(level, total as u64, two_pass);
        progress.level_started(level, total as u64 * if two_pass { 2 } else { 1 });
        let counted = std::thread::scope(|scope| {
            let (tx, rx) = crossbeam_channel::bounded::<Vec<Episode>>(1);
            scope.spawn(move || {
                let mut cands = cands;
                loop {
                    let chunk: Vec<Episode> = cands.by_ref().take(batch).collect();
                    // A closed channel means counting failed; stop generating.
                    if chunk.is_empty() || tx.send(chunk).is_err() {
                        break;
                    }
                }
            });
            let mut acc = LevelAccumulator::default();
            for chunk in rx {
                acc.count_batch(counter, chunk, two_pass, min_count, progress)?;
            }
            Ok::<_, CountError>(acc)
        })?;
        let LevelAccumulator {
            mut found,
            eliminated,
            candidate_events,
        } = counted;
        frequent = found.iter().map(|f| f.episode.clone()).collect();
        found.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| order_key(&a.episode).cmp(&order_key(&b.episode)))
        });
        let stats = LevelStats {
            level,
            candidates: total,
            eliminated_by_preelim: eliminated,
            frequent: found.len(),
            seconds: started.elapsed().as_secs_f64(),
            candidate_events,
        };
        progress.level_finished(&stats);
        levels.push(stats);
        episodes.extend(found);
        if frequent.is_empty() {
            break;
        }
    }
    Ok(MiningResult {
        min_count,
        levels,
        episodes,
    })
}

/// What the batches of one level have produced so far.
#[derive(Default)]
struct LevelAccumulator {
    found: Vec<FrequentEpisode>,
    eliminated: usize,
    candidate_events: u64,
}

impl LevelAccumulator {
    /// Counts one batch: PreElim first in two-pass mode, then the exact count of what is left.
    /// Candidates are moved, never cloned.
    fn count_batch(
        &mut self,
        counter: &dyn Counter,
        cands: Vec<Episode>,
        two_pass: bool,
        min_count: u64,
        progress: &dyn Progress,
    ) -> Result<(), CountError> {
        let touched =
            |set: &[Episode]| -> u64 { set.iter().map(|e| counter.events_touched(e)).sum() };
        let generated = cands.len();
        let survivors: Vec<Episode> = if two_pass {
            let bounds = counter.count(CountKind::PreElim, &cands)?;
            self.candidate_events += touched(&cands);
            progress.advanced(generated as u64);
            cands
                .into_iter()
                .zip(bounds)
                .filter(|(_, b)| *b >= min_count)
                .map(|(e, _)| e)
                .collect()
        } else {
            cands
        };
        let eliminated = generated - survivors.len();
        self.eliminated += eliminated;
        if two_pass {
            progress.advanced(eliminated as u64);
        }
        let counts = counter.count(CountKind::Exact, &survivors)?;
        self.candidate_events += touched(&survivors);
        progress.advanced(survivors.len() as u64);
        self.found.extend(
            survivors
                .into_iter()
                .zip(counts)
                .filter(|(_, c)| *c >= min_count)
                .map(|(episode, count)| FrequentEpisode { episode, count }),
        );
        Ok(())
    }
}

/// Total order for reporting: types, then interval bounds.
fn order_key(e: &Episode) -> (Vec<u32>, Vec<(u64, u64)>) {
    (
        e.types().iter().map(|t| t.0).collect(),
        e.intervals()
            .iter()
            .map(|iv| (iv.low().to_bits(), iv.high().to_bits()))
            .collect(),
    )
}
