//! Surrogate spike trains: copies of a recording in which the feature under test (precise
//! timing between units) is destroyed and chosen single-unit statistics are kept. Every
//! surrogate keeps each unit's spike count and stays inside the recording's span `[T₀, T₁]`
//! (the first and last spike of the whole stream; `trial-shift`: inside each spike's trial);
//! units are treated independently.
//!
//! | method (`--surrogates`) | each unit's train | keeps | null hypothesis |
//! |---|---|---|---|
//! | `dither:Δ` | every spike moved uniformly within `[t − Δ, t + Δ] ∩ [T₀, T₁]` | count, rate profile at scales ≫ Δ | no coordination finer than Δ between units |
//! | `dither-dead-time:Δ[:d]` | as `dither`, but no spike comes closer than `d` to its neighbours | count, dead time `d`, order of spikes | as `dither`, for refractory trains |
//! | `shift:Δ` | the whole train moved by one offset `δ ~ U[−Δ, Δ]`, circularly within `[T₀, T₁]` | count, every ISI but one, bursts | no coordination between units at any lag within ±Δ |
//! | `isi-dither:Δ[:d]` | each spike moved between its neighbours (sum of its two ISIs fixed) within ±Δ, drawn from the unit's smoothed ISI density `h(a)·h(b)` | count, ISI distribution, dead time | as `dither`, keeping the ISI distribution |
//! | `joint-isi-dither:Δ[:d]` | as `isi-dither`, drawn from the smoothed joint density of consecutive ISIs `J(a, b)` | count, joint-ISI distribution (serial ISI correlation) | as `isi-dither`, keeping serial correlations |
//! | `trial-shift:Δ` | within each trial, the unit's spikes moved by one offset per trial and unit, circularly within the trial (spikes outside every trial stay; spikes stay in their trial rather than the span) | count per trial, ISIs, trial-locked rate | no coordination beyond the trial-locked rates |
//!
//! Δ defaults to 0.015 s (15 ms, Elephant's SPADE default); `d` to 0.002 s, capped at the
//! unit's smallest ISI so that the recording itself satisfies it (Elephant takes the same
//! minimum). Sources: Elephant's `spike_train_surrogates` (`dither_spikes`,
//! `dither_spikes_with_refractory_period`, `dither_spike_train`, `JointISI`,
//! `trial_shifting`); Louis, Gerstein, Grün & Diesmann (2010), "Surrogate spike train
//! generation through dithering in operational time", Front. Comput. Neurosci. 4:127; Gerstein
//! (2004), "Searching for significance in spatio-temporal firing patterns", Acta Neurobiol.
//! Exp. 64; Stella, Bouss, Palm & Grün (2022), "Comparing surrogates to evaluate precisely timed
//! higher-order spike correlations", eNeuro 9(3). Stella et al. show that uniform `dither`
//! changes single-train statistics (it fills refractory gaps, and with binning loses spikes)
//! and so yields false positives on non-Poisson trains, and recommend methods that keep the
//! ISI distribution (`isi-dither`, `joint-isi-dither`, `dither-dead-time`, `trial-shift`).
//!
//! Differences from Elephant, each so that nothing is lost or left to order: spikes are never
//! dropped at the span's ends (dithering draws within the span; shifting wraps around);
//! `dither-dead-time` and the ISI methods move even-numbered spikes first and then odd-numbered
//! ones (Elephant's `alternate` sweep; its dead-time dither uses a random order), so every
//! spike's draw depends only on its fixed neighbours and can run in parallel; the ISI methods
//! smooth the (joint-)ISI histogram with σ = 0.5 ms instead of 2 ms ([`ISI_SMOOTHING_S`]), and
//! draw the new position continuously from the piecewise-constant smoothed density (instead
//! of Elephant's bin-centre steps) and accept it by a Metropolis–Hastings rule, so that the
//! density is left invariant (Elephant's windowed draw is not: without the correction, a
//! refractory train's short ISIs became rarer and its self-episodes `A → A` within 5 ms came
//! out "significant" in 7 of 40 null runs at α = 0.1; with it, 1 of 40, `tests/significance.rs`).
//!
//! # Randomness
//! Every draw is Philox4x32-10 ([`super::philox`]) at counter `[spike, unit, surrogate, tag]`
//! under key `seed`: surrogate `s` of a recording is a pure function of `(seed, s)`, equal on
//! every thread count and on the GPU.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use rayon::prelude::*;

