//! A dense, Neuropixels-like workload: a few hundred sorted units with the firing statistics of
//! a probe in cortex or hippocampus, and a few known sequences and synchronous pairs to find.
//!
//! # Model
//! * **Rates.** Unit `i`'s mean rate `r_i` is log-normal, `ln r_i ~ N(ln median, sigma²)`,
//!   clamped to `[min, max]` Hz (extracellular surveys report roughly log-normal rates spanning
//!   0.1–50 Hz; Buzsáki & Mizuseki 2014, *Nat. Rev. Neurosci.* 15:264).
//! * **Refractoriness.** Each unit is a renewal process with an absolute dead time `τ`: an
//!   inter-spike interval is `τ + Exp(λ_i)`, with `λ_i = 1 / (1/r_i − τ)` so that the mean rate
//!   is `r_i` (needs `r_i · τ < 1`, checked).
//! * **Bursting units.** A fraction of the units fire in bursts: each renewal event is a burst
//!   of `k` spikes (`k` uniform in `burst_spikes`), separated by intra-burst intervals uniform
//!   in `burst_isi_s` (at least `τ`); the burst rate is `r_i / E[k]`, so the mean rate is still
//!   `r_i`, and the next burst starts after the last spike of the previous one.
//! * **Chains.** As in the Sym26 model (module docs of [`super`]): every spike of chain unit
//!   `n_k` (basal or evoked) evokes, with probability `evoke_probability`, a spike of `n_{k+1}`
//!   after a delay uniform in `(low, high]`.
//! * **Synchronous pairs.** Every spike of unit `a` evokes, with probability
//!   `sync_probability`, a spike of `b` at a lag uniform in `[0, sync_jitter_s]`.
//! * Evoked spikes that fall within `τ` of an earlier spike of the same unit are not fired
//!   (the unit is refractory), so every unit's inter-spike intervals are at least `τ`.
//!
//! All randomness comes from one ChaCha8 generator seeded by `seed`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use serde::Serialize;

use super::SynthError;
use super::sym26::{Chain, assemble, evoke};
use crate::event::EventStream;

/// Parameters of the dense generator.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DenseParams {
    /// Number of units (event types), labelled `u0`, `u1`, ….
    pub units: usize,
    /// Length of the recording, seconds; spikes lie in `[0, duration_s)`.
    pub duration_s: f64,
    /// Median of the log-normal rate distribution, Hz.
    pub rate_median_hz: f64,
    /// Standard deviation of `ln rate` (dimensionless).
    pub rate_sigma: f64,
    /// Rates are clamped to `[low, high]`, Hz.
    pub rate_range_hz: (f64, f64),
    /// Absolute refractory period `τ`, seconds.
    pub refractory_s: f64,
    /// Fraction of units that fire in bursts, `[0, 1]`.
    pub bursting_fraction: f64,
    /// Spikes per burst, inclusive range (`2 ≤ low ≤ high`).
    pub burst_spikes: (usize, usize),
    /// Intra-burst intervals `[low, high)`, seconds (`low ≥ refractory_s`).
    pub burst_isi_s: (f64, f64),
    /// Embedded chains (pairwise disjoint, disjoint from the synchronous pairs).
    pub chains: Vec<Chain>,
    /// Probability that a chain unit's spike evokes its successor's.
    pub evoke_probability: f64,
    /// Synchronous pairs `(a, b)`: `a`'s spikes evoke `b`'s within the jitter.
    pub sync_pairs: Vec<(usize, usize)>,
    /// Largest lag of a synchronous spike, seconds.
    pub sync_jitter_s: f64,
    /// Probability that a spike of `a` evokes one of `b`.
    pub sync_probability: f64,
    /// Seed of the ChaCha8 generator.
    pub seed: u64,
}

/// What the generator drew, beside the stream: the ground truth a benchmark or test checks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DenseTruth {
    /// Each unit's drawn mean rate (before evoked spikes), Hz. Shape `[units]`.
    pub rates_hz: Vec<f64>,
    /// Whether each unit fires in bursts. Shape `[units]`.
    pub bursting: Vec<bool>,
    /// Evoked spikes not fired because the unit was refractory.
    pub refractory_suppressed: u64,
}

