//! Which mined episodes are more than chance: the recording's counts against `S` surrogates
//! ([`super::surrogate`]), with a choice of multiple-testing procedure ([`Correction`]).
//!
//! Notation: `X₀` is the recording, `X₁ … X_S` its surrogates; `c(e, X)` the non-overlapped
//! count of episode `e` in `X`; `F(X)` the episodes of two or more nodes that are frequent in
//! `X` (count ≥ the recording's minimum count `m`, found by the same level-wise mining with the
//! same intervals, threshold and largest size: **the same selection on every dataset**).
//! Single units (level 1) are never tested.
//!
//! # `max-t` (default): Westfall–Young single-step max-statistic over standardised counts
//! - **Family**: every episode of two to `max_level` nodes over the recording's units and the
//!   given intervals. Only the selected ones, `F(X)`, enter each dataset's maximum.
//! - **Statistic** (leave-one-out z-score): `T(e, Xᵢ) = (c(e, Xᵢ) − μₑ₋ᵢ) / max(σₑ₋ᵢ, 1)`,
//!   where `μₑ₋ᵢ` and `σₑ₋ᵢ` are the mean and (population) standard deviation of `e`'s counts
//!   in the other `S` datasets, for every `e ∈ U = ∪ᵢ F(Xᵢ)` (counts of `e` where it is not
//!   frequent are counted exactly). For the recording this is the z-score against its
//!   surrogates. A spread below one occurrence is taken as one, so an episode whose count
//!   barely varies cannot dominate the maximum. (A z-score pooled over all `S + 1` datasets
//!   would be capped at `S / √(S + 1)`, so strong patterns would tie with every surrogate's
//!   own outliers.)
//! - **Maximum**: `Mᵢ = max_{e ∈ F(Xᵢ)} T(e, Xᵢ)` (−∞ when `F(Xᵢ)` is empty).
//! - **Adjusted p-value** of `e ∈ F(X₀)`: `(1 + #{s ≥ 1 : M_s ≥ T(e, X₀)}) / (S + 1)`;
//!   significant when `≤ α`.
//!
//! **Validity.** Suppose that under the null hypothesis the `S + 1` datasets are exchangeable
//! (the recording is distributed as its surrogates; exactly so for a surrogate method drawn
//! from a group of transformations that leave the null distribution invariant, such as
//! circular shifts by a uniform offset over the whole span, and approximately for dithering).
//! `U` is a symmetric function of the multiset `{X₀, …, X_S}` and `μₑ₋ᵢ`, `σₑ₋ᵢ` are symmetric
//! functions of the other datasets, so `Mᵢ = g(Xᵢ; {Xⱼ : j ≠ i})` with the same `g` for every
//! `i`, and `(M₀, …, M_S)` is exchangeable.
//! Some episode of `F(X₀)` is rejected iff the one with the largest statistic is, i.e. iff
//! `1 + #{s : M_s ≥ M₀} ≤ α (S + 1)`: the rank of `M₀` among exchangeable values, ties counted
//! against rejection, so this has probability ≤ `α`. This is weak control of the family-wise
//! error rate (under the complete null, over every level at once, selection included); strong
//! control would need subset pivotality, which is not claimed.
//!
//! **Power.** Standardising puts episodes of slow and fast units on one scale: the maximum of
//! raw counts is dominated by the fastest units, the maximum of `T` is not. An episode among
//! slow units reaches significance when its excess over the surrogates is large relative to
//! their spread and it is frequent (count ≥ `m`); an episode below `m` is never tested, and the
//! smallest adjusted p-value is `1 / (S + 1)`.
//!
//! # `spectrum`: SPADE's pattern spectrum filtering
//! Torre et al. (2013), Front. Comput. Neurosci. 7:132; Quaglio et al. (2017), Front. Comput.
//! Neurosci. 11:41 (Elephant's `spade.pvalue_spectrum`, `test_signature_significance`). The
//! signature of an episode is (size, count). For each size `k`, `max_s(k)` is the largest
//! count among the frequent `k`-node episodes of surrogate `s` (0 when none). The p-value of
//! a signature `(k, c)` is `(1 + #{s : max_s(k) ≥ c}) / (S + 1)` (Elephant omits the `1 +`);
//! the signatures present in the recording are adjusted together by Benjamini–Hochberg
//! (SPADE's default `stat_corr='fdr_bh'`), and an episode is significant when its signature
//! is. Raw counts: like SPADE, this has little power for slow units.
//!
//! # `fdr-bh`, `holm`, `bonferroni`, `none`: per-episode p-values
//! The tested episodes are a watch list, the `--test-top N` most frequent, or every frequent
//! episode of the recording. Each gets the empirical p-value
//! `(1 + #{s : c(e, X_s) ≥ c(e, X₀)}) / (S + 1)` (surrogates are counted, not mined), then
//! Benjamini–Hochberg (1995) step-up adjusted p-values (false-discovery rate), Holm (1979)
//! step-down (family-wise error rate), Bonferroni, or none. **Choosing the tested episodes
//! from the recording's own counts (top-N, or "frequent") is a selection these procedures do
//! not see**; a watch list fixed in advance (from another session, say) is the clean use; for
//! selection-aware family-wise control use `max-t`. With `S` surrogates no p-value is below
//! `1 / (S + 1)`: Bonferroni and Holm over `m` tests can reject nothing unless
//! `S + 1 ≥ m / α`, which [`SignificanceResult::warnings`] says.
//!
//! For every tested episode the result carries its count, the surrogates' mean and standard
//! deviation of its count (over `X₁ … X_S`), the statistic (`max-t`: `T(e, X₀)`; otherwise the
//! z-score `(c − mean) / max(std, 1)`), the raw and adjusted p-values and `significant`.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::engine::Engine;
pub use super::error::SignificanceError;
use super::surrogate::{SurrogateMethod, Surrogates, Trials};
use crate::device::DeviceChoice;
use crate::episode::{Episode, GpuSettings, MinerConfig, MiningResult, Threshold};
use crate::event::EventStream;