use super::philox::{key_of, uniform_pair};
use crate::event::{EventError, EventStream, EventType, Ordering};

/// Default displacement Δ, seconds.
pub const DEFAULT_DELTA_S: f64 = 0.015;
/// Default dead time `d`, seconds (capped per unit at its smallest ISI).
pub const DEFAULT_DEAD_TIME_S: f64 = 0.002;
/// ISI methods: the densities cover ISIs below this, seconds (Elephant's `truncation_limit`).
pub const ISI_TRUNCATION_S: f64 = 0.1;
/// ISI methods: bins of the (joint-)ISI histogram below [`ISI_TRUNCATION_S`].
pub const ISI_BINS: usize = 100;
/// ISI methods: standard deviation of the Gaussian smoothing of the histogram, seconds. Half a
/// bin, not Elephant's 2 ms: on the A2929 session 2 ms smoothed the head-direction units' sharp
/// burst intervals away, and `joint-isi-dither` left 34 of 302 episodes (mostly `u → u`)
/// significant under max-t, against 12 with 0.5 ms (99 surrogates, level 3).
pub const ISI_SMOOTHING_S: f64 = 0.0005;

/// Counter tags (the counter's last word): which draw of a spike or unit.
const TAG_DITHER: u32 = 0;
const TAG_SHIFT: u32 = 2;
const TAG_TRIAL: u32 = 3;
/// ISI methods: the acceptance draw of pass 0 and 1 (`TAG_ACCEPT + pass`).
const TAG_ACCEPT: u32 = 4;

/// How surrogates are made (`--surrogates METHOD[:Δ[:d]]`); module documentation for each.
#[derive(Clone, Debug, PartialEq)]
pub enum SurrogateMethod {
    /// Uniform spike dithering within ±`delta_s`.
    Dither {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// Spike dithering within ±`delta_s` keeping a dead time.
    DitherDeadTime {
        /// Δ, seconds.
        delta_s: f64,
        /// Dead time `d`, seconds (capped per unit at its smallest ISI).
        dead_time_s: f64,
    },
    /// Spike-train shifting by one offset within ±`delta_s` per unit, circular.
    Shift {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// ISI dithering within ±`delta_s`.
    IsiDither {
        /// Δ, seconds.
        delta_s: f64,
        /// Dead time `d`, seconds (capped per unit at its smallest ISI).
        dead_time_s: f64,
    },
    /// Joint-ISI dithering within ±`delta_s`.
    JointIsiDither {
        /// Δ, seconds.
        delta_s: f64,
        /// Dead time `d`, seconds (capped per unit at its smallest ISI).
        dead_time_s: f64,
    },
    /// Trial shifting within ±`delta_s`, circular within each trial.
    TrialShift {
        /// Δ, seconds.
        delta_s: f64,
    },
}

impl SurrogateMethod {
    /// The method's name on the command line.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Dither { .. } => "dither",
            Self::DitherDeadTime { .. } => "dither-dead-time",
            Self::Shift { .. } => "shift",
            Self::IsiDither { .. } => "isi-dither",
            Self::JointIsiDither { .. } => "joint-isi-dither",
            Self::TrialShift { .. } => "trial-shift",
        }
    }

    /// Δ, seconds.
    #[must_use]
    pub fn delta_s(&self) -> f64 {
        match *self {
            Self::Dither { delta_s }
            | Self::DitherDeadTime { delta_s, .. }
            | Self::Shift { delta_s }
            | Self::IsiDither { delta_s, .. }
            | Self::JointIsiDither { delta_s, .. }
            | Self::TrialShift { delta_s } => delta_s,
        }
    }

    /// The dead time of the methods that keep one, seconds.
    #[must_use]
    pub fn dead_time_s(&self) -> Option<f64> {
        match *self {
            Self::DitherDeadTime { dead_time_s, .. }
            | Self::IsiDither { dead_time_s, .. }
            | Self::JointIsiDither { dead_time_s, .. } => Some(dead_time_s),
            _ => None,
        }
    }
}

impl fmt::Display for SurrogateMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.name(), self.delta_s())?;
        if let Some(d) = self.dead_time_s() {
            write!(f, ":{d}")?;
        }
        Ok(())
    }
}

