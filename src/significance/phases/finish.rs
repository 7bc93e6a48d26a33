//! [`finish`]: the parts of every pass combined into the result, with no recording and no
//! counter, per procedure (`max-t`, `spectrum`, the per-episode procedures); and the checks and
//! orderings of the parts that [`super::Tester::union`] shares with it (the first passes'
//! parts sorted and checked to cover `0..S`, `U` in canonical order, `spectrum`'s signature
//! test).

use std::collections::HashMap;
use std::ops::Range;

use super::plan::{FirstPart, Plan, SecondPart, Union, bad_part, one_pass, other_test};
use crate::episode::Episode;
use crate::significance::error::SignificanceError;
use crate::significance::testing::{
    Correction, EpisodeTest, Key, SignificanceResult, Sums, benjamini_hochberg, holm, key,
    leave_one_out, max_t_adjusted, too_few_for_alpha,
};

/// `parts` of `plan` sorted by range, checked to cover `0..S` exactly once.
pub(super) fn ordered_first<'p>(
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
pub(super) fn union_of(
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
        extra_episodes: Vec::new(),
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

/// `spectrum`'s signature test (module documentation of [`testing`]): the
/// signatures (size, count) present in the recording, sorted, with their p-values against
/// every surrogate's largest counts and their Benjamini–Hochberg adjusted p-values.
///
/// [`testing`]: crate::significance::testing
pub(super) struct SpectrumTest {
    signatures: Vec<(usize, u64)>,
    p: Vec<f64>,
    adjusted: Vec<f64>,
}

impl SpectrumTest {
    /// The test from the first passes' parts of `plan` (every range once).
    pub(super) fn of(plan: &Plan, first: &[&FirstPart]) -> Self {
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
    pub(super) fn significant(&self, plan: &Plan) -> (Vec<Episode>, Vec<u64>) {
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
