//! Sliding windows: time-based over spikes, sample-based over sensor streams, and the event
//! clock that guards them from absurd times, strays, jumps and restarts.
//!
//! **Spike windows** have length `L` and hop `H` seconds; window `k ≥ 0` is the half-open
//! interval `[k·H, k·H + L)`. A window closes when the watermark — the newest event time minus
//! the allowed lateness — reaches its end. An event is **late** when a window it belongs to
//! was already emitted (its time is before the end of the newest emitted window); late events
//! are counted and rejected, so every emitted window holds exactly the accepted events in its
//! interval. Windows holding no event are skipped.
//!
//! **The event clock** ([`EventClock`], one per source, on its window thread, before the detect
//! stages, the live view and every window definition) decides what a spike's time means:
//!
//! - A time that is NaN, infinite, negative, or at or above [`MAX_EVENT_TIME_S`] (10¹² s) is
//!   **out of range**: refused and counted (`out_of_range` on every line). A spike window also
//!   refuses (and counts) a time whose window index `t / H` reaches 2⁵², so no time can make a
//!   window index saturate.
//! - A time more than `gap_s` after the newest accepted one (a *jump ahead*), or more than
//!   `restart_gap_s` before it (a *jump back*), is a **candidate**: held, not yet passed on.
//!   The jump is **confirmed** when `confirm_events` consecutive spikes (default 3) are
//!   candidates in the same direction, each no earlier than `gap_s` before the first one held
//!   (jump ahead) or within `restart_gap_s` of those held (jump back). A spike that is not a
//!   candidate ends the hold: held spikes ahead are **isolated strays**, refused and counted
//!   `out_of_range`; held spikes back are passed on as they are (each window counts them
//!   `late` or, while their window is still open, holds them). So one stray can neither move
//!   the watermark (no spurious windows, no windows closed early) nor restart the windows.
//! - A confirmed jump ahead is a **gap** (the source went silent while its clock ran on, or
//!   its clock jumped): from the newest time before it to the first time after it. A confirmed
//!   jump back is a **restart** (the publisher's clock started again): the windows still open
//!   are emitted and the windows start afresh, in a new `epoch`. A source's own restart
//!   signal (a new session id of the synfire wire format) restarts at once.
//! - A source that lost its connection to the publisher ([`crate::record::Record::Disconnected`])
//!   makes the interval from the newest time to the next one after it a gap of kind
//!   [`GapKind::Disconnected`], however short.
//! - Every window that overlaps a gap, and every window emitted at a restart whose end is
//!   after the last time before it, carries the gap ([`Window::gap`]: its kind, start and end
//!   in seconds) and is marked incomplete.
//!
//! **Bounds.** The open windows of a spike window definition hold at most `max_open_events`
//! events together ([`SpikeWindower::with_max_open_events`], default
//! [`DEFAULT_MAX_OPEN_EVENTS`]): when they are full and an event's time closes no window (event
//! time stopped advancing, or a flood within one window), the event is refused and counted
//! `overflow`, and the windows containing its time are emitted incomplete with a gap of kind
//! [`GapKind::Overflow`].
//!
//! Accounting: every spike a source accepts is in a complete window, counted `late`,
//! `overflow`, `out_of_range`, `duplicate` or `dropped`, or in a window marked incomplete (with
//! its gap when one caused it).
//!
//! **Sensor windows** have `length_samples` and `hop_samples`; window `k` holds stream samples
//! `[k·hop, k·hop + length)`. Samples are placed by their sequence numbers: a frame that repeats
//! samples already received is late for those samples (counted, rejected); a gap is filled with
//! NaN and counted as missing, up to one window's length: a longer gap is a discontinuity that
//! emits the open windows (marked incomplete, with the gap) and starts afresh at the frame.
//! A frame whose sample indices would overflow is out of range (counted, refused).

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::live::config::section::ConfigError;
use crate::live::telemetry::WindowMetrics;
use crate::record::{SensorFrame, StreamKind};

/// `[windows.<name>]`: spike windows take `length_s`/`hop_s` (and `allowed_lateness_s`),
/// sensor windows `length_samples`/`hop_samples`, by what their source carries.
#[derive(Clone, Debug, Deserialize)]
pub struct WindowConfig {
    /// The window's name (the key of its section; set by the loader).
    #[serde(skip)]
    pub name: String,
    /// The source it reads.
    pub source: String,
    /// Spike windows: length, seconds.
    pub length_s: Option<f64>,
    /// Spike windows: hop, seconds.
    pub hop_s: Option<f64>,
    /// Spike windows: how long after its end a window waits for late events (default 0 s).
    pub allowed_lateness_s: Option<f64>,
    /// Spike windows: the most events the open windows may hold together (default
    /// [`DEFAULT_MAX_OPEN_EVENTS`]); an event beyond it is refused and counted `overflow`, and
    /// the windows it belonged to are marked incomplete (module docs, "Bounds").
    pub max_open_events: Option<usize>,
    /// Sensor windows: length, samples.
    pub length_samples: Option<u64>,
    /// Sensor windows: hop, samples.
    pub hop_samples: Option<u64>,
}

impl WindowConfig {
    /// Checks the options for a source carrying `kind`; errors name fields relative to the
    /// section.
    #[must_use]
    pub fn validate(&self, kind: StreamKind) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut err = |field: &str, message: String| errors.push(ConfigError::new(field, message));
        let positive = |x: f64| x.is_finite() && x > 0.0;
        match kind {
            StreamKind::Spikes => {
                for (f, v) in [("length_s", self.length_s), ("hop_s", self.hop_s)] {
                    match v {
                        None => err(f, "missing (spike windows are time-based)".into()),
                        Some(x) if !positive(x) => {
                            err(f, format!("must be positive seconds, got {x}"));
                        }
                        _ => {}
                    }
                }
                if self.max_open_events == Some(0) {
                    err("max_open_events", "must be at least 1".into());
                }
                if let Some(l) = self.allowed_lateness_s
                    && !(l.is_finite() && l >= 0.0)
                {
                    err(
                        "allowed_lateness_s",
                        format!("must be ≥ 0 seconds, got {l}"),
                    );
                }
                for (f, v) in [
                    ("length_samples", self.length_samples),
                    ("hop_samples", self.hop_samples),
                ] {
                    if v.is_some() {
                        err(
                            f,
                            format!(
                                "source `{}` carries spikes: use `length_s`/`hop_s`",
                                self.source
                            ),
                        );
                    }
                }
            }
            StreamKind::Sensor => {
                for (f, v) in [
                    ("length_samples", self.length_samples),
                    ("hop_samples", self.hop_samples),
                ] {
                    match v {
                        None => err(f, "missing (sensor windows are sample-based)".into()),
                        Some(0) => err(f, "must be at least 1".into()),
                        _ => {}
                    }
                }
                if self.max_open_events.is_some() {
                    err(
                        "max_open_events",
                        format!(
                            "source `{}` carries sensor samples: sensor windows hold at most `length_samples` + `hop_samples` samples, no bound to set",
                            self.source
                        ),
                    );
                }
                for (f, v) in [
                    ("length_s", self.length_s),
                    ("hop_s", self.hop_s),
                    ("allowed_lateness_s", self.allowed_lateness_s),
                ] {
                    if v.is_some() {
                        err(
                            f,
                            format!(
                                "source `{}` carries sensor samples: use `length_samples`/`hop_samples`",
                                self.source
                            ),
                        );
                    }
                }
            }
        }
        errors
    }

    /// The windower of window `name` over source `source` carrying `kind` (options
    /// validated; absent ones take their defaults).
    #[must_use]
    pub fn windower(&self, name: &str, source: &str, kind: StreamKind, previews: bool) -> Windower {
        match kind {
            StreamKind::Spikes => Windower::Spikes(
                SpikeWindower::new(
                    name,
                    source,
                    self.length_s.unwrap_or(1.0),
                    self.hop_s.unwrap_or(1.0),
                    self.allowed_lateness_s.unwrap_or(0.0),
                )
                .with_previews(previews)
                .with_max_open_events(self.max_open_events.unwrap_or(DEFAULT_MAX_OPEN_EVENTS)),
            ),
            StreamKind::Sensor => Windower::Sensor(SensorWindower::new(
                name,
                source,
                self.length_samples.unwrap_or(1),
                self.hop_samples.unwrap_or(1),
            )),
        }
    }
}

