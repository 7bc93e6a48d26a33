//! The significance test in phases, each over any range of surrogate indices, so that the
//! surrogates of one recording can be split across processes and machines (the Python
//! package's `synfire.cluster`, issue 22) and every p-value still equals the single-process
//! run's bit for bit. [`test_episodes`], [`test_episodes_on`] and [`test_episodes_with_gpu`]
//! are these same phases run over the one range `0..S`.
//!
//! # Phases
//! A [`Tester`] holds the recording, its mining configuration and the counters (CPU or GPU).
//! [`Tester::plan`] fixes what is tested ([`Plan`]: the settings, the recording's minimum
//! count and its tested episodes with their counts). Then, per procedure
//! ([`super::testing`] defines them):
//!
//! | procedure | first pass, per range ([`Tester::first_pass`]) | between ([`Tester::union`]) | second pass, per range ([`Tester::second_pass`]) |
//! |---|---|---|---|
//! | `max-t` | mine each surrogate: its frequent episodes and counts | `U`, the union of every dataset's frequent episodes, and their counts in the recording | count every episode of `U` in each surrogate (exactly where it was not frequent there): sums, sums of squares, exceedances |
//! | `spectrum` | each surrogate's largest count per episode size, by the exact search of [`super::spectrum`] (equal to mining it); count the tested episodes: sums, sums of squares | — | — |
//! | `spectrum`, [`SignificanceConfig::significant_only`] | each surrogate's largest count per episode size | the significant episodes (from the signatures' p-values) | count the significant episodes in each surrogate: sums, sums of squares |
//! | `fdr-bh`, `holm`, `bonferroni`, `none` | count the tested episodes in each surrogate: sums, sums of squares, exceedances | — | — |
//!
//! [`finish`] combines the parts (the first pass's of every range; with two passes also the
//! union and the second pass's) into the [`SignificanceResult`], with no recording and no
//! counter.
//!
//! `spectrum` decides from the surrogates' largest counts per size alone; each tested
//! episode's counts in the surrogates only make its `surrogate_mean` and `surrogate_std`.
//! With [`SignificanceConfig::significant_only`] those counts are made for the significant
//! episodes only, in a second pass, which is most of the work saved (every tested episode is
//! 10⁴–10⁶ counts per surrogate at level 4, the significant ones a few hundred). The tests it
//! returns equal those of the one-pass run that are significant, bit for bit: the same
//! integers enter the same formulas (`tests/significance_split.rs`).
//!
//! # Why a split gives the same p-values
//! * Surrogate `s` is a pure function of (recording, method, seed, `s`)
//!   ([`super::surrogate`]): any range of indices is made the same anywhere, on any device.
//! * Every per-surrogate quantity a part carries is an integer: counts, their sums (`u64`) and
//!   sums of squares (`u128`), exceedances. Parts combine by integer addition, which is exact
//!   and independent of the order and of where the ranges were cut.
//! * `U` is numbered canonically: the recording's tested episodes first, then each surrogate's
//!   frequent episodes in surrogate order and in its mining order, whatever the ranges.
//! * [`finish`] computes every floating-point value (means, deviations, the statistics `T`, the
//!   maxima `M_s`, the p-values and their adjustments) from the combined integers in one fixed
//!   order, the same code for one range or many.
//!
//! So the result (every field of every [`super::EpisodeTest`], `surrogate_max`, `warnings` and
//! `candidates_counted`) is identical for any partition of `0..S` into ranges
//! (`tests/significance_split.rs` checks it for every procedure, the parts passed through their
//! JSON form).
//!
//! # The JSON form
//! [`Plan`], [`FirstPart`], [`Union`] and [`SecondPart`] have a JSON form (`to_json`,
//! `from_json`) for moving them between processes. An episode is written as its unit indices
//! (into the recording's alphabet) and its gaps' indices into the configuration's intervals.
//! Each carries a fingerprint of the recording, the mining configuration and the plan's
//! settings; a phase refuses a plan or part made for another recording, another configuration
//! or another test ([`SignificanceError::Config`] saying which), and [`finish`] refuses ranges
//! that do not cover `0..S` exactly once.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::engine::{Engine, more_counters};
use super::error::SignificanceError;
use super::surrogate::{SurrogateMethod, Surrogates, Trials};
use super::testing::{
    Correction, EpisodeTest, Key, SignificanceConfig, SignificanceResult, Sums, benjamini_hochberg,
    holm, key, leave_one_out, max_t_adjusted, too_few_for_alpha,
};
use crate::device::{DeviceChoice, DeviceError};
use crate::episode::count::MAX_EPISODE_LEN;
use crate::episode::{
    Episode, GpuCounter, GpuSettings, Interval, MinerConfig, MiningResult, Threshold, select_gpu,
};
use crate::event::{EventStream, EventType};

/// Version of the JSON form; a plan or part of another version is refused.
const WIRE_VERSION: u32 = 1;

/// Tests the episodes of `data` (the result of mining `stream` with `config`) against
/// surrogates of `stream`. Surrogates are mined (`max-t`) with `config` at the recording's
/// minimum count, searched for their largest count per episode size at that minimum count
/// (`spectrum`, [`super::spectrum`]: the same maxima as mining them), or only counted
/// (per-episode procedures), on the CPU (surrogates in parallel).
///
/// # Errors
/// [`SignificanceError::Config`] for `n_surrogates = 0` or α outside (0, 1); surrogate and
/// mining errors.
pub fn test_episodes(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
) -> Result<SignificanceResult, SignificanceError> {
    test_episodes_on(
        stream,
        config,
        data,
        sig,
        DeviceChoice::Cpu,
        &GpuSettings::default(),
    )
}

/// [`test_episodes`] with the surrogates mined and counted on `device` (`auto`: the GPUs when
/// there are any; GPU counters, one per host core, work on different surrogates at once). The
/// counts, and so every p-value, are the same on either.
///
/// # Errors
/// As [`test_episodes`], and [`SignificanceError::Device`] for `gpu` without a usable GPU.
pub fn test_episodes_on(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    device: DeviceChoice,
    settings: &GpuSettings,
) -> Result<SignificanceResult, SignificanceError> {
    Tester::new(stream, config, device, settings)?.run(data, sig)
}

/// [`test_episodes`] on a GPU counter the caller holds (a pipeline stage's, kept across
/// windows): it is reloaded with each surrogate, so reload it with the caller's stream before
/// counting there again.
///
/// # Errors
/// As [`test_episodes`]; a device error of the counter.
pub fn test_episodes_with_gpu(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    gpu: &mut GpuCounter,
) -> Result<SignificanceResult, SignificanceError> {
    Tester::with_gpus(stream, config, std::slice::from_mut(gpu)).run(data, sig)
}

/// What every phase of one test needs besides the recording and its mining configuration: the
/// test's settings, the recording's minimum count and the tested episodes with their counts
/// in the recording. Made by [`Tester::plan`].
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    fingerprint: u64,
    method: SurrogateMethod,
    n_surrogates: usize,
    alpha: f64,
    correction: Correction,
    seed: u64,
    trials: Option<Trials>,
    test_top: Option<usize>,
    /// The tested episodes are a watch list (fixed in advance), not chosen by their counts.
    watch: bool,
    /// Only the significant episodes' tests are kept ([`SignificanceConfig::significant_only`]).
    significant_only: bool,
    min_count: u64,
    /// Tested episodes and their counts in the recording, in report order (watch list: its
    /// order). `max-t`, `spectrum`: the frequent episodes of two or more nodes.
    tested: Vec<(Episode, u64)>,
    /// Candidate counts made to build the plan (a watch list counted in the recording).
    counted: u64,
    /// [`Plan::hash_parts`], computed once.
    part: u64,
}

