//! The per-surrogate statistic of SPADE's pattern spectrum filtering without mining the
//! surrogate: the largest non-overlapped count among the frequent episodes of each size,
//! found by an exact threshold search that counts only the candidates whose upper bound can
//! still beat (or tie) the largest count it must certify.
//!
//! [`max_count_by_size`] returns, for a stream and a [`MinerConfig`], exactly what
//! [`mine`](crate::episode::mine) followed by "largest count per size" returns: `M_k`, the
//! largest count among the episodes of `k` nodes that mining finds frequent (0 when it finds
//! none), for `k = 2..=max_level`. `tests/significance_spectrum.rs` checks the equality against
//! full mining on random and synthetic streams, lag-0 intervals included.
//!
//! # What mining finds frequent
//! Write `c(e)` for the exact non-overlapped count ([`crate::episode::count`]) and `m` for the
//! minimum count the configuration's threshold resolves to. The miner ([`crate::episode::miner`],
//! [`crate::episode::candidates`]) builds `F₁` = the single types with `c ≥ m`, `F₂` = the pairs
//! `a –iv→ b` of types of `F₁` (repeats allowed) with every configured interval and `c ≥ m`,
//! and `F_{k+1}` = the joins `α ⋈ β` of `α, β ∈ F_k` whose suffix and prefix agree (types and
//! intervals; self-joins included) with `c ≥ m`, up to `max_level`. Its bounds (the successor
//! bounds of [`crate::episode::bound`], PreElim) only skip candidates with `c < m`, and the
//! significance test mines surrogates without `max_candidates` or a time budget, so neither
//! changes `F_k`.
//!
//! **Anti-monotonicity.** For an episode `e′ = e₁ … e_{k+1}` with prefix `p = e₁ … e_k` and
//! suffix `s = e₂ … e_{k+1}` (the sub-episodes with the same types and gaps),
//! `c(e′) ≤ min(c(p), c(s))`. *Proof.* Take a largest set of pairwise non-overlapped
//! occurrences of `e′`. Dropping each one's last event gives an occurrence of `p`: the events
//! stay in stream order and each kept gap keeps its delay, so every gap rule (its interval, a
//! zero delay only where the interval admits it and only from a smaller to a larger type id,
//! never between two events of one type; [`crate::episode::model`]) still holds. Its span
//! `[t_first, t_k]` lies inside the occurrence's, so the later of two truncated occurrences
//! still starts strictly after the earlier one ends: the truncations are pairwise
//! non-overlapped and distinct, and `c(p)` (the largest such set) is at least as large.
//! Dropping the first event instead gives occurrences of `s` whose spans also lie inside the
//! originals'. ∎ A single node is the case `k = 1` (an occurrence of `a –iv→ b` holds one of
//! `a` and one of `b`). Repeated types change nothing in the argument (it never compares
//! types), nor do lag-0 gaps (it keeps each gap as it was).
//!
//! By induction on `k`, `F_k = {e : |e| = k, c(e) ≥ m}` over every episode of `k` nodes with
//! gaps from the configured intervals: a `k`-episode with `c ≥ m` has a prefix and a suffix
//! with `c ≥ m`, which are in `F_{k−1}` and join to it (and at `k = 2` its two types are in
//! `F₁`). So `M_k = max{c(e) : |e| = k, c(e) ≥ m}`, 0 for the empty set.
//!
//! # The search
//! Per size `k` the search keeps the episodes it has counted exactly and a **floor** `φ_k`
//! with the invariant *every `k`-episode with `c ≥ φ_k` has been counted* (`φ_k ≥ m`).
//! `ensure(k, x)` lowers the floor to `x ≥ m`:
//!
//! * `k = 2`: count every pair `a –iv→ b` whose bound
//!   `u(a, iv, b) = min(c(a), c(b), |Succ(a, iv, b)|)` is at least `x` (and below the old
//!   floor, the rest having been counted before). `|Succ|`, the number of events of `a`
//!   followed by some `b` within the gap, bounds the count ([`pair_successor_counts`], proof in
//!   [`crate::episode::bound`]); the successor rows of a type are computed only once
//!   `c(a) ≥ x` makes it a possible first or second type. A pair with `c ≥ x` has
//!   `u ≥ c ≥ x` and is counted.
//! * `k ≥ 3`: `ensure(k − 1, x)`, then count every join `e = α ⋈ β` of counted
//!   `(k − 1)`-episodes whose bound `u(e) = min(c(α), c(β), |Ends(α) ∩ Succ(a, iv, y)|)` is at
//!   least `x`, where `a –iv→ y` is `e`'s last pair and the third term is the miner's join
//!   bound ([`crate::episode::bound`], proof there). A join is examined once, in the round
//!   whose `[x, old floor)` holds `min(c(α), c(β))`; one whose `u` is below `x` is set aside
//!   with `u` and counted in the first later round whose floor reaches it. A `k`-episode with
//!   `c ≥ x` has prefix and suffix with `c ≥ x` (anti-monotonicity), which the floor of
//!   `k − 1` guarantees are counted, so it is one of these joins, and `u ≥ c ≥ x` counts it.
//!
//! For `k = 2, 3, …` in turn, `x` starts at an upper bound of `M_k` (the largest single count
//! for `k = 2`, `M_{k−1}` after: a largest `k`-episode's prefix is a frequent `(k − 1)`-episode
//! at least as large) and falls geometrically (by a quarter, or by half for a counter whose
//! rounds cost a round trip to a device; the result does not depend on the rate), never below
//! `m` nor below `best + 1`, where
//! `best` is the largest count `≥ m` counted at size `k`. It stops when
//!
//! * `best ≥ m` and `best ≥ x − 1`: every uncounted `k`-episode has `c < x`, so `c ≤ best`, and
//!   `M_k = best`; or
//! * `x = m`: every frequent `k`-episode is counted, `M_k = best` (0 when none reached `m`).
//!
//! When `M_k = 0` no larger size has a frequent episode (its prefix would be one) and the
//! search stops. Every count is the counter's exact count (through [`Counter`], in batches of
//! [`Counter::preferred_batch`], so a GPU counter counts them), or, for a counter that counts
//! pairs of distinct types on the host with [`count_pair`](crate::episode::count_pair)
//! ([`Counter::counts_pairs_on_host`]: the CPU's), the same count made by the search together
//! with the pair's two bit sets ([`pair_count_and_bits`]); every skipped episode is skipped
//! by one of the bounds above, so the result equals full mining's. A counter that
//! computes join bounds where it holds the stream ([`Counter::join_bounds`]: a GPU counter,
//! `kernels/bounds.cu`) gets each round's examined joins as one
//! [`JoinBounds`] job and returns the same numbers as
//! [`join_bounds_cpu`]; otherwise the search computes them itself, each prefix's ends and
//! each last pair's successors once per search.
//!
//! **What it costs.** Every episode the search counts is one that mining with bounds counts
//! too (a single type; a pair of frequent types whose successor bound reaches `m`; a join of
//! frequent episodes whose join bound reaches `m`), and each once, so it never counts more
//! than mining. Certifying `M_k` needs every `(k − 1)`-episode with `c > M_k` counted, so it
//! counts about what mining at the threshold `M_K + 1` instead of `m` counts. On dithered
//! surrogates the largest counts (fast units, self-episodes) lie far above `m` and that is a
//! small part of mining; on streams whose deepest maximum is close to `m` it approaches
//! mining. The successor rows of the pair bound are computed only for types whose single count
//! reaches the floor.
//!
//! # References
//! Torre, Picado-Muiño, Denker, Borgelt, Grün, "Statistical evaluation of synchronous spike
//! patterns extracted by frequent item set mining", Front. Comput. Neurosci. 7:132 (2013)
//! (pattern spectrum filtering: a pattern's significance from its (size, count) signature
//! against the surrogates' largest counts); Quaglio, Yegenoglu, Torre, Endres, Grün, "Detection
//! and evaluation of spatio-temporal spike patterns in massively parallel spike train data with
//! SPADE", Front. Comput. Neurosci. 11:41 (2017) (the spectrum for patterns with delays);
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`), §5 (anti-monotone candidate generation).

use std::collections::{BinaryHeap, HashMap};

use rayon::prelude::*;

use crate::episode::bound::{
    JoinBounds, PairScan, ReachPath, and_count, join_bounds_cpu, pair_count_and_bits,
    pair_successor_counts, successor_bits,
};
use crate::episode::candidates::level_one;
use crate::episode::count::TypeIndex;
use crate::episode::{CountKind, Counter, Episode, MineError, MinerConfig, Progress};
use crate::event::{EventStream, EventType};

/// The result of [`max_count_by_size`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct SpectrumMax {
    /// The minimum count the configuration's threshold resolved to, occurrences.
    pub min_count: u64,
    /// `M_k` at index `k`: the largest count among the frequent episodes of `k` nodes, 0 when
    /// none is frequent; indices 0 and 1 are 0. Shape `[max_level + 1]`, occurrences.
    pub max_by_size: Vec<u64>,
    /// Candidates counted exactly by the search (single types included): its work measure.
    pub counted: u64,
}

/// The largest count among the frequent episodes of each size (2..=`config.max_level`) of
/// `stream`, equal to the maxima of [`mine_with`](crate::episode::mine_with)`(stream, config,
/// counter, ..)`'s episodes per size, by the exact threshold search of the module
/// documentation. `counter` must have been built for `stream` (CPU or GPU: only its exact
/// counts are used); `progress` is asked between batches whether to stop.
///
/// `max_level`, the intervals and the threshold of `config` are what change the result;
/// `strategy`, `bounds`, `max_candidates` and `time_budget_s` are not used (full mining
/// without limits is what is matched).
///
/// # Errors
/// [`MineError`] for settings [`mine`](crate::episode::mine) refuses, a failing counter, or
/// [`MineError::Cancelled`] when `progress` asks to stop.
pub fn max_count_by_size(
    stream: &EventStream,
    config: &MinerConfig,
    counter: &dyn Counter,
    progress: &dyn Progress,
) -> Result<SpectrumMax, MineError> {
    config.validate()?;
    let started = std::time::Instant::now();
    let m = config.threshold.min_count(stream.len(), stream.span())?;
    let max_level = config.max_level;
    let mut out = SpectrumMax {
        min_count: m,
        max_by_size: vec![0; max_level + 1],
        counted: 0,
    };
    if max_level < 2 {
        return Ok(out);
    }
    out.counted += stream.alphabet().len() as u64;
    let mut search = Search::with_singles(stream, config, counter, progress, m)?;
    let Some(mut upper) = search.pairs.c1.iter().copied().filter(|&c| c >= m).max() else {
        return Ok(out);
    };
    for k in 2..=max_level {
        let mut x = upper.max(m);
        let found = loop {
            search.ensure(k, x)?;
            let best = search.best(k);
            if best >= m && best + 1 >= x {
                break best;
            }
            if x == m {
                break 0;
            }
            x = lower(x, counter.coarse_thresholds()).max(best + 1).max(m);
        };
        out.max_by_size[k] = found;
        if found == 0 {
            break;
        }
        upper = found;
    }
    out.counted += search.counted;
    tracing::trace!(
        max_by_size = ?out.max_by_size,
        min_count = m,
        counted = out.counted,
        counted_by_size = ?search.levels.iter().map(|l| l.episodes.len()).collect::<Vec<_>>(),
        at_floor_by_size = ?search
            .levels
            .iter()
            .map(|l| l.counts.iter().filter(|&&c| c >= l.floor).count())
            .collect::<Vec<_>>(),
        floors = ?search.levels.iter().map(|l| l.floor).collect::<Vec<_>>(),
        set_aside = ?search.levels.iter().map(|l| l.pending.len()).collect::<Vec<_>>(),
        active_types = search.pairs.active,
        count_s = search.count_s,
        seconds = started.elapsed().as_secs_f64(),
        "Spectrum search done."
    );
    Ok(out)
}

/// What [`max_count_at_floor`] finds: the largest count of each size among the episodes whose
/// count reaches one fixed floor.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct FloorMax {
    /// The minimum count the configuration's threshold resolved to, occurrences.
    pub min_count: u64,
    /// The floor used: the one asked for, raised to `min_count`, occurrences.
    pub floor: u64,
    /// At index `k`: `max{c(e) : |e| = k, c(e) ≥ floor}`, 0 when no `k`-episode reaches the
    /// floor; indices 0 and 1 are 0. Shape `[max_level + 1]`, occurrences.
    pub best_by_size: Vec<u64>,
}