/// The windows of one window definition, of either kind.
#[derive(Debug)]
pub enum Windower {
    /// Time-based spike windows.
    Spikes(SpikeWindower),
    /// Sample-based sensor windows.
    Sensor(SensorWindower),
}

/// The data of one window.
#[derive(Clone, Debug)]
pub enum WindowData {
    /// Spikes in `[start_s, end_s)`, in arrival order.
    Spikes {
        /// Times, seconds. Shape `[events]`.
        times: Vec<f64>,
        /// Unit ids, parallel to `times`; index into `names`.
        units: Vec<u32>,
        /// Name of every unit id the source has announced.
        names: Arc<[Arc<str>]>,
    },
    /// Sensor samples.
    Samples {
        /// Stream index of the first sample.
        start_sample: u64,
        /// Channels per sample.
        channels: usize,
        /// Nominal sampling rate, Hz.
        rate_hz: f64,
        /// Sample-major values, shape `[length_samples, channels]`; NaN where missing.
        values: Vec<f64>,
    },
}

/// A window ready for its stages.
#[derive(Clone, Debug)]
pub struct Window {
    /// Name of the window definition (`[windows.<name>]`).
    pub window: Arc<str>,
    /// Name of the source.
    pub source: Arc<str>,
    /// Window index `k`.
    pub index: u64,
    /// Start, seconds (inclusive).
    pub start_s: f64,
    /// End, seconds (exclusive).
    pub end_s: f64,
    /// False when emitted at the end of the input or at a restart before the watermark
    /// passed its end.
    pub complete: bool,
    /// True for a **preview**: a window still open, holding the events received so far, sent
    /// only to stages that asked for previews ([`crate::live::stage::Stage::wants_previews`]) so
    /// they can prepare for its close. Previews produce no result and are not counted in the
    /// windows metric; the window itself is emitted later as usual.
    pub preview: bool,
    /// Late events rejected by this window definition so far.
    pub late: u64,
    /// Events the source has dropped so far.
    pub dropped: u64,
    /// Events refused as out of range so far: by the source's event clock (absurd times,
    /// isolated strays ahead) and by this window definition (a window index too large).
    pub out_of_range: u64,
    /// Repeats of a wire message already received, counted once, so far (the source's).
    pub duplicate: u64,
    /// Events this window definition refused so far because its open windows already held
    /// `max_open_events` ([`SpikeWindower::with_max_open_events`]).
    pub overflow: u64,
    /// The gap in event time this window overlaps (then `complete` is false); `None` when
    /// none.
    pub gap: Option<Gap>,
    /// The source's epoch: 0, then one more at each restart (a confirmed jump back, a new
    /// session), so window indices that start again are told apart.
    pub epoch: u32,
    /// The run that emitted the window ([`crate::live::RunSummary::run_id`]); empty outside
    /// a pipeline.
    pub run_id: Arc<str>,
    /// When the record that closed the window was taken off the ring.
    pub closed_at: Instant,
    /// The data.
    pub data: WindowData,
}

/// Why a window lacks part of its interval: its `gap` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GapKind {
    /// Event time jumped ahead by more than the source's `gap_s` (confirmed): the source went
    /// silent while its clock ran on, or its clock jumped.
    Jump,
    /// Event time jumped back (a publisher restart): the window was cut off.
    Restart,
    /// The publisher's connection was lost: events may be missing from the window.
    Disconnected,
    /// Sensor samples: a run of missing samples longer than the window.
    Samples,
    /// Events in `start_s..=end_s` were refused because the open windows already held
    /// `max_open_events` (counted `overflow`).
    Overflow,
}

/// A gap in event time ([`Window::gap`]): no events between `start_s` and `end_s`, and some
/// may be missing. For a restart, `start_s` is the last time before it and `end_s` the first
/// time after it (earlier: the clock started again).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// Why.
    pub kind: GapKind,
    /// Seconds: the last event time before the gap.
    pub start_s: f64,
    /// Seconds: the first event time after the gap.
    pub end_s: f64,
}

/// The default bound on the events a spike window definition's open windows hold together
/// (`[windows.*] max_open_events`): 4,194,304 events, 64 MiB of buffer (16 bytes an event);
/// a window handed to a stage holds at most this many (12 bytes an event).
pub const DEFAULT_MAX_OPEN_EVENTS: usize = 1 << 22;

/// Times at or above this (seconds; about 31,700 years) are out of range ([`EventClock`]).
pub const MAX_EVENT_TIME_S: f64 = 1e12;

/// Window indices `t / hop` at or above this are out of range (exact in `f64` below it).
const MAX_INDEX: f64 = 4_503_599_627_370_496.0; // 2^52

impl Window {
    /// Number of events (spikes) or samples.
    #[must_use]
    pub fn events(&self) -> usize {
        match &self.data {
            WindowData::Spikes { times, .. } => times.len(),
            WindowData::Samples {
                values, channels, ..
            } => values.len() / (*channels).max(1),
        }
    }
}

/// Names and counters common to both windowers.
struct Common {
    window: Arc<str>,
    source: Arc<str>,
    late: u64,
    out_of_range: u64,
    overflow: u64,
    metrics: WindowMetrics,
}

impl Common {
    fn new(window: &str, source: &str) -> Self {
        Self {
            window: window.into(),
            source: source.into(),
            late: 0,
            out_of_range: 0,
            overflow: 0,
            metrics: WindowMetrics::new(window, source),
        }
    }

    /// A window closed at `closed_at` (before its data was gathered), counted in the windows
    /// metric.
    fn close(
        &self,
        index: u64,
        (start_s, end_s): (f64, f64),
        (complete, gap): (bool, Option<Gap>),
        dropped: u64,
        closed_at: Instant,
        data: WindowData,
    ) -> Window {
        self.metrics.windows.increment(1);
        Window {
            window: self.window.clone(),
            source: self.source.clone(),
            index,
            start_s,
            end_s,
            complete: complete && gap.is_none(),
            preview: false,
            late: self.late,
            dropped,
            out_of_range: self.out_of_range,
            duplicate: 0,
            overflow: self.overflow,
            gap,
            epoch: 0,
            run_id: Arc::from(""),
            closed_at,
            data,
        }
    }
}

/// Time-based sliding windows over spikes.
///
/// With previews on ([`SpikeWindower::with_previews`]), each time the watermark passes a
/// multiple of the preview step (the hop, or a 64th of the length if that is longer: at most
/// about 64 previews per window) without closing a window, and the next window to close does not follow
/// the last emitted one (the first window of a stream, after a restart or a gap), the windower
/// also emits a preview of that window: its events so far, marked [`Window::preview`]. A stage
/// that keeps state across consecutive windows (the episode stage's level-2 chains) warms it on
/// the previews, so the first full window is not counted from scratch.
pub struct SpikeWindower {
    c: Common,
    length_s: f64,
    hop_s: f64,
    lateness_s: f64,
    next: Option<u64>,
    buf: Vec<(f64, u32)>,
    max_t: f64,
    closed_end: f64,
    previews: bool,
    /// Index of the last window emitted (not previewed) since the last reset.
    last_emitted: Option<u64>,
    /// `floor(watermark / preview step)` at the last preview check.
    preview_tick: f64,
    /// Gaps in event time that windows still to emit may overlap ([`SpikeWindower::gap`]),
    /// and the spans of events refused as overflow ([`GapKind::Overflow`]).
    gaps: Vec<Gap>,
    /// The most events the open windows hold together ([`Self::with_max_open_events`]).
    max_open: usize,
}

