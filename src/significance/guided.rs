//! `guided`: significance-guided mining. Level `k + 1` extends only the `k`-node episodes that
//! are more than chance, so the episodes looked at grow with the recording's structure, not
//! with `Nᵏ·rateᵏ` as the frequent ones do; and every episode of three or more nodes is tested
//! against the null that its **added unit is independent of the rest** (its own train replaced
//! by surrogates, the others kept), so a chance unit appended to a real link is not reported.
//!
//! Sources: the agglomeration of significant pairs into assemblies with a test per step,
//! each new unit tested against the assembly found so far (Russo & Durstewitz 2017, "Cell
//! assemblies at multiple time scales with arbitrary lag constellations", eLife 6:e19428);
//! SPADE's surrogate-based pattern significance (Torre et al. 2013, Front. Comput. Neurosci.
//! 7:132; Quaglio et al. 2017, Front. Comput. Neurosci. 11:41); which surrogates keep false
//! positives down on refractory, bursting trains (Stella et al. 2022, eNeuro 9(2)); sample
//! splitting ("screen and clean": Cox 1975, Biometrika 62(2):441–444; Wasserman & Roeder 2009,
//! Ann. Statist. 37(5A):2178–2201); the Westfall–Young max-statistic of [`super::testing`];
//! Bonferroni with Monte Carlo p-values (Davison & Hinkley 1997, Bootstrap Methods, §4.2.5).
//!
//! # Procedure
//! The recording `X` on `[t₀, t₁]` is split at `tₛ = t₀ + f (t₁ − t₀)` (`--sample-split f`,
//! default [`DEFAULT_FRACTION`]) into the **selection part** `A` (before `tₛ`) and the **test
//! part** `B` (from `tₛ` on), as [`super::sample_split::parts`]. `m` is the recording's minimum
//! count, `m_A = ⌈m (tₛ − t₀) / (t₁ − t₀)⌉` the same rate over `A`; `N` is `--test-top`
//! (default [`DEFAULT_PER_LEVEL`]), `K` the largest size, `S` the surrogates.
//!
//! **Selection, on `A` only** (it needs no error control: it only chooses what is tested).
//! Screening surrogates use a Philox key derived from `--seed`, not the test's.
//! 1. *Pairs.* `A` is mined to two nodes at `m_A`. The count of each frequent pair of two
//!    distinct units (at most [`SCREEN_PER_SELECTED`]` · N` of them, those with the largest
//!    rate z) is standardised against [`SCREEN_SURROGATES`] surrogates of `A` (every unit's train
//!    replaced): `z = (c − mean) / max(std, 1)`. `F₂` = the `N` pairs with the largest `z`
//!    among those with `z ≥` [`SELECT_Z`].
//! 2. *Extensions,* for `k = 2 … K − 1`. The candidates of level `k + 1` are the episodes
//!    `e → u` and `u → e` (one node added at either end, any given interval) for `e ∈ F_k`
//!    and a unit `u` not in `e`, whose new pair (`last(e) → u`, or `u → first(e)`) is frequent
//!    in `A` with a z of at least [`SELECT_Z`], by its screen in step 1 or by its rate z
//!    (`rate_z`: its count against a Poisson train of the second unit at its rate after each
//!    spike of the first): the links CAD would agglomerate, so a chance unit is seldom
//!    added. An episode reached from two parents keeps its first derivation
//!    (an appended node before a prepended one, parents in `F_k` order); `e` is its
//!    **parent** and `u` its **added unit**. Those with a count `≥ m_A` in `A` are
//!    standardised against [`SCREEN_SURROGATES`] **hybrids** of `A` (the added unit's train
//!    replaced by its surrogate, every other unit's kept; at most
//!    [`SCREEN_PER_SELECTED`]` · N` of them, those with the largest rate z), and `F_{k+1}` = the `N` with the
//!    largest `z` among those with `z ≥` [`SELECT_Z`]. The search stops at a level that
//!    selects nothing.
//!
//! **Test, on `B` only.** The error rate α is shared: `α₂ = α/2` for pairs and
//! `α_k = α / (2 (K − 2))` for each level `k ≥ 3` (`α₂ = α` when `K = 2`).
//! 3. *Pairs*: Westfall–Young single-step max-t over `F₂` on `B` and `S` surrogates of `B`
//!    ([`super::sample_split::max_t`]: leave-one-out z-scores, each dataset's maximum over the
//!    whole family) at level `α₂`.
//! 4. *Extensions*: each `h = (e, u) ∈ F_k` (k ≥ 3) is counted in `B` (`c₀`) and in hybrids of
//!    `B` in which `u`'s train is replaced by its surrogate `j` (`c_j`, the same surrogate `j`
//!    of `u` for every hypothesis adding `u`). Its p-value is
//!    `p = (1 + #{j ≤ S_k : c_j ≥ c₀}) / (S_k + 1)`, rejected when `p ≤ α_k / |F_k|`
//!    (Bonferroni), with `S_k + 1 = max(S + 1, ⌈|F_k| / α_k⌉)` (at most
//!    [`MAX_EXTENSION_SURROGATES`]): the fewest with which a rejection is possible (then only
//!    with no hybrid reaching `c₀`). Every hypothesis is counted in the first `S` hybrids;
//!    one whose exceedances already make `p ≤ α_k / |F_k|` impossible, or whose parent is
//!    not significant (step 5), stops there (its p-value is then over those `S`: it is not
//!    rejected either way, so the decisions are those of `S_k` hybrids for all); the others
//!    go on to `S_k`, in rounds that drop those that can no longer be rejected.
//! 5. *Gatekeeping*: an extension is **significant** when its own test rejects and its
//!    parent is significant. Reported adjusted p-values put every level on α's scale:
//!    pairs `p_adjusted = min(1, p_maxT · α/α₂)`; extensions
//!    `p_adjusted = max(min(1, p · |F_k| · α/α_k), p_adjusted(parent))`; so
//!    `significant ⇔ p_adjusted ≤ α`.
//!
//! Every family episode is listed with its exact count in the whole recording (`count`); its
//! `test_count` is its count in `B`, which `statistic`, `surrogate_mean`, `surrogate_std`
//! (over the `S` or `S_k` surrogates or hybrids it was counted in) and the p-values refer to.
//! `guided` looks for coordination **between** units: every tested episode holds distinct
//! units. Self-pairs `A → A` are single-unit structure (the unit's own intervals: bursts,
//! rhythm, even a plain dead time), which dithering changes, so against dithered surrogates
//! they come out "significant" on independent units (`tests/guided.rs`); they are not tested
//! (use `max-t` with `isi-dither` to ask about them). An added unit is never one of its
//! parent's units (it could not be replaced without changing the parent's occurrences).
//!
//! # Validity
//! The families `F₂ … F_K` are functions of `A` and of the screening's random numbers only;
//! the test uses `B` and random numbers drawn under another key. Condition on `A`.
//! - *Pairs.* Under the null that `B`'s fine timing is distributed as its surrogates' (given
//!   `A`), `B` and its `S` surrogates are exchangeable and, as for [`super::sample_split`],
//!   `P(some pair of F₂ rejected) ≤ α₂` (weak control over the pairs).
//! - *An extension* `h = (e, u)`. Its null `H_h`: `u`'s train in `B` is distributed as its
//!   surrogates given the trains of `e`'s units (`u` is independent of the rest at the
//!   surrogates' time scale, and the method is valid for `u`'s own train). The count in a
//!   hybrid is the same function of `(e's trains, u's train)` as `c₀`, so under `H_h`
//!   `c₀, c₁, …, c_{S_k}` are exchangeable given `e`'s trains, and `P(p ≤ t) ≤ t` for every
//!   `t` (ties counted against rejection). The rejection event `{p ≤ α_k/|F_k|}` is the same
//!   whether or not a hypothesis stopped early (step 4), so
//!   `P(some true-null h ∈ F_k rejected) ≤ |F_k| · α_k/|F_k| = α_k` (Bonferroni; no
//!   dependence between hypotheses is assumed). This is strong control over the extensions:
//!   the parent may be a real link and `u` still a chance unit, which is the super-episode
//!   case; `u`'s replacement leaves `e`'s occurrences as they are.
//! - *Overall.* Gatekeeping only removes rejections. By the union bound the probability of
//!   any false discovery is at most `α₂ + Σ_{k ≥ 3} α_k = α`, with the pairs' part under the
//!   pairs' null (weak) and the extensions' part whatever the other hypotheses are (strong).
//!
//! # Surrogates
//! The validity above holds only for a surrogate method that is valid for a unit's train:
//! uniform `dither` fills a refractory unit's dead time, so the non-overlapped counts of its
//! pairs fall in the surrogates and chance pairs of fast refractory units come out
//! significant over an hour of data (Stella et al. 2022; measured on synthetic trains in
//! `docs/significance.md`); use `dither-dead-time` (recommended) or `isi-dither` for sorted
//! units.
//!
//! # Cost
//! `A` is mined to two nodes once; the pairs of `A` are counted in [`SCREEN_SURROGATES`]
//! surrogates; each level `k + 1` counts the frequent extensions of `F_k` (at most
//! `N · units · intervals · 2`, far fewer after the pair filter) in `A` and
//! [`SCREEN_SURROGATES`] hybrids; the test counts `F₂` in `S` surrogates of `B` and each
//! extension in `S` hybrids (`S_k` for the few that can still be rejected). Hybrids are built
//! from the few units of their hypotheses: on the engine's GPU (`dither`, `dither-dead-time`,
//! `shift`) the added units' surrogate trains are made and every hypothesis counted there in
//! one job (`crate::device::HybridJob`), else on the CPU (rayon's pool); the counts are the
//! same (`tests/significance_gpu.rs`).

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use rayon::prelude::*;

