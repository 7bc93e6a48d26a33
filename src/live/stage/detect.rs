//! `kind = "detect"`: per-occurrence detection of watched episodes, on each spike as it comes
//! off a source's ring (not per window), for closed-loop experiments.
//!
//! ```toml
//! [stages.stim]
//! kind = "detect"
//! source = "probe"                       # a spike source (not a window)
//! episodes = ["12-(4,6]ms-31-(4,6]ms-7"]  # and/or
//! episodes_file = "mined.json"           # a `synfire mine --format json` document
//! top = 5                                # its 5 most frequent episodes of ≥ min_nodes nodes
//! lateness_s = 0.0                       # reorder buffer for out-of-order deliveries
//! # or: from_stage = "episodes"          # the top episodes of that stage's latest window
//! ```
//!
//! A stage kind like the others (one row of `live::stage::kinds`), placed on spikes
//! ([`crate::live::stage::Placement::Spikes`], [`SpikeStageConfig`]): the stage runs on the
//! source's window thread (`live::window_loop`), before any window sees the spike, through an [`episode::Detector`](crate::episode::Detector): the
//! exact occurrence machine of each watched episode, so its occurrences equal
//! `synfire mine --occurrences` (and [`crate::episode::occurrences`]) on the events it
//! accepted. Each occurrence is sent at once to the stage's TTL sinks (never blocking:
//! [`crate::live::ttl`]) and then written as one JSON line to the stage's other sinks
//! ([`OccurrenceLine`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::episode::{Detector, DetectorStats, Interval, OnlineOccurrence, WatchEpisode};
use crate::live::config::section::ConfigError;
use crate::live::stage::episodes::EpisodesResult;
use crate::live::stage::{
    BuiltSpikeStage, LineValue, Output, ResultObserver, SpikeContext, SpikeStage,
    SpikeStageBuilder, SpikeStageConfig, StageError,
};
use crate::live::ttl::TtlSender;
use crate::report::EpisodeJson;

/// The kind name of a detect stage.
pub const KIND: &str = "detect";

/// `[stages.<name>]` with `kind = "detect"` (its `source` is read by the pipeline loader).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DetectConfig {
    /// Episodes in the text notation of `synfire mine` (`12-(4,6]ms-31`, `a-[0,1]ms-b`).
    #[serde(default)]
    pub episodes: Vec<String>,
    /// A `synfire mine --format json` document whose episodes are watched (its intervals are
    /// read exactly from its `params`, samples included).
    pub episodes_file: Option<PathBuf>,
    /// Watch only the `top` most frequent episodes of the file, or of each window of
    /// `from_stage` (ties in the document's order). Default: all of the file; 10 of a stage.
    pub top: Option<usize>,
    /// Only episodes of at least this many nodes are taken from the file or stage (default 2).
    pub min_nodes: Option<usize>,
    /// An `episodes` stage of the same pipeline: after each of its windows, its `top`
    /// episodes become the watch list (episodes kept keep their partial occurrences).
    pub from_stage: Option<String>,
    /// Seconds of out-of-order delivery to wait for before processing an event (default 0:
    /// process at once; events older than one processed are counted late and dropped).
    pub lateness_s: Option<f64>,
}

impl SpikeStageConfig for DetectConfig {
    const KIND: &'static str = KIND;

