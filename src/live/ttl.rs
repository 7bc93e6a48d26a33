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
//! `timeout_ms` to send and to receive; on a timeout or error it is closed (linger 0) and a
//! fresh one connects for the next request (ZeroMQ guide, "Lazy Pirate": a `REQ` socket
//! that lost its reply cannot be reused). Every outcome is counted
//! ([`crate::live::telemetry::names::TTL_REQUESTS`]) and summarised ([`TtlSummary`]).

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
}

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
    /// `State=0` requests answered `TTLHandled`, and those that failed in any way.
    pub off: (u64, u64),
    /// Sockets replaced after a failure.
    pub reconnects: u64,
    /// Per `State=1` request sent: seconds from the occurrence's detection to the request
    /// leaving the socket.
    pub to_send: ResultLatency,
    /// Per `State=1` request answered: seconds from detection to the reply.
    pub to_reply: ResultLatency,
}

/// The detector's handle on a TTL sink: enqueue, never wait.
#[derive(Clone, Debug)]
pub struct TtlSender {
    tx: Sender<Instant>,
    dropped: Arc<AtomicU64>,
    dropped_metric: metrics::Counter,
}

impl TtlSender {
    /// Requests one pulse for an occurrence detected at `detected_at`; a full queue counts it
    /// dropped.
    pub fn request(&self, detected_at: Instant) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(detected_at) {
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
                .and_then(|()| s.set_sndtimeo(self.timeout_ms))
                .and_then(|()| s.set_rcvtimeo(self.timeout_ms))
                .map_err(|e| format!("cannot set socket options: {e}"))?;
            s.connect(&self.endpoint)
                .map_err(|e| format!("cannot connect: {e}"))?;
            self.socket = Some(s);
        }
        Ok(self.socket.as_ref().expect("just made"))
    }

    /// Sends `message`, waits for the reply; `sent` is set when the request left.
    fn request(&mut self, message: &str, sent: &mut Option<Instant>) -> Outcome {
        let outcome = match self.socket() {
            Err(e) => Outcome::SendError(e),
            Ok(s) => match s.send(message, 0) {
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
            .spawn(move || run(&label, &rx, client, line, pulse, &dropped))?;
        Ok(Self { sender, thread })
    }

    /// Waits for the sink to finish (after every sender is dropped) and returns its summary.
    #[must_use]
    pub fn join(self) -> TtlSummary {
        drop(self.sender);
        self.thread.join().unwrap_or_default()
    }
}

fn run(
    name: &str,
    rx: &Receiver<Instant>,
    mut client: Client,
    line: u16,
    pulse: Duration,
    dropped: &AtomicU64,
) -> TtlSummary {
    let on = format!("TTL Line={line} State=1");
    let off = format!("TTL Line={line} State=0");
    let metric = |r: &'static str| crate::live::telemetry::ttl_requests(name, r);
    let (m_ok, m_rejected, m_timeout, m_send) = (
        metric("ok"),
        metric("rejected"),
        metric("timeout"),
        metric("send_error"),
    );
    let latency = crate::live::telemetry::ttl_latency(name);
    let mut s = TtlSummary::default();
    let mut logged = false;
    let mut off_at: Option<Instant> = None;
    let send_off = |client: &mut Client, s: &mut TtlSummary| {
        let mut sent = None;
        match client.request(&off, &mut sent) {
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
            Ok(detected_at) => {
                let mut sent = None;
                let outcome = client.request(&on, &mut sent);
                let replied = Instant::now();
                if let Some(sent) = sent {
                    s.to_send
                        .seconds
                        .push(sent.saturating_duration_since(detected_at).as_secs_f64());
                }
                match outcome {
                    Outcome::Ok => {
                        s.ok += 1;
                        m_ok.increment(1);
                        let secs = replied.saturating_duration_since(detected_at).as_secs_f64();
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
        "TTL sink totals."
    );
    s
}