/// A `--surrogates` value that could not be read, or a recording a method cannot take.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SurrogateError {
    /// Unknown method name.
    #[error(
        "unknown surrogate method `{0}` (one of dither, dither-dead-time, shift, isi-dither, joint-isi-dither, trial-shift)"
    )]
    UnknownMethod(String),
    /// Δ or d not a positive finite number of seconds.
    #[error("surrogate `{spec}`: {what} must be a positive number of seconds, got `{value}`")]
    BadNumber {
        /// The whole value given.
        spec: String,
        /// `Δ` or `the dead time`.
        what: &'static str,
        /// The text that was not a number.
        value: String,
    },
    /// More fields than the method takes.
    #[error(
        "surrogate `{0}`: too many `:` fields (METHOD[:Δ] or, for dead-time methods, METHOD[:Δ[:d]])"
    )]
    TooManyFields(String),
    /// `trial-shift` without trials.
    #[error("`trial-shift` needs the trials (`--trials FILE`: one `start_s,stop_s` per line)")]
    NoTrials,
    /// A trial with `stop ≤ start`, non-finite bounds, or overlapping the previous one.
    #[error("trial {index}: [{start_s}, {stop_s}) {why}")]
    BadTrial {
        /// 0-based trial number.
        index: usize,
        /// Start, seconds.
        start_s: f64,
        /// Stop, seconds.
        stop_s: f64,
        /// What is wrong.
        why: &'static str,
    },
    /// The surrogate stream could not be built (not expected: times stay finite and ≥ 0).
    #[error("surrogate stream: {0}")]
    Stream(#[from] EventError),
}

impl FromStr for SurrogateMethod {
    type Err = SurrogateError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let mut parts = spec.trim().split(':');
        let name = parts.next().unwrap_or_default();
        let number = |text: Option<&str>, what, default| -> Result<f64, SurrogateError> {
            match text {
                None => Ok(default),
                Some(t) => match t.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
                    _ => Err(SurrogateError::BadNumber {
                        spec: spec.to_owned(),
                        what,
                        value: t.to_owned(),
                    }),
                },
            }
        };
        let delta_s = number(parts.next(), "Δ", DEFAULT_DELTA_S)?;
        let takes_dead_time =
            matches!(name, "dither-dead-time" | "isi-dither" | "joint-isi-dither");
        let dead_time_s = if takes_dead_time {
            number(parts.next(), "the dead time", DEFAULT_DEAD_TIME_S)?
        } else {
            0.0
        };
        if parts.next().is_some() {
            return Err(SurrogateError::TooManyFields(spec.to_owned()));
        }
        Ok(match name {
            "dither" => Self::Dither { delta_s },
            "dither-dead-time" => Self::DitherDeadTime {
                delta_s,
                dead_time_s,
            },
            "shift" => Self::Shift { delta_s },
            "isi-dither" => Self::IsiDither {
                delta_s,
                dead_time_s,
            },
            "joint-isi-dither" => Self::JointIsiDither {
                delta_s,
                dead_time_s,
            },
            "trial-shift" => Self::TrialShift { delta_s },
            other => return Err(SurrogateError::UnknownMethod(other.to_owned())),
        })
    }
}

/// Trials `[start_s, stop_s)`, sorted and disjoint, for `trial-shift`.
#[derive(Clone, Debug, PartialEq)]
pub struct Trials(Arc<[(f64, f64)]>);

impl Trials {
    /// Checks and keeps `trials` (in time order, non-overlapping, `start < stop`, finite).
    ///
    /// # Errors
    /// [`SurrogateError::BadTrial`] naming the first bad trial.
    pub fn new(trials: Vec<(f64, f64)>) -> Result<Self, SurrogateError> {
        for (index, &(start_s, stop_s)) in trials.iter().enumerate() {
            let bad = |why| SurrogateError::BadTrial {
                index,
                start_s,
                stop_s,
                why,
            };
            if !start_s.is_finite() || !stop_s.is_finite() {
                return Err(bad("has a bound that is not a finite number"));
            }
            if stop_s <= start_s {
                return Err(bad("ends before it starts"));
            }
            if index > 0 && start_s < trials[index - 1].1 {
                return Err(bad(
                    "starts before the previous trial ends (trials must be in time order and disjoint)",
                ));
            }
        }
        Ok(Self(trials.into()))
    }

    /// The trials, seconds.
    #[must_use]
    pub fn as_slice(&self) -> &[(f64, f64)] {
        &self.0
    }
}

