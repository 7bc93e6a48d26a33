//! The level-wise frequent-episode miner with one-pass or two-pass (PreElim, then exact)
//! counting.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`): §2 (problem), §5 (level-wise mining),
//! Algorithm 4 (two-pass elimination), Theorem 1.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::slice::ParallelSliceMut;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::episode::bound::{SuccessorTable, pair_successor_counts};
use crate::episode::candidates;
use crate::episode::count::{MAX_EPISODE_LEN, TypeIndex};
use crate::episode::counter::{CountError, CountKind, Counter, CpuCounter};
use crate::episode::memory;
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
    /// The discrete set of inter-event intervals, `(low, high]` or `[low, high]`, seconds or
    /// samples (serialised as the given bounds `[low, high]` in seconds).
    #[serde(serialize_with = "serialize_intervals")]
    pub intervals: Vec<Interval>,
    /// Support threshold.
    pub threshold: Threshold,
    /// Largest episode size N mined (≥ 1).
    pub max_level: usize,
    /// One-pass or two-pass counting.
    pub strategy: Strategy,
    /// Remove join candidates whose successor bound ([`crate::episode::bound`]) is below the
    /// minimum count before counting them (default true; identical results either way).
    pub bounds: bool,
    /// Stop before a level that has more candidates than this (before bounds); the finished
    /// levels are returned and [`MiningResult::truncated`] says why.
    pub max_candidates: Option<u64>,
    /// Stop when mining has taken this many seconds of wall-clock time (checked between
    /// batches of candidates); the level in progress is dropped, the finished ones returned.
    pub time_budget_s: Option<f64>,
    /// Stop a level before the process's resident memory, plus what the level's end still
    /// needs, passes this many bytes (checked before each level and after each batch of
    /// candidates; [`crate::episode::memory`]); the level in progress is dropped, the
    /// finished ones returned. `None`: no budget. Not serialised: `auto` resolves to a
    /// different number on every machine, and a document stays the same wherever it was made
    /// (a budget that stopped the run is in [`Truncation::reason`]).
    #[serde(skip)]
    pub memory_budget: Option<u64>,
}

fn serialize_intervals<S: serde::Serializer>(ivs: &[Interval], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(ivs.len()))?;
    for iv in ivs {
        let g = iv.given();
        seq.serialize_element(&[g.low_s(), g.high_s()])?;
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
        if self.max_candidates == Some(0) {
            return Err(MineError::Limit(
                "`--max-candidates` must be at least 1".into(),
            ));
        }
        if let Some(s) = self.time_budget_s
            && !(s.is_finite() && s > 0.0)
        {
            return Err(MineError::Limit(format!(
                "`--time-budget-s` must be a positive number of seconds, got {s}"
            )));
        }
        if self.memory_budget == Some(0) {
            return Err(MineError::Limit(
                "`--memory-budget` must be at least one byte".into(),
            ));
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
            bounds: true,
            max_candidates: None,
            time_budget_s: None,
            memory_budget: None,
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
    /// A bad run limit; the message names the option.
    #[error("bad run limit: {0}")]
    Limit(String),
    /// The counting back end failed.
    #[error(transparent)]
    Count(#[from] CountError),
    /// [`Progress::cancelled`] asked the run to stop (Ctrl-C in a caller, say); nothing of the
    /// run is returned.
    #[error("mining was cancelled")]
    Cancelled,
}

/// What happened at one level (read back from JSON, e.g. a pipeline's line, without
/// `candidate_events`, which is not written: 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelStats {
    /// Episode size N.
    pub level: usize,
    /// Candidates generated (before bounds).
    pub candidates: usize,
    /// Candidates removed by the successor bound before any count ([`crate::episode::bound`];
    /// 0 at levels 1 and 2 and with bounds off).
    #[serde(default)]
    pub removed_by_bounds: usize,
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
    /// Why the run stopped before `max_level` with candidates left, if it did
    /// (`max_candidates`, `time_budget_s` or `memory_budget`); `levels` holds exactly the
    /// finished levels.
    pub truncated: Option<Truncation>,
}

/// A run stopped by a limit: the level it did not finish and a threshold that would fit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truncation {
    /// The level not finished (none of its results are reported).
    pub level: usize,
    /// Which limit stopped it.
    pub reason: StopReason,
    /// The level's candidates (before bounds).
    pub candidates: u64,
    /// Candidates dealt with (removed or counted) when it stopped.
    pub done: u64,
    /// The smallest minimum count at which this level would have at most the limit's
    /// candidates (`max_candidates`, or for a time budget the candidates dealt with in time),
    /// computed exactly from the previous level's counts; `None` at level 1, whose
    /// candidates do not depend on the threshold. Deeper levels may still exceed the limit.
    pub suggested_min_count: Option<u64>,
}