impl Plan {
    /// The plan with its part fingerprint computed.
    fn sealed(mut self) -> Self {
        self.part = self.hash_parts();
        self
    }

    /// The number of surrogates `S`.
    #[must_use]
    pub fn n_surrogates(&self) -> usize {
        self.n_surrogates
    }

    /// The procedure.
    #[must_use]
    pub fn correction(&self) -> Correction {
        self.correction
    }

    /// The seed of the surrogates.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The tested episodes with their counts in the recording, in report order (shape
    /// `[tests]`).
    #[must_use]
    pub fn tested(&self) -> &[(Episode, u64)] {
        &self.tested
    }

    /// The passes over the surrogates: 2 for `max-t` (mine, then count the union) and for
    /// `spectrum` keeping only significant episodes (search, then count the significant
    /// ones), 1 otherwise.
    #[must_use]
    pub fn passes(&self) -> usize {
        match self.correction {
            Correction::MaxT => 2,
            Correction::Spectrum if self.significant_only => 2,
            _ => 1,
        }
    }

    /// Whether the first pass counts the tested episodes in each surrogate (their sums).
    fn first_pass_sums(&self) -> bool {
        match self.correction {
            Correction::MaxT => false,
            Correction::Spectrum => !self.significant_only,
            _ => true,
        }
    }

    /// `0..S` cut into consecutive ranges of at most `size` surrogates (at least one range;
    /// `size` 0 is taken as 1).
    #[must_use]
    pub fn batches(&self, size: usize) -> Vec<Range<u64>> {
        let n = self.n_surrogates as u64;
        let size = size.max(1) as u64;
        (0..n.div_ceil(size))
            .map(|k| k * size..((k + 1) * size).min(n))
            .collect()
    }

    /// The settings the surrogates are made with, to compare against a [`Tester`]'s.
    fn surrogate_key(&self) -> (String, u64, Option<Vec<(f64, f64)>>) {
        (
            self.method.to_string(),
            self.seed,
            self.trials.as_ref().map(|t| t.as_slice().to_vec()),
        )
    }

    /// The fingerprint every part of this plan carries.
    fn part_fingerprint(&self) -> u64 {
        self.part
    }

    /// The recording's and configuration's fingerprint hashed with the plan's settings and
    /// tested episodes.
    fn hash_parts(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(self.fingerprint);
        h.bytes(self.method.to_string().as_bytes());
        h.u64(self.n_surrogates as u64);
        h.u64(self.alpha.to_bits());
        h.bytes(self.correction.name().as_bytes());
        h.u64(self.seed);
        for &(a, b) in self.trials.as_ref().map_or(&[][..], Trials::as_slice) {
            h.u64(a.to_bits());
            h.u64(b.to_bits());
        }
        h.u64(self.min_count);
        if self.significant_only {
            h.bytes(b"significant-only");
        }
        for (e, c) in &self.tested {
            h.episode(e);
            h.u64(*c);
        }
        h.finish()
    }

    /// The plan in its JSON form (module documentation); `config` is the mining configuration
    /// its episodes' intervals are indices into.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when a tested episode has an interval that is not one of
    /// `config`'s (a watch list with other intervals cannot be split).
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = PlanWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            method: self.method.to_string(),
            n_surrogates: self.n_surrogates,
            alpha: self.alpha,
            correction: self.correction,
            seed: self.seed,
            trials: self.trials.as_ref().map(|t| t.as_slice().to_vec()),
            test_top: self.test_top,
            watch: self.watch,
            significant_only: self.significant_only,
            min_count: self.min_count,
            tested: self
                .tested
                .iter()
                .map(|(e, c)| Ok((encode(e, &config.intervals)?, *c)))
                .collect::<Result<_, SignificanceError>>()?,
            counted: self.counted,
        };
        to_json(&wire, "plan")
    }

    /// A plan from its JSON form, for `stream` mined with `config` (the recording and
    /// configuration it was made for).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong: not a plan, another version, an
    /// episode outside the recording's units or the configuration's intervals, a setting out
    /// of range; [`SignificanceError::Surrogate`] for a bad method or trials.
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: PlanWire = from_json(text, "plan")?;
        check_version(w.version, "plan")?;
        let method: SurrogateMethod = w.method.parse()?;
        let trials = w.trials.map(Trials::new).transpose()?;
        check_settings(w.n_surrogates, w.alpha)?;
        let units = stream.alphabet().len();
        let tested = w
            .tested
            .iter()
            .map(|(code, c)| Ok((decode(code, units, &config.intervals)?, *c)))
            .collect::<Result<Vec<_>, SignificanceError>>()?;
        Ok(Self {
            fingerprint: w.fingerprint,
            method,
            n_surrogates: w.n_surrogates,
            alpha: w.alpha,
            correction: w.correction,
            seed: w.seed,
            trials,
            test_top: w.test_top,
            watch: w.watch,
            significant_only: w.significant_only,
            min_count: w.min_count,
            tested,
            counted: w.counted,
            part: 0,
        }
        .sealed())
    }
}

/// The first pass over a range of surrogates ([`Tester::first_pass`]; the module
/// documentation says what each procedure keeps).
#[derive(Clone, Debug, PartialEq)]
pub struct FirstPart {
    fingerprint: u64,
    range: Range<u64>,
    /// `max-t`: the distinct episodes the range's surrogates made frequent, in order of first
    /// appearance (surrogate order, then each one's mining order).
    episodes: Vec<Episode>,
    /// `max-t`: per surrogate of the range, its frequent episodes of two or more nodes as
    /// (index into `episodes`, count). Shape `[range.len()]`.
    selections: Vec<Vec<(u32, u64)>>,
    /// `spectrum`: per surrogate of the range, the largest count among its frequent episodes
    /// of each size (index: the size, 0 and 1 unused). Shape `[range.len()][max_level + 1]`.
    max_by_size: Vec<Vec<u64>>,
    /// `spectrum` and per-episode procedures: the tested episodes' sums over the range.
    sums: Sums,
    counted: u64,
}

impl FirstPart {
    /// The surrogates this part covers.
    #[must_use]
    pub fn range(&self) -> Range<u64> {
        self.range.clone()
    }

    /// The part in its JSON form (module documentation).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when an episode has an interval that is not one of
    /// `config`'s.
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = FirstWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            range: (self.range.start, self.range.end),
            episodes: self
                .episodes
                .iter()
                .map(|e| encode(e, &config.intervals))
                .collect::<Result<_, _>>()?,
            selections: self
                .selections
                .iter()
                .map(|sel| sel.iter().copied().unzip())
                .collect(),
            max_by_size: self.max_by_size.clone(),
            sums: self.sums.clone(),
            counted: self.counted,
        };
        to_json(&wire, "first-pass part")
    }

    /// A part from its JSON form, for `stream` mined with `config`.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong (as [`Plan::from_json`]), or a
    /// selection that names an episode the part does not hold.
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: FirstWire = from_json(text, "first-pass part")?;
        check_version(w.version, "first-pass part")?;
        let episodes = decode_all(&w.episodes, stream, config)?;
        let mut selections = Vec::with_capacity(w.selections.len());
        for (ids, counts) in w.selections {
            if ids.len() != counts.len() || ids.iter().any(|&i| i as usize >= episodes.len()) {
                return Err(bad_part(
                    "first-pass part",
                    "a selection names an episode the part does not hold",
                ));
            }
            selections.push(ids.into_iter().zip(counts).collect());
        }
        if !w.sums.consistent() {
            return Err(bad_part("first-pass part", "its sums differ in length"));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            range: w.range.0..w.range.1,
            episodes,
            selections,
            max_by_size: w.max_by_size,
            sums: w.sums,
            counted: w.counted,
        })
    }
}

