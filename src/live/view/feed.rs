//! The live view's state and its frames: what the feed thread (`synfire:view-feed`) keeps
//! from what the pipeline offered, and the JSON it pushes to browsers.
//!
//! The pipeline's threads only `try_send` into two bounded channels ([`RasterMsg`] from the
//! window threads, [`LineMsg`] from the sink thread); the feed thread drains them every
//! [`TICK`], folds them into [`FeedState`] (per spike source a time-ordered ring of the last
//! `span_s` seconds, its units and the occurrences of detect stages; per stage its latest line
//! and its recent result latencies) and publishes one delta frame per tick. A browser that
//! connects gets a snapshot frame of the whole state first ([`FeedState::snapshot`]), then the
//! deltas numbered after it.
//!
//! Nothing here runs on a pipeline thread; this file knows no HTTP.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use crate::live::buffer::SourceStats;
use crate::live::config::PipelineConfig;
use crate::live::stage::detect::OccurrenceLine;
use crate::live::stage::episodes::EpisodesResult;
use crate::live::stage::motif::MotifWindowResult;
use crate::live::stage::search::SearchWindowResult;
use crate::live::stage::softdtw::SoftDtwWindowResult;
use crate::live::stage::{AnyResult, LineValue};
use crate::live::telemetry::ResultLatency;
use crate::record::StreamKind;
use crate::report::{EpisodeJson, SignificanceJson};

/// How often the feed thread drains the pipeline's offers and pushes a delta frame.
pub const TICK: Duration = Duration::from_millis(100);

/// Spikes kept per source at most, whatever the span (the oldest go first).
pub(crate) const RING_CAPACITY: usize = 250_000;

/// Occurrences kept per source at most (the oldest go first).
pub(crate) const OCCURRENCE_CAPACITY: usize = 2_000;

/// Unit ids a raster names rows for (a larger id is kept but drawn nowhere).
pub(crate) const MAX_UNITS: u32 = 1 << 16;

/// Result latencies kept per stage for the page's p50 / p99 (the most recent).
pub(crate) const LATENCY_SAMPLES: usize = 1_024;

/// Episodes of an episodes stage's window shown on the page.
pub(crate) const TOP_EPISODES: usize = 10;

/// One record from a window thread, in the order the thread saw them.
#[derive(Clone, Debug)]
pub enum RasterMsg {
    /// A spike of source `source` (index into [`ViewLayout::sources`]).
    Spike {
        /// The source's index.
        source: u16,
        /// Dense unit id of the source.
        unit: u32,
        /// Spike time, seconds (the source's clock).
        t_s: f64,
    },
    /// A unit's name (`Record::Unit`).
    Unit {
        /// The source's index.
        source: u16,
        /// Dense unit id.
        id: u32,
        /// Its name.
        name: Arc<str>,
    },
    /// The publisher restarted (`Record::Restart`): the source's clock starts again.
    Restart {
        /// The source's index.
        source: u16,
    },
}

/// One result line from the sink thread, after every sink wrote it.
#[derive(Clone, Debug)]
pub struct LineMsg {
    /// The stage.
    pub stage: Arc<str>,
    /// The line's typed value (a window line with its stage's result, or an
    /// [`OccurrenceLine`] of a detect stage; [`crate::live::stage::Output::value`]), read as
    /// it is, never parsed from the line; `None` (a line made in code without one) is counted
    /// as unreadable.
    pub value: Option<LineValue>,
    /// Seconds from the window's close (a detect stage: the occurrence's detection) to the
    /// line written by every sink; `None` for an incomplete window (not measured, as the
    /// sinks do not measure it).
    pub latency_s: Option<f64>,
}