/// Per-unit table of the ISI methods: the smoothed (joint-)ISI density on `ISI_BINS²` bins.
#[derive(Clone, Debug)]
struct IsiTable {
    /// Row-major `[ISI_BINS][ISI_BINS]`: density of (previous ISI bin, next ISI bin).
    density: Vec<f64>,
}

/// One unit's sorted spike times and what its method needs.
#[derive(Clone, Debug)]
struct Unit {
    times: Vec<f64>,
    /// Dead time in force for this unit: min(d, smallest ISI).
    dead_time_s: f64,
    table: Option<IsiTable>,
}

/// The surrogates of one recording under one method and seed; [`Surrogates::generate`] makes
/// surrogate `s`.
#[derive(Clone, Debug)]
pub struct Surrogates {
    method: SurrogateMethod,
    key: [u32; 2],
    units: Vec<Unit>,
    types: Vec<EventType>,
    alphabet: crate::event::Alphabet,
    span: (f64, f64),
    trials: Option<Trials>,
}

impl Surrogates {
    /// Prepares the surrogates of `stream` (per-unit trains, dead times, ISI densities).
    ///
    /// # Errors
    /// [`SurrogateError::NoTrials`] for `trial-shift` without `trials`.
    pub fn new(
        stream: &EventStream,
        method: SurrogateMethod,
        seed: u64,
        trials: Option<Trials>,
    ) -> Result<Self, SurrogateError> {
        if matches!(method, SurrogateMethod::TrialShift { .. }) && trials.is_none() {
            return Err(SurrogateError::NoTrials);
        }
        let n_types = stream.alphabet().len();
        let mut per_unit: Vec<Vec<f64>> = vec![Vec::new(); n_types];
        for (t, ty) in stream.iter() {
            per_unit[ty.index()].push(t);
        }
        let joint = matches!(method, SurrogateMethod::JointIsiDither { .. });
        let isi = matches!(
            method,
            SurrogateMethod::IsiDither { .. } | SurrogateMethod::JointIsiDither { .. }
        );
        let units = per_unit
            .into_par_iter()
            .map(|times| {
                let min_isi = times
                    .windows(2)
                    .map(|w| w[1] - w[0])
                    .fold(f64::INFINITY, f64::min);
                let dead_time_s = method.dead_time_s().unwrap_or(0.0).min(min_isi);
                let table =
                    (isi && times.len() >= 3).then(|| isi_table(&times, dead_time_s, joint));
                Unit {
                    times,
                    dead_time_s,
                    table,
                }
            })
            .collect();
        Ok(Self {
            method,
            key: key_of(seed),
            units,
            types: (0..n_types as u32).map(EventType).collect(),
            alphabet: stream.alphabet().clone(),
            span: (stream.start(), stream.end()),
            trials,
        })
    }

    /// Surrogate `s` as a job a GPU generates from the recording it holds, bit for bit
    /// [`Surrogates::generate`]'s (`kernels/surrogates.cu`): for `dither`,
    /// `dither-dead-time` and `shift`; `None` for the other methods (generated on the host).
    #[must_use]
    pub fn device_job(&self, s: u64) -> Option<crate::device::SurrogateJob> {
        use crate::device::DeviceSurrogate;
        let method = match self.method {
            SurrogateMethod::Dither { delta_s } => DeviceSurrogate::Dither { delta_s },
            SurrogateMethod::DitherDeadTime { delta_s, .. } => DeviceSurrogate::DitherDeadTime {
                delta_s,
                dead_time_s: self.units.iter().map(|u| u.dead_time_s).collect(),
            },
            SurrogateMethod::Shift { delta_s } => DeviceSurrogate::Shift { delta_s },
            _ => return None,
        };
        Some(crate::device::SurrogateJob {
            method,
            key: self.key,
            surrogate: s,
            span: self.span,
        })
    }

