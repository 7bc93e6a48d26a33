//! Slow gains shared by every unit of a dense session: the co-modulated nulls.
//!
//! Units of one probe are rarely independent: they share slow fluctuations of excitability at
//! 0.5–4 Hz (brain state, arousal, the delta band) and, under anaesthesia or in slow-wave
//! sleep, alternate between up and down states together. Such shared modulation correlates
//! the units' spike counts at 100 ms and makes coincidences at millisecond lags more frequent
//! than for independent trains of the same rates, so a test that dithers each spike uniformly
//! (which keeps the slow modulation) and a test that shuffles whole trains (which does not)
//! can disagree. Stella et al. (2022, *eNeuro* 9(4), "Comparing surrogates to evaluate
//! precisely timed higher-order spike correlations") show that the choice of surrogate
//! matters most on exactly these data: non-Poisson intervals, dead times and rate
//! co-modulation. These gains make such nulls: no chain, only shared rate changes.
//!
//! # Model
//! The gain `g(t)` is sampled on a grid of [`GRID_S`] (1 ms) over `[0, duration)` and is
//! the product of the parts asked for, divided by its own mean over the grid, so its time
//! average is exactly 1 and a unit's mean rate stays its drawn rate `r_i`:
//! * **Log-rate Ornstein–Uhlenbeck** ([`Comodulation::OrnsteinUhlenbeck`]):
//!   `g ∝ exp(x(t))`, `dx = −x/τ dt + σ·sqrt(2/τ) dW`, stationary `x ~ N(0, σ²)`, drawn
//!   with the exact discretisation `x_{k+1} = x_k·e^{−Δ/τ} + σ·sqrt(1 − e^{−2Δ/τ})·N(0, 1)`.
//!   `τ = 0.1` s puts the fluctuations' corner frequency at `1/(2πτ)` ≈ 1.6 Hz.
//! * **Sum of sinusoids** ([`Comodulation::Sinusoids`]): `g ∝ exp(x(t))`,
//!   `x = Σ_j a·sin(2π f_j t + φ_j)` with `components` frequencies `f_j` uniform in the band
//!   (e.g. 0.5–4 Hz), phases uniform, and `a = σ·sqrt(2/components)` so that `x` has
//!   standard deviation `σ`.
//! * **Up/down states** ([`UpDownStates`]): a two-state Markov process with exponential
//!   dwell times (means `mean_up_s`, `mean_down_s`), started in its stationary distribution;
//!   the gain in the down state is `down_gain` times the gain in the up state (Steriade,
//!   Nuñez & Amzica 1993, *J. Neurosci.* 13:3252, for the slow oscillation's states).
//!
//! Each unit then fires as a renewal process in the gain's operational time: after a spike
//! (or a burst's last spike) at `t` the unit is dead until `t + τ` (real time), and its next
//! event comes when `∫_{t+τ}^{t'} g` reaches the drawn excess interval (the excess intervals
//! are those of the unmodulated unit). The dead time thus holds in real time, and the hazard
//! outside it is the unit's times `g(t)`. Bursts keep their real-time intra-burst intervals.
//! The gain's draws come from a ChaCha8 generator of its own (stream 1 of the session's
//! seed), so a seed gives the same gain whatever the units. The units' draws are interleaved
//! with their spikes, so the same seed with and without a gain gives the first unit the same
//! rate and the others other rates: compare such sessions by their drawn rates
//! (`DenseTruth::rates_hz`), not unit by unit.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, StandardNormal};
use serde::Serialize;

use super::SynthError;

/// Step of the grid the shared gain is sampled on, seconds.
pub const GRID_S: f64 = 0.001;

