//! Incremental counting over overlapping windows of one stream (a sliding window's
//! consecutive positions), with counts exactly equal to counting each window from scratch.
//!
//! A window that moves by one hop shares almost all of its events with the previous one, and
//! level 2 (every ordered pair of frequent types × every interval) dominates its mining. This
//! module keeps, per candidate episode, the **chain of occurrence ends** of the previous window
//! and, for the next window, recomputes only its beginning (until it meets the cached chain)
//! and its end (the newly arrived events). Two-node episodes use a merge-free two-pointer scan,
//! longer ones the exact state machine over a lazily merged stretch of their types' events.
//!
//! # Why the chain is exact
//! The exact count (the paper's Algorithm 1, [`crate::episode::count_exact`]; [`count_pair`]
//! for two nodes) is the greedy earliest-end selection of non-overlapped occurrences: after a
//! completion at `T` the machine's state is fully determined by `T` (empty lists, a new
//! occurrence must start after `T`), so its completion times `e₁ < e₂ < …` satisfy
//! `e₁ = next(−∞)` and `e_{k+1} = next(e_k)`, where `next(e)` is the earliest end of an
//! occurrence whose events all lie after `e`. `next(e)` depends on the value `e` and on the
//! events after `e` only, and not on the order of equal-time events (a documented invariant of
//! the counters), so not on the event-type ids of a window either.
//!
//! Let the previous window `O` have chain `c₁ < … < c_m` and newest event time `hi`, and the
//! new window `N` have oldest event time `lo`. Suppose `O` and `N` hold the same events of the
//! episode's types in `[lo, hi]` (checked per type, bit for bit, before any chain is reused).
//! Build `N`'s chain `d₁, d₂, …` from its own events until some `d_i` equals a cached `c_j`.
//! From there both chains coincide up to `c_m`: for `j ≤ l < m`, `c_{l+1} = next_O(c_l)` is
//! decided by the events in `(c_l, c_{l+1}] ⊆ [lo, hi]` (`c_l ≥ d_i ≥ lo`, `c_{l+1} ≤ hi`),
//! where `N` has exactly the events `O` has, so `next_N(c_l) = c_{l+1}`. After `c_m` the chain
//! is continued on `N`'s events, as the counter would after a completion at `c_m`. If no `d_i`
//! meets the cached chain, `N`'s chain is computed to its end from its own events, which is the
//! count from scratch. Every step reads only `N`'s events or cached values whose validity the
//! overlap check established, so the count is always `N`'s exact count; how much is reused
//! only changes the time it takes.
//!
//! PreElim's count (Algorithm 3) is the exact count of the relaxed episode, whose lower bounds
//! are 0 (Theorem 1 bounds the exact count by it; `tests/episodes_oracle.rs` checks both
//! against the brute-force oracle), so PreElim is counted the same way, from the relaxed
//! episode's chain.
//!
//! Windows that do not overlap as expected (a restart, a gap, different events in the overlap,
//! a unit that appears or vanishes, a hop longer than the window) fail the check for the
//! affected types and are counted from scratch.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`): Algorithm 1 (the exact count, resumed
//! here after a completion), Algorithm 3 and Theorem 1 (PreElim), §5 (level-wise mining).
//!
//! [`count_pair`]: crate::episode::count::count_pair

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::episode::count::{ExactMachine, MergeCursor, TypeIndex, distinct_types};
use crate::episode::counter::{CountError, CountKind, Counter, CpuCounter};
use crate::episode::model::{Episode, Interval};
use crate::event::{Alphabet, EventStream, EventType};

/// [`count_pair`]'s two-pointer pass, resumable: it yields the occurrence ends one at a time
/// and can be restarted right after any end.
///
/// [`count_pair`]: crate::episode::count::count_pair
struct PairScan<'s> {
    a: &'s [f64],
    b: &'s [f64],
    low: f64,
    high: f64,
    /// Next `A` to consider.
    i: usize,
    /// Next `B` to consider.
    j: usize,
    /// End of the last counted occurrence (a new one starts strictly after it).
    last_end: f64,
}

impl<'s> PairScan<'s> {
    fn new(a: &'s [f64], b: &'s [f64], low: f64, high: f64) -> Self {
        Self {
            a,
            b,
            low,
            high,
            i: 0,
            j: 0,
            last_end: f64::NEG_INFINITY,
        }
    }

