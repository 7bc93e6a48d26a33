//! The generator and its presets (`sym26`, the paper's benchmark; `mea64`, a large
//! 64-channel workload).

use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use serde::Serialize;

use crate::event::{Alphabet, EventError, EventStream, EventType, Ordering};

/// A causal chain embedded in the synthetic stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Chain {
    /// Neuron indices in firing order (≥ 2, distinct, each < `neurons`).
    pub neurons: Vec<usize>,
    /// Delay window `(low, high]` between consecutive chain neurons, seconds.
    pub delay_s: (f64, f64),
}

/// Parameters of the generator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynthParams {
    /// Number of neurons (event types).
    pub neurons: usize,
    /// Basal Poisson rate of every neuron, Hz.
    pub basal_rate_hz: f64,
    /// Length of the recording, seconds; spikes lie in `[0, duration_s)`.
    pub duration_s: f64,
    /// Probability that a spike of a chain neuron evokes a spike of its successor.
    pub evoke_probability: f64,
    /// The embedded chains (pairwise disjoint).
    pub chains: Vec<Chain>,
    /// Seed of the ChaCha8 generator.
    pub seed: u64,
}

/// Invalid generator parameters.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[must_use]
pub enum SynthError {
    /// A parameter is out of range; the message names it.
    #[error("synthetic stream: {0}")]
    Param(String),
    /// The generated stream broke an invariant (zero events, say).
    #[error("synthetic stream: {0}")]
    Event(#[from] EventError),
}

impl SynthParams {
    /// The paper's Sym26 benchmark (§7.1): 26 neurons `A`–`Z`, 20 Hz basal firing, 60 s, a
    /// short chain `A→B→C→D` with delays in (4, 6] ms and a long chain `E→F→…→L` (8 neurons)
    /// with delays in (9, 11] ms, evoke probability 0.75. About 51,500 events.
    #[must_use]
    pub fn sym26(seed: u64) -> Self {
        Self {
            neurons: 26,
            basal_rate_hz: 20.0,
            duration_s: 60.0,
            evoke_probability: 0.75,
            chains: vec![
                Chain {
                    neurons: (0..4).collect(),
                    delay_s: (0.004, 0.006),
                },
                Chain {
                    neurons: (4..12).collect(),
                    delay_s: (0.009, 0.011),
                },
            ],
            seed,
        }
    }

    /// A large MEA-like workload: 64 channels at 20 Hz basal for 530 s with four chains
    /// (lengths 4, 5, 6, 8; delays in (4, 6], (9, 11], (14, 16] and (9, 11] ms), evoke
    /// probability 0.75. About 10⁶ events.
    #[must_use]
    pub fn mea64(seed: u64) -> Self {
        Self {
            neurons: 64,
            basal_rate_hz: 20.0,
            duration_s: 530.0,
            evoke_probability: 0.75,
            chains: vec![
                Chain {
                    neurons: vec![3, 17, 29, 41],
                    delay_s: (0.004, 0.006),
                },
                Chain {
                    neurons: vec![5, 12, 33, 50, 61],
                    delay_s: (0.009, 0.011),
                },
                Chain {
                    neurons: vec![8, 22, 37, 44, 52, 58],
                    delay_s: (0.014, 0.016),
                },
                Chain {
                    neurons: vec![0, 10, 20, 30, 40, 49, 55, 63],
                    delay_s: (0.009, 0.011),
                },
            ],
            seed,
        }
    }

    fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: String| Err(SynthError::Param(m));
        if self.neurons == 0 || self.neurons > 1 << 20 {
            return bad(format!(
                "`neurons` = {} must be in 1..=1048576",
                self.neurons
            ));
        }
        if !(self.basal_rate_hz.is_finite() && self.basal_rate_hz > 0.0) {
            return bad(format!(
                "`basal_rate_hz` = {} must be > 0",
                self.basal_rate_hz
            ));
        }
        if !(self.duration_s.is_finite() && self.duration_s > 0.0) {
            return bad(format!("`duration_s` = {} must be > 0", self.duration_s));
        }
        if !(0.0..=1.0).contains(&self.evoke_probability) {
            return bad(format!(
                "`evoke_probability` = {} must be in [0, 1]",
                self.evoke_probability
            ));
        }
        let mut used = vec![false; self.neurons];
        for (c, chain) in self.chains.iter().enumerate() {
            let (lo, hi) = chain.delay_s;
            if chain.neurons.len() < 2 {
                return bad(format!("chain {c} has fewer than 2 neurons"));
            }
            if !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo < hi) {
                return bad(format!(
                    "chain {c}: delay window ({lo}, {hi}] must satisfy 0 <= low < high"
                ));
            }
            for &n in &chain.neurons {
                if n >= self.neurons {
                    return bad(format!(
                        "chain {c}: neuron {n} is not below `neurons` = {}",
                        self.neurons
                    ));
                }
                if std::mem::replace(&mut used[n], true) {
                    return bad(format!(
                        "chain {c}: neuron {n} is in two chains or twice in one"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The label of neuron `i`: `A`–`Z` when there are at most 26 neurons, else `n0`, `n1`, ….
#[must_use]
pub fn label(i: usize, neurons: usize) -> String {
    if neurons <= 26 {
        char::from(b'A' + i as u8).to_string()
    } else {
        format!("n{i}")
    }
}

/// Generates the stream described by `params` (see the module docs for the model).
///
/// # Errors
/// [`SynthError::Param`] for out-of-range parameters; [`SynthError::Event`] if no spike at
/// all was generated.
pub fn generate(params: &SynthParams) -> Result<EventStream, SynthError> {
    params.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let exp = Exp::new(params.basal_rate_hz)
        .map_err(|e| SynthError::Param(format!("`basal_rate_hz`: {e}")))?;
    let mut spikes: Vec<Vec<f64>> = (0..params.neurons)
        .map(|_| {
            let mut t = 0.0;
            let mut out = Vec::new();
            loop {
                t += exp.sample(&mut rng);
                if t >= params.duration_s {
                    return out;
                }
                out.push(t);
            }
        })
        .collect();
    for chain in &params.chains {
        let (lo, hi) = chain.delay_s;
        for pair in chain.neurons.windows(2) {
            let (pre, post) = (pair[0], pair[1]);
            let evoked = evoke(
                &mut rng,
                &spikes[pre],
                params.evoke_probability,
                (lo, hi),
                params.duration_s,
            );
            let merged = &mut spikes[post];
            merged.extend(evoked);
            merged.sort_by(f64::total_cmp);
        }
    }
    assemble(
        &spikes,
        (0..params.neurons).map(|i| label(i, params.neurons)),
    )
}

/// The spikes a presynaptic train evokes: each spike of `pre`, with probability `p`, one spike
/// after a delay uniform on `(low, high]`, kept when before `duration_s`. Unsorted.
pub(super) fn evoke(
    rng: &mut ChaCha8Rng,
    pre: &[f64],
    p: f64,
    (lo, hi): (f64, f64),
    duration_s: f64,
) -> Vec<f64> {
    let mut evoked = Vec::new();
    for &s in pre {
        if rng.random_bool(p) {
            // Uniform on (lo, hi]: 1 - U with U in [0, 1) lies in (0, 1].
            let t = s + (lo + (hi - lo) * (1.0 - rng.random::<f64>()));
            if t < duration_s {
                evoked.push(t);
            }
        }
    }
    evoked
}

/// The stream of per-neuron spike trains `spikes[n]` (seconds), neuron `n` labelled by the
/// `n`-th of `labels`; events ordered by time, then neuron.
pub(super) fn assemble(
    spikes: &[Vec<f64>],
    labels: impl IntoIterator<Item = String>,
) -> Result<EventStream, SynthError> {
    let alphabet = Alphabet::from_labels(labels)?;
    let mut events: Vec<(f64, u32)> = spikes
        .iter()
        .enumerate()
        .flat_map(|(n, ts)| ts.iter().map(move |&t| (t, n as u32)))
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let times = events.iter().map(|e| e.0).collect();
    let types = events.iter().map(|e| EventType(e.1)).collect();
    Ok(EventStream::new(
        times,
        types,
        alphabet,
        Ordering::RequireSorted,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sym26_is_seeded_and_about_fifty_thousand_events() {
        let a = generate(&SynthParams::sym26(7)).unwrap();
        let b = generate(&SynthParams::sym26(7)).unwrap();
        assert_eq!(a, b, "same seed, same stream");
        assert!((45_000..58_000).contains(&a.len()), "{} events", a.len());
        assert_eq!(a.alphabet().len(), 26);
        assert!(a.end() < 60.0);
        // Chain neurons fire more than the basal 20 Hz x 60 s = 1200 spikes.
        let counts = a.counts_per_type();
        assert!(counts[3] > 2_500 && counts[20] < 1_400, "{counts:?}");
    }

    #[test]
    fn rejects_bad_parameters() {
        let mut p = SynthParams::sym26(1);
        p.chains[1].neurons[0] = 2; // shared with the short chain
        assert!(generate(&p).is_err());
        let mut p = SynthParams::sym26(1);
        p.basal_rate_hz = 0.0;
        assert!(generate(&p).is_err());
    }
}
