//! `kind = "openephys_ttl"`: a TTL pulse in the Open Ephys GUI on each occurrence a detect
//! stage reports, through the GUI's **Network Events** plugin.
//!
//! ```toml
//! [sinks.stim]
//! kind = "openephys_ttl"
//! endpoint = "tcp://127.0.0.1:5556"   # the plugin's port (its default, 5556)
//! stages = ["detect"]                  # detect stages only
//! line = 1                             # TTL line, 1–256
//! pulse_ms = 10.0                      # then `State=0` after this long (0: never)
//! timeout_ms = 50.0                    # a reply later than this is a timeout
//! queue = 1024                         # requests waiting; a full queue drops, counted
//! max_age_ms = 5.0                     # a pulse not sent this long after the spike: dropped
//! ```
//!
//! # The protocol
//! The plugin binds a ZeroMQ `REP` socket (`tcp://*:5556` by default) and answers each request
//! with one string (open-ephys-plugins/network-events, `Source/NetworkEvents.cpp`,
//! `NetworkEvents::handleSpecialMessages` and `NetworkEvents::run`, commit f064e04 of
//! 2022-09-16, "Change TTL command options to match the docs: Channel->Line, On->State";
//! the same commands in the GUI 1.0 plugin, whose changelog adds `TTL Word=`):
//!
//! - request `TTL Line=<1..256> State=<0|1>` (keys case-insensitive, space-separated
//!   `key=value` pairs) → reply `TTLHandled: Line=<line> State=<state>`; the TTL event is
//!   queued for the next processing block, and only while acquisition runs;
//! - a line outside 1–256 → reply `InvalidChannel`; an unknown command → `NotHandled`.
//!
//! Each occurrence sends exactly one `State=1` request; with `pulse_ms > 0` a `State=0`
//! request follows `pulse_ms` after the last `State=1` (an occurrence during a pulse sends its
//! own `State=1` and extends the pulse). A reply other than `TTLHandled` counts as `rejected`.
//!
//! # Never blocking the detector
//! The sink runs on its own thread (`synfire:ttl-<name>`) with a bounded queue: the detector
//! only tries to enqueue (a full queue counts `dropped`). The `REQ` socket waits at most
//! `timeout_ms` to receive; on a timeout or error it is closed (linger 0, so nothing it
//! still holds is sent later) and a fresh one connects for the next request (ZeroMQ guide,
//! "Lazy Pirate": a `REQ` socket that lost its reply cannot be reused). Every outcome is
//! counted ([`crate::live::telemetry::names::TTL_REQUESTS`]) and summarised ([`TtlSummary`]).
//!
//! # Never a stale pulse
//! A stimulus that comes late is a wrong stimulus. Each request carries the instant the spike
//! that completed its occurrence arrived (the window thread took it from the source's ring);
//! when its turn comes it is sent only if it can leave the socket within `max_age_ms` of that
//! instant (default [`DEFAULT_MAX_AGE_MS`]): the send waits at most what is left of that age,
//! and a request already older is dropped and counted `stale`, never sent. A plugin that is
//! down, slow or back after an outage therefore never receives a backlog: each failed request
//! costs at most `timeout_ms`, the requests that waited meanwhile are stale, and the first
//! pulse after it returns is one detected then. The same bound makes shutdown quick: the
//! requests still queued when the detectors finish are sent while fresh and dropped, counted,
//! once stale, so the sink ends within about `max_age_ms + timeout_ms (+ pulse_ms)`.
//!
//! Latencies ([`TtlSummary::to_send`], [`TtlSummary::to_reply`],
//! [`crate::live::telemetry::names::TTL_LATENCY`]) count from the same arrival, the queue's
//! wait included.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError, bounded};
use serde::Deserialize;

use crate::live::config::section::ConfigError;
use crate::live::telemetry::ResultLatency;

/// `[sinks.<name>]` with `kind = "openephys_ttl"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TtlConfig {
    /// The Network Events plugin's endpoint, e.g. `tcp://127.0.0.1:5556` (connected).
    pub endpoint: String,
    /// The detect stages whose occurrences it signals (required).
    pub stages: Vec<String>,
    /// TTL line, 1–256 (default 1).
    pub line: Option<u16>,
    /// Pulse width, milliseconds (default 10; 0: no `State=0` request).
    pub pulse_ms: Option<f64>,
    /// Longest wait to send a request or receive its reply, milliseconds (default 50).
    pub timeout_ms: Option<f64>,
    /// Requests waiting to be sent (default 1024).
    pub queue: Option<usize>,
    /// Oldest a request may be when it leaves the socket, milliseconds from the arrival of the
    /// spike that completed its occurrence (default [`DEFAULT_MAX_AGE_MS`]); older ones are
    /// dropped, counted `stale`.
    pub max_age_ms: Option<f64>,
}