    /// The trains of `units` (type indices of the stream, each a slot) as a GPU makes their
    /// surrogates for hybrids, bit for bit [`Surrogates::unit_train`]'s
    /// (`kernels/surrogates.cu`'s `trains_*`): the method, the Philox key and the slots'
    /// originals; for `dither`, `dither-dead-time` and `shift`, `None` for the other methods
    /// (made on the host).
    ///
    /// # Panics
    /// If a unit is not a type of the stream.
    #[must_use]
    pub(crate) fn hybrid_units(
        &self,
        units: &[usize],
    ) -> Option<(
        crate::device::TrainSurrogate,
        [u32; 2],
        crate::device::HybridUnits,
    )> {
        use crate::device::TrainSurrogate;
        let method = match self.method {
            SurrogateMethod::Dither { delta_s } => TrainSurrogate::Dither { delta_s },
            SurrogateMethod::DitherDeadTime { delta_s, .. } => {
                TrainSurrogate::DitherDeadTime { delta_s }
            }
            SurrogateMethod::Shift { delta_s } => TrainSurrogate::Shift { delta_s },
            _ => return None,
        };
        let mut out = crate::device::HybridUnits {
            offsets: vec![0],
            ..Default::default()
        };
        for &u in units {
            let unit = &self.units[u];
            out.unit.push(u32::try_from(u).ok()?);
            out.dead_time_s.push(unit.dead_time_s);
            out.times.extend_from_slice(&unit.times);
            out.offsets.push(u32::try_from(out.times.len()).ok()?);
        }
        Some((method, self.key, out))
    }

    /// The method.
    #[must_use]
    pub fn method(&self) -> &SurrogateMethod {
        &self.method
    }

    /// The span `[T₀, T₁]` every surrogate stays in, seconds.
    #[must_use]
    pub fn span(&self) -> (f64, f64) {
        self.span
    }

    /// Surrogate `s` of unit `unit` (a type index of the stream): its spike times, sorted.
    /// Shape `[spikes of the unit]`.
    ///
    /// # Panics
    /// If `unit` is not a type of the stream.
    #[must_use]
    pub fn unit_train(&self, s: u64, unit: usize) -> Vec<f64> {
        let u = &self.units[unit];
        let (t0, t1) = self.span;
        let ctr = |i: usize, tag: u32| {
            [
                i as u32,
                unit as u32,
                s as u32,
                tag | ((s >> 32) as u32) << 8,
            ]
        };
        let key = self.key;
        let mut x = u.times.clone();
        match &self.method {
            SurrogateMethod::Dither { delta_s } => {
                for (i, t) in x.iter_mut().enumerate() {
                    let lo = (*t - delta_s).max(t0);
                    let hi = (*t + delta_s).min(t1);
                    *t = draw(lo, hi, uniform_pair(ctr(i, TAG_DITHER), key)[0]);
                }
                x.sort_by(f64::total_cmp);
            }
            SurrogateMethod::DitherDeadTime { delta_s, .. } => {
                let d = u.dead_time_s;
                for parity in 0..2 {
                    for i in (parity..x.len()).step_by(2) {
                        let prev = if i > 0 { x[i - 1] + d } else { t0 };
                        let next = if i + 1 < x.len() { x[i + 1] - d } else { t1 };
                        let lo = (x[i] - delta_s).max(prev).max(t0);
                        let hi = (x[i] + delta_s).min(next).min(t1);
                        if lo <= hi {
                            x[i] = draw(lo, hi, uniform_pair(ctr(i, parity as u32), key)[0]);
                        }
                    }
                }
            }
            SurrogateMethod::Shift { delta_s } => {
                let u0 = uniform_pair(ctr(0, TAG_SHIFT), key)[0];
                let delta = -delta_s + 2.0 * delta_s * u0;
                wrap_shift(&mut x, delta, t0, t1);
            }
            SurrogateMethod::TrialShift { delta_s } => {
                if let Some(trials) = &self.trials {
                    for (j, &(a, b)) in trials.as_slice().iter().enumerate() {
                        let from = x.partition_point(|&t| t < a);
                        let to = x.partition_point(|&t| t < b);
                        let u0 = uniform_pair(ctr(j, TAG_TRIAL), key)[0];
                        let delta = -delta_s + 2.0 * delta_s * u0;
                        // Circular within [a, b): the trial's spikes stay in it.
                        wrap_shift(&mut x[from..to], delta, a, b);
                    }
                }
            }
            SurrogateMethod::IsiDither { delta_s, .. }
            | SurrogateMethod::JointIsiDither { delta_s, .. } => {
                if let Some(table) = &u.table {
                    let d = u.dead_time_s;
                    for parity in 0..2 {
                        for i in (1 + parity..x.len().saturating_sub(1)).step_by(2) {
                            let (p, q) = (x[i - 1], x[i + 1]);
                            let [u0, u1] = uniform_pair(ctr(i, parity as u32), key);
                            let [u2, _] = uniform_pair(ctr(i, TAG_ACCEPT + parity as u32), key);
                            x[i] = p + isi_step(table, x[i] - p, q - p, *delta_s, d, [u0, u1, u2]);
                        }
                    }
                }
            }
        }
        x
    }