/// The multiple-testing procedure (`--correction`); module documentation for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Correction {
    /// Westfall–Young single-step max-statistic on standardised counts (FWER).
    #[default]
    MaxT,
    /// SPADE's pattern spectrum filtering on (size, count) signatures.
    Spectrum,
    /// Benjamini–Hochberg step-up (FDR).
    FdrBh,
    /// Holm step-down (FWER).
    Holm,
    /// Bonferroni (FWER).
    Bonferroni,
    /// No adjustment.
    None,
}

impl Correction {
    /// The name on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::MaxT => "max-t",
            Self::Spectrum => "spectrum",
            Self::FdrBh => "fdr-bh",
            Self::Holm => "holm",
            Self::Bonferroni => "bonferroni",
            Self::None => "none",
        }
    }
}

impl fmt::Display for Correction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Correction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [
            Self::MaxT,
            Self::Spectrum,
            Self::FdrBh,
            Self::Holm,
            Self::Bonferroni,
            Self::None,
        ]
        .into_iter()
        .find(|c| c.name() == s)
        .ok_or_else(|| {
            format!(
                "unknown correction `{s}` (one of max-t, spectrum, fdr-bh, holm, bonferroni, none)"
            )
        })
    }
}

/// What to test and how.
#[derive(Clone, Debug)]
pub struct SignificanceConfig {
    /// How surrogates are made.
    pub method: SurrogateMethod,
    /// Number of surrogates `S` (≥ 1).
    pub n_surrogates: usize,
    /// Level α in (0, 1).
    pub alpha: f64,
    /// The procedure.
    pub correction: Correction,
    /// Seed of the surrogates (Philox key).
    pub seed: u64,
    /// Per-episode procedures: test only the `N` most frequent episodes (by count, then the
    /// report order).
    pub test_top: Option<usize>,
    /// Per-episode procedures: test exactly these episodes (a watch list), counted in the
    /// recording whether frequent or not.
    pub watch: Option<Vec<Episode>>,
    /// Trials for `trial-shift`.
    pub trials: Option<Trials>,
}

