//! The ZeroMQ SUB source: one thread owns the socket (libzmq sockets are not thread-safe),
//! decodes Open Ephys Event Broadcaster or synfire wire-format messages, and pushes records
//! onto its ring.
//!
//! Nothing accepted is lost silently: malformed messages are counted per kind
//! (`synfire_messages_malformed_total`) and logged once per kind; gaps in the synfire format's
//! sequence numbers count as dropped events (`reason="publisher_gap"`); a full ring under
//! `drop_newest` counts `reason="ring_full"`. A publisher that restarts is picked up again:
//! SUB sockets reconnect by themselves (and the source connects afresh when libzmq drops a
//! publisher for a frame over [`REFUSE_FACTOR`] × `max_message_bytes`, which it would not); a lost connection is
//! a [`Record::Disconnected`], a gap for the windows, counted in
//! `synfire_publisher_disconnects_total` ([`Subscriber`]); a new session id (synfire format) emits
//! [`Record::Restart`] so the windows start afresh; a jump back in time of more than
//! `restart_gap_s` (Open Ephys) or ahead by more than `gap_s`, confirmed by `confirm_events`
//! spikes, is judged by the window thread's event clock
//! ([`crate::live::window::EventClock`], [`ZmqSourceConfig::clock`]).
//!
//! **Duplicates**: a wire message received again is counted once; its repeats are counted as
//! `duplicate` (the line's `duplicate`), not passed on. Synfire format: spikes whose sequence
//! numbers were already received in the session. Open Ephys (no sequence numbers): a spike
//! of the same unit at the same time as one received in the last
//! [`DEDUP_HORIZON_S`] seconds of event time (at most [`DEDUP_MAX`] remembered).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{OpenContext, OpenError, Source, SourceConfig};
use crate::ingest::openephys::{self, Naming, UnitKey};
use crate::ingest::wire::{self, Malformed, Message};
use crate::live::buffer::{Overflow, RingProducer};
use crate::live::config::section::{ConfigError, SocketMode};
use crate::live::window::ClockRules;
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
    /// Open Ephys: a time this far before the newest is a restart candidate (default 10 s).
    pub restart_gap_s: Option<f64>,
    /// A time this far after the newest is a jump candidate: once confirmed, a gap that marks
    /// the windows across it incomplete (default 10 s; window module docs).
    pub gap_s: Option<f64>,
    /// Consecutive candidates that confirm a jump or a restart (default 3).
    pub confirm_events: Option<u32>,
    /// End at the publisher's end-of-stream message (default true; synfire format).
    pub stop_on_end: Option<bool>,
    /// Overflow policy (default `drop_newest`: never stall the socket).
    pub overflow: Option<Overflow>,
    /// Ring capacity, records (default 1,048,576).
    pub ring_capacity: Option<usize>,
    /// The most distinct units (names) the source takes (default [`DEFAULT_MAX_UNITS`]); a
    /// spike of a unit beyond them is dropped and counted (`reason="unit_limit"`), so a
    /// publisher inventing names cannot grow the unit tables without bound.
    pub max_units: Option<usize>,
}