impl FloorMax {
    /// `M_k` of [`max_count_by_size`] when this pass determines it, for every size:
    /// `best_k` where it reaches the floor (every `k`-episode with `c ≥ floor` was counted,
    /// so none uncounted beats it); 0 from the first size with none at a floor equal to the
    /// minimum count (and above it: a frequent episode's prefix would be frequent). `None`
    /// when some size has no episode at a floor above the minimum count: its maximum lies
    /// below the floor, which this pass does not search (run [`max_count_by_size`]).
    #[must_use]
    pub fn resolved(&self) -> Option<Vec<u64>> {
        let mut out = vec![0; self.best_by_size.len()];
        for (k, &best) in self.best_by_size.iter().enumerate().skip(2) {
            if best >= self.floor && best >= self.min_count {
                out[k] = best;
            } else if self.floor == self.min_count {
                break;
            } else {
                return None;
            }
        }
        Some(out)
    }
}

/// The largest count of each size (2..=`config.max_level`) among the episodes of `stream`
/// whose exact count reaches `floor` (raised to the configuration's minimum count `m`): the
/// threshold search of the module documentation run once, with every size's floor set to
/// `floor` (`ensure(max_level, floor)`), instead of lowered round by round. Every
/// `k`-episode with `c ≥ floor` is counted (the floor's invariant), so the result does not
/// depend on the bounds or the counter, and [`FloorMax::resolved`] gives `M_k` wherever the
/// floor is at or below it. A floor close below the deepest `M_k` costs about what the
/// round-by-round search costs (it ends at `M_K + 1`), in one round per size: the form a
/// device runs for many surrogates at once (`device::episodes::floor`), which this pass is the
/// reference of.
///
/// # Errors
/// As [`max_count_by_size`].
pub fn max_count_at_floor(
    stream: &EventStream,
    config: &MinerConfig,
    counter: &dyn Counter,
    progress: &dyn Progress,
    floor: u64,
) -> Result<FloorMax, MineError> {
    config.validate()?;
    let m = config.threshold.min_count(stream.len(), stream.span())?;
    let floor = floor.max(m);
    let max_level = config.max_level;
    let mut out = FloorMax {
        min_count: m,
        floor,
        best_by_size: vec![0; max_level + 1],
    };
    if max_level < 2 {
        return Ok(out);
    }
    let mut search = Search::with_singles(stream, config, counter, progress, m)?;
    search.ensure(max_level, floor)?;
    for k in 2..=max_level {
        out.best_by_size[k] = search.levels[k]
            .counts
            .iter()
            .copied()
            .filter(|&c| c >= floor)
            .max()
            .unwrap_or(0);
    }
    Ok(out)
}