/// Counters of the view, shared by the pipeline's threads (drops) and the view's own.
#[derive(Debug, Default)]
pub struct ViewCounters {
    /// Spike records the feed thread received.
    pub spikes_received: AtomicU64,
    /// Spike, unit or restart records not offered because the raster channel was full.
    pub raster_dropped: AtomicU64,
    /// Result lines the feed thread received.
    pub lines_received: AtomicU64,
    /// Result lines not offered because their channel was full.
    pub lines_dropped: AtomicU64,
    /// Browsers (event streams) connected so far.
    pub clients: AtomicU64,
    /// Event streams now open.
    pub clients_open: AtomicU64,
    /// Snapshots sent again to a client that fell behind the frames (it lost frames).
    pub resyncs: AtomicU64,
}

/// What the view shows, from the pipeline file.
#[derive(Clone, Debug, Default)]
pub struct ViewLayout {
    /// Seconds of each raster (the last `span_s` seconds of the source's clock).
    pub span_s: f64,
    /// Every source by name, with what it produces; only spike sources have a raster.
    pub sources: Vec<(String, StreamKind)>,
    /// Every stage, windowed and detect.
    pub stages: Vec<StageInfo>,
}

/// One stage as the view shows it.
#[derive(Clone, Debug, Serialize)]
pub struct StageInfo {
    /// The stage's name.
    pub name: String,
    /// Its kind (`episodes`, `detect`, `summary`, …).
    pub kind: String,
    /// Its window definition (`None` for a detect stage, which reads a source).
    pub window: Option<String>,
    /// The source it reads (through its window, or directly).
    pub source: String,
}

impl ViewLayout {
    /// The layout of `config`, rasters of `span_s` seconds.
    #[must_use]
    pub(crate) fn of(config: &PipelineConfig, span_s: f64) -> Self {
        let sources = config
            .sources
            .iter()
            .map(|(n, s)| (n.clone(), s.produces()))
            .collect();
        let mut stages: Vec<StageInfo> = config
            .stages
            .iter()
            .map(|(name, s)| StageInfo {
                name: name.clone(),
                kind: s.parsed.kind.name.to_owned(),
                window: Some(s.window.clone()),
                source: config
                    .windows
                    .get(&s.window)
                    .map(|w| w.source.clone())
                    .unwrap_or_default(),
            })
            .collect();
        stages.extend(config.spike_stages.iter().map(|(name, s)| StageInfo {
            name: name.clone(),
            kind: s.parsed.kind.name.to_owned(),
            window: None,
            source: s.source.clone(),
        }));
        Self {
            span_s,
            sources,
            stages,
        }
    }

    /// The index of spike source `name`, if it is one.
    #[must_use]
    pub(crate) fn spike_source(&self, name: &str) -> Option<u16> {
        self.sources
            .iter()
            .position(|(n, k)| n == name && *k == StreamKind::Spikes)
            .and_then(|i| u16::try_from(i).ok())
    }

    /// Whether stage `name` is a detect stage.
    #[must_use]
    pub(crate) fn is_detect(&self, name: &str) -> bool {
        self.stages
            .iter()
            .any(|s| s.name == name && s.kind == crate::live::stage::detect::KIND)
    }
}

/// One occurrence of a detect stage, as drawn.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct OccurrenceView {
    /// The detect stage.
    pub stage: String,
    /// Its report number in the stage.
    pub seq: u64,
    /// The episode in the text notation (`6-(10,20]ms-6`).
    pub episode: String,
    /// Each node's unit id in the source (`None`: a label the view has no unit for).
    pub units: Vec<Option<u32>>,
    /// Each node's spike time, seconds.
    pub times_s: Vec<f64>,
}

/// One spike source's raster.
#[derive(Debug)]
struct Raster {
    name: String,
    units: Vec<Arc<str>>,
    unit_ids: HashMap<Arc<str>, u32>,
    /// `(t_s, unit)` in arrival order, the last `span_s` seconds.
    spikes: VecDeque<(f64, u32)>,
    /// Absolute index of `spikes[0]` (spikes ever added before it).
    base: u64,
    /// Absolute index of the first spike not yet in a delta.
    sent: u64,
    newest_s: f64,
    units_changed: bool,
    reset: bool,
    restarts: u64,
    occurrences: VecDeque<OccurrenceView>,
    /// Occurrences not yet in a delta (the newest of `occurrences`).
    occurrences_new: usize,
    stats: Option<Arc<SourceStats>>,
}

