//! Running a pipeline: build everything, then connect, then spawn named threads.
//!
//! ```text
//!  [synfire:src-<name>] ─ SPSC ring ─> [synfire:win-<source>] ─ bounded ─> [synfire:stage-<name>] ─┐
//!   (zmq or hdf5)        (ringbuf)      (all windows of that    (crossbeam)   (episodes, summary)    │
//!                                        source)                                                      ▼
//!                                                        [synfire:sinks] <─ bounded (crossbeam) ──────┘
//!  [synfire:control]  tokio: Prometheus /metrics, SIGINT/SIGTERM → stop flag
//!  [synfire:view-feed] + [synfire:view]  with `--ui`: the live view ([`view`]), offered each
//!                     spike and line by `try_send` (never waiting)
//! ```
//!
//! Shutdown runs front to back: a signal sets the stop flag, sources push their final
//! record, window threads emit the open windows (marked `complete: false`) and drop their
//! senders, stages finish the windows already queued, the sink thread writes what arrives and
//! flushes. It is bounded: 1.5 s after the stop a window thread stops waiting for a full stage
//! queue, stages stop taking windows, and 0.3 s later the run leaves any thread still busy
//! behind (a stage computing, a sink blocked on its output); the events of windows not
//! finished are counted as dropped. At the end of an archive, open windows that hold data
//! are emitted (marked `complete: false`). Each spike first passes the source's event clock
//! ([`window::EventClock`]; `docs/live-windows.md`).
//!
//! Each stage's queue holds `queue_windows` windows; when it is full, the stage's `when_full`
//! ([`stage::WhenFull`]) decides: `block` (the default) makes the window thread wait, which
//! holds up the source's other stages and fills its ring; `drop_newest` and `drop_oldest`
//! drop a window for that stage alone, counted per stage ([`RunSummary::stage_dropped`],
//! `synfire_stage_windows_dropped_total`), and the window thread goes on.

pub mod buffer;
pub mod config;
pub mod exposure;
pub mod replay;
pub mod sink;
pub mod source;
pub mod stage;
pub mod telemetry;
pub mod ttl;
pub mod view;
pub mod window;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};

use buffer::RingConsumer;
use config::PipelineConfig;
use source::OpenContext;
use stage::{AnyStage, Output};
use window::{Clocked, Window, Windower};

use crate::record::{EndReason, Record};

/// Why a pipeline could not start, or ended in failure ([`LiveError::SinkFailed`], from
/// [`RunSummary::check`]). Other failures while it runs are logged and counted, never fatal.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// `[pipeline] metrics` is not a socket address.
    #[error("`[pipeline] metrics`: `{0}` is not an address like `127.0.0.1:9100`")]
    MetricsAddress(String),
    /// A source could not be opened (file, socket).
    #[error(transparent)]
    Source(#[from] source::OpenError),
    /// A stage could not be built (GPU demanded but absent, training failed).
    #[error("stage `{stage}`: {source}")]
    Stage {
        /// The stage.
        stage: String,
        /// Why.
        source: stage::StageError,
    },
    /// A sink could not be opened.
    #[error(transparent)]
    Sink(#[from] sink::SinkError),
    /// The metrics endpoint could not be started.
    #[error(transparent)]
    Metrics(#[from] telemetry::MetricsError),
    /// The live view could not be started (its address cannot be bound, …).
    #[error(transparent)]
    View(#[from] view::ViewError),
    /// A sink's write failed (`on_error = "stop"`, the default): the run stopped, and the
    /// results the sink did not write are lost.
    #[error(
        "sink `{sink}` failed: {error}; {lost} results lost (the run was stopped; `on_error = \"retry\"` keeps results while a sink fails)"
    )]
    SinkFailed {
        /// The sink.
        sink: String,
        /// Its first write error.
        error: String,
        /// Results it did not write.
        lost: u64,
    },
    /// A thread or the control-plane runtime could not be started.
    #[error("{what}: {message}")]
    Start {
        /// What was being started.
        what: String,
        /// Why it failed.
        message: String,
    },
}

impl LiveError {
    fn start(what: impl Into<String>, e: impl std::fmt::Display) -> Self {
        Self::Start {
            what: what.into(),
            message: e.to_string(),
        }
    }
}

/// How to run a pipeline besides its file.
#[derive(Debug, Default)]
pub struct RunOptions {
    /// Serve Prometheus metrics here (overrides `[pipeline] metrics`).
    pub metrics: Option<SocketAddr>,
    /// Every result, after the sinks wrote it (benchmarks and tests).
    pub tap: Option<Sender<Output>>,
    /// Set to stop the pipeline as a signal would (tests; `None`: a fresh flag).
    pub stop: Option<Arc<AtomicBool>>,
    /// Install SIGINT/SIGTERM handlers (the CLI does; tests do not).
    pub handle_signals: bool,
    /// Sinks made in code ([`sink::Sink::custom`]), written after the pipeline file's; each
    /// name must differ from the file's sinks and from the others.
    pub sinks: Vec<sink::Sink>,
    /// Serve the live view here (overrides `[pipeline] ui`; [`view`]).
    pub ui: Option<SocketAddr>,
    /// Seconds of the live view's rasters (overrides `[pipeline] ui_span_s`; default 10).
    pub ui_span_s: Option<f64>,
}

/// Counters of a finished run.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    /// This run's id (every window line's `run_id`): the start time in Unix milliseconds and
    /// the process id, `<ms>-<pid>`, so lines appended by a restarted run are told apart.
    pub run_id: String,
    /// Per source: events refused ([`Refused`]: out of range, duplicates).
    pub refused: BTreeMap<String, Refused>,
    /// Per spike or sensor window definition: late events (samples) it rejected.
    pub late: BTreeMap<String, u64>,
    /// Per spike window definition: events it refused because its open windows held
    /// `max_open_events` (`overflow`; [`window::SpikeWindower::with_max_open_events`]).
    pub overflow: BTreeMap<String, u64>,
    /// Per source: events accepted, dropped, malformed messages.
    pub sources: BTreeMap<String, (u64, u64, u64)>,
    /// Per stage on windows: the windows its window thread did not give it because its
    /// queue was full (`when_full = "drop_newest"` or `"drop_oldest"`; zero for `"block"`).
    /// Those events are in the windows the source's other stages got; they are not in the
    /// source's `dropped`.
    pub stage_dropped: BTreeMap<String, StageDrops>,
    /// Results written, per sink.
    pub sinks: BTreeMap<String, u64>,
    /// Results lost, per sink whose writes failed ([`sink::Sink::lost`]).
    pub sinks_lost: BTreeMap<String, u64>,
    /// Per sink that stopped the run (`on_error = "stop"`): its first write error.
    pub sink_failures: BTreeMap<String, String>,
    /// Result latencies per stage, then per sink: wall-clock seconds from each window's close
    /// to its line being written by that sink ([`sink::ResultLatency`]: every measurement,
    /// p50, p99, max). A stage keeps up when they stay below its window's hop.
    pub result_latency: BTreeMap<String, BTreeMap<String, sink::ResultLatency>>,
    /// Per detect stage: events accepted, late, ignored, occurrences reported.
    pub detectors: BTreeMap<String, crate::episode::DetectorStats>,
    /// Per TTL sink: requests by outcome and their latencies.
    pub ttl: BTreeMap<String, ttl::TtlSummary>,
    /// The live view's counters, when it ran.
    pub view: Option<view::ViewSummary>,
}