impl DenseParams {
    /// The Neuropixels-like preset: 300 units for 120 s, rates log-normal with median 2.2 Hz
    /// and `sigma = 1` clamped to 0.1–50 Hz (mean about 3.5 Hz, about 125,000 spikes, the size
    /// of a real 289-unit, 120 s Kilosort raster), 2 ms refractory period, 10% bursting units
    /// (2–5 spikes 3–8 ms apart), four chains with delays in the physiologist's usual windows
    /// (2–4, 6–9, 12–18 and 6–9 ms; 3, 4, 4 and 5 units; evoke probability 0.6) and five
    /// synchronous pairs (lag ≤ 1 ms, probability 0.4).
    #[must_use]
    pub fn neuropixels(seed: u64) -> Self {
        Self {
            units: 300,
            duration_s: 120.0,
            rate_median_hz: 2.2,
            rate_sigma: 1.0,
            rate_range_hz: (0.1, 50.0),
            refractory_s: 0.002,
            bursting_fraction: 0.1,
            burst_spikes: (2, 5),
            burst_isi_s: (0.003, 0.008),
            chains: vec![
                Chain {
                    neurons: vec![12, 57, 140],
                    delay_s: (0.002, 0.004),
                },
                Chain {
                    neurons: vec![33, 91, 178, 250],
                    delay_s: (0.006, 0.009),
                },
                Chain {
                    neurons: vec![7, 64, 121, 199],
                    delay_s: (0.012, 0.018),
                },
                Chain {
                    neurons: vec![45, 103, 166, 222, 287],
                    delay_s: (0.006, 0.009),
                },
            ],
            evoke_probability: 0.6,
            sync_pairs: vec![(3, 4), (80, 81), (150, 160), (210, 211), (270, 299)],
            sync_jitter_s: 0.001,
            sync_probability: 0.4,
            seed,
        }
    }

    fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: String| Err(SynthError::Param(m));
        let positive = |x: f64| x.is_finite() && x > 0.0;
        if self.units == 0 || self.units > 1 << 20 {
            return bad(format!("`units` = {} must be in 1..=1048576", self.units));
        }
        if !positive(self.duration_s) {
            return bad(format!("`duration_s` = {} must be > 0", self.duration_s));
        }
        let (lo, hi) = self.rate_range_hz;
        if !(positive(lo) && positive(hi) && lo <= hi && positive(self.rate_median_hz)) {
            return bad(format!(
                "`rate_range_hz` = ({lo}, {hi}) and `rate_median_hz` = {} must be positive, low ≤ high",
                self.rate_median_hz
            ));
        }
        if !(self.rate_sigma.is_finite() && self.rate_sigma >= 0.0) {
            return bad(format!("`rate_sigma` = {} must be ≥ 0", self.rate_sigma));
        }
        if !(self.refractory_s.is_finite() && self.refractory_s >= 0.0) {
            return bad(format!(
                "`refractory_s` = {} must be ≥ 0",
                self.refractory_s
            ));
        }
        if hi * self.refractory_s >= 0.5 {
            return bad(format!(
                "the highest rate {hi} Hz leaves no time outside the refractory period {} s",
                self.refractory_s
            ));
        }
        for (name, p) in [
            ("bursting_fraction", self.bursting_fraction),
            ("evoke_probability", self.evoke_probability),
            ("sync_probability", self.sync_probability),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("`{name}` = {p} must be in [0, 1]"));
            }
        }
        let (k0, k1) = self.burst_spikes;
        if !(2 <= k0 && k0 <= k1 && k1 <= 64) {
            return bad(format!(
                "`burst_spikes` = ({k0}, {k1}) must satisfy 2 ≤ low ≤ high ≤ 64"
            ));
        }
        let (b0, b1) = self.burst_isi_s;
        if !(b0.is_finite() && b1.is_finite() && self.refractory_s <= b0 && b0 < b1) {
            return bad(format!(
                "`burst_isi_s` = ({b0}, {b1}) must satisfy refractory_s ≤ low < high"
            ));
        }
        if !(self.sync_jitter_s.is_finite() && self.sync_jitter_s >= 0.0) {
            return bad(format!(
                "`sync_jitter_s` = {} must be ≥ 0",
                self.sync_jitter_s
            ));
        }
        let mut used = vec![false; self.units];
        let mut claim = |n: usize, what: &str| -> Result<(), SynthError> {
            if n >= self.units {
                return Err(SynthError::Param(format!(
                    "{what}: unit {n} is not below `units` = {}",
                    self.units
                )));
            }
            if std::mem::replace(&mut used[n], true) {
                return Err(SynthError::Param(format!(
                    "{what}: unit {n} is in two chains or pairs"
                )));
            }
            Ok(())
        };
        for (c, chain) in self.chains.iter().enumerate() {
            let (lo, hi) = chain.delay_s;
            if chain.neurons.len() < 2
                || !(lo.is_finite() && hi.is_finite() && 0.0 <= lo && lo < hi)
            {
                return bad(format!(
                    "chain {c}: needs ≥ 2 units and a delay window 0 ≤ low < high, got ({lo}, {hi}]"
                ));
            }
            for &n in &chain.neurons {
                claim(n, &format!("chain {c}"))?;
            }
        }
        for (p, &(a, b)) in self.sync_pairs.iter().enumerate() {
            claim(a, &format!("sync pair {p}"))?;
            claim(b, &format!("sync pair {p}"))?;
        }
        Ok(())
    }
}

