//! Running a pipeline: build everything, then connect, then spawn named threads.
//!
//! ```text
//!  [synfire:src-<name>] ─ SPSC ring ─> [synfire:win-<source>] ─ bounded ─> [synfire:stage-<name>] ─┐
//!   (zmq or hdf5)        (ringbuf)      (all windows of that    (crossbeam)   (episodes, summary)    │
//!                                        source)                                                      ▼
//!                                                        [synfire:sinks] <─ bounded (crossbeam) ──────┘
//!  [synfire:control]  tokio: Prometheus /metrics, SIGINT/SIGTERM → stop flag
//! ```
//!
//! Shutdown runs front to back: a signal sets the stop flag, sources push their final
//! record, window threads discard open windows and drop their senders, stages finish the
//! windows already queued, the sink thread writes what arrives and flushes. At the end of an
//! archive, open windows that hold data are emitted (marked `complete: false`).

pub mod config;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender, bounded};

use crate::buffer::{self, EndReason, Overflow, Record, RingConsumer};
use crate::ingest::archive::{self, ArchiveContent, ArchiveSource};
use crate::ingest::zmq::{self as zsource, ZmqSource};
use crate::sink::Sink;
use crate::stage::{self, Output, Stage, StreamKind};
use crate::window::{SensorWindower, SpikeWindower, Window};
use config::{PipelineConfig, SinkConfig, SocketMode, SourceConfig, StageConfig};

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
}

/// Counters of a finished run.
#[derive(Debug, Default, Clone)]
pub struct RunSummary {
    /// Per source: events accepted, dropped, malformed messages.
    pub sources: BTreeMap<String, (u64, u64, u64)>,
    /// Results written, per sink.
    pub sinks: BTreeMap<String, u64>,
}

/// Joins named threads on drop (so an early error never leaves threads detached).
struct Threads(Vec<JoinHandle<()>>);

