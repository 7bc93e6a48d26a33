//! Stages: what runs on each window, behind one interface.
//!
//! Each stage kind lives in one file beside its configuration: the options of its
//! `[stages.<name>]` section ([`StageConfig`], defaults in the type), their checks against the
//! stage's window, which return the stage ready to build ([`StageBuilder`]: files it needs are
//! read once, there), and the [`Stage`] itself. [`kinds::KINDS`] is the one table of stage kinds that
//! the pipeline loader reads: adding a kind is a new file and one row there
//! (`docs/adding-a-stage.md`).
//!
//! A stage reads one kind of window ([`StreamKind`]) and turns each [`Window`] into its typed
//! result ([`Stage::Result`]). The runner ([`run`]) wraps it in the fields every result
//! carries (`stage`, `window_start_s`, `window_end_s`, `events`, `late`, `dropped`,
//! `seconds`, …; [`WindowEnvelope`]) and serialises the line once for the sinks. It holds
//! each stage as an [`AnyStage`] (every [`Stage`] is one, its result type erased). A line
//! reads back into [`WindowLine`] with the stage's result type.

pub mod detect;
pub mod episodes;
pub mod kinds;
pub mod motif;
pub mod rate;
pub mod search;
pub mod shapelet;
pub mod softdtw;
pub mod summary;

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::live::config::kinds::{Erased, Family, Kind, KindConfig, Spec};
use crate::live::config::section::ConfigError;
use crate::live::ttl::TtlSender;
use crate::live::window::{Gap, Window, WindowConfig, WindowData};
use crate::record::StreamKind;

/// The options of one stage kind: its `[stages.<name>]` table less `kind`, `window` and
/// the queue's `queue_windows` and `when_full` ([`QueueConfig`]; the loader reads those for
/// every stage). Defaults live in the type (`#[serde(default)]`).
pub trait StageConfig: DeserializeOwned + std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name, as written in `kind = "…"`.
    const KIND: &'static str;
    /// What the stage reads.
    const INPUT: StreamKind;

    /// Checks the options against the stage's window (phase 2 of validation) and returns
    /// the stage ready to build. Everything the stage needs from files is read here, once.
    ///
    /// # Errors
    /// Every problem found, each naming its field relative to the section (`m`, `window`).
    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>>;
}

/// A validated stage, ready to build.
pub trait StageBuilder: std::fmt::Debug + Send + Sync {
    /// Builds the stage: acquires what it runs on (GPU workers, a tree trained at startup).
    ///
    /// # Errors
    /// [`StageError`] for a resource that cannot be had (a GPU demanded but absent, a
    /// training failure).
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError>;
}

/// The stage family of the kinds table ([`kinds::KINDS`]).
#[derive(Debug)]
pub struct Stages;

/// What a stage kind's row says besides its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageRow {
    /// What the stage reads.
    pub input: StreamKind,
    /// Where it reads it.
    pub placement: Placement,
}

/// Where a stage kind reads, as its row declares ([`StageKind::of`] for a [`StageConfig`],
/// [`StageKind::on_spikes`] for a [`SpikeStageConfig`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the windows of one window definition (its section names a `window`), on a thread
    /// of its own.
    Windows,
    /// On a spike source's records one by one, before any window sees them (its section
    /// names a `source`), on the source's window thread: `detect`.
    Spikes,
}

impl Family for Stages {
    type Options = dyn AnyStageConfig;
    type Row = StageRow;
}

impl<T: StageConfig> KindConfig<Stages> for T {
    const NAME: &'static str = T::KIND;
    const ROW: StageRow = StageRow {
        input: T::INPUT,
        placement: Placement::Windows,
    };
    fn erase(self) -> Box<dyn AnyStageConfig> {
        Box::new(self)
    }
}

/// A stage kind's options with the type erased, as a [`ParsedStage`] holds them (every
/// [`StageConfig`] and [`SpikeStageConfig`] is one). The loader calls the method of the
/// kind's [`Placement`]; the other one answers that the stage is not placed there.
pub trait AnyStageConfig: Erased {
    /// [`StageConfig::validate`].
    ///
    /// # Errors
    /// Every problem found, fields relative to the section.
    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>>;

    /// [`SpikeStageConfig::validate`].
    ///
    /// # Errors
    /// Every problem found, fields relative to the section.
    fn validate_on_spikes(
        &self,
        at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>>;
}

impl<T: StageConfig> AnyStageConfig for T {
    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        StageConfig::validate(self, window)
    }

