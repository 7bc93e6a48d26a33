//! synfire's binary wire format for spikes and sensor frames over ZeroMQ (version 1).
//!
//! Specified in `docs/wire-format.md`. One ZeroMQ message of one frame per batch, all
//! integers and floats little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"SYNF"` |
//! | 4 | 2 | version, `1` |
//! | 6 | 2 | kind: `1` spikes, `2` sensor frame, `3` end of stream |
//! | 8 | 8 | session id (random per publisher start; a change means a restart) |
//! | 16 | 8 | sequence number of the first event (spikes) or first sample (sensor) |
//! | 24 | 4 | count: events (spikes) or samples (sensor) |
//! | 28 | 4 | channels (sensor; 0 otherwise) |
//!
//! Spikes body: `count` f64 times (seconds), then `count` u32 unit ids.
//! Sensor body: f64 `t0_s` (time of the first sample), f64 `rate_hz`, then
//! `count × channels` f64 values, sample-major.

use crate::record::SensorFrame;

/// `b"SYNF"`.
pub const MAGIC: [u8; 4] = *b"SYNF";
/// The version this build writes and reads.
pub const VERSION: u16 = 1;
/// Header bytes.
pub const HEADER_BYTES: usize = 32;
/// Kind code of a spike batch.
pub const KIND_SPIKES: u16 = 1;
/// Kind code of a sensor frame.
pub const KIND_SENSOR: u16 = 2;
/// Kind code of the end-of-stream message.
pub const KIND_END: u16 = 3;

/// Why a message was rejected; `as_str` is the metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Malformed {
    /// A message with the wrong number of frames for its format.
    #[error("wrong number of frames")]
    FrameCount,
    /// Larger than the source's `max_message_bytes`.
    #[error("message larger than `max_message_bytes`")]
    Oversized,
    /// Not starting with `SYNF`.
    #[error("bad magic (not a synfire message)")]
    BadMagic,
    /// A version this build does not read.
    #[error("unsupported wire-format version")]
    Version,
    /// An unknown kind or type code.
    #[error("unknown type code")]
    UnknownType,
    /// Shorter than its header says, or a length that is not whole.
    #[error("truncated message")]
    Truncated,
    /// Unparseable JSON, or JSON without the fields of a spike.
    #[error("bad JSON")]
    BadJson,
    /// A NaN, infinite or negative time, or a non-positive rate.
    #[error("NaN, infinite or negative time or rate")]
    BadTime,
    /// A NaN or infinite sample value is allowed; this is a frame with zero channels or a
    /// count that does not match the body.
    #[error("inconsistent shape")]
    BadShape,
}

impl Malformed {
    /// The `kind` label of `synfire_messages_malformed_total`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FrameCount => "frame_count",
            Self::Oversized => "oversized",
            Self::BadMagic => "bad_magic",
            Self::Version => "version",
            Self::UnknownType => "unknown_type",
            Self::Truncated => "truncated",
            Self::BadJson => "bad_json",
            Self::BadTime => "bad_time",
            Self::BadShape => "bad_shape",
        }
    }
}

/// A decoded synfire message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A batch of spikes.
    Spikes {
        /// Publisher session.
        session: u64,
        /// Sequence number of the first spike.
        first_seq: u64,
        /// Times, seconds. Shape `[count]`.
        times: Vec<f64>,
        /// Unit ids. Shape `[count]`.
        units: Vec<u32>,
    },
    /// A block of sensor samples.
    Sensor {
        /// Publisher session.
        session: u64,
        /// The samples; `first_sample` is the sequence number.
        frame: SensorFrame,
    },
    /// The publisher's stream ended.
    End {
        /// Publisher session.
        session: u64,
    },
}

fn header(kind: u16, session: u64, seq: u64, count: u32, channels: u32, body: usize) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER_BYTES + body);
    b.extend_from_slice(&MAGIC);
    b.extend_from_slice(&VERSION.to_le_bytes());
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&session.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(&channels.to_le_bytes());
    b
}

/// Encodes a spike batch.
///
/// # Panics
/// If `times` and `units` differ in length or hold more than `u32::MAX` spikes.
#[must_use]
pub fn encode_spikes(session: u64, first_seq: u64, times: &[f64], units: &[u32]) -> Vec<u8> {
    assert_eq!(times.len(), units.len(), "times and units differ in length");
    let count = u32::try_from(times.len()).expect("at most u32::MAX spikes per batch");
    let mut b = header(KIND_SPIKES, session, first_seq, count, 0, times.len() * 12);
    for t in times {
        b.extend_from_slice(&t.to_le_bytes());
    }
    for u in units {
        b.extend_from_slice(&u.to_le_bytes());
    }
    b
}