    /// Puts the scan into the state [`count_pair`] has right after counting an occurrence
    /// ending at `end`: only events after `end` can take part in later occurrences, and the
    /// pointers skip exactly those [`count_pair`]'s pointers would have skipped (both skipped
    /// sets are prefixes of the sorted lists).
    ///
    /// [`count_pair`]: crate::episode::count::count_pair
    fn resume_after(&mut self, end: f64) {
        self.last_end = end;
        self.i = self.a.partition_point(|&x| x <= end);
        self.j = self.b.partition_point(|&x| x <= end);
    }

    /// The end of the next occurrence, or `None` when there is none: the loop of
    /// [`count_pair`], stopped at each count.
    ///
    /// [`count_pair`]: crate::episode::count::count_pair
    fn next_end(&mut self) -> Option<f64> {
        while let Some(&t) = self.b.get(self.j) {
            self.j += 1;
            if t <= self.last_end {
                continue;
            }
            while self.i < self.a.len()
                && (t - self.a[self.i] > self.high || self.a[self.i] <= self.last_end)
            {
                self.i += 1;
            }
            if self.i == self.a.len() {
                // No A left for this or any later B.
                self.j = self.b.len();
                return None;
            }
            if t - self.a[self.i] > self.low {
                self.last_end = t;
                return Some(t);
            }
        }
        None
    }

    /// Skips the `B`s at or before `upto`, which are known to end no occurrence, and the `A`s
    /// the first remaining `B` would skip (a prefix of `a`: the same pointer as scanning there).
    fn skip_ends_upto(&mut self, upto: f64) {
        self.j = self.j.max(self.b.partition_point(|&x| x <= upto));
        if let Some(&t) = self.b.get(self.j) {
            let (last_end, high) = (self.last_end, self.high);
            let skip = self.a[self.i..].partition_point(|&x| t - x > high || x <= last_end);
            self.i += skip;
        }
    }

    /// Appends every remaining occurrence end to `out`.
    fn finish_into(&mut self, out: &mut Vec<f64>) {
        while let Some(end) = self.next_end() {
            out.push(end);
        }
    }
}

/// The chain of occurrence ends of the two-node episode `A → B` with gap `(low, high]`
/// (`A = B` allowed: pass the same list twice), in increasing order: the occurrences that the
/// greedy earliest-end count selects. Its length is the exact non-overlapped count
/// ([`count_pair`], and [`crate::episode::count_exact`] for `A = B`).
///
/// # Units
/// `a`, `b`: the two types' event times, seconds, non-decreasing; `low`, `high`: seconds, the
/// strict lower bound by time ([`Interval::low_by_time`](crate::episode::Interval::low_by_time),
/// just below zero where a zero delay fits) and the inclusive upper one; the ends are event
/// times of `b`, seconds.
///
/// # References
/// Algorithm 1 of Cao et al. (the exact count), specialised to two nodes.
///
/// [`count_pair`]: crate::episode::count::count_pair
#[must_use]
pub fn pair_chain(a: &[f64], b: &[f64], low: f64, high: f64) -> Vec<f64> {
    let mut out = Vec::new();
    PairScan::new(a, b, low, high).finish_into(&mut out);
    out
}

/// The chain of occurrence ends of `A → B` over the lists `a`, `b` (as [`pair_chain`]), reusing
/// `cached`, the chain of the same episode over an earlier, overlapping window whose newest
/// event was at `cached_upto` (seconds).
///
/// The result equals `pair_chain(a, b, low, high)` whenever the earlier window held exactly the
/// events of `a` and `b` that lie in `[lo, cached_upto]`, `lo` being the oldest event of `a`
/// and `b` (the module documentation gives the argument). Let `c_j` be the first cached end at
/// or after `lo`. Every occurrence of the new lists starts after `c_{j−1}`, so none ends before
/// `c_j` (the earlier window's greedy choice), and if one ends at `c_j` (one binary search in
/// `a`), the new chain is `c_j, …, c_m` from the start; otherwise it is rebuilt from the
/// start until it meets a cached end. No new occurrence starting after `c_m` ends at or before
/// `cached_upto` (the earlier window would have counted it), so the scan goes on from the first
/// `B` after `cached_upto`: per window only the first occurrence (rarely) and the newly
/// arrived events are scanned. An empty `cached` says that the earlier window had no
/// occurrence (to count without a cache, use [`pair_chain`]). Any `cached` gives a chain of the
/// new lists' ends without panicking; one that is not strictly increasing up to `cached_upto`
/// is ignored.
///
/// # Units
/// As [`pair_chain`]; `cached_upto` in seconds.
///
/// # References
/// Algorithm 1 of Cao et al., specialised to two nodes and resumed after a completion.
#[must_use]
pub fn update_pair_chain(
    a: &[f64],
    b: &[f64],
    low: f64,
    high: f64,
    cached: &[f64],
    cached_upto: f64,
) -> Vec<f64> {
    let increasing = cached.windows(2).all(|w| w[0] < w[1]);
    if !increasing || !cached.last().is_none_or(|&c| c <= cached_upto) {
        return pair_chain(a, b, low, high);
    }
    update_pair_chain_owned(a, b, low, high, cached.to_vec(), cached_upto)
}