/// The pairs `(a, interval index, b)` whose successor bound
/// `min(c(a), c(b), |Succ(a, iv, b)|)` (module documentation) reaches `floor`, ordered by
/// `(a, interval, b)`, from the single counts `c1` (shape `[types]`, occurrences): every pair
/// with `c ≥ floor` is among them. `index` is `stream`'s ([`TypeIndex::new`]). The first
/// step of [`max_count_at_floor`], which a device pass takes from the host
/// (`device::episodes::floor`).
#[must_use]
pub fn pair_candidates_at(
    stream: &EventStream,
    index: &TypeIndex,
    config: &MinerConfig,
    c1: &[u64],
    floor: u64,
) -> Vec<(EventType, usize, EventType)> {
    let active: Vec<EventType> = (0..c1.len())
        .filter(|&t| c1[t] >= floor)
        .map(|t| EventType(u32::try_from(t).unwrap_or(u32::MAX)))
        .collect();
    if active.is_empty() {
        return Vec::new();
    }
    let rows = pair_successor_counts(stream, index, &active, &config.intervals);
    let n_types = stream.alphabet().len();
    let width = config.intervals.len() * n_types;
    let mut out = Vec::new();
    for (i, &a) in active.iter().enumerate() {
        let row = &rows[i * width..(i + 1) * width];
        for v in 0..config.intervals.len() {
            for &b in &active {
                let bound = c1[a.index()]
                    .min(c1[b.index()])
                    .min(u64::from(row[v * n_types + b.index()]));
                if bound >= floor {
                    out.push((a, v, b));
                }
            }
        }
    }
    out
}