    /// Surrogate `s`: every unit's surrogate train, as a stream over the same alphabet (events
    /// in time order, equal times by unit).
    ///
    /// # Errors
    /// [`SurrogateError::Stream`] if the stream cannot be built (not expected).
    pub fn generate(&self, s: u64) -> Result<EventStream, SurrogateError> {
        self.generate_some(s, |_| true)
    }

    /// Surrogate `s` with the trains of the units `keep[u]` only (type indices; a unit past
    /// the end of `keep` is left out): each kept unit's train is [`Surrogates::generate`]'s,
    /// the others are empty, over the same alphabet. An episode whose types are all kept has
    /// the same occurrences, so the same counts, in both streams (occurrences and the
    /// non-overlapped count read the events of the episode's types only), at the cost of the
    /// kept units alone: the significance test's second pass counts a few hundred
    /// significant episodes of a few units in every surrogate.
    ///
    /// # Errors
    /// As [`Surrogates::generate`], and [`SurrogateError::Stream`] with
    /// [`EventError::Empty`] when no kept unit has a spike.
    pub fn generate_units(&self, s: u64, keep: &[bool]) -> Result<EventStream, SurrogateError> {
        self.generate_some(s, |u| keep.get(u).copied().unwrap_or(false))
    }

    fn generate_some(
        &self,
        s: u64,
        kept: impl Fn(usize) -> bool + Sync,
    ) -> Result<EventStream, SurrogateError> {
        let trains: Vec<Vec<f64>> = (0..self.units.len())
            .into_par_iter()
            .map(|u| {
                if kept(u) {
                    self.unit_train(s, u)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let n: usize = trains.iter().map(Vec::len).sum();
        let mut times = Vec::with_capacity(n);
        let mut types = Vec::with_capacity(n);
        for (u, train) in trains.into_iter().enumerate() {
            types.extend(std::iter::repeat_n(self.types[u], train.len()));
            times.extend(train);
        }
        Ok(EventStream::new(
            times,
            types,
            self.alphabet.clone(),
            Ordering::SortIfNeeded,
        )?)
    }
}

/// `lo + u · (hi − lo)`, kept within `[lo, hi]` against rounding.
#[inline]
fn draw(lo: f64, hi: f64, u: f64) -> f64 {
    (lo + u * (hi - lo)).clamp(lo, hi)
}

/// Shifts sorted `x` (all within `[a, b]`) by `delta` circularly within `[a, b)` and sorts.
fn wrap_shift(x: &mut [f64], delta: f64, a: f64, b: f64) {
    let len = b - a;
    if len <= 0.0 {
        return;
    }
    for t in x.iter_mut() {
        let v = a + (*t - a + delta).rem_euclid(len);
        // rem_euclid can round up to `len` itself.
        *t = if v >= b { a } else { v };
    }
    x.sort_by(f64::total_cmp);
}

fn bin_of(isi: f64) -> usize {
    let w = ISI_TRUNCATION_S / ISI_BINS as f64;
    ((isi / w).floor().max(0.0) as usize).min(ISI_BINS)
}

/// The smoothed (joint-)ISI density of one unit's sorted `times` (≥ 3 spikes): the histogram
/// of consecutive ISI pairs below [`ISI_TRUNCATION_S`] (or, for ISI dithering, the outer
/// product of the ISI histogram with itself), Gaussian-smoothed (σ = [`ISI_SMOOTHING_S`],
/// reflecting edges) above the dead time's bin and zero below it (Elephant's `cutoff`).
fn isi_table(times: &[f64], dead_time_s: f64, joint: bool) -> IsiTable {
    let n = ISI_BINS;
    let isis: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let mut h = vec![0.0f64; n * n];
    if joint {
        for w in isis.windows(2) {
            let (a, b) = (bin_of(w[0]), bin_of(w[1]));
            if a < n && b < n {
                h[a * n + b] += 1.0;
            }
        }
    } else {
        let mut one = vec![0.0f64; n];
        for &isi in &isis {
            let a = bin_of(isi);
            if a < n {
                one[a] += 1.0;
            }
        }
        for a in 0..n {
            for b in 0..n {
                h[a * n + b] = one[a] * one[b];
            }
        }
    }
    let start = bin_of(dead_time_s).min(n);
    let sigma_bins = ISI_SMOOTHING_S / (ISI_TRUNCATION_S / n as f64);
    let kernel = gaussian_kernel(sigma_bins);
    let m = n - start;
    let mut sub: Vec<f64> = (0..m * m)
        .map(|k| h[(start + k / m) * n + start + k % m])
        .collect();
    smooth_rows(&mut sub, m, &kernel);
    transpose(&mut sub, m);
    smooth_rows(&mut sub, m, &kernel);
    transpose(&mut sub, m);
    let mut density = vec![0.0f64; n * n];
    for a in 0..m {
        for b in 0..m {
            density[(start + a) * n + start + b] = sub[a * m + b];
        }
    }
    IsiTable { density }
}

/// A normalised Gaussian kernel, truncated at 4σ (as `scipy.ndimage.gaussian_filter`).
fn gaussian_kernel(sigma: f64) -> Vec<f64> {
    let radius = (4.0 * sigma).round().max(0.0) as i64;
    let mut k: Vec<f64> = (-radius..=radius)
        .map(|x| (-0.5 * (x as f64 / sigma).powi(2)).exp())
        .collect();
    let total: f64 = k.iter().sum();
    for v in &mut k {
        *v /= total;
    }
    k
}

/// Convolves each row of the `m × m` matrix with `kernel`, reflecting at the edges
/// (`scipy`'s `reflect`: `d c b a | a b c d | d c b a`).
fn smooth_rows(x: &mut [f64], m: usize, kernel: &[f64]) {
    if m == 0 {
        return;
    }
    let radius = (kernel.len() / 2) as i64;
    let reflect = |mut i: i64| -> usize {
        let m = m as i64;
        loop {
            if i < 0 {
                i = -i - 1;
            } else if i >= m {
                i = 2 * m - i - 1;
            } else {
                return i as usize;
            }
        }
    };
    let mut row = vec![0.0f64; m];
    for r in 0..m {
        let src = &x[r * m..(r + 1) * m];
        for (c, out) in row.iter_mut().enumerate() {
            *out = kernel
                .iter()
                .enumerate()
                .map(|(k, w)| w * src[reflect(c as i64 + k as i64 - radius)])
                .sum();
        }
        x[r * m..(r + 1) * m].copy_from_slice(&row);
    }
}

fn transpose(x: &mut [f64], m: usize) {
    for a in 0..m {
        for b in a + 1..m {
            x.swap(a * m + b, b * m + a);
        }
    }
}

/// The density `f(a) = J(a, s − a)` of a spike's offset `a` from its previous neighbour, its
/// neighbours `s` apart: piecewise constant between the bin edges of `a` and of `s − a`; 1
/// everywhere when `s` reaches beyond the table (uniform there, as Elephant does for spikes it
/// cannot move by the joint-ISI density).
fn offset_density(table: &IsiTable, a: f64, s: f64) -> f64 {
    if s >= ISI_TRUNCATION_S {
        return 1.0;
    }
    let n = ISI_BINS;
    let (i, j) = (bin_of(a), bin_of(s - a));
    if i < n && j < n {
        table.density[i * n + j]
    } else {
        0.0
    }
}

/// The window `[max(a − Δ, d), min(a + Δ, s − d)]` cut at every bin edge of `a` and of
/// `s − a`, as (from, to, ∫f) pieces, and the window's total mass `Z(a) = ∫f`.
fn window_pieces(
    table: &IsiTable,
    a: f64,
    s: f64,
    delta: f64,
    d: f64,
) -> (Vec<(f64, f64, f64)>, f64) {
    let lo = (a - delta).max(d);
    let hi = (a + delta).min(s - d);
    if lo > hi {
        return (Vec::new(), 0.0);
    }
    let w = ISI_TRUNCATION_S / ISI_BINS as f64;
    let mut cuts = vec![lo, hi];
    if s < ISI_TRUNCATION_S {
        let mut k = (lo / w).floor() + 1.0;
        while k * w < hi {
            cuts.push(k * w);
            k += 1.0;
        }
        let mut k = ((s - hi) / w).floor() + 1.0;
        while s - k * w > lo {
            cuts.push(s - k * w);
            k += 1.0;
        }
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    let mut pieces = Vec::with_capacity(cuts.len());
    let mut total = 0.0;
    for c in cuts.windows(2) {
        let mass = offset_density(table, 0.5 * (c[0] + c[1]), s) * (c[1] - c[0]);
        total += mass;
        pieces.push((c[0], c[1], mass));
    }
    if pieces.is_empty() {
        // A single point (lo == hi).
        pieces.push((lo, hi, 0.0));
    }
    (pieces, total)
}

/// One Metropolis–Hastings step of a spike's offset `a` from its previous neighbour (ISI
/// methods), its neighbours `s` apart (fixed): the proposal is drawn exactly from the density
/// `f(a′) = J(a′, s − a′)` restricted to the window around `a` (a piece by its mass, then
/// uniformly inside it), and accepted with probability `min(1, Z(a) / Z(a′))`, `Z` the window's
/// mass. This leaves `f` invariant (the plain windowed draw, Elephant's `window` method, does
/// not: its windows differ between `a` and `a′`), so a renewal train with ISI density `h`
/// keeps it under `isi-dither` (`J = h ⊗ h`). `r`: three uniforms.
fn isi_step(table: &IsiTable, a: f64, s: f64, delta: f64, d: f64, r: [f64; 3]) -> f64 {
    let (pieces, z) = window_pieces(table, a, s, delta, d);
    if z <= 0.0 {
        return a;
    }
    let target = r[0] * z;
    let mut acc = 0.0;
    let mut chosen = pieces.len() - 1;
    for (k, p) in pieces.iter().enumerate() {
        acc += p.2;
        if target < acc && p.2 > 0.0 {
            chosen = k;
            break;
        }
    }
    let (from, to, _) = pieces[chosen];
    let proposal = draw(from, to, r[1]);
    let (_, z_new) = window_pieces(table, proposal, s, delta, d);
    if z_new > 0.0 && r[2] * z_new < z {
        proposal
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_with_defaults_and_refuse_bad_values() {
        assert_eq!(
            "dither".parse::<SurrogateMethod>().unwrap(),
            SurrogateMethod::Dither { delta_s: 0.015 }
        );
        assert_eq!(
            "shift:2.0".parse::<SurrogateMethod>().unwrap(),
            SurrogateMethod::Shift { delta_s: 2.0 }
        );
        assert_eq!(
            "dither-dead-time:0.01:0.001"
                .parse::<SurrogateMethod>()
                .unwrap(),
            SurrogateMethod::DitherDeadTime {
                delta_s: 0.01,
                dead_time_s: 0.001
            }
        );
        assert_eq!(
            "joint-isi-dither:0.02".parse::<SurrogateMethod>().unwrap(),
            SurrogateMethod::JointIsiDither {
                delta_s: 0.02,
                dead_time_s: DEFAULT_DEAD_TIME_S
            }
        );
        for bad in [
            "jitter:0.01",
            "dither:-1",
            "dither:x",
            "shift:1:2",
            "dither:0",
        ] {
            assert!(bad.parse::<SurrogateMethod>().is_err(), "{bad}");
        }
        let m: SurrogateMethod = "isi-dither:0.01:0.003".parse().unwrap();
        assert_eq!(m.to_string().parse::<SurrogateMethod>().unwrap(), m);
    }

    #[test]
    fn trials_must_be_ordered_and_disjoint() {
        assert!(Trials::new(vec![(0.0, 1.0), (1.0, 2.0)]).is_ok());
        assert!(Trials::new(vec![(0.0, 1.0), (0.5, 2.0)]).is_err());
        assert!(Trials::new(vec![(1.0, 1.0)]).is_err());
        assert!(Trials::new(vec![(0.0, f64::NAN)]).is_err());
    }

    #[test]
    fn gaussian_smoothing_keeps_mass_and_reflects() {
        let k = gaussian_kernel(2.0);
        assert!((k.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        let m = 7;
        let mut x = vec![0.0; m * m];
        x[3 * m + 3] = 1.0;
        x[0] = 2.0;
        smooth_rows(&mut x, m, &k);
        // Reflection at the edges keeps each row's mass.
        assert!((x[3 * m..4 * m].iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!((x[..m].iter().sum::<f64>() - 2.0).abs() < 1e-12);
    }
}