/// Encodes a sensor frame.
///
/// # Panics
/// If the frame holds more than `u32::MAX` samples or channels.
#[must_use]
pub fn encode_sensor(session: u64, frame: &SensorFrame) -> Vec<u8> {
    let count = u32::try_from(frame.samples()).expect("at most u32::MAX samples per frame");
    let channels = u32::try_from(frame.channels).expect("at most u32::MAX channels");
    let mut b = header(
        KIND_SENSOR,
        session,
        frame.first_sample,
        count,
        channels,
        16 + frame.values.len() * 8,
    );
    b.extend_from_slice(&frame.t0_s.to_le_bytes());
    b.extend_from_slice(&frame.rate_hz.to_le_bytes());
    for v in &frame.values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// Encodes the end-of-stream message.
#[must_use]
pub fn encode_end(session: u64, next_seq: u64) -> Vec<u8> {
    header(KIND_END, session, next_seq, 0, 0, 0)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

fn f64_at(b: &[u8], at: usize) -> f64 {
    f64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// Decodes one message.
///
/// # Errors
/// [`Malformed`] naming what is wrong; a rejected message yields no events at all.
pub fn decode(b: &[u8]) -> Result<Message, Malformed> {
    if b.len() < 4 || b[..4] != MAGIC {
        return Err(if b.len() < 4 && MAGIC.starts_with(b) {
            Malformed::Truncated
        } else {
            Malformed::BadMagic
        });
    }
    if b.len() < HEADER_BYTES {
        return Err(Malformed::Truncated);
    }
    if u16_at(b, 4) != VERSION {
        return Err(Malformed::Version);
    }
    let kind = u16_at(b, 6);
    let session = u64_at(b, 8);
    let seq = u64_at(b, 16);
    let count = u32_at(b, 24) as usize;
    let channels = u32_at(b, 28) as usize;
    let body = &b[HEADER_BYTES..];
    match kind {
        KIND_SPIKES => {
            if Some(body.len()) != count.checked_mul(12) {
                return Err(Malformed::Truncated);
            }
            let times: Vec<f64> = (0..count).map(|i| f64_at(body, 8 * i)).collect();
            if times.iter().any(|t| !t.is_finite() || *t < 0.0) {
                return Err(Malformed::BadTime);
            }
            let units = (0..count)
                .map(|i| u32_at(body, 8 * count + 4 * i))
                .collect();
            Ok(Message::Spikes {
                session,
                first_seq: seq,
                times,
                units,
            })
        }
        KIND_SENSOR => {
            if channels == 0 {
                return Err(Malformed::BadShape);
            }
            // A shape whose byte size overflows `usize` is no message's: unchecked, the size
            // wraps to a small length that a short body matches, and collecting
            // `count × channels` samples then panics.
            let values = count.checked_mul(channels).ok_or(Malformed::BadShape)?;
            let bytes = values
                .checked_mul(8)
                .and_then(|b| b.checked_add(16))
                .ok_or(Malformed::BadShape)?;
            if body.len() != bytes {
                return Err(Malformed::Truncated);
            }
            let t0_s = f64_at(body, 0);
            let rate_hz = f64_at(body, 8);
            if !t0_s.is_finite() || t0_s < 0.0 || !rate_hz.is_finite() || rate_hz <= 0.0 {
                return Err(Malformed::BadTime);
            }
            let values = (0..values).map(|i| f64_at(body, 16 + 8 * i)).collect();
            Ok(Message::Sensor {
                session,
                frame: SensorFrame {
                    first_sample: seq,
                    t0_s,
                    rate_hz,
                    channels,
                    values,
                },
            })
        }
        KIND_END => {
            if !body.is_empty() {
                return Err(Malformed::Truncated);
            }
            Ok(Message::End { session })
        }
        _ => Err(Malformed::UnknownType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spikes_round_trip() {
        let b = encode_spikes(9, 100, &[0.5, 1.25], &[3, 7]);
        assert_eq!(b.len(), HEADER_BYTES + 24);
        assert_eq!(
            decode(&b),
            Ok(Message::Spikes {
                session: 9,
                first_seq: 100,
                times: vec![0.5, 1.25],
                units: vec![3, 7]
            })
        );
    }

    #[test]
    fn sensor_round_trip_keeps_nan_samples() {
        let frame = SensorFrame {
            first_sample: 5,
            t0_s: 2.0,
            rate_hz: 250.0,
            channels: 2,
            values: vec![1.0, f64::NAN, 3.0, 4.0],
        };
        let Ok(Message::Sensor { session, frame: f }) = decode(&encode_sensor(1, &frame)) else {
            panic!("not a sensor frame");
        };
        assert_eq!(session, 1);
        assert_eq!(
            (f.first_sample, f.t0_s, f.rate_hz, f.channels),
            (5, 2.0, 250.0, 2)
        );
        assert!(f.values[1].is_nan());
        assert_eq!(f.values[3], 4.0);
    }

    #[test]
    fn each_defect_has_its_own_kind() {
        let good = encode_spikes(1, 0, &[0.5], &[3]);
        assert_eq!(decode(&good[..20]), Err(Malformed::Truncated));
        assert_eq!(decode(&good[..good.len() - 1]), Err(Malformed::Truncated));
        assert_eq!(decode(b"SY"), Err(Malformed::Truncated));
        assert_eq!(decode(b"{\"event_type\":1}"), Err(Malformed::BadMagic));
        let mut v = good.clone();
        v[4] = 2;
        assert_eq!(decode(&v), Err(Malformed::Version));
        let mut k = good.clone();
        k[6] = 77;
        assert_eq!(decode(&k), Err(Malformed::UnknownType));
        for bad in [f64::NAN, -1.0, f64::INFINITY] {
            assert_eq!(
                decode(&encode_spikes(1, 0, &[bad], &[0])),
                Err(Malformed::BadTime)
            );
        }
        let mut zero_ch = encode_sensor(
            1,
            &SensorFrame {
                first_sample: 0,
                t0_s: 0.0,
                rate_hz: 1.0,
                channels: 1,
                values: vec![1.0],
            },
        );
        zero_ch[28] = 0;
        assert_eq!(decode(&zero_ch), Err(Malformed::BadShape));
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn decode_never_panics_on_corrupted_headers(
            flips in proptest::collection::vec((0usize..56, any::<u8>()), 1..6)
        ) {
            let mut b = encode_spikes(1, 0, &[0.5, 0.75], &[1, 2]);
            for (at, v) in flips {
                b[at] = v;
            }
            let _ = decode(&b);
        }
    }
}
