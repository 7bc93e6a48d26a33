//! Incremental level-2 counting over overlapping windows of one stream (a sliding window's
//! consecutive positions), with counts exactly equal to counting each window from scratch.
//!
//! Level 2 dominates the mining of a sliding window (every ordered pair of frequent types ×
//! every interval), and a window that moves by one hop shares almost all of its events with
//! the previous one. This module keeps, per level-2 candidate, the **chain of occurrence ends**
//! of the previous window and, for the next window, recomputes only its beginning (until it
//! meets the cached chain) and its end (the newly arrived events).
//!
//! # Why the chain is exact
//! The count of `A → B` with gap `(low, high]` ([`count_pair`], i.e. the paper's Algorithm 1
//! for N = 2, [`crate::episode::count_exact`]) is the greedy earliest-end selection: its
//! occurrence ends `e₁ < e₂ < …` satisfy `e₁ = next(−∞)` and `e_{k+1} = next(e_k)`, where
//! `next(e)` is the earliest end `b` of an occurrence `(a, b)` with `e < a` (so also `e < b`,
//! since `low ≥ 0`). `next(e)` depends on the value `e` and on the events after `e` only.
//!
//! Let the previous window `O` have chain `c₁ < … < c_m` and newest event time `hi`, and the
//! new window `N` have oldest event time `lo`. Suppose `O` and `N` hold the same events of types
//! `A` and `B` in `[lo, hi]` (checked per type, bit for bit, before any chain is reused). Build
//! `N`'s chain `d₁, d₂, …` from its own events until some `d_i` equals a cached `c_j`. From
//! there both chains coincide up to `c_m`: for `j ≤ l < m`, `c_{l+1} = next_O(c_l)` is decided
//! by events in `(c_l, c_{l+1}] ⊆ [lo, hi]` (`c_l = d_i ≥ lo` at the start, `c_{l+1} ≤ hi`),
//! where `N` has exactly the events `O` has, so `next_N(c_l) = c_{l+1}`. After `c_m` the chain
//! is continued on `N`'s events, as [`count_pair`] would after counting an occurrence at `c_m`.
//! If no `d_i` meets the cached chain, `N`'s chain is computed to its end from its own events,
//! which is the count from scratch. Every step reads only `N`'s events or cached values whose
//! validity the overlap check established, so the count is always `N`'s exact count; how much
//! is reused only changes the time it takes.
//!
//! Windows that do not overlap as expected (a restart, a gap, different events in the overlap,
//! a unit that appears or vanishes, a hop longer than the window) fail the check for the
//! affected types and are counted from scratch.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`): Algorithm 1 (the exact count this
//! specialises to two nodes and resumes mid-stream), §5 (level-wise mining).
//!
//! [`count_pair`]: crate::episode::count::count_pair

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use rayon::prelude::*;

use crate::episode::count::TypeIndex;
use crate::episode::counter::{CountError, CountKind, Counter, CpuCounter};
use crate::episode::model::Episode;
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
/// `a`, `b`: the two types' event times, seconds, non-decreasing; `low`, `high`: seconds
/// (`0 ≤ low < high`); the ends are event times of `b`, seconds.
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
/// `cached`, the chain of the same episode over an earlier, overlapping window.
///
/// The result equals `pair_chain(a, b, low, high)` whenever the earlier window held exactly the
/// events of `a` and `b` that lie in `[lo, hi]`, where `lo` is the oldest event time of the new
/// window and `hi` the newest event time of the earlier one (see the module documentation for
/// the argument). The chain is rebuilt from the new window's start until it meets a cached
/// end, the cached ends from there are kept, and the chain is continued over the events after
/// the last cached end. Without a meeting point it is the count from scratch. Any `cached`
/// (even one that breaks the precondition) gives a chain of the new lists' ends without
/// panicking; only its exactness needs the precondition.
///
/// # Units
/// As [`pair_chain`].
///
/// # References
/// Algorithm 1 of Cao et al., specialised to two nodes and resumed after a completion.
#[must_use]
pub fn update_pair_chain(a: &[f64], b: &[f64], low: f64, high: f64, cached: &[f64]) -> Vec<f64> {
    let mut out = Vec::with_capacity(cached.len() + 4);
    let mut scan = PairScan::new(a, b, low, high);
    let mut j = 0usize;
    while let Some(d) = scan.next_end() {
        out.push(d);
        while j < cached.len() && cached[j] < d {
            j += 1;
        }
        match cached.get(j) {
            None => break,
            Some(&c) if c == d => {
                // The chains meet at d: the cached ends after it are this window's.
                let rest = &cached[j + 1..];
                if let Some(&last) = rest.last()
                    && last > d
                    && rest.windows(2).all(|w| w[0] < w[1])
                    && rest[0] > d
                {
                    out.extend_from_slice(rest);
                    scan.resume_after(last);
                }
                break;
            }
            Some(_) => {}
        }
    }
    scan.finish_into(&mut out);
    out
}

