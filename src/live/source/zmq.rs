//! The ZeroMQ SUB source: one thread owns the socket (libzmq sockets are not thread-safe),
//! decodes Open Ephys Event Broadcaster or synfire wire-format messages, and pushes records
//! onto its ring.
//!
//! Nothing accepted is lost silently: malformed messages are counted per kind
//! (`synfire_messages_malformed_total`) and logged once per kind; gaps in the synfire format's
//! sequence numbers count as dropped events (`reason="publisher_gap"`); a full ring under
//! `drop_newest` counts `reason="ring_full"`. A publisher that restarts is picked up again:
//! SUB sockets reconnect by themselves, a new session id (synfire format) or a jump back in
//! time of more than `restart_gap_s` (Open Ephys) emits [`Record::Restart`] so the windows
//! start afresh.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{OpenContext, OpenError, Source, SourceConfig};
use crate::ingest::openephys::{self, Naming, UnitKey};
use crate::ingest::wire::{self, Malformed, Message};
use crate::live::buffer::{Overflow, RingProducer};
use crate::live::config::section::{ConfigError, SocketMode};
use crate::record::{EndReason, Record, StreamKind};

/// `[sources.<name>]` with `kind = "zmq"`: a ZeroMQ SUB socket.
#[derive(Clone, Debug, Deserialize)]
pub struct ZmqSourceConfig {
    /// Endpoint, e.g. `tcp://127.0.0.1:5557`.
    pub endpoint: String,
    /// `connect` (default) or `bind`.
    pub mode: Option<SocketMode>,
    /// `openephys` (default) or `synfire`.
    #[serde(default)]
    pub format: WireFormat,
    /// `spikes` (default) or `sensor` (synfire format only).
    pub content: Option<ContentKind>,
    /// Unit naming of Open Ephys messages (default `electrode_sorted_id`: the same names in
    /// JSON and raw mode and in binary recordings; `ingest::openephys` module docs).
    #[serde(default)]
    pub unit_key: UnitKey,
    /// Open Ephys raw mode: the stream's name for `unit_key = "full"` (raw messages carry the
    /// stream's id only; default: the id in decimal).
    pub raw_stream_name: Option<String>,
    /// Open Ephys raw mode: the electrode names by electrode index (raw messages carry the
    /// index only; default: the Spike Detector's default names, `Electrode 1`, …).
    pub raw_electrode_names: Option<Vec<String>>,
    /// Larger messages are rejected (default 16 MiB).
    pub max_message_bytes: Option<usize>,
    /// ZeroMQ receive high-water mark (default 100,000; 0 = unlimited).
    pub receive_hwm_messages: Option<i32>,
    /// Open Ephys: a time this far before the newest is a restart (default 10 s).
    pub restart_gap_s: Option<f64>,
    /// End at the publisher's end-of-stream message (default true; synfire format).
    pub stop_on_end: Option<bool>,
    /// Overflow policy (default `drop_newest`: never stall the socket).
    pub overflow: Option<Overflow>,
    /// Ring capacity, records (default 1,048,576).
    pub ring_capacity: Option<usize>,
}

/// `content` of a ZMQ source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentKind {
    /// Spike events.
    Spikes,
    /// Sensor samples.
    Sensor,
}

impl ZmqSourceConfig {
    /// The source's settings, named `name`, with every default filled in.
    #[must_use]
    pub fn settings(&self, name: &str) -> ZmqSource {
        ZmqSource {
            name: name.to_owned(),
            endpoint: self.endpoint.clone(),
            bind: self.mode == Some(SocketMode::Bind),
            format: self.format,
            content: SourceConfig::produces(self),
            naming: Naming {
                key: self.unit_key,
                raw_stream: self.raw_stream_name.clone(),
                raw_electrodes: self.raw_electrode_names.clone().unwrap_or_default(),
            },
            max_message_bytes: self.max_message_bytes.unwrap_or(16 << 20),
            receive_hwm: self.receive_hwm_messages.unwrap_or(100_000),
            restart_gap_s: self.restart_gap_s.unwrap_or(10.0),
            stop_on_end: self.stop_on_end.unwrap_or(true),
        }
    }
}

impl SourceConfig for ZmqSourceConfig {
    const KIND: &'static str = "zmq";

    fn produces(&self) -> StreamKind {
        if self.content == Some(ContentKind::Sensor) {
            StreamKind::Sensor
        } else {
            StreamKind::Spikes
        }
    }

    fn ring(&self) -> (usize, Overflow) {
        (
            self.ring_capacity.unwrap_or(1 << 20),
            self.overflow.unwrap_or(Overflow::DropNewest),
        )
    }