impl std::fmt::Debug for SpikeWindower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpikeWindower")
            .field("window", &self.c.window)
            .field("length_s", &self.length_s)
            .field("hop_s", &self.hop_s)
            .finish_non_exhaustive()
    }
}

impl SpikeWindower {
    /// Windows of `length_s` every `hop_s` seconds, closing `lateness_s` after their end.
    ///
    /// # Panics
    /// If `length_s` or `hop_s` is not positive and finite or `lateness_s` is negative
    /// (configuration validation rejects these first).
    #[must_use]
    pub fn new(window: &str, source: &str, length_s: f64, hop_s: f64, lateness_s: f64) -> Self {
        assert!(
            length_s.is_finite() && length_s > 0.0,
            "length_s {length_s}"
        );
        assert!(hop_s.is_finite() && hop_s > 0.0, "hop_s {hop_s}");
        assert!(
            lateness_s.is_finite() && lateness_s >= 0.0,
            "lateness {lateness_s}"
        );
        Self {
            c: Common::new(window, source),
            length_s,
            hop_s,
            lateness_s,
            next: None,
            buf: Vec::new(),
            max_t: f64::NEG_INFINITY,
            closed_end: f64::NEG_INFINITY,
            previews: false,
            last_emitted: None,
            preview_tick: f64::NEG_INFINITY,
            gaps: Vec::new(),
            max_open: DEFAULT_MAX_OPEN_EVENTS,
        }
    }

    /// Bounds the events the open windows hold together at `n` (at least 1; default
    /// [`DEFAULT_MAX_OPEN_EVENTS`]). When they hold `n` and an event arrives that closes no
    /// window, the event is refused and counted ([`Self::overflow`], the
    /// `synfire_window_overflow_total` metric, each later window's `overflow`), and every
    /// window containing its time is emitted incomplete with a gap of kind
    /// [`GapKind::Overflow`]. The event's time still moves the watermark, so windows keep
    /// closing (and the buffer emptying) when event time advances.
    #[must_use]
    pub fn with_max_open_events(mut self, n: usize) -> Self {
        self.max_open = n.max(1);
        self
    }

    /// Events refused so far because the open windows were full
    /// ([`Self::with_max_open_events`]).
    #[must_use]
    pub fn overflow(&self) -> u64 {
        self.c.overflow
    }

    /// Turns previews on or off (off by default; see [`SpikeWindower`]).
    #[must_use]
    pub fn with_previews(mut self, on: bool) -> Self {
        self.previews = on;
        self
    }

    fn start(&self, k: u64) -> f64 {
        k as f64 * self.hop_s
    }

    fn end(&self, k: u64) -> f64 {
        self.start(k) + self.length_s
    }

    /// Whether time `t` has a window index below 2⁵² (where indices and window bounds are
    /// exact enough): finite, ≥ 0, `t / hop < 2⁵²`.
    fn in_range(&self, t: f64) -> bool {
        t.is_finite() && t >= 0.0 && t / self.hop_s < MAX_INDEX
    }

    /// The first window containing time `t` (in range: [`Self::in_range`]). The index is
    /// clamped below 2⁵², and each correction loop runs a bounded number of steps, so no time
    /// can make it spin.
    fn first_window_of(&self, t: f64) -> u64 {
        let k = ((t - self.length_s) / self.hop_s).floor() + 1.0;
        let mut k = if k > 0.0 { k.min(MAX_INDEX) as u64 } else { 0 };
        // Guard the float division at the boundaries.
        for _ in 0..64 {
            if k > 0 && self.end(k - 1) > t {
                k -= 1;
            } else {
                break;
            }
        }
        for _ in 0..64 {
            if self.end(k) <= t && (k as f64) < MAX_INDEX {
                k += 1;
            } else {
                break;
            }
        }
        k
    }

    /// Late events rejected so far.
    #[must_use]
    pub fn late(&self) -> u64 {
        self.c.late
    }