    fn validate_on_spikes(
        &self,
        _at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>> {
        Err(vec![ConfigError::new(
            "window",
            "missing: the window the stage reads",
        )])
    }
}

/// The options of a stage kind placed on a source's spikes ([`Placement::Spikes`]): its
/// `[stages.<name>]` table less `kind` and `source` (which the loader reads). It reads each
/// spike as it comes off the source's ring, before any window (`detect`).
pub trait SpikeStageConfig: DeserializeOwned + std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name, as written in `kind = "…"`.
    const KIND: &'static str;

    /// Checks the options (phase 2 of validation) and returns the stage ready to build.
    /// Everything the stage needs from files is read here, once.
    ///
    /// # Errors
    /// Every problem found, each naming its field relative to the section.
    fn validate(
        &self,
        at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>>;
}

/// What the validation of a stage on spikes sees of the pipeline.
#[allow(missing_debug_implementations)]
pub struct SpikeContext<'a> {
    /// The spike source it reads (its `source`).
    pub source: &'a str,
    /// A stage on windows of the pipeline, by name, if it validated (a detect stage's
    /// `from_stage`).
    pub stage: &'a dyn Fn(&str) -> Option<&'a ParsedStage>,
}

/// A kind placed on spikes, as its row holds its options.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
struct OnSpikes<T>(T);

impl<T: SpikeStageConfig> KindConfig<Stages> for OnSpikes<T> {
    const NAME: &'static str = T::KIND;
    const ROW: StageRow = StageRow {
        input: StreamKind::Spikes,
        placement: Placement::Spikes,
    };
    fn erase(self) -> Box<dyn AnyStageConfig> {
        Box::new(self)
    }
}

impl<T: SpikeStageConfig> AnyStageConfig for OnSpikes<T> {
    fn validate(&self, _window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        Err(vec![ConfigError::new(
            "source",
            "missing: the spike source the stage reads",
        )])
    }

    fn validate_on_spikes(
        &self,
        at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>> {
        SpikeStageConfig::validate(&self.0, at)
    }
}

impl StageKind {
    /// The row of kind `T`, a stage placed on a source's spikes ([`Placement::Spikes`]).
    #[must_use]
    pub const fn on_spikes<T: SpikeStageConfig>() -> Self {
        Self::of::<OnSpikes<T>>()
    }
}

/// A validated stage on spikes, ready to build.
pub trait SpikeStageBuilder: std::fmt::Debug + Send + Sync {
    /// Builds the stage named `name`: `signals` are the handles of the signal sinks that
    /// take it (TTL, [`crate::live::sink::SignalSink`]), `out` where its lines go.
    ///
    /// # Errors
    /// [`StageError`] when it cannot be built.
    fn build(
        &self,
        name: &str,
        signals: Vec<TtlSender>,
        out: Sender<Output>,
    ) -> Result<BuiltSpikeStage, StageError>;
}

/// A stage on spikes, built: the stage for its source's window thread, and what the sink
/// thread shows it of other stages' results, if anything.
#[allow(missing_debug_implementations)]
pub struct BuiltSpikeStage {
    /// The stage.
    pub stage: Box<dyn SpikeStage>,
    /// Sees another stage's lines on the sink thread (a detect stage's `from_stage`).
    pub observer: Option<Box<dyn ResultObserver>>,
}

/// A stage on spikes at run time, on its source's window thread: each record, before any
/// window sees it.
pub trait SpikeStage: Send {
    /// Names a unit (a source's `Record::Unit`).
    fn announce(&mut self, id: u32, name: Arc<str>);
    /// One spike, seconds and unit id; `arrived` is when the window thread took it from the
    /// source's ring (where a closed loop's latency and a TTL pulse's age start).
    fn spike(&mut self, t_s: f64, unit: u32, arrived: std::time::Instant);
    /// A publisher restart.
    fn restart(&mut self);
    /// The end of the input.
    fn finish(&mut self);
    /// The stage's name.
    fn name(&self) -> &str;
    /// Its counters ([`crate::live::RunSummary::detectors`]).
    fn stats(&self) -> crate::episode::DetectorStats;
}

/// Sees the lines of one stage on the sink thread, before the sinks write them.
pub trait ResultObserver: Send {
    /// The stage whose lines it sees.
    fn stage(&self) -> &str;
    /// One line of that stage (not a preview's).
    fn offer(&self, out: &Output);
}

/// One row of [`kinds::KINDS`]: a stage kind's name, what it reads ([`StageRow`]), and how its
/// section is parsed.
pub type StageKind = Kind<Stages>;

/// A stage section after phase 1: its kind and typed options ([`ParsedStage::options`] gives
/// them back as the kind's type).
pub type ParsedStage = Spec<Stages>;

impl ParsedStage {
    /// Phase 2 of a stage on windows: checks the options against the window; the stage
    /// ready to build.
    ///
    /// # Errors
    /// Every problem found, fields relative to the section.
    pub fn validate(
        &self,
        window: &WindowConfig,
    ) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        self.erased().validate(window)
    }