    fn validate(&self) -> Vec<ConfigError> {
        let mut errors = Vec::new();
        let mut err = |field: &str, message: String| errors.push(ConfigError::new(field, message));
        if !self.endpoint.contains("://") {
            err(
                "endpoint",
                format!(
                    "`{}` is not a ZeroMQ endpoint like `tcp://127.0.0.1:5557`",
                    self.endpoint
                ),
            );
        }
        if self.format == WireFormat::Openephys && self.content == Some(ContentKind::Sensor) {
            err("content", "Open Ephys Event Broadcaster messages carry spikes only; use `format = \"synfire\"` for sensor frames".into());
        }
        if self.format != WireFormat::Openephys
            && (self.raw_stream_name.is_some() || self.raw_electrode_names.is_some())
        {
            let field = if self.raw_stream_name.is_some() {
                "raw_stream_name"
            } else {
                "raw_electrode_names"
            };
            err(
                field,
                "names Open Ephys raw-mode units; it needs `format = \"openephys\"`".into(),
            );
        }
        if self.max_message_bytes.is_some_and(|b| b < 64) {
            err("max_message_bytes", "must be at least 64".into());
        }
        if self.receive_hwm_messages.is_some_and(|h| h < 0) {
            err("receive_hwm_messages", "must be ≥ 0 (0: unlimited)".into());
        }
        if let Some(g) = self.restart_gap_s
            && !(g.is_finite() && g >= 0.0)
        {
            err("restart_gap_s", format!("must be ≥ 0 seconds, got {g}"));
        }
        if self.ring_capacity == Some(0) {
            err("ring_capacity", "must be at least 1".into());
        }
        errors
    }

    /// Opens the SUB socket now, so that a bad endpoint is a startup error.
    fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        let cfg = self.settings(name);
        let socket = open(&cfg, ctx.zmq).map_err(|e| OpenError(e.to_string()))?;
        Ok(Box::new(OpenZmq { cfg, socket }))
    }
}

/// A connected (or bound) SUB socket, ready to receive, and a monitor of its disconnections
/// when it connects (libzmq drops a publisher that sent a frame over `ZMQ_MAXMSGSIZE` and
/// does not reconnect to it by itself: [`run`] does).
pub struct Subscriber {
    socket: zmq::Socket,
    monitor: Option<zmq::Socket>,
}

impl std::fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscriber").finish_non_exhaustive()
    }
}

/// A connected (or bound) SUB socket, ready to receive.
struct OpenZmq {
    cfg: ZmqSource,
    socket: Subscriber,
}

impl Source for OpenZmq {
    fn run(self: Box<Self>, ring: RingProducer) {
        run(&self.cfg, &self.socket, ring);
    }
}

/// The message format a ZMQ source reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireFormat {
    /// Open Ephys Event Broadcaster spikes (JSON or raw binary header).
    #[default]
    Openephys,
    /// synfire's binary batches (`docs/wire-format.md`).
    Synfire,
}

/// Settings of a ZMQ source.
#[derive(Clone, Debug)]
pub struct ZmqSource {
    /// Source name (metrics label, log field).
    pub name: String,
    /// ZeroMQ endpoint, e.g. `tcp://127.0.0.1:5557`.
    pub endpoint: String,
    /// Bind instead of connect.
    pub bind: bool,
    /// Message format.
    pub format: WireFormat,
    /// What the source carries (the synfire format carries either).
    pub content: StreamKind,
    /// Unit naming for Open Ephys messages.
    pub naming: Naming,
    /// Larger messages are rejected as `oversized`, bytes.
    pub max_message_bytes: usize,
    /// ZeroMQ receive high-water mark, messages (0: unlimited).
    pub receive_hwm: i32,
    /// An Open Ephys time this many seconds before the newest one is a publisher restart.
    pub restart_gap_s: f64,
    /// End the source at the publisher's end-of-stream message (synfire format).
    pub stop_on_end: bool,
}

/// Errors that stop a ZMQ source before it runs.
#[derive(Debug, thiserror::Error)]
#[error("source `{source_name}`: endpoint `{endpoint}`: {message}")]
pub struct ZmqError {
    /// The source.
    pub source_name: String,
    /// The endpoint.
    pub endpoint: String,
    /// What failed.
    pub message: String,
}

