//! Which mined episodes are more than chance: the recording's counts against `S` surrogates
//! ([`super::surrogate`]), with a choice of multiple-testing procedure ([`Correction`]).
//!
//! Notation: `X₀` is the recording, `X₁ … X_S` its surrogates; `c(e, X)` the non-overlapped
//! count of episode `e` in `X`; `F(X)` the episodes of two or more nodes that are frequent in
//! `X` (count ≥ the recording's minimum count `m`, found by the same level-wise mining with the
//! same intervals, threshold and largest size: **the same selection on every dataset**).
//! Single units (level 1) are never tested. The tests are computed in phases over ranges of
//! surrogates by [`super::phases`] (one range in one process, many across a cluster, the same
//! result either way).
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
//! # `max-t` by sample splitting ([`SignificanceConfig::sample_split`])
//! The same statistic and maximum over a **fixed family** chosen on the first part of the
//! recording and tested on the rest, whose surrogates are then counted instead of mined
//! ([`super::sample_split`] has the procedure, its validity and its power).
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

pub use super::error::SignificanceError;
use super::surrogate::{SurrogateMethod, Trials};
use crate::episode::{Episode, FrequentEpisode, MiningResult};

/// The multiple-testing procedure (`--correction`); module documentation for each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Correction {
    /// Significance-guided mining ([`super::guided`]): level `k + 1` extends only the
    /// significant `k`-node episodes, each extension tested against its added unit's
    /// surrogates (FWER, by sample splitting).
    #[default]
    Guided,
    /// Westfall–Young single-step max-statistic on standardised counts (FWER).
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
            Self::Guided => "guided",
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
            Self::Guided,
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
                "unknown correction `{s}` (one of guided, max-t, spectrum, fdr-bh, holm, bonferroni, none)"
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
    /// Keep only the significant episodes' tests in [`SignificanceResult::tests`]
    /// ([`SignificanceResult::tested`] still counts every tested episode). The decisions
    /// are the same either way. For `spectrum` it also saves most of the work: a decision
    /// there needs only each surrogate's largest count per size, so the surrogates'
    /// per-episode counts (for `surrogate_mean` and `surrogate_std`) are made in a second
    /// pass for the significant episodes alone instead of for every tested one.
    pub significant_only: bool,
    /// `max-t` by sample splitting ([`super::sample_split`]): the tested family is selected
    /// on this leading fraction of the recording's span, in (0, 1), and tested on the rest
    /// (its size `test_top`, default [`super::sample_split::DEFAULT_FAMILY`]). `None`: the
    /// selection is mining, applied to the recording and to every surrogate.
    pub sample_split: Option<f64>,
}

impl SignificanceConfig {
    /// The configuration to mine the recording with before this test: `config` itself, but
    /// for [`Correction::Guided`] only to two nodes (its episodes of three or more nodes come
    /// from the guided search, which takes the whole `config`: mining every frequent episode
    /// of a dense recording is what it avoids). Test with `config`, then add the tested
    /// episodes to the result with [`SignificanceResult::list_in`].
    #[must_use]
    pub fn mining_config(
        &self,
        config: &crate::episode::MinerConfig,
    ) -> crate::episode::MinerConfig {
        let mut out = config.clone();
        if self.correction == Correction::Guided {
            out.max_level = out.max_level.min(2);
        }
        out
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
    /// Sample splitting only ([`SignificanceConfig::sample_split`]): the episode's count in
    /// the test part of the recording, the count its statistic and p-values compare with the
    /// test part's surrogates (the surrogates' mean and spread are of the test part too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_count: Option<u64>,
}

/// One tested episode.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeTest {
    /// The episode.
    pub episode: Episode,
    /// Its count in the tested data (non-overlapped occurrences): the recording, or with
    /// sample splitting its test part (also in [`TestStats::test_count`]).
    pub count: u64,
    /// Its test.
    pub stats: TestStats,
}

impl EpisodeTest {
    /// The test of `episode` (count `count`) from its counts' sum and sum of squares over `s`
    /// surrogates and its p-values at level `alpha`.
    pub(crate) fn new(
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
                test_count: None,
            },
        }
    }
}