    /// Phase 2 of a stage on spikes; the stage ready to build.
    ///
    /// # Errors
    /// Every problem found, fields relative to the section.
    pub fn validate_on_spikes(
        &self,
        at: &SpikeContext<'_>,
    ) -> Result<Box<dyn SpikeStageBuilder>, Vec<ConfigError>> {
        self.erased().validate_on_spikes(at)
    }
}

/// A sensor window's samples, as the sensor stages read them.
#[derive(Clone, Copy, Debug)]
pub struct Samples<'w> {
    /// Stream index of the first sample.
    pub start_sample: u64,
    /// Channels per sample (≥ 1).
    pub channels: usize,
    /// Nominal sampling rate, Hz.
    pub rate_hz: f64,
    /// Sample-major values, shape `[samples, channels]`; NaN where missing.
    pub values: &'w [f64],
}

impl Samples<'_> {
    /// The samples of the window, or [`StageError::WrongInput`] for a spike window.
    ///
    /// # Errors
    /// [`StageError::WrongInput`] when `window` holds spikes.
    pub fn of(window: &Window) -> Result<Samples<'_>, StageError> {
        match &window.data {
            WindowData::Samples {
                start_sample,
                channels,
                rate_hz,
                values,
            } => Ok(Samples {
                start_sample: *start_sample,
                channels: (*channels).max(1),
                rate_hz: *rate_hz,
                values,
            }),
            WindowData::Spikes { .. } => Err(StageError::WrongInput {
                expected: StreamKind::Sensor,
                got: StreamKind::Spikes,
            }),
        }
    }

    /// Channel `c`'s samples, shape `[samples]`, for a channel a stage's configuration names.
    ///
    /// # Errors
    /// [`StageError::Config`] when the window has no channel `c`.
    pub fn configured_channel(&self, c: usize) -> Result<Vec<f64>, StageError> {
        if c >= self.channels {
            return Err(StageError::Config(format!(
                "channel {c} requested, the window has {}",
                self.channels
            )));
        }
        Ok(self.channel(c))
    }

    /// Channel `c`'s samples, shape `[samples]` (`c < channels`).
    #[must_use]
    pub fn channel(&self, c: usize) -> Vec<f64> {
        self.values
            .iter()
            .skip(c)
            .step_by(self.channels)
            .copied()
            .collect()
    }
}

