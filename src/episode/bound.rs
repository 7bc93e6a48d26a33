//! Sound upper bounds on the non-overlapped count of a join candidate, a few word operations
//! each, so most candidates of a dense level are removed before any count.
//!
//! # The successor bound
//! Let `α` be a frequent k-episode ending with type `a`, and `α·x` the candidate that appends
//! type `x` with gap `(low, high]` (the last pair `a → x` of the partner `β`, itself frequent).
//! Write `Ends(α)` for the events of type `a` that end an occurrence of `α`
//! ([`Ends`]) and `Succ(a, iv, x)` for the events `e` of type `a`
//! followed by some `y` of type `x` with `low < t(y) − t(e) ≤ high`. Then
//!
//! ```text
//! count(α·x) ≤ |Ends(α) ∩ Succ(a, iv, x)|
//! ```
//!
//! *Proof.* Take a maximum set of non-overlapped occurrences of `α·x`. Each one is an
//! occurrence of `α` ending at an event `e` of type `a`, followed by its `x` event `y` in the
//! gap, so `e ∈ Ends(α)` and `e ∈ Succ(a, iv, x)`. Two non-overlapped occurrences have
//! disjoint time spans (the later one starts strictly after the earlier one ends) and each
//! contains its `e`, so their `e` are distinct events. The map occurrence ↦ `e` is therefore
//! injective into the intersection. ∎
//!
//! With both sets as bit sets over the events of `a`, the bound is the population count of a
//! word-wise AND: `⌈|a| / 64⌉` words. `Succ` depends only on the pair `(a, iv, x)`, which is a
//! frequent 2-episode (every contiguous part of a frequent episode is frequent), so
//! [`SuccessorTable`] builds it once per mining run, after level 2, for the frequent pairs
//! only; `Ends(α)` is built once per prefix `α` and shared by all of its candidates.
//!
//! The bound is never below the exact count, so a candidate it puts below the threshold is
//! infrequent: mining with and without it returns identical episodes and counts (the property
//! tests in `tests/episodes_oracle.rs` check both facts on random streams with repeated
//! types, bursts and equal times).
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`), §5 (anti-monotone candidate
//! elimination, Theorem 1 for PreElim, the bound this one complements); Zaki, "SPADE"
//! (Machine Learning 42, 2001), §4 (bit-vector id-lists).

use std::collections::HashMap;

use rayon::prelude::*;

use crate::episode::count::TypeIndex;
use crate::episode::ends::Ends;
use crate::episode::model::Interval;
use crate::event::{EventStream, EventType};

/// The events of type `x` that end an occurrence of `α·x`, from those of `α` (`ends`, indices
/// into `last`'s events, increasing): every `y` with `low < t(y) − t(e) ≤ high` for some end
/// `e`. The same set as [`Ends::extend`]'s indices, without the latest starts a count needs,
/// which is all a bound needs: each end's window of `x` events is found by two pointers that
/// only move forward, and the union of the windows is written once, in order.
/// `O(|ends| + |x|)`.
pub fn reach_into(
    index: &TypeIndex,
    last: EventType,
    ends: &[u32],
    iv: Interval,
    x: EventType,
    out: &mut Vec<u32>,
) {
    out.clear();
    if last.index() >= index.num_types() || x.index() >= index.num_types() {
        return;
    }
    let (from, to) = (index.times(last), index.times(x));
    let low = iv.low_by_time(last < x);
    let (mut start, mut stop, mut written) = (0usize, 0usize, 0usize);
    for &e in ends {
        let t = from[e as usize];
        while start < to.len() && to[start] - t <= low {
            start += 1;
        }
        stop = stop.max(start);
        while stop < to.len() && to[stop] - t <= iv.high() {
            stop += 1;
        }
        let first = written.max(start);
        out.extend((first..stop).map(|j| u32::try_from(j).unwrap_or(u32::MAX)));
        written = written.max(stop);
    }
}

/// [`reach_into`] along one path of a prefix tree: entry `d` holds the ending events of the
/// first `d + 1` nodes of the last episode asked for, so consecutive episodes that share a
/// prefix extend only from where they differ (as [`crate::episode::ends::EndsPath`], without
/// latest starts).
#[derive(Debug, Default)]
pub struct ReachPath {
    key: crate::episode::ends::PathKey,
    ends: Vec<Vec<u32>>,
}

impl ReachPath {
    /// The indices of the events (of its last type) that end an occurrence of `episode`.
    pub fn ends(&mut self, index: &TypeIndex, episode: &crate::episode::Episode) -> &[u32] {
        let types = episode.types();
        let ivs = episode.intervals();
        let mut shared = self.key.advance(episode);
        if self.ends.len() < types.len() {
            self.ends.resize_with(types.len(), Vec::new);
        }
        if shared == 0 {
            let n = if types[0].index() < index.num_types() {
                index.times(types[0]).len()
            } else {
                0
            };
            self.ends[0].clear();
            self.ends[0].extend((0..n).map(|i| u32::try_from(i).unwrap_or(u32::MAX)));
            shared = 1;
        }
        for d in shared..types.len() {
            let (done, rest) = self.ends.split_at_mut(d);
            reach_into(
                index,
                types[d - 1],
                &done[d - 1],
                ivs[d - 1],
                types[d],
                &mut rest[0],
            );
        }
        &self.ends[types.len() - 1]
    }

    /// The bit set of [`ReachPath::ends`] over the last type's events, into `out`: a pair's
    /// straight from [`pair_end_bits`] (no list of ends, the path left as it was), a longer
    /// episode's from its ends along the path.
    pub fn end_bits(
        &mut self,
        index: &TypeIndex,
        episode: &crate::episode::Episode,
        out: &mut Vec<u64>,
    ) {
        let types = episode.types();
        if let [a, x] = types {
            pair_end_bits(index, *a, episode.intervals()[0], *x, out);
            return;
        }
        let last = types[types.len() - 1];
        let n = if last.index() < index.num_types() {
            index.times(last).len()
        } else {
            0
        };
        index_bits(self.ends(index, episode), n, out);
    }
}

/// One round of join bounds: for each join `(p, q)`, `|Ends(prefixes[p]) ∩ Succ(pairs[q])|`,
/// the successor bound of the module documentation without the parents' counts (the caller
/// takes the minimum). A join's pair starts at its prefix's last type; every prefix has the
/// same number of nodes (at least 2). [`join_bounds_cpu`] computes it on the host; a counter
/// that holds the stream on a GPU computes the same numbers there
/// ([`crate::episode::Counter::join_bounds`]).
#[derive(Clone, Debug, Default)]
pub struct JoinBounds {
    /// The prefixes `α`, each once.
    pub prefixes: Vec<crate::episode::Episode>,
    /// The last pairs `(a, iv, x)`, each once.
    pub pairs: Vec<(EventType, Interval, EventType)>,
    /// `(prefix, pair)` indices. Shape `[joins]`.
    pub joins: Vec<(u32, u32)>,
}

/// [`JoinBounds`] on the host: each prefix's ends along one [`ReachPath`] (in the given
/// order), each pair's [`successor_bits`], one [`and_count`] per join. Shape `[joins]`.
#[must_use]
pub fn join_bounds_cpu(index: &TypeIndex, job: &JoinBounds) -> Vec<u64> {
    let mut path = ReachPath::default();
    let ends: Vec<Vec<u64>> = job
        .prefixes
        .iter()
        .map(|alpha| {
            let mut bits = Vec::new();
            path.end_bits(index, alpha, &mut bits);
            bits
        })
        .collect();
    let succ: Vec<Vec<u64>> = job
        .pairs
        .iter()
        .map(|&(a, iv, x)| successor_bits(index, a, iv, x))
        .collect();
    job.joins
        .iter()
        .map(|&(p, q)| and_count(&ends[p as usize], &succ[q as usize]))
        .collect()
}

/// How many times more events one side of a pair must have for the bit sets of
/// [`pair_end_bits`] and [`successor_bits`] to be built from the other side's events by binary
/// search rather than by one merge of both.
const SPARSE: usize = 8;

/// Sets bits `start..stop` of `bits` (`stop ≤ 64 × bits.len()`; nothing when `stop ≤ start`).
fn set_range(bits: &mut [u64], start: usize, stop: usize) {
    if stop <= start {
        return;
    }
    let (first, last) = (start / 64, (stop - 1) / 64);
    let head = u64::MAX << (start % 64);
    let tail = u64::MAX >> (63 - (stop - 1) % 64);
    if first == last {
        bits[first] |= head & tail;
    } else {
        bits[first] |= head;
        for w in &mut bits[first + 1..last] {
            *w = u64::MAX;
        }
        bits[last] |= tail;
    }
}

/// Words of a bit set over `n` events.
#[must_use]
pub(crate) fn words_for(n: usize) -> usize {
    n.div_ceil(64)
}

/// Writes the bit set of `ends` over the last type's events (`n` of them) into `out`.
pub fn end_bits(ends: &Ends, n: usize, out: &mut Vec<u64>) {
    index_bits(ends.indices(), n, out);
}

/// Writes the bit set of the event indices `ends` (each `< n`) into `out`.
pub(crate) fn index_bits(ends: &[u32], n: usize, out: &mut Vec<u64>) {
    out.clear();
    out.resize(words_for(n), 0);
    for &i in ends {
        let i = i as usize;
        out[i / 64] |= 1 << (i % 64);
    }
}

/// The bit set `Succ(a, iv, x)` over the events of `a`: bit `i` is set when some event `y` of
/// `x` has `low < t(y) − t(aᵢ) ≤ high`. `O(|a| + |x|)`.
#[must_use]
pub fn successor_bits(index: &TypeIndex, a: EventType, iv: Interval, x: EventType) -> Vec<u64> {
    let from = index.times(a);
    let to = index.times(x);
    let mut bits = vec![0u64; words_for(from.len())];
    let low = iv.low_by_time(a < x);
    if to.len() * SPARSE < from.len() {
        // Few events of `x`: each `y` marks the run of `a` events with
        // `low < t(y) − t(aᵢ) ≤ high` (the delay falls as `i` grows), found by binary search
        // from where the last run began.
        let mut first = 0usize;
        for &y in to {
            first += from[first..].partition_point(|&t| y - t > iv.high());
            let stop = first + from[first..].partition_point(|&t| y - t > low);
            set_range(&mut bits, first, stop);
        }
        return bits;
    }
    let mut j = 0usize;
    for (i, &t) in from.iter().enumerate() {
        // The first y with delay > low has the smallest such delay (delays grow with y), so
        // some y fits iff that one does.
        while j < to.len() && to[j] - t <= low {
            j += 1;
        }
        if j == to.len() {
            break;
        }
        if to[j] - t <= iv.high() {
            bits[i / 64] |= 1 << (i % 64);
        }
    }
    bits
}

/// The bit set `Ends(a –iv→ x)` over the events of `x`: bit `j` is set when some event `e` of
/// `a` has `low < t(xⱼ) − t(e) ≤ high`, the events of `x` that end an occurrence of the pair.
/// The same set as [`reach_into`] from every event of `a` (the same subtractions, so the same
/// result in floating point), written straight into bits: for each `xⱼ` only the latest `e`
/// with a delay above `low` can fit (delays fall as `e` grows), and that `e` only moves
/// forward with `j`. `O(|a| + |x|)`; `bits` is cleared first, and left empty for a type the
/// index does not hold.
pub fn pair_end_bits(
    index: &TypeIndex,
    a: EventType,
    iv: Interval,
    x: EventType,
    bits: &mut Vec<u64>,
) {
    bits.clear();
    if a.index() >= index.num_types() || x.index() >= index.num_types() {
        return;
    }
    let from = index.times(a);
    let to = index.times(x);
    bits.resize(words_for(to.len()), 0);
    let low = iv.low_by_time(a < x);
    if from.len() * SPARSE < to.len() {
        // Few events of `a`: mark each one's window of `x` events (those with
        // `low < t(y) − t(e) ≤ high`, a run of indices since the delay grows with `y`),
        // found by binary search from where the last window began.
        let mut start = 0usize;
        for &t in from {
            start += to[start..].partition_point(|&y| y - t <= low);
            let stop = start + to[start..].partition_point(|&y| y - t <= iv.high());
            set_range(bits, start, stop);
        }
        return;
    }
    // `p`: the number of events of `a` whose delay to the current `xⱼ` exceeds `low`.
    let mut p = 0usize;
    for (j, &t) in to.iter().enumerate() {
        while p < from.len() && t - from[p] > low {
            p += 1;
        }
        if p > 0 && t - from[p - 1] <= iv.high() {
            bits[j / 64] |= 1 << (j % 64);
        }
    }
}

/// What one pass over the trains of a pair `a –iv→ x` of distinct types gives
/// ([`pair_count_and_bits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairScan {
    /// The exact non-overlapped count, occurrences: [`count_pair`](crate::episode::count::count_pair)'s.
    pub count: u64,
    /// `Ends(a –iv→ x)` over the events of `x`: [`pair_end_bits`]'s. Shape
    /// `[⌈|x| / 64⌉]` words.
    pub ends: Vec<u64>,
    /// `Succ(a, iv, x)` over the events of `a`: [`successor_bits`]'s. Shape `[⌈|a| / 64⌉]`
    /// words.
    pub succ: Vec<u64>,
}