impl RunSummary {
    /// `Err` when a sink stopped the run ([`LiveError::SinkFailed`], the first such sink by
    /// name); `synfire run` exits with it.
    ///
    /// # Errors
    /// [`LiveError::SinkFailed`].
    pub fn check(&self) -> Result<(), LiveError> {
        match self.sink_failures.iter().next() {
            Some((sink, error)) => Err(LiveError::SinkFailed {
                sink: sink.clone(),
                error: error.clone(),
                lost: self.sinks_lost.get(sink).copied().unwrap_or(0),
            }),
            None => Ok(()),
        }
    }
}

/// What a window definition refused, at the end of a run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct WindowCounts {
    late: u64,
    overflow: u64,
}

/// What a stage was not given because its queue was full ([`RunSummary::stage_dropped`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct StageDrops {
    /// Windows dropped for the stage (never processed by it).
    pub windows: u64,
    /// Their events (spikes or samples).
    pub events: u64,
}

/// Events a source refused besides drops: the line's `out_of_range` and `duplicate`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Absurd times and isolated strays ahead ([`window::EventClock`]).
    pub out_of_range: u64,
    /// Repeats of a wire message already received.
    pub duplicate: u64,
}

/// How long after a stop the window threads wait for a stage to take a window, and the run
/// waits for its stages, before counting what is left as dropped.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(1500);

/// The stop flag and when it was first seen set: the shutdown deadline.
#[derive(Debug)]
struct Shutdown {
    stop: Arc<AtomicBool>,
    since: std::sync::OnceLock<std::time::Instant>,
}

impl Shutdown {
    fn new(stop: Arc<AtomicBool>) -> Self {
        Self {
            stop,
            since: std::sync::OnceLock::new(),
        }
    }

    /// Whether a stop was requested more than [`SHUTDOWN_GRACE`] ago.
    fn past_deadline(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
            && self.since.get_or_init(std::time::Instant::now).elapsed() >= SHUTDOWN_GRACE
    }
}

/// Sends a window to a stage's queue, waiting while the stage is busy (backpressure), but
/// after a stop only until the shutdown deadline. `false`: not taken (counted by the caller).
fn send_window(s: &Sender<Arc<Window>>, w: &Arc<Window>, shutdown: &Shutdown) -> bool {
    use crossbeam_channel::SendTimeoutError;
    if shutdown.past_deadline() {
        // Past the deadline no window waits: what the ring still holds is counted quickly.
        return s.try_send(w.clone()).is_ok();
    }
    loop {
        match s.send_timeout(w.clone(), std::time::Duration::from_millis(50)) {
            Ok(()) => return true,
            Err(SendTimeoutError::Disconnected(_)) => return false,
            Err(SendTimeoutError::Timeout(_)) => {
                if shutdown.past_deadline() {
                    return false;
                }
            }
        }
    }
}

/// One stage's queue as its window thread feeds it, under the stage's `when_full`.
struct StageQueue {
    name: Arc<str>,
    tx: Sender<Arc<Window>>,
    /// The queue's other end, to take its oldest window back (`drop_oldest` only).
    oldest: Option<Receiver<Arc<Window>>>,
    when_full: stage::WhenFull,
    control: Arc<stage::StageControl>,
    /// `synfire_stage_windows_dropped_total` and `synfire_stage_events_dropped_total` of
    /// the stage (`reason="queue_full"`).
    dropped: (metrics::Counter, metrics::Counter),
}