/// `max-t` between the passes: `U`, the union of every dataset's frequent episodes (the
/// recording's tested episodes first, then the surrogates' in surrogate order), and their
/// counts in the recording ([`Tester::union`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Union {
    fingerprint: u64,
    episodes: Vec<Episode>,
    /// `c(e, X₀)` for every `e` of `U`. Shape `[U]`.
    recording: Vec<u64>,
    counted: u64,
}

impl Union {
    /// The number of episodes in `U`.
    #[must_use]
    pub fn len(&self) -> usize {
        self.episodes.len()
    }

    /// True when no dataset had a frequent episode of two or more nodes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.episodes.is_empty()
    }

    /// The union in its JSON form (module documentation).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] when an episode has an interval that is not one of
    /// `config`'s.
    pub fn to_json(&self, config: &MinerConfig) -> Result<String, SignificanceError> {
        let wire = UnionWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            episodes: self
                .episodes
                .iter()
                .map(|e| encode(e, &config.intervals))
                .collect::<Result<_, _>>()?,
            recording: self.recording.clone(),
            counted: self.counted,
        };
        to_json(&wire, "union")
    }

    /// A union from its JSON form, for `stream` mined with `config`.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong (as [`Plan::from_json`]).
    pub fn from_json(
        text: &str,
        stream: &EventStream,
        config: &MinerConfig,
    ) -> Result<Self, SignificanceError> {
        let w: UnionWire = from_json(text, "union")?;
        check_version(w.version, "union")?;
        let episodes = decode_all(&w.episodes, stream, config)?;
        if w.recording.len() != episodes.len() {
            return Err(bad_part(
                "union",
                "it holds a different number of counts than episodes",
            ));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            episodes,
            recording: w.recording,
            counted: w.counted,
        })
    }
}

/// `max-t`'s second pass over a range of surrogates: every episode of `U` counted in each,
/// summed ([`Tester::second_pass`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecondPart {
    fingerprint: u64,
    range: Range<u64>,
    /// Per episode of `U`.
    sums: Sums,
    counted: u64,
}

impl SecondPart {
    /// The surrogates this part covers.
    #[must_use]
    pub fn range(&self) -> Range<u64> {
        self.range.clone()
    }

    /// The part in its JSON form (module documentation).
    ///
    /// # Errors
    /// Never in practice (integers only); [`SignificanceError::Config`] if serialisation
    /// fails.
    pub fn to_json(&self) -> Result<String, SignificanceError> {
        let wire = SecondWire {
            version: WIRE_VERSION,
            fingerprint: self.fingerprint,
            range: (self.range.start, self.range.end),
            sums: self.sums.clone(),
            counted: self.counted,
        };
        to_json(&wire, "second-pass part")
    }

    /// A part from its JSON form.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] naming what is wrong.
    pub fn from_json(text: &str) -> Result<Self, SignificanceError> {
        let w: SecondWire = from_json(text, "second-pass part")?;
        check_version(w.version, "second-pass part")?;
        if !w.sums.consistent() {
            return Err(bad_part("second-pass part", "its sums differ in length"));
        }
        Ok(Self {
            fingerprint: w.fingerprint,
            range: w.range.0..w.range.1,
            sums: w.sums,
            counted: w.counted,
        })
    }
}

/// The recording, its mining configuration and the counters the phases run on (module
/// documentation). Run one phase at a time per tester for exact work counts
/// (`candidates_counted`); the results do not depend on it.
pub struct Tester<'a> {
    stream: &'a EventStream,
    config: &'a MinerConfig,
    engine: Engine<'a>,
    fingerprint: u64,
    /// The surrogates of the last plan, kept while plans with the same settings follow.
    surrogates: Mutex<Option<SurrogateCache>>,
}

type SurrogateCache = ((String, u64, Option<Vec<(f64, f64)>>), Arc<Surrogates>);

impl<'a> Tester<'a> {
    /// A tester of `stream` (mined with `config`) counting on `device` (`auto`: the GPUs when
    /// there are any, GPU counters, one per host core, working on different surrogates at once).
    ///
    /// # Errors
    /// [`SignificanceError::Device`] for `gpu` without a usable GPU.
    pub fn new(
        stream: &'a EventStream,
        config: &'a MinerConfig,
        device: DeviceChoice,
        settings: &GpuSettings,
    ) -> Result<Self, SignificanceError> {
        let engine = Engine::new(stream, config, device, settings)?;
        Ok(Self::of(stream, config, engine))
    }

    /// A tester on GPU counters the caller holds (reloaded with each surrogate: reload them
    /// with the caller's stream before counting there again); none: the CPU.
    #[must_use]
    pub fn with_gpus(
        stream: &'a EventStream,
        config: &'a MinerConfig,
        gpus: &'a mut [GpuCounter],
    ) -> Self {
        Self::of(stream, config, Engine::lent(gpus.iter_mut()))
    }