/// The exact count of the pair `a –iv→ x` and both of its bit sets in one merge of the two
/// trains, where [`count_pair`](crate::episode::count::count_pair), [`pair_end_bits`] and
/// [`successor_bits`] take three. For each event `xⱼ` the events of `a` that fit it
/// (`low < t(xⱼ) − t(e) ≤ high`) are a run `[lo, p)` of indices (delays fall as `e` grows),
/// and both ends only move forward with `j`: `xⱼ` ends an occurrence when the run is not
/// empty, the run's events have a successor, and the greedy count (the earliest end first,
/// Laxman et al. 2007) takes `xⱼ` when the run holds an event after the last counted end.
/// The same subtractions as the three functions, so the same results in floating point
/// (`tests/episodes_oracle.rs` checks all three). `O(|a| + |x|)`; empty results for a type
/// the index does not hold.
///
/// The count equals [`count_pair`](crate::episode::count::count_pair)'s for any two types;
/// the counters use that function for distinct types only (a repeated type is counted from
/// its ends), and so should a caller.
#[must_use]
pub fn pair_count_and_bits(
    index: &TypeIndex,
    a: EventType,
    iv: Interval,
    x: EventType,
) -> PairScan {
    let mut out = PairScan {
        count: 0,
        ends: Vec::new(),
        succ: Vec::new(),
    };
    if a.index() >= index.num_types() || x.index() >= index.num_types() {
        return out;
    }
    let from = index.times(a);
    let to = index.times(x);
    out.ends.resize(words_for(to.len()), 0);
    out.succ.resize(words_for(from.len()), 0);
    let (low, high) = (iv.low_by_time(a < x), iv.high());
    // `lo`: events of `a` too early for `xⱼ` (delay above `high`); `p`: events with a delay
    // above `low`; `q`: events at or before the last counted end; `marked`: `succ` is
    // written below it.
    let (mut lo, mut p, mut q, mut marked) = (0usize, 0usize, 0usize, 0usize);
    let mut last_end = f64::NEG_INFINITY;
    for (j, &t) in to.iter().enumerate() {
        while p < from.len() && t - from[p] > low {
            p += 1;
        }
        while lo < p && t - from[lo] > high {
            lo += 1;
        }
        if lo == p {
            continue;
        }
        out.ends[j / 64] |= 1 << (j % 64);
        let start = lo.max(marked);
        set_range(&mut out.succ, start, p);
        marked = marked.max(p);
        if t > last_end {
            while q < from.len() && from[q] <= last_end {
                q += 1;
            }
            if lo.max(q) < p {
                out.count += 1;
                last_end = t;
            }
        }
    }
    out
}

