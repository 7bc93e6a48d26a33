//! The live view (`synfire run --ui 127.0.0.1:PORT`): a page in a browser showing what the
//! pipeline sees while it runs. Per spike source the raster of the last `span_s` seconds
//! (units × time) with each occurrence of the detect stages drawn over its spikes and named;
//! per episodes stage its latest window's top episodes with counts (and p-values when the stage
//! tests significance); per source events, drops and malformed messages; per stage late events
//! and the result latency of its recent lines; and the connection's state. `docs/live-view.md`.
//!
//! ```text
//!  [synfire:win-<source>] ── try_send ──> bounded(RASTER_QUEUE) of RasterMsg ─┐
//!  [synfire:sinks]        ── try_send ──> bounded(LINE_QUEUE) × 2 of LineMsg ───┤ (full: dropped, counted)
//!                                                                               ▼
//!  [synfire:view-feed]  every TICK: drain, fold into FeedState, publish a delta ── broadcast ──┐
//!  [synfire:view]       tokio current-thread + hyper: GET / (page), /events (SSE), /state ◄─┘
//! ```
//!
//! **The view never slows the pipeline.** A pipeline thread only ever offers: a window thread
//! `try_send`s each spike into a bounded channel, the sink thread each line into another, and
//! neither ever waits, wakes a thread or takes a lock of the view (the feed thread polls, it is
//! never parked on these channels); what a full channel refuses is counted
//! ([`ViewSummary::raster_dropped`], [`ViewSummary::lines_dropped`] and
//! `synfire_view_updates_dropped_total`). Everything else (parsing lines, keeping the rasters,
//! JSON, HTTP) runs on the view's two threads.

pub mod feed;
pub mod server;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use parking_lot::Mutex;

use crate::live::buffer::SourceStats;
use crate::live::config::PipelineConfig;
use crate::live::stage::Output;
use feed::{FeedState, TICK};
pub use feed::{LineMsg, RasterMsg, ViewCounters, ViewLayout};
use server::{END_SEQ, FRAMES, Shared};

/// Records (spikes, unit names, restarts) the window threads may have offered the feed
/// thread and it has not taken yet: at [`TICK`] that is 50,000 spikes a second per
/// queue before any is dropped. Holds `RASTER_QUEUE` × 32 bytes.
pub const RASTER_QUEUE: usize = 1 << 16;

/// Result lines (each queue: window lines, occurrence lines) waiting for the feed thread.
pub const LINE_QUEUE: usize = 4_096;

/// How long a finished view waits for open event streams to send the end of the run.
pub const END_GRACE: Duration = Duration::from_millis(200);

/// Default seconds of each raster.
pub const DEFAULT_SPAN_S: f64 = 10.0;

/// Why the live view could not start.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// The address is not a socket address.
    #[error("`[pipeline] ui`: `{0}` is not an address like `127.0.0.1:8080`")]
    Address(String),
    /// The span is not a positive number of seconds.
    #[error("live view: the raster span must be finite seconds > 0, got {0}")]
    Span(f64),
    /// The address cannot be bound (in use, not local, no permission).
    #[error("live view: cannot serve on {addr}: {message}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        message: String,
    },
    /// Its threads or runtime could not be started.
    #[error("live view: cannot start {what}: {message}")]
    Start {
        /// What.
        what: &'static str,
        /// Why.
        message: String,
    },
}

/// Where and what the view serves.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// The address to serve on (`127.0.0.1:8080`; port 0: any free port,
    /// [`View::local_addr`]).
    pub addr: SocketAddr,
    /// Seconds of each raster (the last `span_s` seconds of the source's clock).
    pub span_s: f64,
    /// Who may read it ([`server::Guard`]: loopback host names by default, no token).
    pub guard: server::Guard,
}

/// The view's counters at the end of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ViewSummary {
    /// The address it served on.
    pub addr: Option<SocketAddr>,
    /// Spikes the feed thread received from the window threads.
    pub spikes_received: u64,
    /// Spikes, unit names or restarts a full raster queue refused (never waited for).
    pub raster_dropped: u64,
    /// Result lines the feed thread received from the sink thread.
    pub lines_received: u64,
    /// Result lines a full line queue refused.
    pub lines_dropped: u64,
    /// Event streams (browsers) served.
    pub clients: u64,
    /// Snapshots sent again to clients that fell behind.
    pub resyncs: u64,
}