impl SignificanceConfig {
    /// The configuration an episodes stage's `significance` options describe, and whether
    /// only the significant episodes are kept.
    ///
    /// # Errors
    /// Every invalid option as `(field, message)`: an unknown surrogate method or correction,
    /// no surrogates, `alpha` outside (0, 1), `trial-shift` (a live window has no trials).
    pub fn from_options(
        options: &crate::episode::SignificanceOptions,
    ) -> Result<(Self, bool), Vec<(String, String)>> {
        let mut errors = Vec::new();
        let method = options
            .surrogates
            .parse::<SurrogateMethod>()
            .map_err(|e| errors.push(("surrogates".to_owned(), e.to_string())))
            .ok();
        if matches!(method, Some(SurrogateMethod::TrialShift { .. })) {
            errors.push((
                "surrogates".to_owned(),
                "`trial-shift` needs trials, which a window does not have".to_owned(),
            ));
        }
        let correction = options
            .correction
            .parse::<Correction>()
            .map_err(|e| errors.push(("correction".to_owned(), e)))
            .ok();
        if options.n_surrogates == 0 {
            errors.push(("n_surrogates".to_owned(), "must be at least 1".to_owned()));
        }
        if !(options.alpha > 0.0 && options.alpha < 1.0) {
            errors.push((
                "alpha".to_owned(),
                format!("must be in (0, 1), got {}", options.alpha),
            ));
        }
        match (method, correction) {
            (Some(method), Some(correction)) if errors.is_empty() => Ok((
                Self {
                    method,
                    n_surrogates: options.n_surrogates,
                    alpha: options.alpha,
                    correction,
                    seed: options.seed,
                    test_top: options.test_top,
                    watch: None,
                    trials: None,
                },
                options.significant_only,
            )),
            _ => Err(errors),
        }
    }
}

/// The outcome of one episode's test (the JSON fields of a tested episode, by these names).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestStats {
    /// Mean of the episode's count over the surrogates.
    pub surrogate_mean: f64,
    /// Standard deviation (population) of its count over the surrogates.
    pub surrogate_std: f64,
    /// `(count − surrogate_mean) / max(surrogate_std, 1)` (for `max-t` this is `T(e, X₀)`).
    pub statistic: f64,
    /// Raw empirical p-value (`spectrum`: its signature's).
    pub p_value: f64,
    /// Adjusted p-value of the procedure.
    pub p_adjusted: f64,
    /// `p_adjusted ≤ α`.
    pub significant: bool,
}

/// One tested episode.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeTest {
    /// The episode.
    pub episode: Episode,
    /// Its count in the recording (non-overlapped occurrences).
    pub count: u64,
    /// Its test.
    pub stats: TestStats,
}

impl EpisodeTest {
    /// The test of `episode` (count `count`) from its counts' sum and sum of squares over `s`
    /// surrogates and its p-values at level `alpha`.
    fn new(
        episode: Episode,
        count: u64,
        (sum, sumsq, s): (f64, f64, f64),
        (p_value, p_adjusted): (f64, f64),
        alpha: f64,
    ) -> Self {
        let (mean, std) = surrogate_moments(sum, sumsq, s);
        Self {
            episode,
            count,
            stats: TestStats {
                surrogate_mean: mean,
                surrogate_std: std,
                statistic: (count as f64 - mean) / std.max(1.0),
                p_value,
                p_adjusted,
                significant: p_adjusted <= alpha,
            },
        }
    }
}