/// `|ends ∩ succ|`: the successor bound (module documentation) from the two bit sets.
#[inline]
#[must_use]
pub fn and_count(ends: &[u64], succ: &[u64]) -> u64 {
    ends.iter()
        .zip(succ)
        .map(|(a, b)| u64::from((a & b).count_ones()))
        .sum()
}

/// The successor bound of every level-2 candidate `a → x` with every interval, for each
/// first type `a` in `firsts`: `|Succ(a, iv, x)|`, the number of events of `a` followed by
/// some `x` within the interval. It bounds the pair's count from above by the same argument
/// as the join bound (each non-overlapped occurrence has its own `a` event), with `Ends(a)`
/// being every event of `a`. Shape `[firsts][intervals][types]`, flattened in that order.
///
/// One forward scan of the stream from each event of each `a` up to the largest `high`
/// (events at the same time never fit: every delay must exceed `low ≥ 0`), marking each
/// `(iv, x)` once per `a` event: `O(events × window × intervals)`, against `O(firsts ×
/// intervals × events)` for counting every pair. Parallel over `firsts`.
#[must_use]
pub fn pair_successor_counts(
    stream: &EventStream,
    index: &TypeIndex,
    firsts: &[EventType],
    intervals: &[Interval],
) -> Vec<u32> {
    let types = stream.alphabet().len();
    let (times, kinds) = (stream.times(), stream.types());
    let max_high = intervals.iter().map(|iv| iv.high()).fold(0.0, f64::max);
    let per_first = intervals.len() * types;
    let tables: Vec<Vec<u32>> = firsts
        .par_iter()
        .map(|&a| {
            let mut counts = vec![0u32; per_first];
            // The last `a` event (its position) that marked each (iv, x).
            let mut stamp = vec![u32::MAX; per_first];
            if a.index() >= index.num_types() {
                return counts;
            }
            for &p in index.positions(a) {
                let t = times[p as usize];
                for (&u, ty) in times[p as usize + 1..].iter().zip(&kinds[p as usize + 1..]) {
                    let d = u - t;
                    if d > max_high {
                        break;
                    }
                    for (k, iv) in intervals.iter().enumerate() {
                        if iv.fits(d, *ty == a) {
                            let cell = k * types + ty.index();
                            if stamp[cell] != p {
                                stamp[cell] = p;
                                counts[cell] += 1;
                            }
                        }
                    }
                }
            }
            counts
        })
        .collect();
    tables.concat()
}

