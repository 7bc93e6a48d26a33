//! `max-t` by sample splitting ("screen and clean"): the family of tested episodes is chosen
//! on the first part of the recording and tested on the rest, against surrogates of the rest
//! that are **counted, not mined**.
//!
//! Sources: Cox (1975), "A note on data-splitting for the evaluation of significance levels",
//! Biometrika 62(2):441–444; Wasserman & Roeder (2009), "High-dimensional variable selection",
//! Ann. Statist. 37(5A):2178–2201 (screen on one half, clean on the other); the test itself is
//! the Westfall–Young single-step max-statistic of [`super::testing`].
//!
//! # Why
//! `max-t` with the mining selection ([`super::testing`]) must mine every surrogate, because
//! the selection "frequent" has to be applied to every dataset; at S = 1,000 that is
//! 10³ minings of the recording, minutes to hours. Here the selection is made once, on data
//! the test never sees, so the surrogates of the test part only have to be counted:
//! `|family| × S` counts.
//!
//! # Procedure
//! Let the recording span `[t₀, t₁]` and `f` the fraction (`--sample-split f`, in (0, 1));
//! the split time is `tₛ = t₀ + f (t₁ − t₀)`.
//! 1. **Parts.** The selection part `A` holds the events before `tₛ`, the test part `B` the
//!    events at or after it, each over the recording's units (a unit silent in a part has an
//!    empty train there). An occurrence that straddles `tₛ` is in neither part.
//! 2. **Selection** (on `A` only). `A` is mined with the recording's intervals, largest size
//!    and minimum count `m` (not scaled to the part: so every selected episode is frequent in
//!    the whole recording too, since a non-overlapped count never falls when events are
//!    appended after the last one, and it is listed). Its frequent episodes of two or more
//!    nodes are ranked by the z-score of their count against [`SCREEN_SURROGATES`] surrogates
//!    of `A` (same method, a seed derived from `--seed` so that they share no random numbers
//!    with the test's), `(c − mean) / max(std, 1)`, largest first (ties: larger count, then
//!    the mining order); the first `N` (`--test-top N`, default [`DEFAULT_FAMILY`]) are the
//!    **family** `F`. When `A` has at most `N` frequent episodes, all are taken and no
//!    screening surrogate is made.
//! 3. **Test** (on `B` only). Every `e ∈ F` is counted in `B` (`X₀`) and in its surrogates
//!    `X₁ … X_S` (the method and `--seed` given). The statistic is `max-t`'s leave-one-out
//!    z-score `T(e, Xᵢ) = (c(e, Xᵢ) − μₑ₋ᵢ) / max(σₑ₋ᵢ, 1)` over the other `S` datasets, the
//!    maximum is `Mᵢ = max_{e ∈ F} T(e, Xᵢ)` (the whole family in every dataset: no
//!    per-dataset selection), and the adjusted p-value of `e` is
//!    `(1 + #{s ≥ 1 : M_s ≥ T(e, X₀)}) / (S + 1)`; the raw p-value is
//!    `(1 + #{s : c(e, X_s) ≥ c(e, X₀)}) / (S + 1)`. An episode is significant when its
//!    adjusted p-value is at most α.
//!
//! # Validity
//! `F` is a function of `A` and of the screening surrogates' random numbers alone. Suppose
//! that under the null hypothesis, conditionally on `A`, the test part and its `S` surrogates
//! are exchangeable (the assumption of the mined `max-t`, made for `B` given `A`: `B`'s fine
//! timing carries no information about `A`'s beyond what the surrogates keep, e.g. spike
//! counts, rates and intervals). Given `F`, `Mᵢ = g(Xᵢ; {Xⱼ : j ≠ i})` with the same `g` for
//! every `i` (the family is fixed and `μₑ₋ᵢ`, `σₑ₋ᵢ` are symmetric in the other datasets), so
//! `(M₀, …, M_S)` is exchangeable and, as for the mined `max-t`, some episode of `F` is
//! rejected with probability at most α: weak control of the family-wise error rate over the
//! family, whatever the selection did. The test's surrogates use the Philox key `--seed`, the
//! screening's another key, so the test's random numbers are independent of `F`.
//!
//! # Power
//! Against the mined `max-t`: the test sees only `1 − f` of the recording (an episode's excess
//! over chance shrinks with its count, its z-score by about `√(1 − f)`), and an episode must
//! be frequent in the selection part (count ≥ `m` in the fraction `f`) to be tested at all;
//! but the family is smaller (`N` episodes, not every frequent episode of every surrogate), so
//! the maximum the recording must beat is lower. The screening z-score puts slow units'
//! episodes on the scale of fast units', as the test does.
//!
//! # Cost
//! One mining of `A`, `|F_A| ×` [`SCREEN_SURROGATES`] counts in `A` (only when `A` has more
//! than `N` frequent episodes), and `N × (S + 1)` counts in `B`; the counts of the family in
//! each surrogate are held until the end (`4 N S` bytes: 40 MB for `N = 10⁴`, `S = 10³`).
//! Runs in one process ([`super::phases::Tester::run`]); it has no phases to split across a
//! cluster.