/// The outcome of a test ([`super::test_episodes`], or [`super::phases::finish`] of its
/// phases).
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
    /// The number of episodes tested (every frequent episode of two or more nodes, the
    /// `--test-top` ones or the watch list).
    pub tested: usize,
    /// Tested episodes, in the recording's report order (watch list: its order); with
    /// [`SignificanceConfig::significant_only`], only the significant ones.
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
    /// Sample splitting's parts and selection, when the test was made that way (`guided`
    /// always is).
    pub sample_split: Option<SplitSummary>,
    /// `guided`: the tested episodes that mining the recording did not list (those of three
    /// or more nodes, and pairs below the recording's minimum count), with their counts in
    /// the whole recording; [`SignificanceResult::list_in`] adds them to the mining result.
    /// Empty for the other procedures.
    pub extra_episodes: Vec<FrequentEpisode>,
}

impl SignificanceResult {
    /// Adds [`SignificanceResult::extra_episodes`] to `result` (by level, then count,
    /// descending, as mining orders them), so that a listing shows every tested episode.
    pub fn list_in(&self, result: &mut MiningResult) {
        if self.extra_episodes.is_empty() {
            return;
        }
        result.episodes.extend(self.extra_episodes.iter().cloned());
        result.episodes.sort_by(|a, b| {
            a.episode
                .len()
                .cmp(&b.episode.len())
                .then(b.count.cmp(&a.count))
        });
    }
}

/// What `guided` selected and found at one level (the JSON document's
/// `significance.sample_split.levels`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuidedLevel {
    /// Episode size (nodes).
    pub level: usize,
    /// Candidates in the selection part (pairs: the frequent ones; extensions: of the level
    /// below's selected episodes, after the pair filter).
    pub candidates: usize,
    /// Candidates frequent in the selection part.
    pub frequent: usize,
    /// Frequent candidates screened against the selection part's surrogates (pairs) or
    /// hybrids (extensions): the first `20 × --test-top` by their rate z (absent in
    /// documents written before it was reported).
    #[serde(default)]
    pub screened: usize,
    /// Episodes selected for the test (the family `F_k`).
    pub selected: usize,
    /// The share of α this level is tested at (`α₂` or `α_k`).
    pub alpha: f64,
    /// Surrogates (pairs) or hybrids (extensions: `S_k`) each hypothesis can be counted in.
    pub surrogates: usize,
    /// Significant episodes of this size.
    pub significant: usize,
}

/// What sample splitting did (the JSON document's `significance.sample_split`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitSummary {
    /// The leading fraction of the span the family was selected on, in (0, 1).
    pub fraction: f64,
    /// The split time `tₛ`, seconds: the selection part is before it, the test part at or
    /// after it.
    pub split_s: f64,
    /// `guided` in a live episodes stage: the selection part the family was selected on,
    /// `[start, end)` seconds, when it is an earlier window's (absent where it is this
    /// recording's own, before `split_s`). It always ends at or before `split_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_on_s: Option<[f64; 2]>,
    /// Events in the selection part.
    pub selection_events: usize,
    /// Events in the test part.
    pub test_events: usize,
    /// Frequent episodes of two or more nodes in the selection part (the family's candidates).
    pub screened: usize,
    /// Surrogates of the selection part the candidates were ranked against (0 when all were
    /// taken).
    pub screen_surrogates: usize,
    /// Episodes in the family (tested).
    pub family: usize,
    /// `guided`: per level, what was selected and found (level 2 first). Empty for
    /// `max-t --sample-split`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<GuidedLevel>,
}

/// Checks a sample-split fraction: finite and strictly between 0 and 1.
///
/// # Errors
/// A message saying what is wrong with `fraction`.
pub(crate) fn check_fraction(fraction: f64) -> Result<(), String> {
    if fraction.is_finite() && fraction > 0.0 && fraction < 1.0 {
        Ok(())
    } else {
        Err(format!(
            "the fraction must be strictly between 0 and 1, got {fraction}"
        ))
    }
}

/// What is wrong with a sample split at `fraction` for a test by `correction` (when known)
/// with surrogates by `method` (when known): a fraction outside (0, 1), a correction other
/// than `max-t`, `trial-shift` surrogates (trials would be cut at the split). Empty when
/// nothing is. The command line, a pipeline's options and the test itself check with it.
#[must_use]
pub fn check_sample_split(
    fraction: f64,
    correction: Option<Correction>,
    method: Option<&SurrogateMethod>,
) -> Vec<String> {
    let mut errors: Vec<String> = check_fraction(fraction).err().into_iter().collect();
    if let Some(c) = correction.filter(|&c| !matches!(c, Correction::MaxT | Correction::Guided)) {
        errors.push(format!(
            "works with the `guided` and `max-t` corrections only, not `{c}`"
        ));
    }
    if matches!(method, Some(SurrogateMethod::TrialShift { .. })) {
        errors.push(
            "does not take `trial-shift` surrogates (trials would be cut at the split)".to_owned(),
        );
    }
    errors
}