    /// The window definition's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.c.window
    }

    /// Events held by windows still open.
    #[must_use]
    pub fn open_events(&self) -> usize {
        self.buf.len()
    }

    /// Events this window definition refused as out of range so far (a window index at or
    /// above 2⁵²; the event clock refuses the rest before any window sees them).
    #[must_use]
    pub fn out_of_range(&self) -> u64 {
        self.c.out_of_range
    }

    /// Declares a gap in event time: every window overlapping `gap.start_s..gap.end_s` (an
    /// open interval) is emitted incomplete, carrying it. The next events (after the gap) are
    /// pushed as usual.
    pub fn gap(&mut self, gap: Gap) {
        if gap.end_s > gap.start_s && gap.end_s > self.closed_end {
            self.gaps.push(gap);
        }
    }

    /// The gap window `k` overlaps, if any.
    fn gap_of(&self, k: u64) -> Option<Gap> {
        let (start, end) = (self.start(k), self.end(k));
        self.gaps
            .iter()
            .find(|g| {
                // An overflow span is closed (`start_s..=end_s`, possibly one instant).
                g.start_s < end
                    && (g.end_s > start || (g.kind == GapKind::Overflow && g.end_s >= start))
            })
            .copied()
    }

    /// Adds spike (`t_s`, `unit`); appends the windows it closes to `out`.
    pub fn push(
        &mut self,
        t_s: f64,
        unit: u32,
        names: &Arc<[Arc<str>]>,
        dropped: u64,
        out: &mut Vec<Window>,
    ) {
        if !self.in_range(t_s) {
            self.c.out_of_range += 1;
            self.c.metrics.out_of_range.increment(1);
            return;
        }
        if t_s < self.closed_end {
            self.c.late += 1;
            self.c.metrics.late.increment(1);
            return;
        }
        if self.buf.len() >= self.max_open {
            // Full: the event's time may still close windows and make room.
            self.advance(t_s, names, dropped, out);
            if self.buf.len() >= self.max_open {
                self.refuse_overflow(t_s);
                return;
            }
        }
        let first = self.first_window_of(t_s);
        match self.next {
            None => self.next = Some(first),
            // `first` is after every emitted window: `t_s ≥ closed_end`.
            Some(k) if first < k => self.next = Some(first),
            _ => {}
        }
        self.buf.push((t_s, unit));
        self.advance(t_s, names, dropped, out);
    }

    /// Moves the newest time to `t_s` if it is later, emitting the windows the watermark
    /// closes (and a preview when one is due).
    fn advance(&mut self, t_s: f64, names: &Arc<[Arc<str>]>, dropped: u64, out: &mut Vec<Window>) {
        if t_s > self.max_t {
            self.max_t = t_s;
            let watermark = self.max_t - self.lateness_s;
            let before = out.len();
            while let Some(k) = self.next {
                if self.end(k) > watermark {
                    break;
                }
                self.emit(k, true, names, dropped, out);
            }
            if self.previews {
                self.maybe_preview(watermark, out.len() > before, names, dropped, out);
            }
            self.c
                .metrics
                .lag
                .set((self.max_t - self.closed_end).max(0.0));
        }
    }

    /// Counts an event at `t_s` refused because the open windows are full, and marks the
    /// windows containing `t_s` incomplete (an overflow span, merged with the last one when
    /// within a window's length of it).
    fn refuse_overflow(&mut self, t_s: f64) {
        if self.c.overflow == 0 {
            tracing::warn!(
                window = %self.c.window,
                max_open_events = self.max_open,
                t_s,
                "The open windows are full: events are refused (counted as overflow) and their windows marked incomplete."
            );
        }
        self.c.overflow += 1;
        self.c.metrics.overflow.increment(1);
        if let Some(g) = self.gaps.last_mut()
            && g.kind == GapKind::Overflow
            && t_s >= g.start_s - self.length_s
            && t_s <= g.end_s + self.length_s
        {
            g.start_s = g.start_s.min(t_s);
            g.end_s = g.end_s.max(t_s);
            return;
        }
        self.gaps.push(Gap {
            kind: GapKind::Overflow,
            start_s: t_s,
            end_s: t_s,
        });
    }

    /// Emits a preview of the next window when the watermark has passed a multiple of the
    /// preview step since the last check, no window closed now, and the next window does not follow the
    /// last emitted one (consecutive windows need no preview: the previous one serves).
    fn maybe_preview(
        &mut self,
        watermark: f64,
        emitted: bool,
        names: &Arc<[Arc<str>]>,
        dropped: u64,
        out: &mut Vec<Window>,
    ) {
        let tick = (watermark / self.hop_s.max(self.length_s / 64.0)).floor();
        if tick <= self.preview_tick {
            return;
        }
        self.preview_tick = tick;
        let Some(k) = self.next else { return };
        if emitted
            || self
                .last_emitted
                .is_some_and(|last| last.checked_add(1) == Some(k))
        {
            return;
        }
        let (start, end) = (self.start(k), self.end(k));
        let (times, units): (Vec<f64>, Vec<u32>) = self
            .buf
            .iter()
            .filter(|&&(t, _)| t >= start && t < end)
            .copied()
            .unzip();
        if times.is_empty() {
            return;
        }
        out.push(Window {
            window: self.c.window.clone(),
            source: self.c.source.clone(),
            index: k,
            start_s: start,
            end_s: end,
            complete: false,
            preview: true,
            late: self.c.late,
            dropped,
            out_of_range: self.c.out_of_range,
            duplicate: 0,
            overflow: self.c.overflow,
            gap: self.gap_of(k),
            epoch: 0,
            run_id: Arc::from(""),
            closed_at: Instant::now(),
            data: WindowData::Spikes {
                times,
                units,
                names: names.clone(),
            },
        });
    }

    /// Emits window `k` if it holds events, then moves on to the next window that can.
    fn emit(
        &mut self,
        k: u64,
        complete: bool,
        names: &Arc<[Arc<str>]>,
        dropped: u64,
        out: &mut Vec<Window>,
    ) {
        let closed_at = Instant::now();
        let (start, end) = (self.start(k), self.end(k));
        let mut times = Vec::new();
        let mut units = Vec::new();
        for &(t, u) in &self.buf {
            if t >= start && t < end {
                times.push(t);
                units.push(u);
            }
        }
        self.closed_end = end;
        if !times.is_empty() {
            self.last_emitted = Some(k);
            let gap = self.gap_of(k);
            out.push(self.c.close(
                k,
                (start, end),
                (complete, gap),
                dropped,
                closed_at,
                WindowData::Spikes {
                    times,
                    units,
                    names: names.clone(),
                },
            ));
        }
        // Keep what later windows need; skip windows that would be empty.
        let next_start = self.start(k + 1);
        self.buf.retain(|&(t, _)| t >= next_start);
        self.gaps.retain(|g| g.end_s >= next_start);
        let earliest = self
            .buf
            .iter()
            .map(|&(t, _)| t)
            .fold(f64::INFINITY, f64::min);
        self.next = Some(if earliest.is_finite() {
            self.first_window_of(earliest).max(k + 1)
        } else {
            // Nothing buffered: the next event decides; never reopen closed windows.
            k + 1
        });
        if !earliest.is_finite() {
            self.next = None;
        }
    }

    /// Emits every open window that holds events, marked incomplete, and starts afresh
    /// (end of input, or a publisher restart).
    pub fn flush(&mut self, names: &Arc<[Arc<str>]>, dropped: u64, out: &mut Vec<Window>) {
        self.flush_at(None, names, dropped, out);
    }

    /// [`Self::flush`] at a restart: windows ending after `restart.start_s` (the last time
    /// before it) carry it as their gap.
    pub fn restart(
        &mut self,
        restart: Gap,
        names: &Arc<[Arc<str>]>,
        dropped: u64,
        out: &mut Vec<Window>,
    ) {
        self.flush_at(Some(restart), names, dropped, out);
    }

    fn flush_at(
        &mut self,
        restart: Option<Gap>,
        names: &Arc<[Arc<str>]>,
        dropped: u64,
        out: &mut Vec<Window>,
    ) {
        if let Some(g) = restart {
            // Open as an interval from the last time on, so every window ending after it
            // overlaps.
            self.gaps.push(Gap {
                end_s: f64::INFINITY,
                ..g
            });
        }
        while let Some(k) = self.next {
            if self.buf.is_empty() {
                break;
            }
            let complete = self.end(k) <= self.max_t - self.lateness_s;
            let n = out.len();
            self.emit(k, complete, names, dropped, out);
            if let (Some(g), Some(w)) = (restart, out.get_mut(n))
                && w.gap.is_some()
            {
                w.gap = Some(g);
            }
        }
        self.reset();
    }

    /// Discards open windows (shutdown) and starts afresh; returns how many events they held.
    pub fn discard(&mut self) -> usize {
        let n = self.buf.len();
        self.reset();
        n
    }

    fn reset(&mut self) {
        self.next = None;
        self.buf.clear();
        self.max_t = f64::NEG_INFINITY;
        self.closed_end = f64::NEG_INFINITY;
        self.last_emitted = None;
        self.preview_tick = f64::NEG_INFINITY;
        self.gaps.clear();
    }
}

/// The rules of a source's event clock ([`EventClock`]; module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockRules {
    /// A time more than this many seconds after the newest is a jump-ahead candidate
    /// (`None`: times ahead are accepted at once).
    pub gap_s: Option<f64>,
    /// A time more than this many seconds before the newest is a jump-back (restart)
    /// candidate (`None`: never a restart from times; such a time is passed on, and windows
    /// count it late).
    pub restart_gap_s: Option<f64>,
    /// Consecutive candidates that confirm a jump (≥ 1; 1 confirms at once).
    pub confirm_events: u32,
}

impl Default for ClockRules {
    /// Only the range check: no jump is held or confirmed (archives: their times are the
    /// file's, sorted).
    fn default() -> Self {
        Self {
            gap_s: None,
            restart_gap_s: None,
            confirm_events: 1,
        }
    }
}

/// What the event clock passes on, in order ([`EventClock::spike`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Clocked {
    /// A spike: time (seconds), unit id.
    Spike(f64, u32),
    /// A confirmed jump ahead: windows overlapping it are incomplete.
    Gap(Gap),
    /// A confirmed jump back: windows restart (flushed, a new epoch).
    Restart(Gap),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Ahead,
    Back,
}

/// A source's event clock: refuses out-of-range times, holds candidate jumps until
/// confirmed, refuses isolated strays ahead (module docs: the rule).
#[derive(Debug)]
pub struct EventClock {
    rules: ClockRules,
    /// Newest accepted time of this epoch (−∞: none yet).
    newest: f64,
    held: Vec<(f64, u32)>,
    direction: Direction,
    out_of_range: u64,
    epoch: u32,
    /// The connection to the publisher was lost since the newest time: the next time after
    /// it ends a gap.
    disconnected: bool,
}

impl EventClock {
    /// A clock by `rules` (`confirm_events` 0 counts as 1).
    #[must_use]
    pub fn new(rules: ClockRules) -> Self {
        Self {
            rules,
            newest: f64::NEG_INFINITY,
            held: Vec::new(),
            direction: Direction::Ahead,
            out_of_range: 0,
            epoch: 0,
            disconnected: false,
        }
    }

    /// The source lost its connection to the publisher ([`crate::record::Record::Disconnected`]):
    /// if the next time accepted is after the newest, the interval between them is a gap of
    /// kind [`GapKind::Disconnected`], however short.
    pub fn disconnected(&mut self) {
        if self.newest > f64::NEG_INFINITY {
            self.disconnected = true;
        }
    }