/// The outcome of [`test_episodes`].
#[derive(Clone, Debug, PartialEq)]
pub struct SignificanceResult {
    /// The surrogate method, e.g. `dither:0.015`.
    pub method: String,
    /// `S`.
    pub n_surrogates: usize,
    /// α.
    pub alpha: f64,
    /// The procedure.
    pub correction: Correction,
    /// The seed.
    pub seed: u64,
    /// Tested episodes, in the recording's report order (watch list: its order).
    pub tests: Vec<EpisodeTest>,
    /// `max-t`: each surrogate's maximum statistic `M_s` (−∞ when it had no frequent
    /// episode); empty otherwise. Shape `[S]`.
    pub surrogate_max: Vec<f64>,
    /// Warnings for the reader (too few surrogates for the number of tests, …).
    pub warnings: Vec<String>,
    /// Candidate counts made on the surrogates: the candidates each surrogate's mining
    /// counted (after the bounds) plus the episodes recounted in each. The work measure of
    /// `synfire bench significance`.
    pub candidates_counted: u64,
}

/// A hashable key of an episode (intervals by bit pattern).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key(Vec<u32>, Vec<(u64, u64)>);

fn key(e: &Episode) -> Key {
    Key(
        e.types().iter().map(|t| t.0).collect(),
        e.intervals().iter().map(|iv| iv.bits()).collect(),
    )
}

/// The frequent episodes of two or more nodes of one dataset, as (id in `U`, count).
type Selected = Vec<(u32, u64)>;

/// Tests the episodes of `data` (the result of mining `stream` with `config`) against
/// surrogates of `stream`. Surrogates are mined (`max-t`, `spectrum`) with `config` at the
/// recording's minimum count, or only counted (per-episode procedures), on the CPU
/// (surrogates in parallel).
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
/// there are any; four GPU counters work on different surrogates at once). The counts, and so
/// every p-value, are the same on either.
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
    let engine = Engine::new(stream, config, device, settings)?;
    run(stream, config, data, sig, &engine)
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
    gpu: &mut crate::episode::GpuCounter,
) -> Result<SignificanceResult, SignificanceError> {
    run(stream, config, data, sig, &Engine::lent(gpu))
}

fn run(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    engine: &Engine<'_>,
) -> Result<SignificanceResult, SignificanceError> {
    if sig.n_surrogates == 0 {
        return Err(SignificanceError::Config(
            "`--n-surrogates` must be at least 1".into(),
        ));
    }
    if !(sig.alpha > 0.0 && sig.alpha < 1.0) {
        return Err(SignificanceError::Config(format!(
            "`--alpha` must be in (0, 1), got {}",
            sig.alpha
        )));
    }
    let surrogates = std::sync::Arc::new(Surrogates::new(
        stream,
        sig.method.clone(),
        sig.seed,
        sig.trials.clone(),
    )?);
    let mut fixed = config.clone();
    fixed.threshold = Threshold::MinCount(data.min_count);
    fixed.max_candidates = None;
    fixed.time_budget_s = None;
    let mut result = SignificanceResult {
        method: sig.method.to_string(),
        n_surrogates: sig.n_surrogates,
        alpha: sig.alpha,
        correction: sig.correction,
        seed: sig.seed,
        tests: Vec::new(),
        surrogate_max: Vec::new(),
        warnings: Vec::new(),
        candidates_counted: 0,
    };
    match sig.correction {
        Correction::MaxT => max_t(stream, &fixed, data, sig, &surrogates, engine, &mut result)?,
        Correction::Spectrum => spectrum(&fixed, data, sig, &surrogates, engine, &mut result)?,
        c => per_episode(stream, data, sig, c, &surrogates, engine, &mut result)?,
    }
    result.candidates_counted = engine.candidates_counted();
    Ok(result)
}

/// The recording's frequent episodes of two or more nodes, in report order.
fn tested_frequent(data: &MiningResult) -> Vec<(Episode, u64)> {
    data.episodes
        .iter()
        .filter(|f| f.episode.len() >= 2)
        .map(|f| (f.episode.clone(), f.count))
        .collect()
}

