//! `synfire replay`: streams an archived session live over ZeroMQ, for demos and tests.
//!
//! Binds an XPUB socket (a PUB that also sees subscriptions), waits for the requested
//! number of subscribers, then publishes the spikes (or a sensor series) in time order, as
//! fast as possible or at real time × `speed`, in Open Ephys Event Broadcaster format (raw
//! binary header with exact f64 times, or JSON with `sample_number / sample_rate` times) or in
//! synfire's wire format (batches, then an end-of-stream message).

use std::path::PathBuf;
use std::time::Instant;

use crate::event::Ordering;
use crate::ingest::{self, IngestError, openephys, wire};
use crate::live::source::archive::Pacer;

/// Message format of `synfire replay`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplayFormat {
    /// Event Broadcaster, raw binary header: exact f64 times; unit labels must be channel
    /// numbers 0..=65535.
    Openephys,
    /// Event Broadcaster, JSON header: times rounded to the sample clock; any unit label.
    OpenephysJson,
    /// synfire's wire format: batches of spikes or sensor frames, then end of stream; unit
    /// labels must be integers 0..=4294967295.
    Synfire,
}

/// Why a replay could not run or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A setting is out of range; the message names it as the CLI flag.
    #[error("{0}")]
    Option(String),
    /// The archive could not be read.
    #[error(transparent)]
    Input(#[from] IngestError),
    /// A unit label the chosen format cannot carry.
    #[error("unit label `{label}` is not {needs}; use {instead}")]
    Label {
        /// The label.
        label: String,
        /// What the format needs.
        needs: &'static str,
        /// The format that carries it.
        instead: &'static str,
    },
    /// The socket failed (create, options, bind, receive, send).
    #[error("{what}: {source}")]
    Socket {
        /// What was being done, e.g. "`--to tcp://…`: cannot bind".
        what: String,
        /// ZeroMQ's error.
        source: zmq::Error,
    },
}

fn socket_error(what: impl Into<String>) -> impl FnOnce(zmq::Error) -> ReplayError {
    let what = what.into();
    move |source| ReplayError::Socket { what, source }
}

/// Settings of a replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// The archive (NWB, or a `label,time` CSV).
    pub input: PathBuf,
    /// Endpoint to bind, e.g. `tcp://127.0.0.1:5557`.
    pub to: String,
    /// `None`: as fast as possible; `Some(k)`: real time × k.
    pub speed: Option<f64>,
    /// Message format.
    pub format: ReplayFormat,
    /// Spikes (or samples) per synfire-format message.
    pub batch: usize,
    /// Wait for this many subscribers before sending.
    pub subscribers: usize,
    /// Sample clock of Open Ephys messages, Hz.
    pub sample_rate_hz: f64,
    /// Replay this NWB time series instead of the units table (synfire format only).
    pub series: Option<String>,
}

/// What a replay sent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ReplayStats {
    /// Spikes or samples sent.
    pub events: u64,
    /// ZeroMQ messages sent.
    pub messages: u64,
    /// Seconds from the first message to the last.
    pub seconds: f64,
}

