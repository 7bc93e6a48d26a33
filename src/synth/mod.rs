//! Seeded synthetic spike trains with embedded causal chains, for benchmarks and tests.
//!
//! # Model
//! Each neuron fires as a homogeneous Poisson process at `basal_rate_hz`. A chain
//! `n₁ → n₂ → … → n_L` with delay window `(d_lo, d_hi]` adds evoked spikes: every spike of
//! `n_k` (basal or evoked) evokes, with probability `evoke_probability`, one spike of
//! `n_{k+1}` after a delay drawn uniformly from the window. Neuron `n_{k+1}` thus fires with
//! the inhomogeneous conditional intensity
//! `λ(t) = basal + (p / (d_hi − d_lo)) · #{spikes s of n_k : t − s ∈ (d_lo, d_hi]}`,
//! the connection model of the paper's simulator (Sym26, §7.1 of Cao et al.; the simulator is
//! described in Patnaik, Sastry, Unnikrishnan, ref. \[13\] there).
//!
//! [`dense`] adds a Neuropixels-like workload (hundreds of units, log-normal rates,
//! refractoriness, bursts, chains and synchronous pairs) on the same principles, with
//! options for the nulls that break uniform dithering: gamma intervals and slow gains shared
//! by all units ([`modulation`]: log-rate Ornstein–Uhlenbeck, 0.5–4 Hz sinusoids, up/down
//! states).
//!
//! All randomness comes from one ChaCha8 generator seeded by `seed`, so a seed gives the same
//! stream on every platform.

pub mod dense;
pub mod modulation;
pub mod sym26;

pub use dense::{DenseParams, DenseTruth, generate_dense, planted_chains};
pub use modulation::{Comodulation, UpDownStates};
pub use sym26::{Chain, SynthError, SynthParams, generate};

/// A seeded Gaussian random walk of `n` samples: `x[t] = x[t-1] + N(0, 1)`, `x[-1] = 0`, from
/// one ChaCha8 generator seeded by `seed` (the motif benchmark's input and the tests' series).
#[must_use]
pub fn random_walk(n: usize, seed: u64) -> Vec<f64> {
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut acc = 0.0;
    (0..n)
        .map(|_| {
            let step: f64 = StandardNormal.sample(&mut rng);
            acc += step;
            acc
        })
        .collect()
}
