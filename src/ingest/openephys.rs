//! Open Ephys GUI **Event Broadcaster** spike messages (ZeroMQ PUB, default `tcp://*:5557`).
//!
//! Two frames per message (`../shared/DESIGN.md` §3):
//! - frame 0: u16 little-endian base type, `1` = spike, `0` = TTL (TTLs are skipped);
//! - frame 1, JSON mode (the broadcaster's default): `{"event_type":"spike","stream":str,
//!   "source_node":int,"electrode":str,"num_channels":int,"sample_rate":float,
//!   "sample_number":int,"sorted_id":int,"amp1":float,...}`; time = `sample_number /
//!   sample_rate` seconds;
//! - frame 1, raw binary mode (little-endian): u8 base type (`2`), u8 channel type (1 single
//!   electrode, 2 stereotrode, 3 tetrode), u16 source node @2, u16 stream id @4, u16 electrode
//!   index @6, i64 sample number @8, **f64 timestamp seconds @16**, u16 sorted id @24, then
//!   f32 thresholds and the f32 waveform (ignored here).
//!
//! # Unit names: one scheme for both modes and for recordings
//!
//! What each mode sends, from the sources (open-ephys-plugins/event-broadcaster
//! `Source/EventBroadcaster.cpp` `sendSpike`, branches `main` and `juce8`; plugin-GUI
//! `Source/Processors/Events/Spike.cpp` `Spike::serialize`; `Source/Processors/Settings/
//! InfoObject.cpp` `addProcessor`):
//!
//! | field | JSON mode | raw mode |
//! |---|---|---|
//! | stream | its **name** (`getStreamName`) | its numeric **id** (`getStreamId`, 10000 + n) |
//! | node | `source_node` = `getNodeId()`: the node the channel object was last copied to, i.e. the **Event Broadcaster's own id** | `getSourceNodeId()`: the **Spike Detector's** id |
//! | electrode | its **name** (`Electrode 1`, user-editable) | its **index** within the stream (`getLocalIndex`) and its channel type |
//! | sorted id | `sorted_id` | u16 @24 |
//!
//! Only the sorted id (and the sample number) is the same field in both; the node is a
//! *different* node in each mode, so it is never part of a name. A unit is named by the
//! electrode's **name**, what the GUI shows, what JSON mode sends and what a binary recording
//! stores (`structure.oebin` `spikes[].name`, see [`super::openephys_binary`]), and its sorted
//! id. In raw mode the name is looked up by electrode index in [`Naming::raw_electrodes`]
//! when given; otherwise it is the Spike Detector's default name for the channel type and
//! index (`SpikeDetector::addSpikeChannel`: `Electrode n`, `Stereotrode n`, `Tetrode n`,
//! `n` = index + 1), which equals the JSON name whenever the stream's electrodes are of one
//! type and keep their default names (channel type 0, which the GUI never sends but
//! emulators do, is read as a single electrode). With [`UnitKey`]:
//!
//! | key | name | e.g. |
//! |---|---|---|
//! | `electrode_sorted_id` (default) | `{electrode}/{sorted_id}` | `Electrode 3/2` |
//! | `electrode` | `{electrode}` (sorting ignored) | `Electrode 3` |
//! | `full` | `{stream}/{electrode}/{sorted_id}` | `ProbeA-AP/Electrode 3/2` |
//!
//! In raw mode `full`'s stream is [`Naming::raw_stream`] when given, else the stream id in
//! decimal (raw messages carry no stream name). Sorted id 0 means unsorted (the Spike
//! Detector does not sort; a Spike Sorter plugin numbers units from 1).
//!
//! Before this scheme, `full` was `{stream}/{source_node}/{electrode}/{sorted_id}` with the
//! electrode's name in JSON mode and its index in raw mode, so the two modes named every unit
//! differently.

use serde::{Deserialize, Serialize};

use super::wire::Malformed;

/// Frame-0 code of a TTL event.
pub const TYPE_TTL: u16 = 0;
/// Frame-0 code of a spike.
pub const TYPE_SPIKE: u16 = 1;
/// First byte of a raw binary spike header.
pub const RAW_SPIKE: u8 = 2;
/// Bytes of the raw binary spike header before thresholds and waveform.
pub const RAW_HEADER_BYTES: usize = 26;