/// A stage's failure on one window; the runner reports it in the result's `error` field and
/// goes on with the next window.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    /// The window is not of the kind the stage reads.
    #[error("stage reads {expected} windows, got {got}")]
    WrongInput {
        /// What the stage reads.
        expected: StreamKind,
        /// What it got.
        got: StreamKind,
    },
    /// The episode miner failed.
    #[error(transparent)]
    Mine(#[from] crate::episode::MineError),
    /// The device failed and the configuration demands a GPU (`device = "gpu"`).
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
    /// The significance test of the window's episodes failed.
    #[error(transparent)]
    Significance(#[from] crate::significance::SignificanceError),
    /// The window's events break a stream invariant.
    #[error(transparent)]
    Event(#[from] crate::event::EventError),
    /// The stage's options do not fit the window (e.g. a channel it does not have).
    #[error("{0}")]
    Config(String),
}

/// What runs on each window.
pub trait Stage: Send {
    /// The stage's result for one window: its fields of the line, written after the
    /// envelope's ([`WindowEnvelope`]), in the struct's field order. Each kind's result is a
    /// struct of its file (e.g. [`episodes::EpisodesResult`]) that also derives `Deserialize`,
    /// so a line can be read back ([`WindowLine`]). The value itself travels beside its line
    /// ([`Output::value`]), so the process's own consumers read it without parsing the line.
    type Result: Serialize + Send + Sync + 'static;

    /// The kind of window the stage reads.
    fn input(&self) -> StreamKind;

    /// Processes one window into the stage's result (e.g. the episodes of a spike window).
    ///
    /// # Errors
    /// [`StageError`]; the runner reports it for this window (the line's `error`) and
    /// continues.
    fn process(&mut self, window: &Window) -> Result<Self::Result, StageError>;

    /// Whether the stage wants previews of open spike windows ([`Window::preview`]).
    /// Default: no.
    fn wants_previews(&self) -> bool {
        false
    }

    /// Sees a preview: a window still open, with the events received so far. A stage may
    /// prepare state for the window's close (the episode stage warms its level-2 chains);
    /// previews produce no result, and a stage may be sent fewer previews than were made (they
    /// are dropped when its queue is full). Default: nothing.
    fn preview(&mut self, _window: &Window) {}

    /// Called once after the last window. Default: nothing.
    fn finish(&mut self) {}
}

/// A [`Stage`] with its result type erased, as the runner holds it (`Box<dyn AnyStage>`, what
/// [`StageBuilder::build`] returns). Every [`Stage`] is one; its window results come out as
/// serialised lines ([`AnyStage::process_line`]).
pub trait AnyStage: Send {
    /// The kind of window the stage reads ([`Stage::input`]).
    fn input(&self) -> StreamKind;

    /// Processes one window ([`Stage::process`], timed) and serialises its line, once: the
    /// [`WindowEnvelope`] of `window` for the stage named `stage`, with the result's fields or,
    /// when the stage failed, `error`.
    fn process_line(&mut self, stage: &str, window: &Window) -> ProcessedLine;

    /// Whether the stage wants previews ([`Stage::wants_previews`]).
    fn wants_previews(&self) -> bool;

    /// Sees a preview ([`Stage::preview`]).
    fn preview(&mut self, window: &Window);

    /// Called once after the last window ([`Stage::finish`]).
    fn finish(&mut self);
}

impl<S: Stage> AnyStage for S {
    fn input(&self) -> StreamKind {
        Stage::input(self)
    }

    fn process_line(&mut self, stage: &str, window: &Window) -> ProcessedLine {
        let started = Instant::now();
        let result = self.process(window);
        let seconds = started.elapsed().as_secs_f64();
        let error = result.as_ref().err().map(ToString::to_string);
        let envelope =
            WindowEnvelope::new(stage, window, seconds, result.as_ref().ok(), error.clone());
        let json = envelope.to_json();
        let mut value = envelope.owned(None);
        value.result = result.ok().map(|r| Arc::new(r) as AnyResult);
        ProcessedLine {
            seconds,
            json,
            error,
            value: Arc::new(value),
        }
    }

    fn wants_previews(&self) -> bool {
        Stage::wants_previews(self)
    }

    fn preview(&mut self, window: &Window) {
        Stage::preview(self, window);
    }

    fn finish(&mut self) {
        Stage::finish(self);
    }
}

/// One window's line from [`AnyStage::process_line`].
#[derive(Clone, Debug)]
pub struct ProcessedLine {
    /// The stage's time on the window ([`Stage::process`] alone), seconds; the line's
    /// `seconds`.
    pub seconds: f64,
    /// The line: one JSON object ([`WindowEnvelope`]), no trailing newline.
    pub json: String,
    /// The stage's error on the window, when it failed (the line's `error`).
    pub error: Option<String>,
    /// What the line was serialised from: the envelope's fields and the stage's typed result
    /// (absent when the stage failed).
    pub value: Arc<WindowLine<AnyResult>>,
}

/// A stage's result ([`Stage::Result`]) with its type erased, as it travels beside its line:
/// downcast it to the kind's result type (`result.downcast_ref::<EpisodesResult>()`).
pub type AnyResult = Arc<dyn Any + Send + Sync>;

/// The typed value a line was serialised from, carried beside it ([`Output::value`]) so that
/// the process's own consumers (the live view, a detect stage's refresher) read it without
/// parsing the line back.
#[derive(Clone, Debug)]
pub enum LineValue {
    /// A window's line: the envelope's fields, owned, and the stage's result
    /// ([`WindowLine::result`], type-erased; `None` when the stage failed).
    Window(Arc<WindowLine<AnyResult>>),
    /// One occurrence of a detect stage.
    Occurrence(Arc<detect::OccurrenceLine>),
}

/// The line of one window: the fields every result carries, then the stage's own
/// ([`Stage::Result`], flattened) or, when the stage failed, `error`. Serialised once
/// ([`WindowEnvelope::to_json`]); keys in field order.
#[derive(Debug, Serialize)]
pub struct WindowEnvelope<'a, R> {
    /// The stage's name (`[stages.<name>]`; the ZMQ PUB topic).
    pub stage: &'a str,
    /// The window definition's name (`[windows.<name>]`).
    pub window: &'a str,
    /// The source's name.
    pub source: &'a str,
    /// Window index `k`.
    pub window_index: u64,
    /// Window start, seconds (inclusive).
    pub window_start_s: f64,
    /// Window end, seconds (exclusive).
    pub window_end_s: f64,
    /// False for windows emitted at the end of an archive, at a publisher restart, at
    /// shutdown, or across a gap.
    pub complete: bool,
    /// The gap in event time the window overlaps ([`crate::live::window::Gap`]: `kind`,
    /// `start_s`, `end_s`); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap: Option<Gap>,
    /// Events (spikes) or samples in the window.
    pub events: usize,
    /// Late events rejected by this window definition so far.
    pub late: u64,
    /// Events the source has dropped so far.
    pub dropped: u64,
    /// Events refused as out of range so far.
    pub out_of_range: u64,
    /// Repeats of wire messages counted once, so far.
    pub duplicate: u64,
    /// Events this window definition refused so far because its open windows held
    /// `max_open_events`.
    pub overflow: u64,
    /// The source's epoch (one more per restart).
    pub epoch: u32,
    /// The run's id (`<Unix ms>-<pid>`).
    pub run_id: &'a str,
    /// The stage's time on the window, seconds.
    pub seconds: f64,
    /// The stage's result, its fields inline; `None` when the stage failed.
    #[serde(flatten)]
    pub result: Option<&'a R>,
    /// Why the stage failed on the window; absent when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl<'a, R: Serialize> WindowEnvelope<'a, R> {
    /// The line of `window` for the stage named `stage`, which took `seconds` and returned
    /// `result` or failed with `error`.
    #[must_use]
    pub fn new(
        stage: &'a str,
        window: &'a Window,
        seconds: f64,
        result: Option<&'a R>,
        error: Option<String>,
    ) -> Self {
        Self {
            stage,
            window: &window.window,
            source: &window.source,
            window_index: window.index,
            window_start_s: window.start_s,
            window_end_s: window.end_s,
            complete: window.complete,
            gap: window.gap,
            events: window.events(),
            late: window.late,
            dropped: window.dropped,
            out_of_range: window.out_of_range,
            duplicate: window.duplicate,
            overflow: window.overflow,
            epoch: window.epoch,
            run_id: &window.run_id,
            seconds,
            result,
            error,
        }
    }

    /// The line as one JSON object, no trailing newline. A result that cannot be serialised
    /// (no result type of this crate's stages fails) gives the envelope with an `error`.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| {
            let failed = WindowEnvelope::<()> {
                stage: self.stage,
                window: self.window,
                source: self.source,
                window_index: self.window_index,
                window_start_s: self.window_start_s,
                window_end_s: self.window_end_s,
                complete: self.complete,
                gap: self.gap,
                events: self.events,
                late: self.late,
                dropped: self.dropped,
                out_of_range: self.out_of_range,
                duplicate: self.duplicate,
                overflow: self.overflow,
                epoch: self.epoch,
                run_id: self.run_id,
                seconds: self.seconds,
                result: None,
                error: Some(format!("the stage's result could not be serialised: {e}")),
            };
            serde_json::to_string(&failed).unwrap_or_default()
        })
    }

    /// The line's fields, owned, with `result` as its result (what travels beside the
    /// serialised line, [`LineValue::Window`]).
    #[must_use]
    pub fn owned<T>(&self, result: Option<T>) -> WindowLine<T> {
        WindowLine {
            stage: self.stage.to_owned(),
            window: self.window.to_owned(),
            source: self.source.to_owned(),
            window_index: self.window_index,
            window_start_s: self.window_start_s,
            window_end_s: self.window_end_s,
            complete: self.complete,
            gap: self.gap,
            events: self.events as u64,
            late: self.late,
            dropped: self.dropped,
            out_of_range: self.out_of_range,
            duplicate: self.duplicate,
            overflow: self.overflow,
            epoch: self.epoch,
            run_id: self.run_id.to_owned(),
            seconds: self.seconds,
            result,
            error: self.error.clone(),
        }
    }
}