    fn validate(
        &self,
        at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>> {
        let episodes_stage = |name: &str| {
            let options = (at.stage)(name)?.options::<crate::significance::MineOptions>()?;
            let (config, _) = options.resolve().ok()?;
            Some(config.intervals)
        };
        DetectConfig::validate(self, at.source.to_owned(), episodes_stage)
            .map(|spec| Box::new(spec) as Box<dyn SpikeStageBuilder>)
    }
}

impl SpikeStageBuilder for DetectSpec {
    fn build(
        &self,
        name: &str,
        signals: Vec<TtlSender>,
        out: Sender<Output>,
    ) -> Result<BuiltSpikeStage, StageError> {
        let (stage, refresher) = LiveDetector::new(name, self, signals, out)
            .map_err(|e| StageError::Config(e.to_string()))?;
        Ok(BuiltSpikeStage {
            stage: Box::new(stage),
            observer: refresher.map(|r| Box::new(r) as Box<dyn ResultObserver>),
        })
    }
}

/// Where a detect stage's watch list is refreshed from.
#[derive(Clone, Debug)]
pub struct Refresh {
    /// The episodes stage.
    pub stage: String,
    /// How many of its window's episodes.
    pub top: usize,
    /// Their least number of nodes.
    pub min_nodes: usize,
    /// The stage's intervals (episodes' interval texts are matched to these exactly).
    pub known: Vec<Interval>,
}

/// A validated detect stage.
#[derive(Clone, Debug)]
pub struct DetectSpec {
    /// The spike source it reads.
    pub source: String,
    /// The initial watch list.
    pub watch: Vec<WatchEpisode>,
    /// Allowed lateness, seconds.
    pub lateness_s: f64,
    /// The episodes stage that refreshes the watch list, if any.
    pub refresh: Option<Refresh>,
}

impl DetectConfig {
    /// Phase 2: the watch list (the file read once), fields relative to the section.
    /// `episodes_stage` gives the intervals of an `episodes` stage of the pipeline by name
    /// (`None`: no such stage).
    ///
    /// # Errors
    /// Every problem found: no episode to watch, an episode that does not parse, an
    /// unreadable or malformed file, a `from_stage` that is not an episodes stage, a negative
    /// lateness.
    pub fn validate(
        &self,
        source: String,
        episodes_stage: impl Fn(&str) -> Option<Vec<Interval>>,
    ) -> Result<DetectSpec, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let min_nodes = self.min_nodes.unwrap_or(2);
        if min_nodes == 0 {
            errors.push(ConfigError::new("min_nodes", "must be at least 1"));
        }
        if self.top == Some(0) {
            errors.push(ConfigError::new("top", "must be at least 1"));
        }
        let lateness_s = self.lateness_s.unwrap_or(0.0);
        if !(lateness_s.is_finite() && lateness_s >= 0.0) {
            errors.push(ConfigError::new(
                "lateness_s",
                format!("must be finite seconds ≥ 0, got {lateness_s}"),
            ));
        }
        let mut watch = Vec::new();
        for (i, text) in self.episodes.iter().enumerate() {
            match WatchEpisode::parse(text, &[]) {
                Ok(w) => watch.push(w),
                Err(e) => errors.push(ConfigError::new(format!("episodes[{i}]"), e.to_string())),
            }
        }
        if let Some(path) = &self.episodes_file {
            match read_watch_file(path, self.top, min_nodes) {
                Ok(list) => watch.extend(list),
                Err(message) => errors.push(ConfigError::new("episodes_file", message)),
            }
        }
        dedup(&mut watch);
        let refresh = match &self.from_stage {
            Some(stage) => {
                if !watch.is_empty() || self.episodes_file.is_some() {
                    errors.push(ConfigError::new(
                        "from_stage",
                        "takes the watch list from the stage; leave out `episodes` and \
                         `episodes_file`",
                    ));
                }
                match episodes_stage(stage) {
                    Some(known) => Some(Refresh {
                        stage: stage.clone(),
                        top: self.top.unwrap_or(10),
                        min_nodes,
                        known,
                    }),
                    None => {
                        errors.push(ConfigError::new(
                            "from_stage",
                            format!("no stage of kind `episodes` named `{stage}`"),
                        ));
                        None
                    }
                }
            }
            None => {
                if watch.is_empty() && errors.is_empty() {
                    errors.push(ConfigError::new(
                        "episodes",
                        "nothing to watch: give `episodes`, `episodes_file` (with episodes of \
                         at least `min_nodes` nodes) or `from_stage`",
                    ));
                }
                None
            }
        };
        if let Err(e) = Detector::new(watch.clone(), lateness_s.max(0.0)) {
            errors.push(ConfigError::new("episodes", e.to_string()));
        }
        if errors.is_empty() {
            Ok(DetectSpec {
                source,
                watch,
                lateness_s,
                refresh,
            })
        } else {
            Err(errors)
        }
    }
}