/// Opens the SUB socket (so that errors such as a bad endpoint surface before any thread
/// starts).
///
/// # Errors
/// [`ZmqError`] naming the endpoint.
pub fn open(cfg: &ZmqSource, ctx: &zmq::Context) -> Result<Subscriber, ZmqError> {
    let err = |m: String| ZmqError {
        source_name: cfg.name.clone(),
        endpoint: cfg.endpoint.clone(),
        message: m,
    };
    let s = ctx
        .socket(zmq::SUB)
        .map_err(|e| err(format!("cannot create a SUB socket: {e}")))?;
    // ZMQ_MAXMSGSIZE: libzmq refuses a larger frame while reading its header (and drops
    // that peer), so an absurd frame never takes memory; the check after receipt counts
    // what passes this limit but not the decoder's (`oversized`).
    let max_bytes = i64::try_from(cfg.max_message_bytes).unwrap_or(i64::MAX);
    s.set_rcvhwm(cfg.receive_hwm)
        .and_then(|()| s.set_maxmsgsize(max_bytes))
        .and_then(|()| s.set_rcvtimeo(100))
        .and_then(|()| s.set_subscribe(b""))
        .and_then(|()| s.set_reconnect_ivl(100))
        .and_then(|()| s.set_reconnect_ivl_max(1000))
        .map_err(|e| err(format!("cannot set socket options: {e}")))?;
    let mut monitor = None;
    if cfg.bind {
        s.bind(&cfg.endpoint)
            .map_err(|e| err(format!("cannot bind: {e}")))?;
    } else {
        static MONITORS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let at = format!(
            "inproc://synfire-monitor-{}",
            MONITORS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let m = ctx
            .socket(zmq::PAIR)
            .map_err(|e| err(format!("cannot create a monitor socket: {e}")))?;
        s.monitor(&at, zmq::SocketEvent::DISCONNECTED as i32)
            .and_then(|()| m.connect(&at))
            .map_err(|e| err(format!("cannot monitor the socket: {e}")))?;
        monitor = Some(m);
        s.connect(&cfg.endpoint)
            .map_err(|e| err(format!("cannot connect: {e}")))?;
    }
    Ok(Subscriber { socket: s, monitor })
}

/// Connects `sub` afresh when its monitor saw the publisher's connection dropped: libzmq
/// reconnects by itself after a network error, but not after a protocol error (a frame over
/// `ZMQ_MAXMSGSIZE`), which would leave the source deaf for good. Returns the disconnections
/// seen.
fn reconnect_if_dropped(cfg: &ZmqSource, sub: &Subscriber, counted: &metrics::Counter) -> u64 {
    let Some(m) = &sub.monitor else {
        return 0;
    };
    let mut seen = 0;
    while let Ok(event) = m.recv_multipart(zmq::DONTWAIT) {
        let id = event
            .first()
            .and_then(|f| f.get(..2))
            .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]));
        if id == zmq::SocketEvent::DISCONNECTED.to_raw() {
            seen += 1;
        }
    }
    if seen > 0 {
        counted.increment(seen);
        tracing::info!(
            source = %cfg.name,
            endpoint = %cfg.endpoint,
            disconnects = seen,
            "The publisher's connection dropped (it went away, or sent a frame over max_message_bytes); connecting afresh."
        );
        let _ = sub.socket.disconnect(&cfg.endpoint);
        if let Err(e) = sub.socket.connect(&cfg.endpoint) {
            tracing::error!(source = %cfg.name, error = %e, "Cannot connect again.");
        }
    }
    seen
}

/// Decoding state of one source: unit ids, sessions, sequence numbers, logged defects.
struct Decoder<'a> {
    cfg: &'a ZmqSource,
    units: HashMap<String, u32>,
    wire_units: HashMap<u32, u32>,
    session: Option<u64>,
    next_seq: u64,
    newest_t: f64,
    logged: HashSet<Malformed>,
    ttl: u64,
}