impl Raster {
    fn new(name: String) -> Self {
        Self {
            name,
            units: Vec::new(),
            unit_ids: HashMap::new(),
            spikes: VecDeque::new(),
            base: 0,
            sent: 0,
            newest_s: f64::NEG_INFINITY,
            units_changed: false,
            reset: false,
            restarts: 0,
            occurrences: VecDeque::new(),
            occurrences_new: 0,
            stats: None,
        }
    }

    fn push(&mut self, t_s: f64, unit: u32) {
        if !t_s.is_finite() {
            return;
        }
        if self.units.len() <= unit as usize && unit < MAX_UNITS {
            while self.units.len() <= unit as usize {
                let id = self.units.len();
                self.units.push(Arc::from(format!("#{id}")));
            }
            self.units_changed = true;
        }
        self.spikes.push_back((t_s, unit));
        self.newest_s = self.newest_s.max(t_s);
        if self.spikes.len() > RING_CAPACITY {
            self.spikes.pop_front();
            self.base += 1;
        }
    }

    fn name_unit(&mut self, id: u32, name: Arc<str>) {
        if id >= MAX_UNITS {
            return;
        }
        while self.units.len() <= id as usize {
            let i = self.units.len();
            self.units.push(Arc::from(format!("#{i}")));
        }
        self.unit_ids.insert(name.clone(), id);
        self.units[id as usize] = name;
        self.units_changed = true;
    }

    fn restart(&mut self) {
        self.base += self.spikes.len() as u64;
        self.sent = self.base;
        self.spikes.clear();
        self.occurrences.clear();
        self.occurrences_new = 0;
        self.newest_s = f64::NEG_INFINITY;
        self.reset = true;
        self.restarts += 1;
    }

    fn trim(&mut self, span_s: f64) {
        let from = self.newest_s - span_s;
        while self.spikes.front().is_some_and(|&(t, _)| t < from) {
            self.spikes.pop_front();
            self.base += 1;
        }
        while self
            .occurrences
            .front()
            .is_some_and(|o| o.times_s.last().is_none_or(|&t| t < from))
        {
            self.occurrences.pop_front();
        }
        self.occurrences_new = self.occurrences_new.min(self.occurrences.len());
    }

    fn add_occurrence(&mut self, o: OccurrenceView) {
        if let Some(&t) = o.times_s.last() {
            self.newest_s = self.newest_s.max(t);
        }
        self.occurrences.push_back(o);
        self.occurrences_new += 1;
        if self.occurrences.len() > OCCURRENCE_CAPACITY {
            self.occurrences.pop_front();
        }
        self.occurrences_new = self.occurrences_new.min(self.occurrences.len());
    }

    /// The frame of this raster: everything (`full`) or what is new since the last delta.
    fn frame(&self, full: bool) -> SourceFrame<'_> {
        let from = if full {
            0
        } else {
            usize::try_from(self.sent.saturating_sub(self.base)).unwrap_or(usize::MAX)
        }
        .min(self.spikes.len());
        let (t_s, units): (Vec<f64>, Vec<u32>) = self.spikes.range(from..).copied().unzip();
        let occ_from = if full {
            0
        } else {
            self.occurrences.len() - self.occurrences_new
        };
        let (events_in, dropped, malformed) = self.stats.as_ref().map_or((0, 0, 0), |s| {
            (
                s.events_in.load(Ordering::Relaxed),
                s.dropped.load(Ordering::Relaxed),
                s.malformed.load(Ordering::Relaxed),
            )
        });
        SourceFrame {
            name: &self.name,
            reset: full || self.reset,
            units: (full || self.units_changed).then(|| self.units.iter().map(|u| &**u).collect()),
            newest_s: self.newest_s.is_finite().then_some(self.newest_s),
            t_s,
            units_of_spikes: units,
            occurrences: self.occurrences.range(occ_from..).collect(),
            events_in,
            dropped,
            malformed,
            restarts: self.restarts,
        }
    }

    fn mark_sent(&mut self) {
        self.sent = self.base + self.spikes.len() as u64;
        self.units_changed = false;
        self.reset = false;
        self.occurrences_new = 0;
    }
}