/// Which fields name an Open Ephys unit (module docs: the scheme and its sources).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitKey {
    /// `stream/electrode/sorted_id`: distinct for every sorted unit of every stream.
    Full,
    /// The electrode alone (one unit per electrode, sorting ignored).
    Electrode,
    /// `electrode/sorted_id`: the default; the same in JSON mode, raw mode and recordings.
    #[default]
    ElectrodeSortedId,
}

impl UnitKey {
    /// Every key with its configuration spelling.
    pub const ALL: [(Self, &'static str); 3] = [
        (Self::Full, "full"),
        (Self::Electrode, "electrode"),
        (Self::ElectrodeSortedId, "electrode_sorted_id"),
    ];

    /// The unit name of a spike of electrode `electrode` (its name), stream `stream` (its
    /// name) and sorted id `sorted_id` under this key.
    #[must_use]
    pub fn name(self, stream: &str, electrode: &str, sorted_id: &str) -> String {
        match self {
            Self::Full => format!("{stream}/{electrode}/{sorted_id}"),
            Self::Electrode => electrode.to_owned(),
            Self::ElectrodeSortedId => format!("{electrode}/{sorted_id}"),
        }
    }
}

impl std::str::FromStr for UnitKey {
    type Err = String;

    /// Parses `full`, `electrode` or `electrode_sorted_id` (`-` for `_` accepted).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().replace('-', "_");
        Self::ALL
            .iter()
            .find(|(_, name)| *name == wanted)
            .map(|(key, _)| *key)
            .ok_or_else(|| {
                format!(
                    "`{}` is not a unit key; expected one of: full, electrode, \
                     electrode_sorted_id",
                    super::csv::cut(s)
                )
            })
    }
}

/// How Event Broadcaster spikes are named: the key and, for raw mode (which sends indices,
/// not names), the names to use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Naming {
    /// Which fields make the name.
    pub key: UnitKey,
    /// Raw mode: the stream's name for [`UnitKey::Full`] (default: the stream id in decimal).
    pub raw_stream: Option<String>,
    /// Raw mode: electrode names by electrode index (the Spike Detector's order); an index
    /// past the list gets the default name (module docs).
    pub raw_electrodes: Vec<String>,
}

impl From<UnitKey> for Naming {
    fn from(key: UnitKey) -> Self {
        Self {
            key,
            ..Self::default()
        }
    }
}

/// The Spike Detector's default name of the electrode at `index` of channel type
/// `channel_type` (plugin-GUI `SpikeChannel::getDefaultChannelPrefix`: 1 `Electrode `, 2
/// `Stereotrode `, 3 `Tetrode `, 4 `Template `, else `Spike Channel `; 0 is read as 1),
/// numbered from 1.
#[must_use]
pub(crate) fn default_electrode_name(channel_type: u8, index: u16) -> String {
    let prefix = match channel_type {
        0 | 1 => "Electrode",
        2 => "Stereotrode",
        3 => "Tetrode",
        4 => "Template",
        _ => "Spike Channel",
    };
    format!("{prefix} {}", u32::from(index) + 1)
}

/// One decoded message.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A spike of unit `unit` at `t_s` seconds.
    Spike {
        /// The unit's name by the source's [`UnitKey`].
        unit: String,
        /// Time, seconds (finite, ≥ 0).
        t_s: f64,
    },
    /// A TTL event (not a spike; skipped).
    Ttl,
}