/// A slow, log-normal rate fluctuation shared by every unit (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Comodulation {
    /// `exp` of an Ornstein–Uhlenbeck process.
    OrnsteinUhlenbeck {
        /// Standard deviation `σ` of the log-gain (dimensionless; 0.5 doubles or halves the
        /// rate at ±1.4 σ).
        sd: f64,
        /// Correlation time `τ`, seconds (0.1 s: corner frequency 1.6 Hz).
        tau_s: f64,
    },
    /// `exp` of a sum of sinusoids with random frequencies in a band and random phases.
    Sinusoids {
        /// Standard deviation `σ` of the log-gain (dimensionless).
        sd: f64,
        /// The band the frequencies are drawn from, Hz (`0 < low ≤ high`).
        band_hz: (f64, f64),
        /// Number of sinusoids (≥ 1).
        components: usize,
    },
}

/// Up and down states shared by every unit (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UpDownStates {
    /// Mean dwell time in the up state, seconds.
    pub mean_up_s: f64,
    /// Mean dwell time in the down state, seconds.
    pub mean_down_s: f64,
    /// Gain of the down state relative to the up state, `[0, 1]` (0.1: a tenth of the rate).
    pub down_gain: f64,
}

impl UpDownStates {
    /// Up 300 ms, down 200 ms on average, down-state rate a tenth of the up-state rate.
    #[must_use]
    pub fn slow_wave() -> Self {
        Self {
            mean_up_s: 0.3,
            mean_down_s: 0.2,
            down_gain: 0.1,
        }
    }
}

impl Comodulation {
    /// A log-rate Ornstein–Uhlenbeck gain with `σ = 0.5` and `τ = 0.1` s.
    #[must_use]
    pub fn ou() -> Self {
        Self::OrnsteinUhlenbeck {
            sd: 0.5,
            tau_s: 0.1,
        }
    }

    /// Eight sinusoids in 0.5–4 Hz with a log-gain of `σ = 0.5`.
    #[must_use]
    pub fn sinusoids() -> Self {
        Self::Sinusoids {
            sd: 0.5,
            band_hz: (0.5, 4.0),
            components: 8,
        }
    }

    pub(super) fn validate(&self) -> Result<(), SynthError> {
        let bad = |m: String| Err(SynthError::Param(m));
        match *self {
            Self::OrnsteinUhlenbeck { sd, tau_s } => {
                if !(sd.is_finite() && (0.0..=3.0).contains(&sd)) {
                    return bad(format!("co-modulation `sd` = {sd} must be in [0, 3]"));
                }
                if !(tau_s.is_finite() && tau_s >= GRID_S) {
                    return bad(format!(
                        "co-modulation `tau_s` = {tau_s} must be at least the grid step {GRID_S} s"
                    ));
                }
            }
            Self::Sinusoids {
                sd,
                band_hz: (lo, hi),
                components,
            } => {
                if !(sd.is_finite() && (0.0..=3.0).contains(&sd)) {
                    return bad(format!("co-modulation `sd` = {sd} must be in [0, 3]"));
                }
                if !(lo.is_finite() && hi.is_finite() && 0.0 < lo && lo <= hi && hi <= 100.0) {
                    return bad(format!(
                        "co-modulation `band_hz` = ({lo}, {hi}) must satisfy 0 < low ≤ high ≤ 100"
                    ));
                }
                if !(1..=1024).contains(&components) {
                    return bad(format!(
                        "co-modulation `components` = {components} must be in 1..=1024"
                    ));
                }
            }
        }
        Ok(())
    }
}

impl UpDownStates {
    pub(super) fn validate(&self) -> Result<(), SynthError> {
        let ok = |x: f64| x.is_finite() && x >= GRID_S;
        if !(ok(self.mean_up_s) && ok(self.mean_down_s)) {
            return Err(SynthError::Param(format!(
                "up/down `mean_up_s` = {} and `mean_down_s` = {} must be at least the grid step {GRID_S} s",
                self.mean_up_s, self.mean_down_s
            )));
        }
        if !(0.0..=1.0).contains(&self.down_gain) {
            return Err(SynthError::Param(format!(
                "up/down `down_gain` = {} must be in [0, 1]",
                self.down_gain
            )));
        }
        Ok(())
    }
}