/// The device a window result names, for the stage kinds whose results name one (episodes,
/// motif, search, soft-DTW).
fn device_of(result: &AnyResult) -> Option<String> {
    if let Some(r) = result.downcast_ref::<EpisodesResult>() {
        Some(r.device.clone())
    } else if let Some(r) = result.downcast_ref::<MotifWindowResult>() {
        r.device.clone()
    } else if let Some(r) = result.downcast_ref::<SearchWindowResult>() {
        Some(r.device.clone())
    } else if let Some(r) = result.downcast_ref::<SoftDtwWindowResult>() {
        r.device.clone()
    } else {
        None
    }
}

/// One episode of an episodes stage's window, as listed.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TopEpisode {
    /// The episode in the text notation (`6-(10,20]ms-6`).
    pub episode: String,
    /// Its non-overlapped count in the window.
    pub count: u64,
    /// Raw p-value, when the stage tests significance.
    pub p_value: Option<f64>,
    /// Adjusted p-value.
    pub p_adjusted: Option<f64>,
    /// Whether it is significant.
    pub significant: Option<bool>,
}

/// The latest window line of a windowed stage, as shown.
#[derive(Clone, Debug, Serialize)]
struct WindowView {
    window_index: u64,
    window_start_s: f64,
    window_end_s: f64,
    complete: bool,
    events: u64,
    late: u64,
    dropped: u64,
    seconds: f64,
    error: Option<String>,
    device: Option<String>,
    min_count: Option<u64>,
    significance: Option<SignificanceJson>,
    /// Episodes in the window (all levels).
    episodes_total: Option<usize>,
    top: Vec<TopEpisode>,
}

/// The text notation of an episode of a `synfire mine` document (`6-(10,20]ms-6`).
#[must_use]
pub(crate) fn notation(e: &EpisodeJson) -> String {
    let mut s = String::new();
    for (i, label) in e.labels.iter().enumerate() {
        if i > 0 {
            s.push('-');
            s.push_str(e.intervals.get(i - 1).map_or("?", String::as_str));
            s.push('-');
        }
        s.push_str(label);
    }
    s
}

/// The episodes listed for a window: the `TOP_EPISODES` most frequent of at least two nodes
/// (ties in the line's order), or of one node when the window has no longer one.
fn top_episodes(episodes: &[EpisodeJson]) -> Vec<TopEpisode> {
    let longer = episodes.iter().any(|e| e.labels.len() >= 2);
    let mut chosen: Vec<&EpisodeJson> = episodes
        .iter()
        .filter(|e| !longer || e.labels.len() >= 2)
        .collect();
    chosen.sort_by_key(|e| std::cmp::Reverse(e.count));
    chosen
        .into_iter()
        .take(TOP_EPISODES)
        .map(|e| TopEpisode {
            episode: notation(e),
            count: e.count,
            p_value: e.test.as_ref().map(|t| t.p_value),
            p_adjusted: e.test.as_ref().map(|t| t.p_adjusted),
            significant: e.test.as_ref().map(|t| t.significant),
        })
        .collect()
}

/// One stage's state.
#[derive(Debug)]
struct StageState {
    info: StageInfo,
    lines: u64,
    unreadable: u64,
    latency: VecDeque<f64>,
    last_latency_s: Option<f64>,
    window: Option<WindowView>,
    /// Detect stages: occurrences per episode.
    occurrences: BTreeMap<String, u64>,
    changed: bool,
}

/// One stage's frame.
#[derive(Debug, Serialize)]
struct StageFrame<'a> {
    #[serde(flatten)]
    info: &'a StageInfo,
    lines: u64,
    unreadable: u64,
    latency: LatencyFrame,
    window: Option<&'a WindowView>,
    occurrences: Option<&'a BTreeMap<String, u64>>,
}