/// A window thread's handle: offers its source's records, never blocking.
#[derive(Clone, Debug)]
pub struct SourceFeed {
    source: u16,
    tx: Sender<RasterMsg>,
    counters: Arc<ViewCounters>,
    dropped: metrics::Counter,
}

impl SourceFeed {
    #[inline]
    fn offer(&self, msg: RasterMsg) {
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(msg) {
            self.counters.raster_dropped.fetch_add(1, Ordering::Relaxed);
            self.dropped.increment(1);
        }
    }

    /// Offers a spike of unit `unit` at `t_s` seconds (a `Record::Spike`).
    #[inline]
    pub fn spike(&self, t_s: f64, unit: u32) {
        self.offer(RasterMsg::Spike {
            source: self.source,
            unit,
            t_s,
        });
    }

    /// Offers a unit's name (a `Record::Unit`).
    pub fn unit(&self, id: u32, name: Arc<str>) {
        self.offer(RasterMsg::Unit {
            source: self.source,
            id,
            name,
        });
    }

    /// Offers a publisher restart (a `Record::Restart`).
    pub fn restart(&self) {
        self.offer(RasterMsg::Restart {
            source: self.source,
        });
    }
}

/// The sink thread's handle: offers each result line after the sinks wrote it, never
/// blocking.
#[derive(Clone, Debug)]
pub struct LineFeed {
    windows: Sender<LineMsg>,
    occurrences: Sender<LineMsg>,
    detect: Arc<[Arc<str>]>,
    counters: Arc<ViewCounters>,
    dropped_windows: metrics::Counter,
    dropped_occurrences: metrics::Counter,
}

impl LineFeed {
    /// Offers `out` (previews are not shown). Its result latency is taken from its close to
    /// `out.published_at` (set by the sink thread once every sink wrote it; now when unset):
    /// the span the sinks measure, once for all of them.
    pub fn line(&self, out: &Output) {
        if out.preview {
            return;
        }
        let latency_s = out.complete.then(|| {
            out.published_at
                .unwrap_or_else(Instant::now)
                .saturating_duration_since(out.closed_at)
                .as_secs_f64()
        });
        let detect = self.detect.iter().any(|d| **d == *out.stage);
        let (tx, metric) = if detect {
            (&self.occurrences, &self.dropped_occurrences)
        } else {
            (&self.windows, &self.dropped_windows)
        };
        let msg = LineMsg {
            stage: out.stage.clone(),
            value: out.value.clone(),
            latency_s,
        };
        if tx.try_send(msg).is_err() {
            self.counters.lines_dropped.fetch_add(1, Ordering::Relaxed);
            metric.increment(1);
        }
    }
}

/// The running view: its feed thread and its server thread. Stop it with [`View::finish`]
/// (or drop it).
#[derive(Debug)]
pub struct View {
    addr: SocketAddr,
    layout: ViewLayout,
    shared: Arc<Shared>,
    raster_tx: Option<Sender<RasterMsg>>,
    windows_tx: Option<Sender<LineMsg>>,
    occurrences_tx: Option<Sender<LineMsg>>,
    /// Dropped to stop the feed thread (it waits on it between ticks, so it stops at once).
    stop_feed: Option<Sender<()>>,
    feed: Option<JoinHandle<()>>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
}

impl View {
    /// Binds `options.addr` (on the calling thread, so a failure is reported before the
    /// pipeline starts) and starts the feed and server threads for the pipeline `config`.
    ///
    /// # Errors
    /// [`ViewError::Bind`] naming the address when it cannot be bound; [`ViewError::Span`]
    /// for a span that is not positive; [`ViewError::Start`] when a thread or the runtime
    /// cannot start.
    pub fn start(options: &ViewOptions, config: &PipelineConfig) -> Result<Self, ViewError> {
        Self::start_with(options, ViewLayout::of(config, options.span_s))
    }