/// [`update_pair_chain`] reusing the cached chain's allocation; `cached` is a chain this module
/// built (strictly increasing, at most `cached_upto`).
fn update_pair_chain_owned(
    a: &[f64],
    b: &[f64],
    low: f64,
    high: f64,
    mut cached: Vec<f64>,
    cached_upto: f64,
) -> Vec<f64> {
    let lo = match (a.first(), b.first()) {
        (Some(&x), Some(&y)) => x.min(y),
        _ => return Vec::new(),
    };
    let j = cached.partition_point(|&c| c < lo);
    let mut scan = PairScan::new(a, b, low, high);
    let out = if j == cached.len() {
        // No cached end at or after lo: no new occurrence ends at or before cached_upto.
        scan.skip_ends_upto(cached_upto);
        Vec::new()
    } else if ends_at(a, cached[j], low, high) {
        // The new chain starts at c_j: keep c_j, …, c_m and go on after cached_upto.
        cached.drain(..j);
        scan.resume_after(cached[cached.len() - 1]);
        scan.skip_ends_upto(cached_upto);
        cached
    } else {
        let mut out = Vec::with_capacity(cached.len() - j + 4);
        let mut meet = Meet::new(&cached[j..]);
        while let Some(d) = scan.next_end() {
            out.push(d);
            match meet.at(d) {
                Meeting::NotYet => {}
                Meeting::Never => break,
                Meeting::Reuse(rest) => {
                    out.extend_from_slice(rest);
                    scan.resume_after(out[out.len() - 1]);
                    scan.skip_ends_upto(cached_upto);
                    break;
                }
            }
        }
        out
    };
    let mut out = out;
    scan.finish_into(&mut out);
    out
}

/// True when some `A` of `a` makes an occurrence ending at `end`: the oldest `A` within `high`
/// of `end` lies more than `low` before it (the comparisons of [`PairScan::next_end`]).
fn ends_at(a: &[f64], end: f64, low: f64, high: f64) -> bool {
    let k = a.partition_point(|&x| end - x > high);
    a.get(k).is_some_and(|&x| end - x > low)
}

/// The chain of occurrence ends of `episode` (any length) over the events of `index`: the
/// completion times of the exact counter, in increasing order. Its length is
/// [`crate::episode::count_exact`]'s count.
///
/// # Units
/// Seconds (event times of the episode's last type).
///
/// # Panics
/// If the episode has more than [`crate::episode::count::MAX_EPISODE_LEN`] nodes.
///
/// # References
/// Algorithm 1 of Cao et al.
#[must_use]
pub fn episode_chain(index: &TypeIndex, episode: &Episode) -> Vec<f64> {
    update_episode_chain(index, episode, &[])
}