impl StageQueue {
    /// Gives `w` to the stage as its `when_full` says: waits while the queue is full
    /// ([`send_window`]), or drops the window that does not fit or the oldest one queued,
    /// counted ([`Self::count_dropped`]). `false`: not taken and not counted (the shutdown
    /// deadline passed, or the stage is gone); the caller counts it.
    fn offer(&self, w: &Arc<Window>, shutdown: &Shutdown) -> bool {
        use crossbeam_channel::TrySendError;
        use stage::WhenFull;
        let events = w.events() as u64;
        // Counted as queued before the send, so a stage that takes it at once never makes
        // the count go below zero.
        self.control.queued.fetch_add(events, Ordering::Relaxed);
        let taken = match self.when_full {
            WhenFull::Block => send_window(&self.tx, w, shutdown),
            WhenFull::DropNewest => match self.tx.try_send(w.clone()) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => {
                    self.control.take_queued(events);
                    self.count_dropped(w);
                    return true;
                }
                Err(TrySendError::Disconnected(_)) => false,
            },
            WhenFull::DropOldest => {
                let mut next = w.clone();
                loop {
                    match self.tx.try_send(next) {
                        Ok(()) => break true,
                        Err(TrySendError::Disconnected(_)) => break false,
                        // This thread is the queue's only sender: once one window is out
                        // (taken back here, or by the stage meanwhile), the next try fits.
                        Err(TrySendError::Full(back)) => {
                            next = back;
                            if let Some(old) = self.oldest.as_ref().and_then(|r| r.try_recv().ok())
                            {
                                self.control.take_queued(old.events() as u64);
                                self.count_dropped(&old);
                            }
                        }
                    }
                }
            }
        };
        if !taken {
            self.control.take_queued(events);
        }
        taken
    }

    /// Counts window `w` as dropped for this stage (its control, its metrics) and logs the
    /// 1st, 2nd, 4th, 8th, … drop, so a stage that cannot keep up is seen without a line
    /// per window.
    fn count_dropped(&self, w: &Window) {
        let events = w.events() as u64;
        let n = self.control.dropped_windows.fetch_add(1, Ordering::Relaxed) + 1;
        self.control
            .dropped_events
            .fetch_add(events, Ordering::Relaxed);
        self.dropped.0.increment(1);
        self.dropped.1.increment(events);
        if n.is_power_of_two() {
            tracing::warn!(
                stage = %self.name,
                window = %w.window,
                index = w.index,
                events,
                windows_dropped = n,
                when_full = self.when_full.as_str(),
                "A stage's queue is full: a window was dropped for it (counted; the other stages go on)."
            );
        }
    }
}

/// This run's id: `<Unix ms>-<pid>`.
fn new_run_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{ms}-{}", std::process::id())
}

/// Joins named threads on drop (so an early error never leaves threads detached).
struct Threads(Vec<JoinHandle<()>>);

impl Threads {
    fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> Result<(), LiveError> {
        let h = std::thread::Builder::new()
            .name(name.clone())
            .spawn(f)
            .map_err(|e| LiveError::start(format!("starting thread {name}"), e))?;
        self.0.push(h);
        Ok(())
    }