/// The limit that stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopReason {
    /// The level had more candidates than `max_candidates`.
    MaxCandidates {
        /// The limit.
        limit: u64,
    },
    /// Mining took longer than `time_budget_s`.
    TimeBudget {
        /// The budget, seconds.
        budget_s: f64,
    },
    /// The level would have held more memory than `memory_budget`.
    MemoryBudget {
        /// The budget, bytes.
        budget_bytes: u64,
        /// The process's resident memory when the level stopped, bytes.
        resident_bytes: u64,
        /// What the level's end still needed beyond it (its frequent episodes, cloned once
        /// for the next level's joins), bytes.
        needed_bytes: u64,
    },
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.reason {
            StopReason::MaxCandidates { limit } => write!(
                f,
                "stopped before level {}: {} candidates exceed `--max-candidates` {limit}",
                self.level, self.candidates
            )?,
            StopReason::TimeBudget { budget_s } => write!(
                f,
                "stopped in level {} after {} of {} candidates: `--time-budget-s` {budget_s} s \
                 used up",
                self.level, self.done, self.candidates
            )?,
            StopReason::MemoryBudget {
                budget_bytes,
                resident_bytes,
                needed_bytes: 0,
            } if self.done == 0 => write!(
                f,
                "stopped before level {}: the process holds {}, past the memory budget {}",
                self.level,
                memory::format_bytes(resident_bytes),
                memory::format_bytes(budget_bytes),
            )?,
            StopReason::MemoryBudget {
                budget_bytes,
                resident_bytes,
                needed_bytes,
            } => write!(
                f,
                "stopped in level {} after {} of {} candidates: the memory budget {} would be \
                 passed ({} resident, {} more needed to finish the level)",
                self.level,
                self.done,
                self.candidates,
                memory::format_bytes(budget_bytes),
                memory::format_bytes(resident_bytes),
                memory::format_bytes(needed_bytes),
            )?,
        }
        if let Some(n) = self.suggested_min_count {
            write!(
                f,
                "; `--min-count {n}` would give level {} few enough candidates",
                self.level
            )?;
        }
        if matches!(self.reason, StopReason::MemoryBudget { .. }) {
            write!(
                f,
                "; or raise `--memory-budget`, lower `--max-level`, or test the episodes \
                 against surrogates (`--surrogates`) to keep only those above chance"
            )?;
        }
        Ok(())
    }
}