/// Result latency of a stage's recent lines, seconds.
#[derive(Debug, Serialize)]
struct LatencyFrame {
    last_s: Option<f64>,
    p50_s: Option<f64>,
    p99_s: Option<f64>,
    samples: usize,
}

impl StageState {
    fn frame(&self) -> StageFrame<'_> {
        let recent = ResultLatency {
            seconds: self.latency.iter().copied().collect(),
            incomplete: 0,
        };
        StageFrame {
            info: &self.info,
            lines: self.lines,
            unreadable: self.unreadable,
            latency: LatencyFrame {
                last_s: self.last_latency_s,
                p50_s: recent.p50(),
                p99_s: recent.p99(),
                samples: recent.windows(),
            },
            window: self.window.as_ref(),
            occurrences: (self.info.kind == crate::live::stage::detect::KIND)
                .then_some(&self.occurrences),
        }
    }
}

/// One spike source's frame.
#[derive(Debug, Serialize)]
struct SourceFrame<'a> {
    name: &'a str,
    /// The client drops what it holds of this source first.
    reset: bool,
    /// Unit names by dense id (present when they changed).
    units: Option<Vec<&'a str>>,
    newest_s: Option<f64>,
    t_s: Vec<f64>,
    #[serde(rename = "unit")]
    units_of_spikes: Vec<u32>,
    occurrences: Vec<&'a OccurrenceView>,
    events_in: u64,
    dropped: u64,
    malformed: u64,
    restarts: u64,
}

/// The view's own counters in a frame.
#[derive(Debug, Serialize)]
struct ViewFrame {
    spikes_received: u64,
    raster_dropped: u64,
    lines_received: u64,
    lines_dropped: u64,
    clients_open: u64,
    resyncs: u64,
}

/// A frame pushed to browsers.
#[derive(Debug, Serialize)]
struct Frame<'a> {
    /// `snapshot` or `delta`.
    kind: &'static str,
    /// Identifies the run (a client that reconnects to a new run starts afresh).
    run: &'a str,
    seq: u64,
    span_s: f64,
    /// Sources that are not spike sources (listed, no raster).
    other_sources: &'a [String],
    sources: Vec<SourceFrame<'a>>,
    stages: Vec<StageFrame<'a>>,
    view: ViewFrame,
}

/// Everything the view knows; owned by the feed thread, read by the server for snapshots.
#[derive(Debug)]
pub struct FeedState {
    run: String,
    span_s: f64,
    seq: u64,
    rasters: Vec<Option<Raster>>,
    other_sources: Vec<String>,
    stages: Vec<StageState>,
    stage_index: HashMap<String, usize>,
    counters: Arc<ViewCounters>,
    finished: bool,
}

impl FeedState {
    /// The state of a run laid out as `layout` (nothing received yet).
    #[must_use]
    pub(crate) fn new(layout: &ViewLayout, counters: Arc<ViewCounters>) -> Self {
        let run = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        let stages: Vec<StageState> = layout
            .stages
            .iter()
            .map(|info| StageState {
                info: info.clone(),
                lines: 0,
                unreadable: 0,
                latency: VecDeque::new(),
                last_latency_s: None,
                window: None,
                occurrences: BTreeMap::new(),
                changed: true,
            })
            .collect();
        Self {
            run,
            span_s: if layout.span_s.is_finite() && layout.span_s > 0.0 {
                layout.span_s
            } else {
                10.0
            },
            seq: 0,
            rasters: layout
                .sources
                .iter()
                .map(|(n, k)| (*k == StreamKind::Spikes).then(|| Raster::new(n.clone())))
                .collect(),
            other_sources: layout
                .sources
                .iter()
                .filter(|(_, k)| *k != StreamKind::Spikes)
                .map(|(n, _)| n.clone())
                .collect(),
            stage_index: stages
                .iter()
                .enumerate()
                .map(|(i, s)| (s.info.name.clone(), i))
                .collect(),
            stages,
            counters,
            finished: false,
        }
    }