/// Runs a replay to the end.
///
/// # Errors
/// [`ReplayError`]: a setting out of range, an unreadable input, unit labels the format
/// cannot carry, a socket that cannot be bound or fails while sending.
pub fn replay(opts: &ReplayOptions) -> Result<ReplayStats, ReplayError> {
    if opts.speed.is_some_and(|k| !(k.is_finite() && k > 0.0)) {
        return Err(ReplayError::Option(
            "`--speed` must be a positive factor of real time".into(),
        ));
    }
    if !(opts.sample_rate_hz.is_finite() && opts.sample_rate_hz > 0.0) {
        return Err(ReplayError::Option(
            "`--sample-rate` must be positive Hz".into(),
        ));
    }
    if opts.series.is_some() && opts.format != ReplayFormat::Synfire {
        return Err(ReplayError::Option(
            "`--series` needs `--format synfire` (Open Ephys messages carry spikes only)".into(),
        ));
    }
    let ctx = zmq::Context::new();
    let socket = ctx
        .socket(zmq::XPUB)
        .map_err(socket_error("creating the XPUB socket"))?;
    socket
        .set_sndhwm(0)
        .and_then(|()| socket.set_linger(30_000))
        .and_then(|()| socket.set_rcvtimeo(1000))
        .map_err(socket_error("setting socket options"))?;
    socket
        .bind(&opts.to)
        .map_err(socket_error(format!("`--to {}`: cannot bind", opts.to)))?;
    let session: u64 = rand::random();
    // Load before waiting, so errors come first.
    enum Data {
        Spikes(crate::event::EventStream),
        Series(ingest::nwb::TimeSeries),
    }
    let data = match &opts.series {
        Some(s) => Data::Series(ingest::nwb::read_timeseries(&opts.input, s)?),
        None => Data::Spikes(ingest::read_spikes(&opts.input, Ordering::SortIfNeeded)?),
    };
    if opts.subscribers > 0 {
        tracing::info!(endpoint = %opts.to, subscribers = opts.subscribers, "Waiting for subscribers.");
    }
    let mut seen = 0;
    while seen < opts.subscribers {
        match socket.recv_bytes(0) {
            Ok(m) if m.first() == Some(&1) => seen += 1,
            Ok(_) | Err(zmq::Error::EAGAIN) => {}
            Err(e) => return Err(socket_error("waiting for subscribers")(e)),
        }
    }
    let send = |frames: &[&[u8]]| -> Result<(), ReplayError> {
        socket
            .send_multipart(frames, 0)
            .map_err(socket_error("sending"))
    };
    let start = Instant::now();
    let mut stats = ReplayStats::default();
    match data {
        Data::Spikes(stream) => {
            let labels = stream.alphabet().labels();
            let t0 = stream.start();
            let pacer = Pacer::start(t0, opts.speed);
            match opts.format {
                ReplayFormat::Openephys | ReplayFormat::OpenephysJson => {
                    let channels: Vec<u16> = if opts.format == ReplayFormat::Openephys {
                        labels
                            .iter()
                            .map(|l| {
                                l.parse::<u16>().map_err(|_| ReplayError::Label {
                                    label: l.clone(),
                                    needs: "a channel number 0..=65535",
                                    instead: "`--format openephys-json` or `synfire`",
                                })
                            })
                            .collect::<Result<_, _>>()?
                    } else {
                        Vec::new()
                    };
                    for (t, ty) in stream.iter() {
                        pacer.wait(t, || false);
                        let frames = if opts.format == ReplayFormat::Openephys {
                            openephys::encode_raw(channels[ty.index()], t, opts.sample_rate_hz)
                        } else {
                            openephys::encode_json(&labels[ty.index()], t, opts.sample_rate_hz)
                        };
                        send(&[&frames[0], &frames[1]])?;
                        stats.events += 1;
                        stats.messages += 1;
                    }
                }
                ReplayFormat::Synfire => {
                    let ids: Vec<u32> = labels
                        .iter()
                        .map(|l| {
                            l.parse::<u32>().map_err(|_| ReplayError::Label {
                                label: l.clone(),
                                needs: "an integer unit id",
                                instead: "`--format openephys-json`",
                            })
                        })
                        .collect::<Result<_, _>>()?;
                    let (times, types) = (stream.times(), stream.types());
                    let mut i = 0;
                    while i < times.len() {
                        pacer.wait(times[i], || false);
                        // Everything due now, up to a batch.
                        let now_t = pacer.due_now();
                        let mut j = i + 1;
                        while j < times.len() && j - i < opts.batch.max(1) && times[j] <= now_t {
                            j += 1;
                        }
                        let units: Vec<u32> = types[i..j].iter().map(|t| ids[t.index()]).collect();
                        send(&[&wire::encode_spikes(
                            session,
                            i as u64,
                            &times[i..j],
                            &units,
                        )])?;
                        stats.events += (j - i) as u64;
                        stats.messages += 1;
                        i = j;
                    }
                    send(&[&wire::encode_end(session, times.len() as u64)])?;
                    stats.messages += 1;
                }
            }
        }
        Data::Series(series) => {
            let n = series.samples();
            let pacer = Pacer::start(series.time_of(0), opts.speed);
            let mut first = 0;
            while first < n {
                let end = (first + opts.batch.max(1)).min(n);
                pacer.wait(series.time_of(end - 1), || false);
                send(&[&wire::encode_sensor(session, &series.frame(first..end))])?;
                stats.events += (end - first) as u64;
                stats.messages += 1;
                first = end;
            }
            send(&[&wire::encode_end(session, n as u64)])?;
            stats.messages += 1;
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    Ok(stats)
}