/// A shared gain sampled on the grid, as its running integral (the operational time).
#[derive(Clone, Debug)]
pub struct Gain {
    /// `cum[k] = ∫_0^{k·GRID_S} g`, seconds of operational time; `cum.len() = cells + 1`.
    cum: Vec<f64>,
}

impl Gain {
    /// Draws the gain over `[0, duration_s)` from `rng`: the product of the parts given,
    /// normalised to a time average of 1.
    ///
    /// # Errors
    /// [`SynthError::Param`] for a gain that is zero everywhere (a down gain of 0 and no up
    /// state drawn).
    pub fn draw(
        rng: &mut ChaCha8Rng,
        duration_s: f64,
        comodulation: Option<&Comodulation>,
        up_down: Option<&UpDownStates>,
    ) -> Result<Self, SynthError> {
        let cells = (duration_s / GRID_S).ceil().max(1.0) as usize;
        let mut log_g = vec![0.0_f64; cells];
        match comodulation {
            None => {}
            Some(&Comodulation::OrnsteinUhlenbeck { sd, tau_s }) => {
                let decay = (-GRID_S / tau_s).exp();
                let kick = sd * (1.0 - decay * decay).sqrt();
                let z0: f64 = StandardNormal.sample(rng);
                let mut x = sd * z0;
                for v in &mut log_g {
                    *v = x;
                    let z: f64 = StandardNormal.sample(rng);
                    x = x * decay + kick * z;
                }
            }
            Some(&Comodulation::Sinusoids {
                sd,
                band_hz: (lo, hi),
                components,
            }) => {
                let a = sd * (2.0 / components as f64).sqrt();
                for _ in 0..components {
                    let f = if lo < hi {
                        rng.random_range(lo..hi)
                    } else {
                        lo
                    };
                    let phase = rng.random_range(0.0..std::f64::consts::TAU);
                    let w = std::f64::consts::TAU * f;
                    for (k, v) in log_g.iter_mut().enumerate() {
                        *v += a * (w * (k as f64 + 0.5) * GRID_S + phase).sin();
                    }
                }
            }
        }
        let mut g: Vec<f64> = log_g.into_iter().map(f64::exp).collect();
        if let Some(ud) = up_down {
            let up_exp = Exp::new(1.0 / ud.mean_up_s)
                .map_err(|e| SynthError::Param(format!("up/down `mean_up_s`: {e}")))?;
            let down_exp = Exp::new(1.0 / ud.mean_down_s)
                .map_err(|e| SynthError::Param(format!("up/down `mean_down_s`: {e}")))?;
            let mut up = rng.random_bool(ud.mean_up_s / (ud.mean_up_s + ud.mean_down_s));
            let mut switch = if up {
                up_exp.sample(rng)
            } else {
                down_exp.sample(rng)
            };
            for (k, v) in g.iter_mut().enumerate() {
                let mid = (k as f64 + 0.5) * GRID_S;
                while mid >= switch {
                    up = !up;
                    switch += if up {
                        up_exp.sample(rng)
                    } else {
                        down_exp.sample(rng)
                    };
                }
                if !up {
                    *v *= ud.down_gain;
                }
            }
        }
        let total: f64 = g.iter().sum::<f64>() * GRID_S;
        if !(total.is_finite() && total > 0.0) {
            return Err(SynthError::Param(
                "the shared gain is zero over the whole recording (down_gain 0 and no up state)"
                    .into(),
            ));
        }
        // Normalised so that the operational time of the grid's span equals that span.
        let scale = cells as f64 * GRID_S / total;
        let mut cum = Vec::with_capacity(cells + 1);
        let mut acc = 0.0;
        cum.push(0.0);
        for v in g {
            acc += v * scale * GRID_S;
            cum.push(acc);
        }
        Ok(Self { cum })
    }

    /// The gain in the grid cell holding `t` (time average 1); 0 outside the grid.
    #[must_use]
    pub fn at(&self, t: f64) -> f64 {
        let k = (t / GRID_S).floor();
        if !(k >= 0.0 && (k as usize) + 1 < self.cum.len()) {
            return 0.0;
        }
        let k = k as usize;
        (self.cum[k + 1] - self.cum[k]) / GRID_S
    }