fn max_t(
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    surrogates: &std::sync::Arc<Surrogates>,
    engine: &Engine<'_>,
    result: &mut SignificanceResult,
) -> Result<(), SignificanceError> {
    let s_count = sig.n_surrogates;
    // Pass 1: mine every surrogate; U is the union of the selections.
    let mined: Vec<Vec<(Episode, u64)>> =
        engine.map_surrogates(s_count, |s| engine.mine(&surrogates.generate(s)?, config))?;
    let observed = tested_frequent(data);
    let mut ids: HashMap<Key, u32> = HashMap::new();
    let mut union: Vec<Episode> = Vec::new();
    let mut select = |list: &[(Episode, u64)]| -> Selected {
        list.iter()
            .map(|(e, c)| {
                let id = *ids.entry(key(e)).or_insert_with(|| {
                    union.push(e.clone());
                    (union.len() - 1) as u32
                });
                (id, *c)
            })
            .collect()
    };
    let data_sel = select(&observed);
    let sur_sel: Vec<Selected> = mined.iter().map(|m| select(m)).collect();
    drop(mined);
    let u = union.len();
    // Pass 2: every episode of U counted in every dataset (exactly where it was not
    // frequent), pooled into sums; the recording's counts kept for the exceedances.
    // Dataset `None` is the recording, `Some(s)` surrogate `s` (counted where the engine
    // generates it: on the GPU when it can).
    let counts_in = |x: Option<u64>, sel: &Selected| -> Result<Vec<u64>, SignificanceError> {
        let mut counts = vec![u64::MAX; u];
        for &(id, c) in sel {
            counts[id as usize] = c;
        }
        let missing: Vec<usize> = (0..u).filter(|&i| counts[i] == u64::MAX).collect();
        if !missing.is_empty() {
            let list: Vec<Episode> = missing.iter().map(|&i| union[i].clone()).collect();
            let found = match x {
                None => engine.count(stream, &list)?,
                Some(s) => engine.count_surrogate(stream, surrogates, s, &list)?,
            };
            for (&i, c) in missing.iter().zip(found) {
                counts[i] = c;
            }
        }
        Ok(counts)
    };
    let data_counts = counts_in(None, &data_sel)?;
    #[derive(Clone)]
    struct Sums {
        sum: Vec<f64>,
        sumsq: Vec<f64>,
        exceed: Vec<u32>,
    }
    let zero = Sums {
        sum: vec![0.0; u],
        sumsq: vec![0.0; u],
        exceed: vec![0; u],
    };
    let sums = engine.fold_surrogates(
        s_count,
        zero,
        |s| counts_in(Some(s), &sur_sel[s as usize]),
        |mut acc, counts| {
            for (i, &c) in counts.iter().enumerate() {
                let c_f = c as f64;
                acc.sum[i] += c_f;
                acc.sumsq[i] += c_f * c_f;
                acc.exceed[i] += u32::from(c >= data_counts[i]);
            }
            acc
        },
        |mut a, b| {
            for i in 0..u {
                a.sum[i] += b.sum[i];
                a.sumsq[i] += b.sumsq[i];
                a.exceed[i] += b.exceed[i];
            }
            a
        },
    )?;
    // Sums over all S + 1 datasets; each dataset is standardised against the other S.
    let n_all = (s_count + 1) as f64;
    let total: Vec<(f64, f64)> = (0..u)
        .map(|i| {
            let c = data_counts[i] as f64;
            (sums.sum[i] + c, sums.sumsq[i] + c * c)
        })
        .collect();
    let s_f = s_count as f64;
    let stat = |i: u32, c: u64| {
        let (sum, sumsq) = total[i as usize];
        let c = c as f64;
        let (mean, sd) = surrogate_moments(sum - c, sumsq - c * c, s_f);
        (c - mean) / sd.max(1.0)
    };
    let maximum = |sel: &Selected| {
        sel.iter()
            .map(|&(i, c)| stat(i, c))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let mut sorted_max: Vec<f64> = sur_sel.iter().map(maximum).collect();
    result.surrogate_max.clone_from(&sorted_max);
    sorted_max.sort_by(f64::total_cmp);
    for ((episode, count), &(id, _)) in observed.into_iter().zip(&data_sel) {
        let i = id as usize;
        let t = stat(id, count);
        let at_least = sorted_max.len() - sorted_max.partition_point(|&m| m < t);
        let p_adjusted = (1 + at_least) as f64 / n_all;
        result.tests.push(EpisodeTest::new(
            episode,
            count,
            (sums.sum[i], sums.sumsq[i], s_f),
            (f64::from(1 + sums.exceed[i]) / n_all, p_adjusted),
            sig.alpha,
        ));
    }
    if 1.0 / n_all > sig.alpha {
        result.warnings.push(format!(
            "{s_count} surrogates cannot reach α = {}: the smallest p-value is 1/(S+1) = {:.4}",
            sig.alpha,
            1.0 / n_all
        ));
    }
    Ok(())
}

/// Mean and population standard deviation of `n` values from their sum and sum of squares.
fn surrogate_moments(sum: f64, sumsq: f64, n: f64) -> (f64, f64) {
    let mean = sum / n;
    (mean, (sumsq / n - mean * mean).max(0.0).sqrt())
}

fn spectrum(
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    surrogates: &Surrogates,
    engine: &Engine<'_>,
    result: &mut SignificanceResult,
) -> Result<(), SignificanceError> {
    let s_count = sig.n_surrogates;
    let max_level = config.max_level;
    // Per surrogate: the largest count per size, and the counts of the recording's episodes
    // (for the reported means; counted, they were not necessarily frequent there).
    let observed = tested_frequent(data);
    let list: Vec<Episode> = observed.iter().map(|(e, _)| e.clone()).collect();
    let per: Vec<(Vec<u64>, Vec<u64>)> = engine.map_surrogates(s_count, |s| {
        let (mined, counts) = engine.mine_and_count(&surrogates.generate(s)?, config, &list)?;
        let mut max = vec![0u64; max_level + 1];
        for (e, c) in mined {
            max[e.len()] = max[e.len()].max(c);
        }
        Ok((max, counts))
    })?;
    let n_all = (s_count + 1) as f64;
    // Signatures present in the recording, their p-values, BH over them.
    let mut signatures: Vec<(usize, u64)> = observed.iter().map(|(e, c)| (e.len(), *c)).collect();
    signatures.sort_unstable();
    signatures.dedup();
    let p_sig: Vec<f64> = signatures
        .iter()
        .map(|&(k, c)| (1 + per.iter().filter(|(m, _)| m[k] >= c).count()) as f64 / n_all)
        .collect();
    let adjusted = benjamini_hochberg(&p_sig);
    for (j, (episode, count)) in observed.into_iter().enumerate() {
        let idx = signatures
            .binary_search(&(episode.len(), count))
            .unwrap_or_default();
        let (sum, sumsq) = per.iter().fold((0.0, 0.0), |(a, b), (_, c)| {
            let v = c[j] as f64;
            (a + v, b + v * v)
        });
        result.tests.push(EpisodeTest::new(
            episode,
            count,
            (sum, sumsq, s_count as f64),
            (p_sig[idx], adjusted[idx]),
            sig.alpha,
        ));
    }
    Ok(())
}

fn per_episode(
    stream: &EventStream,
    data: &MiningResult,
    sig: &SignificanceConfig,
    correction: Correction,
    surrogates: &std::sync::Arc<Surrogates>,
    engine: &Engine<'_>,
    result: &mut SignificanceResult,
) -> Result<(), SignificanceError> {
    let tested: Vec<(Episode, u64)> = if let Some(watch) = &sig.watch {
        let counts = engine.count(stream, watch)?;
        watch.iter().cloned().zip(counts).collect()
    } else {
        let mut all = tested_frequent(data);
        if let Some(n) = sig.test_top {
            // Report order within a level is by count; across levels, take the largest counts.
            all.sort_by_key(|e| std::cmp::Reverse(e.1));
            all.truncate(n);
        }
        all
    };
    let list: Vec<Episode> = tested.iter().map(|(e, _)| e.clone()).collect();
    let m = list.len();
    let s_count = sig.n_surrogates;
    let zero = (vec![0.0f64; m], vec![0.0f64; m], vec![0u32; m]);
    let (sum, sumsq, exceed) = engine.fold_surrogates(
        s_count,
        zero,
        |s| engine.count_surrogate(stream, surrogates, s, &list),
        |mut acc, counts| {
            for (i, c) in counts.into_iter().enumerate() {
                acc.0[i] += c as f64;
                acc.1[i] += (c as f64).powi(2);
                acc.2[i] += u32::from(c >= tested[i].1);
            }
            acc
        },
        |mut a, b| {
            for i in 0..m {
                a.0[i] += b.0[i];
                a.1[i] += b.1[i];
                a.2[i] += b.2[i];
            }
            a
        },
    )?;
    let n_all = (s_count + 1) as f64;
    let p: Vec<f64> = exceed.iter().map(|&k| f64::from(1 + k) / n_all).collect();
    let adjusted = match correction {
        Correction::FdrBh => benjamini_hochberg(&p),
        Correction::Holm => holm(&p),
        Correction::Bonferroni => p.iter().map(|&x| (x * m as f64).min(1.0)).collect(),
        _ => p.clone(),
    };
    for (i, (episode, count)) in tested.into_iter().enumerate() {
        result.tests.push(EpisodeTest::new(
            episode,
            count,
            (sum[i], sumsq[i], s_count as f64),
            (p[i], adjusted[i]),
            sig.alpha,
        ));
    }
    let smallest = 1.0 / n_all;
    if m > 0 && correction != Correction::None && smallest > sig.alpha / m as f64 {
        let needed = (m as f64 / sig.alpha).ceil() as u64;
        result.warnings.push(match correction {
            Correction::FdrBh => format!(
                "{s_count} surrogates for {m} tests: the smallest p-value 1/(S+1) = {smallest:.4} is above α/m, so an episode can be significant only together with at least {} others; {needed} surrogates or more avoid this",
                ((smallest * m as f64 / sig.alpha).ceil() as u64).saturating_sub(1)
            ),
            _ => format!(
                "{s_count} surrogates cannot reach α = {} for {m} tests with {correction}: the smallest p-value 1/(S+1) = {smallest:.4} is above α/m; use at least {} surrogates, fewer tests (--test-top), or --correction max-t",
                sig.alpha,
                needed.saturating_sub(1)
            ),
        });
    }
    if sig.watch.is_none() && correction != Correction::None {
        result.warnings.push(
            "the tested episodes were chosen by their counts in this recording; per-episode corrections do not account for that selection (max-t does)".into(),
        );
    }
    Ok(())
}

/// What a report lists of a mining result: per frequent episode (in `result.episodes`
/// order), whether it is listed and its test, if it was tested.
#[derive(Clone, Debug, Default)]
pub struct Listing<'a> {
    /// Shape `[result.episodes.len()]`.
    pub keep: Vec<bool>,
    /// Shape `[result.episodes.len()]`.
    pub tests: Vec<Option<&'a EpisodeTest>>,
}