/// The watch list of a `synfire mine --format json` document: its `top` most frequent
/// episodes of at least `min_nodes` nodes (all for `None`; ties in the document's order),
/// with intervals read exactly from `params` (`intervals`, `interval_notation`,
/// `sample_rate_hz`).
///
/// # Errors
/// A message naming the file and what is wrong (unreadable, not JSON, no `params` or
/// `episodes`, an episode whose interval is not one of `params`).
pub(crate) fn read_watch_file(
    path: &Path,
    top: Option<usize>,
    min_nodes: usize,
) -> Result<Vec<WatchEpisode>, String> {
    #[derive(Deserialize)]
    struct Params {
        intervals: Vec<[f64; 2]>,
        interval_notation: Vec<String>,
        #[serde(default)]
        sample_rate_hz: Option<f64>,
    }
    #[derive(Deserialize)]
    struct Document {
        params: Params,
        episodes: Vec<EpisodeJson>,
    }
    let at = |m: String| format!("{}: {m}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| at(format!("cannot read: {e}")))?;
    let doc: Document = serde_json::from_str(&text)
        .map_err(|e| at(format!("not a `synfire mine --format json` document: {e}")))?;
    let p = doc.params;
    if p.intervals.len() != p.interval_notation.len() {
        return Err(at(format!(
            "`params.intervals` has {} entries but `params.interval_notation` {}",
            p.intervals.len(),
            p.interval_notation.len()
        )));
    }
    let mut known = Vec::with_capacity(p.intervals.len());
    for ([low, high], notation) in p.intervals.iter().zip(&p.interval_notation) {
        let closed = notation.starts_with('[');
        let iv = match p.sample_rate_hz {
            Some(rate) => {
                Interval::samples((low * rate).round(), (high * rate).round(), closed, rate)
            }
            None => Interval::seconds(*low, *high, closed),
        }
        .map_err(|e| at(format!("`params.intervals` entry {notation}: {e}")))?;
        known.push(iv);
    }
    watch_from_episodes(&doc.episodes, &known, top, min_nodes).map_err(at)
}

/// The `top` most frequent of `episodes` with at least `min_nodes` nodes (stable by count,
/// descending), their interval texts matched to `known`.
///
/// # Errors
/// An episode whose interval text is not the display of one of `known`, or whose labels and
/// intervals disagree in number.
pub(crate) fn watch_from_episodes(
    episodes: &[EpisodeJson],
    known: &[Interval],
    top: Option<usize>,
    min_nodes: usize,
) -> Result<Vec<WatchEpisode>, String> {
    let mut chosen: Vec<&EpisodeJson> = episodes
        .iter()
        .filter(|e| e.labels.len() >= min_nodes.max(1))
        .collect();
    chosen.sort_by_key(|e| std::cmp::Reverse(e.count));
    chosen.truncate(top.unwrap_or(usize::MAX));
    let mut list = chosen
        .into_iter()
        .map(|e| {
            if e.intervals.len() + 1 != e.labels.len() {
                return Err(format!(
                    "episode {:?} has {} labels and {} intervals",
                    e.labels,
                    e.labels.len(),
                    e.intervals.len()
                ));
            }
            let intervals = e
                .intervals
                .iter()
                .map(|text| {
                    known
                        .iter()
                        .find(|k| k.to_string() == *text)
                        .copied()
                        .ok_or_else(|| {
                            format!(
                                "episode {:?}: interval `{text}` is not one of the mining's intervals",
                                e.labels
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok(WatchEpisode {
                labels: e.labels.clone(),
                intervals,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    dedup(&mut list);
    Ok(list)
}

/// Keeps the first of each episode watched twice (an episode given and also in the file).
fn dedup(watch: &mut Vec<WatchEpisode>) {
    let mut seen = std::collections::HashSet::new();
    watch.retain(|w| seen.insert(w.to_string()));
}

/// The latest watch list an episodes stage offered a detector (taken at the next spike).
#[derive(Debug, Default)]
pub(crate) struct WatchSlot {
    fresh: AtomicBool,
    list: Mutex<Option<Vec<WatchEpisode>>>,
}

impl WatchSlot {
    /// Offers `list`, replacing one not taken yet.
    pub(crate) fn offer(&self, list: Vec<WatchEpisode>) {
        *self.list.lock() = Some(list);
        self.fresh.store(true, Ordering::Release);
    }

    /// The list offered since the last call, if any (one relaxed load when there is none).
    pub(crate) fn take(&self) -> Option<Vec<WatchEpisode>> {
        if !self.fresh.load(Ordering::Acquire) {
            return None;
        }
        self.fresh.store(false, Ordering::Relaxed);
        self.list.lock().take()
    }
}

/// Feeds an episodes stage's results to the detectors refreshed from it (on the sink thread).
#[derive(Debug)]
pub struct Refresher {
    /// The episodes stage.
    pub stage: String,
    refresh: Refresh,
    slot: Arc<WatchSlot>,
    detector: String,
}

impl Refresher {
    /// Offers the top episodes of one window result of the stage (its typed
    /// [`EpisodesResult`], carried beside the line); a window without a result (the stage
    /// failed on it) offers nothing, and episodes that cannot be watched are logged and
    /// skipped.
    pub fn offer_result(&self, result: &EpisodesResult) {
        let list = watch_from_episodes(
            &result.episodes,
            &self.refresh.known,
            Some(self.refresh.top),
            self.refresh.min_nodes,
        );
        match list {
            Ok(list) => self.slot.offer(list),
            Err(e) => tracing::warn!(
                stage = %self.stage,
                detector = %self.detector,
                error = %e,
                "Cannot take a watch list from this result."
            ),
        }
    }
}

impl ResultObserver for Refresher {
    fn stage(&self) -> &str {
        &self.stage
    }

    fn offer(&self, out: &Output) {
        let Some(LineValue::Window(line)) = &out.value else {
            return;
        };
        if let Some(result) = line
            .result
            .as_ref()
            .and_then(|r| r.downcast_ref::<EpisodesResult>())
        {
            self.offer_result(result);
        }
    }
}

/// One occurrence as a JSON line of a detect stage.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OccurrenceLine {
    /// The detect stage.
    pub stage: String,
    /// Always `"occurrence"`.
    pub kind: String,
    /// Occurrences reported by this stage before this one (0, 1, 2, … in report order).
    pub seq: u64,
    /// The episode in the text notation (`12-(4,6]ms-31`).
    pub episode: String,
    /// Its node labels, shape `[N]`.
    pub labels: Vec<String>,
    /// The occurrence's spike times, node by node, shape `[N]`, seconds (the source's clock).
    pub times_s: Vec<f64>,
    /// Wall clock when the window thread took the last spike of the occurrence off the
    /// source's ring and completed it, seconds since the Unix epoch.
    pub detected_unix_s: f64,
}

/// A detect stage at run time, on its source's window thread.
pub struct LiveDetector {
    name: Arc<str>,
    detector: Detector,
    ttl: Vec<TtlSender>,
    out: Sender<Output>,
    refresh: Option<Arc<WatchSlot>>,
    found: Vec<OnlineOccurrence>,
    seq: u64,
    late: metrics::Counter,
    reported: metrics::Counter,
}

impl std::fmt::Debug for LiveDetector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveDetector")
            .field("name", &self.name)
            .field("detector", &self.detector)
            .finish_non_exhaustive()
    }
}

impl LiveDetector {
    /// The stage `name` of `spec`, sending TTL requests to `ttl` and lines to `out`; with a
    /// refresh, also the [`Refresher`] the sink thread feeds.
    ///
    /// # Errors
    /// As [`Detector::new`] (the spec was validated, so only for a spec made in code).
    pub fn new(
        name: &str,
        spec: &DetectSpec,
        ttl: Vec<TtlSender>,
        out: Sender<Output>,
    ) -> Result<(Self, Option<Refresher>), crate::episode::DetectorError> {
        let detector = Detector::new(spec.watch.clone(), spec.lateness_s)?;
        let (slot, refresher) = match &spec.refresh {
            Some(r) => {
                let slot = Arc::new(WatchSlot::default());
                (
                    Some(slot.clone()),
                    Some(Refresher {
                        stage: r.stage.clone(),
                        refresh: r.clone(),
                        slot,
                        detector: name.to_owned(),
                    }),
                )
            }
            None => (None, None),
        };
        Ok((
            Self {
                name: Arc::from(name),
                detector,
                ttl,
                out,
                refresh: slot,
                found: Vec::new(),
                seq: 0,
                late: crate::live::telemetry::detect_late(name),
                reported: crate::live::telemetry::occurrences(name),
            },
            refresher,
        ))
    }

    /// Names a unit (a source's `Record::Unit`).
    pub fn announce(&mut self, id: u32, name: Arc<str>) {
        self.detector.announce(id, name);
    }

    /// One spike, which arrived at `arrived` (when the window thread took it from the source's
    /// ring): detection, then TTL requests (aged from `arrived`, [`TtlSender::request`]), then
    /// lines.
    pub fn spike(&mut self, t_s: f64, unit: u32, arrived: Instant) {
        if let Some(slot) = &self.refresh
            && let Some(list) = slot.take()
        {
            let n = list.len();
            if let Err(e) = self.detector.set_watch(list) {
                tracing::warn!(stage = %self.name, error = %e, "Watch list refused.");
            } else {
                tracing::debug!(stage = %self.name, episodes = n, "Watch list refreshed.");
            }
        }
        let late = self.detector.stats().late;
        self.detector.push(t_s, unit, &mut self.found);
        if self.detector.stats().late > late {
            self.late.increment(1);
        }
        self.emit(arrived);
    }

    /// A publisher restart: held events are decided, then every machine starts afresh.
    pub fn restart(&mut self) {
        self.detector.restart(&mut self.found);
        self.emit(Instant::now());
    }

    /// The end of the input: held events are decided.
    pub fn finish(&mut self) {
        self.detector.flush(&mut self.found);
        self.emit(Instant::now());
        let s = self.detector.stats();
        tracing::info!(
            stage = %self.name,
            occurrences = s.occurrences,
            accepted = s.accepted,
            late = s.late,
            "Detector totals."
        );
    }

    /// The stage's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The detector's counters.
    #[must_use]
    pub fn stats(&self) -> DetectorStats {
        self.detector.stats()
    }

    /// Reports what was found on the arrival of the spike that decided it (`arrived`: a TTL
    /// request's age counts from there).
    fn emit(&mut self, arrived: Instant) {
        if self.found.is_empty() {
            return;
        }
        for _ in &self.found {
            for t in &self.ttl {
                t.request(arrived);
            }
        }
        let detected_at = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let watch: Vec<&WatchEpisode> = self.detector.watch().collect();
        for o in self.found.drain(..) {
            let w = watch[o.episode];
            let line = OccurrenceLine {
                stage: self.name.to_string(),
                kind: "occurrence".into(),
                seq: self.seq,
                episode: w.to_string(),
                labels: w.labels.clone(),
                times_s: o.times,
                detected_unix_s: unix,
            };
            self.seq += 1;
            self.reported.increment(1);
            let json = serde_json::to_string(&line).expect("an occurrence line serialises");
            // Blocking: lines are backpressure like windows (the TTL requests went first).
            let _ = self.out.send(Output {
                stage: self.name.clone(),
                json,
                closed_at: detected_at,
                preview: false,
                complete: true,
                published_at: None,
                value: Some(LineValue::Occurrence(Arc::new(line))),
            });
        }
    }
}

impl SpikeStage for LiveDetector {
    fn announce(&mut self, id: u32, name: Arc<str>) {
        LiveDetector::announce(self, id, name);
    }
    fn spike(&mut self, t_s: f64, unit: u32, arrived: Instant) {
        LiveDetector::spike(self, t_s, unit, arrived);
    }
    fn restart(&mut self) {
        LiveDetector::restart(self);
    }
    fn finish(&mut self) {
        LiveDetector::finish(self);
    }
    fn name(&self) -> &str {
        LiveDetector::name(self)
    }
    fn stats(&self) -> DetectorStats {
        LiveDetector::stats(self)
    }
}