/// Default `max_age_ms`: a pulse leaves within 5 ms of the detecting spike's arrival, or never.
pub const DEFAULT_MAX_AGE_MS: f64 = 5.0;

impl TtlConfig {
    /// Phase-2 checks, fields relative to the section.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        if !self.endpoint.contains("://") {
            errors.push(ConfigError::new(
                "endpoint",
                format!(
                    "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5556`",
                    self.endpoint
                ),
            ));
        }
        if let Some(line) = self.line
            && !(1..=256).contains(&line)
        {
            errors.push(ConfigError::new(
                "line",
                format!(
                    "must be 1–256 (the plugin answers `InvalidChannel` otherwise), got {line}"
                ),
            ));
        }
        if let Some(p) = self.pulse_ms
            && !(p.is_finite() && p >= 0.0)
        {
            errors.push(ConfigError::new(
                "pulse_ms",
                format!("must be finite milliseconds ≥ 0, got {p}"),
            ));
        }
        if let Some(t) = self.timeout_ms
            && !(t.is_finite() && (1.0..=60_000.0).contains(&t))
        {
            errors.push(ConfigError::new(
                "timeout_ms",
                format!("must be 1–60000 milliseconds, got {t}"),
            ));
        }
        if let Some(a) = self.max_age_ms
            && !(a.is_finite() && a > 0.0 && a <= 3_600_000.0)
        {
            errors.push(ConfigError::new(
                "max_age_ms",
                format!("must be milliseconds in (0, 3600000], got {a}"),
            ));
        }
        if self.queue == Some(0) {
            errors.push(ConfigError::new("queue", "must be at least 1"));
        }
        if self.stages.is_empty() {
            errors.push(ConfigError::new(
                "stages",
                "must name the detect stages whose occurrences it signals",
            ));
        }
        errors
    }
}

/// What a TTL sink did, at the end of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TtlSummary {
    /// `State=1` requests answered `TTLHandled` (one per occurrence that got through).
    pub ok: u64,
    /// `State=1` requests answered otherwise (`InvalidChannel`, `NotHandled`, …).
    pub rejected: u64,
    /// `State=1` requests without a reply within `timeout_ms`.
    pub timeouts: u64,
    /// `State=1` requests that could not be sent within `timeout_ms` (no plugin listening).
    pub send_errors: u64,
    /// Occurrences not requested because the queue was full.
    pub dropped: u64,
    /// Occurrences not requested because they were older than `max_age_ms` when their turn
    /// came (or could not leave the socket before): never sent.
    pub stale: u64,
    /// `State=0` requests answered `TTLHandled`, and those that failed in any way.
    pub off: (u64, u64),
    /// Sockets replaced after a failure.
    pub reconnects: u64,
    /// Per `State=1` request sent: seconds from the arrival of the spike that completed the
    /// occurrence to the request leaving the socket (the queue's wait included; at most
    /// `max_age_ms`).
    pub to_send: ResultLatency,
    /// Per `State=1` request answered: seconds from that arrival to the reply.
    pub to_reply: ResultLatency,
}

impl TtlSummary {
    /// Every occurrence signalled to the sink, by outcome: `ok + rejected + timeouts +
    /// send_errors + dropped + stale`.
    #[must_use]
    pub fn requested(&self) -> u64 {
        self.ok + self.rejected + self.timeouts + self.send_errors + self.dropped + self.stale
    }
}

/// The detector's handle on a TTL sink: enqueue, never wait.
#[derive(Clone, Debug)]
pub struct TtlSender {
    tx: Sender<Instant>,
    dropped: Arc<AtomicU64>,
    dropped_metric: metrics::Counter,
}

impl TtlSender {
    /// Requests one pulse for an occurrence completed by a spike that arrived at `arrived`
    /// (its age counts from there); a full queue counts it dropped.
    pub fn request(&self, arrived: Instant) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(arrived) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            self.dropped_metric.increment(1);
        }
    }
}