    /// The tester stopping at its next surrogate (or, while mining one, its next batch of
    /// candidates) with [`SignificanceError::Cancelled`] once `flag` is set: Ctrl-C in a
    /// Python call, say. A phase that returns normally is unaffected.
    #[must_use]
    pub fn cancel_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.engine.cancel_on(flag);
        self
    }

    fn of(stream: &'a EventStream, config: &'a MinerConfig, engine: Engine<'a>) -> Self {
        Self {
            stream,
            config,
            engine,
            fingerprint: fingerprint(stream, config),
            surrogates: Mutex::new(None),
        }
    }

    /// The whole test in one process: [`Tester::plan`], every pass over `0..S` and [`finish`];
    /// with [`SignificanceConfig::sample_split`], [`super::sample_split`]'s test instead.
    ///
    /// # Errors
    /// As [`test_episodes`].
    pub fn run(
        &self,
        data: &MiningResult,
        sig: &SignificanceConfig,
    ) -> Result<SignificanceResult, SignificanceError> {
        if let Some(fraction) = sig.sample_split {
            check_settings(sig.n_surrogates, sig.alpha)?;
            return super::sample_split::run(
                &self.engine,
                self.stream,
                self.config,
                data,
                sig,
                fraction,
            );
        }
        let started = std::time::Instant::now();
        let plan = self.plan(data, sig)?;
        let plan_s = started.elapsed().as_secs_f64();
        let all = 0..plan.n_surrogates as u64;
        let first = self.first_pass(&plan, all)?;
        let first_s = started.elapsed().as_secs_f64() - plan_s;
        let result = if plan.passes() == 2 {
            let union = self.union(&plan, std::slice::from_ref(&first))?;
            let second = self.second_pass(&plan, &union, &first)?;
            finish(
                &plan,
                std::slice::from_ref(&first),
                Some((&union, std::slice::from_ref(&second))),
            )
        } else {
            finish(&plan, std::slice::from_ref(&first), None)
        };
        tracing::debug!(
            plan_s,
            first_s,
            rest_s = started.elapsed().as_secs_f64() - plan_s - first_s,
            "Significance phases: the plan, the first pass, and the union, second pass and \
             finish."
        );
        result
    }

    /// The plan of testing `data` (the result of mining this tester's recording with its
    /// configuration) as `sig` says: a watch list is counted in the recording here; otherwise
    /// the tested episodes are the frequent ones of two or more nodes (per-episode procedures
    /// with `test_top`: the `N` with the largest counts).
    ///
    /// # Errors
    /// [`SignificanceError::Config`] for `n_surrogates = 0` or α outside (0, 1); a surrogate
    /// method that cannot take the recording (`trial-shift` without trials); counting errors.
    pub fn plan(
        &self,
        data: &MiningResult,
        sig: &SignificanceConfig,
    ) -> Result<Plan, SignificanceError> {
        check_settings(sig.n_surrogates, sig.alpha)?;
        if sig.sample_split.is_some() {
            return Err(SignificanceError::Config(
                "a sample-split test runs whole in one task (`Tester::run`); its surrogates cannot be split into batches: leave out `surrogate_batch` (`--surrogate-batch`)".into(),
            ));
        }
        let before = self.engine.candidates_counted();
        let per_episode = !matches!(sig.correction, Correction::MaxT | Correction::Spectrum);
        let tested: Vec<(Episode, u64)> = match (&sig.watch, per_episode) {
            (Some(watch), true) => {
                let counts = self.engine.count(self.stream, watch)?;
                watch.iter().cloned().zip(counts).collect()
            }
            _ => {
                let mut all = tested_frequent(data);
                if let (Some(n), true) = (sig.test_top, per_episode) {
                    // Report order within a level is by count; across levels, take the
                    // largest counts.
                    all.sort_by_key(|e| std::cmp::Reverse(e.1));
                    all.truncate(n);
                }
                all
            }
        };
        let plan = Plan {
            fingerprint: self.fingerprint,
            method: sig.method.clone(),
            n_surrogates: sig.n_surrogates,
            alpha: sig.alpha,
            correction: sig.correction,
            seed: sig.seed,
            trials: sig.trials.clone(),
            test_top: sig.test_top,
            watch: sig.watch.is_some() && per_episode,
            significant_only: sig.significant_only,
            min_count: data.min_count,
            tested,
            counted: self.engine.candidates_counted() - before,
            part: 0,
        }
        .sealed();
        // The surrogates are prepared now, so that a method that cannot take the recording
        // fails here rather than in every pass.
        self.surrogates(&plan)?;
        Ok(plan)
    }

    /// Checks that `plan` was made for this tester's recording and configuration.
    fn check(&self, plan: &Plan) -> Result<(), SignificanceError> {
        if plan.fingerprint == self.fingerprint {
            Ok(())
        } else {
            Err(SignificanceError::Config(
                "the plan was made for another recording or another mining configuration".into(),
            ))
        }
    }

    /// Checks that `range` lies within `0..S` of `plan`.
    fn check_range(plan: &Plan, range: &Range<u64>) -> Result<(), SignificanceError> {
        if range.start <= range.end && range.end <= plan.n_surrogates as u64 {
            Ok(())
        } else {
            Err(SignificanceError::Config(format!(
                "surrogates {}..{} are outside the plan's 0..{}",
                range.start, range.end, plan.n_surrogates
            )))
        }
    }

    /// The surrogates `plan` describes (kept for the next plan with the same settings).
    fn surrogates(&self, plan: &Plan) -> Result<Arc<Surrogates>, SignificanceError> {
        let want = plan.surrogate_key();
        let mut cache = self.surrogates.lock();
        if let Some((have, s)) = cache.as_ref()
            && *have == want
        {
            return Ok(Arc::clone(s));
        }
        let s = Arc::new(Surrogates::new(
            self.stream,
            plan.method.clone(),
            plan.seed,
            plan.trials.clone(),
        )?);
        *cache = Some((want, Arc::clone(&s)));
        Ok(s)
    }

    /// The configuration surrogates are mined with: the recording's, at its minimum count,
    /// without limits (a surrogate is mined to the same depth as the recording).
    fn fixed(&self, plan: &Plan) -> MinerConfig {
        let mut fixed = self.config.clone();
        fixed.threshold = Threshold::MinCount(plan.min_count);
        fixed.max_candidates = None;
        fixed.time_budget_s = None;
        fixed
    }

    /// The first pass over the surrogates of `range` (module documentation).
    ///
    /// # Errors
    /// A plan made for another recording or configuration, a range outside `0..S`; surrogate,
    /// mining and counting errors.
    pub fn first_pass(
        &self,
        plan: &Plan,
        range: Range<u64>,
    ) -> Result<FirstPart, SignificanceError> {
        self.check(plan)?;
        Self::check_range(plan, &range)?;
        let surrogates = self.surrogates(plan)?;
        let before = self.engine.candidates_counted();
        // The GPU counters' totals, only when they will be logged (each read locks every
        // counter in turn).
        let log_gpu = tracing::enabled!(tracing::Level::DEBUG);
        let gpu_before = log_gpu.then(|| self.engine.gpu_stats()).flatten();
        let pass_started = std::time::Instant::now();
        let mut part = FirstPart {
            fingerprint: plan.part_fingerprint(),
            range: range.clone(),
            episodes: Vec::new(),
            selections: Vec::new(),
            max_by_size: Vec::new(),
            sums: Sums::default(),
            counted: 0,
        };
        let engine = &self.engine;
        match plan.correction {
            Correction::MaxT => {
                let fixed = self.fixed(plan);
                let mined = engine
                    .map_surrogates(range, |s| engine.mine(&surrogates.generate(s)?, &fixed))?;
                let mut ids: HashMap<Key, u32> = HashMap::new();
                for list in mined {
                    let sel = list
                        .into_iter()
                        .map(|(e, c)| {
                            let id = *ids.entry(key(&e)).or_insert_with(|| {
                                part.episodes.push(e);
                                (part.episodes.len() - 1) as u32
                            });
                            (id, c)
                        })
                        .collect();
                    part.selections.push(sel);
                }
            }
            Correction::Spectrum => {
                let fixed = self.fixed(plan);
                let levels = fixed.max_level + 1;
                // With two passes the sums are the second pass's, of the significant episodes.
                let tested = if plan.first_pass_sums() {
                    &plan.tested[..]
                } else {
                    &[]
                };
                let list: Vec<Episode> = tested.iter().map(|(e, _)| e.clone()).collect();
                let recording: Vec<u64> = tested.iter().map(|(_, c)| *c).collect();
                let started = std::time::Instant::now();
                let mut sums = Sums::zero(list.len());
                let mut seconds = [0.0f64; 2];
                if engine.floor_batches(&fixed) {
                    // On the GPUs: the maxima by the one-floor pass in batches, then the
                    // tested episodes' counts per surrogate (generated on the devices).
                    part.max_by_size =
                        engine.spectrum_maxima(&surrogates, range.clone(), &fixed)?;
                    seconds[0] = started.elapsed().as_secs_f64();
                    if !list.is_empty() {
                        let counted = std::time::Instant::now();
                        sums = engine.sums_of_counts(
                            self.stream,
                            &surrogates,
                            range.clone(),
                            &list,
                            &recording,
                        )?;
                        seconds[1] = counted.elapsed().as_secs_f64();
                    }
                } else {
                    let per = engine.map_surrogates(range.clone(), |s| {
                        engine.spectrum_and_count(&surrogates.generate(s)?, &fixed, &list)
                    })?;
                    for found in per {
                        debug_assert_eq!(found.max_by_size.len(), levels);
                        part.max_by_size.push(found.max_by_size);
                        sums = sums.add(&found.counts, &recording);
                        seconds[0] += found.search_s;
                        seconds[1] += found.count_s;
                    }
                }
                part.sums = sums;
                tracing::debug!(
                    surrogates = range.end - range.start,
                    wall_s = started.elapsed().as_secs_f64(),
                    search_s = seconds[0],
                    sums_s = seconds[1],
                    tested = list.len(),
                    "Spectrum first pass: seconds in the search for the largest counts and in \
                     the counts of the tested episodes (summed over surrogates, or wall seconds \
                     of each step on the GPUs' batched path)."
                );
            }
            _ => {
                let list: Vec<Episode> = plan.tested.iter().map(|(e, _)| e.clone()).collect();
                let recording: Vec<u64> = plan.tested.iter().map(|(_, c)| *c).collect();
                part.sums =
                    engine.sums_of_counts(self.stream, &surrogates, range, &list, &recording)?;
            }
        }
        part.counted = engine.candidates_counted() - before;
        if let (Some(a), Some(b)) = (gpu_before, log_gpu.then(|| engine.gpu_stats()).flatten()) {
            let d = b.since(&a);
            tracing::debug!(
                surrogates = part.range.end - part.range.start,
                wall_s = pass_started.elapsed().as_secs_f64(),
                gpu_candidates = d.gpu_candidates,
                ptpe = d.ptpe_candidates,
                mtpe = d.mtpe_candidates,
                ends = d.ends_candidates,
                overflow_recounts = d.overflow_recounts,
                cpu_fallback = d.cpu_fallback,
                kernel_s = d.kernel_ms / 1e3,
                "First pass on the GPU counters: candidates counted on the devices, list \
                 overflows recounted on the host, kernel seconds summed over the counters \
                 (CUDA events; counters share the device, so this can exceed the wall time)."
            );
        }
        Ok(part)
    }

    /// Between the passes of a two-pass plan ([`Plan::passes`]), from the first passes'
    /// `parts` (every range of `0..S` once). `max-t`: `U`, and every episode of `U` counted
    /// in the recording (exactly where it was not frequent there). `spectrum` keeping only
    /// significant episodes: the significant episodes (by their signatures' p-values over
    /// every surrogate) with their counts in the recording, nothing counted.
    ///
    /// # Errors
    /// A plan or part made for another recording, configuration or test; parts that do not
    /// cover `0..S` exactly once; a one-pass plan; counting errors.
    pub fn union(&self, plan: &Plan, parts: &[FirstPart]) -> Result<Union, SignificanceError> {
        self.check(plan)?;
        if plan.passes() != 2 {
            return Err(one_pass(plan));
        }
        let parts = ordered_first(plan, parts)?;
        if plan.correction == Correction::Spectrum {
            let (episodes, recording) = SpectrumTest::of(plan, &parts).significant(plan);
            return Ok(Union {
                fingerprint: plan.part_fingerprint(),
                episodes,
                recording,
                counted: 0,
            });
        }
        let (episodes, _) = union_of(plan, &parts)?;
        let mut recording = vec![0u64; episodes.len()];
        for (i, (_, c)) in plan.tested.iter().enumerate() {
            recording[i] = *c;
        }
        let before = self.engine.candidates_counted();
        let missing = &episodes[plan.tested.len()..];
        let found = self.engine.count(self.stream, missing)?;
        recording[plan.tested.len()..].copy_from_slice(&found);
        Ok(Union {
            fingerprint: plan.part_fingerprint(),
            episodes,
            recording,
            counted: self.engine.candidates_counted() - before,
        })
    }

    /// The second pass of a two-pass plan over the surrogates of `first`'s range: every
    /// episode of `union` counted in each (`max-t`: its count from `first` where it was
    /// frequent there), summed.
    ///
    /// # Errors
    /// A plan, union or part made for another recording, configuration or test; a one-pass
    /// plan; a part that names an episode not in the union; surrogate and counting errors.
    pub fn second_pass(
        &self,
        plan: &Plan,
        union: &Union,
        first: &FirstPart,
    ) -> Result<SecondPart, SignificanceError> {
        self.check(plan)?;
        let want = plan.part_fingerprint();
        if union.fingerprint != want || first.fingerprint != want {
            return Err(other_test("second pass"));
        }
        if plan.passes() != 2 {
            return Err(one_pass(plan));
        }
        Self::check_range(plan, &first.range)?;
        // `max-t` takes each surrogate's counts of its own frequent episodes from its mining.
        let mined = plan.correction == Correction::MaxT;
        let n = first.range.end - first.range.start;
        let held = if mined {
            first.selections.len()
        } else {
            first.max_by_size.len()
        };
        if held as u64 != n {
            return Err(bad_part(
                "first-pass part",
                "it holds a different number of surrogates than its range",
            ));
        }
        let ids: HashMap<Key, u32> = union
            .episodes
            .iter()
            .enumerate()
            .map(|(i, e)| (key(e), i as u32))
            .collect();
        let local: Vec<u32> = first
            .episodes
            .iter()
            .map(|e| {
                ids.get(&key(e))
                    .copied()
                    .ok_or_else(|| bad_part("first-pass part", "an episode is not in the union"))
            })
            .collect::<Result<_, _>>()?;
        let surrogates = self.surrogates(plan)?;
        let u = union.episodes.len();
        let before = self.engine.candidates_counted();
        let start = first.range.start;
        let engine = &self.engine;
        let counts_in = |s: u64| -> Result<Vec<u64>, SignificanceError> {
            let mut counts = vec![u64::MAX; u];
            if mined {
                for &(id, c) in &first.selections[(s - start) as usize] {
                    counts[local[id as usize] as usize] = c;
                }
            }
            let missing: Vec<usize> = (0..u).filter(|&i| counts[i] == u64::MAX).collect();
            if !missing.is_empty() {
                let list: Vec<Episode> =
                    missing.iter().map(|&i| union.episodes[i].clone()).collect();
                let found = engine.count_surrogate(self.stream, &surrogates, s, &list)?;
                for (&i, c) in missing.iter().zip(found) {
                    counts[i] = c;
                }
            }
            Ok(counts)
        };
        let sums = if mined {
            engine.fold_surrogates(
                first.range.clone(),
                Sums::zero(u),
                counts_in,
                |acc, counts| acc.add(&counts, &union.recording),
                |a, b| a.merge(&b),
            )?
        } else {
            // Every episode of the union in every surrogate: one list for all.
            engine.sums_of_counts(
                self.stream,
                &surrogates,
                first.range.clone(),
                &union.episodes,
                &union.recording,
            )?
        };
        Ok(SecondPart {
            fingerprint: want,
            range: first.range.clone(),
            sums,
            counted: engine.candidates_counted() - before,
        })
    }
}