    /// Spikes refused as out of range so far (absurd times, isolated strays ahead).
    #[must_use]
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range
    }

    /// The epoch: 0, then one more per restart (confirmed or signalled).
    #[must_use]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// Spikes held as candidates of a jump, not yet passed on.
    #[must_use]
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Judges spike (`t_s`, `unit`); appends what to pass on, in order, to `out`.
    pub fn spike(&mut self, t_s: f64, unit: u32, out: &mut Vec<Clocked>) {
        if !(t_s.is_finite() && (0.0..MAX_EVENT_TIME_S).contains(&t_s)) {
            self.out_of_range += 1;
            return;
        }
        if self.newest == f64::NEG_INFINITY {
            self.newest = t_s;
            out.push(Clocked::Spike(t_s, unit));
            return;
        }
        let direction = if self.rules.gap_s.is_some_and(|g| t_s > self.newest + g) {
            Some(Direction::Ahead)
        } else if self
            .rules
            .restart_gap_s
            .is_some_and(|g| t_s < self.newest - g)
        {
            Some(Direction::Back)
        } else {
            None
        };
        let Some(direction) = direction else {
            self.release(out);
            if std::mem::take(&mut self.disconnected) && t_s > self.newest {
                out.push(Clocked::Gap(Gap {
                    kind: GapKind::Disconnected,
                    start_s: self.newest,
                    end_s: t_s,
                }));
            }
            self.newest = self.newest.max(t_s);
            out.push(Clocked::Spike(t_s, unit));
            return;
        };
        if !self.held.is_empty() && !self.consistent(direction, t_s) {
            self.release(out);
        }
        self.direction = direction;
        self.held.push((t_s, unit));
        if self.held.len() >= self.rules.confirm_events.max(1) as usize {
            self.disconnected = false;
            let first = self.held.iter().map(|h| h.0).fold(f64::INFINITY, f64::min);
            let last = self.held.iter().map(|h| h.0).fold(self.newest, f64::max);
            let gap = |kind| Gap {
                kind,
                start_s: self.newest,
                end_s: first,
            };
            match direction {
                Direction::Ahead => {
                    tracing::warn!(
                        from_s = self.newest,
                        to_s = first,
                        "Event time jumped ahead (confirmed): windows across the gap are marked incomplete."
                    );
                    out.push(Clocked::Gap(gap(GapKind::Jump)));
                    self.newest = last;
                }
                Direction::Back => {
                    tracing::info!(
                        from_s = self.newest,
                        to_s = first,
                        "Event time went back (confirmed): the publisher restarted; windows start afresh."
                    );
                    out.push(Clocked::Restart(gap(GapKind::Restart)));
                    self.epoch += 1;
                    self.newest = self.held.iter().map(|h| h.0).fold(first, f64::max);
                }
            }
            out.extend(self.held.drain(..).map(|(t, u)| Clocked::Spike(t, u)));
        }
    }

    /// Whether `t_s` confirms the candidates held (same direction, near them).
    fn consistent(&self, direction: Direction, t_s: f64) -> bool {
        if direction != self.direction {
            return false;
        }
        let min = self.held.iter().map(|h| h.0).fold(f64::INFINITY, f64::min);
        let max = self
            .held
            .iter()
            .map(|h| h.0)
            .fold(f64::NEG_INFINITY, f64::max);
        match direction {
            Direction::Ahead => t_s >= min - self.rules.gap_s.unwrap_or(0.0),
            Direction::Back => {
                let g = self.rules.restart_gap_s.unwrap_or(0.0);
                t_s >= min - g && t_s <= max + g
            }
        }
    }

    /// Ends a hold unconfirmed: strays ahead are refused (counted), strays back passed on.
    fn release(&mut self, out: &mut Vec<Clocked>) {
        if self.held.is_empty() {
            return;
        }
        match self.direction {
            Direction::Ahead => {
                tracing::warn!(
                    events = self.held.len(),
                    newest_s = self.newest,
                    first_s = self.held[0].0,
                    "Isolated spikes far ahead of the stream refused (counted as out_of_range)."
                );
                self.out_of_range += self.held.len() as u64;
                self.held.clear();
            }
            Direction::Back => out.extend(self.held.drain(..).map(|(t, u)| Clocked::Spike(t, u))),
        }
    }

    /// The source signalled a restart (a new session) or ended: a hold ends unconfirmed.
    /// With `restart`, the clock starts a new epoch.
    pub fn end_epoch(&mut self, restart: bool, out: &mut Vec<Clocked>) {
        self.release(out);
        if restart {
            self.disconnected = false;
            self.newest = f64::NEG_INFINITY;
            self.epoch += 1;
        }
    }
}

/// Sample-based sliding windows over one sensor stream.
pub struct SensorWindower {
    c: Common,
    length: u64,
    hop: u64,
    /// Shape of the stream (channels, rate) once known.
    shape: Option<(usize, f64)>,
    /// Stream index of `values[0]`.
    base: u64,
    /// Stream index of the next expected sample.
    next_sample: u64,
    values: std::collections::VecDeque<f64>,
    times: std::collections::VecDeque<f64>,
    next_window: u64,
    /// NaN samples inserted for gaps.
    missing: u64,
    /// The gap the windows being flushed carry (a run of missing samples longer than a window).
    flushing_gap: Option<Gap>,
}

impl std::fmt::Debug for SensorWindower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SensorWindower")
            .field("window", &self.c.window)
            .field("length", &self.length)
            .field("hop", &self.hop)
            .finish_non_exhaustive()
    }
}

impl SensorWindower {
    /// Windows of `length` samples every `hop` samples.
    ///
    /// # Panics
    /// If `length` or `hop` is zero (configuration validation rejects these first).
    #[must_use]
    pub fn new(window: &str, source: &str, length: u64, hop: u64) -> Self {
        assert!(length > 0 && hop > 0, "length {length}, hop {hop}");
        Self {
            c: Common::new(window, source),
            length,
            hop,
            shape: None,
            base: 0,
            next_sample: 0,
            values: std::collections::VecDeque::new(),
            times: std::collections::VecDeque::new(),
            next_window: 0,
            missing: 0,
            flushing_gap: None,
        }
    }

    /// Late samples rejected so far.
    #[must_use]
    pub fn late(&self) -> u64 {
        self.c.late
    }