/// A line read back: the owned mirror of [`WindowEnvelope`], for consumers and tests
/// (`serde_json::from_str::<WindowLine<EpisodesResult>>(line)`; keys the stage's result
/// does not know are ignored), and, as `WindowLine<AnyResult>`, the typed value that travels
/// beside a line in the process ([`LineValue::Window`]).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct WindowLine<R> {
    /// The stage's name.
    pub stage: String,
    /// The window definition's name.
    pub window: String,
    /// The source's name.
    pub source: String,
    /// Window index `k`.
    pub window_index: u64,
    /// Window start, seconds (inclusive).
    pub window_start_s: f64,
    /// Window end, seconds (exclusive).
    pub window_end_s: f64,
    /// False for windows emitted at the end of an archive, at a restart, at shutdown, or
    /// across a gap.
    pub complete: bool,
    /// The gap in event time the window overlaps.
    #[serde(default)]
    pub gap: Option<Gap>,
    /// Events (spikes) or samples in the window.
    pub events: u64,
    /// Late events rejected by this window definition so far.
    pub late: u64,
    /// Events the source has dropped so far.
    pub dropped: u64,
    /// Events refused as out of range so far (0 in lines written before it existed).
    #[serde(default)]
    pub out_of_range: u64,
    /// Repeats of wire messages counted once, so far.
    #[serde(default)]
    pub duplicate: u64,
    /// Events the window definition refused as overflow, so far (0 in lines written before
    /// it existed).
    #[serde(default)]
    pub overflow: u64,
    /// The source's epoch.
    #[serde(default)]
    pub epoch: u32,
    /// The run's id (empty in lines written before it existed).
    #[serde(default)]
    pub run_id: String,
    /// The stage's time on the window, seconds.
    pub seconds: f64,
    /// The stage's result; `None` when the line has none (the stage failed) or its fields do
    /// not read as `R` (e.g. a non-finite number, written as `null`, in an `f64` field).
    #[serde(flatten)]
    pub result: Option<R>,
    /// Why the stage failed on the window.
    #[serde(default)]
    pub error: Option<String>,
}