/// The frequent episodes of two or more nodes of a mining result, in report order.
fn tested_frequent(data: &MiningResult) -> Vec<(Episode, u64)> {
    data.episodes
        .iter()
        .filter(|f| f.episode.len() >= 2)
        .map(|f| (f.episode.clone(), f.count))
        .collect()
}

/// `parts` of `plan` sorted by range, checked to cover `0..S` exactly once.
fn ordered_first<'p>(
    plan: &Plan,
    parts: &'p [FirstPart],
) -> Result<Vec<&'p FirstPart>, SignificanceError> {
    let want = plan.part_fingerprint();
    if parts.iter().any(|p| p.fingerprint != want) {
        return Err(other_test("first-pass part"));
    }
    let mut sorted: Vec<&FirstPart> = parts.iter().collect();
    sorted.sort_by_key(|p| (p.range.start, p.range.end));
    check_cover(
        plan,
        sorted.iter().map(|p| p.range.clone()),
        "first-pass parts",
    )?;
    for p in &sorted {
        let n = (p.range.end - p.range.start) as usize;
        let ok = match plan.correction {
            Correction::MaxT => p.selections.len() == n,
            Correction::Spectrum => {
                p.max_by_size.len() == n
                    && p.sums.len()
                        == if plan.first_pass_sums() {
                            plan.tested.len()
                        } else {
                            0
                        }
                    && p.max_by_size
                        .iter()
                        .all(|m| plan.tested.iter().all(|(e, _)| e.len() < m.len()))
            }
            _ => p.sums.len() == plan.tested.len(),
        };
        if !ok {
            return Err(bad_part(
                "first-pass part",
                "its contents do not match its range and the plan's tested episodes",
            ));
        }
    }
    Ok(sorted)
}