/// Merges `evoked` into the sorted spike train `train`, dropping every spike within `tau` of
/// the previous kept spike (the unit is refractory); returns how many were dropped.
fn merge_refractory(train: &mut Vec<f64>, evoked: Vec<f64>, tau: f64) -> u64 {
    if evoked.is_empty() {
        return 0;
    }
    let original = train.len() + evoked.len();
    train.extend(evoked);
    train.sort_by(f64::total_cmp);
    let mut kept: Vec<f64> = Vec::with_capacity(train.len());
    for &t in train.iter() {
        if kept.last().is_none_or(|&last| t - last >= tau) {
            kept.push(t);
        }
    }
    *train = kept;
    (original - train.len()) as u64
}

/// Generates the dense stream described by `params` (see the module docs) and what was drawn.
///
/// # Errors
/// [`SynthError::Param`] naming an out-of-range parameter; [`SynthError::Event`] if no spike
/// was generated.
pub fn generate_dense(params: &DenseParams) -> Result<(EventStream, DenseTruth), SynthError> {
    params.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(params.seed);
    let lognormal = LogNormal::new(params.rate_median_hz.ln(), params.rate_sigma)
        .map_err(|e| SynthError::Param(format!("rate distribution: {e}")))?;
    let (rate_lo, rate_hi) = params.rate_range_hz;
    let tau = params.refractory_s;
    let (k0, k1) = params.burst_spikes;
    let mean_burst = (k0 + k1) as f64 / 2.0;
    let (b0, b1) = params.burst_isi_s;
    let mut rates = Vec::with_capacity(params.units);
    let mut bursting = Vec::with_capacity(params.units);
    let mut spikes: Vec<Vec<f64>> = Vec::with_capacity(params.units);
    for _ in 0..params.units {
        let rate = lognormal.sample(&mut rng).clamp(rate_lo, rate_hi);
        let bursts = rng.random_bool(params.bursting_fraction);
        // Renewal events (single spikes or bursts) at `event_rate`, mean interval
        // `tau + 1/lambda` = 1 / event_rate.
        let event_rate = if bursts { rate / mean_burst } else { rate };
        let lambda = 1.0 / (1.0 / event_rate - tau);
        let exp =
            Exp::new(lambda).map_err(|e| SynthError::Param(format!("rate {rate} Hz: {e}")))?;
        let mut train = Vec::new();
        // Start in the stationary regime: the first event after an exponential wait.
        let mut t = exp.sample(&mut rng);
        while t < params.duration_s {
            train.push(t);
            if bursts {
                let k = rng.random_range(k0..=k1);
                for _ in 1..k {
                    t += rng.random_range(b0..b1);
                    if t >= params.duration_s {
                        break;
                    }
                    train.push(t);
                }
            }
            t += tau + exp.sample(&mut rng);
        }
        rates.push(rate);
        bursting.push(bursts);
        spikes.push(train);
    }
    let mut suppressed = 0;
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
            suppressed += merge_refractory(&mut spikes[post], evoked, tau);
        }
    }
    for &(a, b) in &params.sync_pairs {
        let mut evoked = Vec::new();
        for &s in &spikes[a] {
            if rng.random_bool(params.sync_probability) {
                let t = s + params.sync_jitter_s * rng.random::<f64>();
                if t < params.duration_s {
                    evoked.push(t);
                }
            }
        }
        suppressed += merge_refractory(&mut spikes[b], evoked, tau);
    }
    let stream = assemble(&spikes, (0..params.units).map(|i| format!("u{i}")))?;
    Ok((
        stream,
        DenseTruth {
            rates_hz: rates,
            bursting,
            refractory_suppressed: suppressed,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::{DenseParams, generate_dense};
    use crate::episode::{Episode, Interval, TypeIndex, count_exact};
    use crate::event::EventType;

    fn unit_trains(stream: &crate::event::EventStream, units: usize) -> Vec<Vec<f64>> {
        let mut trains = vec![Vec::new(); units];
        for (t, ty) in stream.iter() {
            trains[ty.index()].push(t);
        }
        trains
    }

    #[test]
    fn the_preset_is_seeded_refractory_and_near_its_documented_size() {
        let p = DenseParams::neuropixels(1);
        let (a, truth) = generate_dense(&p).unwrap();
        let (b, _) = generate_dense(&p).unwrap();
        assert_eq!(a.times(), b.times());
        assert_eq!(a.types(), b.types());
        let (c, _) = generate_dense(&DenseParams::neuropixels(2)).unwrap();
        assert_ne!(a.times(), c.times());
        assert_eq!(a.alphabet().len(), 300);
        assert!((100_000..160_000).contains(&a.len()), "{} spikes", a.len());
        assert!(truth.rates_hz.iter().all(|r| (0.1..=50.0).contains(r)));
        let bursting = truth.bursting.iter().filter(|&&b| b).count();
        assert!((15..=45).contains(&bursting), "{bursting} bursting units");
        for (u, train) in unit_trains(&a, 300).iter().enumerate() {
            for w in train.windows(2) {
                assert!(
                    w[1] - w[0] >= p.refractory_s,
                    "unit {u}: ISI {}",
                    w[1] - w[0]
                );
            }
        }
    }

    #[test]
    fn rates_follow_the_drawn_rates() {
        // A unit without chains or pairs fires at its drawn rate: Poisson-like counts within
        // 5 standard deviations (bursts multiply the variance by at most the burst size).
        let p = DenseParams::neuropixels(3);
        let (s, truth) = generate_dense(&p).unwrap();
        let trains = unit_trains(&s, p.units);
        for u in [0, 1, 2, 100, 200, 298] {
            let expected = truth.rates_hz[u] * p.duration_s;
            let sd = (expected * if truth.bursting[u] { 5.0 } else { 1.0 }).sqrt();
            let got = trains[u].len() as f64;
            assert!(
                (got - expected).abs() <= 5.0 * sd + 2.0,
                "unit {u}: {got} spikes, expected {expected:.1} ± {sd:.1}"
            );
        }
    }

    #[test]
    fn chains_and_pairs_are_far_above_chance() {
        let p = DenseParams::neuropixels(1);
        let (s, _) = generate_dense(&p).unwrap();
        let index = TypeIndex::new(&s);
        let trains = unit_trains(&s, p.units);
        // A planted link evokes about `p · n_a` extra occurrences; independent trains give
        // `chance`. Require half the planted ones on top of chance, and a Poisson z-score ≥ 5.
        let check = |a: usize, b: usize, lo: f64, hi: f64, prob: f64| {
            let iv = Interval::new(lo, hi).unwrap();
            let ep = Episode::new(vec![EventType(a as u32), EventType(b as u32)], vec![iv]);
            let count = count_exact(&index, &ep) as f64;
            let n_a = trains[a].len() as f64;
            let chance = n_a * trains[b].len() as f64 * (hi - lo) / p.duration_s;
            assert!(
                count >= chance + 0.5 * prob * n_a && (count - chance) >= 5.0 * chance.sqrt(),
                "u{a} → u{b} in ({lo}, {hi}]: {count} occurrences, chance {chance:.1}, {n_a} spikes of u{a}"
            );
        };
        for chain in &p.chains {
            for w in chain.neurons.windows(2) {
                check(
                    w[0],
                    w[1],
                    chain.delay_s.0,
                    chain.delay_s.1,
                    p.evoke_probability,
                );
            }
        }
        for &(a, b) in &p.sync_pairs {
            check(a, b, 0.0, p.sync_jitter_s, p.sync_probability);
        }
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = DenseParams::neuropixels(1);
        p.rate_range_hz = (0.1, 300.0);
        p.refractory_s = 0.002;
        let e = generate_dense(&p).unwrap_err().to_string();
        assert!(e.contains("refractory"), "{e}");
        let mut p = DenseParams::neuropixels(1);
        p.sync_pairs.push((12, 13));
        let e = generate_dense(&p).unwrap_err().to_string();
        assert!(e.contains("unit 12"), "{e}");
        let mut p = DenseParams::neuropixels(1);
        p.burst_isi_s = (0.001, 0.004);
        let e = generate_dense(&p).unwrap_err().to_string();
        assert!(e.contains("burst_isi_s"), "{e}");
    }
}