use super::engine::Engine;
use super::error::SignificanceError;
use super::sample_split::{SCREEN_SURROGATES, max_t, parts, surrogate_counts};
use super::surrogate::{SurrogateMethod, Surrogates};
use super::testing::{
    Correction, EpisodeTest, GuidedLevel, Key, SignificanceConfig, SignificanceResult,
    SplitSummary, Sums, check_fraction, key, surrogate_moments, too_few_for_alpha,
};
use crate::episode::count::{Merged, TypeIndex, count_exact_merged, distinct_types};
use crate::episode::ends::{EarliestEnds, Ends, count_after_ends, gap_of};
use crate::episode::{Episode, FrequentEpisode, MinerConfig, MiningResult, Threshold};
use crate::event::{EventStream, EventType};

/// The leading fraction of the recording's span the families are selected on when
/// `--sample-split` is not given.
pub const DEFAULT_FRACTION: f64 = 0.5;

/// Episodes selected per level (`F_k`) when `--test-top` is not given.
pub const DEFAULT_PER_LEVEL: usize = 200;

/// The smallest screening z-score an episode must reach to be selected.
pub const SELECT_Z: f64 = 3.0;

/// The most hybrids an extension is counted in (`S_k`).
pub const MAX_EXTENSION_SURROGATES: usize = 100_000;

/// Added to `--seed` for the screening's Philox key (the test's key is `--seed` itself).
/// At most this many screened candidates a level per episode selected (`--test-top`): a
/// level's frequent candidates in the selection part are ordered by their rate z and only
/// the first `SCREEN_PER_SELECTED × test_top` are counted in the screen's surrogates (pairs)
/// or hybrids (extensions), so the selection's cost is bounded by the family's size, not by
/// the frequent candidates (millions at level 2 of a 1,000-unit hour).
pub const SCREEN_PER_SELECTED: usize = 20;

const SCREEN_SEED_OFFSET: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hybrids counted per round after the first `S` (a round ends with the hypotheses that can
/// no longer be rejected dropped).
const ROUND: u64 = 2_000;

/// A hypothesis of three or more nodes: the episode, its parent and the added unit.
#[derive(Clone, Debug)]
pub(super) struct Extension {
    pub(super) episode: Episode,
    pub(super) parent: Key,
    pub(super) added: EventType,
}

/// Per-hypothesis sums over hybrids (or surrogates): Σc, Σc², and the count of those with
/// `c ≥ c₀`.
#[derive(Clone, Debug, Default)]
struct Tally {
    n: u64,
    sum: u64,
    sumsq: u128,
    exceed: u64,
}

impl Tally {
    fn add(&mut self, c: u64, observed: u64) {
        self.n += 1;
        self.sum += c;
        self.sumsq += u128::from(c) * u128::from(c);
        self.exceed += u64::from(c >= observed);
    }

    fn merge(&mut self, o: &Self) {
        self.n += o.n;
        self.sum += o.sum;
        self.sumsq += o.sumsq;
        self.exceed += o.exceed;
    }

    /// Mean and population standard deviation of the counts.
    fn moments(&self) -> (f64, f64) {
        surrogate_moments(self.sum as f64, self.sumsq as f64, self.n as f64)
    }

    /// `(1 + exceed) / (n + 1)`.
    fn p_value(&self) -> f64 {
        (1 + self.exceed) as f64 / (self.n + 1) as f64
    }
}

/// A parent's occurrence ends laid out as times ([`Ends::times`], [`Ends::latest_starts`]):
/// what a unit added at the end is counted from in every hybrid, on the host
/// ([`count_after_ends`]) and on the device (`kernels/ends.cu`'s `hybrid_count`).
struct EndTimes {
    /// The ends' times, seconds.
    times: Vec<f64>,
    /// Their latest starts, seconds.
    starts: Vec<f64>,
}

impl EndTimes {
    /// The ends of `parent` in `index`.
    fn of(index: &TypeIndex, parent: &Episode) -> Self {
        let last = parent.types()[parent.len() - 1];
        if last.index() >= index.num_types() {
            return Self {
                times: Vec::new(),
                starts: Vec::new(),
            };
        }
        let ends = Ends::of(index, parent);
        Self {
            times: ends.times(index.times(last)),
            starts: ends.latest_starts().to_vec(),
        }
    }
}

/// How one hypothesis is counted in a hybrid: a unit added at the end from its parent's
/// occurrence ends ([`count_after_ends`]: the parent's units keep their trains, so its ends
/// are built once), a unit added at the start from its parent's earliest ends
/// ([`EarliestEnds::count_prefixed`], built once too); both equal the exact machine over the
/// hybrid's merged trains ([`Merged::from_trains`], [`count_exact_merged`]), which counts
/// anything else. The first two are what the device counts (`hybrid_job`).
enum HybridCount<'a> {
    /// `parent · added`: the parent's ends and the new gap.
    Suffix { ends: &'a EndTimes, gap: (f64, f64) },
    /// `added · parent`: the parent's earliest ends ([`EarliestEnds::count_prefixed`]: the
    /// parent's units keep their trains, so they are computed once) and the new gap.
    Prefix {
        earliest: &'a EarliestEnds,
        gap: (f64, f64),
    },
    /// Otherwise: the hypothesis's units in ascending type order (the order of ties in a
    /// stream).
    Merged { set: Vec<EventType> },
}

/// How `e` (adding unit `added`) is counted in its hybrids ([`HybridCount`]): from its
/// parent's ends in `ends` or earliest ends in `earliest` where they are there.
fn how_of<'a>(
    e: &Episode,
    added: EventType,
    ends: &'a HashMap<Key, EndTimes>,
    earliest: &'a HashMap<Key, EarliestEnds>,
) -> HybridCount<'a> {
    let n = e.len();
    match (
        ends.get(&key(&prefix_of(e))),
        earliest.get(&key(&suffix_of(e))),
    ) {
        (Some(ends), _) if e.types()[n - 1] == added => HybridCount::Suffix {
            ends,
            gap: gap_of(e.intervals()[n - 2], e.types()[n - 2], added),
        },
        (_, Some(earliest)) if e.types()[0] == added => HybridCount::Prefix {
            earliest,
            gap: gap_of(e.intervals()[0], added, e.types()[1]),
        },
        _ => {
            let mut set = distinct_types(e);
            set.sort_unstable();
            HybridCount::Merged { set }
        }
    }
}

