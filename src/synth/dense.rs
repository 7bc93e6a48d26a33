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
//! * **Gamma intervals** (`isi_shape`, default 1: exponential). The excess of an interval
//!   over `τ` is gamma-distributed with shape `k` and the same mean `1/λ_i`: `k < 1` gives
//!   bursty, irregular trains (CV of the excess `1/√k`), `k > 1` regular ones; the dead time
//!   stays.
//! * **Shared modulation** (`comodulation`, `up_down`, default off): a slow gain common to
//!   every unit, a log-rate Ornstein–Uhlenbeck process or a sum of 0.5–4 Hz sinusoids, and
//!   up/down states, applied by time rescaling with the dead time kept in real time
//!   ([`super::modulation`]). These are the nulls on which uniform dithering and the
//!   surrogates that keep each train's intervals part ways (Stella et al. 2022, *eNeuro*
//!   9(4)).
//! * **Planted activations** (`chain_activation_hz`, default 0): besides the evoked spikes,
//!   each chain is activated at that rate (Poisson); an activation fires every chain unit in
//!   order, each after a delay uniform in the window.
//! * Evoked spikes that fall within `τ` of an earlier spike of the same unit are not fired
//!   (the unit is refractory), so every unit's inter-spike intervals are at least `τ`.
//!
//! All randomness comes from one ChaCha8 generator seeded by `seed`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, LogNormal};
use serde::Serialize;