    /// Gives source `index` its counters (read at every frame).
    pub(crate) fn attach_stats(&mut self, index: u16, stats: Arc<SourceStats>) {
        if let Some(Some(r)) = self.rasters.get_mut(usize::from(index)) {
            r.stats = Some(stats);
        }
    }

    /// Folds one record of a window thread in.
    pub fn raster(&mut self, msg: RasterMsg) {
        match msg {
            RasterMsg::Spike { source, unit, t_s } => {
                self.counters
                    .spikes_received
                    .fetch_add(1, Ordering::Relaxed);
                if let Some(Some(r)) = self.rasters.get_mut(usize::from(source)) {
                    r.push(t_s, unit);
                }
            }
            RasterMsg::Unit { source, id, name } => {
                if let Some(Some(r)) = self.rasters.get_mut(usize::from(source)) {
                    r.name_unit(id, name);
                }
            }
            RasterMsg::Restart { source } => {
                if let Some(Some(r)) = self.rasters.get_mut(usize::from(source)) {
                    r.restart();
                }
            }
        }
    }

    /// Folds one result line in (a window line, or a detect stage's occurrence).
    pub(crate) fn line(&mut self, msg: LineMsg) {
        self.counters.lines_received.fetch_add(1, Ordering::Relaxed);
        let Some(&i) = self.stage_index.get(&*msg.stage) else {
            return;
        };
        let st = &mut self.stages[i];
        st.lines += 1;
        st.changed = true;
        if let Some(l) = msg.latency_s {
            st.last_latency_s = Some(l);
            st.latency.push_back(l);
            if st.latency.len() > LATENCY_SAMPLES {
                st.latency.pop_front();
            }
        }
        match msg.value {
            Some(LineValue::Occurrence(o)) if st.info.kind == crate::live::stage::detect::KIND => {
                let o: &OccurrenceLine = &o;
                *st.occurrences.entry(o.episode.clone()).or_default() += 1;
                let source = st.info.source.clone();
                let Some(raster) = self.rasters.iter_mut().flatten().find(|r| r.name == source)
                else {
                    return;
                };
                let units = o
                    .labels
                    .iter()
                    .map(|l| raster.unit_ids.get(l.as_str()).copied())
                    .collect();
                raster.add_occurrence(OccurrenceView {
                    stage: o.stage.clone(),
                    seq: o.seq,
                    episode: o.episode.clone(),
                    units,
                    times_s: o.times_s.clone(),
                });
            }
            Some(LineValue::Window(f)) if st.info.kind != crate::live::stage::detect::KIND => {
                let episodes = f
                    .result
                    .as_ref()
                    .and_then(|r| r.downcast_ref::<EpisodesResult>());
                st.window = Some(WindowView {
                    window_index: f.window_index,
                    window_start_s: f.window_start_s,
                    window_end_s: f.window_end_s,
                    complete: f.complete,
                    events: f.events,
                    late: f.late,
                    dropped: f.dropped,
                    seconds: f.seconds,
                    error: f.error.clone(),
                    device: f.result.as_ref().and_then(device_of),
                    min_count: episodes.map(|r| r.min_count),
                    significance: episodes.and_then(|r| r.significance.clone()),
                    episodes_total: episodes.map(|r| r.episodes.len()),
                    top: episodes
                        .map(|r| top_episodes(&r.episodes))
                        .unwrap_or_default(),
                });
            }
            _ => st.unreadable += 1,
        }
    }

    /// Trims every raster to its span.
    pub(crate) fn trim(&mut self) {
        let span = self.span_s;
        for r in self.rasters.iter_mut().flatten() {
            r.trim(span);
        }
    }

    /// The sequence number of the last delta.
    #[must_use]
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Marks the run finished (the snapshot says so).
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// Whether the run is finished.
    #[must_use]
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    fn view_frame(&self) -> ViewFrame {
        let c = &self.counters;
        ViewFrame {
            spikes_received: c.spikes_received.load(Ordering::Relaxed),
            raster_dropped: c.raster_dropped.load(Ordering::Relaxed),
            lines_received: c.lines_received.load(Ordering::Relaxed),
            lines_dropped: c.lines_dropped.load(Ordering::Relaxed),
            clients_open: c.clients_open.load(Ordering::Relaxed),
            resyncs: c.resyncs.load(Ordering::Relaxed),
        }
    }