/// The listing of `result` with the tests of `significance`, keeping only significant
/// episodes with `significant_only` and only closed ones with `closed`: an episode is closed
/// when no frequent episode one node longer that extends it at either end (it is that
/// episode's prefix or suffix, intervals included) has the same count (a lab's first reading
/// list: the longer episode says everything the shorter one does).
#[must_use]
pub fn listing<'a>(
    result: &MiningResult,
    significance: Option<&'a SignificanceResult>,
    significant_only: bool,
    closed: bool,
) -> Listing<'a> {
    let n = result.episodes.len();
    let mut tests: Vec<Option<&EpisodeTest>> = vec![None; n];
    if let Some(sig) = significance {
        let by_key: HashMap<Key, &EpisodeTest> =
            sig.tests.iter().map(|t| (key(&t.episode), t)).collect();
        for (slot, f) in tests.iter_mut().zip(&result.episodes) {
            *slot = by_key.get(&key(&f.episode)).copied();
        }
    }
    let mut keep = vec![true; n];
    if significant_only {
        for (k, t) in keep.iter_mut().zip(&tests) {
            *k = t.is_some_and(|t| t.stats.significant);
        }
    }
    if closed {
        // Counts of the prefix and the suffix of every episode of two or more nodes.
        let mut covered: HashMap<(Key, u64), ()> = HashMap::new();
        for f in &result.episodes {
            let e = &f.episode;
            let len = e.len();
            if len >= 2 {
                let prefix = Episode::new(
                    e.types()[..len - 1].to_vec(),
                    e.intervals()[..len - 2].to_vec(),
                );
                let suffix = Episode::new(e.types()[1..].to_vec(), e.intervals()[1..].to_vec());
                covered.insert((key(&prefix), f.count), ());
                covered.insert((key(&suffix), f.count), ());
            }
        }
        for (k, f) in keep.iter_mut().zip(&result.episodes) {
            if covered.contains_key(&(key(&f.episode), f.count)) {
                *k = false;
            }
        }
    }
    Listing { keep, tests }
}