use std::collections::HashSet;

use super::engine::Engine;
use super::error::SignificanceError;
use super::surrogate::Surrogates;
use super::testing::{
    EpisodeTest, SignificanceConfig, SignificanceResult, SplitSummary, Sums, check_fraction,
    check_sample_split, key, leave_one_out, max_t_adjusted, surrogate_moments, too_few_for_alpha,
};
use crate::episode::{Episode, MinerConfig, MiningResult, Threshold};
use crate::event::{EventStream, Ordering};

/// The family's size when `--test-top` is not given.
pub const DEFAULT_FAMILY: usize = 10_000;

/// Surrogates of the selection part that rank its frequent episodes.
pub const SCREEN_SURROGATES: usize = 10;

/// Added to `--seed` for the screening surrogates' Philox key (so the screening and the test
/// draw different random numbers); the 64-bit golden-ratio constant.
const SCREEN_SEED_OFFSET: u64 = 0x9E37_79B9_7F4A_7C15;

/// The selection part (events before the split time) and the test part (at or after it) of
/// `stream`, both over its alphabet, and the split time `t₀ + fraction (t₁ − t₀)`, seconds.
///
/// # Errors
/// [`SignificanceError::Config`] for a fraction outside (0, 1) or a part without events
/// (naming the part and the split time).
pub fn parts(
    stream: &EventStream,
    fraction: f64,
) -> Result<(EventStream, EventStream, f64), SignificanceError> {
    check_fraction(fraction).map_err(SignificanceError::Config)?;
    let split_s = stream.start() + fraction * stream.span();
    let at = stream.times().partition_point(|&t| t < split_s);
    let part = |range: std::ops::Range<usize>, name: &str| {
        if range.is_empty() {
            return Err(SignificanceError::Config(format!(
                "sample split at {split_s:.6} s (fraction {fraction} of {:.6}–{:.6} s): the {name} part holds no events",
                stream.start(),
                stream.end()
            )));
        }
        EventStream::new(
            stream.times()[range.clone()].to_vec(),
            stream.types()[range].to_vec(),
            stream.alphabet().clone(),
            Ordering::RequireSorted,
        )
        .map_err(|e| SignificanceError::Config(format!("the {name} part: {e}")))
    };
    Ok((
        part(0..at, "selection")?,
        part(at..stream.len(), "test")?,
        split_s,
    ))
}