    /// Joins every thread; once a stop is past its deadline ([`Shutdown::past_deadline`]),
    /// calls `at_deadline` (sinks and stages give up), waits a little more, then leaves the
    /// threads still running behind (detached) and returns their names.
    fn join_all_until(&mut self, shutdown: &Shutdown, at_deadline: impl FnOnce()) -> Vec<String> {
        let mut at_deadline = Some(at_deadline);
        let mut since: Option<std::time::Instant> = None;
        loop {
            let mut i = 0;
            while i < self.0.len() {
                if self.0[i].is_finished() {
                    let h = self.0.swap_remove(i);
                    let name = h.thread().name().unwrap_or("?").to_owned();
                    if h.join().is_err() {
                        tracing::error!(thread = %name, "Thread panicked.");
                    }
                } else {
                    i += 1;
                }
            }
            if self.0.is_empty() {
                return Vec::new();
            }
            if shutdown.past_deadline() {
                if let Some(f) = at_deadline.take() {
                    f();
                }
                let t = *since.get_or_insert_with(std::time::Instant::now);
                if t.elapsed() >= std::time::Duration::from_millis(300) {
                    return self
                        .0
                        .drain(..)
                        .map(|h| h.thread().name().unwrap_or("?").to_owned())
                        .collect();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn join_all(&mut self) {
        for h in self.0.drain(..) {
            let name = h.thread().name().unwrap_or("?").to_owned();
            if h.join().is_err() {
                tracing::error!(thread = %name, "Thread panicked.");
            }
        }
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.join_all();
    }
}

struct WindowRoute {
    windower: Windower,
    /// Each reading stage's queue (its control counts the events queued for it).
    stages: Vec<StageQueue>,
    /// The preview slots of the stages among `stages` that want previews of open windows.
    previews: Vec<stage::PreviewSender>,
}

/// What a window thread reports at its end: its detect stages' counters and, per window
/// definition, the late events it rejected.
type WindowTotals = (
    Vec<(String, crate::episode::DetectorStats)>,
    Vec<(String, WindowCounts)>,
);

/// The window thread of one source: pops records, passes each spike through the source's
/// event clock ([`window::EventClock`]: out-of-range times refused, jumps confirmed or strays
/// refused), feeds every window definition of the source, sends closed windows to their
/// stages ([`StageQueue::offer`]: as each stage's `when_full` says; blocking, backpressure
/// reaches the ring, and after a stop it waits at most until the shutdown deadline, then
/// counts the window as dropped) and previews to the preview slots
/// of the stages that want them (never blocking: a newer preview replaces one not taken yet,
/// and previews never queue ahead of real windows).
fn window_loop(
    mut ring: RingConsumer,
    mut routes: Vec<WindowRoute>,
    mut detectors: Vec<Box<dyn stage::SpikeStage>>,
    view: Option<view::SourceFeed>,
    clock: window::ClockRules,
    run_id: Arc<str>,
    shutdown: &Shutdown,
) -> WindowTotals {
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut shared: Arc<[Arc<str>]> = Arc::from(Vec::new());
    let mut out = Vec::new();
    let mut clocked = Vec::new();
    let mut clock = window::EventClock::new(clock);
    let stats = ring.stats().clone();
    let counters = ring.counters();
    // The source's epoch: one more after each restart's windows were sent.
    let mut epoch = 0u32;
    let send = |routes: &mut Vec<WindowRoute>,
                out: &mut Vec<Window>,
                i: usize,
                clock: &window::EventClock,
                epoch: u32| {
        for mut w in out.drain(..) {
            w.out_of_range += clock.out_of_range();
            w.duplicate = stats.duplicate.load(Ordering::Relaxed);
            w.epoch = epoch;
            w.run_id = run_id.clone();
            let w = Arc::new(w);
            if w.preview {
                for s in &routes[i].previews {
                    s.offer(w.clone());
                }
                continue;
            }
            for q in &routes[i].stages {
                if !q.offer(&w, shutdown) {
                    counters.count_dropped(w.events() as u64, "shutdown");
                    tracing::warn!(window = %w.window, index = w.index, events = w.events(), "Shutdown: a stage did not take a window in time; its events are counted as dropped.");
                }
            }
        }
    };
    // Passes what the clock let through to the detect stages, the view and the windows.
    let pass = |clocked: &mut Vec<Clocked>,
                routes: &mut Vec<WindowRoute>,
                detectors: &mut Vec<Box<dyn stage::SpikeStage>>,
                out: &mut Vec<Window>,
                shared: &Arc<[Arc<str>]>,
                clock: &window::EventClock,
                epoch: &mut u32,
                arrived: std::time::Instant| {
        let dropped = stats.dropped.load(Ordering::Relaxed);
        for c in clocked.drain(..) {
            match c {
                Clocked::Spike(t_s, unit) => {
                    // Detection first: a closed loop waits on nothing else.
                    // `arrived`: when the record that let it through was popped (a spike
                    // the clock held waited there for at most `confirm_events` spikes).
                    for d in detectors.iter_mut() {
                        d.spike(t_s, unit, arrived);
                    }
                    if let Some(v) = &view {
                        v.spike(t_s, unit);
                    }
                    for i in 0..routes.len() {
                        if let Windower::Spikes(w) = &mut routes[i].windower {
                            w.push(t_s, unit, shared, dropped, out);
                        }
                        if !out.is_empty() {
                            send(routes, out, i, clock, *epoch);
                        }
                    }
                }
                Clocked::Gap(gap) => {
                    for r in routes.iter_mut() {
                        if let Windower::Spikes(w) = &mut r.windower {
                            w.gap(gap);
                        }
                    }
                }
                Clocked::Restart(gap) => {
                    for d in detectors.iter_mut() {
                        d.restart();
                    }
                    if let Some(v) = &view {
                        v.restart();
                    }
                    for i in 0..routes.len() {
                        if let Windower::Spikes(w) = &mut routes[i].windower {
                            w.restart(gap, shared, dropped, out);
                        }
                        send(routes, out, i, clock, *epoch);
                    }
                    *epoch += 1;
                }
            }
        }
    };
    loop {
        let record = ring.pop();
        let arrived = std::time::Instant::now();
        let dropped = stats.dropped.load(Ordering::Relaxed);
        match record {
            Record::Spike { unit, t_s } => {
                clock.spike(t_s, unit, &mut clocked);
                counters.set_out_of_range(clock.out_of_range());
                pass(
                    &mut clocked,
                    &mut routes,
                    &mut detectors,
                    &mut out,
                    &shared,
                    &clock,
                    &mut epoch,
                    arrived,
                );
            }
            Record::Disconnected => clock.disconnected(),
            Record::Unit { id, name } => {
                let id = id as usize;
                if names.len() <= id {
                    names.resize(id + 1, Arc::from("?"));
                }
                for d in &mut detectors {
                    d.announce(id as u32, name.clone());
                }
                if let Some(v) = &view {
                    v.unit(id as u32, name.clone());
                }
                names[id] = name;
                shared = Arc::from(names.clone());
            }
            Record::Samples(frame) => {
                for i in 0..routes.len() {
                    if let Windower::Sensor(w) = &mut routes[i].windower {
                        w.push(&frame, dropped, &mut out);
                    }
                    if !out.is_empty() {
                        send(&mut routes, &mut out, i, &clock, epoch);
                    }
                }
            }
            Record::Restart | Record::End(_) => {
                let restart = matches!(record, Record::Restart);
                // A hold ends unconfirmed: strays back are passed on first.
                clock.end_epoch(false, &mut clocked);
                counters.set_out_of_range(clock.out_of_range());
                pass(
                    &mut clocked,
                    &mut routes,
                    &mut detectors,
                    &mut out,
                    &shared,
                    &clock,
                    &mut epoch,
                    arrived,
                );
                let dropped = stats.dropped.load(Ordering::Relaxed);
                for d in &mut detectors {
                    if restart {
                        d.restart();
                    } else {
                        d.finish();
                    }
                }
                if let (Some(v), true) = (&view, restart) {
                    v.restart();
                }
                if matches!(record, Record::End(EndReason::Interrupted)) {
                    // Shutdown: the windows still open are emitted, marked incomplete (their
                    // stages take them while the shutdown deadline allows; what they cannot
                    // take is counted as dropped).
                    let open: usize = routes
                        .iter()
                        .map(|r| match &r.windower {
                            Windower::Spikes(w) => w.open_events(),
                            Windower::Sensor(w) => w.open_samples(),
                        })
                        .sum();
                    if open > 0 {
                        tracing::info!(
                            events = open,
                            "Shutdown: the windows still open are emitted, marked incomplete."
                        );
                    }
                }
                for i in 0..routes.len() {
                    match &mut routes[i].windower {
                        Windower::Spikes(w) => w.flush(&shared, dropped, &mut out),
                        Windower::Sensor(w) => w.flush(dropped, &mut out),
                    }
                    send(&mut routes, &mut out, i, &clock, epoch);
                }
                clock.end_epoch(restart, &mut clocked);
                if restart {
                    epoch += 1;
                }
                if !restart {
                    break;
                }
            }
        }
    }
    let late = routes
        .iter()
        .map(|r| match &r.windower {
            Windower::Spikes(w) => (
                w.name().to_owned(),
                WindowCounts {
                    late: w.late(),
                    overflow: w.overflow(),
                },
            ),
            Windower::Sensor(w) => (
                w.name().to_owned(),
                WindowCounts {
                    late: w.late(),
                    overflow: 0,
                },
            ),
        })
        .collect();
    (
        detectors
            .iter()
            .map(|d| (d.name().to_owned(), d.stats()))
            .collect(),
        late,
    )
}

/// Runs the pipeline until its sources end (archives) or a stop is requested (signal, or
/// `options.stop`).
///
/// # Errors
/// Anything that fails while building (a file that cannot be read, a socket that cannot be
/// bound, a GPU demanded but absent), naming the component. Failures while running are
/// logged and counted, never fatal.
pub fn run(config: &PipelineConfig, options: RunOptions) -> Result<RunSummary, LiveError> {
    let stop = options.stop.clone().unwrap_or_default();
    let run_id: Arc<str> = Arc::from(new_run_id());
    let shutdown = Arc::new(Shutdown::new(stop.clone()));
    tracing::info!(run_id = %run_id, "Run started.");
    let ctx = zmq::Context::new();
    let metrics_addr = match options.metrics {
        Some(a) => Some(a),
        None => config
            .pipeline
            .metrics
            .as_deref()
            .map(|m| {
                m.parse()
                    .map_err(|_| LiveError::MetricsAddress(m.to_owned()))
            })
            .transpose()?,
    };
    let guard = exposure::Guard {
        hosts: config.pipeline.ui_hosts.clone().unwrap_or_default(),
        token: config.pipeline.ui_token.clone(),
        refused: Arc::default(),
    };
    warn_exposed_endpoints(config);
    let control = control_plane(
        metrics_addr,
        guard,
        options.handle_signals.then(|| bound_ipc_files(config)),
        stop.clone(),
    )?;
    // The live view binds its address now, so a taken address fails the run before it starts.
    let live_view = view::start_for(config, options.ui, options.ui_span_s)?;

    // Build: sources opened (files read, sockets opened), stages, sinks. Nothing runs yet.
    let open_ctx = OpenContext { zmq: &ctx };
    let mut built = Vec::new();
    for (name, s) in &config.sources {
        built.push((name.clone(), s.open(name, &open_ctx)?));
    }
    let (out_tx, out_rx) = bounded::<Output>(64);
    // Per window: each reading stage's queue, and whether the stage wants previews.
    type StageInput = (StageQueue, Option<stage::PreviewSender>);
    let mut stage_inputs: BTreeMap<&str, Vec<StageInput>> = BTreeMap::new();
    type StageThread = (
        String,
        Box<dyn AnyStage>,
        Receiver<Arc<Window>>,
        Option<stage::PreviewReceiver>,
        Arc<stage::StageControl>,
    );
    let mut stages: Vec<StageThread> = Vec::new();
    for (name, s) in &config.stages {
        let st = s.builder.build().map_err(|source| LiveError::Stage {
            stage: name.clone(),
            source,
        })?;
        let when_full = s.when_full();
        let (tx, rx) = bounded(s.queue_windows(&config.pipeline));
        let (preview_tx, preview_rx) = if st.wants_previews() {
            let (ptx, prx) = stage::preview_slot();
            (Some(ptx), Some(prx))
        } else {
            (None, None)
        };
        let control = Arc::new(stage::StageControl::default());
        stage_inputs.entry(s.window.as_str()).or_default().push((
            StageQueue {
                name: Arc::from(name.as_str()),
                tx,
                oldest: (when_full == stage::WhenFull::DropOldest).then(|| rx.clone()),
                when_full,
                control: control.clone(),
                dropped: telemetry::stage_dropped(name, "queue_full"),
            },
            preview_tx,
        ));
        stages.push((name.clone(), st, rx, preview_rx, control));
    }
    let mut sinks = Vec::new();
    // Side-thread sinks that detect stages signal (their kind decides: `sink::Opened`).
    let mut signal_sinks: Vec<(String, Box<dyn sink::SignalSink>, Vec<String>)> = Vec::new();
    for (name, s) in &config.sinks {
        match s.open(name, &ctx)? {
            sink::Opened::Lines(l) => sinks.push(l),
            sink::Opened::Signals(t) => {
                signal_sinks.push((name.clone(), t, s.stages().unwrap_or_default().to_vec()));
            }
        }
    }
    for s in options.sinks {
        if sinks.iter().any(|o: &sink::Sink| o.name() == s.name()) {
            return Err(sink::SinkError {
                sink: s.name().to_owned(),
                message: "another sink of the run has this name".into(),
            }
            .into());
        }
        sinks.push(s);
    }

    // Stages on spikes (detect), by source; what they observe of other stages' lines (a
    // detect stage refreshed from an episodes stage).
    let mut detectors: BTreeMap<&str, Vec<Box<dyn stage::SpikeStage>>> = BTreeMap::new();
    let mut observers: Vec<Box<dyn stage::ResultObserver>> = Vec::new();
    for (name, spec) in &config.spike_stages {
        let signals: Vec<ttl::TtlSender> = signal_sinks
            .iter()
            .filter(|(_, _, stages)| stages.iter().any(|s| s == name))
            .map(|(_, t, _)| t.sender())
            .collect();
        let built = spec
            .builder
            .build(name, signals, out_tx.clone())
            .map_err(|source| LiveError::Stage {
                stage: name.clone(),
                source,
            })?;
        detectors
            .entry(spec.source.as_str())
            .or_default()
            .push(built.stage);
        observers.extend(built.observer);
    }

    // Connect and spawn, back to front.
    let mut threads = Threads(Vec::new());
    let tap = options.tap;
    let view_lines = live_view.as_ref().and_then(view::View::lines);
    struct SinkTotals {
        name: String,
        written: u64,
        lost: u64,
        failed: Option<String>,
        latencies: BTreeMap<String, sink::ResultLatency>,
    }
    let (sink_done_tx, sink_done_rx) = bounded::<Vec<SinkTotals>>(1);
    // Set at the shutdown deadline: the sink thread writes what it has and ends, even while a
    // stage still holds a sender.
    let quit_sinks = Arc::new(AtomicBool::new(false));
    let quit = quit_sinks.clone();
    let sink_stop = stop.clone();
    threads.spawn("synfire:sinks".into(), move || {
        loop {
            let mut out = match out_rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(o) => o,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                    if quit.load(Ordering::Relaxed) {
                        break;
                    }
                    continue;
                }
            };
            if !out.preview {
                for r in observers.iter().filter(|r| r.stage() == &*out.stage) {
                    r.offer(&out);
                }
            }
            for s in &mut sinks {
                if s.takes(&out.stage) && s.offer(&out) == sink::Offered::Failed {
                    // The run stops as on a signal; what is queued still reaches the sinks
                    // (the failed one counts it lost).
                    sink_stop.store(true, Ordering::Relaxed);
                }
            }
            out.published_at = Some(std::time::Instant::now());
            if let Some(v) = &view_lines {
                v.line(&out);
            }
            if let Some(t) = &tap {
                let _ = t.send(out);
            }
        }
        for s in &mut sinks {
            if let Err(e) = s.finish() {
                tracing::error!(sink = s.name(), error = %e, "Sink flush failed.");
            }
        }
        let _ = sink_done_tx.send(
            sinks
                .iter_mut()
                .map(|s| SinkTotals {
                    name: s.name().to_owned(),
                    written: s.count(),
                    lost: s.lost(),
                    failed: (s.failure_policy() == sink::OnError::Stop)
                        .then(|| s.error().map(str::to_owned))
                        .flatten(),
                    latencies: s.take_result_latencies(),
                })
                .collect(),
        );
    })?;
    let mut controls = Vec::new();
    for (name, mut st, rx, previews, control) in stages {
        let tx = out_tx.clone();
        let label: Arc<str> = Arc::from(name.as_str());
        let source = config
            .windows
            .get(config.stages[&name].window.as_str())
            .map(|w| w.source.clone())
            .unwrap_or_default();
        controls.push((name.clone(), source, control.clone()));
        threads.spawn(format!("synfire:stage-{name}"), move || {
            stage::run_controlled(&label, st.as_mut(), &rx, previews.as_ref(), &tx, &control);
        })?;
    }
    drop(out_tx);
    let detector_totals: Arc<parking_lot::Mutex<BTreeMap<String, crate::episode::DetectorStats>>> =
        Arc::default();
    let late_totals: Arc<parking_lot::Mutex<BTreeMap<String, WindowCounts>>> = Arc::default();
    let mut stats = Vec::new();
    for (name, source) in built {
        let kind = config.sources[&name].produces();
        let (capacity, overflow) = config.sources[&name].ring();
        let (prod, cons) = buffer::ring(&name, capacity, overflow, stop.clone());
        stats.push((name.clone(), cons.stats().clone()));
        let mut routes = Vec::new();
        for (wname, w) in config.windows.iter().filter(|(_, w)| w.source == name) {
            let inputs = stage_inputs.remove(wname.as_str()).unwrap_or_default();
            let previews: Vec<_> = inputs.iter().filter_map(|(_, p)| p.clone()).collect();
            routes.push(WindowRoute {
                windower: w.windower(wname, &name, kind, !previews.is_empty()),
                stages: inputs.into_iter().map(|(q, _)| q).collect(),
                previews,
            });
        }
        let detect = detectors.remove(name.as_str()).unwrap_or_default();
        let totals = detector_totals.clone();
        let late = late_totals.clone();
        let view_feed = live_view
            .as_ref()
            .and_then(|v| v.source(&name, cons.stats().clone()));
        let clock = config.sources[&name].clock();
        let run = run_id.clone();
        let shutdown = shutdown.clone();
        threads.spawn(format!("synfire:win-{name}"), move || {
            let (stats, lates) =
                window_loop(cons, routes, detect, view_feed, clock, run, &shutdown);
            totals.lock().extend(stats);
            late.lock().extend(lates);
        })?;
        threads.spawn(format!("synfire:src-{name}"), move || source.run(prod))?;
    }
    drop(stage_inputs);
    drop(detectors);
    let stuck = threads.join_all_until(&shutdown, || {
        quit_sinks.store(true, Ordering::Relaxed);
        for (_, _, c) in &controls {
            c.cancel.store(true, Ordering::Relaxed);
        }
    });
    if !stuck.is_empty() {
        tracing::warn!(
            threads = ?stuck,
            "Shutdown: threads still busy at the deadline were left behind (a stage computing a window, a sink blocked on its output)."
        );
    }
    // Windows a stage did not finish by the deadline: counted as dropped by their source.
    let mut unfinished: BTreeMap<String, u64> = BTreeMap::new();
    // Windows a stage's full queue made the window thread drop (`when_full`): counted per stage.
    let mut stage_dropped = BTreeMap::new();
    for (name, _, c) in &controls {
        let d = StageDrops {
            windows: c.dropped_windows.load(Ordering::Relaxed),
            events: c.dropped_events.load(Ordering::Relaxed),
        };
        let when_full = config.stages[name.as_str()].when_full().as_str();
        tracing::info!(stage = %name, when_full, windows_dropped = d.windows, events_dropped = d.events, "Stage totals.");
        stage_dropped.insert(name.clone(), d);
    }
    for (name, source, c) in &controls {
        // Queued (never taken: the stage was left computing), in flight, or skipped.
        let n = c.queued.load(Ordering::Relaxed)
            + c.in_flight.load(Ordering::Relaxed)
            + c.skipped.load(Ordering::Relaxed);
        if n > 0 {
            tracing::warn!(stage = %name, events = n, "Shutdown: windows the stage did not finish by the deadline; their events are counted as dropped.");
            *unfinished.entry(source.clone()).or_default() += n;
            telemetry::SourceMetrics::new(source).dropped("shutdown", n);
        }
    }
    let window_counts = std::mem::take(&mut *late_totals.lock());
    for (window, c) in &window_counts {
        tracing::info!(window = %window, late = c.late, overflow = c.overflow, "Window totals.");
    }
    let mut summary = RunSummary {
        run_id: run_id.to_string(),
        late: window_counts
            .iter()
            .map(|(w, c)| (w.clone(), c.late))
            .collect(),
        overflow: window_counts
            .iter()
            .filter(|(_, c)| c.overflow > 0)
            .map(|(w, c)| (w.clone(), c.overflow))
            .collect(),
        detectors: std::mem::take(&mut *detector_totals.lock()),
        stage_dropped,
        view: live_view.map(view::View::finish),
        ..RunSummary::default()
    };
    for (name, t, _) in signal_sinks {
        summary.ttl.insert(name, t.join());
    }
    for (name, s) in stats {
        let v = (
            s.events_in.load(Ordering::Relaxed),
            s.dropped.load(Ordering::Relaxed) + unfinished.get(&name).copied().unwrap_or(0),
            s.malformed.load(Ordering::Relaxed),
        );
        let refused = Refused {
            out_of_range: s.out_of_range.load(Ordering::Relaxed),
            duplicate: s.duplicate.load(Ordering::Relaxed),
        };
        tracing::info!(source = %name, events_in = v.0, dropped = v.1, malformed = v.2, out_of_range = refused.out_of_range, duplicate = refused.duplicate, "Source totals.");
        summary.refused.insert(name.clone(), refused);
        summary.sources.insert(name, v);
    }
    if let Ok(list) = sink_done_rx.try_recv() {
        for t in list {
            for (stage, latency) in t.latencies {
                summary
                    .result_latency
                    .entry(stage)
                    .or_default()
                    .insert(t.name.clone(), latency);
            }
            tracing::info!(sink = %t.name, written = t.written, lost = t.lost, "Sink totals.");
            if t.lost > 0 {
                summary.sinks_lost.insert(t.name.clone(), t.lost);
            }
            if let Some(e) = t.failed {
                summary.sink_failures.insert(t.name.clone(), e);
            }
            summary.sinks.insert(t.name, t.written);
        }
    }
    for (stage, per_sink) in &summary.result_latency {
        for (sink, l) in per_sink {
            tracing::info!(
                stage = %stage,
                sink = %sink,
                windows = l.windows(),
                p50_s = l.p50().unwrap_or(0.0),
                p99_s = l.p99().unwrap_or(0.0),
                max_s = l.max().unwrap_or(0.0),
                incomplete_windows = l.incomplete,
                "Result latency (window close to line written; complete windows)."
            );
        }
    }
    drop(control);
    drop(ctx);
    remove_ipc_files(config);
    Ok(summary)
}

/// The `ipc://` endpoints the run bound (ZMQ sources with `mode = "bind"`, `zmq_pub` sinks
/// unless `mode = "connect"`): their socket files, removed at the end of the run so none is
/// left behind (libzmq leaves them).
fn bound_ipc_files(config: &PipelineConfig) -> Vec<std::path::PathBuf> {
    bound_endpoints(config)
        .into_iter()
        .filter_map(|e| e.strip_prefix("ipc://"))
        .map(std::path::PathBuf::from)
        .collect()
}

/// The ZMQ endpoints the run binds (as [`bound_ipc_files`] finds them).
fn bound_endpoints(config: &PipelineConfig) -> Vec<&str> {
    use config::section::SocketMode;
    let sources = config.sources.values().filter_map(|s| {
        s.options::<source::zmq::ZmqSourceConfig>()
            .filter(|z| z.mode == Some(SocketMode::Bind))
            .map(|z| z.endpoint.as_str())
    });
    let sinks = config.sinks.values().filter_map(|s| {
        s.options::<sink::zmq_pub::ZmqPubConfig>()
            .filter(|z| z.mode != Some(SocketMode::Connect))
            .map(|z| z.endpoint.as_str())
    });
    sources.chain(sinks).collect()
}

/// Warns for each ZMQ endpoint bound beyond loopback (`tcp://*:…`, `tcp://0.0.0.0:…`, a LAN
/// address or interface name): anyone who reaches it can read (PUB) or feed (SUB) it.
fn warn_exposed_endpoints(config: &PipelineConfig) {
    for e in bound_endpoints(config) {
        let Some(rest) = e.strip_prefix("tcp://") else {
            continue;
        };
        let host = rest.rsplit_once(':').map_or(rest, |(h, _)| h);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if !loopback {
            tracing::warn!(
                endpoint = %e,
                "A ZMQ socket is bound beyond this machine: anyone who reaches it can read or feed it (docs/live-view.md, \"Exposure\")."
            );
        }
    }
}

fn remove_ipc_files(config: &PipelineConfig) {
    for path in bound_ipc_files(config) {
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(path = %path.display(), "Removed the ipc:// socket file."),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "Cannot remove the ipc:// socket file.");
            }
        }
    }
}