/// The next floor to try below `x`: about three quarters of it, or half of it for a counter
/// whose rounds are costly ([`Counter::coarse_thresholds`]: fewer rounds that count more).
fn lower(x: u64, coarse: bool) -> u64 {
    x - (x / if coarse { 2 } else { 4 }).max(1)
}

/// A hashable key of a run of types and gaps (gaps by bit pattern: they all come from the
/// configuration's intervals).
type Key = (Vec<u32>, Vec<(u64, u64)>);

fn key(types: &[EventType], intervals: &[crate::episode::Interval]) -> Key {
    (
        types.iter().map(|t| t.0).collect(),
        intervals.iter().map(|iv| iv.bits()).collect(),
    )
}

/// The counted episodes of one size and their floor (module documentation).
#[derive(Default)]
struct Level {
    /// Episodes counted exactly, in the order counted.
    episodes: Vec<Episode>,
    /// Their counts. Shape `[episodes]`, occurrences.
    counts: Vec<u64>,
    /// Every episode of this size with a count ≥ `floor` is in `episodes` (`u64::MAX`: none
    /// counted yet).
    floor: u64,
    /// Group ids by key: the group of a run of types and gaps holds the indices into
    /// `episodes` of the episodes with that prefix (all nodes but the last).
    by_prefix: HashMap<Key, u32>,
    /// The groups. Shape `[groups][members]`.
    groups: Vec<Vec<u32>>,
    /// Per episode, the group of its suffix (all nodes but the first): its join partners
    /// of the next size, found once rather than hashed again every round. Shape `[episodes]`.
    partners: Vec<u32>,
    /// The largest count ≥ the minimum count among `episodes`; 0 when none.
    best: u64,
    /// Joins seen but not counted, as (bound, α, β) with α and β indices into the previous
    /// size's episodes, largest bound first (below the floor; counted once the floor falls
    /// to it).
    pending: BinaryHeap<(u64, u32, u32)>,
}

