//! What sources produce: the records that travel from a source through its ring to the
//! window thread ([`Record`], [`SensorFrame`], [`EndReason`]) and the two kinds of stream
//! ([`StreamKind`]).
//!
//! A model module: it depends on nothing in the crate, so decoders (`ingest`), the ring, the
//! windows and the stages all import it from below.

use std::sync::Arc;

/// A block of samples of a continuous sensor stream.
///
/// `values` is sample-major: shape `[samples, channels]`, sample `k` of channel `c` at
/// `values[k * channels + c]`. Sample `k` of the frame is sample `first_sample + k` of the
/// stream, at `t0_s + k / rate_hz` seconds.
#[derive(Clone, Debug, PartialEq)]
pub struct SensorFrame {
    /// Index of the frame's first sample in the stream (0-based).
    pub first_sample: u64,
    /// Time of the first sample, seconds.
    pub t0_s: f64,
    /// Sampling rate, Hz (> 0).
    pub rate_hz: f64,
    /// Channels per sample (≥ 1).
    pub channels: usize,
    /// Sample-major values, shape `[samples, channels]`.
    pub values: Vec<f64>,
}

impl SensorFrame {
    /// Number of samples (rows).
    #[must_use]
    pub fn samples(&self) -> usize {
        self.values.len() / self.channels.max(1)
    }
}

/// Why a source ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EndReason {
    /// The input is exhausted (end of file, or the publisher's end-of-stream message): open
    /// windows that hold data are emitted, marked incomplete.
    Finished,
    /// Shutdown was requested (signal): open windows are emitted marked incomplete; stages
    /// finish what they can before the shutdown deadline.
    Interrupted,
    /// The source failed; the error was logged.
    Failed,
}

/// One item on a ring.
#[derive(Clone, Debug)]
pub enum Record {
    /// A spike of unit `unit` (an id announced earlier by [`Record::Unit`]) at `t_s` seconds.
    Spike {
        /// Unit id, dense per source.
        unit: u32,
        /// Time, seconds (finite, ≥ 0).
        t_s: f64,
    },
    /// Names unit `id`; precedes its first spike.
    Unit {
        /// Dense id.
        id: u32,
        /// The unit's label (NWB unit id, Open Ephys key, wire-format unit id).
        name: Arc<str>,
    },
    /// Samples of a sensor stream.
    Samples(Box<SensorFrame>),
    /// The publisher restarted (new session, or time jumped back): windows restart.
    Restart,
    /// The connection to the publisher was lost (a ZeroMQ socket's `disconnected` event):
    /// events may be missing until the next one, which then follows a gap.
    Disconnected,
    /// The source ended; always the last record.
    End(EndReason),
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