/// The tokio side: metrics HTTP and signals, on one named thread; stops when dropped.
struct Control {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `signals`: watch SIGINT/SIGTERM, with the `ipc://` files to remove before a second signal
/// exits at once.
fn control_plane(
    metrics: Option<SocketAddr>,
    guard: exposure::Guard,
    signals: Option<Vec<std::path::PathBuf>>,
    stop: Arc<AtomicBool>,
) -> Result<Control, LiveError> {
    if metrics.is_none() && signals.is_none() {
        return Ok(Control {
            shutdown: None,
            thread: None,
        });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| LiveError::start("starting the control-plane runtime", e))?;
    let exporter = match metrics {
        Some(addr) => {
            // The listener binds inside the runtime.
            let _guard = rt.enter();
            Some(telemetry::install_prometheus(addr, guard)?)
        }
        None => None,
    };
    if let Some(addr) = metrics {
        tracing::info!(%addr, "Serving Prometheus metrics at /metrics.");
    }
    let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("synfire:control".into())
        .spawn(move || {
            rt.block_on(async move {
                if let Some(exporter) = exporter {
                    tokio::spawn(exporter);
                }
                if let Some(ipc_files) = signals {
                    tokio::spawn(watch_signals(stop, ipc_files));
                }
                let _ = (&mut rx).await;
            });
        })
        .map_err(|e| LiveError::start("starting the control-plane thread", e))?;
    Ok(Control {
        shutdown: Some(tx),
        thread: Some(thread),
    })
}

async fn watch_signals(stop: Arc<AtomicBool>, ipc_files: Vec<std::path::PathBuf>) {
    #[cfg(unix)]
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "Cannot watch SIGTERM.");
            return;
        }
    };
    let mut count = 0;
    loop {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        count += 1;
        if count == 1 {
            tracing::info!(
                "Shutting down: sources stop, windows already closed finish, sinks flush. Signal again to exit at once."
            );
            stop.store(true, Ordering::Relaxed);
        } else {
            tracing::warn!("Second signal: exiting now.");
            for path in &ipc_files {
                let _ = std::fs::remove_file(path);
            }
            std::process::exit(130);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue of `capacity` windows for a stage that never takes one, under `when_full`.
    fn queue(capacity: usize, when_full: stage::WhenFull) -> (StageQueue, Receiver<Arc<Window>>) {
        let (tx, rx) = bounded(capacity);
        let q = StageQueue {
            name: Arc::from("slow"),
            tx,
            oldest: (when_full == stage::WhenFull::DropOldest).then(|| rx.clone()),
            when_full,
            control: Arc::default(),
            dropped: telemetry::stage_dropped("slow", "queue_full"),
        };
        (q, rx)
    }

    /// Window `index` holding `index + 1` samples.
    fn window(index: u64) -> Arc<Window> {
        let mut w = stage::test_window(vec![0.0; index as usize + 1], 1, 0);
        w.index = index;
        Arc::new(w)
    }

    #[test]
    fn a_full_queue_drops_the_newest_or_the_oldest_window_and_counts_it() {
        let shutdown = Shutdown::new(Arc::default());
        for (when_full, kept) in [
            (stage::WhenFull::DropNewest, [0, 1]),
            (stage::WhenFull::DropOldest, [3, 4]),
        ] {
            let (q, rx) = queue(2, when_full);
            for k in 0..5 {
                // Never waits, and every window is taken or counted.
                assert!(q.offer(&window(k), &shutdown), "{when_full:?}");
            }
            let queued: Vec<u64> = rx.try_iter().map(|w| w.index).collect();
            assert_eq!(queued, kept, "{when_full:?}");
            let c = &q.control;
            assert_eq!(c.dropped_windows.load(Ordering::Relaxed), 3);
            // Events: 1 + 2 + … + 5 = 15 offered; those queued are still counted queued.
            let kept_events: u64 = kept.iter().map(|k| k + 1).sum();
            assert_eq!(
                c.dropped_events.load(Ordering::Relaxed),
                15 - kept_events,
                "{when_full:?}"
            );
            assert_eq!(c.queued.load(Ordering::Relaxed), kept_events);
        }
    }

    #[test]
    fn a_blocking_queue_waits_until_the_shutdown_deadline_and_drops_nothing_itself() {
        let stop = Arc::new(AtomicBool::new(true));
        let shutdown = Shutdown::new(stop);
        let (q, _rx) = queue(1, stage::WhenFull::Block);
        assert!(q.offer(&window(0), &shutdown));
        let t = std::time::Instant::now();
        // Full: waits for the deadline, then is not taken (the caller counts it `shutdown`).
        assert!(!q.offer(&window(1), &shutdown));
        assert!(t.elapsed() >= SHUTDOWN_GRACE - std::time::Duration::from_millis(100));
        assert_eq!(q.control.dropped_windows.load(Ordering::Relaxed), 0);
        assert_eq!(q.control.queued.load(Ordering::Relaxed), 1);
    }
}