impl Decoder<'_> {
    fn malformed(&mut self, ring: &RingProducer, kind: Malformed) {
        ring.count_malformed(kind.as_str());
        if self.logged.insert(kind) {
            tracing::warn!(source = %self.cfg.name, kind = kind.as_str(), "Malformed message rejected: {kind} (logged once per kind; counted in synfire_messages_malformed_total).");
        }
    }

    fn unit(&mut self, ring: &mut RingProducer, name: &str) -> u32 {
        if let Some(&id) = self.units.get(name) {
            return id;
        }
        let id = self.units.len() as u32;
        self.units.insert(name.to_owned(), id);
        ring.push(Record::Unit {
            id,
            name: Arc::from(name),
        });
        id
    }

    fn restart(&mut self, ring: &mut RingProducer, why: &str) {
        tracing::info!(source = %self.cfg.name, "Publisher restarted ({why}); windows start afresh.");
        ring.push(Record::Restart);
        self.newest_t = f64::NEG_INFINITY;
    }

    /// Handles one message; returns `false` at the end of the stream.
    fn handle(&mut self, ring: &mut RingProducer, frames: &[Vec<u8>]) -> bool {
        let bytes: usize = frames.iter().map(Vec::len).sum();
        if bytes > self.cfg.max_message_bytes {
            self.malformed(ring, Malformed::Oversized);
            return true;
        }
        match self.cfg.format {
            WireFormat::Openephys => match openephys::decode_with(frames, &self.cfg.naming) {
                Ok(openephys::Event::Spike { unit, t_s }) => {
                    if t_s < self.newest_t - self.cfg.restart_gap_s {
                        self.restart(ring, "time went back");
                    }
                    self.newest_t = self.newest_t.max(t_s);
                    let id = self.unit(ring, &unit);
                    ring.push(Record::Spike { unit: id, t_s });
                }
                Ok(openephys::Event::Ttl) => self.ttl += 1,
                Err(kind) => self.malformed(ring, kind),
            },
            WireFormat::Synfire => {
                let [frame] = frames else {
                    self.malformed(ring, Malformed::FrameCount);
                    return true;
                };
                let message = match wire::decode(frame) {
                    Ok(m) => m,
                    Err(kind) => {
                        self.malformed(ring, kind);
                        return true;
                    }
                };
                let session = match &message {
                    Message::Spikes { session, .. }
                    | Message::Sensor { session, .. }
                    | Message::End { session } => *session,
                };
                if self.session.is_some_and(|s| s != session) {
                    self.restart(ring, "new session");
                    self.wire_units.clear();
                    self.next_seq = 0;
                }
                if self.session != Some(session) {
                    self.session = Some(session);
                    self.next_seq = 0;
                }
                match message {
                    Message::Spikes {
                        first_seq,
                        times,
                        units,
                        ..
                    } => {
                        if self.cfg.content != StreamKind::Spikes {
                            self.malformed(ring, Malformed::UnknownType);
                            return true;
                        }
                        self.check_seq(ring, first_seq, times.len() as u64);
                        for (t_s, u) in times.into_iter().zip(units) {
                            let id = match self.wire_units.get(&u) {
                                Some(&id) => id,
                                None => {
                                    let id = self.unit(ring, &u.to_string());
                                    self.wire_units.insert(u, id);
                                    id
                                }
                            };
                            ring.push(Record::Spike { unit: id, t_s });
                        }
                    }
                    Message::Sensor { frame, .. } => {
                        if self.cfg.content != StreamKind::Sensor {
                            self.malformed(ring, Malformed::UnknownType);
                            return true;
                        }
                        self.check_seq(ring, frame.first_sample, frame.samples() as u64);
                        ring.push(Record::Samples(Box::new(frame)));
                    }
                    Message::End { .. } => {
                        if self.cfg.stop_on_end {
                            return false;
                        }
                    }
                }
            }
        }
        true
    }

    fn check_seq(&mut self, ring: &RingProducer, first: u64, n: u64) {
        if first > self.next_seq {
            ring.count_dropped(first - self.next_seq, "publisher_gap");
            tracing::warn!(source = %self.cfg.name, missing = first - self.next_seq, "Sequence gap: events lost between publisher and socket (counted as dropped).");
        }
        self.next_seq = self.next_seq.max(first + n);
    }
}

/// Runs the source on the current thread until the publisher ends the stream (synfire format
/// with `stop_on_end`) or shutdown is requested; always pushes a final [`Record::End`].
pub fn run(cfg: &ZmqSource, sub: &Subscriber, mut ring: RingProducer) {
    let socket = &sub.socket;
    let disconnects = crate::live::telemetry::publisher_disconnects(&cfg.name);
    let mut d = Decoder {
        cfg,
        units: HashMap::new(),
        wire_units: HashMap::new(),
        session: None,
        next_seq: 0,
        newest_t: f64::NEG_INFINITY,
        logged: HashSet::new(),
        ttl: 0,
    };
    let reason = loop {
        if ring.stopping() {
            break EndReason::Interrupted;
        }
        match socket.recv_multipart(0) {
            Ok(frames) => {
                if !d.handle(&mut ring, &frames) {
                    break EndReason::Finished;
                }
            }
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => {
                reconnect_if_dropped(cfg, sub, &disconnects);
            }
            Err(e) => {
                tracing::error!(source = %cfg.name, error = %e, "Receive failed; the source stops.");
                break EndReason::Failed;
            }
        }
    };
    tracing::info!(
        source = %cfg.name,
        units = d.units.len(),
        ttl_skipped = d.ttl,
        "ZMQ source stopped."
    );
    ring.push(Record::End(reason));
    // Closing a SUB socket never needs to wait for anything.
    let _ = socket.set_linger(0);
}