use super::SynthError;
use super::modulation::{Comodulation, Gain, UpDownStates};
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
    /// Shape `k` of the gamma-distributed excess of each inter-event interval over the dead
    /// time (mean unchanged, coefficient of variation `1/√k`): 1 is the exponential (Poisson
    /// with dead time), `k < 1` bursty, `k > 1` regular. The presets use 1.
    pub isi_shape: f64,
    /// Planted chain activations per second and chain (0: none, the presets' Sym26-style
    /// chains only). Each activation, at the times of a homogeneous Poisson process, fires
    /// every unit of the chain in order, each after a delay uniform in the chain's window.
    pub chain_activation_hz: f64,
    /// A slow log-rate fluctuation shared by all units (`None` in the presets;
    /// [`super::modulation`]).
    pub comodulation: Option<Comodulation>,
    /// Up and down states shared by all units (`None` in the presets;
    /// [`super::modulation`]).
    pub up_down: Option<UpDownStates>,
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
            isi_shape: 1.0,
            chain_activation_hz: 0.0,
            comodulation: None,
            up_down: None,
        }
    }

    /// The session preset of issue 45: 1,000 units for an hour (3,600 s), rates log-normal
    /// with median 4 Hz and `sigma = 1` clamped to 0.1–60 Hz (mean about 6.5 Hz, about 23
    /// million spikes), 2 ms refractory period, 10% bursting units as [`Self::neuropixels`],
    /// and six planted chains ([`planted_chains`]: 3, 4, 3, 4, 3 and 4 units, delays in 1–4,
    /// 6–9 and 12–18 ms in turn) each activated at 1 Hz and not otherwise evoked; no
    /// synchronous pairs and no shared modulation (set [`Self::comodulation`],
    /// [`Self::up_down`] or [`Self::isi_shape`] for the harder nulls).
    #[must_use]
    pub fn session(seed: u64) -> Self {
        Self {
            units: 1000,
            duration_s: 3600.0,
            rate_median_hz: 4.0,
            rate_sigma: 1.0,
            rate_range_hz: (0.1, 60.0),
            chains: planted_chains(1000, 6, (3, 4), &SESSION_WINDOWS_S)
                .expect("the preset's chains fit its units"),
            evoke_probability: 0.0,
            sync_pairs: Vec::new(),
            sync_probability: 0.0,
            chain_activation_hz: 1.0,
            ..Self::neuropixels(seed)
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
        if !(self.isi_shape.is_finite() && (0.01..=1000.0).contains(&self.isi_shape)) {
            return bad(format!(
                "`isi_shape` = {} must be in [0.01, 1000]",
                self.isi_shape
            ));
        }
        if !(self.chain_activation_hz.is_finite()
            && (0.0..=1000.0).contains(&self.chain_activation_hz))
        {
            return bad(format!(
                "`chain_activation_hz` = {} must be in [0, 1000]",
                self.chain_activation_hz
            ));
        }
        if let Some(c) = &self.comodulation {
            c.validate()?;
        }
        if let Some(u) = &self.up_down {
            u.validate()?;
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

/// The delay windows of [`DenseParams::session`]'s chains, seconds, used in turn: each
/// inside one of the usual mining intervals 0–5, 5–10 and 10–20 ms.
pub const SESSION_WINDOWS_S: [(f64, f64); 3] = [(0.001, 0.004), (0.006, 0.009), (0.012, 0.018)];

/// `n` chains spread over `units` units: chain `c` has `lengths.0 + c mod (lengths.1 −
/// lengths.0 + 1)` units and the delay window `windows[c mod windows.len()]` (seconds). The
/// chains' units are interleaved and evenly spaced: with `m` chain units in all and stride
/// `s = units / m`, unit `k` of chain `c` is `(k·n + c)·s + s/2`, so no two chain units are
/// neighbours and they span the whole probe.
///
/// # Errors
/// [`SynthError::Param`] when the chains need more units than `units`, a chain would have
/// fewer than 2 units, `lengths` is not `low ≤ high`, or `windows` is empty while `n > 0`.
pub fn planted_chains(
    units: usize,
    n: usize,
    lengths: (usize, usize),
    windows: &[(f64, f64)],
) -> Result<Vec<Chain>, SynthError> {
    let (l0, l1) = lengths;
    if !(2 <= l0 && l0 <= l1) {
        return Err(SynthError::Param(format!(
            "chain lengths ({l0}, {l1}) must satisfy 2 ≤ low ≤ high"
        )));
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    if windows.is_empty() {
        return Err(SynthError::Param(
            "chains need at least one delay window".into(),
        ));
    }
    let lens: Vec<usize> = (0..n).map(|c| l0 + c % (l1 - l0 + 1)).collect();
    let longest = l0 + (n - 1).min(l1 - l0);
    let slots = n * longest;
    if slots > units {
        return Err(SynthError::Param(format!(
            "{n} chains of up to {longest} units need {slots} units, more than the {units} there are"
        )));
    }
    let stride = units / slots;
    Ok(lens
        .iter()
        .enumerate()
        .map(|(c, &len)| Chain {
            neurons: (0..len)
                .map(|k| (k * n + c) * stride + stride / 2)
                .collect(),
            delay_s: windows[c % windows.len()],
        })
        .collect())
}

/// The excess of an inter-event interval over the dead time: exponential (the presets) or
/// gamma with the same mean.
enum Excess {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
}

impl Excess {
    fn new(lambda: f64, shape: f64, rate: f64) -> Result<Self, SynthError> {
        let err = |e: String| SynthError::Param(format!("rate {rate} Hz: {e}"));
        if shape == 1.0 {
            Exp::new(lambda)
                .map(Self::Exp)
                .map_err(|e| err(e.to_string()))
        } else {
            Gamma::new(shape, 1.0 / (shape * lambda))
                .map(Self::Gamma)
                .map_err(|e| err(e.to_string()))
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Self::Exp(d) => d.sample(rng),
            Self::Gamma(d) => d.sample(rng),
        }
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
    let gain = if params.comodulation.is_some() || params.up_down.is_some() {
        // A stream of its own: the gain does not depend on the units.
        let mut gain_rng = ChaCha8Rng::seed_from_u64(params.seed);
        gain_rng.set_stream(1);
        Some(Gain::draw(
            &mut gain_rng,
            params.duration_s,
            params.comodulation.as_ref(),
            params.up_down.as_ref(),
        )?)
    } else {
        None
    };
    // The next event after the one at `t` (`None`: the first), the dead time `tau` and an
    // excess `e` (seconds of operational time under a gain). Without a gain the sums are
    // those of the presets' streams, bit for bit.
    let next = |t: Option<f64>, e: f64| match (&gain, t) {
        (None, None) => e,
        (None, Some(t)) => t + (tau + e),
        (Some(g), None) => g.inverse(e),
        // At least `t + tau` whatever the rounding of the integral and its inverse.
        (Some(g), Some(t)) => g.inverse(g.integral(t + tau) + e).max(t + tau),
    };
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
        let exp = Excess::new(lambda, params.isi_shape, rate)?;
        let mut train = Vec::new();
        // Start in the stationary regime: the first event after an exponential wait.
        let mut t = next(None, exp.sample(&mut rng));
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
            t = next(Some(t), exp.sample(&mut rng));
        }
        rates.push(rate);
        bursting.push(bursts);
        spikes.push(train);
    }
    let mut suppressed = 0;
    if params.chain_activation_hz > 0.0 {
        let wait = Exp::new(params.chain_activation_hz)
            .map_err(|e| SynthError::Param(format!("`chain_activation_hz`: {e}")))?;
        for chain in &params.chains {
            let (lo, hi) = chain.delay_s;
            let mut fired = Vec::new();
            let mut t = wait.sample(&mut rng);
            while t < params.duration_s {
                fired.push(t);
                t += wait.sample(&mut rng);
            }
            for (k, &n) in chain.neurons.iter().enumerate() {
                if k > 0 {
                    // Uniform on (lo, hi], as `evoke`; activations past the end are dropped.
                    fired = fired
                        .iter()
                        .map(|&s| s + (lo + (hi - lo) * (1.0 - rng.random::<f64>())))
                        .filter(|&s| s < params.duration_s)
                        .collect();
                }
                suppressed += merge_refractory(&mut spikes[n], fired.clone(), tau);
            }
        }
    }
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

    /// An FNV-1a hash of the stream's times (bits) and types.
    fn fingerprint(stream: &crate::event::EventStream) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (t, ty) in stream.iter() {
            for b in t
                .to_bits()
                .to_le_bytes()
                .into_iter()
                .chain(ty.0.to_le_bytes())
            {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    #[test]
    fn the_new_options_off_keep_the_presets_streams_bit_for_bit() {
        // Fingerprints of the preset's streams made before the options existed.
        let (a, _) = generate_dense(&DenseParams::neuropixels(1)).unwrap();
        let (b, _) = generate_dense(&DenseParams::neuropixels(7)).unwrap();
        assert_eq!(
            (a.len(), fingerprint(&a), b.len(), fingerprint(&b)),
            PRESET_FINGERPRINTS
        );
    }

    const PRESET_FINGERPRINTS: (usize, u64, usize, u64) = (
        133_145,
        0x852b_1939_52a5_31fb,
        134_723,
        0xff83_35db_27df_9b91,
    );

    /// A null session: `units` independent units at rates near `rate` Hz (no chains, pairs or
    /// bursts), with the shared gain and interval shape the caller sets.
    fn null(units: usize, duration_s: f64, rate: f64, seed: u64) -> DenseParams {
        DenseParams {
            units,
            duration_s,
            rate_median_hz: rate,
            rate_sigma: 0.3,
            rate_range_hz: (0.1, 60.0),
            bursting_fraction: 0.0,
            chains: Vec::new(),
            sync_pairs: Vec::new(),
            ..DenseParams::neuropixels(seed)
        }
    }

    fn binned(trains: &[Vec<f64>], bin_s: f64, duration_s: f64) -> Vec<Vec<f64>> {
        let bins = (duration_s / bin_s).ceil() as usize;
        trains
            .iter()
            .map(|tr| {
                let mut c = vec![0.0; bins];
                for &t in tr {
                    c[((t / bin_s) as usize).min(bins - 1)] += 1.0;
                }
                c
            })
            .collect()
    }

    /// Mean Pearson correlation of the binned counts over all pairs of units.
    fn mean_pair_correlation(counts: &[Vec<f64>]) -> f64 {
        let z: Vec<Vec<f64>> = counts
            .iter()
            .map(|c| {
                let n = c.len() as f64;
                let m = c.iter().sum::<f64>() / n;
                let sd = (c.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt();
                c.iter().map(|x| (x - m) / sd).collect()
            })
            .collect();
        let mut sum = 0.0;
        let mut pairs = 0.0;
        for i in 0..z.len() {
            for j in i + 1..z.len() {
                sum += z[i].iter().zip(&z[j]).map(|(a, b)| a * b).sum::<f64>() / z[i].len() as f64;
                pairs += 1.0;
            }
        }
        sum / pairs
    }

    /// Spike pairs (one of each of two different units) with the later one `lag` after the
    /// earlier, `lag` in `(lo, hi]`, summed over all ordered unit pairs.
    fn lag_pairs(trains: &[Vec<f64>], lo: f64, hi: f64) -> f64 {
        let mut n = 0usize;
        for (i, a) in trains.iter().enumerate() {
            for (j, b) in trains.iter().enumerate() {
                if i == j {
                    continue;
                }
                let mut start = 0;
                for &s in a {
                    while start < b.len() && b[start] <= s + lo {
                        start += 1;
                    }
                    n += b[start..].iter().take_while(|&&t| t <= s + hi).count();
                }
            }
        }
        n as f64
    }

    #[test]
    fn shared_gains_correlate_counts_at_100_ms_and_add_no_millisecond_structure() {
        use crate::synth::modulation::{Comodulation, UpDownStates};
        let (units, duration, rate) = (24, 300.0, 8.0);
        let independent = null(units, duration, rate, 11);
        let (s, _) = generate_dense(&independent).unwrap();
        let base = mean_pair_correlation(&binned(&unit_trains(&s, units), 0.1, duration));
        // 3,000 bins: a pair's correlation has standard error about 1/√3000 = 0.018, the mean
        // of 276 pairs far less.
        assert!(
            base.abs() < 0.01,
            "independent units: mean correlation {base}"
        );
        for (name, params) in [
            (
                "OU",
                DenseParams {
                    comodulation: Some(Comodulation::ou()),
                    ..independent.clone()
                },
            ),
            (
                "sinusoids",
                DenseParams {
                    comodulation: Some(Comodulation::sinusoids()),
                    ..independent.clone()
                },
            ),
            (
                "up/down",
                DenseParams {
                    up_down: Some(UpDownStates::slow_wave()),
                    ..independent.clone()
                },
            ),
        ] {
            let (s, truth) = generate_dense(&params).unwrap();
            let trains = unit_trains(&s, units);
            // Rates as drawn (the gain averages 1; the dead time costs a little at high gain).
            for (u, tr) in trains.iter().enumerate() {
                let expected = truth.rates_hz[u] * duration;
                let got = tr.len() as f64;
                assert!(
                    (got - expected).abs() < 0.08 * expected,
                    "{name} unit {u}: {got} spikes, expected {expected:.0}"
                );
                assert!(tr.windows(2).all(|w| w[1] - w[0] >= params.refractory_s));
            }
            let r = mean_pair_correlation(&binned(&trains, 0.1, duration));
            assert!(r > 0.05, "{name}: mean correlation at 100 ms {r}");
            // No millisecond structure: within 1 ms as many pairs as the slow modulation
            // gives per ms at 1–5 ms (Poisson error of the 1 ms bin about √n; the OU gain's
            // own correlation falls by under 1% over those lags).
            let near = lag_pairs(&trains, 0.0, 0.001);
            let far = lag_pairs(&trains, 0.001, 0.005) / 4.0;
            assert!(
                (near - far).abs() < 4.0 * far.sqrt(),
                "{name}: {near} pairs within 1 ms, {far:.0} per ms at 1–5 ms"
            );
        }
    }

    #[test]
    fn gamma_intervals_keep_rate_and_dead_time_and_burst_below_shape_one() {
        let (units, duration) = (10, 200.0);
        let params = DenseParams {
            isi_shape: 0.3,
            ..null(units, duration, 10.0, 5)
        };
        let (s, truth) = generate_dense(&params).unwrap();
        for (u, tr) in unit_trains(&s, units).iter().enumerate() {
            let expected = truth.rates_hz[u] * duration;
            // Count variance about CV² = 1/k times Poisson's.
            let sd = (expected / 0.3).sqrt();
            let got = tr.len() as f64;
            assert!(
                (got - expected).abs() < 5.0 * sd,
                "unit {u}: {got} spikes, expected {expected:.0} ± {sd:.0}"
            );
            let isi: Vec<f64> = tr.windows(2).map(|w| w[1] - w[0]).collect();
            assert!(isi.iter().all(|&d| d >= params.refractory_s));
            let m = isi.iter().sum::<f64>() / isi.len() as f64;
            let cv =
                (isi.iter().map(|d| (d - m).powi(2)).sum::<f64>() / isi.len() as f64).sqrt() / m;
            assert!(cv > 1.4, "unit {u}: ISI CV {cv}");
        }
    }

    #[test]
    fn planted_activations_fire_whole_chains_at_their_rate() {
        let mut p = null(40, 120.0, 4.0, 3);
        p.chains = super::planted_chains(40, 3, (3, 4), &super::SESSION_WINDOWS_S).unwrap();
        p.chain_activation_hz = 1.0;
        p.evoke_probability = 0.0;
        let (s, _) = generate_dense(&p).unwrap();
        let index = TypeIndex::new(&s);
        for chain in &p.chains {
            let (lo, hi) = chain.delay_s;
            let iv = Interval::new(lo, hi).unwrap();
            let ep = Episode::new(
                chain.neurons.iter().map(|&n| EventType(n as u32)).collect(),
                vec![iv; chain.neurons.len() - 1],
            );
            let count = count_exact(&index, &ep) as f64;
            // 120 activations expected (± 11); a few lose a spike to refractoriness.
            assert!(
                (90.0..=160.0).contains(&count),
                "{:?}: {count} whole occurrences",
                chain.neurons
            );
        }
    }

    #[test]
    fn planted_chains_are_disjoint_and_sized() {
        let chains = super::planted_chains(1000, 6, (3, 4), &super::SESSION_WINDOWS_S).unwrap();
        let lens: Vec<usize> = chains.iter().map(|c| c.neurons.len()).collect();
        assert_eq!(lens, [3, 4, 3, 4, 3, 4]);
        let mut all: Vec<usize> = chains.iter().flat_map(|c| c.neurons.clone()).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 21);
        assert!(all.iter().all(|&u| u < 1000));
        assert_eq!(chains[4].delay_s, super::SESSION_WINDOWS_S[1]);
        let e = super::planted_chains(10, 6, (3, 4), &super::SESSION_WINDOWS_S)
            .unwrap_err()
            .to_string();
        assert!(e.contains("24 units"), "{e}");
        // The session preset validates (generated here for 5 s only).
        let p = DenseParams {
            duration_s: 5.0,
            ..DenseParams::session(1)
        };
        let (s, truth) = generate_dense(&p).unwrap();
        assert_eq!(truth.rates_hz.len(), 1000);
        assert!(truth.rates_hz.iter().all(|r| (0.1..=60.0).contains(r)));
        assert!((20_000..45_000).contains(&s.len()), "{} spikes", s.len());
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
        let mut p = DenseParams::neuropixels(1);
        p.isi_shape = 0.0;
        let e = generate_dense(&p).unwrap_err().to_string();
        assert!(e.contains("isi_shape"), "{e}");
    }
}