impl Level {
    fn new() -> Self {
        Self {
            floor: u64::MAX,
            ..Self::default()
        }
    }

    /// The group of `key`, made empty when new.
    fn group(&mut self, key: Key) -> u32 {
        let next = u32::try_from(self.groups.len()).unwrap_or(u32::MAX);
        let g = *self.by_prefix.entry(key).or_insert(next);
        if g == next {
            self.groups.push(Vec::new());
        }
        g
    }

    fn push(&mut self, episode: Episode, count: u64, min_count: u64) {
        let k = episode.len();
        let id = u32::try_from(self.episodes.len()).unwrap_or(u32::MAX);
        let prefix = self.group(key(
            &episode.types()[..k - 1],
            &episode.intervals()[..k - 2],
        ));
        self.groups[prefix as usize].push(id);
        let suffix = self.group(key(&episode.types()[1..], &episode.intervals()[1..]));
        self.partners.push(suffix);
        if count >= min_count {
            self.best = self.best.max(count);
        }
        self.episodes.push(episode);
        self.counts.push(count);
    }
}

/// Level 2's inputs: the single counts, the types by count, the successor rows computed so
/// far.
struct Pairs {
    /// Exact single-type counts. Shape `[types]`.
    c1: Vec<u64>,
    /// The types with a count ≥ the minimum count, largest count first.
    order: Vec<EventType>,
    /// `order[..active]` have their successor rows.
    active: usize,
    /// Per active type (as in `order`): `|Succ(a, iv, x)|` for every interval and type.
    /// Shape `[active][intervals][types]`, flattened per type.
    rows: Vec<Vec<u32>>,
}

struct Search<'a> {
    stream: &'a EventStream,
    config: &'a MinerConfig,
    counter: &'a dyn Counter,
    progress: &'a dyn Progress,
    index: TypeIndex,
    min_count: u64,
    pairs: Pairs,
    /// `levels[k]` for size `k` (0 and 1 unused).
    levels: Vec<Level>,
    /// `Succ(a, iv, x)` as bits over the events of `a`, per pair asked for, by
    /// `(a, interval bits, x)`.
    successors: HashMap<(u32, (u64, u64), u32), u32>,
    /// The bit sets `successors` holds ids of. Shape `[pairs][words]`.
    successor_store: Vec<Vec<u64>>,
    /// Per size, per counted episode `β` (as in its level's `episodes`), the id in
    /// `successor_store` of its last pair's successors, `u32::MAX` until asked for (a join's
    /// last pair is its partner's, so each join looks it up without hashing).
    successor_of: Vec<Vec<u32>>,
    /// Per size, per counted episode (as in its level's `episodes`), the bit set of the events
    /// ending an occurrence of it, over its last type's events, once asked for.
    ends_bits: Vec<Vec<Option<Vec<u64>>>>,
    counted: u64,
    /// Seconds spent in the counter.
    count_s: f64,
}