    /// [`View::start`] for a layout made in code.
    ///
    /// # Errors
    /// As [`View::start`].
    pub fn start_with(options: &ViewOptions, layout: ViewLayout) -> Result<Self, ViewError> {
        if !(options.span_s.is_finite() && options.span_s > 0.0) {
            return Err(ViewError::Span(options.span_s));
        }
        let bind_err = |e: std::io::Error| ViewError::Bind {
            addr: options.addr,
            message: e.to_string(),
        };
        let listener = std::net::TcpListener::bind(options.addr).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let start_err = |what: &'static str| {
            move |e: std::io::Error| ViewError::Start {
                what,
                message: e.to_string(),
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(start_err("its runtime"))?;

        let counters = Arc::new(ViewCounters::default());
        let (frames, _) = tokio::sync::broadcast::channel(FRAMES);
        let shared = Arc::new(Shared {
            state: Mutex::new(FeedState::new(&layout, counters.clone())),
            frames,
            counters,
        });
        let (raster_tx, raster_rx) = bounded(RASTER_QUEUE);
        let (windows_tx, windows_rx) = bounded(LINE_QUEUE);
        let (occurrences_tx, occurrences_rx) = bounded(LINE_QUEUE);
        let (stop_feed, stop_rx) = bounded::<()>(0);

        let (shutdown, shutdown_rx) = tokio::sync::oneshot::channel();
        let server_shared = shared.clone();
        let guard = options.guard.clone();
        let server = std::thread::Builder::new()
            .name("synfire:view".into())
            .spawn(move || {
                runtime.block_on(server::serve(listener, server_shared, guard, shutdown_rx));
            })
            .map_err(start_err("its server thread"))?;
        let feed_shared = shared.clone();
        let feed = std::thread::Builder::new()
            .name("synfire:view-feed".into())
            .spawn(move || {
                feed_loop(
                    &feed_shared,
                    &raster_rx,
                    &[windows_rx, occurrences_rx],
                    &stop_rx,
                );
            })
            .map_err(start_err("its feed thread"));
        let mut view = Self {
            addr,
            layout,
            shared,
            raster_tx: Some(raster_tx),
            windows_tx: Some(windows_tx),
            occurrences_tx: Some(occurrences_tx),
            stop_feed: Some(stop_feed),
            feed: None,
            shutdown: Some(shutdown),
            server: Some(server),
        };
        // On an error here `view` is dropped, which stops the server thread.
        view.feed = Some(feed?);
        tracing::info!(url = %format!("http://{addr}/"), "Serving the live view.");
        Ok(view)
    }

    /// The address served on (with the port chosen when the options gave port 0).
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The handle of source `name`'s window thread, with the source's counters shown beside
    /// its raster; `None` when it is not a spike source of the layout.
    #[must_use]
    pub fn source(&self, name: &str, stats: Arc<SourceStats>) -> Option<SourceFeed> {
        let source = self.layout.spike_source(name)?;
        self.shared.state.lock().attach_stats(source, stats);
        Some(SourceFeed {
            source,
            tx: self.raster_tx.clone()?,
            counters: self.shared.counters.clone(),
            dropped: crate::live::telemetry::view_dropped("raster"),
        })
    }

    /// The sink thread's handle.
    #[must_use]
    pub fn lines(&self) -> Option<LineFeed> {
        let detect: Vec<Arc<str>> = self
            .layout
            .stages
            .iter()
            .filter(|s| self.layout.is_detect(&s.name))
            .map(|s| Arc::from(s.name.as_str()))
            .collect();
        Some(LineFeed {
            windows: self.windows_tx.clone()?,
            occurrences: self.occurrences_tx.clone()?,
            detect: Arc::from(detect),
            counters: self.shared.counters.clone(),
            dropped_windows: crate::live::telemetry::view_dropped("window_line"),
            dropped_occurrences: crate::live::telemetry::view_dropped("occurrence"),
        })
    }

    /// Stops the view after the pipeline's threads ended: the feed thread takes what is left,
    /// every open page is told the run ended (its connection state reads "finished"), then
    /// the server stops. Returns the counters.
    #[must_use]
    pub fn finish(mut self) -> ViewSummary {
        self.stop();
        let c = &self.shared.counters;
        ViewSummary {
            addr: Some(self.addr),
            spikes_received: c.spikes_received.load(Ordering::Relaxed),
            raster_dropped: c.raster_dropped.load(Ordering::Relaxed),
            lines_received: c.lines_received.load(Ordering::Relaxed),
            lines_dropped: c.lines_dropped.load(Ordering::Relaxed),
            clients: c.clients.load(Ordering::Relaxed),
            resyncs: c.resyncs.load(Ordering::Relaxed),
        }
    }

    fn stop(&mut self) {
        self.raster_tx = None;
        self.windows_tx = None;
        self.occurrences_tx = None;
        self.stop_feed = None;
        if let Some(f) = self.feed.take()
            && f.join().is_err()
        {
            tracing::error!("Live view: the feed thread panicked.");
        }
        // Let open pages read the end of the run before the server goes: each event stream
        // ends after the end frame; one that does not (a client not reading) is cut after
        // `END_GRACE`.
        let deadline = Instant::now() + END_GRACE;
        while self.shared.counters.clients_open.load(Ordering::Relaxed) > 0
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.server.take()
            && t.join().is_err()
        {
            tracing::error!("Live view: the server thread panicked.");
        }
    }
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The view for a run: `ui` (or the pipeline file's `[pipeline] ui`), rasters of `span_s`
/// (or `[pipeline] ui_span_s`, or [`DEFAULT_SPAN_S`]); `None` when neither names an address.
///
/// # Errors
/// As [`View::start`], and [`ViewError::Address`] for a file's address that does not parse.
pub fn start_for(
    config: &PipelineConfig,
    ui: Option<SocketAddr>,
    span_s: Option<f64>,
) -> Result<Option<View>, ViewError> {
    let addr = match ui {
        Some(a) => a,
        None => match config.pipeline.ui.as_deref() {
            Some(text) => text
                .parse()
                .map_err(|_| ViewError::Address(text.to_owned()))?,
            None => return Ok(None),
        },
    };
    let span_s = span_s
        .or(config.pipeline.ui_span_s)
        .unwrap_or(DEFAULT_SPAN_S);
    crate::live::exposure::warn_if_exposed("The live view", addr);
    let guard = server::Guard {
        hosts: config.pipeline.ui_hosts.clone().unwrap_or_default(),
        token: config.pipeline.ui_token.clone(),
        refused: Arc::default(),
    };
    View::start(
        &ViewOptions {
            addr,
            span_s,
            guard,
        },
        config,
    )
    .map(Some)
}

/// The feed thread: every [`TICK`], drains the queues (never parked on them, so an offer
/// never wakes it; between ticks it waits on `stop` only), folds them in and publishes a
/// delta; when `stop` disconnects, a last drain and the end frame.
fn feed_loop(
    shared: &Shared,
    raster: &Receiver<RasterMsg>,
    lines: &[Receiver<LineMsg>],
    stop: &Receiver<()>,
) {
    let mut next = Instant::now();
    let mut stopping = false;
    loop {
        {
            let mut state = shared.state.lock();
            for m in raster.try_iter() {
                state.raster(m);
            }
            for rx in lines {
                for m in rx.try_iter() {
                    state.line(m);
                }
            }
            state.trim();
            let clients = shared.frames.receiver_count() > 0;
            let (seq, json) = state.delta(clients);
            if let Some(json) = json {
                let _ = shared.frames.send((seq, Shared::event("delta", &json)));
            }
            if stopping {
                state.finish();
                let _ = shared.frames.send((END_SEQ, Shared::event("end", "{}")));
            }
        }
        if stopping {
            return;
        }
        next += TICK;
        let now = Instant::now();
        if next <= now {
            next = now;
        }
        if let Err(RecvTimeoutError::Disconnected) = stop.recv_deadline(next) {
            stopping = true;
        }
    }
}