impl<R: Send + Sync + 'static> WindowLine<R> {
    /// The same line with its result's type erased (a line made in code, or read back, as the
    /// value that travels beside a line, [`LineValue::Window`]).
    #[must_use]
    pub fn erased(self) -> WindowLine<AnyResult> {
        WindowLine {
            stage: self.stage,
            window: self.window,
            source: self.source,
            window_index: self.window_index,
            window_start_s: self.window_start_s,
            window_end_s: self.window_end_s,
            complete: self.complete,
            gap: self.gap,
            events: self.events,
            late: self.late,
            dropped: self.dropped,
            out_of_range: self.out_of_range,
            duplicate: self.duplicate,
            overflow: self.overflow,
            epoch: self.epoch,
            run_id: self.run_id,
            seconds: self.seconds,
            result: self.result.map(|r| Arc::new(r) as AnyResult),
            error: self.error,
        }
    }
}

/// A serialised result on its way to the sinks.
#[derive(Clone, Debug)]
pub struct Output {
    /// The stage's name (the ZMQ PUB topic).
    pub stage: Arc<str>,
    /// One JSON object, no trailing newline.
    pub json: String,
    /// When the window closed ([`Window::closed_at`]: its closing record left the ring): where
    /// the result latency a sink records starts ([`crate::live::sink::Sink::write`]).
    pub closed_at: Instant,
    /// True for the result of a preview (a window still open, [`Window::preview`]; the runner
    /// emits none today). A sink writes it like any line but records no result latency for
    /// it: its `closed_at` is not a window's close.
    pub preview: bool,
    /// [`Window::complete`]: false for a window emitted at the end of the input (or a restart)
    /// before the watermark passed its end. Such windows close all at once when the input
    /// ends, so a sink writes them but records no result latency for them (their wait
    /// measures that burst, not whether the pipeline keeps up); it counts them instead
    /// ([`crate::live::sink::ResultLatency::incomplete`]).
    pub complete: bool,
    /// When the sinks had written it (set by the sink thread).
    pub published_at: Option<Instant>,
    /// The typed value `json` was serialised from, for consumers in the process (the live
    /// view, a detect stage's [`ResultObserver`]), which never parse `json` back; `None` for
    /// lines made in code without one (a test's), which those consumers skip.
    pub value: Option<LineValue>,
}

/// The preview slot of one stage: holds only the latest preview of an open window, apart from
/// the queue of real windows, so previews never queue ahead of a real window (a stage is
/// offered a preview only while no real window waits, and a newer preview replaces an older
/// one that was not taken yet).
pub fn preview_slot() -> (PreviewSender, PreviewReceiver) {
    let slot = Arc::new(std::sync::Mutex::new(None));
    let (wake_tx, wake_rx) = crossbeam_channel::bounded(1);
    (
        PreviewSender {
            slot: slot.clone(),
            wake: wake_tx,
        },
        PreviewReceiver {
            slot,
            wake: wake_rx,
        },
    )
}