/// The chain of occurrence ends of `episode` over the events of `index` (as
/// [`episode_chain`]), reusing `cached`, the chain of the same episode (by type labels and
/// intervals) over an earlier, overlapping window: exact whenever the earlier window held the
/// same events of the episode's types in `[lo, hi]` (`lo` the oldest event time of `index`,
/// `hi` the newest of the earlier window; the argument is in the module documentation). The
/// exact machine runs from the window's start until a completion meets a cached end, jumps to
/// the last cached end, and runs on over the events after it. Any `cached` gives a chain of
/// completions without panicking; only its exactness needs the precondition.
///
/// # Units
/// Seconds.
///
/// # Panics
/// If the episode has more than [`crate::episode::count::MAX_EPISODE_LEN`] nodes.
///
/// # References
/// Algorithm 1 of Cao et al., resumed after a completion (the state is then fully determined
/// by the completion time).
#[must_use]
pub fn update_episode_chain(index: &TypeIndex, episode: &Episode, cached: &[f64]) -> Vec<f64> {
    let set = distinct_types(episode);
    let mut machine = ExactMachine::new(episode, &set);
    let mut cursor = MergeCursor::new(index, &set, f64::NEG_INFINITY);
    let mut out = Vec::with_capacity(cached.len() + 4);
    let mut meet = Meet::new(cached);
    let mut meeting = !cached.is_empty();
    while let Some((t, slot)) = cursor.next_event() {
        if !machine.step(t, slot) {
            continue;
        }
        out.push(t);
        if !meeting {
            continue;
        }
        match meet.at(t) {
            Meeting::NotYet => {}
            Meeting::Never => meeting = false,
            Meeting::Reuse(rest) => {
                meeting = false;
                if let Some(&last) = rest.last() {
                    out.extend_from_slice(rest);
                    machine.reset(last);
                    cursor = MergeCursor::new(index, &set, last);
                }
            }
        }
    }
    out
}

/// Where a chain being rebuilt stands against the cached one.
enum Meeting<'c> {
    /// No cached end equals the new end yet; later ones may.
    NotYet,
    /// Past the cached chain without meeting it (or a cached chain that is not increasing):
    /// nothing to reuse.
    Never,
    /// Met: the cached ends after the meeting point, strictly increasing (maybe none).
    Reuse(&'c [f64]),
}

/// Walks the cached chain alongside the rebuilt one.
struct Meet<'c> {
    cached: &'c [f64],
    j: usize,
}

impl<'c> Meet<'c> {
    fn new(cached: &'c [f64]) -> Self {
        Self { cached, j: 0 }
    }

    /// The rebuilt chain's next end is `d` (ends arrive increasing).
    fn at(&mut self, d: f64) -> Meeting<'c> {
        while self.j < self.cached.len() && self.cached[self.j] < d {
            self.j += 1;
        }
        match self.cached.get(self.j) {
            None => Meeting::Never,
            Some(&c) if c == d => {
                let rest = &self.cached[self.j + 1..];
                // A cached chain is strictly increasing; anything else is not reused.
                if rest.first().is_some_and(|&r| r <= d) || rest.windows(2).any(|w| w[0] >= w[1]) {
                    Meeting::Never
                } else {
                    Meeting::Reuse(rest)
                }
            }
            Some(_) => Meeting::NotYet,
        }
    }
}

/// Cache key of an episode: its types (dense ids of the window that counted it) and its
/// intervals' bits; two-node episodes, the bulk, without allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum ChainKey {
    Pair(u32, u32, u64, u64),
    Long(Box<[u32]>, Box<[u64]>),
}

impl ChainKey {
    /// The key of `episode` with its types mapped by `ty` (`None` if a type has no mapping).
    fn of(episode: &Episode, ty: impl Fn(EventType) -> Option<u32>) -> Option<Self> {
        if let ([a, b], [iv]) = (episode.types(), episode.intervals()) {
            return Some(Self::Pair(
                ty(*a)?,
                ty(*b)?,
                iv.low().to_bits(),
                iv.high().to_bits(),
            ));
        }
        let types = episode
            .types()
            .iter()
            .map(|&t| ty(t))
            .collect::<Option<Box<[u32]>>>()?;
        let intervals = episode
            .intervals()
            .iter()
            .flat_map(|iv| [iv.low().to_bits(), iv.high().to_bits()])
            .collect();
        Some(Self::Long(types, intervals))
    }
}

/// PreElim's episode: the same types with every lower bound relaxed to 0 (its exact count is
/// PreElim's, Algorithm 3).
fn relaxed(episode: &Episode) -> Episode {
    Episode::new(
        episode.types().to_vec(),
        episode
            .intervals()
            .iter()
            .map(|iv| Interval::new(0.0, iv.high()).unwrap_or(*iv))
            .collect(),
    )
}

/// What the last counted window leaves for the next one.
#[derive(Debug)]
struct Snapshot {
    alphabet: Alphabet,
    index: TypeIndex,
    /// Newest event time of the window, seconds (`−∞` when it had none).
    newest_s: f64,
    chains: HashMap<ChainKey, Vec<f64>>,
}

