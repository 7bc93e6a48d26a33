//! Stages: what runs on each window, behind one interface.
//!
//! A stage is built from its configuration ([`crate::pipeline::config::StageConfig`]), reads
//! one kind of window ([`StreamKind`]) and turns each [`Window`] into the stage-specific fields
//! of a result. The runner ([`run`]) adds the fields every result carries (`stage`,
//! `window_start_s`, `window_end_s`, `events`, `late`, `dropped`, `seconds`, …) and hands the
//! serialised line to the sinks. The episode miner is the first stage; the sensor stages of
//! later issues (motif, soft-DTW, shapelets, SING) implement the same trait.

pub mod episodes;
pub mod motif;
pub mod search;
pub mod shapelet;
pub mod softdtw;
pub mod summary;

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use serde_json::{Map, Value};

use crate::window::{Window, WindowData};

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

/// The kind of stream a source produces and a stage reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// Spike events (unit, time).
    Spikes,
    /// Continuous sensor samples.
    Sensor,
}

impl std::fmt::Display for StreamKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Spikes => "spikes",
            Self::Sensor => "sensor",
        })
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
    /// The window's events break a stream invariant.
    #[error(transparent)]
    Event(#[from] crate::event::EventError),
    /// The stage's options do not fit the window (e.g. a channel it does not have).
    #[error("{0}")]
    Config(String),
}

/// What runs on each window.
pub trait Stage: Send {
    /// The kind of window the stage reads.
    fn input(&self) -> StreamKind;

    /// Processes one window into the stage's result fields (e.g. `episodes`).
    ///
    /// # Errors
    /// [`StageError`]; the runner reports it for this window and continues.
    fn process(&mut self, window: &Window) -> Result<Map<String, Value>, StageError>;

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

/// A serialised result on its way to the sinks.
#[derive(Clone, Debug)]
pub struct Output {
    /// The stage's name (the ZMQ PUB topic).
    pub stage: Arc<str>,
    /// One JSON object, no trailing newline.
    pub json: String,
    /// When the window's closing record left the ring (for latency measurements).
    pub closed_at: Instant,
    /// When the sinks had written it (set by the sink thread).
    pub published_at: Option<Instant>,
}

/// Runs `stage` named `name` over every window from `windows` until that channel closes,
/// sending one [`Output`] per window to `out` (previews go to [`Stage::preview`] and produce
/// none), then calls [`Stage::finish`].
pub fn run(
    name: &Arc<str>,
    stage: &mut dyn Stage,
    windows: &Receiver<Arc<Window>>,
    out: &Sender<Output>,
) {
    let seconds_metric = crate::telemetry::stage_seconds(name);
    for window in windows {
        if window.preview {
            stage.preview(&window);
            continue;
        }
        let started = Instant::now();
        let result = stage.process(&window);
        let seconds = started.elapsed().as_secs_f64();
        seconds_metric.record(seconds);
        let mut obj = Map::new();
        obj.insert("stage".into(), Value::from(&**name));
        obj.insert("window".into(), Value::from(&*window.window));
        obj.insert("source".into(), Value::from(&*window.source));
        obj.insert("window_index".into(), Value::from(window.index));
        obj.insert("window_start_s".into(), Value::from(window.start_s));
        obj.insert("window_end_s".into(), Value::from(window.end_s));
        obj.insert("complete".into(), Value::from(window.complete));
        obj.insert("events".into(), Value::from(window.events()));
        obj.insert("late".into(), Value::from(window.late));
        obj.insert("dropped".into(), Value::from(window.dropped));
        obj.insert("seconds".into(), Value::from(seconds));
        match result {
            Ok(fields) => obj.extend(fields),
            Err(e) => {
                tracing::warn!(stage = %name, window_start_s = window.start_s, error = %e, "Stage failed on a window.");
                obj.insert("error".into(), Value::from(e.to_string()));
            }
        }
        let json = Value::Object(obj).to_string();
        if out
            .send(Output {
                stage: name.clone(),
                json,
                closed_at: window.closed_at,
                published_at: None,
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
        closed_at: std::time::Instant::now(),
        data: WindowData::Samples {
            channels,
            values,
            rate_hz: 100.0,
            start_sample,
        },
    }
}