/// The counts of `hyps` (all adding unit `added`) in the hybrids `js` of a part (`index`):
/// each hypothesis's units' trains in the part, with `added`'s replaced by its surrogate `j`
/// (one surrogate train per `j`, shared by the group), counted without building a stream
/// ([`HybridCount`]; every way equals [`count_exact`](crate::episode::count_exact) over the
/// hybrid's stream). `ends` holds the ends of every parent of a unit added at the end,
/// `earliest` the earliest ends of every parent of a unit added at the start.
/// Returns per hypothesis its tally.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
fn hybrid_group(
    index: &TypeIndex,
    ends: &HashMap<Key, EndTimes>,
    earliest: &HashMap<Key, EarliestEnds>,
    maker: &Surrogates,
    added: EventType,
    hyps: &[&Episode],
    observed: &[u64],
    js: Range<u64>,
) -> Vec<Tally> {
    let how: Vec<HybridCount<'_>> = hyps
        .iter()
        .map(|e| how_of(e, added, ends, earliest))
        .collect();
    let how: Vec<&HybridCount<'_>> = how.iter().collect();
    hybrid_group_by(index, maker, added, hyps, &how, observed, js)
}

/// [`hybrid_group`] with each hypothesis's [`HybridCount`] already found (`how`, one per
/// hypothesis).
fn hybrid_group_by(
    index: &TypeIndex,
    maker: &Surrogates,
    added: EventType,
    hyps: &[&Episode],
    how: &[&HybridCount<'_>],
    observed: &[u64],
    js: Range<u64>,
) -> Vec<Tally> {
    js.into_par_iter()
        .fold(
            || vec![Tally::default(); hyps.len()],
            |mut acc, j| {
                let surrogate = maker.unit_train(j, added.index());
                for (((e, &how), t), &o) in hyps.iter().zip(how).zip(acc.iter_mut()).zip(observed) {
                    let c = match how {
                        HybridCount::Suffix { ends, gap } => {
                            count_after_ends(&ends.times, &ends.starts, *gap, &surrogate)
                        }
                        HybridCount::Prefix { earliest, gap } => {
                            earliest.count_prefixed(&surrogate, *gap)
                        }
                        HybridCount::Merged { set } => {
                            let parts: Vec<&[f64]> = set
                                .iter()
                                .map(|&u| {
                                    if u == added {
                                        surrogate.as_slice()
                                    } else {
                                        index.times(u)
                                    }
                                })
                                .collect();
                            count_exact_merged(&Merged::from_trains(&parts), set, e)
                        }
                    };
                    t.add(c, o);
                }
                acc
            },
        )
        .reduce(
            || vec![Tally::default(); hyps.len()],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(&b) {
                    x.merge(y);
                }
                a
            },
        )
}

