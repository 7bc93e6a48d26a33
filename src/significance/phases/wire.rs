//! The JSON form of the plan and the parts (module documentation of [`super`]): the wire
//! structures the `to_json` / `from_json` of [`super::Plan`], [`super::FirstPart`],
//! [`super::Union`] and [`super::SecondPart`] fill and read, an episode's encoding (unit
//! indices, gap indices into the configuration's intervals), the version check; and the
//! fingerprint ([`Fnv`]) of a recording and its mining configuration that every plan and part
//! carries.

use serde::{Deserialize, Serialize};

use crate::episode::count::MAX_EPISODE_LEN;
use crate::episode::{Episode, Interval, MinerConfig};
use crate::event::{EventStream, EventType};
use crate::significance::error::SignificanceError;
use crate::significance::testing::{Correction, Sums};

/// Version of the JSON form; a plan or part of another version is refused.
pub(super) const WIRE_VERSION: u32 = 1;

#[derive(Serialize, Deserialize)]
pub(super) struct PlanWire {
    pub(super) version: u32,
    pub(super) fingerprint: u64,
    pub(super) method: String,
    pub(super) n_surrogates: usize,
    pub(super) alpha: f64,
    pub(super) correction: Correction,
    pub(super) seed: u64,
    pub(super) trials: Option<Vec<(f64, f64)>>,
    pub(super) test_top: Option<usize>,
    pub(super) watch: bool,
    #[serde(default)]
    pub(super) significant_only: bool,
    pub(super) min_count: u64,
    pub(super) tested: Vec<(EpisodeCode, u64)>,
    pub(super) counted: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct FirstWire {
    pub(super) version: u32,
    pub(super) fingerprint: u64,
    pub(super) range: (u64, u64),
    pub(super) episodes: Vec<EpisodeCode>,
    /// Per surrogate: (ids, counts).
    pub(super) selections: Vec<(Vec<u32>, Vec<u64>)>,
    pub(super) max_by_size: Vec<Vec<u64>>,
    pub(super) sums: Sums,
    pub(super) counted: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct UnionWire {
    pub(super) version: u32,
    pub(super) fingerprint: u64,
    pub(super) episodes: Vec<EpisodeCode>,
    pub(super) recording: Vec<u64>,
    pub(super) counted: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SecondWire {
    pub(super) version: u32,
    pub(super) fingerprint: u64,
    pub(super) range: (u64, u64),
    pub(super) sums: Sums,
    pub(super) counted: u64,
}

/// An episode as (unit indices into the alphabet, gap indices into the configuration's
/// intervals).
#[derive(Serialize, Deserialize)]
pub(super) struct EpisodeCode(Vec<u32>, Vec<u32>);

pub(super) fn encode(
    e: &Episode,
    intervals: &[Interval],
) -> Result<EpisodeCode, SignificanceError> {
    let gaps = e
        .intervals()
        .iter()
        .map(|iv| {
            intervals
                .iter()
                .position(|c| c == iv)
                .map(|i| i as u32)
                .ok_or_else(|| {
                    SignificanceError::Config(format!(
                        "interval {iv} is not one of the mining intervals, so its episodes cannot be passed between processes"
                    ))
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(EpisodeCode(e.types().iter().map(|t| t.0).collect(), gaps))
}

/// Every episode of a part, decoded against `stream`'s units and `config`'s intervals.
pub(super) fn decode_all(
    codes: &[EpisodeCode],
    stream: &EventStream,
    config: &MinerConfig,
) -> Result<Vec<Episode>, SignificanceError> {
    let units = stream.alphabet().len();
    codes
        .iter()
        .map(|code| decode(code, units, &config.intervals))
        .collect()
}

pub(super) fn decode(
    code: &EpisodeCode,
    units: usize,
    intervals: &[Interval],
) -> Result<Episode, SignificanceError> {
    let EpisodeCode(types, gaps) = code;
    let bad = |why: String| SignificanceError::Config(format!("an episode of the JSON form {why}"));
    if types.is_empty() || types.len() > MAX_EPISODE_LEN {
        return Err(bad(format!(
            "has {} nodes (1 to {MAX_EPISODE_LEN})",
            types.len()
        )));
    }
    if gaps.len() + 1 != types.len() {
        return Err(bad(format!(
            "has {} gaps for {} nodes",
            gaps.len(),
            types.len()
        )));
    }
    if let Some(t) = types.iter().find(|&&t| t as usize >= units) {
        return Err(bad(format!(
            "names unit {t}, the recording has {units} units"
        )));
    }
    let ivs = gaps
        .iter()
        .map(|&g| {
            intervals.get(g as usize).copied().ok_or_else(|| {
                bad(format!(
                    "names interval {g}, the configuration has {}",
                    intervals.len()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Episode::new(
        types.iter().map(|&t| EventType(t)).collect(),
        ivs,
    ))
}

pub(super) fn to_json<T: Serialize>(value: &T, what: &str) -> Result<String, SignificanceError> {
    serde_json::to_string(value)
        .map_err(|e| SignificanceError::Config(format!("writing the {what}: {e}")))
}

pub(super) fn from_json<T: for<'de> Deserialize<'de>>(
    text: &str,
    what: &str,
) -> Result<T, SignificanceError> {
    serde_json::from_str(text)
        .map_err(|e| SignificanceError::Config(format!("not a {what} of a split test: {e}")))
}

pub(super) fn check_version(version: u32, what: &str) -> Result<(), SignificanceError> {
    if version == WIRE_VERSION {
        Ok(())
    } else {
        Err(SignificanceError::Config(format!(
            "the {what} is of version {version} of the JSON form; this build reads version {WIRE_VERSION}"
        )))
    }
}

/// FNV-1a, 64 bits: a fingerprint that is the same on every machine and build.
pub(super) struct Fnv {
    state: u64,
    /// Each interval's text as hashed, by interval (a few per configuration): formatting
    /// one is far slower than hashing it.
    names: Vec<(Interval, String)>,
}

impl Fnv {
    pub(super) fn new() -> Self {
        Self {
            state: 0xcbf2_9ce4_8422_2325,
            names: Vec::new(),
        }
    }

    pub(super) fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state ^= u64::from(b);
            self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so that concatenations differ.
        self.state ^= 0xff;
        self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
    }

    pub(super) fn u64(&mut self, x: u64) {
        self.bytes(&x.to_le_bytes());
    }

    fn interval(&mut self, iv: &Interval) {
        let (lo, hi) = iv.bits();
        self.u64(lo);
        self.u64(hi);
        let i = match self.names.iter().position(|(known, _)| known == iv) {
            Some(i) => i,
            None => {
                self.names.push((*iv, iv.to_string()));
                self.names.len() - 1
            }
        };
        let name = std::mem::take(&mut self.names[i].1);
        self.bytes(name.as_bytes());
        self.names[i].1 = name;
    }

    pub(super) fn episode(&mut self, e: &Episode) {
        for t in e.types() {
            self.u64(u64::from(t.0));
        }
        for iv in e.intervals() {
            self.interval(iv);
        }
    }

    pub(super) fn finish(&self) -> u64 {
        self.state
    }
}

/// The fingerprint of a recording and its mining configuration: every event, the units'
/// labels, the intervals, the threshold and the largest size.
pub(super) fn fingerprint(stream: &EventStream, config: &MinerConfig) -> u64 {
    let mut h = Fnv::new();
    let mut buf = Vec::with_capacity(stream.len() * 12);
    for (t, ty) in stream.iter() {
        buf.extend_from_slice(&t.to_bits().to_le_bytes());
        buf.extend_from_slice(&ty.0.to_le_bytes());
    }
    h.bytes(&buf);
    for label in stream.alphabet().labels() {
        h.bytes(label.as_bytes());
    }
    for iv in &config.intervals {
        h.interval(iv);
    }
    h.bytes(format!("{:?}", config.threshold).as_bytes());
    h.u64(config.max_level as u64);
    h.finish()
}