/// Integer sums over a range of surrogates, per episode (shape `[episodes]` each): the sum of
/// its counts, the sum of their squares and the number of surrogates whose count reaches the
/// recording's. Exact, so sums of ranges combine in any order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sums {
    /// Σ c(e, X_s), occurrences.
    pub sum: Vec<u64>,
    /// Σ c(e, X_s)², occurrences².
    pub sumsq: Vec<u128>,
    /// #{s : c(e, X_s) ≥ c(e, X₀)}.
    pub exceed: Vec<u64>,
}

impl Sums {
    pub(crate) fn zero(n: usize) -> Self {
        Self {
            sum: vec![0; n],
            sumsq: vec![0; n],
            exceed: vec![0; n],
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.sum.len()
    }

    pub(crate) fn consistent(&self) -> bool {
        self.sumsq.len() == self.sum.len() && self.exceed.len() == self.sum.len()
    }

    /// Adds one surrogate's `counts` against the recording's `recording` counts.
    pub(crate) fn add(mut self, counts: &[u64], recording: &[u64]) -> Self {
        for (i, (&c, &r)) in counts.iter().zip(recording).enumerate() {
            self.sum[i] += c;
            self.sumsq[i] += u128::from(c) * u128::from(c);
            self.exceed[i] += u64::from(c >= r);
        }
        self
    }

    pub(crate) fn merge(mut self, other: &Self) -> Self {
        for i in 0..self.sum.len() {
            self.sum[i] += other.sum[i];
            self.sumsq[i] += other.sumsq[i];
            self.exceed[i] += other.exceed[i];
        }
        self
    }
}

/// A hashable key of an episode (intervals by bit pattern).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key(Vec<u32>, Vec<(u64, u64)>);

/// The key of `e`.
pub(crate) fn key(e: &Episode) -> Key {
    Key(
        e.types().iter().map(|t| t.0).collect(),
        e.intervals().iter().map(|iv| iv.bits()).collect(),
    )
}

/// `max-t`'s leave-one-out statistic `T(e, Xᵢ)` of a count `c` in dataset `i`, from the
/// sum and sum of squares of `e`'s counts over all `s + 1` datasets (`Xᵢ` included): the
/// z-score against the other `s`, `(c − μ₋ᵢ) / max(σ₋ᵢ, 1)`.
pub(crate) fn leave_one_out(sum_all: f64, sumsq_all: f64, c: u64, s: f64) -> f64 {
    let c = c as f64;
    let (mean, sd) = surrogate_moments(sum_all - c, sumsq_all - c * c, s);
    (c - mean) / sd.max(1.0)
}

/// `max-t`'s adjusted p-value of a statistic `t` against the surrogates' maxima
/// `sorted_max` (ascending, shape `[S]`): `(1 + #{s : M_s ≥ t}) / (S + 1)`.
pub(crate) fn max_t_adjusted(sorted_max: &[f64], t: f64) -> f64 {
    let at_least = sorted_max.len() - sorted_max.partition_point(|&m| m < t);
    (1 + at_least) as f64 / (sorted_max.len() + 1) as f64
}

/// The warning that `s` surrogates cannot reach `alpha` (no p-value is below `1/(s + 1)`),
/// when they cannot.
pub(crate) fn too_few_for_alpha(s: usize, alpha: f64) -> Option<String> {
    let smallest = 1.0 / (s + 1) as f64;
    (smallest > alpha).then(|| {
        format!(
            "{s} surrogates cannot reach α = {alpha}: the smallest p-value is 1/(S+1) = {smallest:.4}"
        )
    })
}

/// Mean and population standard deviation of `n` values from their sum and sum of squares.
pub(crate) fn surrogate_moments(sum: f64, sumsq: f64, n: f64) -> (f64, f64) {
    let mean = sum / n;
    (mean, (sumsq / n - mean * mean).max(0.0).sqrt())
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