/// The device job (`crate::device::HybridJob`) counting the hypotheses `hyps` (each with
/// its [`HybridCount`], none of them `Merged`) in the hybrids `js`, the added units'
/// surrogates made by `maker` on the device; `None` for a surrogate method the device does
/// not make ([`Surrogates::hybrid_units`]) or sizes past its 32-bit offsets.
fn hybrid_job(
    maker: &Surrogates,
    hyps: &[(&Extension, &HybridCount<'_>)],
    js: Range<u64>,
) -> Option<crate::device::HybridJob> {
    let mut slot_of: HashMap<EventType, u32> = HashMap::new();
    let mut units: Vec<usize> = Vec::new();
    let mut out = crate::device::HybridHyps {
        parent_off: vec![0],
        ..Default::default()
    };
    for &(h, how) in hyps {
        let next = u32::try_from(units.len()).ok()?;
        let slot = *slot_of.entry(h.added).or_insert_with(|| {
            units.push(h.added.index());
            next
        });
        let (prefixed, gap, times, values) = match how {
            HybridCount::Suffix { ends, gap } => (0, *gap, &ends.times[..], &ends.starts[..]),
            HybridCount::Prefix { earliest, gap } => {
                (1, *gap, earliest.first(), earliest.earliest_ends())
            }
            HybridCount::Merged { .. } => return None,
        };
        out.slot.push(slot);
        out.prefixed.push(prefixed);
        out.low.push(gap.0);
        out.high.push(gap.1);
        out.parent_times.extend_from_slice(times);
        out.parent_values.extend_from_slice(values);
        out.parent_off
            .push(u32::try_from(out.parent_times.len()).ok()?);
    }
    let (method, key, units) = maker.hybrid_units(&units)?;
    Some(crate::device::HybridJob {
        method,
        key,
        span: maker.span(),
        surrogates: js,
        units,
        hyps: out,
    })
}

/// An episode without its last node.
fn prefix_of(e: &Episode) -> Episode {
    let n = e.len();
    Episode::new(e.types()[..n - 1].to_vec(), e.intervals()[..n - 2].to_vec())
}

/// An episode without its first node.
fn suffix_of(e: &Episode) -> Episode {
    Episode::new(e.types()[1..].to_vec(), e.intervals()[1..].to_vec())
}

/// Whether no type repeats in `e` (what [`EarliestEnds`] counts).
fn distinct(e: &Episode) -> bool {
    let t = e.types();
    t.iter().enumerate().all(|(i, x)| !t[..i].contains(x))
}

/// The tallies of `hyps` over the hybrids `js` of a part (`index`): on the GPU where the
/// engine has one and the device makes the method's surrogates (every hypothesis counted from
/// its parent's ends there, [`hybrid_job`], equal to the host's counts), else on the host
/// grouped by added unit ([`hybrid_group`]).
fn hybrid_tallies(
    engine: &Engine<'_>,
    index: &TypeIndex,
    maker: &Surrogates,
    hyps: &[&Extension],
    observed: &[u64],
    js: Range<u64>,
) -> Result<Vec<Tally>, SignificanceError> {
    // The ends of every parent that has a unit added at the end (its trains are the part's).
    let mut ends: HashMap<Key, EndTimes> = HashMap::new();
    for h in hyps {
        let e = &h.episode;
        if e.types()[e.len() - 1] == h.added {
            let parent = prefix_of(e);
            let k = key(&parent);
            ends.entry(k)
                .or_insert_with(|| EndTimes::of(index, &parent));
        }
    }
    // The earliest ends of every parent that has a unit added at the start.
    let mut earliest: HashMap<Key, EarliestEnds> = HashMap::new();
    for h in hyps {
        let e = &h.episode;
        if e.types()[0] == h.added && distinct(e) {
            let parent = suffix_of(e);
            let k = key(&parent);
            earliest
                .entry(k)
                .or_insert_with(|| EarliestEnds::of(index, &parent));
        }
    }
    let mut out = vec![Tally::default(); hyps.len()];
    let mut on_host: Vec<usize> = (0..hyps.len()).collect();
    // On the GPU: those counted from their parents' ends, all in one job.
    let how: Vec<HybridCount<'_>> = hyps
        .iter()
        .map(|h| how_of(&h.episode, h.added, &ends, &earliest))
        .collect();
    let device: Vec<usize> = (0..hyps.len())
        .filter(|&i| !matches!(how[i], HybridCount::Merged { .. }))
        .collect();
    if !device.is_empty() && engine.on_gpu() {
        let counted: Vec<(&Extension, &HybridCount<'_>)> =
            device.iter().map(|&i| (hyps[i], &how[i])).collect();
        if let Some(job) = hybrid_job(maker, &counted, js.clone()) {
            engine.check_cancel()?;
            match engine.hybrid_counts(job) {
                Some(Ok(counts)) => {
                    let n = (js.end - js.start) as usize;
                    for (row, &i) in device.iter().enumerate() {
                        for &c in &counts[row * n..(row + 1) * n] {
                            out[i].add(u64::from(c), observed[i]);
                        }
                    }
                    on_host.retain(|i| device.binary_search(i).is_err());
                }
                Some(Err(e)) => tracing::warn!(
                    error = %e,
                    "The GPU could not count the hybrids; counting them on the CPU."
                ),
                None => {}
            }
        }
    }
    let mut groups: HashMap<EventType, Vec<usize>> = HashMap::new();
    for &i in &on_host {
        groups.entry(hyps[i].added).or_default().push(i);
    }
    let mut groups: Vec<(EventType, Vec<usize>)> = groups.into_iter().collect();
    groups.sort_unstable_by_key(|g| g.0);
    for (added, members) in groups {
        engine.check_cancel()?;
        let eps: Vec<&Episode> = members.iter().map(|&i| &hyps[i].episode).collect();
        let obs: Vec<u64> = members.iter().map(|&i| observed[i]).collect();
        let hows: Vec<&HybridCount<'_>> = members.iter().map(|&i| &how[i]).collect();
        let tallies = hybrid_group_by(index, maker, added, &eps, &hows, &obs, js.clone());
        for (&i, t) in members.iter().zip(&tallies) {
            out[i].merge(t);
        }
    }
    engine.add_counted(hyps.len() as u64 * (js.end - js.start));
    Ok(out)
}

/// The rate z of a count `c` of an episode whose added unit fires at `rate_hz` (Hz) in the
/// selection part, `parent` the parent's count there (for a pair: its first unit's spikes),
/// `iv` the added unit's interval: `(c − n·p)/√(n·p·(1 − p))` (the denominator at least 1)
/// with `n = parent` and `p = 1 − exp(−rate·w)`, `w` the interval's width, the probability
/// that a Poisson train at that rate fires in the window after (or before) one occurrence
/// of the parent. It only orders candidates for the screen of the selection part: the test
/// part decides significance, so the selection may be any function of the selection part
/// (module documentation, step 2).
fn rate_z(c: u64, parent: u64, rate_hz: f64, iv: crate::episode::Interval) -> f64 {
    let width = (iv.high() - iv.low().max(0.0)).max(0.0);
    let p = -(-rate_hz * width).exp_m1();
    let n = parent as f64;
    (c as f64 - n * p) / (n * p * (1.0 - p)).sqrt().max(1.0)
}

/// The positions of the `n` largest `scores` (ties: the earlier), in ascending position
/// order; all of them when there are at most `n`.
fn by_rate_z(scores: &[f64], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    if order.len() > n {
        order.select_nth_unstable_by(n, |&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        order.truncate(n);
        order.sort_unstable();
    }
    order
}

/// The `n` largest of `scores` at or above [`SELECT_Z`] (ties: larger count, then order).
fn top(scores: &[f64], counts: &[u64], n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..scores.len())
        .filter(|&i| scores[i] >= SELECT_Z)
        .collect();
    order.sort_by(|&a, &b| {
        scores[b]
            .total_cmp(&scores[a])
            .then(counts[b].cmp(&counts[a]))
            .then(a.cmp(&b))
    });
    order.truncate(n);
    order.sort_unstable();
    order
}

/// The candidates of level `k + 1` from the parents `parents` (level `k`), as the module
/// documentation's step 2 says. `pairs`: the frequent pairs of `A` by their first and by
/// their last unit.
fn extensions(
    parents: &[Episode],
    by_first: &HashMap<EventType, Vec<(crate::episode::Interval, EventType)>>,
    by_last: &HashMap<EventType, Vec<(EventType, crate::episode::Interval)>>,
) -> Vec<Extension> {
    let mut seen: HashSet<Key> = HashSet::new();
    let mut out = Vec::new();
    let mut push = |episode: Episode, parent: &Episode, added: EventType| {
        if seen.insert(key(&episode)) {
            out.push(Extension {
                episode,
                parent: key(parent),
                added,
            });
        }
    };
    for e in parents {
        let types = e.types();
        let has = |u: &EventType| types.contains(u);
        let last = types[types.len() - 1];
        for &(iv, u) in by_first.get(&last).into_iter().flatten() {
            if !has(&u) {
                let mut t = types.to_vec();
                t.push(u);
                let mut ivs = e.intervals().to_vec();
                ivs.push(iv);
                push(Episode::new(t, ivs), e, u);
            }
        }
    }
    for e in parents {
        let types = e.types();
        let has = |u: &EventType| types.contains(u);
        for &(u, iv) in by_last.get(&types[0]).into_iter().flatten() {
            if !has(&u) {
                let mut t = vec![u];
                t.extend_from_slice(types);
                let mut ivs = vec![iv];
                ivs.extend_from_slice(e.intervals());
                push(Episode::new(t, ivs), e, u);
            }
        }
    }
    out
}

/// Checks the settings `guided` takes: a fraction in (0, 1), no watch list, no `trial-shift`.
fn check(sig: &SignificanceConfig, fraction: f64) -> Result<(), SignificanceError> {
    check_fraction(fraction)
        .map_err(|e| SignificanceError::Config(format!("guided: `--sample-split`: {e}")))?;
    if sig.watch.is_some() {
        return Err(SignificanceError::Config(
            "guided mining selects its own families: it does not take a watch list".into(),
        ));
    }
    if matches!(sig.method, SurrogateMethod::TrialShift { .. }) {
        return Err(SignificanceError::Config(
            "guided mining does not take `trial-shift` surrogates (trials would be cut at the split); for trials (`--trials`), choose another `--correction`, e.g. `max-t`"
                .into(),
        ));
    }
    Ok(())
}

/// What `guided` selected on a selection part (module documentation, steps 1 and 2): a
/// function of that part and of the screen's random numbers only, so that it may be tested on
/// any data after the part (the test part of the same recording, [`run`], or of a later live
/// window, [`Selection::for_stream`]).
#[derive(Clone, Debug)]
pub(crate) struct Selection {
    /// `F₂`: the selected pairs, in the selection part's alphabet.
    pub(super) f2: Vec<Episode>,
    /// `F₃ … F_K`: the selected extensions, in the selection part's alphabet.
    pub(super) families: Vec<Vec<Extension>>,
    /// Per level (2 first), what the selection looked at (`alpha`, `surrogates` and
    /// `significant` are the test's, filled in by [`test`]).
    pub(super) levels: Vec<GuidedLevel>,
    /// The selection part's alphabet (the episodes' types are its).
    pub(super) alphabet: crate::event::Alphabet,
    /// The selection part, seconds: `[start, split)`.
    pub(super) span_s: [f64; 2],
    /// Events in the selection part.
    pub(super) events: usize,
    /// Its minimum count `m_A`.
    pub(super) min_count: u64,
    /// Seconds the selection took.
    pub(super) seconds: f64,
    /// The largest size `K` (the test shares α over its levels).
    pub(super) max_level: usize,
    /// Whether no pair was frequent in the selection part (nothing is tested).
    pub(super) no_pairs: bool,
    /// Candidates the selection counted (in the part and its surrogates or hybrids).
    pub(super) counted: u64,
}

impl Selection {
    /// The same selection in `stream`'s alphabet (units matched by label), for testing it on
    /// another window of a live stream whose units are numbered by that window's spikes.
    /// Episodes with a unit that has no spike in `stream` are left out, with every episode
    /// extending them: their counts are 0 in the data and in every surrogate (surrogates
    /// keep each unit's spike count), so they could not be rejected, and whether a unit
    /// fires in a window is the same in all its surrogates; the family is then a function of
    /// the selection part and of the units' spike counts, which the test's exchangeability
    /// holds given (module documentation, "Validity").
    pub(crate) fn for_stream(&self, stream: &EventStream) -> Self {
        let to = stream.alphabet();
        if *to == self.alphabet {
            return self.clone();
        }
        let map = |e: &Episode| -> Option<Episode> {
            let types = e
                .types()
                .iter()
                .map(|&t| to.get(self.alphabet.label(t)))
                .collect::<Option<Vec<EventType>>>()?;
            Some(Episode::new(types, e.intervals().to_vec()))
        };
        let mut keys: HashMap<Key, Key> = HashMap::new();
        let mut f2 = Vec::with_capacity(self.f2.len());
        for e in &self.f2 {
            if let Some(m) = map(e) {
                keys.insert(key(e), key(&m));
                f2.push(m);
            }
        }
        let mut families = Vec::with_capacity(self.families.len());
        for fam in &self.families {
            let mut out = Vec::with_capacity(fam.len());
            for h in fam {
                let (Some(parent), Some(episode), Some(added)) = (
                    keys.get(&h.parent).cloned(),
                    map(&h.episode),
                    to.get(self.alphabet.label(h.added)),
                ) else {
                    continue;
                };
                keys.insert(key(&h.episode), key(&episode));
                out.push(Extension {
                    episode,
                    parent,
                    added,
                });
            }
            families.push(out);
        }
        Self {
            f2,
            families,
            alphabet: to.clone(),
            ..self.clone()
        }
    }
}

/// The parts of `stream` `guided` works on: the selection part, the test part, the split
/// time (seconds) and the selection part's minimum count `m_A` for the recording's minimum
/// count `m` (module documentation).
///
/// # Errors
/// As [`run`]: the settings, an empty part.
pub(crate) fn split(
    stream: &EventStream,
    m: u64,
    sig: &SignificanceConfig,
) -> Result<(EventStream, EventStream, f64, u64), SignificanceError> {
    let fraction = sig.sample_split.unwrap_or(DEFAULT_FRACTION);
    check(sig, fraction)?;
    let (sel, test, split_s) = parts(stream, fraction)?;
    let m_a = ((m as f64) * (split_s - stream.start()) / stream.span().max(f64::MIN_POSITIVE))
        .ceil()
        .max(1.0) as u64;
    Ok((sel, test, split_s, m_a))
}

/// The whole guided test of `stream` (module documentation) with `config`'s intervals, largest
/// size and threshold (`data` is the recording mined to two nodes or more: its minimum count
/// is the threshold's), on `engine`'s counters: [`select`] on the selection part, then
/// [`test`] on the test part.
///
/// # Errors
/// A fraction outside (0, 1), a watch list, `trial-shift` surrogates, an empty part
/// ([`SignificanceError::Config`]); surrogate, mining and counting errors; cancellation.
pub(crate) fn run(
    engine: &Engine<'_>,
    stream: &EventStream,
    config: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
) -> Result<SignificanceResult, SignificanceError> {
    let (sel, test_part, split_s, m_a) = split(stream, data.min_count, sig)?;
    let selection = select(engine, &sel, [stream.start(), split_s], config, m_a, sig)?;
    test(engine, stream, &test_part, split_s, &selection, data, sig)
}

/// Steps 1 and 2 of the module documentation: the families `F₂ … F_K` selected on the
/// selection part `sel` (spanning `span_s`, seconds) at its minimum count `m_a`, with
/// `config`'s intervals and largest size and `sig`'s `--test-top`, surrogate method and seed.
///
/// # Errors
/// Surrogate, mining and counting errors; cancellation.
#[allow(clippy::too_many_lines)]
pub(crate) fn select(
    engine: &Engine<'_>,
    sel: &EventStream,
    span_s: [f64; 2],
    config: &MinerConfig,
    m_a: u64,
    sig: &SignificanceConfig,
) -> Result<Selection, SignificanceError> {
    let started = std::time::Instant::now();
    let before = engine.candidates_counted();
    let per_level = sig.test_top.unwrap_or(DEFAULT_PER_LEVEL);
    let max_level = config.max_level.max(2);
    let split_s = span_s[1];
    // Selection: pairs of A against full surrogates of A.
    let mut pair_config = config.clone();
    pair_config.max_level = 2;
    pair_config.threshold = Threshold::MinCount(m_a);
    pair_config.max_candidates = None;
    pair_config.time_budget_s = None;
    let pairs_a: Vec<(Episode, u64)> = engine
        .mine(sel, &pair_config)?
        .into_iter()
        .filter(|(e, _)| e.len() == 2 && e.types()[0] != e.types()[1])
        .collect();
    let screen = Arc::new(Surrogates::new(
        sel,
        sig.method.clone(),
        sig.seed.wrapping_add(SCREEN_SEED_OFFSET),
        None,
    )?);
    let pair_list: Vec<Episode> = pairs_a.iter().map(|(e, _)| e.clone()).collect();
    let sel_index = TypeIndex::new(sel);
    let span_a = (split_s - span_s[0]).max(f64::MIN_POSITIVE);
    let rate_a = |u: EventType| sel_index.times(u).len() as f64 / span_a;
    let cap = SCREEN_PER_SELECTED.saturating_mul(per_level);
    // The pairs screened against surrogates: at most `cap`, by their rate z.
    let pair_rate_z: Vec<f64> = pairs_a
        .iter()
        .map(|(e, c)| {
            let (a, b) = (e.types()[0], e.types()[1]);
            rate_z(
                *c,
                sel_index.times(a).len() as u64,
                rate_a(b),
                e.intervals()[0],
            )
        })
        .collect();
    let screened_pairs = by_rate_z(&pair_rate_z, cap);
    let screened_list: Vec<Episode> = screened_pairs
        .iter()
        .map(|&i| pair_list[i].clone())
        .collect();
    let pair_counts: Vec<u64> = screened_pairs.iter().map(|&i| pairs_a[i].1).collect();
    // Pairs of distinct units: counted on the CPU from their units' surrogate trains.
    let sums = engine
        .count_surrogates(sel, &screen, 0..SCREEN_SURROGATES as u64, &screened_list)?
        .iter()
        .fold(Sums::zero(screened_list.len()), |acc, found| {
            acc.add(found, &pair_counts)
        });
    let z_of = |sum: f64, sumsq: f64, n: f64, c: u64| {
        let (mean, sd) = surrogate_moments(sum, sumsq, n);
        (c as f64 - mean) / sd.max(1.0)
    };
    let pair_z: Vec<f64> = (0..screened_list.len())
        .map(|i| {
            z_of(
                sums.sum[i] as f64,
                sums.sumsq[i] as f64,
                SCREEN_SURROGATES as f64,
                pair_counts[i],
            )
        })
        .collect();
    let picked = top(&pair_z, &pair_counts, per_level);
    let f2: Vec<Episode> = picked.iter().map(|&i| screened_list[i].clone()).collect();
    // The selection part's counts of the parents of the next level (for the rate z).
    let mut parent_counts: HashMap<Key, u64> = f2
        .iter()
        .zip(&picked)
        .map(|(e, &i)| (key(e), pair_counts[i]))
        .collect();
    let mut by_first: HashMap<EventType, Vec<_>> = HashMap::new();
    let mut by_last: HashMap<EventType, Vec<_>> = HashMap::new();
    // The links an extension may add: frequent pairs of `A` above chance by their rate z or
    // by their screen against surrogates (the rate z's Poisson expectation ignores the
    // non-overlap of a fast unit's occurrences, so a real link between fast units may score
    // low on it).
    let mut link = pair_rate_z
        .iter()
        .map(|&z| z >= SELECT_Z)
        .collect::<Vec<bool>>();
    for (k, &i) in screened_pairs.iter().enumerate() {
        link[i] |= pair_z[k] >= SELECT_Z;
    }
    for e in pair_list
        .iter()
        .zip(&link)
        .filter(|(_, ok)| **ok)
        .map(|(e, _)| e)
    {
        let (a, b, iv) = (e.types()[0], e.types()[1], e.intervals()[0]);
        by_first.entry(a).or_default().push((iv, b));
        by_last.entry(b).or_default().push((a, iv));
    }
    let mut levels = vec![GuidedLevel {
        level: 2,
        candidates: pair_list.len(),
        frequent: pair_list.len(),
        screened: screened_list.len(),
        selected: f2.len(),
        alpha: 0.0,
        surrogates: sig.n_surrogates,
        significant: 0,
    }];

    // Selection: extensions, level by level, against hybrids of A.
    let mut families: Vec<Vec<Extension>> = Vec::new();
    let mut parents: Vec<Episode> = f2.clone();
    for level in 3..=max_level {
        if parents.is_empty() {
            break;
        }
        let cands = extensions(&parents, &by_first, &by_last);
        let list: Vec<Episode> = cands.iter().map(|c| c.episode.clone()).collect();
        let counts = engine.count(sel, &list)?;
        let frequent: Vec<usize> = (0..cands.len()).filter(|&i| counts[i] >= m_a).collect();
        // The extensions screened against hybrids: at most `cap`, by their rate z (the
        // added unit as a Poisson train at its rate, after each occurrence of the parent).
        let rz: Vec<f64> = frequent
            .iter()
            .map(|&i| {
                let h = &cands[i];
                let e = &h.episode;
                let iv = if e.types()[e.len() - 1] == h.added {
                    e.intervals()[e.len() - 2]
                } else {
                    e.intervals()[0]
                };
                let parent = parent_counts.get(&h.parent).copied().unwrap_or(0);
                rate_z(counts[i], parent, rate_a(h.added), iv)
            })
            .collect();
        let screened: Vec<usize> = by_rate_z(&rz, cap)
            .into_iter()
            .map(|j| frequent[j])
            .collect();
        let hyps: Vec<&Extension> = screened.iter().map(|&i| &cands[i]).collect();
        let obs: Vec<u64> = screened.iter().map(|&i| counts[i]).collect();
        let tallies = hybrid_tallies(
            engine,
            &sel_index,
            &screen,
            &hyps,
            &obs,
            0..SCREEN_SURROGATES as u64,
        )?;
        let z: Vec<f64> = tallies
            .iter()
            .zip(&obs)
            .map(|(t, &c)| {
                let (mean, sd) = t.moments();
                (c as f64 - mean) / sd.max(1.0)
            })
            .collect();
        let picked = top(&z, &obs, per_level);
        let chosen: Vec<Extension> = picked.iter().map(|&i| hyps[i].clone()).collect();
        parent_counts = picked
            .iter()
            .map(|&i| (key(&hyps[i].episode), obs[i]))
            .collect();
        tracing::debug!(
            level,
            candidates = cands.len(),
            frequent = frequent.len(),
            seconds = started.elapsed().as_secs_f64(),
            "Guided selection: a level's extensions counted in the selection part and its hybrids."
        );
        levels.push(GuidedLevel {
            level,
            candidates: cands.len(),
            frequent: frequent.len(),
            screened: hyps.len(),
            selected: chosen.len(),
            alpha: 0.0,
            surrogates: 0,
            significant: 0,
        });
        parents = chosen.iter().map(|h| h.episode.clone()).collect();
        families.push(chosen);
    }
    let seconds = started.elapsed().as_secs_f64();
    tracing::debug!(seconds, "Guided selection done.");
    Ok(Selection {
        f2,
        families,
        levels,
        alphabet: sel.alphabet().clone(),
        span_s,
        events: sel.len(),
        min_count: m_a,
        seconds,
        max_level,
        no_pairs: pairs_a.is_empty(),
        counted: engine.candidates_counted() - before,
    })
}

/// Steps 3 to 5 of the module documentation: `selection`'s families tested on `test_part`
/// (the part of `stream` from `split_s` on, seconds), and listed with their counts in the
/// whole `stream`. `selection` must be in `stream`'s alphabet ([`Selection::for_stream`]) and
/// made on data before `split_s`.
///
/// # Errors
/// Surrogate and counting errors; cancellation.
#[allow(clippy::too_many_lines)]
pub(crate) fn test(
    engine: &Engine<'_>,
    stream: &EventStream,
    test_part: &EventStream,
    split_s: f64,
    selection: &Selection,
    data: &MiningResult,
    sig: &SignificanceConfig,
) -> Result<SignificanceResult, SignificanceError> {
    debug_assert!(selection.span_s[1] <= split_s);
    let started = std::time::Instant::now();
    let before = engine.candidates_counted();
    let fraction = sig.sample_split.unwrap_or(DEFAULT_FRACTION);
    let max_level = selection.max_level;
    let test = test_part;
    let f2 = &selection.f2;
    let families = &selection.families;
    let mut levels = selection.levels.clone();
    let selection_s = selection.seconds;
    // Test: pairs by max-t on B at α₂.
    let extension_levels = max_level.saturating_sub(2);
    let alpha = sig.alpha;
    let alpha_2 = if extension_levels == 0 {
        alpha
    } else {
        alpha / 2.0
    };
    let alpha_k = if extension_levels == 0 {
        0.0
    } else {
        alpha / (2.0 * extension_levels as f64)
    };
    levels[0].alpha = alpha_2;
    let pair_b = engine.count(test, f2)?;
    let maker = Arc::new(Surrogates::new(test, sig.method.clone(), sig.seed, None)?);
    let per_surrogate = surrogate_counts(engine, test, &maker, sig.n_surrogates, f2)?;
    let (mut tests, surrogate_max) = max_t(f2, &pair_b, &per_surrogate, alpha_2);
    let scale = alpha / alpha_2;
    let mut adjusted: HashMap<Key, (f64, bool)> = HashMap::new();
    for t in &mut tests {
        // Decided at α₂ (`max_t`), reported on α's scale (clamped so that rounding cannot
        // put a significant pair's p_adjusted above α).
        let scaled = (t.stats.p_adjusted * scale).min(1.0);
        t.stats.p_adjusted = if t.stats.significant {
            scaled.min(alpha)
        } else {
            scaled
        };
        adjusted.insert(key(&t.episode), (t.stats.p_adjusted, t.stats.significant));
    }
    levels[0].significant = tests.iter().filter(|t| t.stats.significant).count();
    tracing::debug!(
        seconds = started.elapsed().as_secs_f64(),
        "Guided test: pairs counted in the test part's surrogates."
    );

    // Test: extensions against hybrids of B, level by level (gatekeeping needs the parents').
    let test_index = TypeIndex::new(test);
    let mut warnings: Vec<String> = too_few_for_alpha(sig.n_surrogates, alpha_2)
        .into_iter()
        .collect();
    for (fam, info) in families.iter().zip(levels.iter_mut().skip(1)) {
        info.alpha = alpha_k;
        if fam.is_empty() {
            continue;
        }
        let m_k = fam.len() as f64;
        // Bonferroni's per-hypothesis level (a hair above, so that `1 / (S_k + 1)` with
        // `S_k + 1 = ⌈|F_k| / α_k⌉` passes it despite rounding).
        let threshold = alpha_k / m_k * (1.0 + 1e-9);
        let wanted = ((m_k / alpha_k).ceil() as usize).max(sig.n_surrogates + 1) - 1;
        let s_k = wanted.min(MAX_EXTENSION_SURROGATES);
        if s_k < wanted {
            warnings.push(format!(
                "level {}: {} extensions need {wanted} hybrids each for a Bonferroni rejection at {alpha_k}; counted in at most {s_k}",
                info.level,
                fam.len()
            ));
        }
        info.surrogates = s_k;
        // Most exceedances a hypothesis may have and still be rejected with S_k hybrids.
        let rejectable = |exceed: u64| (1 + exceed) as f64 / (s_k + 1) as f64 <= threshold;
        let list: Vec<Episode> = fam.iter().map(|h| h.episode.clone()).collect();
        let obs = engine.count(test, &list)?;
        let all: Vec<&Extension> = fam.iter().collect();
        let mut tally = hybrid_tallies(
            engine,
            &test_index,
            &maker,
            &all,
            &obs,
            0..sig.n_surrogates as u64,
        )?;
        let mut done = sig.n_surrogates as u64;
        // Only a hypothesis whose parent is significant can be (gatekeeping).
        let gate: Vec<bool> = fam
            .iter()
            .map(|h| adjusted.get(&h.parent).is_some_and(|&(_, sig)| sig))
            .collect();
        while done < s_k as u64 {
            let going: Vec<usize> = (0..fam.len())
                .filter(|&i| gate[i] && rejectable(tally[i].exceed))
                .collect();
            if going.is_empty() {
                break;
            }
            let to = (done + ROUND.max(done)).min(s_k as u64);
            let hyps: Vec<&Extension> = going.iter().map(|&i| &fam[i]).collect();
            let o: Vec<u64> = going.iter().map(|&i| obs[i]).collect();
            let more = hybrid_tallies(engine, &test_index, &maker, &hyps, &o, done..to)?;
            for (&i, t) in going.iter().zip(&more) {
                tally[i].merge(t);
            }
            done = to;
        }
        tracing::debug!(
            level = info.level,
            family = fam.len(),
            hybrids = s_k,
            counted_to_the_end = tally.iter().filter(|t| t.n == s_k as u64).count(),
            seconds = started.elapsed().as_secs_f64(),
            "Guided test: a level's extensions counted in hybrids of the test part."
        );
        for ((h, t), &c) in fam.iter().zip(&tally).zip(&obs) {
            let p = t.p_value();
            let own = (p * m_k * alpha / alpha_k).min(1.0);
            // A stopped hypothesis's p-value is over fewer hybrids; it cannot be rejected.
            let own_rejects = t.n == s_k as u64 && p <= threshold;
            let (parent_adj, parent_sig) = adjusted.get(&h.parent).copied().unwrap_or((1.0, false));
            let significant = own_rejects && parent_sig;
            let own = if own_rejects { own.min(alpha) } else { own };
            let p_adjusted = own.max(parent_adj);
            let mut test_ = EpisodeTest::new(
                h.episode.clone(),
                c,
                (t.sum as f64, t.sumsq as f64, t.n as f64),
                (p, p_adjusted),
                alpha,
            );
            test_.stats.significant = significant;
            test_.stats.test_count = Some(c);
            adjusted.insert(key(&h.episode), (p_adjusted, significant));
            info.significant += usize::from(significant);
            tests.push(test_);
        }
    }

    // Whole-recording counts of every family episode, for the listing.
    let family: Vec<Episode> = tests.iter().map(|t| t.episode.clone()).collect();
    let whole = engine.count(stream, &family)?;
    let listed: HashSet<Key> = data.episodes.iter().map(|f| key(&f.episode)).collect();
    let extra: Vec<FrequentEpisode> = family
        .iter()
        .zip(&whole)
        .filter(|(e, _)| !listed.contains(&key(e)))
        .map(|(e, &count)| FrequentEpisode {
            episode: e.clone(),
            count,
        })
        .collect();
    if selection.no_pairs {
        warnings.push(format!(
            "no pair is frequent (count ≥ {}) in the selection part ({:.3}–{:.3} s): nothing was tested; give a lower minimum count",
            selection.min_count, selection.span_s[0], selection.span_s[1]
        ));
    }
    tracing::debug!(
        selection_s,
        test_s = started.elapsed().as_secs_f64() - selection_s,
        levels = ?levels,
        "Guided mining: seconds selecting the families and testing them."
    );
    let tested = tests.len();
    let mut result = SignificanceResult {
        method: sig.method.to_string(),
        n_surrogates: sig.n_surrogates,
        alpha,
        correction: Correction::Guided,
        seed: sig.seed,
        tested,
        tests,
        surrogate_max,
        warnings,
        candidates_counted: engine.candidates_counted() - before + selection.counted,
        sample_split: Some(SplitSummary {
            fraction,
            split_s,
            // Only where the family was selected on another recording's part (a live
            // stage's earlier window): `synfire mine`'s selection part is `[start, split_s)`.
            selected_on_s: (selection.span_s != [stream.start(), split_s])
                .then_some(selection.span_s),
            selection_events: selection.events,
            test_events: test.len(),
            screened: levels.iter().map(|l| l.frequent).sum(),
            screen_surrogates: SCREEN_SURROGATES,
            family: tested,
            levels,
        }),
        extra_episodes: extra,
    };
    if sig.significant_only {
        result.tests.retain(|t| t.stats.significant);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::Interval;

    fn ep(types: &[u32], ivs: &[(f64, f64)]) -> Episode {
        Episode::new(
            types.iter().map(|&t| EventType(t)).collect(),
            ivs.iter()
                .map(|&(a, b)| Interval::new(a, b).unwrap())
                .collect(),
        )
    }

    #[test]
    fn extensions_add_distinct_units_at_either_end_only_where_the_new_pair_is_frequent() {
        let iv = Interval::new(0.0, 0.005).unwrap();
        // Frequent pairs: 1→2, 2→3, 2→1, 0→1.
        let pairs = [(1, 2), (2, 3), (2, 1), (0, 1)];
        let mut by_first: HashMap<EventType, Vec<_>> = HashMap::new();
        let mut by_last: HashMap<EventType, Vec<_>> = HashMap::new();
        for (a, b) in pairs {
            by_first
                .entry(EventType(a))
                .or_default()
                .push((iv, EventType(b)));
            by_last
                .entry(EventType(b))
                .or_default()
                .push((EventType(a), iv));
        }
        let parent = ep(&[1, 2], &[(0.0, 0.005)]);
        let got = extensions(std::slice::from_ref(&parent), &by_first, &by_last);
        let keys: Vec<Vec<u32>> = got
            .iter()
            .map(|h| h.episode.types().iter().map(|t| t.0).collect())
            .collect();
        // Append 3 (2→3); 2→1 would repeat unit 1. Prepend 0 (0→1); 2→1 repeats 2.
        assert_eq!(keys, vec![vec![1, 2, 3], vec![0, 1, 2]]);
        assert_eq!(got[0].added, EventType(3));
        assert_eq!(got[1].added, EventType(0));
        assert!(got.iter().all(|h| h.parent == key(&parent)));
    }

    /// A seeded stream of `units` units (ids `0..units`, at least 3) on a 0.5 ms grid over
    /// 20 s, `n` spikes drawn uniformly, half of unit 0's followed by units 1 and 2 after 2 and
    /// 4 ms: ties, zero delays and a planted chain.
    fn planted_stream(seed: u64, n: usize, units: u32) -> EventStream {
        use crate::event::{Alphabet, Ordering};
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut events: Vec<(f64, u32)> = Vec::new();
        for _ in 0..n {
            let t = f64::from(rng.random_range(0..40_000u32)) * 0.0005;
            let u = rng.random_range(0..units);
            events.push((t, u));
            if u == 0 && rng.random_bool(0.5) {
                events.push((t + 0.002, 1));
                events.push((t + 0.004, 2));
            }
        }
        let labels: Vec<String> = (0..units).map(|u| format!("u{u}")).collect();
        EventStream::new(
            events.iter().map(|e| e.0).collect(),
            events.iter().map(|e| EventType(e.1)).collect(),
            Alphabet::from_labels(labels).unwrap(),
            Ordering::SortIfNeeded,
        )
        .unwrap()
    }

    /// A unit added at the end is counted in the hybrids from its parent's ends, one added at
    /// the start from its parent's earliest ends; the same tallies as merging the trains and
    /// running the exact machine, on a stream with ties and zero delays (a closed interval
    /// at 0).
    #[test]
    fn hybrid_counts_from_the_parents_ends_equal_the_merged_machines() {
        let stream = planted_stream(7, 3000, 4);
        let index = TypeIndex::new(&stream);
        let method: SurrogateMethod = "dither:0.003".parse().unwrap();
        let maker = Surrogates::new(&stream, method, 3, None).unwrap();
        let closed = Interval::closed(0.0, 0.003).unwrap();
        let open = Interval::new(0.0, 0.005).unwrap();
        for (types, ivs) in [
            (vec![0u32, 1, 2], vec![open, open]),
            (vec![0, 1, 3], vec![open, closed]),
            (vec![1, 0, 2, 3], vec![closed, open, closed]),
        ] {
            let e = Episode::new(types.iter().map(|&t| EventType(t)).collect(), ivs);
            let added = e.types()[e.len() - 1];
            let observed = crate::episode::count_exact(&index, &e);
            let parent = prefix_of(&e);
            let mut ends = HashMap::new();
            ends.insert(key(&parent), EndTimes::of(&index, &parent));
            let none = HashMap::new();
            let by_ends = hybrid_group(
                &index,
                &ends,
                &none,
                &maker,
                added,
                &[&e],
                &[observed],
                0..20,
            );
            let merged = hybrid_group(
                &index,
                &HashMap::new(),
                &none,
                &maker,
                added,
                &[&e],
                &[observed],
                0..20,
            );
            let (x, y) = (&by_ends[0], &merged[0]);
            assert_eq!(
                (x.n, x.sum, x.sumsq, x.exceed),
                (y.n, y.sum, y.sumsq, y.exceed),
                "{e:?}"
            );
            assert!(x.sum > 0, "the hybrids hold occurrences of {e:?}");
            // The same unit added at the start instead: from the parent's earliest ends.
            let first = e.types()[0];
            let rest = suffix_of(&e);
            let mut earliest = HashMap::new();
            earliest.insert(key(&rest), EarliestEnds::of(&index, &rest));
            let observed = crate::episode::count_exact(&index, &e);
            let by_earliest = hybrid_group(
                &index,
                &HashMap::new(),
                &earliest,
                &maker,
                first,
                &[&e],
                &[observed],
                0..20,
            );
            let merged = hybrid_group(
                &index,
                &HashMap::new(),
                &none,
                &maker,
                first,
                &[&e],
                &[observed],
                0..20,
            );
            let (x, y) = (&by_earliest[0], &merged[0]);
            assert_eq!(
                (x.n, x.sum, x.sumsq, x.exceed),
                (y.n, y.sum, y.sumsq, y.exceed),
                "{e:?}, first unit replaced"
            );
            assert!(x.sum > 0, "the hybrids hold occurrences of {e:?}");
        }
    }

    /// The device job holds each hypothesis's parent, gap and added unit as the host counts
    /// them: read back on the host as `kernels/ends.cu`'s `hybrid_count` reads it (the
    /// slot's surrogate `j` made by `unit_train`, the parent's arrays from `parent_off`), it
    /// gives `hybrid_group`'s tallies, for units added at either end.
    #[test]
    fn the_device_job_holds_what_the_host_counts() {
        let stream = planted_stream(11, 4000, 5);
        let index = TypeIndex::new(&stream);
        let open = Interval::new(0.0, 0.005).unwrap();
        let closed = Interval::closed(0.0, 0.003).unwrap();
        let ext = |types: &[u32], ivs: Vec<Interval>, at_end: bool| {
            let episode = Episode::new(types.iter().map(|&t| EventType(t)).collect(), ivs);
            let (parent, added) = if at_end {
                (prefix_of(&episode), episode.types()[episode.len() - 1])
            } else {
                (suffix_of(&episode), episode.types()[0])
            };
            Extension {
                parent: key(&parent),
                episode,
                added,
            }
        };
        let hyps = [
            ext(&[0, 1, 2], vec![open, open], true),
            ext(&[0, 1, 3], vec![open, closed], true),
            ext(&[0, 1, 2], vec![open, open], false),
            ext(&[4, 0, 1], vec![closed, open], false),
            ext(&[1, 2, 3], vec![open, open], true),
        ];
        let refs: Vec<&Extension> = hyps.iter().collect();
        for method in ["dither-dead-time:0.003", "dither:0.003", "shift:0.5"] {
            let maker = Surrogates::new(&stream, method.parse().unwrap(), 3, None).unwrap();
            let mut ends = HashMap::new();
            let mut earliest = HashMap::new();
            for h in &hyps {
                let e = &h.episode;
                if e.types()[e.len() - 1] == h.added {
                    ends.insert(key(&prefix_of(e)), EndTimes::of(&index, &prefix_of(e)));
                } else {
                    earliest.insert(key(&suffix_of(e)), EarliestEnds::of(&index, &suffix_of(e)));
                }
            }
            let how: Vec<HybridCount<'_>> = hyps
                .iter()
                .map(|h| how_of(&h.episode, h.added, &ends, &earliest))
                .collect();
            let counted: Vec<(&Extension, &HybridCount<'_>)> =
                refs.iter().copied().zip(&how).collect();
            let js = 3..23u64;
            let job = hybrid_job(&maker, &counted, js.clone()).expect("a device method");
            let (u, h) = (&job.units, &job.hyps);
            for (i, x) in hyps.iter().enumerate() {
                let slot = h.slot[i] as usize;
                assert_eq!(u.unit[slot] as usize, x.added.index(), "{method}");
                let (a, b) = (h.parent_off[i] as usize, h.parent_off[i + 1] as usize);
                let mut tally = Tally::default();
                let observed = crate::episode::count_exact(&index, &x.episode);
                for j in js.clone() {
                    let train = maker.unit_train(j, u.unit[slot] as usize);
                    let gap = (h.low[i], h.high[i]);
                    let c = if h.prefixed[i] == 1 {
                        let first = &h.parent_times[a..b];
                        assert_eq!(first, earliest[&key(&suffix_of(&x.episode))].first());
                        earliest[&key(&suffix_of(&x.episode))].count_prefixed(&train, gap)
                    } else {
                        count_after_ends(&h.parent_times[a..b], &h.parent_values[a..b], gap, &train)
                    };
                    tally.add(c, observed);
                }
                let want = &hybrid_group(
                    &index,
                    &HashMap::new(),
                    &HashMap::new(),
                    &maker,
                    x.added,
                    &[&x.episode],
                    &[observed],
                    js.clone(),
                )[0];
                assert_eq!(
                    (tally.n, tally.sum, tally.sumsq, tally.exceed),
                    (want.n, want.sum, want.sumsq, want.exceed),
                    "{method} {:?}",
                    x.episode
                );
                assert!(
                    want.sum > 0,
                    "{method}: the hybrids hold occurrences of {:?}",
                    x.episode
                );
            }
        }
        let isi = Surrogates::new(&stream, "isi-dither:0.003".parse().unwrap(), 3, None).unwrap();
        let parent = prefix_of(&hyps[0].episode);
        let ends = HashMap::from([(key(&parent), EndTimes::of(&index, &parent))]);
        let none = HashMap::new();
        let how = how_of(&hyps[0].episode, hyps[0].added, &ends, &none);
        assert!(matches!(how, HybridCount::Suffix { .. }));
        assert!(
            hybrid_job(&isi, &[(&hyps[0], &how)], 0..5).is_none(),
            "isi-dither's trains are made on the host"
        );
    }

    #[test]
    fn tally_p_value_counts_ties_against_rejection() {
        let mut t = Tally::default();
        for c in [3, 5, 5, 9] {
            t.add(c, 5);
        }
        assert_eq!(t.exceed, 3);
        assert!((t.p_value() - 4.0 / 5.0).abs() < 1e-12);
        let (mean, sd) = t.moments();
        assert!((mean - 5.5).abs() < 1e-12);
        assert!(
            (sd - (((2.5f64).powi(2) + 0.25 + 0.25 + 3.5f64.powi(2)) / 4.0).sqrt()).abs() < 1e-12
        );
    }
}