/// The default bound on a ZMQ source's distinct units (`max_units`).
pub const DEFAULT_MAX_UNITS: usize = 16_384;

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
            max_units: self.max_units.unwrap_or(DEFAULT_MAX_UNITS),
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

    /// Jumps ahead beyond `gap_s` and (Open Ephys, which has no session ids) back beyond
    /// `restart_gap_s`, each confirmed by `confirm_events` spikes.
    fn clock(&self) -> ClockRules {
        ClockRules {
            gap_s: Some(self.gap_s.unwrap_or(10.0)),
            restart_gap_s: (self.format == WireFormat::Openephys)
                .then(|| self.restart_gap_s.unwrap_or(10.0)),
            confirm_events: self.confirm_events.unwrap_or(3),
        }
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
        for (field, v) in [("restart_gap_s", self.restart_gap_s), ("gap_s", self.gap_s)] {
            if let Some(g) = v
                && !(g.is_finite() && g >= 0.0)
            {
                err(field, format!("must be ≥ 0 seconds, got {g}"));
            }
        }
        if self.confirm_events == Some(0) {
            err("confirm_events", "must be at least 1".into());
        }
        if self.ring_capacity == Some(0) {
            err("ring_capacity", "must be at least 1".into());
        }
        if self.max_units == Some(0) {
            err("max_units", "must be at least 1".into());
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

/// A connected (or bound) SUB socket, ready to receive, and the one monitor of its lost
/// connections (`ZMQ_EVENT_DISCONNECTED`). [`run`] turns each into a [`Record::Disconnected`]
/// (a `disconnected` gap for the windows), counts it in `synfire_publisher_disconnects_total`
/// and, when the socket connects, connects afresh: libzmq reconnects by itself after a
/// network error but not after dropping a publisher that sent a frame over
/// `ZMQ_MAXMSGSIZE` ([`REFUSE_FACTOR`]), which would leave the source deaf for good.
pub struct Subscriber {
    socket: zmq::Socket,
    /// A PAIR socket receiving `socket`'s `disconnected` events through `inproc://`.
    monitor: zmq::Socket,
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

/// How many lost connections `monitor` has reported since the last call (never waits).
fn disconnections(monitor: &zmq::Socket) -> u64 {
    let mut lost = 0;
    while let Ok(frames) = monitor.recv_multipart(zmq::DONTWAIT) {
        // Frame 0: the event (u16, little-endian) and its value (u32).
        if frames.first().and_then(|f| f.get(..2)).is_some_and(|e| {
            u16::from_le_bytes([e[0], e[1]]) == zmq::SocketEvent::DISCONNECTED.to_raw()
        }) {
            lost += 1;
        }
    }
    lost
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
    /// The most distinct units the source takes ([`ZmqSourceConfig::max_units`]).
    pub max_units: usize,
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

/// A frame over this many times a source's `max_message_bytes` is refused by libzmq while
/// its header is read (`ZMQ_MAXMSGSIZE`), which drops the publisher's connection; smaller
/// ones over `max_message_bytes` are received and counted as `oversized`.
pub const REFUSE_FACTOR: usize = 4;

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
    // that peer), so an absurd frame never takes memory. It is set at
    // [`REFUSE_FACTOR`] × `max_message_bytes`: a frame somewhat over the limit is received,
    // counted `oversized` by the decoder, and costs no connection (nor the messages that
    // follow it while the source connects again).
    let max_bytes =
        i64::try_from(cfg.max_message_bytes.saturating_mul(REFUSE_FACTOR)).unwrap_or(i64::MAX);
    s.set_rcvhwm(cfg.receive_hwm)
        .and_then(|()| s.set_maxmsgsize(max_bytes))
        .and_then(|()| s.set_rcvtimeo(100))
        .and_then(|()| s.set_subscribe(b""))
        .and_then(|()| s.set_reconnect_ivl(100))
        .and_then(|()| s.set_reconnect_ivl_max(1000))
        .map_err(|e| err(format!("cannot set socket options: {e}")))?;
    // The monitor is set up before the socket binds or connects, so that no lost
    // connection goes unseen.
    static MONITORS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let at = format!(
        "inproc://synfire-monitor-{}-{}",
        std::process::id(),
        MONITORS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let monitor = ctx
        .socket(zmq::PAIR)
        .map_err(|e| err(format!("cannot create a monitor socket: {e}")))?;
    s.monitor(&at, zmq::SocketEvent::DISCONNECTED as i32)
        .and_then(|()| monitor.connect(&at))
        .map_err(|e| err(format!("cannot monitor the socket: {e}")))?;
    if cfg.bind {
        s.bind(&cfg.endpoint)
            .map_err(|e| err(format!("cannot bind: {e}")))?;
    } else {
        s.connect(&cfg.endpoint)
            .map_err(|e| err(format!("cannot connect: {e}")))?;
    }
    Ok(Subscriber { socket: s, monitor })
}

/// Connects `sub` afresh after `lost` dropped connections (a connecting socket only; a
/// bound one waits for its publishers to connect again), counting them.
fn reconnect_after(cfg: &ZmqSource, sub: &Subscriber, lost: u64, counted: &metrics::Counter) {
    counted.increment(lost);
    if cfg.bind {
        return;
    }
    tracing::info!(
        source = %cfg.name,
        endpoint = %cfg.endpoint,
        disconnects = lost,
        "The publisher's connection dropped (it went away, or sent a frame over 4 × max_message_bytes); connecting afresh."
    );
    let _ = sub.socket.disconnect(&cfg.endpoint);
    if let Err(e) = sub.socket.connect(&cfg.endpoint) {
        tracing::error!(source = %cfg.name, error = %e, "Cannot connect again.");
    }
}

/// Decoding state of one source: unit ids, sessions, sequence numbers, logged defects.
struct Decoder<'a> {
    cfg: &'a ZmqSource,
    units: HashMap<String, u32>,
    wire_units: HashMap<u32, u32>,
    session: Option<u64>,
    next_seq: u64,
    logged: HashSet<Malformed>,
    /// Whether the `max_units` warning was logged.
    logged_unit_limit: bool,
    ttl: u64,
    /// Open Ephys spikes received lately, to recognise repeats: (unit id, time bits).
    recent: HashSet<(u32, u64)>,
    /// The same, oldest first, with their times.
    recent_order: VecDeque<(f64, (u32, u64))>,
}

/// How far back in event time an Open Ephys repeat is recognised, seconds.
pub const DEDUP_HORIZON_S: f64 = 2.0;
/// At most this many Open Ephys spikes are remembered to recognise repeats.
pub const DEDUP_MAX: usize = 1 << 18;

impl Decoder<'_> {
    fn malformed(&mut self, ring: &RingProducer, kind: Malformed) {
        ring.count_malformed(kind.as_str());
        if self.logged.insert(kind) {
            tracing::warn!(source = %self.cfg.name, kind = kind.as_str(), "Malformed message rejected: {kind} (logged once per kind; counted in synfire_messages_malformed_total).");
        }
    }

    /// The id of unit `name`, announced when new; `None` (the spike dropped and counted)
    /// for a new unit beyond `max_units`.
    fn unit(&mut self, ring: &mut RingProducer, name: &str) -> Option<u32> {
        if let Some(&id) = self.units.get(name) {
            return Some(id);
        }
        if self.units.len() >= self.cfg.max_units {
            ring.count_dropped(1, "unit_limit");
            if !self.logged_unit_limit {
                self.logged_unit_limit = true;
                tracing::warn!(source = %self.cfg.name, max_units = self.cfg.max_units, unit = %name, "More distinct units than `max_units`: spikes of further units are dropped (counted, reason unit_limit).");
            }
            return None;
        }
        let id = self.units.len() as u32;
        self.units.insert(name.to_owned(), id);
        ring.push(Record::Unit {
            id,
            name: Arc::from(name),
        });
        Some(id)
    }

    fn restart(&mut self, ring: &mut RingProducer, why: &str) {
        tracing::info!(source = %self.cfg.name, "Publisher restarted ({why}); windows start afresh.");
        ring.push(Record::Restart);
        self.recent.clear();
        self.recent_order.clear();
    }

    /// Whether Open Ephys spike (`unit`, `t_s`) repeats one received lately (then counted);
    /// remembers it otherwise.
    fn repeated(&mut self, ring: &RingProducer, unit: u32, t_s: f64) -> bool {
        let key = (unit, t_s.to_bits());
        if !self.recent.insert(key) {
            ring.count_duplicate(1);
            return true;
        }
        self.recent_order.push_back((t_s, key));
        // Forget spikes (first received first) more than the horizon before this one: a
        // restart or a stray far ahead does not leave the memory stale.
        while let Some(&(t, k)) = self.recent_order.front() {
            if (t - t_s).abs() <= DEDUP_HORIZON_S && self.recent_order.len() <= DEDUP_MAX {
                break;
            }
            self.recent.remove(&k);
            self.recent_order.pop_front();
        }
        false
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
                    // Restarts and jumps are judged by the window thread's event clock.
                    let Some(id) = self.unit(ring, &unit) else {
                        return true;
                    };
                    if !self.repeated(ring, id, t_s) {
                        ring.push(Record::Spike { unit: id, t_s });
                    }
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
                        let repeated = self.check_seq(ring, first_seq, times.len() as u64);
                        if repeated > 0 {
                            ring.count_duplicate(repeated);
                        }
                        for (t_s, u) in times.into_iter().zip(units).skip(repeated as usize) {
                            let id = match self.wire_units.get(&u) {
                                Some(&id) => id,
                                None => {
                                    let Some(id) = self.unit(ring, &u.to_string()) else {
                                        continue;
                                    };
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
                        // Repeated samples are late for the sensor windows (counted there).
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

    /// Checks a message's sequence numbers `first..first + n`: a gap before them counts as
    /// dropped; returns how many of them (a prefix) were already received.
    fn check_seq(&mut self, ring: &RingProducer, first: u64, n: u64) -> u64 {
        if first > self.next_seq {
            ring.count_dropped(first - self.next_seq, "publisher_gap");
            tracing::warn!(source = %self.cfg.name, missing = first - self.next_seq, "Sequence gap: events lost between publisher and socket (counted as dropped).");
        }
        let end = first.saturating_add(n);
        let repeated = self.next_seq.min(end).saturating_sub(first);
        self.next_seq = self.next_seq.max(end);
        repeated
    }
}

/// Runs the source on the current thread until the publisher ends the stream (synfire format
/// with `stop_on_end`) or shutdown is requested; always pushes a final [`Record::End`].
///
/// A lost connection to the publisher ([`Subscriber`]) is pushed as [`Record::Disconnected`]
/// after what arrived before it, counted in `synfire_publisher_disconnects_total`, and a
/// connecting socket connects afresh.
pub fn run(cfg: &ZmqSource, sub: &Subscriber, mut ring: RingProducer) {
    let socket = &sub.socket;
    let disconnects = crate::live::telemetry::publisher_disconnects(&cfg.name);
    let mut d = Decoder {
        cfg,
        units: HashMap::new(),
        wire_units: HashMap::new(),
        session: None,
        next_seq: 0,
        logged: HashSet::new(),
        logged_unit_limit: false,
        ttl: 0,
        recent: HashSet::new(),
        recent_order: VecDeque::new(),
    };
    let reason = loop {
        if ring.stopping() {
            break EndReason::Interrupted;
        }
        let lost = disconnections(&sub.monitor);
        if lost > 0 {
            // What arrived before the connection was lost comes first.
            let mut finished = false;
            while let Ok(frames) = socket.recv_multipart(zmq::DONTWAIT) {
                if !d.handle(&mut ring, &frames) {
                    finished = true;
                    break;
                }
            }
            if finished {
                break EndReason::Finished;
            }
            tracing::warn!(source = %cfg.name, "The publisher's connection was lost; the windows across the outage carry it as their gap.");
            ring.push(Record::Disconnected);
            reconnect_after(cfg, sub, lost, &disconnects);
        }
        match socket.recv_multipart(0) {
            Ok(frames) => {
                if !d.handle(&mut ring, &frames) {
                    break EndReason::Finished;
                }
            }
            Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => {}
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