/// Checks that `ranges` (sorted by start) cover `0..S` of `plan` exactly once.
fn check_cover(
    plan: &Plan,
    ranges: impl Iterator<Item = Range<u64>>,
    what: &str,
) -> Result<(), SignificanceError> {
    let mut next = 0u64;
    for r in ranges {
        if r.start != next || r.end < r.start {
            return Err(SignificanceError::Config(format!(
                "the {what} do not cover the surrogates 0..{} exactly once: {} follows {next}",
                plan.n_surrogates, r.start
            )));
        }
        next = r.end;
    }
    if next != plan.n_surrogates as u64 {
        return Err(SignificanceError::Config(format!(
            "the {what} end at surrogate {next}, the plan has {}",
            plan.n_surrogates
        )));
    }
    Ok(())
}

/// `U` in canonical order (the recording's tested episodes, then each surrogate's frequent
/// episodes in surrogate order) and each part's episodes' ids in it.
///
/// # Errors
/// [`SignificanceError::Config`] when the plan names an episode twice (the recording's
/// frequent episodes are distinct).
fn union_of(
    plan: &Plan,
    parts: &[&FirstPart],
) -> Result<(Vec<Episode>, Vec<Vec<u32>>), SignificanceError> {
    let mut ids: HashMap<Key, u32> = HashMap::new();
    let mut union: Vec<Episode> = Vec::new();
    let mut insert = |e: &Episode| -> u32 {
        *ids.entry(key(e)).or_insert_with(|| {
            union.push(e.clone());
            (union.len() - 1) as u32
        })
    };
    for (i, (e, _)) in plan.tested.iter().enumerate() {
        if insert(e) as usize != i {
            return Err(bad_part("plan", "it names a tested episode twice"));
        }
    }
    let mut local_ids = Vec::with_capacity(parts.len());
    for p in parts {
        // Episodes enter in the order the part's surrogates first name them, which is their
        // order in `p.episodes` (first appearance within the part).
        let mut local = vec![u32::MAX; p.episodes.len()];
        for sel in &p.selections {
            for &(id, _) in sel {
                let slot = &mut local[id as usize];
                if *slot == u32::MAX {
                    *slot = insert(&p.episodes[id as usize]);
                }
            }
        }
        // Episodes no selection names (none from a tester) still get ids.
        for (slot, e) in local.iter_mut().zip(&p.episodes) {
            if *slot == u32::MAX {
                *slot = insert(e);
            }
        }
        local_ids.push(local);
    }
    Ok((union, local_ids))
}

/// Combines the parts of every pass into the result (module documentation): `first`, the
/// first pass's parts (every range of `0..S` once, in any order); for a two-pass plan
/// ([`Plan::passes`]) also the union and the second pass's parts (every range once).
///
/// # Errors
/// [`SignificanceError::Config`]: parts made for another plan, ranges that do not cover
/// `0..S` exactly once, a union and second pass missing for a two-pass plan (or given for a
/// one-pass plan), parts whose sizes do not match the plan.
pub fn finish(
    plan: &Plan,
    first: &[FirstPart],
    second: Option<(&Union, &[SecondPart])>,
) -> Result<SignificanceResult, SignificanceError> {
    let first = ordered_first(plan, first)?;
    let mut result = SignificanceResult {
        method: plan.method.to_string(),
        n_surrogates: plan.n_surrogates,
        alpha: plan.alpha,
        correction: plan.correction,
        seed: plan.seed,
        tested: plan.tested.len(),
        tests: Vec::new(),
        surrogate_max: Vec::new(),
        warnings: Vec::new(),
        candidates_counted: plan.counted + first.iter().map(|p| p.counted).sum::<u64>(),
        sample_split: None,
    };
    match (plan.correction, second) {
        (_, None) if plan.passes() == 2 => {
            return Err(SignificanceError::Config(format!(
                "this {} test has two passes: it needs the union and the second pass's parts",
                plan.correction
            )));
        }
        (_, Some(_)) if plan.passes() == 1 => return Err(one_pass(plan)),
        (Correction::MaxT, Some((union, parts))) => {
            finish_max_t(plan, &first, union, parts, &mut result)?;
        }
        (Correction::Spectrum, second) => finish_spectrum(plan, &first, second, &mut result)?,
        (c, _) => finish_per_episode(plan, &first, c, &mut result),
    }
    if plan.significant_only {
        result.tests.retain(|t| t.stats.significant);
    }
    Ok(result)
}

/// The error for a union or second pass asked of a one-pass plan.
fn one_pass(plan: &Plan) -> SignificanceError {
    SignificanceError::Config(format!(
        "this {} test has one pass: there is no union or second pass",
        plan.correction
    ))
}

/// The second pass's `parts` of `plan` for `union`, checked (made for this plan, every range
/// of `0..S` once, one sum per episode of the union), combined: the sums and the counts made.
fn second_sums(
    plan: &Plan,
    union: &Union,
    parts: &[SecondPart],
) -> Result<(Sums, u64), SignificanceError> {
    let want = plan.part_fingerprint();
    if union.fingerprint != want {
        return Err(other_test("union"));
    }
    if parts.iter().any(|p| p.fingerprint != want) {
        return Err(other_test("second-pass part"));
    }
    let mut sorted: Vec<&SecondPart> = parts.iter().collect();
    sorted.sort_by_key(|p| (p.range.start, p.range.end));
    check_cover(
        plan,
        sorted.iter().map(|p| p.range.clone()),
        "second-pass parts",
    )?;
    let u = union.episodes.len();
    if sorted.iter().any(|p| p.sums.len() != u) {
        return Err(bad_part(
            "second-pass part",
            "its sums do not match the union's size",
        ));
    }
    let sums = sorted
        .iter()
        .fold(Sums::zero(u), |acc, p| acc.merge(&p.sums));
    let counted = union.counted + sorted.iter().map(|p| p.counted).sum::<u64>();
    Ok((sums, counted))
}