/// The window thread's end of a [`preview_slot`].
#[derive(Clone, Debug)]
pub struct PreviewSender {
    slot: Arc<std::sync::Mutex<Option<Arc<Window>>>>,
    wake: Sender<()>,
}

impl PreviewSender {
    /// Puts `window` in the slot, replacing a preview not taken yet; never blocks.
    pub fn offer(&self, window: Arc<Window>) {
        *self
            .slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(window);
        let _ = self.wake.try_send(());
    }
}

/// The stage thread's end of a [`preview_slot`].
#[derive(Debug)]
pub struct PreviewReceiver {
    slot: Arc<std::sync::Mutex<Option<Arc<Window>>>>,
    wake: Receiver<()>,
}

impl PreviewReceiver {
    fn take(&self) -> Option<Arc<Window>> {
        self.slot
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

/// What the window thread does with a window for a stage whose queue is full: a stage's
/// `when_full` option (`[stages.<name>]`, beside `queue_windows`; default [`WhenFull::Block`]).
/// The words are those of a source's ring (`overflow`: [`crate::live::buffer::Overflow`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenFull {
    /// Wait until the stage takes a window (backpressure): the stage sees every window, but
    /// while it waits the window thread feeds no other stage of the source, and the ring
    /// fills (then drops, counted, by its own `overflow`).
    #[default]
    Block,
    /// The window that does not fit is not given to the stage: counted
    /// ([`StageControl::dropped_windows`], `synfire_stage_windows_dropped_total`), and the
    /// stage goes on with the windows already queued.
    DropNewest,
    /// The oldest window queued is taken back and counted instead, and the new one queued:
    /// the stage always works on the newest windows.
    DropOldest,
}

impl WhenFull {
    /// The value as written in a pipeline file.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Block => "block",
            Self::DropNewest => "drop_newest",
            Self::DropOldest => "drop_oldest",
        }
    }
}

/// A stage's queue options, read by the pipeline loader for every stage on windows (like its
/// `window`): `queue_windows` and `when_full` of its `[stages.<name>]` section.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct QueueConfig {
    /// Windows queued between the window thread and the stage (at least 1; default the
    /// pipeline's `stage_queue_windows`, itself 4 by default).
    pub queue_windows: Option<usize>,
    /// What happens to a window when the queue is full (default [`WhenFull::Block`]).
    pub when_full: Option<WhenFull>,
}

impl QueueConfig {
    /// Whether the section set either option.
    #[must_use]
    pub fn is_set(&self) -> bool {
        self.queue_windows.is_some() || self.when_full.is_some()
    }
}

/// How a pipeline stops a stage at shutdown ([`run_controlled`]), and what the window thread
/// did not give it (`when_full = "drop_newest"` or `"drop_oldest"`).
#[derive(Debug, Default)]
pub struct StageControl {
    /// Windows the window thread dropped for this stage because its queue was full
    /// ([`WhenFull::DropNewest`], [`WhenFull::DropOldest`]); never processed by it.
    pub dropped_windows: std::sync::atomic::AtomicU64,
    /// Events of the windows in [`Self::dropped_windows`].
    pub dropped_events: std::sync::atomic::AtomicU64,
    /// Set at the shutdown deadline: windows still queued are not processed, their events
    /// are added to `skipped`.
    pub cancel: std::sync::atomic::AtomicBool,
    /// Events of the window being processed now (0 when idle).
    pub in_flight: std::sync::atomic::AtomicU64,
    /// Events of the windows skipped after `cancel`.
    pub skipped: std::sync::atomic::AtomicU64,
    /// Events of the windows queued for the stage and not taken yet (added by the window
    /// thread before it sends a window, taken off as the stage takes it), so windows left in
    /// the queue of a stage still computing at the deadline are counted too.
    pub queued: std::sync::atomic::AtomicU64,
}

impl StageControl {
    /// Takes `events` off [`Self::queued`] (never below zero: a caller that sends windows
    /// without counting them, as [`run`] does, leaves it at zero).
    pub(crate) fn take_queued(&self, events: u64) {
        use std::sync::atomic::Ordering;
        let _ = self
            .queued
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
                Some(q.saturating_sub(events))
            });
    }
}

/// [`run_controlled`] without a shutdown deadline: every window is processed.
pub fn run(
    name: &Arc<str>,
    stage: &mut dyn AnyStage,
    windows: &Receiver<Arc<Window>>,
    previews: Option<&PreviewReceiver>,
    out: &Sender<Output>,
) {
    run_controlled(
        name,
        stage,
        windows,
        previews,
        out,
        &StageControl::default(),
    );
}