/// A key for a pair `(a, iv, x)`: intervals by bit pattern (they all come from one
/// user-given set).
type PairKey = (u32, u64, u64, u32);

fn pair_key(a: EventType, iv: Interval, x: EventType) -> PairKey {
    let (low, high) = iv.bits();
    (a.0, low, high, x.0)
}

/// Where one pair's successor bits live in a [`SuccessorTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairSlot {
    offset: usize,
    words: usize,
}

/// The successor bit sets of a set of pairs (the frequent 2-episodes), packed in one
/// allocation. Memory: `Σ ⌈|a| / 64⌉` words over the pairs.
#[derive(Debug, Default)]
pub struct SuccessorTable {
    words: Vec<u64>,
    slots: HashMap<PairKey, PairSlot>,
}

impl SuccessorTable {
    /// Builds the bit sets of `pairs` (`(a, iv, x)`, each once; types of `stream`, indexed by
    /// `index`), each equal to [`successor_bits`]. Pairs are grouped by their first type `a`
    /// and each group (in parallel) is filled by one forward scan of the stream from every
    /// event of `a` to the largest interval's end, as [`pair_successor_counts`] scans:
    /// `O(Σ_a |a| · d)` for `d` events per largest delay, instead of `O(|a| + |x|)` per pair.
    #[must_use]
    pub fn build(
        stream: &EventStream,
        index: &TypeIndex,
        pairs: &[(EventType, Interval, EventType)],
    ) -> Self {
        let n_types = index.num_types();
        let (times, kinds) = (stream.times(), stream.types());
        let mut ivs: Vec<Interval> = Vec::new();
        for &(_, iv, _) in pairs {
            if !ivs.iter().any(|v| v.bits() == iv.bits()) {
                ivs.push(iv);
            }
        }
        let max_high = ivs.iter().map(|iv| iv.high()).fold(0.0, f64::max);
        let mut by_first: HashMap<u32, Vec<usize>> = HashMap::new();
        for (i, &(a, _, x)) in pairs.iter().enumerate() {
            if a.index() < n_types && x.index() < n_types {
                by_first.entry(a.0).or_default().push(i);
            }
        }
        let groups: Vec<(EventType, Vec<usize>)> = by_first
            .into_iter()
            .map(|(a, members)| (EventType(a), members))
            .collect();
        // Per group: the pair indices and their bit sets, `words` words each, back to back.
        let filled: Vec<(&[usize], usize, Vec<u64>)> = groups
            .par_iter()
            .map(|(a, members)| {
                let from = index.positions(*a);
                let words = words_for(from.len());
                let mut lookup = vec![u32::MAX; ivs.len() * n_types];
                for (m, &i) in members.iter().enumerate() {
                    let (_, iv, x) = pairs[i];
                    let k = ivs.iter().position(|v| v.bits() == iv.bits()).unwrap_or(0);
                    lookup[k * n_types + x.index()] = m as u32;
                }
                let mut bits = vec![0u64; members.len() * words];
                for (i, &p) in from.iter().enumerate() {
                    let p = p as usize;
                    let t = times[p];
                    for (&u, ty) in times[p + 1..].iter().zip(&kinds[p + 1..]) {
                        let d = u - t;
                        if d > max_high {
                            break;
                        }
                        for (k, iv) in ivs.iter().enumerate() {
                            if iv.fits(d, *ty == *a) {
                                let m = lookup[k * n_types + ty.index()];
                                if m != u32::MAX {
                                    bits[m as usize * words + i / 64] |= 1 << (i % 64);
                                }
                            }
                        }
                    }
                }
                (members.as_slice(), words, bits)
            })
            .collect();
        let mut words = Vec::with_capacity(filled.iter().map(|f| f.2.len()).sum());
        let mut slots = HashMap::with_capacity(pairs.len());
        for (members, n, bits) in filled {
            for (m, &i) in members.iter().enumerate() {
                let (a, iv, x) = pairs[i];
                slots.insert(
                    pair_key(a, iv, x),
                    PairSlot {
                        offset: words.len(),
                        words: n,
                    },
                );
                words.extend_from_slice(&bits[m * n..(m + 1) * n]);
            }
        }
        Self { words, slots }
    }

    /// The slot of pair `(a, iv, x)`, if the table has it.
    #[must_use]
    pub fn slot(&self, a: EventType, iv: Interval, x: EventType) -> Option<PairSlot> {
        self.slots.get(&pair_key(a, iv, x)).copied()
    }

    /// The successor bits of a slot. Shape `[⌈|a| / 64⌉]`.
    #[must_use]
    pub fn bits(&self, slot: PairSlot) -> &[u64] {
        &self.words[slot.offset..slot.offset + slot.words]
    }

    /// Heap bytes held by the bit sets.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Number of pairs.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the table has no pair.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}