/// The outcome of one request.
enum Outcome {
    Ok,
    Rejected(String),
    Timeout,
    SendError(String),
    /// Could not leave the socket before its deadline: not sent.
    Stale,
}

/// The REQ side of the protocol, reconnecting after a failure.
struct Client {
    ctx: zmq::Context,
    endpoint: String,
    timeout_ms: i32,
    socket: Option<zmq::Socket>,
    reconnects: u64,
}

impl Client {
    fn socket(&mut self) -> Result<&zmq::Socket, String> {
        if self.socket.is_none() {
            let s = self
                .ctx
                .socket(zmq::REQ)
                .map_err(|e| format!("cannot create a REQ socket: {e}"))?;
            s.set_linger(0)
                .and_then(|()| s.set_immediate(true))
                .and_then(|()| s.set_rcvtimeo(self.timeout_ms))
                .map_err(|e| format!("cannot set socket options: {e}"))?;
            s.connect(&self.endpoint)
                .map_err(|e| format!("cannot connect: {e}"))?;
            self.socket = Some(s);
        }
        Ok(self.socket.as_ref().expect("just made"))
    }

    /// Sends `message` if it can leave before `deadline` (`None`: within `timeout_ms`), waits
    /// for the reply; `sent` is set when the request left.
    fn request(
        &mut self,
        message: &str,
        deadline: Option<Instant>,
        sent: &mut Option<Instant>,
    ) -> Outcome {
        let wait_ms = match deadline {
            None => Some(self.timeout_ms),
            Some(d) => {
                // Whole milliseconds left, rounded down: a send never outlives the deadline.
                let left = d.saturating_duration_since(Instant::now());
                (!left.is_zero()).then(|| {
                    i32::try_from(left.as_millis())
                        .unwrap_or(i32::MAX)
                        .min(self.timeout_ms)
                })
            }
        };
        let Some(wait_ms) = wait_ms else {
            return Outcome::Stale;
        };
        let outcome = match self.socket() {
            Err(e) => Outcome::SendError(e),
            Ok(s) => match s.set_sndtimeo(wait_ms).and_then(|()| s.send(message, 0)) {
                Err(zmq::Error::EAGAIN) if deadline.is_some_and(|d| Instant::now() >= d) => {
                    Outcome::Stale
                }
                Err(e) => Outcome::SendError(e.to_string()),
                Ok(()) => {
                    *sent = Some(Instant::now());
                    match s.recv_bytes(0) {
                        Ok(reply) if reply.starts_with(b"TTLHandled") => Outcome::Ok,
                        Ok(reply) => {
                            Outcome::Rejected(String::from_utf8_lossy(&reply).into_owned())
                        }
                        Err(_) => Outcome::Timeout,
                    }
                }
            },
        };
        if matches!(outcome, Outcome::Timeout | Outcome::SendError(_)) && self.socket.is_some() {
            self.socket = None;
            self.reconnects += 1;
        }
        outcome
    }
}

/// A running TTL sink.
#[derive(Debug)]
pub struct TtlSink {
    /// The handle to give the detect stages it takes.
    pub sender: TtlSender,
    thread: JoinHandle<TtlSummary>,
}

impl TtlSink {
    /// Starts sink `name` of `cfg` on thread `synfire:ttl-<name>` (the socket connects lazily,
    /// on the first request, so a GUI started later is found).
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn spawn(name: &str, cfg: &TtlConfig, ctx: &zmq::Context) -> std::io::Result<Self> {
        let (tx, rx) = bounded(cfg.queue.unwrap_or(1024));
        let max_age =
            Duration::from_secs_f64(cfg.max_age_ms.unwrap_or(DEFAULT_MAX_AGE_MS) / 1000.0);
        let dropped = Arc::new(AtomicU64::new(0));
        let sender = TtlSender {
            tx,
            dropped: dropped.clone(),
            dropped_metric: crate::live::telemetry::ttl_requests(name, "dropped"),
        };
        let line = cfg.line.unwrap_or(1);
        let pulse = Duration::from_secs_f64(cfg.pulse_ms.unwrap_or(10.0) / 1000.0);
        #[allow(clippy::cast_possible_truncation)]
        let timeout_ms = cfg.timeout_ms.unwrap_or(50.0).round() as i32;
        let client = Client {
            ctx: ctx.clone(),
            endpoint: cfg.endpoint.clone(),
            timeout_ms,
            socket: None,
            reconnects: 0,
        };
        let label = name.to_owned();
        let thread = std::thread::Builder::new()
            .name(format!("synfire:ttl-{name}"))
            .spawn(move || {
                run(
                    &label,
                    &rx,
                    client,
                    Pulse {
                        line,
                        width: pulse,
                        max_age,
                    },
                    &dropped,
                )
            })?;
        Ok(Self { sender, thread })
    }