fn finish_max_t(
    plan: &Plan,
    first: &[&FirstPart],
    union: &Union,
    second: &[SecondPart],
    result: &mut SignificanceResult,
) -> Result<(), SignificanceError> {
    let (sums, counted) = second_sums(plan, union, second)?;
    let (episodes, local_ids) = union_of(plan, first)?;
    if episodes != union.episodes {
        return Err(bad_part(
            "union",
            "it is not the union of the first-pass parts",
        ));
    }
    let u = union.episodes.len();
    result.candidates_counted += counted;
    // Every dataset's selection in U's ids: the recording's tested episodes are 0.., then
    // each surrogate's, in surrogate order.
    let data_sel: Vec<(u32, u64)> = plan
        .tested
        .iter()
        .enumerate()
        .map(|(i, (_, c))| (i as u32, *c))
        .collect();
    let sur_sel: Vec<Vec<(u32, u64)>> = first
        .iter()
        .zip(&local_ids)
        .flat_map(|(p, local)| {
            p.selections
                .iter()
                .map(move |sel| sel.iter().map(|&(id, c)| (local[id as usize], c)).collect())
        })
        .collect();
    let s_count = plan.n_surrogates;
    // Sums over all S + 1 datasets; each dataset is standardised against the other S.
    let n_all = (s_count + 1) as f64;
    let total: Vec<(f64, f64)> = (0..u)
        .map(|i| {
            let c = union.recording[i] as f64;
            (sums.sum[i] as f64 + c, sums.sumsq[i] as f64 + c * c)
        })
        .collect();
    let s_f = s_count as f64;
    let stat = |i: u32, c: u64| {
        let (sum, sumsq) = total[i as usize];
        leave_one_out(sum, sumsq, c, s_f)
    };
    let maximum = |sel: &Vec<(u32, u64)>| {
        sel.iter()
            .map(|&(i, c)| stat(i, c))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let mut sorted_max: Vec<f64> = sur_sel.iter().map(maximum).collect();
    result.surrogate_max.clone_from(&sorted_max);
    sorted_max.sort_by(f64::total_cmp);
    for ((episode, count), &(id, _)) in plan.tested.iter().zip(&data_sel) {
        let i = id as usize;
        let p_adjusted = max_t_adjusted(&sorted_max, stat(id, *count));
        result.tests.push(EpisodeTest::new(
            episode.clone(),
            *count,
            (sums.sum[i] as f64, sums.sumsq[i] as f64, s_f),
            ((1 + sums.exceed[i]) as f64 / n_all, p_adjusted),
            plan.alpha,
        ));
    }
    result
        .warnings
        .extend(too_few_for_alpha(s_count, plan.alpha));
    Ok(())
}

/// `spectrum`'s signature test (module documentation of [`super::testing`]): the
/// signatures (size, count) present in the recording, sorted, with their p-values against
/// every surrogate's largest counts and their Benjamini–Hochberg adjusted p-values.
struct SpectrumTest {
    signatures: Vec<(usize, u64)>,
    p: Vec<f64>,
    adjusted: Vec<f64>,
}

impl SpectrumTest {
    /// The test from the first passes' parts of `plan` (every range once).
    fn of(plan: &Plan, first: &[&FirstPart]) -> Self {
        let n_all = (plan.n_surrogates + 1) as f64;
        let max_by_size: Vec<&Vec<u64>> = first.iter().flat_map(|p| &p.max_by_size).collect();
        let mut signatures: Vec<(usize, u64)> =
            plan.tested.iter().map(|(e, c)| (e.len(), *c)).collect();
        signatures.sort_unstable();
        signatures.dedup();
        let p: Vec<f64> = signatures
            .iter()
            .map(|&(k, c)| (1 + max_by_size.iter().filter(|m| m[k] >= c).count()) as f64 / n_all)
            .collect();
        let adjusted = benjamini_hochberg(&p);
        Self {
            signatures,
            p,
            adjusted,
        }
    }

    /// The raw and adjusted p-values of the signature of `episode` with `count` (one of the
    /// plan's tested episodes).
    fn p_values(&self, episode: &Episode, count: u64) -> (f64, f64) {
        let i = self
            .signatures
            .binary_search(&(episode.len(), count))
            .unwrap_or_default();
        (self.p[i], self.adjusted[i])
    }

    /// The plan's tested episodes whose signature is significant, in the plan's order, and
    /// their counts in the recording.
    fn significant(&self, plan: &Plan) -> (Vec<Episode>, Vec<u64>) {
        plan.tested
            .iter()
            .filter(|(e, c)| self.p_values(e, *c).1 <= plan.alpha)
            .map(|(e, c)| (e.clone(), *c))
            .unzip()
    }
}

/// `spectrum`'s tests: with one pass every tested episode, its sums from the first pass;
/// with two (`significant_only`) the significant episodes, their sums from the second pass.
fn finish_spectrum(
    plan: &Plan,
    first: &[&FirstPart],
    second: Option<(&Union, &[SecondPart])>,
    result: &mut SignificanceResult,
) -> Result<(), SignificanceError> {
    let s_count = plan.n_surrogates as f64;
    let test = SpectrumTest::of(plan, first);
    let (tested, sums): (Vec<(Episode, u64)>, Sums) = match second {
        Some((union, parts)) => {
            let (sums, counted) = second_sums(plan, union, parts)?;
            let (episodes, recording) = test.significant(plan);
            if episodes != union.episodes || recording != union.recording {
                return Err(bad_part(
                    "union",
                    "it is not the significant episodes of the first-pass parts",
                ));
            }
            result.candidates_counted += counted;
            (episodes.into_iter().zip(recording).collect(), sums)
        }
        None => (
            plan.tested.clone(),
            first
                .iter()
                .fold(Sums::zero(plan.tested.len()), |acc, p| acc.merge(&p.sums)),
        ),
    };
    for (j, (episode, count)) in tested.into_iter().enumerate() {
        let p = test.p_values(&episode, count);
        result.tests.push(EpisodeTest::new(
            episode,
            count,
            (sums.sum[j] as f64, sums.sumsq[j] as f64, s_count),
            p,
            plan.alpha,
        ));
    }
    Ok(())
}

fn finish_per_episode(
    plan: &Plan,
    first: &[&FirstPart],
    correction: Correction,
    result: &mut SignificanceResult,
) {
    let m = plan.tested.len();
    let s_count = plan.n_surrogates;
    let sums = first
        .iter()
        .fold(Sums::zero(m), |acc, p| acc.merge(&p.sums));
    let n_all = (s_count + 1) as f64;
    let p: Vec<f64> = sums
        .exceed
        .iter()
        .map(|&k| (1 + k) as f64 / n_all)
        .collect();
    let adjusted = match correction {
        Correction::FdrBh => benjamini_hochberg(&p),
        Correction::Holm => holm(&p),
        Correction::Bonferroni => p.iter().map(|&x| (x * m as f64).min(1.0)).collect(),
        _ => p.clone(),
    };
    for (i, (episode, count)) in plan.tested.iter().enumerate() {
        result.tests.push(EpisodeTest::new(
            episode.clone(),
            *count,
            (sums.sum[i] as f64, sums.sumsq[i] as f64, s_count as f64),
            (p[i], adjusted[i]),
            plan.alpha,
        ));
    }
    let smallest = 1.0 / n_all;
    if m > 0 && correction != Correction::None && smallest > plan.alpha / m as f64 {
        let needed = (m as f64 / plan.alpha).ceil() as u64;
        result.warnings.push(match correction {
            Correction::FdrBh => format!(
                "{s_count} surrogates for {m} tests: the smallest p-value 1/(S+1) = {smallest:.4} is above α/m, so an episode can be significant only together with at least {} others; {needed} surrogates or more avoid this",
                ((smallest * m as f64 / plan.alpha).ceil() as u64).saturating_sub(1)
            ),
            _ => format!(
                "{s_count} surrogates cannot reach α = {} for {m} tests with {correction}: the smallest p-value 1/(S+1) = {smallest:.4} is above α/m; use at least {} surrogates, fewer tests (--test-top), or --correction max-t",
                plan.alpha,
                needed.saturating_sub(1)
            ),
        });
    }
    if !plan.watch && correction != Correction::None {
        result.warnings.push(
            "the tested episodes were chosen by their counts in this recording; per-episode corrections do not account for that selection (max-t does)".into(),
        );
    }
}

/// GPU counters a long-lived worker keeps between sessions (a `synfire.cluster` actor): their
/// device threads, CUDA contexts, compiled kernels and calibration stay; each session only
/// reloads its stream ([`GpuCounter::reload`]). Counters are made for one interval table and
/// one set of [`GpuSettings`]; a session with others makes new ones.
#[derive(Default)]
pub struct WarmCounters {
    /// What the counters were made for (intervals and settings), and the counters (empty: the
    /// CPU counts).
    kept: Option<(String, Vec<GpuCounter>)>,
}

impl std::fmt::Debug for WarmCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmCounters")
            .field("counters", &self.kept.as_ref().map_or(0, |(_, c)| c.len()))
            .finish()
    }
}