/// Cache key: the two types (dense ids of the window that counted it) and the interval's bits.
type PairKey = (u32, u32, u64, u64);

fn pair_key(episode: &Episode, a: u32, b: u32) -> PairKey {
    let iv = episode.intervals()[0];
    (a, b, iv.low().to_bits(), iv.high().to_bits())
}

/// What the last counted window leaves for the next one.
#[derive(Debug)]
struct Snapshot {
    alphabet: Alphabet,
    index: TypeIndex,
    /// Newest event time of the window, seconds (`−∞` when it had none).
    newest_s: f64,
    chains: HashMap<PairKey, Vec<f64>>,
}

/// The level-2 chains of the last window mined through it, for mining the next, overlapping
/// window incrementally (see the module documentation). Owned by whoever mines consecutive
/// windows (the pipeline's episode stage); [`PairChains::counter`] gives the counter for one
/// window.
#[derive(Debug, Default)]
pub struct PairChains {
    last: Option<Snapshot>,
}

impl PairChains {
    /// An empty cache: the first window is counted from scratch.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Forgets the cached window; the next one is counted from scratch.
    pub fn clear(&mut self) {
        self.last = None;
    }

    /// The counter for `stream` (a window's canonical stream): level-2 candidates reuse the
    /// previous window's chains where its events agree with `stream`'s on their overlap,
    /// everything else is counted by [`CpuCounter`]. Call [`IncrementalCounter::finish`] after
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
        }
        IncrementalCounter {
            newest_s: stream.times().last().copied().unwrap_or(f64::NEG_INFINITY),
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

/// A [`Counter`] for one window that counts two-node candidates incrementally from the previous
/// window's chains ([`PairChains`]) and everything else with [`CpuCounter`]. Counts equal
/// [`CpuCounter`]'s on every candidate (the module documentation gives the argument).
pub struct IncrementalCounter<'c> {
    cpu: CpuCounter,
    alphabet: Alphabet,
    newest_s: f64,
    /// Per type of this window: its id in the previous window, when the two windows hold the
    /// same events of that type on their overlap.
    previous_type: Vec<Option<u32>>,
    previous: Mutex<HashMap<PairKey, Vec<f64>>>,
    current: Mutex<HashMap<PairKey, Vec<f64>>>,
    reused: AtomicU64,
    cache: &'c mut PairChains,
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
    /// Keeps this window's level-2 chains in the cache for the next window.
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

    /// Two-node candidates counted so far from a cached chain (the rest were counted from
    /// scratch).
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

    /// Exact counts of two-node candidates from the chains; any other batch (PreElim, longer
    /// episodes, a batch mixing lengths) goes to [`CpuCounter`] unchanged.
    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError> {
        if kind != CountKind::Exact || candidates.iter().any(|e| e.len() != 2) {
            return self.cpu.count(kind, candidates);
        }
        let jobs: Vec<Option<Vec<f64>>> = {
            let mut previous = self.previous.lock();
            candidates
                .iter()
                .map(|e| {
                    let [a, b] = [e.types()[0], e.types()[1]]
                        .map(|t| self.previous_type.get(t.index()).copied().flatten());
                    let key = pair_key(e, a?, b?);
                    previous.remove(&key)
                })
                .collect()
        };
        let chains: Vec<Vec<f64>> = jobs
            .into_par_iter()
            .zip(candidates.par_iter())
            .map(|(cached, e)| {
                let (a, b) = (self.times(e.types()[0]), self.times(e.types()[1]));
                let iv = e.intervals()[0];
                match cached {
                    Some(c) => {
                        self.reused.fetch_add(1, Ordering::Relaxed);
                        update_pair_chain(a, b, iv.low(), iv.high(), &c)
                    }
                    None => pair_chain(a, b, iv.low(), iv.high()),
                }
            })
            .collect();
        let counts = chains.iter().map(|c| c.len() as u64).collect();
        let mut current = self.current.lock();
        for (e, chain) in candidates.iter().zip(chains) {
            current.insert(pair_key(e, e.types()[0].0, e.types()[1].0), chain);
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
            let _ = update_pair_chain(&a, &b, 0.0, 1.0, &cached);
        }
    }
}