/// The chains of the last window mined through it (every candidate of two or more nodes it
/// counted), for mining the next, overlapping window incrementally (see the module
/// documentation). Owned by whoever mines consecutive windows (the pipeline's episode stage);
/// [`ChainCache::counter`] gives the counter for one window.
#[derive(Debug, Default)]
pub struct ChainCache {
    last: Option<Snapshot>,
}

impl ChainCache {
    /// An empty cache: the first window is counted from scratch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the cached window; the next one is counted from scratch.
    pub fn clear(&mut self) {
        self.last = None;
    }

    /// The counter for `stream` (a window's canonical stream): candidates of two or more nodes
    /// reuse the previous window's chains where its events agree with `stream`'s on their
    /// overlap; level 1 is counted by [`CpuCounter`]. Call [`IncrementalCounter::finish`] after
    /// mining to keep this window's chains for the next; a counter dropped without it leaves
    /// the cache empty (the next window is counted from scratch).
    ///
    /// Costs O(events) (the type index and the overlap check).
    pub fn counter(&mut self, stream: &EventStream) -> IncrementalCounter<'_> {
        let cpu = CpuCounter::new(stream);
        let index = cpu.index();
        let k = index.num_types();
        let mut previous_type = vec![None; k];
        let mut previous = HashMap::new();
        let mut previous_upto = f64::NEG_INFINITY;
        if let Some(snap) = self.last.take() {
            let lo = stream.times().first().copied().unwrap_or(f64::INFINITY);
            let hi = snap.newest_s;
            for (ty, slot) in previous_type.iter_mut().enumerate() {
                let ty = EventType(ty as u32);
                let Some(old) = snap.alphabet.get(stream.alphabet().label(ty)) else {
                    continue;
                };
                if old.index() < snap.index.num_types()
                    && agree_on(snap.index.times(old), index.times(ty), lo, hi)
                {
                    *slot = Some(old.0);
                }
            }
            previous = snap.chains;
            previous_upto = snap.newest_s;
        }
        IncrementalCounter {
            newest_s: stream.times().last().copied().unwrap_or(f64::NEG_INFINITY),
            previous_upto,
            alphabet: stream.alphabet().clone(),
            cpu,
            previous_type,
            previous: Mutex::new(previous),
            current: Mutex::new(HashMap::new()),
            reused: AtomicU64::new(0),
            cache: self,
        }
    }
}

/// True when `old` and `new` (sorted times of one type) hold the same values, bit for bit, in
/// `[lo, hi]`.
fn agree_on(old: &[f64], new: &[f64], lo: f64, hi: f64) -> bool {
    let clip = |s: &[f64]| -> (usize, usize) {
        let from = s.partition_point(|&t| t < lo);
        let to = s.partition_point(|&t| t <= hi).max(from);
        (from, to)
    };
    let (of, ot) = clip(old);
    let (nf, nt) = clip(new);
    ot - of == nt - nf
        && old[of..ot]
            .iter()
            .zip(&new[nf..nt])
            .all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A [`Counter`] for one window that counts candidates of two or more nodes incrementally from
/// the previous window's chains ([`ChainCache`]), exact counts and PreElim alike, and level 1
/// with [`CpuCounter`]. Counts equal [`CpuCounter`]'s on every candidate (the module
/// documentation gives the argument).
pub struct IncrementalCounter<'c> {
    cpu: CpuCounter,
    alphabet: Alphabet,
    newest_s: f64,
    /// Newest event time of the previous window, seconds: its chains are complete up to it.
    previous_upto: f64,
    /// Per type of this window: its id in the previous window, when the two windows hold the
    /// same events of that type on their overlap.
    previous_type: Vec<Option<u32>>,
    previous: Mutex<HashMap<ChainKey, Vec<f64>>>,
    current: Mutex<HashMap<ChainKey, Vec<f64>>>,
    reused: AtomicU64,
    cache: &'c mut ChainCache,
}

impl std::fmt::Debug for IncrementalCounter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncrementalCounter")
            .field("types", &self.previous_type.len())
            .field("reused", &self.reused())
            .finish_non_exhaustive()
    }
}