impl Threads {
    fn spawn(&mut self, name: String, f: impl FnOnce() + Send + 'static) -> Result<()> {
        let h = std::thread::Builder::new()
            .name(name.clone())
            .spawn(f)
            .with_context(|| format!("starting thread {name}"))?;
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

enum Windower {
    Spikes(SpikeWindower),
    Sensor(SensorWindower),
}

struct WindowRoute {
    windower: Windower,
    stages: Vec<Sender<Arc<Window>>>,
    /// The stages among `stages` that want previews of open windows.
    previews: Vec<Sender<Arc<Window>>>,
}

/// The window thread of one source: pops records, feeds every window definition of the
/// source, sends closed windows to their stages (blocking: backpressure reaches the ring) and
/// previews to the stages that want them (never blocking: a full queue drops the preview).
fn window_loop(mut ring: RingConsumer, mut routes: Vec<WindowRoute>) {
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut shared: Arc<[Arc<str>]> = Arc::from(Vec::new());
    let mut out = Vec::new();
    let stats = ring.stats().clone();
    let send = |routes: &mut Vec<WindowRoute>, out: &mut Vec<Window>, i: usize| {
        for w in out.drain(..) {
            let w = Arc::new(w);
            if w.preview {
                for s in &routes[i].previews {
                    let _ = s.try_send(w.clone());
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
        let dropped = stats.dropped.load(Ordering::Relaxed);
        match record {
            Record::Spike { unit, t_s } => {
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
}

fn build_stage(config: &StageConfig) -> Result<Box<dyn Stage>> {
    Ok(match config {
        StageConfig::Episodes(e) => {
            let miner = e.miner().map_err(|v| {
                anyhow::anyhow!(
                    "{}",
                    v.into_iter()
                        .map(|(f, m)| format!("`{f}`: {m}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            })?;
            Box::new(stage::episodes::EpisodeStage::new(
                miner,
                e.device,
                e.gpu_settings(),
            )?)
        }
        StageConfig::Summary(_) => Box::new(stage::summary::SummaryStage),
        StageConfig::Motif(mc) => Box::new(stage::motif::MotifStage::new(
            mc.motif(),
            mc.channel,
            mc.device,
        )),
        StageConfig::Search(sc) => Box::new(stage::search::SearchStage::new(sc.options())),
        StageConfig::SoftDtw(sc) => Box::new(stage::softdtw::SoftDtwStage::new(sc)?),
        StageConfig::Shapelet(sc) => {
            Box::new(stage::shapelet::ShapeletStage::new(sc.tree()?, sc.channel)?)
        }
    })
}

/// Runs the pipeline until its sources end (archives) or a stop is requested (signal, or
/// `options.stop`).
///
/// # Errors
/// Anything that fails while building (a file that cannot be read, a socket that cannot be
/// bound, a GPU demanded but absent), naming the component. Failures while running are
/// logged and counted, never fatal.
pub fn run(config: &PipelineConfig, options: RunOptions) -> Result<RunSummary> {
    let stop = options.stop.clone().unwrap_or_default();
    let ctx = zmq::Context::new();
    let metrics_addr = match options.metrics {
        Some(a) => Some(a),
        None => config
            .pipeline
            .metrics
            .as_deref()
            .map(str::parse)
            .transpose()
            .context("`[pipeline] metrics`")?,
    };
    let control = control_plane(metrics_addr, options.handle_signals, stop.clone())?;

    // Build: sources (files read, sockets opened), stages, sinks. Nothing runs yet.
    enum Built {
        Archive(ArchiveSource, archive::Loaded),
        Zmq(ZmqSource, zmq::Socket),
    }
    let mut built = Vec::new();
    for (name, s) in &config.sources {
        match s {
            SourceConfig::Hdf5(h) => {
                let cfg = ArchiveSource {
                    name: name.clone(),
                    path: h.path.clone(),
                    content: match &h.series {
                        None => ArchiveContent::Units,
                        Some(d) => ArchiveContent::Series {
                            dataset: d.clone(),
                            frame_samples: h.frame_samples.unwrap_or(256),
                        },
                    },
                    speed: h.speed,
                };
                let data = archive::load(&cfg).with_context(|| format!("source `{name}`"))?;
                built.push((
                    name.clone(),
                    h.ring_capacity.unwrap_or(1 << 16),
                    h.overflow,
                    Built::Archive(cfg, data),
                ));
            }
            SourceConfig::Zmq(z) => {
                let cfg = ZmqSource {
                    name: name.clone(),
                    endpoint: z.endpoint.clone(),
                    bind: z.mode == Some(SocketMode::Bind),
                    format: z.format,
                    content: s.kind(),
                    unit_key: z.unit_key,
                    max_message_bytes: z.max_message_bytes.unwrap_or(16 << 20),
                    receive_hwm: z.receive_hwm_messages.unwrap_or(100_000),
                    restart_gap_s: z.restart_gap_s.unwrap_or(10.0),
                    stop_on_end: z.stop_on_end.unwrap_or(true),
                };
                let socket = zsource::open(&cfg, &ctx)?;
                built.push((
                    name.clone(),
                    z.ring_capacity.unwrap_or(1 << 20),
                    z.overflow.unwrap_or(Overflow::DropNewest),
                    Built::Zmq(cfg, socket),
                ));
            }
        }
    }
    let queue = config.pipeline.stage_queue_windows.unwrap_or(4);
    let (out_tx, out_rx) = bounded::<Output>(64);
    // Per window: each reading stage's queue, and whether the stage wants previews.
    type StageInput = (Sender<Arc<Window>>, bool);
    let mut stage_inputs: BTreeMap<&str, Vec<StageInput>> = BTreeMap::new();
    type StageThread = (String, Box<dyn Stage>, Receiver<Arc<Window>>);
    let mut stages: Vec<StageThread> = Vec::new();
    for (name, s) in &config.stages {
        let st = build_stage(s).with_context(|| format!("stage `{name}`"))?;
        let (tx, rx) = bounded(queue);
        stage_inputs
            .entry(s.window())
            .or_default()
            .push((tx, st.wants_previews()));
        stages.push((name.clone(), st, rx));
    }
    let mut sinks = Vec::new();
    for (name, s) in &config.sinks {
        sinks.push(match s {
            SinkConfig::Jsonl(j) => Sink::jsonl(name, j.path.as_deref(), j.stages.clone())?,
            SinkConfig::ZmqPub(z) => Sink::zmq_pub(
                name,
                &ctx,
                &z.endpoint,
                z.mode != Some(SocketMode::Connect),
                z.stages.clone(),
            )?,
        });
    }

    // Connect and spawn, back to front.
    let mut threads = Threads(Vec::new());
    let tap = options.tap;
    let (sink_done_tx, sink_done_rx) = bounded::<Vec<(String, u64)>>(1);
    threads.spawn("synfire:sinks".into(), move || {
        for mut out in &out_rx {
            for s in &mut sinks {
                if s.takes(&out.stage) {
                    if let Err(e) = s.write(&out) {
                        tracing::error!(sink = s.name(), error = %e, "Sink write failed.");
                    }
                }
            }
            out.published_at = Some(std::time::Instant::now());
            if let Some(t) = &tap {
                let _ = t.send(out);
            }
        }
        for s in &mut sinks {
            let _ = s.flush();
        }
        let _ = sink_done_tx.send(
            sinks
                .iter()
                .map(|s| (s.name().to_owned(), s.count()))
                .collect(),
        );
    })?;
    for (name, mut st, rx) in stages {
        let tx = out_tx.clone();
        let label: Arc<str> = Arc::from(name.as_str());
        threads.spawn(format!("synfire:stage-{name}"), move || {
            stage::run(&label, st.as_mut(), &rx, &tx);
        })?;
    }
    drop(out_tx);
    let mut stats = Vec::new();
    for (name, capacity, overflow, b) in built {
        let (prod, cons) = buffer::ring(&name, capacity, overflow, stop.clone());
        stats.push((name.clone(), cons.stats().clone()));
        let mut routes = Vec::new();
        for (wname, w) in config.windows.iter().filter(|(_, w)| w.source == name) {
            let inputs = stage_inputs.remove(wname.as_str()).unwrap_or_default();
            let previews: Vec<_> = inputs
                .iter()
                .filter(|(_, wants)| *wants)
                .map(|(tx, _)| tx.clone())
                .collect();
            let windower = match config.sources[&name].kind() {
                StreamKind::Spikes => Windower::Spikes(
                    SpikeWindower::new(
                        wname,
                        &name,
                        w.length_s.unwrap_or(1.0),
                        w.hop_s.unwrap_or(1.0),
                        w.allowed_lateness_s.unwrap_or(0.0),
                    )
                    .with_previews(!previews.is_empty()),
                ),
                StreamKind::Sensor => Windower::Sensor(SensorWindower::new(
                    wname,
                    &name,
                    w.length_samples.unwrap_or(1),
                    w.hop_samples.unwrap_or(1),
                )),
            };
            routes.push(WindowRoute {
                windower,
                stages: inputs.into_iter().map(|(tx, _)| tx).collect(),
                previews,
            });
        }
        threads.spawn(format!("synfire:win-{name}"), move || {
            window_loop(cons, routes)
        })?;
        match b {
            Built::Archive(cfg, data) => {
                threads.spawn(format!("synfire:src-{name}"), move || {
                    archive::run(&cfg, data, prod)
                })?;
            }
            Built::Zmq(cfg, socket) => {
                threads.spawn(format!("synfire:src-{name}"), move || {
                    zsource::run(&cfg, &socket, prod)
                })?;
            }
        }
    }
    drop(stage_inputs);
    threads.join_all();
    let mut summary = RunSummary::default();
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
        summary.sinks = list.into_iter().collect();
    }
    drop(control);
    drop(ctx);
    Ok(summary)
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

fn control_plane(
    metrics: Option<SocketAddr>,
    signals: bool,
    stop: Arc<AtomicBool>,
) -> Result<Control> {
    if metrics.is_none() && !signals {
        return Ok(Control {
            shutdown: None,
            thread: None,
        });
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the control-plane runtime")?;
    let exporter = match metrics {
        Some(addr) => {
            // The listener binds inside the runtime.
            let _guard = rt.enter();
            Some(crate::telemetry::install_prometheus(addr)?)
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
                    tokio::spawn(async move {
                        if let Err(e) = exporter.await {
                            tracing::error!(error = ?e, "Metrics endpoint failed.");
                        }
                    });
                }
                if signals {
                    tokio::spawn(watch_signals(stop));
                }
                let _ = (&mut rx).await;
            });
        })
        .context("starting the control-plane thread")?;
    Ok(Control {
        shutdown: Some(tx),
        thread: Some(thread),
    })
}

async fn watch_signals(stop: Arc<AtomicBool>) {
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
            std::process::exit(130);
        }
    }
}