    /// The whole state as one frame (JSON), numbered with the last delta's `seq`: a client
    /// that reads it then applies only deltas numbered after it.
    #[must_use]
    pub fn snapshot(&self) -> (u64, String) {
        let frame = Frame {
            kind: if self.finished {
                "finished"
            } else {
                "snapshot"
            },
            run: &self.run,
            seq: self.seq,
            span_s: self.span_s,
            other_sources: &self.other_sources,
            sources: self
                .rasters
                .iter()
                .flatten()
                .map(|r| r.frame(true))
                .collect(),
            stages: self.stages.iter().map(StageState::frame).collect(),
            view: self.view_frame(),
        };
        (self.seq, serde_json::to_string(&frame).unwrap_or_default())
    }

    /// The next delta: what changed since the last one (JSON, when `render`; otherwise the
    /// changes are only marked as sent, as when no browser is connected), and its `seq`.
    pub(crate) fn delta(&mut self, render: bool) -> (u64, Option<String>) {
        self.seq += 1;
        let json = render.then(|| {
            let frame = Frame {
                kind: "delta",
                run: &self.run,
                seq: self.seq,
                span_s: self.span_s,
                other_sources: &self.other_sources,
                sources: self
                    .rasters
                    .iter()
                    .flatten()
                    .map(|r| r.frame(false))
                    .collect(),
                stages: self
                    .stages
                    .iter()
                    .filter(|s| s.changed)
                    .map(StageState::frame)
                    .collect(),
                view: self.view_frame(),
            };
            serde_json::to_string(&frame).unwrap_or_default()
        });
        for r in self.rasters.iter_mut().flatten() {
            r.mark_sent();
        }
        for s in &mut self.stages {
            s.changed = false;
        }
        (self.seq, json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::stage::WindowLine;

    fn layout() -> ViewLayout {
        ViewLayout {
            span_s: 10.0,
            sources: vec![
                ("probe".into(), StreamKind::Spikes),
                ("compass".into(), StreamKind::Sensor),
            ],
            stages: vec![
                StageInfo {
                    name: "episodes".into(),
                    kind: "episodes".into(),
                    window: Some("w".into()),
                    source: "probe".into(),
                },
                StageInfo {
                    name: "stim".into(),
                    kind: "detect".into(),
                    window: None,
                    source: "probe".into(),
                },
            ],
        }
    }

    fn value(json: &str) -> serde_json::Value {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn deltas_carry_each_spike_once_and_the_ring_keeps_the_span() {
        let mut s = FeedState::new(&layout(), Arc::default());
        s.raster(RasterMsg::Unit {
            source: 0,
            id: 0,
            name: Arc::from("6"),
        });
        for i in 0..100 {
            s.raster(RasterMsg::Spike {
                source: 0,
                unit: 0,
                t_s: f64::from(i) * 0.5,
            });
        }
        s.trim();
        let (_, d) = s.delta(true);
        let d = value(&d.unwrap());
        let src = &d["sources"][0];
        // 49.5 is the newest: the span keeps [39.5, 49.5].
        assert_eq!(src["t_s"].as_array().unwrap().len(), 21);
        assert_eq!(src["units"], serde_json::json!(["6"]));
        s.raster(RasterMsg::Spike {
            source: 0,
            unit: 0,
            t_s: 50.0,
        });
        let (seq, d) = s.delta(true);
        let d = value(&d.unwrap());
        assert_eq!(d["sources"][0]["t_s"], serde_json::json!([50.0]));
        assert!(d["sources"][0]["units"].is_null());
        let (snap_seq, snap) = s.snapshot();
        assert_eq!(snap_seq, seq);
        assert_eq!(
            value(&snap)["sources"][0]["t_s"].as_array().unwrap().len(),
            22
        );
    }

    #[test]
    fn an_occurrence_names_its_units_and_an_episodes_line_lists_its_top() {
        let mut s = FeedState::new(&layout(), Arc::default());
        s.raster(RasterMsg::Unit {
            source: 0,
            id: 3,
            name: Arc::from("6"),
        });
        let occ = OccurrenceLine {
            stage: "stim".into(),
            kind: "occurrence".into(),
            seq: 0,
            episode: "6-(10,20]ms-6".into(),
            labels: vec!["6".into(), "6".into()],
            times_s: vec![1.0, 1.015],
            detected_unix_s: 0.0,
        };
        s.line(LineMsg {
            stage: Arc::from("stim"),
            value: Some(LineValue::Occurrence(Arc::new(occ))),
            latency_s: Some(0.001),
        });
        let line: WindowLine<EpisodesResult> = serde_json::from_str(
            r#"{"stage":"episodes","window":"w","source":"probe","window_index":2,
              "window_start_s":0,"window_end_s":120,"complete":true,"events":10,"late":1,
              "dropped":0,"seconds":0.1,"device":"cpu","min_count":3,"event_types":1,
              "levels":[],"episodes":[
               {"labels":["6"],"types":[0],"intervals_s":[],"intervals":[],"count":90},
               {"labels":["6","6"],"types":[0,0],"intervals_s":[[0.01,0.02]],
                "intervals":["(10,20]ms"],"count":40}]}"#,
        )
        .unwrap();
        s.line(LineMsg {
            stage: Arc::from("episodes"),
            value: Some(LineValue::Window(Arc::new(line.erased()))),
            latency_s: Some(0.5),
        });
        // A line without its typed value (made in code) is counted, not shown.
        s.line(LineMsg {
            stage: Arc::from("episodes"),
            value: None,
            latency_s: None,
        });
        let (_, d) = s.delta(true);
        let d = value(&d.unwrap());
        let o = &d["sources"][0]["occurrences"][0];
        assert_eq!(o["episode"], "6-(10,20]ms-6");
        assert_eq!(o["units"], serde_json::json!([3, 3]));
        let ep = &d["stages"][0];
        assert_eq!(ep["window"]["top"][0]["episode"], "6-(10,20]ms-6");
        assert_eq!(ep["window"]["top"].as_array().unwrap().len(), 1);
        assert_eq!(ep["window"]["late"], 1);
        assert_eq!(ep["unreadable"], 1);
        assert_eq!(ep["latency"]["p99_s"], 0.5);
        assert_eq!(d["stages"][1]["occurrences"]["6-(10,20]ms-6"], 1);
        // Unchanged stages are left out of the next delta.
        let (_, d) = s.delta(true);
        assert!(value(&d.unwrap())["stages"].as_array().unwrap().is_empty());
    }

    #[test]
    fn a_restart_resets_the_raster_and_hostile_values_are_ignored() {
        let mut s = FeedState::new(&layout(), Arc::default());
        s.raster(RasterMsg::Spike {
            source: 0,
            unit: 1,
            t_s: 5.0,
        });
        s.raster(RasterMsg::Spike {
            source: 0,
            unit: u32::MAX,
            t_s: f64::NAN,
        });
        s.raster(RasterMsg::Spike {
            source: 9,
            unit: 0,
            t_s: 1.0,
        });
        s.raster(RasterMsg::Unit {
            source: 0,
            id: u32::MAX,
            name: Arc::from("x"),
        });
        s.delta(false);
        s.raster(RasterMsg::Restart { source: 0 });
        s.raster(RasterMsg::Spike {
            source: 0,
            unit: 0,
            t_s: 0.5,
        });
        let (_, d) = s.delta(true);
        let d = value(&d.unwrap());
        assert_eq!(d["sources"][0]["reset"], true);
        assert_eq!(d["sources"][0]["t_s"], serde_json::json!([0.5]));
        assert_eq!(d["sources"][0]["restarts"], 1);
    }
}