impl<'a> Search<'a> {
    fn new(
        stream: &'a EventStream,
        config: &'a MinerConfig,
        counter: &'a dyn Counter,
        progress: &'a dyn Progress,
        min_count: u64,
        c1: Vec<u64>,
    ) -> Self {
        let mut order: Vec<EventType> = (0..c1.len())
            .filter(|&t| c1[t] >= min_count)
            .map(|t| EventType(u32::try_from(t).unwrap_or(u32::MAX)))
            .collect();
        order.sort_by_key(|t| (std::cmp::Reverse(c1[t.index()]), t.0));
        Self {
            stream,
            config,
            counter,
            progress,
            index: TypeIndex::new(stream),
            min_count,
            pairs: Pairs {
                c1,
                order,
                active: 0,
                rows: Vec::new(),
            },
            levels: (0..=config.max_level).map(|_| Level::new()).collect(),
            successors: HashMap::new(),
            successor_store: Vec::new(),
            successor_of: (0..=config.max_level).map(|_| Vec::new()).collect(),
            ends_bits: (0..=config.max_level).map(|_| Vec::new()).collect(),
            counted: 0,
            count_s: 0.0,
        }
    }

    /// [`Search::new`] after counting every single type exactly (`min_count`: the
    /// configuration's minimum count).
    fn with_singles(
        stream: &'a EventStream,
        config: &'a MinerConfig,
        counter: &'a dyn Counter,
        progress: &'a dyn Progress,
        min_count: u64,
    ) -> Result<Self, MineError> {
        let c1 = count_batched(counter, progress, level_one(stream.alphabet().len()))?
            .into_iter()
            .map(|(_, c)| c)
            .collect();
        Ok(Self::new(stream, config, counter, progress, min_count, c1))
    }

    fn best(&self, k: usize) -> u64 {
        self.levels[k].best
    }

    /// Lowers the floor of size `k` to `x` (module documentation).
    fn ensure(&mut self, k: usize, x: u64) -> Result<(), MineError> {
        debug_assert!(x >= self.min_count);
        let old = self.levels[k].floor;
        if x >= old {
            return Ok(());
        }
        if k == 2 {
            let candidates = self.pair_candidates(x, old);
            if self.counter.counts_pairs_on_host() && !self.counter.has_join_bounds() {
                self.count_pairs_with_bits(candidates)?;
            } else {
                self.count_into(k, candidates)?;
            }
        } else {
            self.ensure(k - 1, x)?;
            let candidates = self.join_candidates(k, x, old);
            self.count_into(k, candidates)?;
        }
        self.levels[k].floor = x;
        Ok(())
    }

    /// The pairs with bound in `[x, old)`, after computing the successor rows of the types
    /// whose count reached `x`.
    fn pair_candidates(&mut self, x: u64, old: u64) -> Vec<Episode> {
        let p = &mut self.pairs;
        let from = p.active;
        while p.active < p.order.len() && p.c1[p.order[p.active].index()] >= x {
            p.active += 1;
        }
        if p.active > from {
            let rows = pair_successor_counts(
                self.stream,
                &self.index,
                &p.order[from..p.active],
                &self.config.intervals,
            );
            let width = self.config.intervals.len() * self.stream.alphabet().len();
            p.rows
                .extend(rows.chunks(width.max(1)).map(<[u32]>::to_vec));
        }
        let n_types = self.stream.alphabet().len();
        let mut out = Vec::new();
        for (i, &a) in p.order[..p.active].iter().enumerate() {
            let ca = p.c1[a.index()];
            for (v, &iv) in self.config.intervals.iter().enumerate() {
                let row = &p.rows[i][v * n_types..(v + 1) * n_types];
                for &b in &p.order[..p.active] {
                    let bound = ca.min(p.c1[b.index()]).min(u64::from(row[b.index()]));
                    if bound >= x && bound < old {
                        out.push(Episode::new(vec![a, b], vec![iv]));
                    }
                }
            }
        }
        out
    }

    /// The joins to count for the floor `x` (the old floor `old`): those set aside earlier
    /// whose bound reached `x`, and the new joins `α ⋈ β` of counted `(k − 1)`-episodes
    /// whose smaller count lies in `[x, old)` and whose successor bound reaches `x` (the
    /// others are set aside with their bound). Each prefix's joins come together (the CPU
    /// counter shares a prefix's ends among them).
    fn join_candidates(&mut self, k: usize, x: u64, old: u64) -> Vec<Episode> {
        let level = &mut self.levels[k];
        // The joins set aside earlier whose bound reaches `x`, as (α, β) indices into `prev`.
        let mut joins: Vec<(u32, u32)> = Vec::new();
        while let Some(&(bound, a, b)) = level.pending.peek() {
            if bound < x {
                break;
            }
            level.pending.pop();
            joins.push((a, b));
        }
        if self.counter.has_join_bounds() {
            self.device_bounds(k, x, old, &mut joins);
        } else {
            self.host_bounds(k, x, old, &mut joins);
        }
        let (below, _) = self.levels.split_at(k);
        let prev = &below[k - 1];
        // Each prefix's joins together, in a fixed order.
        joins.sort_unstable();
        joins
            .into_iter()
            .map(|(a, b)| {
                let (alpha, beta) = (&prev.episodes[a as usize], &prev.episodes[b as usize]);
                let mut types = alpha.types().to_vec();
                types.push(beta.types()[k - 2]);
                let mut intervals = alpha.intervals().to_vec();
                intervals.push(beta.intervals()[k - 3]);
                Episode::new(types, intervals)
            })
            .collect()
    }