    /// Waits for the sink to finish (after every sender is dropped) and returns its summary.
    #[must_use]
    pub fn join(self) -> TtlSummary {
        drop(self.sender);
        self.thread.join().unwrap_or_default()
    }
}

/// A sink's pulse: its line, width, and the oldest a request may leave.
struct Pulse {
    line: u16,
    width: Duration,
    max_age: Duration,
}

fn run(
    name: &str,
    rx: &Receiver<Instant>,
    mut client: Client,
    pulse: Pulse,
    dropped: &AtomicU64,
) -> TtlSummary {
    let Pulse {
        line,
        width: pulse,
        max_age,
    } = pulse;
    let on = format!("TTL Line={line} State=1");
    let off = format!("TTL Line={line} State=0");
    let metric = |r: &'static str| crate::live::telemetry::ttl_requests(name, r);
    let (m_ok, m_rejected, m_timeout, m_send, m_stale) = (
        metric("ok"),
        metric("rejected"),
        metric("timeout"),
        metric("send_error"),
        metric("stale"),
    );
    let latency = crate::live::telemetry::ttl_latency(name);
    let mut s = TtlSummary::default();
    let mut logged = false;
    let mut off_at: Option<Instant> = None;
    let send_off = |client: &mut Client, s: &mut TtlSummary| {
        let mut sent = None;
        match client.request(&off, None, &mut sent) {
            Outcome::Ok => s.off.0 += 1,
            _ => s.off.1 += 1,
        }
    };
    loop {
        let next = match off_at {
            Some(at) => rx.recv_deadline(at),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(arrived) => {
                let mut sent = None;
                let outcome = client.request(&on, Some(arrived + max_age), &mut sent);
                let replied = Instant::now();
                if let Some(sent) = sent {
                    s.to_send
                        .seconds
                        .push(sent.saturating_duration_since(arrived).as_secs_f64());
                }
                match outcome {
                    Outcome::Stale => {
                        s.stale += 1;
                        m_stale.increment(1);
                        // Not sent: no pulse to end.
                        continue;
                    }
                    Outcome::Ok => {
                        s.ok += 1;
                        m_ok.increment(1);
                        let secs = replied.saturating_duration_since(arrived).as_secs_f64();
                        latency.record(secs);
                        s.to_reply.seconds.push(secs);
                    }
                    Outcome::Rejected(reply) => {
                        s.rejected += 1;
                        m_rejected.increment(1);
                        if !logged {
                            logged = true;
                            tracing::warn!(sink = %name, reply = %reply, "The Network Events plugin rejected a TTL request (logged once; counted).");
                        }
                    }
                    Outcome::Timeout => {
                        s.timeouts += 1;
                        m_timeout.increment(1);
                        if !logged {
                            logged = true;
                            tracing::warn!(sink = %name, "No reply to a TTL request in time; reconnecting (logged once; counted).");
                        }
                    }
                    Outcome::SendError(e) => {
                        s.send_errors += 1;
                        m_send.increment(1);
                        if !logged {
                            logged = true;
                            tracing::warn!(sink = %name, error = %e, "Cannot send a TTL request; is the Network Events plugin listening? (logged once; counted)");
                        }
                    }
                }
                if !pulse.is_zero() {
                    off_at = Some(Instant::now() + pulse);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                send_off(&mut client, &mut s);
                off_at = None;
            }
            Err(RecvTimeoutError::Disconnected) => {
                if off_at.is_some() {
                    send_off(&mut client, &mut s);
                }
                break;
            }
        }
    }
    s.dropped = dropped.load(Ordering::Relaxed);
    s.reconnects = client.reconnects;
    tracing::info!(
        sink = %name,
        ok = s.ok,
        rejected = s.rejected,
        timeouts = s.timeouts,
        send_errors = s.send_errors,
        dropped = s.dropped,
        stale = s.stale,
        "TTL sink totals."
    );
    s
}