/// The whole sample-split `max-t` test of `data` (the result of mining `stream` with
/// `config`) as `sig` says (module documentation), on `engine`'s counters.
///
/// # Errors
/// A fraction outside (0, 1), a correction other than `max-t`, `trial-shift` surrogates, an
/// empty part, S = 0 or α outside (0, 1) ([`SignificanceError::Config`]); surrogate, mining
/// and counting errors.
pub(crate) fn run(
    engine: &Engine<'_>,
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    fraction: f64,
) -> Result<SignificanceResult, SignificanceError> {
    if let Some(e) = check_sample_split(fraction, Some(sig.correction), Some(&sig.method))
        .into_iter()
        .next()
    {
        return Err(SignificanceError::Config(format!("sample splitting: {e}")));
    }
    if sig.watch.is_some() {
        return Err(SignificanceError::Config(
            "sample splitting selects its own family: it does not take a watch list".into(),
        ));
    }
    let started = std::time::Instant::now();
    let before = engine.candidates_counted();
    let (selection, test, split_s) = parts(stream, fraction)?;
    let family_size = sig.test_top.unwrap_or(DEFAULT_FAMILY);
    let mut fixed = config.clone();
    fixed.threshold = Threshold::MinCount(data.min_count);
    fixed.max_candidates = None;
    fixed.time_budget_s = None;

    // Selection: mine the selection part, rank its frequent episodes against its surrogates.
    let candidates = engine.mine(&selection, &fixed)?;
    let screened = candidates.len();
    let mut screen_surrogates = 0;
    let family: Vec<(Episode, u64)> = if screened <= family_size {
        candidates
    } else {
        screen_surrogates = SCREEN_SURROGATES;
        let list: Vec<Episode> = candidates.iter().map(|(e, _)| e.clone()).collect();
        let maker = std::sync::Arc::new(Surrogates::new(
            &selection,
            sig.method.clone(),
            sig.seed.wrapping_add(SCREEN_SEED_OFFSET),
            None,
        )?);
        let counts: Vec<u64> = candidates.iter().map(|(_, c)| *c).collect();
        let sums = engine.fold_surrogates(
            0..SCREEN_SURROGATES as u64,
            Sums::zero(list.len()),
            |s| engine.count_surrogate(&selection, &maker, s, &list),
            |acc, found| acc.add(&found, &counts),
            |a, b| a.merge(&b),
        )?;
        let n = SCREEN_SURROGATES as f64;
        let score: Vec<f64> = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| {
                let (mean, sd) = surrogate_moments(sums.sum[i] as f64, sums.sumsq[i] as f64, n);
                (c as f64 - mean) / sd.max(1.0)
            })
            .collect();
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by(|&a, &b| {
            score[b]
                .total_cmp(&score[a])
                .then(candidates[b].1.cmp(&candidates[a].1))
                .then(a.cmp(&b))
        });
        let mut chosen = vec![false; candidates.len()];
        for &i in &order[..family_size] {
            chosen[i] = true;
        }
        candidates
            .into_iter()
            .zip(chosen)
            .filter_map(|(c, keep)| keep.then_some(c))
            .collect()
    };
    let selection_s = started.elapsed().as_secs_f64();

    // Test: count the family in the test part and in each of its surrogates.
    let list: Vec<Episode> = family.iter().map(|(e, _)| e.clone()).collect();
    let recording = engine.count(&test, &list)?;
    let maker = std::sync::Arc::new(Surrogates::new(&test, sig.method.clone(), sig.seed, None)?);
    let per_surrogate = surrogate_counts(engine, &test, &maker, sig.n_surrogates, &list)?;
    let (tests, surrogate_max) = max_t(&list, &recording, &per_surrogate, sig.alpha);

    let mut warnings: Vec<String> = too_few_for_alpha(sig.n_surrogates, sig.alpha)
        .into_iter()
        .collect();
    if screened == 0 {
        warnings.push(format!(
            "no episode of two or more nodes is frequent (count ≥ {}) in the selection part (the first {:.3} s): nothing was tested; give a larger --sample-split fraction or a lower minimum count",
            data.min_count,
            split_s - stream.start()
        ));
    }
    let listed: HashSet<_> = data.episodes.iter().map(|f| key(&f.episode)).collect();
    let unlisted = list.iter().filter(|e| !listed.contains(&key(e))).count();
    if unlisted > 0 {
        warnings.push(format!(
            "{unlisted} tested episodes are not among the whole recording's frequent episodes, so they are not listed"
        ));
    }
    tracing::debug!(
        selection_s,
        test_s = started.elapsed().as_secs_f64() - selection_s,
        screened,
        family = list.len(),
        "Sample-split max-t: seconds selecting the family (mining the selection part and \
         ranking its episodes) and testing it (counting it in the test part's surrogates)."
    );
    let mut result = SignificanceResult {
        method: sig.method.to_string(),
        n_surrogates: sig.n_surrogates,
        alpha: sig.alpha,
        correction: sig.correction,
        seed: sig.seed,
        tested: list.len(),
        tests,
        surrogate_max,
        warnings,
        candidates_counted: engine.candidates_counted() - before,
        sample_split: Some(SplitSummary {
            fraction,
            split_s,
            selected_on_s: None,
            selection_events: selection.len(),
            test_events: test.len(),
            screened,
            screen_surrogates,
            family: list.len(),
            levels: Vec::new(),
        }),
        extra_episodes: Vec::new(),
    };
    if sig.significant_only {
        result.tests.retain(|t| t.stats.significant);
    }
    Ok(result)
}