/// Observes a mining run (a progress bar, say). All methods default to doing nothing.
pub trait Progress: Sync {
    /// Level `level` has `candidates` candidates, about to be counted (`two_pass`: PreElim
    /// first, then the exact count of the survivors). Called before [`Progress::level_started`].
    fn level_candidates(&self, _level: usize, _candidates: u64, _two_pass: bool) {}
    /// A level starts with `work` candidates to deal with (each is removed by a bound,
    /// eliminated by PreElim or counted exactly, and advances the progress once).
    fn level_started(&self, _level: usize, _work: u64) {}
    /// `n` more candidates were counted.
    fn advanced(&self, _n: u64) {}
    /// A level is done.
    fn level_finished(&self, _stats: &LevelStats) {}
    /// A level's frequent episodes (in the result's order), right after
    /// [`Progress::level_finished`]: for writing a result level by level.
    fn level_result(&self, _stats: &LevelStats, _episodes: &[FrequentEpisode]) {}
    /// Whether the run should stop (a caller's Ctrl-C, say). [`mine_with`] asks before each
    /// level and between batches of candidates (a batch being counted is finished first) and,
    /// when true, stops and returns [`MineError::Cancelled`]. Default false: a run that is
    /// never cancelled is unaffected.
    fn cancelled(&self) -> bool {
        false
    }
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
/// Called from a task of rayon's pool (a `par_iter` over several streams, say), it generates
/// each batch on the calling thread between counts instead: a generator thread would need the
/// pool's workers while they wait for it.
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
    let run_started = Instant::now();
    let deadline = config
        .time_budget_s
        .map(|s| run_started + Duration::from_secs_f64(s));
    let min_count = config.threshold.min_count(stream.len(), stream.span())?;
    let mut levels = Vec::new();
    let mut episodes: Vec<FrequentEpisode> = Vec::new();
    let mut frequent: Vec<Episode> = Vec::new();
    let mut frequent_counts: Vec<u64> = Vec::new();
    let mut truncated = None;
    let batch = counter.preferred_batch().max(1);
    let index = (config.bounds && config.max_level > 1).then(|| TypeIndex::new(stream));
    let mut table = SuccessorTable::default();
    for level in 1..=config.max_level {
        if progress.cancelled() {
            return Err(MineError::Cancelled);
        }
        let started = Instant::now();
        let removed = AtomicU64::new(0);
        // Candidates removed before the generator runs (level 2), reported once it starts.
        let mut progress_removed = 0u64;
        let join;
        let (total, groups): (usize, Box<dyn Iterator<Item = Vec<Episode>> + Send + '_>) =
            match level {
                1 => {
                    let c = candidates::level_one(stream.alphabet().len());
                    (c.len(), chunked(c.into_iter(), batch))
                }
                2 => {
                    let types: Vec<EventType> = frequent.iter().map(|e| e.types()[0]).collect();
                    let total = types.len() * types.len() * config.intervals.len();
                    let c = if let Some(index) = &index {
                        let bounds =
                            pair_successor_counts(stream, index, &types, &config.intervals);
                        // Rows of `bounds`: (first, interval), each over every type of the
                        // stream.
                        let (n_types, n_iv) = (stream.alphabet().len(), config.intervals.len());
                        let c =
                            candidates::level_two_where(&types, &config.intervals, |i, k, j| {
                                let cell = (i * n_iv + k) * n_types + types[j].index();
                                u64::from(bounds[cell]) >= min_count
                            });
                        removed.store((total - c.len()) as u64, Ordering::Relaxed);
                        progress_removed = (total - c.len()) as u64;
                        c
                    } else {
                        candidates::level_two(&types, &config.intervals)
                    };
                    (total, chunked(c.into_iter(), batch))
                }
                _ => {
                    join = candidates::Join::new(&frequent);
                    let groups: Box<dyn Iterator<Item = Vec<Episode>> + Send + '_> = match &index {
                        Some(index) => {
                            Box::new(join.iter_bounded(index, &table, min_count, &removed))
                        }
                        None => chunked(join.iter(), batch),
                    };
                    (join.len(), groups)
                }
            };
        if total == 0 {
            break;
        }
        let suggest = |limit: u64| {
            fitting_min_count(level, &frequent, &frequent_counts, config, min_count, limit)
        };
        // The memory budget, before the level starts: a process already past it starts no
        // level.
        if let Some(budget) = config.memory_budget
            && let Some(resident) = memory::resident_bytes()
            && resident > budget
        {
            truncated = Some(Truncation {
                level,
                reason: StopReason::MemoryBudget {
                    budget_bytes: budget,
                    resident_bytes: resident,
                    needed_bytes: 0,
                },
                candidates: total as u64,
                done: 0,
                suggested_min_count: None,
            });
            break;
        }
        if let Some(limit) = config.max_candidates
            && total as u64 > limit
        {
            truncated = Some(Truncation {
                level,
                reason: StopReason::MaxCandidates { limit },
                candidates: total as u64,
                done: 0,
                suggested_min_count: suggest(limit),
            });
            break;
        }
        let two_pass =
            config.strategy == Strategy::TwoPass && level > 1 && counter.preelim_cheaper(level);
        progress.level_candidates(level, total as u64, two_pass);
        progress.level_started(level, total as u64);
        let expired = AtomicBool::new(deadline.is_some_and(|d| Instant::now() >= d));
        // Set (with the resident and the needed bytes) when a batch brought the level past
        // the memory budget; stops the level like an expired time budget.
        let mut over_budget: Option<(u64, u64)> = None;
        let (removed_ref, expired_ref) = (&removed, &expired);
        // Generates the level's batches and hands each to `emit` (false: stop).
        let generate = move |emit: &mut dyn FnMut(Vec<Episode>) -> bool| {
            progress.advanced(progress_removed);
            let mut reported = progress_removed;
            let mut chunk = Vec::with_capacity(batch);
            let mut considered = 0u64;
            let mut groups = groups;
            loop {
                if expired_ref.load(Ordering::Relaxed) {
                    break;
                }
                let next = groups.next();
                let done = next.is_none();
                if let Some(group) = next {
                    chunk.extend(group);
                }
                let now_removed = removed_ref.load(Ordering::Relaxed);
                considered += now_removed - reported;
                // Send when the batch is full, when many candidates were removed since
                // the last send (so progress and the time budget stay current), or at
                // the end.
                if chunk.len() >= batch || considered >= 8 * batch as u64 || done {
                    progress.advanced(now_removed - reported);
                    reported = now_removed;
                    considered = 0;
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        expired_ref.store(true, Ordering::Relaxed);
                        break;
                    }
                    if progress.cancelled() {
                        break;
                    }
                    let full = std::mem::replace(&mut chunk, Vec::with_capacity(batch));
                    // A refused batch means counting failed or stopped.
                    if (!full.is_empty() && !emit(full)) || done {
                        break;
                    }
                }
            }
        };
        let mut acc = LevelAccumulator::default();
        let mut count = |chunk: Vec<Episode>| -> Result<bool, CountError> {
            if progress.cancelled() {
                return Ok(false);
            }
            acc.count_batch(counter, chunk, two_pass, min_count, progress)?;
            let late = deadline.is_some_and(|d| Instant::now() >= d);
            if late {
                expired_ref.store(true, Ordering::Relaxed);
            }
            if let Some(budget) = config.memory_budget
                && let Some(resident) = memory::resident_bytes()
            {
                let needed = acc.found.len() as u64 * episode_bytes(level);
                if resident.saturating_add(needed) > budget {
                    over_budget = Some((resident, needed));
                    expired_ref.store(true, Ordering::Relaxed);
                    return Ok(false);
                }
            }
            Ok(!late)
        };
        if rayon::current_thread_index().is_some() {
            // On a worker of rayon's pool (mining several streams in parallel): a generator
            // thread would need the pool's workers while this one waits for it, and with
            // every worker waiting that deadlocks; so generate here, between batches.
            let mut failed = None;
            generate(&mut |chunk| match count(chunk) {
                Ok(go_on) => go_on,
                Err(e) => {
                    failed = Some(e);
                    false
                }
            });
            if let Some(e) = failed {
                return Err(e.into());
            }
        } else {
            std::thread::scope(|scope| {
                let (tx, rx) = crossbeam_channel::bounded::<Vec<Episode>>(1);
                scope.spawn(move || generate(&mut |chunk| tx.send(chunk).is_ok()));
                for chunk in rx {
                    if !count(chunk)? {
                        break;
                    }
                }
                Ok::<_, CountError>(())
            })?;
        }
        if progress.cancelled() {
            return Err(MineError::Cancelled);
        }
        let counted = acc;
        let removed = removed.into_inner() as usize;
        if let Some((resident, needed)) = over_budget {
            let done = (removed + counted.dealt_with) as u64;
            truncated = Some(Truncation {
                level,
                reason: StopReason::MemoryBudget {
                    budget_bytes: config.memory_budget.unwrap_or_default(),
                    resident_bytes: resident,
                    needed_bytes: needed,
                },
                candidates: total as u64,
                done,
                suggested_min_count: suggest(done.max(1)),
            });
            break;
        }
        if expired.into_inner() {
            let done = (removed + counted.dealt_with) as u64;
            truncated = Some(Truncation {
                level,
                reason: StopReason::TimeBudget {
                    budget_s: config.time_budget_s.unwrap_or_default(),
                },
                candidates: total as u64,
                done,
                suggested_min_count: suggest(done.max(1)),
            });
            break;
        }
        let LevelAccumulator {
            mut found,
            eliminated,
            candidate_events,
            ..
        } = counted;
        frequent = found.iter().map(|f| f.episode.clone()).collect();
        frequent_counts = found.iter().map(|f| f.count).collect();
        found.par_sort_unstable_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| report_order(&a.episode, &b.episode))
        });
        let stats = LevelStats {
            level,
            candidates: total,
            removed_by_bounds: removed,
            eliminated_by_preelim: eliminated,
            frequent: found.len(),
            seconds: started.elapsed().as_secs_f64(),
            candidate_events,
        };
        progress.level_finished(&stats);
        progress.level_result(&stats, &found);
        levels.push(stats);
        episodes.extend(found);
        if frequent.is_empty() {
            break;
        }
        if level == 2
            && let Some(index) = &index
        {
            let pairs: Vec<(EventType, Interval, EventType)> = frequent
                .iter()
                .map(|e| (e.types()[0], e.intervals()[0], e.types()[1]))
                .collect();
            table = SuccessorTable::build(stream, index, &pairs);
        }
    }
    Ok(MiningResult {
        min_count,
        levels,
        episodes,
        truncated,
    })
}