/// Benjamini–Hochberg (1995) step-up adjusted p-values: `min_{j ≥ i} m p₍ⱼ₎ / j`, capped at 1,
/// in the input order.
#[must_use]
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        out[i] = running.min(1.0);
    }
    out
}

/// Holm (1979) step-down adjusted p-values: `max_{j ≤ i} (m − j + 1) p₍ⱼ₎`, capped at 1, in
/// the input order.
#[must_use]
pub fn holm(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut out = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(p[i] * (m - rank) as f64);
        out[i] = running.min(1.0);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjustments_match_their_definitions() {
        let p = [0.01, 0.04, 0.03, 0.005];
        // Sorted: 0.005, 0.01, 0.03, 0.04 (m = 4).
        let bh = benjamini_hochberg(&p);
        let expected_bh = [0.02, 0.04, 0.04, 0.02];
        for (a, b) in bh.iter().zip(expected_bh) {
            assert!((a - b).abs() < 1e-12, "{bh:?}");
        }
        let h = holm(&p);
        let expected_holm = [0.03, 0.06, 0.06, 0.02];
        for (a, b) in h.iter().zip(expected_holm) {
            assert!((a - b).abs() < 1e-12, "{h:?}");
        }
        assert_eq!(benjamini_hochberg(&[]), Vec::<f64>::new());
    }

    #[test]
    fn closed_drops_an_episode_whose_extension_has_its_count() {
        use crate::episode::{FrequentEpisode, Interval};
        use crate::event::EventType;
        let iv = Interval::new(0.0, 0.005).unwrap();
        let e = |t: &[u32], c: u64| FrequentEpisode {
            episode: Episode::new(
                t.iter().map(|&x| EventType(x)).collect(),
                vec![iv; t.len() - 1],
            ),
            count: c,
        };
        let result = MiningResult {
            min_count: 1,
            levels: Vec::new(),
            episodes: vec![
                e(&[0], 50),
                e(&[0, 1], 20),
                e(&[1, 2], 20),
                e(&[2, 3], 9),
                e(&[0, 1, 2], 20),
                e(&[1, 2, 3], 8),
            ],
            truncated: None,
        };
        let l = listing(&result, None, false, true);
        // 0→1 and 1→2 are prefix and suffix of 0→1→2 with the same count; 2→3 (9) is not
        // covered by 1→2→3 (8); single units are covered only by equal counts.
        assert_eq!(l.keep, [true, false, false, true, true, true]);
        assert!(l.tests.iter().all(Option::is_none));
    }

    #[test]
    fn corrections_parse_by_name() {
        for c in ["max-t", "spectrum", "fdr-bh", "holm", "bonferroni", "none"] {
            assert_eq!(c.parse::<Correction>().unwrap().name(), c);
        }
        assert!("fdr".parse::<Correction>().is_err());
    }
}