/// Runs `stage` named `name` over every window from `windows` until that channel closes,
/// sending one [`Output`] per window to `out` (its line: [`AnyStage::process_line`]), then
/// calls [`Stage::finish`]. Previews come from `previews` (a [`preview_slot`]) and go to
/// [`Stage::preview`], producing no line; a real window that is waiting is always taken
/// first, and a preview of a window at or before the last real one is skipped as stale.
/// `control` tells the pipeline what the stage is processing and stops it taking windows at
/// the shutdown deadline ([`StageControl`]).
pub fn run_controlled(
    name: &Arc<str>,
    stage: &mut dyn AnyStage,
    windows: &Receiver<Arc<Window>>,
    previews: Option<&PreviewReceiver>,
    out: &Sender<Output>,
    control: &StageControl,
) {
    use crossbeam_channel::TryRecvError;
    use std::sync::atomic::Ordering;
    enum Next {
        Real(Arc<Window>),
        Closed,
        Preview,
        PreviewsGone,
    }
    let seconds_metric = crate::live::telemetry::stage_seconds(name);
    let mut last_real: Option<u64> = None;
    let mut previews = previews;
    loop {
        let window = match windows.try_recv() {
            Ok(w) => w,
            Err(TryRecvError::Disconnected) => break,
            Err(TryRecvError::Empty) => {
                let next = match previews {
                    None => windows.recv().map_or(Next::Closed, Next::Real),
                    Some(p) => crossbeam_channel::select_biased! {
                        recv(windows) -> w => w.map_or(Next::Closed, Next::Real),
                        recv(p.wake) -> r => if r.is_ok() { Next::Preview } else { Next::PreviewsGone },
                    },
                };
                match next {
                    Next::Real(w) => w,
                    Next::Closed => break,
                    Next::PreviewsGone => {
                        previews = None;
                        continue;
                    }
                    Next::Preview => {
                        if let Some(pw) = previews.and_then(PreviewReceiver::take)
                            && last_real.is_none_or(|k| pw.index > k)
                        {
                            stage.preview(&pw);
                        }
                        continue;
                    }
                }
            }
        };
        if window.preview {
            // Not expected on this queue; kept for callers that still send previews inline.
            stage.preview(&window);
            continue;
        }
        // Taken: in flight or skipped from here on (counted there before it leaves `queued`).
        let events = window.events() as u64;
        if control.cancel.load(Ordering::Relaxed) {
            control.skipped.fetch_add(events, Ordering::Relaxed);
            control.take_queued(events);
            continue;
        }
        control.in_flight.store(events, Ordering::Relaxed);
        control.take_queued(events);
        last_real = Some(window.index);
        let line = stage.process_line(name, &window);
        if control.cancel.load(Ordering::Relaxed) {
            // Finished after the shutdown deadline: the sinks may have ended, so the line is
            // not sent and its window's events are counted (before `in_flight` clears, so the
            // run's count never misses them).
            control.skipped.fetch_add(events, Ordering::Relaxed);
            control.in_flight.store(0, Ordering::Relaxed);
            continue;
        }
        control.in_flight.store(0, Ordering::Relaxed);
        seconds_metric.record(line.seconds);
        if let Some(e) = &line.error {
            tracing::warn!(stage = %name, window_start_s = window.start_s, error = %e, "Stage failed on a window.");
        }
        if out
            .send(Output {
                stage: name.clone(),
                json: line.json,
                closed_at: window.closed_at,
                preview: window.preview,
                complete: window.complete,
                published_at: None,
                value: Some(LineValue::Window(line.value)),
            })
            .is_err()
        {
            break;
        }
    }
    stage.finish();
}

/// A sensor window for stage tests: `values` sample-major with `channels` channels at 100 Hz,
/// starting at stream sample `start_sample`.
#[cfg(test)]
pub(crate) fn test_window(values: Vec<f64>, channels: usize, start_sample: u64) -> Window {
    Window {
        window: std::sync::Arc::from("w"),
        source: std::sync::Arc::from("s"),
        index: 0,
        start_s: 0.0,
        end_s: 1.0,
        complete: true,
        preview: false,
        late: 0,
        dropped: 0,
        out_of_range: 0,
        duplicate: 0,
        overflow: 0,
        gap: None,
        epoch: 0,
        run_id: Arc::from(""),
        closed_at: std::time::Instant::now(),
        data: WindowData::Samples {
            channels,
            values,
            rate_hz: 100.0,
            start_sample,
        },
    }
}

#[cfg(test)]
mod tests;