impl WarmCounters {
    /// No counters yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The GPU counters kept (0: none yet, or the CPU counts).
    #[must_use]
    pub fn gpu_counters(&self) -> usize {
        self.kept.as_ref().map_or(0, |(_, c)| c.len())
    }

    /// Counters holding `stream` for mining with `config` and testing it: the kept ones
    /// (reloaded with `stream`) when they were made for `config`'s intervals and `settings`
    /// with the same `choice`, else new ones as [`test_episodes_on`] makes them (up to four
    /// counters, each on every GPU `settings` names). Empty where the CPU counts (`cpu`, or
    /// `auto` without a usable GPU). Mine with the first (or a [`crate::episode::CpuCounter`]
    /// when empty) and test with [`Tester::with_gpus`] on all of them.
    ///
    /// # Errors
    /// [`DeviceError`] for `gpu` without a usable GPU, or a failed upload (the counters are
    /// then dropped).
    pub fn load(
        &mut self,
        stream: &EventStream,
        config: &MinerConfig,
        choice: DeviceChoice,
        settings: &GpuSettings,
    ) -> Result<&mut [GpuCounter], DeviceError> {
        let want = format!("{choice:?} {:?} {settings:?}", config.intervals);
        let reuse = matches!(&self.kept, Some((have, _)) if *have == want);
        if reuse {
            let (_, counters) = self.kept.as_mut().expect("kept counters");
            for c in counters.iter_mut() {
                if let Err(e) = c.reload(stream) {
                    self.kept = None;
                    return Err(e);
                }
            }
        } else {
            self.kept = None;
            let mut counters = Vec::new();
            if let Some(first) = select_gpu(stream, &config.intervals, choice, settings)? {
                counters.push(first);
                counters.extend(more_counters(stream, config, settings));
            }
            self.kept = Some((want, counters));
        }
        Ok(self
            .kept
            .as_mut()
            .map_or(&mut [][..], |(_, c)| c.as_mut_slice()))
    }
}

// ---- The JSON form ----

#[derive(Serialize, Deserialize)]
struct PlanWire {
    version: u32,
    fingerprint: u64,
    method: String,
    n_surrogates: usize,
    alpha: f64,
    correction: Correction,
    seed: u64,
    trials: Option<Vec<(f64, f64)>>,
    test_top: Option<usize>,
    watch: bool,
    #[serde(default)]
    significant_only: bool,
    min_count: u64,
    tested: Vec<(EpisodeCode, u64)>,
    counted: u64,
}

#[derive(Serialize, Deserialize)]
struct FirstWire {
    version: u32,
    fingerprint: u64,
    range: (u64, u64),
    episodes: Vec<EpisodeCode>,
    /// Per surrogate: (ids, counts).
    selections: Vec<(Vec<u32>, Vec<u64>)>,
    max_by_size: Vec<Vec<u64>>,
    sums: Sums,
    counted: u64,
}

#[derive(Serialize, Deserialize)]
struct UnionWire {
    version: u32,
    fingerprint: u64,
    episodes: Vec<EpisodeCode>,
    recording: Vec<u64>,
    counted: u64,
}

#[derive(Serialize, Deserialize)]
struct SecondWire {
    version: u32,
    fingerprint: u64,
    range: (u64, u64),
    sums: Sums,
    counted: u64,
}

/// An episode as (unit indices into the alphabet, gap indices into the configuration's
/// intervals).
#[derive(Serialize, Deserialize)]
struct EpisodeCode(Vec<u32>, Vec<u32>);

fn encode(e: &Episode, intervals: &[Interval]) -> Result<EpisodeCode, SignificanceError> {
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
fn decode_all(
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

fn decode(
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

fn to_json<T: Serialize>(value: &T, what: &str) -> Result<String, SignificanceError> {
    serde_json::to_string(value)
        .map_err(|e| SignificanceError::Config(format!("writing the {what}: {e}")))
}

fn from_json<T: for<'de> Deserialize<'de>>(text: &str, what: &str) -> Result<T, SignificanceError> {
    serde_json::from_str(text)
        .map_err(|e| SignificanceError::Config(format!("not a {what} of a split test: {e}")))
}

fn check_version(version: u32, what: &str) -> Result<(), SignificanceError> {
    if version == WIRE_VERSION {
        Ok(())
    } else {
        Err(SignificanceError::Config(format!(
            "the {what} is of version {version} of the JSON form; this build reads version {WIRE_VERSION}"
        )))
    }
}

fn check_settings(n_surrogates: usize, alpha: f64) -> Result<(), SignificanceError> {
    if n_surrogates == 0 {
        return Err(SignificanceError::Config(
            "`--n-surrogates` must be at least 1".into(),
        ));
    }
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(SignificanceError::Config(format!(
            "`--alpha` must be in (0, 1), got {alpha}"
        )));
    }
    Ok(())
}

fn bad_part(what: &str, why: &str) -> SignificanceError {
    SignificanceError::Config(format!("the {what} is malformed: {why}"))
}

fn other_test(what: &str) -> SignificanceError {
    SignificanceError::Config(format!(
        "a {what} was made for another recording, mining configuration or test"
    ))
}

/// FNV-1a, 64 bits: a fingerprint that is the same on every machine and build.
struct Fnv {
    state: u64,
    /// Each interval's text as hashed, by interval (a few per configuration): formatting
    /// one is far slower than hashing it.
    names: Vec<(Interval, String)>,
}

impl Fnv {
    fn new() -> Self {
        Self {
            state: 0xcbf2_9ce4_8422_2325,
            names: Vec::new(),
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state ^= u64::from(b);
            self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so that concatenations differ.
        self.state ^= 0xff;
        self.state = self.state.wrapping_mul(0x0000_0100_0000_01b3);
    }

    fn u64(&mut self, x: u64) {
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

    fn episode(&mut self, e: &Episode) {
        for t in e.types() {
            self.u64(u64::from(t.0));
        }
        for iv in e.intervals() {
            self.interval(iv);
        }
    }

    fn finish(&self) -> u64 {
        self.state
    }
}

/// The fingerprint of a recording and its mining configuration: every event, the units'
/// labels, the intervals, the threshold and the largest size.
fn fingerprint(stream: &EventStream, config: &MinerConfig) -> u64 {
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