/// The counts of a fixed family `list` in surrogates `0..n` of `part` (shape `[n][list]`),
/// held as `u32` (the family's counts in every surrogate stay in memory until the end).
///
/// # Errors
/// [`SignificanceError::Config`] for a count beyond 2³² − 1; surrogate and counting errors.
pub(crate) fn surrogate_counts(
    engine: &Engine<'_>,
    part: &EventStream,
    maker: &std::sync::Arc<Surrogates>,
    n: usize,
    list: &[Episode],
) -> Result<Vec<Vec<u32>>, SignificanceError> {
    engine
        .count_surrogates(part, maker, 0..n as u64, list)?
        .into_iter()
        .enumerate()
        .map(|(s, counts)| {
            counts
                .into_iter()
                .map(|c| {
                    u32::try_from(c).map_err(|_| {
                        SignificanceError::Config(format!(
                            "a count of {c} in surrogate {s} is beyond what a fixed family's test holds (2³² − 1)"
                        ))
                    })
                })
                .collect()
        })
        .collect()
}

/// The single-step max-t test of a fixed family (module documentation, step 3): `episodes`
/// with their counts in the tested data `recording` (shape `[N]`) and in each surrogate
/// (`surrogates`, shape `[S][N]`), at level `alpha`. Returns each episode's test (in
/// `episodes` order, with [`super::TestStats::test_count`] set) and each surrogate's maximum
/// statistic `M_s` (shape `[S]`; −∞ for an empty family).
#[must_use]
pub fn max_t(
    episodes: &[Episode],
    recording: &[u64],
    surrogates: &[Vec<u32>],
    alpha: f64,
) -> (Vec<EpisodeTest>, Vec<f64>) {
    let s_f = surrogates.len() as f64;
    let mut sums = Sums::zero(episodes.len());
    let mut row = vec![0u64; episodes.len()];
    for counts in surrogates {
        for (r, &c) in row.iter_mut().zip(counts) {
            *r = u64::from(c);
        }
        sums = sums.add(&row, recording);
    }
    // Sums over all S + 1 datasets; each dataset is standardised against the other S.
    let total: Vec<(f64, f64)> = (0..episodes.len())
        .map(|i| {
            let c = recording[i] as f64;
            (sums.sum[i] as f64 + c, sums.sumsq[i] as f64 + c * c)
        })
        .collect();
    let stat = |i: usize, c: u64| leave_one_out(total[i].0, total[i].1, c, s_f);
    let maxima: Vec<f64> = surrogates
        .iter()
        .map(|counts| {
            counts
                .iter()
                .enumerate()
                .map(|(i, &c)| stat(i, u64::from(c)))
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .collect();
    let mut sorted = maxima.clone();
    sorted.sort_by(f64::total_cmp);
    let n_all = s_f + 1.0;
    let tests = episodes
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut test = EpisodeTest::new(
                e.clone(),
                recording[i],
                (sums.sum[i] as f64, sums.sumsq[i] as f64, s_f),
                (
                    (1 + sums.exceed[i]) as f64 / n_all,
                    max_t_adjusted(&sorted, stat(i, recording[i])),
                ),
                alpha,
            );
            test.stats.test_count = Some(recording[i]);
            test
        })
        .collect();
    (tests, maxima)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::Interval;
    use crate::event::{Alphabet, EventType};

    fn episode(a: u32, b: u32) -> Episode {
        Episode::new(
            vec![EventType(a), EventType(b)],
            vec![Interval::new(0.0, 0.005).unwrap()],
        )
    }

    #[test]
    fn max_t_of_a_fixed_family_follows_its_definition() {
        // Two episodes, three surrogates. Episode 0: recording 10, surrogates 2, 3, 4;
        // episode 1: recording 5, surrogates 5, 6, 4.
        let eps = [episode(0, 1), episode(1, 2)];
        let rec = [10, 5];
        let sur = vec![vec![2, 5], vec![3, 6], vec![4, 4]];
        let (tests, maxima) = max_t(&eps, &rec, &sur, 0.5);
        // Leave-one-out z-scores by hand.
        let z = |c: f64, others: &[f64]| {
            let m = others.iter().sum::<f64>() / others.len() as f64;
            let v = others.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / others.len() as f64;
            (c - m) / v.sqrt().max(1.0)
        };
        let t0 = z(10.0, &[2.0, 3.0, 4.0]);
        let m1 = z(2.0, &[10.0, 3.0, 4.0]).max(z(5.0, &[5.0, 6.0, 4.0]));
        let m2 = z(3.0, &[10.0, 2.0, 4.0]).max(z(6.0, &[5.0, 5.0, 4.0]));
        let m3 = z(4.0, &[10.0, 2.0, 3.0]).max(z(4.0, &[5.0, 5.0, 6.0]));
        for (a, b) in maxima.iter().zip([m1, m2, m3]) {
            assert!((a - b).abs() < 1e-12, "{maxima:?}");
        }
        assert!((tests[0].stats.statistic - t0).abs() < 1e-12);
        let beaten = [m1, m2, m3].iter().filter(|&&m| m >= t0).count();
        assert_eq!(tests[0].stats.p_adjusted, (1 + beaten) as f64 / 4.0);
        // Raw p-value of episode 1: surrogates with count ≥ 5 are 5 and 6.
        assert_eq!(tests[1].stats.p_value, 3.0 / 4.0);
        assert_eq!(tests[0].stats.test_count, Some(10));
        assert_eq!(tests[0].stats.significant, tests[0].stats.p_adjusted <= 0.5);
    }

    #[test]
    fn parts_keep_the_alphabet_and_split_at_the_fraction() {
        let alphabet = Alphabet::from_labels(["a", "b", "c"]).unwrap();
        let stream = EventStream::new(
            vec![0.0, 1.0, 2.0, 3.0, 4.0],
            [0, 1, 0, 1, 0].into_iter().map(EventType).collect(),
            alphabet,
            Ordering::RequireSorted,
        )
        .unwrap();
        let (a, b, at) = parts(&stream, 0.5).unwrap();
        assert_eq!(at, 2.0);
        assert_eq!(a.times(), [0.0, 1.0]);
        assert_eq!(b.times(), [2.0, 3.0, 4.0]);
        assert_eq!(a.alphabet().len(), 3);
        assert_eq!(b.alphabet().len(), 3);
        assert!(parts(&stream, 0.0).is_err());
        assert!(parts(&stream, 1.0).is_err());
        assert!(parts(&stream, f64::NAN).is_err());
        // Both parts always hold the first and the last event, unless the span is 0.
        let (a, b, _) = parts(&stream, 1e-9).unwrap();
        assert_eq!((a.len(), b.len()), (1, 4));
        let flat = EventStream::new(
            vec![1.0, 1.0],
            vec![EventType(0), EventType(1)],
            Alphabet::from_labels(["a", "b"]).unwrap(),
            Ordering::RequireSorted,
        )
        .unwrap();
        let err = parts(&flat, 0.5).unwrap_err().to_string();
        assert!(err.contains("selection part holds no events"), "{err}");
    }
}
