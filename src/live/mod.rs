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
//! record, window threads discard open windows and drop their senders, stages finish the
//! windows already queued, the sink thread writes what arrives and flushes. At the end of an
//! archive, open windows that hold data are emitted (marked `complete: false`).

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
use window::{Window, Windower};

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
    /// Per source: events accepted, dropped, malformed messages.
    pub sources: BTreeMap<String, (u64, u64, u64)>,
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
    stages: Vec<Sender<Arc<Window>>>,
    /// The preview slots of the stages among `stages` that want previews of open windows.
    previews: Vec<stage::PreviewSender>,
}

/// The window thread of one source: pops records, feeds every window definition of the
/// source, sends closed windows to their stages (blocking: backpressure reaches the ring) and
/// previews to the preview slots of the stages that want them (never blocking: a newer preview
/// replaces one not taken yet, and previews never queue ahead of real windows).
fn window_loop(
    mut ring: RingConsumer,
    mut routes: Vec<WindowRoute>,
    mut detectors: Vec<Box<dyn stage::SpikeStage>>,
    view: Option<view::SourceFeed>,
) -> Vec<(String, crate::episode::DetectorStats)> {
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut shared: Arc<[Arc<str>]> = Arc::from(Vec::new());
    let mut out = Vec::new();
    let stats = ring.stats().clone();
    let send = |routes: &mut Vec<WindowRoute>, out: &mut Vec<Window>, i: usize| {
        for w in out.drain(..) {
            let w = Arc::new(w);
            if w.preview {
                for s in &routes[i].previews {
                    s.offer(w.clone());
                }
                continue;
            }
            for s in &routes[i].stages {
                let _ = s.send(w.clone());
            }
        }
    };
    loop {
        let record = ring.pop();
        let arrived = std::time::Instant::now();
        let dropped = stats.dropped.load(Ordering::Relaxed);
        match record {
            Record::Spike { unit, t_s } => {
                // Detection first: a closed loop waits on nothing else.
                for d in &mut detectors {
                    d.spike(t_s, unit, arrived);
                }
                if let Some(v) = &view {
                    v.spike(t_s, unit);
                }
                for i in 0..routes.len() {
                    if let Windower::Spikes(w) = &mut routes[i].windower {
                        w.push(t_s, unit, &shared, dropped, &mut out);
                    }
                    if !out.is_empty() {
                        send(&mut routes, &mut out, i);
                    }
                }
            }
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
                        send(&mut routes, &mut out, i);
                    }
                }
            }
            Record::Restart | Record::End(EndReason::Finished | EndReason::Failed) => {
                for d in &mut detectors {
                    if matches!(record, Record::Restart) {
                        d.restart();
                    } else {
                        d.finish();
                    }
                }
                if let (Some(v), Record::Restart) = (&view, &record) {
                    v.restart();
                }
                for i in 0..routes.len() {
                    match &mut routes[i].windower {
                        Windower::Spikes(w) => w.flush(&shared, dropped, &mut out),
                        Windower::Sensor(w) => w.flush(dropped, &mut out),
                    }
                    send(&mut routes, &mut out, i);
                }
                if !matches!(record, Record::Restart) {
                    break;
                }
            }
            Record::End(EndReason::Interrupted) => {
                for d in &mut detectors {
                    d.finish();
                }
                let discarded: usize = routes
                    .iter_mut()
                    .map(|r| match &mut r.windower {
                        Windower::Spikes(w) => w.discard(),
                        Windower::Sensor(w) => w.discard(),
                    })
                    .sum();
                if discarded > 0 {
                    tracing::info!(
                        events = discarded,
                        "Shutdown: discarded the events of windows still open."
                    );
                }
                break;
            }
        }
    }
    detectors
        .iter()
        .map(|d| (d.name().to_owned(), d.stats()))
        .collect()
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
    let queue = config.pipeline.stage_queue_windows.unwrap_or(4);
    let (out_tx, out_rx) = bounded::<Output>(64);
    // Per window: each reading stage's queue, and whether the stage wants previews.
    type StageInput = (Sender<Arc<Window>>, Option<stage::PreviewSender>);
    let mut stage_inputs: BTreeMap<&str, Vec<StageInput>> = BTreeMap::new();
    type StageThread = (
        String,
        Box<dyn AnyStage>,
        Receiver<Arc<Window>>,
        Option<stage::PreviewReceiver>,
    );
    let mut stages: Vec<StageThread> = Vec::new();
    for (name, s) in &config.stages {
        let st = s.builder.build().map_err(|source| LiveError::Stage {
            stage: name.clone(),
            source,
        })?;
        let (tx, rx) = bounded(queue);
        let (preview_tx, preview_rx) = if st.wants_previews() {
            let (ptx, prx) = stage::preview_slot();
            (Some(ptx), Some(prx))
        } else {
            (None, None)
        };
        stage_inputs
            .entry(s.window.as_str())
            .or_default()
            .push((tx, preview_tx));
        stages.push((name.clone(), st, rx, preview_rx));
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
    let sink_stop = stop.clone();
    threads.spawn("synfire:sinks".into(), move || {
        for mut out in &out_rx {
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
    for (name, mut st, rx, previews) in stages {
        let tx = out_tx.clone();
        let label: Arc<str> = Arc::from(name.as_str());
        threads.spawn(format!("synfire:stage-{name}"), move || {
            stage::run(&label, st.as_mut(), &rx, previews.as_ref(), &tx);
        })?;
    }
    drop(out_tx);
    let detector_totals: Arc<parking_lot::Mutex<BTreeMap<String, crate::episode::DetectorStats>>> =
        Arc::default();
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
                stages: inputs.into_iter().map(|(tx, _)| tx).collect(),
                previews,
            });
        }
        let detect = detectors.remove(name.as_str()).unwrap_or_default();
        let totals = detector_totals.clone();
        let view_feed = live_view
            .as_ref()
            .and_then(|v| v.source(&name, cons.stats().clone()));
        threads.spawn(format!("synfire:win-{name}"), move || {
            let stats = window_loop(cons, routes, detect, view_feed);
            totals.lock().extend(stats);
        })?;
        threads.spawn(format!("synfire:src-{name}"), move || source.run(prod))?;
    }
    drop(stage_inputs);
    drop(detectors);
    threads.join_all();
    let mut summary = RunSummary {
        detectors: std::mem::take(&mut *detector_totals.lock()),
        view: live_view.map(view::View::finish),
        ..RunSummary::default()
    };
    for (name, t, _) in signal_sinks {
        summary.ttl.insert(name, t.join());
    }
    for (name, s) in stats {
        let v = (
            s.events_in.load(Ordering::Relaxed),
            s.dropped.load(Ordering::Relaxed),
            s.malformed.load(Ordering::Relaxed),
        );
        tracing::info!(source = %name, events_in = v.0, dropped = v.1, malformed = v.2, "Source totals.");
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