impl IncrementalCounter<'_> {
    /// Keeps this window's chains in the cache for the next window.
    pub fn finish(self) {
        let Self {
            cpu,
            alphabet,
            newest_s,
            current,
            cache,
            ..
        } = self;
        cache.last = Some(Snapshot {
            alphabet,
            index: cpu.into_index(),
            newest_s,
            chains: current.into_inner(),
        });
    }

    /// Candidates (of two or more nodes, both passes) counted so far from a cached chain; the
    /// rest were counted from scratch.
    #[must_use]
    pub fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }

    fn times(&self, ty: EventType) -> &[f64] {
        let index = self.cpu.index();
        if ty.index() < index.num_types() {
            index.times(ty)
        } else {
            &[]
        }
    }
}

impl Counter for IncrementalCounter<'_> {
    fn name(&self) -> &str {
        self.cpu.name()
    }

    /// Counts from the chains (PreElim: the relaxed episodes' chains); a batch of level-1
    /// candidates only goes to [`CpuCounter`] unchanged.
    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError> {
        if candidates.iter().all(|e| e.len() < 2) {
            return self.cpu.count(kind, candidates);
        }
        let episodes: Vec<std::borrow::Cow<'_, Episode>> = candidates
            .iter()
            .map(|e| match kind {
                CountKind::Exact => std::borrow::Cow::Borrowed(e),
                CountKind::PreElim => std::borrow::Cow::Owned(relaxed(e)),
            })
            .collect();
        let jobs: Vec<Option<Vec<f64>>> = {
            let mut previous = self.previous.lock();
            episodes
                .iter()
                .map(|e| {
                    let key = ChainKey::of(e, |t| self.previous_type.get(t.index()).copied()?)?;
                    previous.remove(&key)
                })
                .collect()
        };
        let index = self.cpu.index();
        let chains: Vec<Vec<f64>> = jobs
            .into_par_iter()
            .zip(episodes.par_iter())
            .map(|(cached, e)| {
                if cached.is_some() {
                    self.reused.fetch_add(1, Ordering::Relaxed);
                }
                match (e.types(), e.intervals(), cached) {
                    ([a, b], [iv], Some(c)) => {
                        let (ta, tb) = (self.times(*a), self.times(*b));
                        let low = iv.low_by_time(a < b);
                        update_pair_chain_owned(ta, tb, low, iv.high(), c, self.previous_upto)
                    }
                    ([a, b], [iv], None) => pair_chain(
                        self.times(*a),
                        self.times(*b),
                        iv.low_by_time(a < b),
                        iv.high(),
                    ),
                    (_, _, c) => update_episode_chain(index, e, c.as_deref().unwrap_or(&[])),
                }
            })
            .collect();
        let counts = chains.iter().map(|c| c.len() as u64).collect();
        let mut current = self.current.lock();
        for (e, chain) in episodes.iter().zip(chains) {
            if let Some(key) = ChainKey::of(e, |t| Some(t.0)) {
                current.insert(key, chain);
            }
        }
        Ok(counts)
    }

    fn events_touched(&self, episode: &Episode) -> u64 {
        self.cpu.events_touched(episode)
    }

    fn preferred_batch(&self) -> usize {
        self.cpu.preferred_batch()
    }

    fn preelim_cheaper(&self, level: usize) -> bool {
        self.cpu.preelim_cheaper(level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::count::count_pair;

    #[test]
    fn chain_length_is_the_pair_count() {
        let a = [0.0, 0.001, 0.0105, 0.02, 0.02, 0.03];
        let b = [0.004, 0.005, 0.015, 0.025, 0.025, 0.0351];
        for (low, high) in [(0.0, 0.005), (0.003, 0.006), (0.004, 0.0051)] {
            let chain = pair_chain(&a, &b, low, high);
            assert_eq!(chain.len() as u64, count_pair(&a, &b, low, high));
            assert!(chain.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn garbage_cache_never_panics() {
        let a = [0.0, 1.0, 2.0];
        let b = [0.5, 1.5, 2.5];
        for cached in [
            vec![],
            vec![0.5, 0.4, 3.0],
            vec![0.5, 0.5],
            vec![f64::NAN, 0.5, f64::INFINITY],
        ] {
            let _ = update_pair_chain(&a, &b, 0.0, 1.0, &cached, 2.0);
            let _ = update_pair_chain(&a, &b, 0.0, 1.0, &cached, f64::NAN);
        }
    }
}