/// Heap and inline bytes of one [`FrequentEpisode`] of `level` nodes, allocator headers
/// included (16 bytes per allocation): what the level's end needs per frequent episode for its
/// clone into the next level's joins.
fn episode_bytes(level: usize) -> u64 {
    let alloc = |bytes: usize| {
        if bytes == 0 {
            0
        } else {
            bytes.div_ceil(16) * 16 + 16
        }
    };
    (std::mem::size_of::<FrequentEpisode>()
        + alloc(level * std::mem::size_of::<EventType>())
        + alloc(level.saturating_sub(1) * std::mem::size_of::<Interval>())) as u64
}

/// `items` in vectors of `batch`.
fn chunked<'a, I>(items: I, batch: usize) -> Box<dyn Iterator<Item = Vec<Episode>> + Send + 'a>
where
    I: Iterator<Item = Episode> + Send + 'a,
{
    let mut items = items;
    Box::new(std::iter::from_fn(move || {
        let chunk: Vec<Episode> = items.by_ref().take(batch).collect();
        (!chunk.is_empty()).then_some(chunk)
    }))
}

/// The smallest minimum count `≥ min_count` at which `level` would have at most `limit`
/// candidates, from the previous level's frequent episodes and their counts: raising the
/// threshold to θ keeps exactly the previous level's episodes with count ≥ θ (anti-monotone
/// pruning is exact), and the candidate count is a non-increasing step function of θ that only
/// changes at θ = count + 1, so a binary search over those steps finds it. `None` at level 1.
fn fitting_min_count(
    level: usize,
    frequent: &[Episode],
    counts: &[u64],
    config: &MinerConfig,
    min_count: u64,
    limit: u64,
) -> Option<u64> {
    if level < 2 {
        return None;
    }
    let candidates_at = |theta: u64| -> u64 {
        let kept: Vec<Episode> = frequent
            .iter()
            .zip(counts)
            .filter(|(_, c)| **c >= theta)
            .map(|(e, _)| e.clone())
            .collect();
        if level == 2 {
            (kept.len() * kept.len() * config.intervals.len()) as u64
        } else {
            candidates::Join::new(&kept).len() as u64
        }
    };
    let mut steps: Vec<u64> = counts
        .iter()
        .map(|c| c + 1)
        .filter(|&t| t > min_count)
        .collect();
    steps.push(min_count);
    steps.sort_unstable();
    steps.dedup();
    // First step whose candidates fit; the last step (above every count) has none.
    let at = steps.partition_point(|&t| candidates_at(t) > limit);
    steps.get(at).copied()
}