    /// The joins of size `k` examined for the floor `x` (old floor `old`): `α ⋈ β` of counted
    /// `(k − 1)`-episodes whose smaller count lies in `[x, old)`, each with that count.
    fn examined(&self, k: usize, x: u64, old: u64) -> Vec<(u32, u32, u64)> {
        let prev = &self.levels[k - 1];
        let mut out = Vec::new();
        for (i, (&group, &ca)) in prev.partners.iter().zip(&prev.counts).enumerate() {
            if ca < x {
                continue;
            }
            for &j in &prev.groups[group as usize] {
                let by_counts = ca.min(prev.counts[j as usize]);
                if by_counts >= x && by_counts < old {
                    out.push((u32::try_from(i).unwrap_or(u32::MAX), j, by_counts));
                }
            }
        }
        out
    }

    /// The examined joins' successor bounds from the counter ([`Counter::join_bounds`], on
    /// the device that holds the stream; on the host when it declines): those reaching `x`
    /// go to `joins`, the others are set aside.
    fn device_bounds(&mut self, k: usize, x: u64, old: u64, joins: &mut Vec<(u32, u32)>) {
        let examined = self.examined(k, x, old);
        if examined.is_empty() {
            return;
        }
        let (below, above) = self.levels.split_at_mut(k);
        let (prev, level) = (&below[k - 1], &mut above[0]);
        let mut job = JoinBounds::default();
        let mut pair_of: HashMap<(u32, (u64, u64), u32), u32> = HashMap::new();
        let mut last_prefix: Option<(u32, u32)> = None;
        for &(i, j, _) in &examined {
            let alpha = &prev.episodes[i as usize];
            let p = match last_prefix {
                Some((a, p)) if a == i => p,
                _ => {
                    job.prefixes.push(alpha.clone());
                    let p = u32::try_from(job.prefixes.len() - 1).unwrap_or(u32::MAX);
                    last_prefix = Some((i, p));
                    p
                }
            };
            let beta = &prev.episodes[j as usize];
            let (last, iv, next) = (
                alpha.types()[k - 2],
                beta.intervals()[k - 3],
                beta.types()[k - 2],
            );
            let q = *pair_of
                .entry((last.0, iv.bits(), next.0))
                .or_insert_with(|| {
                    job.pairs.push((last, iv, next));
                    u32::try_from(job.pairs.len() - 1).unwrap_or(u32::MAX)
                });
            job.joins.push((p, q));
        }
        let bounds = match self.counter.join_bounds(&job) {
            Some(b) if b.len() == job.joins.len() => b,
            _ => join_bounds_cpu(&self.index, &job),
        };
        for (&(i, j, by_counts), b) in examined.iter().zip(bounds) {
            let bound = by_counts.min(b);
            if bound >= x {
                joins.push((i, j));
            } else {
                level.pending.push((bound, i, j));
            }
        }
    }