#[derive(Deserialize)]
struct JsonSpike {
    #[serde(default)]
    event_type: Option<String>,
    #[serde(default)]
    stream: serde_json::Value,
    electrode: serde_json::Value,
    sample_rate: f64,
    sample_number: i64,
    #[serde(default)]
    sorted_id: serde_json::Value,
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Decodes one Event Broadcaster message (its frames), naming units by `key` alone (raw mode's
/// electrodes by their default names): [`decode_with`] with [`Naming::from`]`(key)`.
///
/// # Errors
/// As [`decode_with`].
pub fn decode(frames: &[Vec<u8>], key: UnitKey) -> Result<Event, Malformed> {
    decode_with(frames, &Naming::from(key))
}

/// Decodes one Event Broadcaster message (its frames), naming units by `naming` (module docs).
///
/// # Errors
/// [`Malformed::FrameCount`] unless there are two frames; [`Malformed::UnknownType`] for a
/// frame-0 code other than spike or TTL (or a raw header not starting with `2`);
/// [`Malformed::BadJson`], [`Malformed::Truncated`], [`Malformed::BadTime`] (NaN, infinite or
/// negative times, a non-positive sample rate).
pub fn decode_with(frames: &[Vec<u8>], naming: &Naming) -> Result<Event, Malformed> {
    let [kind, body] = frames else {
        return Err(Malformed::FrameCount);
    };
    let kind: [u8; 2] = kind
        .as_slice()
        .try_into()
        .map_err(|_| Malformed::Truncated)?;
    match u16::from_le_bytes(kind) {
        TYPE_TTL => return Ok(Event::Ttl),
        TYPE_SPIKE => {}
        _ => return Err(Malformed::UnknownType),
    }
    if body.first() == Some(&b'{') {
        let j: JsonSpike = serde_json::from_slice(body).map_err(|_| Malformed::BadJson)?;
        if j.event_type.as_deref().is_some_and(|e| e != "spike") {
            return Err(Malformed::UnknownType);
        }
        if !(j.sample_rate.is_finite() && j.sample_rate > 0.0) {
            return Err(Malformed::BadTime);
        }
        let t_s = j.sample_number as f64 / j.sample_rate;
        if !t_s.is_finite() || t_s < 0.0 {
            return Err(Malformed::BadTime);
        }
        let unit = naming
            .key
            .name(&text(&j.stream), &text(&j.electrode), &text(&j.sorted_id));
        return Ok(Event::Spike { unit, t_s });
    }
    if body.len() < RAW_HEADER_BYTES {
        return Err(Malformed::Truncated);
    }
    if body[0] != RAW_SPIKE {
        return Err(Malformed::UnknownType);
    }
    let u16_at = |at: usize| u16::from_le_bytes([body[at], body[at + 1]]);
    let t_s = f64::from_le_bytes(body[16..24].try_into().map_err(|_| Malformed::Truncated)?);
    if !t_s.is_finite() || t_s < 0.0 {
        return Err(Malformed::BadTime);
    }
    let index = u16_at(6);
    let electrode = naming
        .raw_electrodes
        .get(usize::from(index))
        .cloned()
        .unwrap_or_else(|| default_electrode_name(body[1], index));
    let stream = naming
        .raw_stream
        .clone()
        .unwrap_or_else(|| u16_at(4).to_string());
    let unit = naming
        .key
        .name(&stream, &electrode, &u16_at(24).to_string());
    Ok(Event::Spike { unit, t_s })
}

/// Encodes a spike in JSON mode, on stream `synfire-replay`, node 0, sorted id 0: the time
/// becomes `round(t_s × sample_rate)` samples.
#[must_use]
pub fn encode_json(electrode: &str, t_s: f64, sample_rate: f64) -> [Vec<u8>; 2] {
    let body = serde_json::json!({
        "event_type": "spike",
        "stream": "synfire-replay",
        "source_node": 0,
        "electrode": electrode,
        "num_channels": 1,
        "sample_rate": sample_rate,
        "sample_number": (t_s * sample_rate).round() as i64,
        "sorted_id": 0,
        "amp1": 0.0,
    });
    [
        TYPE_SPIKE.to_le_bytes().to_vec(),
        body.to_string().into_bytes(),
    ]
}

/// Encodes a spike in raw binary mode on electrode index `channel` (a single electrode;
/// stream 0, node 0, sorted id 0), carrying the exact f64 time, with one f32 threshold and
/// no waveform samples. Decoded without a name table, its electrode is `Electrode
/// {channel + 1}` (module docs).
#[must_use]
pub fn encode_raw(channel: u16, t_s: f64, sample_rate: f64) -> [Vec<u8>; 2] {
    let mut b = Vec::with_capacity(RAW_HEADER_BYTES + 4);
    b.push(RAW_SPIKE);
    b.push(1); // channel type: single electrode (SpikeChannel::SINGLE)
    b.extend_from_slice(&0u16.to_le_bytes()); // node
    b.extend_from_slice(&0u16.to_le_bytes()); // stream
    b.extend_from_slice(&channel.to_le_bytes());
    b.extend_from_slice(&((t_s * sample_rate).round() as i64).to_le_bytes());
    b.extend_from_slice(&t_s.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes()); // sorted id
    b.extend_from_slice(&0f32.to_le_bytes()); // threshold of the one channel
    [TYPE_SPIKE.to_le_bytes().to_vec(), b]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_spike_time_is_sample_number_over_rate() {
        let frames = vec![
            1u16.to_le_bytes().to_vec(),
            br#"{"event_type":"spike","stream":"example_data","source_node":104,"electrode":"SE0","num_channels":1,"sample_rate":30000.0,"sample_number":45000,"sorted_id":2,"amp1":-55.1}"#.to_vec(),
        ];
        assert_eq!(
            decode(&frames, UnitKey::Full),
            Ok(Event::Spike {
                unit: "example_data/SE0/2".into(),
                t_s: 1.5
            })
        );
        assert_eq!(
            decode(&frames, UnitKey::ElectrodeSortedId),
            Ok(Event::Spike {
                unit: "SE0/2".into(),
                t_s: 1.5
            })
        );
    }

    #[test]
    fn raw_round_trip_keeps_the_exact_time() {
        let t = 1_234.567_890_123_4;
        let frames = encode_raw(17, t, 30_000.0).to_vec();
        assert_eq!(
            decode(&frames, UnitKey::Electrode),
            Ok(Event::Spike {
                unit: "Electrode 18".into(),
                t_s: t
            })
        );
        let named = Naming {
            key: UnitKey::Full,
            raw_stream: Some("ProbeA".into()),
            raw_electrodes: (0..18).map(|i| format!("E{i}")).collect(),
        };
        assert_eq!(
            decode_with(&frames, &named),
            Ok(Event::Spike {
                unit: "ProbeA/E17/0".into(),
                t_s: t
            })
        );
        let json = encode_json("17", 1.5, 30_000.0).to_vec();
        assert_eq!(
            decode(&json, UnitKey::Electrode),
            Ok(Event::Spike {
                unit: "17".into(),
                t_s: 1.5
            })
        );
    }

    #[test]
    fn malformed_messages_name_their_defect() {
        let spike = || 1u16.to_le_bytes().to_vec();
        let cases: Vec<(Vec<Vec<u8>>, Malformed)> = vec![
            (vec![spike()], Malformed::FrameCount),
            (
                vec![spike(), b"{}".to_vec(), b"x".to_vec()],
                Malformed::FrameCount,
            ),
            (
                vec![9u16.to_le_bytes().to_vec(), b"{}".to_vec()],
                Malformed::UnknownType,
            ),
            (vec![vec![1], b"{}".to_vec()], Malformed::Truncated),
            (vec![spike(), b"{not json".to_vec()], Malformed::BadJson),
            (
                vec![spike(), br#"{"electrode":"E"}"#.to_vec()],
                Malformed::BadJson,
            ),
            (
                vec![
                    spike(),
                    br#"{"electrode":"E","sample_rate":0,"sample_number":5}"#.to_vec(),
                ],
                Malformed::BadTime,
            ),
            (
                vec![
                    spike(),
                    br#"{"electrode":"E","sample_rate":30000,"sample_number":-5}"#.to_vec(),
                ],
                Malformed::BadTime,
            ),
            (vec![spike(), vec![2, 0, 0]], Malformed::Truncated),
            (vec![spike(), vec![7; 30]], Malformed::UnknownType),
        ];
        for (frames, want) in cases {
            assert_eq!(decode(&frames, UnitKey::Full), Err(want), "{frames:?}");
        }
        let mut nan = encode_raw(1, 0.0, 1.0).to_vec();
        nan[1][16..24].copy_from_slice(&f64::NAN.to_le_bytes());
        assert_eq!(decode(&nan, UnitKey::Full), Err(Malformed::BadTime));
        let ttl = vec![
            0u16.to_le_bytes().to_vec(),
            br#"{"event_type":"ttl"}"#.to_vec(),
        ];
        assert_eq!(decode(&ttl, UnitKey::Full), Ok(Event::Ttl));
    }
}