    /// Operational time `Λ(t) = ∫_0^t g`, piecewise linear between grid points; `t` beyond
    /// the grid is clamped to its ends.
    #[must_use]
    pub fn integral(&self, t: f64) -> f64 {
        let cells = self.cum.len() - 1;
        let x = (t / GRID_S).clamp(0.0, cells as f64);
        let k = (x.floor() as usize).min(cells - 1);
        self.cum[k] + (self.cum[k + 1] - self.cum[k]) * (x - k as f64)
    }

    /// The real time `t` with `Λ(t) = l`, the first such (`f64::INFINITY` past the grid's
    /// end).
    #[must_use]
    pub fn inverse(&self, l: f64) -> f64 {
        let cells = self.cum.len() - 1;
        if l > self.cum[cells] {
            return f64::INFINITY;
        }
        // The first grid point at or past `l`; the cell before it holds `l`.
        let j = self.cum.partition_point(|&c| c < l).clamp(1, cells);
        let (c0, c1) = (self.cum[j - 1], self.cum[j]);
        let frac = if c1 > c0 { (l - c0) / (c1 - c0) } else { 0.0 };
        ((j - 1) as f64 + frac) * GRID_S
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_gain_averages_one_and_inverts_its_integral() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let g = Gain::draw(
            &mut rng,
            20.0,
            Some(&Comodulation::ou()),
            Some(&UpDownStates::slow_wave()),
        )
        .unwrap();
        assert!((g.integral(20.0) - 20.0).abs() < 1e-9);
        for t in [0.0, 0.0004, 1.2345, 7.5, 19.9999] {
            let back = g.inverse(g.integral(t));
            assert!((back - t).abs() < 1e-9, "{t} → {back}");
        }
        assert_eq!(g.inverse(20.5), f64::INFINITY);
        // Down states at a tenth of the up states' gain, and a log-normal factor on top: the
        // gain spans far more than a factor 10 over the recording.
        let values: Vec<f64> = (0..20_000).map(|k| g.at(k as f64 * GRID_S)).collect();
        let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = values.iter().copied().fold(0.0, f64::max);
        assert!(hi / lo > 20.0, "{lo} .. {hi}");
    }

    #[test]
    fn up_states_take_their_share_of_time() {
        // Stationary share of the up state: 0.3 / (0.3 + 0.2) = 0.6, over 2,000 cycles.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let ud = UpDownStates::slow_wave();
        let g = Gain::draw(&mut rng, 1000.0, None, Some(&ud)).unwrap();
        let values: Vec<f64> = (0..1_000_000).map(|k| g.at(k as f64 * GRID_S)).collect();
        let hi = values.iter().copied().fold(0.0, f64::max);
        let up = values.iter().filter(|&&v| v > 0.5 * hi).count() as f64 / 1e6;
        assert!((up - 0.6).abs() < 0.03, "up share {up}");
        let ratio = values.iter().copied().fold(f64::INFINITY, f64::min) / hi;
        assert!((ratio - 0.1).abs() < 1e-9, "down/up {ratio}");
    }

    #[test]
    fn sinusoids_have_the_asked_spread() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let g = Gain::draw(&mut rng, 200.0, Some(&Comodulation::sinusoids()), None).unwrap();
        let logs: Vec<f64> = (0..200_000).map(|k| g.at(k as f64 * GRID_S).ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
        assert!((sd - 0.5).abs() < 0.05, "log-gain sd {sd}");
    }

    #[test]
    fn bad_gains_are_named() {
        let e = Comodulation::OrnsteinUhlenbeck {
            sd: 0.5,
            tau_s: 0.0,
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("tau_s"), "{e}");
        let e = UpDownStates {
            down_gain: 2.0,
            ..UpDownStates::slow_wave()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(e.contains("down_gain"), "{e}");
    }
}