/// What the batches of one level have produced so far.
#[derive(Default)]
struct LevelAccumulator {
    found: Vec<FrequentEpisode>,
    eliminated: usize,
    candidate_events: u64,
    /// Candidates counted to the end (eliminated by PreElim or exactly counted).
    dealt_with: usize,
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
        self.dealt_with += generated;
        let survivors: Vec<Episode> = if two_pass {
            let bounds = counter.count(CountKind::PreElim, &cands)?;
            self.candidate_events += touched(&cands);
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

/// Total order for reporting: types, then interval bounds (lexicographic, by bit pattern,
/// which orders non-negative finite bounds numerically). No allocation: a level's episodes
/// are sorted with it.
fn report_order(a: &Episode, b: &Episode) -> std::cmp::Ordering {
    a.types().cmp(b.types()).then_with(|| {
        a.intervals()
            .iter()
            .map(|iv| iv.bits())
            .cmp(b.intervals().iter().map(|iv| iv.bits()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Alphabet, Ordering as StreamOrdering};

    /// A random 6-type stream with bursts, so mining reaches level 3.
    fn stream() -> EventStream {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let alphabet = Alphabet::from_labels((0..6).map(|i| format!("u{i}"))).unwrap();
        let (mut t, mut times, mut types) = (0.0, Vec::new(), Vec::new());
        for _ in 0..3000 {
            t += rng.random::<f64>() * 0.003;
            times.push(t);
            types.push(EventType(rng.random_range(0..6)));
        }
        EventStream::new(times, types, alphabet, StreamOrdering::RequireSorted).unwrap()
    }

    /// Sleeps past the budget when level 2 is done.
    struct SlowAfterLevel2(Duration);

    impl Progress for SlowAfterLevel2 {
        fn level_finished(&self, stats: &LevelStats) {
            if stats.level == 2 {
                std::thread::sleep(self.0);
            }
        }
    }

    /// A time budget used up during a run reports exactly the finished levels, identical to
    /// an unlimited run's, marks the run truncated at the next level and suggests a threshold.
    #[test]
    fn a_time_budget_keeps_exactly_the_finished_levels() {
        let s = stream();
        let ivs = vec![
            Interval::new(0.0, 0.002).unwrap(),
            Interval::new(0.002, 0.005).unwrap(),
        ];
        let mut config = MinerConfig::new(ivs, Threshold::MinCount(20));
        config.max_level = 5;
        let counter = CpuCounter::new(&s);
        let full = mine_with(&s, &config, &counter, &NoProgress).unwrap();
        assert!(full.levels.len() >= 3 && full.truncated.is_none());
        config.time_budget_s = Some(0.2);
        let cut = mine_with(
            &s,
            &config,
            &counter,
            &SlowAfterLevel2(Duration::from_millis(300)),
        )
        .unwrap();
        let t = cut.truncated.clone().expect("truncated");
        assert_eq!(t.level, 3);
        assert_eq!(t.reason, StopReason::TimeBudget { budget_s: 0.2 });
        assert_eq!(t.candidates, full.levels[2].candidates as u64);
        assert_eq!(cut.levels.len(), 2);
        for (a, b) in cut.levels.iter().zip(&full.levels) {
            assert_eq!(
                (a.level, a.candidates, a.removed_by_bounds, a.frequent),
                (b.level, b.candidates, b.removed_by_bounds, b.frequent)
            );
        }
        let want: Vec<&FrequentEpisode> = full
            .episodes
            .iter()
            .filter(|f| f.episode.len() <= 2)
            .collect();
        assert_eq!(cut.episodes.iter().collect::<Vec<_>>(), want);
        // Nothing of level 3 was dealt with, so the suggestion leaves level 3 one candidate
        // at most, which a higher threshold than the run's gives.
        assert!(t.suggested_min_count.is_some_and(|n| n > 20), "{t:?}");
    }

    /// Cancels once `after` candidates have been dealt with in level `level`, and counts the
    /// batches the miner handed over after that.
    struct CancelIn {
        level: usize,
        after: u64,
        seen: AtomicU64,
        current: std::sync::atomic::AtomicUsize,
        cancelled: AtomicBool,
        counted_after: AtomicU64,
    }

    impl Progress for CancelIn {
        fn level_started(&self, level: usize, _work: u64) {
            self.current.store(level, Ordering::SeqCst);
        }
        fn advanced(&self, n: u64) {
            if self.cancelled.load(Ordering::SeqCst) {
                self.counted_after.fetch_add(n, Ordering::SeqCst);
            }
            if self.current.load(Ordering::SeqCst) == self.level
                && self.seen.fetch_add(n, Ordering::SeqCst) + n >= self.after
            {
                self.cancelled.store(true, Ordering::SeqCst);
            }
        }
        fn cancelled(&self) -> bool {
            self.cancelled.load(Ordering::SeqCst)
        }
    }

    /// A cancelled run stops within the level it was cancelled in and returns
    /// `MineError::Cancelled`; a run never cancelled is unaffected, before and after.
    #[test]
    fn a_cancelled_run_stops_between_batches() {
        let s = stream();
        let ivs = vec![
            Interval::new(0.0, 0.002).unwrap(),
            Interval::new(0.002, 0.005).unwrap(),
        ];
        let mut config = MinerConfig::new(ivs, Threshold::MinCount(20));
        config.max_level = 5;
        // Without bounds every candidate of a level is counted, in batches of 16.
        config.bounds = false;
        let counter = SmallBatches(CpuCounter::new(&s));
        let full = mine_with(&s, &config, &counter, &NoProgress).unwrap();
        assert!(full.levels.len() >= 3 && full.levels[2].candidates > 64);
        let cancel = CancelIn {
            level: 3,
            after: 1,
            seen: AtomicU64::new(0),
            current: 0.into(),
            cancelled: AtomicBool::new(false),
            counted_after: AtomicU64::new(0),
        };
        let r = mine_with(&s, &config, &counter, &cancel);
        assert!(matches!(r, Err(MineError::Cancelled)), "{r:?}");
        // Only the rest of the batch in flight is counted after the cancel.
        assert!(cancel.counted_after.load(Ordering::SeqCst) <= 16);
        let again = mine_with(&s, &config, &counter, &NoProgress).unwrap();
        assert!(again.episodes == full.episodes, "a later run differs");
        let shape = |r: &MiningResult| -> Vec<(usize, usize, usize)> {
            r.levels
                .iter()
                .map(|l| (l.level, l.candidates, l.frequent))
                .collect()
        };
        assert_eq!(shape(&again), shape(&full));
    }

    /// The CPU counter in batches of 16, so a level has many batches.
    #[derive(Debug)]
    struct SmallBatches(CpuCounter);

    impl Counter for SmallBatches {
        fn name(&self) -> &str {
            "cpu-16"
        }
        fn events_touched(&self, episode: &Episode) -> u64 {
            self.0.events_touched(episode)
        }
        fn count(&self, kind: CountKind, episodes: &[Episode]) -> Result<Vec<u64>, CountError> {
            self.0.count(kind, episodes)
        }
        fn preferred_batch(&self) -> usize {
            16
        }
    }
}
