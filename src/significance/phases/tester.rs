//! [`Tester`]: the recording, its mining configuration and the counters, and the phases run
//! on them (the plan, the first pass over a range of surrogates, the union between the passes,
//! the second pass), and the whole test in one process ([`Tester::run`]).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use parking_lot::Mutex;

use super::finish::{SpectrumTest, finish, ordered_first, union_of};
use super::plan::{
    FirstPart, Plan, SecondPart, Union, bad_part, check_settings, one_pass, other_test,
};
use super::wire::fingerprint;
use crate::device::DeviceChoice;
use crate::episode::{Episode, GpuCounter, GpuSettings, MinerConfig, MiningResult, Threshold};
use crate::event::EventStream;
use crate::significance::engine::Engine;
use crate::significance::error::SignificanceError;
use crate::significance::surrogate::Surrogates;
use crate::significance::testing::{
    Correction, Key, SignificanceConfig, SignificanceResult, Sums, key,
};
use crate::significance::{guided, sample_split};

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
    /// with [`SignificanceConfig::sample_split`], [`sample_split`]'s test instead, and for
    /// [`Correction::Guided`] [`guided`]'s (which tests episodes mining did not list: add
    /// them with [`SignificanceResult::list_in`]).
    ///
    /// # Errors
    /// As [`test_episodes`].
    ///
    /// [`test_episodes`]: super::test_episodes
    pub fn run(
        &self,
        data: &MiningResult,
        sig: &SignificanceConfig,
    ) -> Result<SignificanceResult, SignificanceError> {
        if sig.correction == Correction::Guided {
            check_settings(sig.n_surrogates, sig.alpha)?;
            return guided::run(&self.engine, self.stream, self.config, data, sig);
        }
        if let Some(fraction) = sig.sample_split {
            check_settings(sig.n_surrogates, sig.alpha)?;
            return sample_split::run(&self.engine, self.stream, self.config, data, sig, fraction);
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
        if sig.sample_split.is_some() || sig.correction == Correction::Guided {
            return Err(SignificanceError::Config(
                "a sample-split or guided test runs whole in one task (`Tester::run`); its surrogates cannot be split into batches: leave out `surrogate_batch` (`--surrogate-batch`)".into(),
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
        // A surrogate mined to a shallower depth than the recording would make its maxima
        // wrong: the recording's run finished within the budget at this depth.
        fixed.memory_budget = None;
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