    /// The window definition's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.c.window
    }

    /// Samples held by windows still open.
    #[must_use]
    pub fn open_samples(&self) -> usize {
        self.times.len()
    }

    /// Samples refused as out of range so far (indices that would overflow).
    #[must_use]
    pub fn out_of_range(&self) -> u64 {
        self.c.out_of_range
    }

    /// Samples filled with NaN for gaps so far.
    #[must_use]
    pub fn missing(&self) -> u64 {
        self.missing
    }

    /// Adds a frame; appends the windows it completes to `out`.
    pub fn push(&mut self, frame: &SensorFrame, dropped: u64, out: &mut Vec<Window>) {
        let shape = (frame.channels, frame.rate_hz);
        if self.shape.is_some_and(|s| s != shape) {
            tracing::warn!(window = %self.c.window, "The sensor stream changed its channels or rate; windows restart.");
            self.flush(dropped, out);
        }
        let ch = frame.channels;
        let n = frame.samples() as u64;
        if frame
            .first_sample
            .checked_add(n)
            .is_none_or(|e| e as f64 >= MAX_INDEX)
        {
            // Sample indices that would overflow: refused, counted.
            self.c.out_of_range += n;
            return;
        }
        if self.shape.is_some()
            && frame.first_sample > self.next_sample
            && frame.first_sample - self.next_sample > self.length
        {
            // Longer than a window: emit the open windows with the gap and start afresh at the
            // frame, instead of filling every window of the gap with NaN.
            let last = self.times.back().map_or(frame.t0_s, |&t| {
                t + self.shape.map_or(0.0, |(_, rate)| 1.0 / rate)
            });
            self.flushing_gap = Some(Gap {
                kind: GapKind::Samples,
                start_s: last,
                end_s: frame.t0_s,
            });
            self.missing += frame.first_sample - self.next_sample;
            self.flush(dropped, out);
            self.flushing_gap = None;
        }
        if self.shape.is_none() {
            self.shape = Some(shape);
            // The first window containing the frame's first sample.
            let s = frame.first_sample;
            let k = if s < self.length {
                0
            } else {
                (s - self.length) / self.hop + 1
            };
            self.next_window = k;
            self.base = k * self.hop;
            self.next_sample = self.base;
        }
        let mut skip = 0u64;
        if frame.first_sample < self.next_sample {
            skip = (self.next_sample - frame.first_sample).min(n);
            self.c.late += skip;
            self.c.metrics.late.increment(skip);
        } else if frame.first_sample > self.next_sample {
            let gap = frame.first_sample - self.next_sample;
            self.missing += gap;
            for g in 0..gap {
                let t = frame.t0_s - (gap - g) as f64 / frame.rate_hz;
                self.times.push_back(t);
                self.values.extend(std::iter::repeat_n(f64::NAN, ch));
            }
            self.next_sample = frame.first_sample;
        }
        for k in skip..n {
            let k = k as usize;
            self.times.push_back(frame.t0_s + k as f64 / frame.rate_hz);
            self.values
                .extend(frame.values[k * ch..(k + 1) * ch].iter().copied());
        }
        self.next_sample = self.next_sample.max(frame.first_sample + n);
        while self.next_window * self.hop + self.length <= self.next_sample {
            self.emit(true, dropped, out);
        }
    }

    fn emit(&mut self, complete: bool, dropped: u64, out: &mut Vec<Window>) {
        let closed_at = Instant::now();
        let Some((ch, rate)) = self.shape else {
            return;
        };
        let start = self.next_window * self.hop;
        let from = (start - self.base) as usize;
        let available = self.times.len().saturating_sub(from);
        let len = (self.length as usize).min(available);
        if len > 0 {
            let values: Vec<f64> = self
                .values
                .range(from * ch..(from + len) * ch)
                .copied()
                .collect();
            let start_s = self.times[from];
            let end_s = self.times[from + len - 1] + 1.0 / rate;
            out.push(self.c.close(
                self.next_window,
                (start_s, end_s),
                (complete, self.flushing_gap),
                dropped,
                closed_at,
                WindowData::Samples {
                    start_sample: start,
                    channels: ch,
                    rate_hz: rate,
                    values,
                },
            ));
        }
        self.next_window += 1;
        let keep_from = (self.next_window * self.hop).min(self.next_sample);
        let drop = ((keep_from - self.base) as usize).min(self.times.len());
        self.times.drain(..drop);
        self.values.drain(..drop * ch);
        self.base += drop as u64;
    }

    /// Emits the partial windows that hold samples, marked incomplete, and starts afresh.
    pub fn flush(&mut self, dropped: u64, out: &mut Vec<Window>) {
        while self.shape.is_some() && self.next_window * self.hop < self.next_sample {
            self.emit(false, dropped, out);
        }
        self.discard();
    }

    /// Discards open windows; returns how many samples they held.
    pub fn discard(&mut self) -> usize {
        let n = self.times.len();
        self.shape = None;
        self.values.clear();
        self.times.clear();
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(n: usize) -> Arc<[Arc<str>]> {
        (0..n).map(|i| Arc::from(i.to_string())).collect()
    }

    fn run(w: &mut SpikeWindower, events: &[(f64, u32)]) -> Vec<Window> {
        let names = names(4);
        let mut out = Vec::new();
        for &(t, u) in events {
            w.push(t, u, &names, 0, &mut out);
        }
        w.flush(&names, 0, &mut out);
        out
    }

    fn times(w: &Window) -> Vec<f64> {
        match &w.data {
            WindowData::Spikes { times, .. } => times.clone(),
            WindowData::Samples { .. } => Vec::new(),
        }
    }

    #[test]
    fn sliding_windows_hold_exactly_their_half_open_interval() {
        let mut w = SpikeWindower::new("w", "s", 2.0, 1.0, 0.0);
        let ev: Vec<(f64, u32)> = [0.5, 1.0, 1.5, 2.0, 3.9, 4.0]
            .iter()
            .map(|&t| (t, 0))
            .collect();
        let out = run(&mut w, &ev);
        let got: Vec<(f64, f64, Vec<f64>, bool)> = out
            .iter()
            .map(|w| (w.start_s, w.end_s, times(w), w.complete))
            .collect();
        assert_eq!(
            got,
            vec![
                (0.0, 2.0, vec![0.5, 1.0, 1.5], true),
                (1.0, 3.0, vec![1.0, 1.5, 2.0], true),
                (2.0, 4.0, vec![2.0, 3.9], true),
                (3.0, 5.0, vec![3.9, 4.0], false),
                (4.0, 6.0, vec![4.0], false),
            ]
        );
    }

    #[test]
    fn late_events_are_counted_and_rejected() {
        let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, 0.5);
        let out = run(
            &mut w,
            &[(0.2, 0), (1.2, 0), (0.9, 1), (1.6, 0), (0.95, 2), (1.7, 0)],
        );
        // 0.9 arrives within the lateness (watermark 0.7 < 1.0); 0.95 after window 0 closed.
        assert_eq!(times(&out[0]), vec![0.2, 0.9]);
        assert_eq!(w.late(), 1);
        assert_eq!(out[1].late, 1);
    }

    #[test]
    fn a_frozen_clock_fills_the_bound_and_the_rest_is_counted_as_overflow() {
        // Event time stops advancing: 10,000 spikes at 0.5 s, then time moves on.
        let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, 0.0).with_max_open_events(1000);
        let mut ev: Vec<(f64, u32)> = vec![(0.5, 0); 10_000];
        ev.extend((0..50).map(|i| (1.0 + f64::from(i) * 0.02, 1)));
        ev.push((2.5, 0));
        let out = run(&mut w, &ev);
        assert_eq!(w.open_events(), 0);
        assert_eq!(w.overflow(), 9000);
        // Window 0 holds the bound and is incomplete, carrying the overflow span; window 1
        // (the buffer emptied when window 0 closed) is complete.
        assert_eq!(out[0].events(), 1000);
        assert!(!out[0].complete);
        assert_eq!(
            out[0].gap,
            Some(Gap {
                kind: GapKind::Overflow,
                start_s: 0.5,
                end_s: 0.5
            })
        );
        assert_eq!(out[1].events(), 50);
        assert!(out[1].complete, "{:?}", out[1].gap);
        assert_eq!(out[1].overflow, 9000);
        let held: usize = out.iter().map(Window::events).sum();
        assert_eq!(held as u64 + w.overflow(), ev.len() as u64);
    }

    #[test]
    fn a_full_buffer_still_closes_windows_when_time_advances() {
        // The bound is reached inside window 0; a spike in window 1 closes window 0 and is
        // taken, not refused.
        let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, 0.0).with_max_open_events(3);
        let out = run(&mut w, &[(0.1, 0), (0.2, 0), (0.3, 0), (1.5, 0), (1.6, 0)]);
        assert_eq!(w.overflow(), 0);
        assert_eq!(times(&out[0]), vec![0.1, 0.2, 0.3]);
        assert!(out[0].complete);
        assert_eq!(times(&out[1]), vec![1.5, 1.6]);
    }

    #[test]
    fn max_open_events_is_checked() {
        let w = |max: Option<usize>, spikes: bool| WindowConfig {
            name: "w".into(),
            source: "s".into(),
            length_s: spikes.then_some(1.0),
            hop_s: spikes.then_some(1.0),
            allowed_lateness_s: None,
            max_open_events: max,
            length_samples: (!spikes).then_some(10),
            hop_samples: (!spikes).then_some(10),
        };
        let fields = |c: WindowConfig, kind| -> Vec<String> {
            c.validate(kind).iter().map(|e| e.field.clone()).collect()
        };
        assert!(fields(w(Some(10), true), StreamKind::Spikes).is_empty());
        assert_eq!(
            fields(w(Some(0), true), StreamKind::Spikes),
            ["max_open_events"]
        );
        assert_eq!(
            fields(w(Some(10), false), StreamKind::Sensor),
            ["max_open_events"]
        );
        let Windower::Spikes(sw) = w(Some(7), true).windower("w", "s", StreamKind::Spikes, false)
        else {
            panic!("spike windows");
        };
        assert_eq!(sw.max_open, 7);
    }

    #[test]
    fn empty_windows_are_skipped() {
        let mut w = SpikeWindower::new("w", "s", 1.0, 0.5, 0.0);
        let out = run(&mut w, &[(0.1, 0), (100.2, 0), (200.0, 0)]);
        let starts: Vec<f64> = out.iter().map(|w| w.start_s).collect();
        assert_eq!(starts, vec![0.0, 99.5, 100.0, 199.5, 200.0]);
    }

    proptest! {
        /// Every accepted event lies in exactly the windows whose interval contains it, and
        /// the late count is exactly the number of rejected events.
        #[test]
        fn windows_equal_the_oracle(
            mut ts in proptest::collection::vec(0.0f64..50.0, 1..200),
            jitter in proptest::collection::vec(0.0f64..3.0, 200),
            length in 0.5f64..10.0,
            hop in 0.25f64..5.0,
            lateness in 0.0f64..2.0,
        ) {
            ts.sort_by(f64::total_cmp);
            // Arrival order: sorted, then some events delayed by up to 3 s of data time.
            let mut arrivals: Vec<(f64, f64)> = ts.iter().zip(&jitter).map(|(&t, &j)| (t + j, t)).collect();
            arrivals.sort_by(|a, b| a.0.total_cmp(&b.0));
            let events: Vec<(f64, u32)> = arrivals.iter().map(|&(_, t)| (t, 0)).collect();
            let mut w = SpikeWindower::new("w", "s", length, hop, lateness);
            // Replay while tracking which events were accepted (the oracle of lateness).
            let names = names(1);
            let mut out = Vec::new();
            let mut accepted = Vec::new();
            for &(t, u) in &events {
                let late_before = w.late();
                w.push(t, u, &names, 0, &mut out);
                if w.late() == late_before {
                    accepted.push(t);
                }
            }
            w.flush(&names, 0, &mut out);
            prop_assert_eq!(accepted.len() as u64 + w.late(), events.len() as u64);
            for win in &out {
                let mut want: Vec<f64> = accepted.iter().copied().filter(|&t| t >= win.start_s && t < win.end_s).collect();
                let mut got = times(win);
                want.sort_by(f64::total_cmp);
                got.sort_by(f64::total_cmp);
                prop_assert_eq!(got, want);
            }
            // Every non-empty window of an accepted event was emitted once, in order.
            let ks: Vec<u64> = out.iter().map(|w| w.index).collect();
            prop_assert!(ks.windows(2).all(|p| p[0] < p[1]));
            for &t in &accepted {
                let k = (t / hop).floor() as u64;
                if (k as f64) * hop <= t && t < (k as f64) * hop + length {
                    prop_assert!(ks.contains(&k), "event {} missing window {}", t, k);
                }
            }
        }
    }

    proptest! {
        /// With any bound, every event is in exactly one emitted window (tumbling windows),
        /// counted late, or counted overflow; a window that lost an event to the bound is
        /// incomplete; the open windows never hold more than the bound.
        #[test]
        fn bounded_windows_account_for_every_event(
            ts in proptest::collection::vec(0.0f64..20.0, 1..300),
            bound in 1usize..40,
            lateness in 0.0f64..1.0,
        ) {
            let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, lateness).with_max_open_events(bound);
            let names = names(1);
            let mut out = Vec::new();
            let mut refused = Vec::new();
            for &t in &ts {
                let before = w.overflow();
                w.push(t, 0, &names, 0, &mut out);
                prop_assert!(w.open_events() <= bound);
                if w.overflow() > before {
                    refused.push(t);
                }
            }
            w.flush(&names, 0, &mut out);
            let held: u64 = out.iter().map(|w| w.events() as u64).sum();
            prop_assert_eq!(held + w.late() + w.overflow(), ts.len() as u64);
            for win in &out {
                if refused.iter().any(|&t| t >= win.start_s && t < win.end_s) {
                    prop_assert!(!win.complete, "window {} lost events but is complete", win.index);
                }
            }
        }
    }

    #[test]
    fn absurd_times_never_hang_a_window_and_are_counted() {
        // Near u64 saturation of the window index, beyond it, and not numbers at all.
        for hop in [1.0, 0.1, 1e-3] {
            let mut w = SpikeWindower::new("w", "s", 2.0 * hop, hop, 0.0);
            let names = names(1);
            let mut out = Vec::new();
            let absurd = [
                9e18 / 0.1,
                1.8e19 * hop,
                f64::MAX,
                f64::INFINITY,
                f64::NAN,
                -1.0,
                MAX_INDEX * hop,
            ];
            w.push(1.0, 0, &names, 0, &mut out);
            for &t in &absurd {
                w.push(t, 0, &names, 0, &mut out);
            }
            w.push(1.5, 0, &names, 0, &mut out);
            assert_eq!(w.out_of_range(), absurd.len() as u64);
            // The largest time in range still gets a window that contains it.
            let t = (MAX_INDEX - 4.0) * hop;
            let k = w.first_window_of(t);
            assert!(
                w.start(k) <= t && t < w.end(k),
                "hop {hop}: {t} in window {k}"
            );
            w.flush(&names, 0, &mut out);
            assert!(out.iter().all(|x| x.start_s < 10.0));
        }
    }

    fn clock(gap_s: f64, restart_gap_s: f64, confirm: u32) -> EventClock {
        EventClock::new(ClockRules {
            gap_s: Some(gap_s),
            restart_gap_s: Some(restart_gap_s),
            confirm_events: confirm,
        })
    }

    /// Feeds `events` through `clock` into `w`, as the window thread does; returns the
    /// windows (flushed at the end).
    fn clocked(clock: &mut EventClock, w: &mut SpikeWindower, events: &[f64]) -> Vec<Window> {
        let names = names(1);
        let mut out = Vec::new();
        let mut c = Vec::new();
        let feed = |c: &mut Vec<Clocked>, w: &mut SpikeWindower, out: &mut Vec<Window>| {
            for x in c.drain(..) {
                match x {
                    Clocked::Spike(t, u) => w.push(t, u, &names, 0, out),
                    Clocked::Gap(g) => w.gap(g),
                    Clocked::Restart(g) => w.restart(g, &names, 0, out),
                }
            }
        };
        for &t in events {
            clock.spike(t, 0, &mut c);
            feed(&mut c, w, &mut out);
        }
        clock.end_epoch(false, &mut c);
        feed(&mut c, w, &mut out);
        w.flush(&names, 0, &mut out);
        out
    }

    /// Every event accounted for: in a window (tumbling windows: exactly one), late, or out
    /// of range.
    fn accounted(out: &[Window], w: &SpikeWindower, clock: &EventClock, sent: usize) {
        let inside: usize = out.iter().map(Window::events).sum();
        assert_eq!(
            inside as u64 + w.late() + w.out_of_range() + clock.out_of_range(),
            sent as u64,
            "every event accounted for"
        );
    }

    #[test]
    fn a_stray_far_ahead_is_refused_and_adds_no_window() {
        let mut c = clock(10.0, 10.0, 3);
        let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, 0.0);
        let mut ev: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.05).collect();
        ev.insert(50, 1e6 + 2.5);
        let out = clocked(&mut c, &mut w, &ev);
        assert_eq!(c.out_of_range(), 1);
        assert!(out.iter().all(|x| x.start_s < 5.0), "no window near 1e6 s");
        let complete: Vec<usize> = out
            .iter()
            .filter(|x| x.complete)
            .map(Window::events)
            .collect();
        assert_eq!(complete, vec![20, 20, 20, 20], "windows 0..4 whole");
        assert!(out.iter().all(|x| x.gap.is_none()));
        accounted(&out, &w, &c, ev.len());
    }

    #[test]
    fn a_stray_far_back_restarts_nothing_and_is_late() {
        let mut c = clock(10.0, 10.0, 3);
        let mut w = SpikeWindower::new("w", "s", 1.0, 1.0, 0.0);
        let mut ev: Vec<f64> = (0..600).map(|i| 10.0 + f64::from(i) * 0.05).collect();
        ev.insert(300, 0.5);
        let out = clocked(&mut c, &mut w, &ev);
        assert_eq!(c.epoch(), 0, "no restart");
        assert_eq!(w.late(), 1);
        let complete: Vec<(u64, usize)> = out
            .iter()
            .filter(|x| x.complete)
            .map(|x| (x.index, x.events()))
            .collect();
        assert_eq!(complete.len(), 29);
        assert!(
            complete.iter().all(|&(k, n)| k >= 10 && n == 20),
            "{complete:?}"
        );
        accounted(&out, &w, &c, ev.len());
    }

    #[test]
    fn a_confirmed_jump_ahead_is_a_gap_marking_the_windows_across_it() {
        // 0..5 s, silence (the clock runs on) until 20 s, then 20..25 s.
        let mut c = clock(10.0, 10.0, 3);
        let mut w = SpikeWindower::new("w", "s", 2.0, 2.0, 0.0);
        let mut ev: Vec<f64> = (0..100).map(|i| f64::from(i) * 0.05).collect();
        ev.extend((0..100).map(|i| 20.1 + f64::from(i) * 0.05));
        let out = clocked(&mut c, &mut w, &ev);
        let gap = Gap {
            kind: GapKind::Jump,
            start_s: 99.0 * 0.05,
            end_s: 20.1,
        };
        for x in &out {
            let across = x.start_s < gap.end_s && x.end_s > gap.start_s;
            assert_eq!(x.gap, across.then_some(gap), "window {}", x.index);
            if across {
                assert!(!x.complete);
            }
        }
        // [4, 6) holds 4.0..4.95 and [20, 22) holds 20.1..: both across the gap.
        let marked: Vec<u64> = out
            .iter()
            .filter(|x| x.gap.is_some())
            .map(|x| x.index)
            .collect();
        assert_eq!(marked, vec![2, 10]);
        assert_eq!(c.out_of_range(), 0);
        accounted(&out, &w, &c, ev.len());
    }

    #[test]
    fn a_confirmed_jump_back_restarts_with_the_gap_and_a_new_epoch() {
        let mut c = clock(10.0, 10.0, 3);
        let mut w = SpikeWindower::new("w", "s", 2.0, 2.0, 0.0);
        let mut ev: Vec<f64> = (0..300).map(|i| f64::from(i) * 0.05).collect();
        ev.extend((0..100).map(|i| f64::from(i) * 0.05));
        let out = clocked(&mut c, &mut w, &ev);
        assert_eq!(c.epoch(), 1);
        // Old epoch: 7 complete windows, [14, 16) cut off by the restart.
        let cut: Vec<&Window> = out.iter().filter(|x| x.gap.is_some()).collect();
        assert_eq!(cut.len(), 1);
        assert_eq!(cut[0].index, 7);
        assert!(!cut[0].complete);
        assert_eq!(cut[0].gap.unwrap().kind, GapKind::Restart);
        assert_eq!(w.late(), 0);
        accounted(&out, &w, &c, ev.len());
    }

    #[test]
    fn clock_refuses_absurd_times_and_strays_only() {
        let mut c = clock(10.0, 10.0, 3);
        let mut got = Vec::new();
        for t in [1.0, f64::NAN, -1.0, f64::INFINITY, 2e12, 1.5, 5e5, 2.0] {
            c.spike(t, 0, &mut got);
        }
        let times: Vec<f64> = got
            .iter()
            .filter_map(|x| match x {
                Clocked::Spike(t, _) => Some(*t),
                _ => None,
            })
            .collect();
        assert_eq!(times, vec![1.0, 1.5, 2.0]);
        assert_eq!(c.out_of_range(), 5);
        // Without rules, times far ahead pass at once (archives).
        let mut c = EventClock::new(ClockRules::default());
        let mut got = Vec::new();
        for t in [1.0, 5e5, 2.0] {
            c.spike(t, 0, &mut got);
        }
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn sensor_gaps_longer_than_a_window_restart_instead_of_filling() {
        let mut w = SensorWindower::new("w", "s", 4, 2);
        let mut out = Vec::new();
        w.push(&frame(0, 6), 0, &mut out);
        let before = out.len();
        // A jump of ~1e15 samples: no NaN fill, the open window is emitted with a gap.
        w.push(&frame(1_000_000_000_000_000, 6), 0, &mut out);
        assert!(out[before..].iter().any(|x| x.gap.is_some() && !x.complete));
        assert!(out.len() < before + 10);
        assert_eq!(w.out_of_range(), 0);
        // Indices that would overflow are refused.
        w.push(&frame(u64::MAX - 2, 6), 0, &mut out);
        assert_eq!(w.out_of_range(), 6);
    }

    fn frame(first: u64, n: usize) -> SensorFrame {
        SensorFrame {
            first_sample: first,
            t0_s: first as f64 / 10.0,
            rate_hz: 10.0,
            channels: 2,
            values: (0..n * 2).map(|i| (first * 2) as f64 + i as f64).collect(),
        }
    }

    fn samples(w: &Window) -> Vec<f64> {
        match &w.data {
            WindowData::Samples { values, .. } => values.clone(),
            WindowData::Spikes { .. } => Vec::new(),
        }
    }

    #[test]
    fn sensor_windows_slide_by_samples_and_fill_gaps_with_nan() {
        let mut w = SensorWindower::new("w", "s", 4, 2);
        let mut out = Vec::new();
        w.push(&frame(0, 3), 0, &mut out);
        w.push(&frame(3, 3), 0, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(samples(&out[0]), (0..8).map(f64::from).collect::<Vec<_>>());
        assert_eq!(samples(&out[1]), (4..12).map(f64::from).collect::<Vec<_>>());
        assert_eq!((out[1].start_s, out[1].end_s), (0.2, 0.6));
        // A repeat of samples 4..6 is late; a gap of 2 samples becomes NaN.
        w.push(&frame(4, 2), 0, &mut out);
        assert_eq!(w.late(), 2);
        w.push(&frame(8, 2), 0, &mut out);
        assert_eq!(w.missing(), 2);
        // Windows [4, 8) and [6, 10): samples 6 and 7 (2 channels each) are NaN.
        assert_eq!(out.len(), 4);
        let w2 = samples(&out[2]);
        assert_eq!(&w2[..4], &[8.0, 9.0, 10.0, 11.0]);
        assert!(w2[4..8].iter().all(|v| v.is_nan()));
        let w3 = samples(&out[3]);
        assert!(w3[..4].iter().all(|v| v.is_nan()));
        assert_eq!(&w3[4..], &[16.0, 17.0, 18.0, 19.0]);
        w.flush(0, &mut out);
        assert!(!out.last().unwrap().complete);
    }
}