    /// The examined joins' successor bounds on the host, each prefix's ends and each last
    /// pair's successors computed once per search: those reaching `x` go to `joins`, the
    /// others are set aside.
    fn host_bounds(&mut self, k: usize, x: u64, old: u64, joins: &mut Vec<(u32, u32)>) {
        let examined = self.examined(k, x, old);
        let (below, above) = self.levels.split_at_mut(k);
        let (prev, level) = (&below[k - 1], &mut above[0]);
        let index = &self.index;
        let mut path = ReachPath::default();
        let ends_bits = &mut self.ends_bits[k - 1];
        ends_bits.resize_with(prev.episodes.len(), || None);
        let successor_of = &mut self.successor_of[k - 1];
        successor_of.resize(prev.episodes.len(), u32::MAX);
        for (i, j, by_counts) in examined {
            let alpha = &prev.episodes[i as usize];
            let bits = ends_bits[i as usize].get_or_insert_with(|| {
                let mut bits = Vec::new();
                path.end_bits(index, alpha, &mut bits);
                bits
            });
            let slot = &mut successor_of[j as usize];
            if *slot == u32::MAX {
                // β's last pair `a –iv→ y` starts at α's last type `a` (β's prefix is α's
                // suffix).
                let beta = &prev.episodes[j as usize];
                let (a, iv, y) = (
                    beta.types()[k - 3],
                    beta.intervals()[k - 3],
                    beta.types()[k - 2],
                );
                let store = &mut self.successor_store;
                *slot = *self
                    .successors
                    .entry((a.0, iv.bits(), y.0))
                    .or_insert_with(|| {
                        store.push(successor_bits(index, a, iv, y));
                        u32::try_from(store.len() - 1).unwrap_or(u32::MAX)
                    });
            }
            let succ = &self.successor_store[*slot as usize];
            let bound = by_counts.min(and_count(bits, succ));
            if bound >= x {
                joins.push((i, j));
            } else {
                level.pending.push((bound, i, j));
            }
        }
    }

    /// Counts the pairs `candidates` into size 2 for a counter that counts pairs on the host
    /// ([`Counter::counts_pairs_on_host`]): each pair of distinct types here, with its count,
    /// its end bits and its successor bits from one pass ([`pair_count_and_bits`]; the join
    /// bounds of size 3 and 4 ask for both), the pairs of a repeated type through the
    /// counter first. The same counts as [`Search::count_into`] (the level's order of
    /// episodes differs, which nothing depends on).
    fn count_pairs_with_bits(&mut self, candidates: Vec<Episode>) -> Result<(), MineError> {
        let (scanned, repeated): (Vec<Episode>, Vec<Episode>) = candidates
            .into_iter()
            .partition(|e| e.types()[0] != e.types()[1]);
        self.count_into(2, repeated)?;
        if self.progress.cancelled() {
            return Err(MineError::Cancelled);
        }
        self.counted += scanned.len() as u64;
        let started = std::time::Instant::now();
        let index = &self.index;
        let scans: Vec<PairScan> = scanned
            .par_iter()
            .map(|e| pair_count_and_bits(index, e.types()[0], e.intervals()[0], e.types()[1]))
            .collect();
        self.count_s += started.elapsed().as_secs_f64();
        for (e, scan) in scanned.into_iter().zip(scans) {
            let (a, iv, x) = (e.types()[0], e.intervals()[0], e.types()[1]);
            let store = &mut self.successor_store;
            let id = *self
                .successors
                .entry((a.0, iv.bits(), x.0))
                .or_insert_with(|| {
                    store.push(scan.succ);
                    u32::try_from(store.len() - 1).unwrap_or(u32::MAX)
                });
            self.levels[2].push(e, scan.count, self.min_count);
            let n = self.levels[2].episodes.len();
            self.successor_of[2].resize(n, u32::MAX);
            self.successor_of[2][n - 1] = id;
            self.ends_bits[2].resize_with(n, || None);
            self.ends_bits[2][n - 1] = Some(scan.ends);
        }
        Ok(())
    }

    /// Counts `candidates` exactly, in the counter's batches, into size `k`.
    fn count_into(&mut self, k: usize, candidates: Vec<Episode>) -> Result<(), MineError> {
        self.counted += candidates.len() as u64;
        let started = std::time::Instant::now();
        let counted = count_batched(self.counter, self.progress, candidates)?;
        self.count_s += started.elapsed().as_secs_f64();
        for (e, c) in counted {
            self.levels[k].push(e, c, self.min_count);
        }
        Ok(())
    }
}

/// The exact counts of `episodes`, in batches of [`Counter::preferred_batch`], each episode
/// with its count; `progress` is asked before each batch whether to stop.
fn count_batched(
    counter: &dyn Counter,
    progress: &dyn Progress,
    episodes: Vec<Episode>,
) -> Result<Vec<(Episode, u64)>, MineError> {
    let batch = counter.preferred_batch().max(1);
    let mut out = Vec::with_capacity(episodes.len());
    let mut rest = episodes.into_iter().peekable();
    while rest.peek().is_some() {
        if progress.cancelled() {
            return Err(MineError::Cancelled);
        }
        let chunk: Vec<Episode> = rest.by_ref().take(batch).collect();
        let counts = counter.count(CountKind::Exact, &chunk)?;
        out.extend(chunk.into_iter().zip(counts));
    }
    Ok(out)
}
