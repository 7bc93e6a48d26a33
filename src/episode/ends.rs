//! Occurrence ends: the exact non-overlapped count of an episode from the events that end its
//! occurrences, built one node at a time (a vertical, id-list representation of occurrences).
//!
//! For an episode `α = E(1) → … → E(k)`, [`Ends`] holds every event of type `E(k)` that ends
//! at least one occurrence of `α`, and for each such event the *latest start* (the largest
//! first-event time) over the occurrences that end there. Shapes: `index [ends]`,
//! `latest_start [ends]`, in stream order.
//!
//! # Extension (one sweep per node)
//! An occurrence of `α·x` (node `x` appended with gap `(low, high]`) is an occurrence of `α`
//! ending at some event `e` followed by an event `y` of type `x` with
//! `low < t(y) − t(e) ≤ high`, and every such pair is one (`low` by time,
//! [`Interval::low_by_time`]: a zero delay fits only an interval that admits it, between
//! different types in id order, which is the stream order of simultaneous events). So `y` ends an occurrence of `α·x`
//! iff some end `e` of `α` lies in its window, and its latest start is the largest latest start
//! over that window. Ends are sorted by time and the delays are computed exactly as the
//! counters compute them (`t(y) − t(e)` in `f64`, whose rounding is monotone), so both window
//! edges only move forward as `y` advances: two pointers, `O(|ends(α)| + |x|)` time at most.
//!
//! **Latest starts never decrease along the ends.** For a single node each event is its own
//! start (times sorted). If they never decrease along the ends of `α`, the largest over a
//! window is its last end's, and the window's last end (`hi − 1`) only moves forward as `y`
//! advances, so the latest starts of the ends of `α·x` never decrease either. ∎ So the sweep
//! keeps no structure beyond the two pointers: the latest start of `y` is that of the last
//! end in its window.
//!
//! The pointers gallop (exponential then binary search), and the events of `x` in a stretch
//! where the window is empty are skipped to the first whose window gains an end, so a sparse
//! prefix (few ends against a fast last unit, as at levels 3 and 4 of a dense probe) costs
//! about `O(|ends(α)| · log)` instead of a pass over every event of `x`. When only the count
//! is wanted ([`Ends::count_extension`]), after an occurrence ending at `y` is taken the next
//! one taken must start after `y`: its window's last end must be at or after the first end
//! `f` whose latest start exceeds `y` (found by galloping, latest starts being sorted), so the
//! sweep skips to the first event of `x` more than `low` after `f`, and every event it then
//! offers is taken.
//!
//! # Count (greedy earliest end)
//! The non-overlapped count is a maximum set of occurrences with pairwise disjoint spans (the
//! later start strictly after the earlier end): interval scheduling, solved exactly by taking
//! occurrences in order of end time whenever their start is after the last taken end. Among
//! occurrences with the same end, the one with the latest start is taken if any can be, so it
//! is enough to know, for every end, its latest start: [`Ends::count`] walks the ends in time
//! order and takes `y` when `latest_start(y) > last_end`. This is the count of
//! [`count_exact`](crate::episode::count_exact) (Algorithm 1), which the brute-force oracle
//! in `tests/episodes_oracle.rs` checks, and the property tests there check this one too.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`), §2 (non-overlapped occurrences) and
//! Algorithm 1 (the count this one equals); Zaki, "SPADE: an efficient algorithm for mining
//! frequent sequences" (Machine Learning 42, 2001), §4 (vertical id-lists joined one item at a
//! time); Kleinberg & Tardos, *Algorithm Design*, §4.1 (greedy interval scheduling).

use crate::episode::count::TypeIndex;
use crate::episode::model::{Episode, Interval};
use crate::event::EventType;

/// The events ending some occurrence of an episode, with the latest start of each (see the
/// module documentation).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ends {
    /// Indices into the last type's events ([`TypeIndex::times`]), increasing.
    index: Vec<u32>,
    /// Latest start of an occurrence ending at that event, seconds.
    latest_start: Vec<f64>,
}

impl Ends {
    /// The ends of the single-node episode `ty`: every event of the type, each its own start.
    /// A type the index does not have gives no ends.
    #[must_use]
    pub(crate) fn single(index: &TypeIndex, ty: EventType) -> Self {
        if ty.index() >= index.num_types() {
            return Self::default();
        }
        let times = index.times(ty);
        Self {
            index: (0..times.len())
                .map(|i| u32::try_from(i).unwrap_or(u32::MAX))
                .collect(),
            latest_start: times.to_vec(),
        }
    }

    /// The ends of `episode`, built from its first node with one [`Ends::extend`] per gap.
    #[must_use]
    pub fn of(index: &TypeIndex, episode: &Episode) -> Self {
        let types = episode.types();
        let mut ends = Self::single(index, types[0]);
        for (k, iv) in episode.intervals().iter().enumerate() {
            ends = ends.extend(index, types[k], *iv, types[k + 1]);
        }
        ends
    }

    /// The ends of `α·x`, where `self` holds the ends of `α`, `last` is `α`'s last type, and
    /// `x` follows with delay in `iv`. `O(|self| + |x|)` at most (module documentation).
    #[must_use]
    pub fn extend(&self, index: &TypeIndex, last: EventType, iv: Interval, x: EventType) -> Self {
        let mut out = Self::default();
        self.extend_into(index, last, iv, x, &mut out);
        out
    }

    /// [`Ends::extend`] into a reused buffer (`out` is overwritten).
    pub(crate) fn extend_into(
        &self,
        index: &TypeIndex,
        last: EventType,
        iv: Interval,
        x: EventType,
        out: &mut Self,
    ) {
        self.extend_by_gap_into(index, last, gap_of(iv, last, x), x, out);
    }

    /// [`Ends::extend_into`] with the gap as `(low, high)` seconds: a delay `d` fits when
    /// `low < d ≤ high` (`low` from [`Interval::low_by_time`]), as the device job takes it.
    pub(crate) fn extend_by_gap_into(
        &self,
        index: &TypeIndex,
        last: EventType,
        gap: (f64, f64),
        x: EventType,
        out: &mut Self,
    ) {
        out.index.clear();
        out.latest_start.clear();
        self.sweep(index, last, gap, x, |j, _, start| {
            out.index.push(u32::try_from(j).unwrap_or(u32::MAX));
            out.latest_start.push(start);
            false
        });
    }

    /// The exact non-overlapped count of `α·x` (as [`Ends::extend`] then [`Ends::count`]) in
    /// the same sweep, without building the ends of `α·x`: the count of a candidate needs
    /// only whether each event of `x` ends an occurrence and its latest start, which the
    /// sweep has at hand. After each occurrence taken (ending at `y`), the sweep skips to
    /// the first end of `α` whose latest start is after `y` and to the first event of `x`
    /// that end can reach (module documentation), so it visits about one event of `x` per
    /// occurrence counted. `O(|self| + |x|)` at most, no allocation.
    #[must_use]
    pub fn count_extension(
        &self,
        index: &TypeIndex,
        last: EventType,
        iv: Interval,
        x: EventType,
    ) -> u64 {
        self.count_by_gap(index, last, gap_of(iv, last, x), x)
    }

    /// [`Ends::count_extension`] with the gap as `(low, high)` seconds (as
    /// [`Ends::extend_by_gap_into`]).
    #[must_use]
    pub(crate) fn count_by_gap(
        &self,
        index: &TypeIndex,
        last: EventType,
        gap: (f64, f64),
        x: EventType,
    ) -> u64 {
        let mut count = 0u64;
        let mut last_end = f64::NEG_INFINITY;
        // Taken exactly as `count` walks the ends `extend_into` would have built: after each
        // one taken the sweep offers only ends whose latest start is after it.
        self.sweep(index, last, gap, x, |_, y, start| {
            debug_assert!(start > last_end, "the sweep skips ends taken ones overlap");
            count += 1;
            last_end = y;
            true
        });
        count
    }

    /// The extension's sweep (module documentation): calls `on_end(j, t, start)` for each
    /// event `j` of `x` (at time `t`, seconds) that ends an occurrence of `α·x`, in stream
    /// order, with the latest start of those occurrences. When `on_end` returns true (the
    /// occurrence ending at `t` is taken), the events after `j` are offered only where their
    /// latest start is after `t`.
    #[inline]
    fn sweep(
        &self,
        index: &TypeIndex,
        last: EventType,
        (low, high): (f64, f64),
        x: EventType,
        on_end: impl FnMut(usize, f64, f64) -> bool,
    ) {
        if self.is_empty() || x.index() >= index.num_types() || last.index() >= index.num_types() {
            return;
        }
        self.sweep_times(index.times(last), (low, high), index.times(x), on_end);
    }

    /// [`Ends::sweep`] over the last type's times `from` (those the ends index) and the
    /// appended type's times `to`.
    #[inline]
    fn sweep_times(
        &self,
        from: &[f64],
        gap: (f64, f64),
        to: &[f64],
        on_end: impl FnMut(usize, f64, f64) -> bool,
    ) {
        sweep_ends(
            |i: usize| from[self.index[i] as usize],
            &self.latest_start,
            gap,
            to,
            on_end,
        );
    }

    /// The ends' times, seconds, given the last type's times `from` (those the ends index).
    /// Shape `[len]`; with [`Ends::latest_starts`], what [`count_after_ends`] takes.
    #[must_use]
    pub(crate) fn times(&self, from: &[f64]) -> Vec<f64> {
        self.index.iter().map(|&i| from[i as usize]).collect()
    }

    /// The maximum number of non-overlapped occurrences (greedy earliest end; see the module
    /// documentation). `times` are the last type's event times ([`TypeIndex::times`]).
    #[must_use]
    pub fn count(&self, times: &[f64]) -> u64 {
        let mut count = 0u64;
        let mut last_end = f64::NEG_INFINITY;
        for (&i, &start) in self.index.iter().zip(&self.latest_start) {
            if start > last_end {
                count += 1;
                last_end = times[i as usize];
            }
        }
        count
    }

    /// Number of ends.
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when the episode has no occurrence.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Indices of the ending events among the last type's events, increasing. Shape `[len]`.
    #[must_use]
    pub fn indices(&self) -> &[u32] {
        &self.index
    }

    /// Latest start of the occurrences ending at each end, seconds. Shape `[len]`.
    #[must_use]
    pub fn latest_starts(&self) -> &[f64] {
        &self.latest_start
    }

    /// Heap bytes held.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.index.capacity() * 4 + self.latest_start.capacity() * 8
    }
}

/// [`Ends::count_extension`] with the ends laid out as times and the appended type's events
/// given as times `to` (sorted), not read from an index: the count of `α·x` where `x`'s
/// train is replaced, e.g. by its surrogate (significance's hybrids). `end_times` and
/// `starts` (each end's latest start) are both `[ends]` seconds, as [`Ends::times`] and
/// [`Ends::latest_starts`] give them; `gap` as [`Ends::extend_by_gap_into`] takes it (from
/// the types' ids, [`Interval::low_by_time`]). The same sweep (`kernels/ends.cu`'s
/// `synfire_count` on the device), without the indirection through the last type's times, for
/// one parent counted against many trains; `O(|ends| + |to|)` at most, no allocation.
///
/// # Panics
/// If `end_times` and `starts` differ in length.
#[must_use]
pub(crate) fn count_after_ends(
    end_times: &[f64],
    starts: &[f64],
    gap: (f64, f64),
    to: &[f64],
) -> u64 {
    assert_eq!(end_times.len(), starts.len(), "an end time per start");
    let mut count = 0u64;
    sweep_ends(
        |i: usize| end_times[i],
        starts,
        gap,
        to,
        |_, _, _| {
            count += 1;
            true
        },
    );
    count
}

/// The sweep of [`Ends::sweep`] over ends given by their times (`t_end(i)`, non-decreasing)
/// and latest starts (`starts`, `[ends]`).
#[inline]
fn sweep_ends(
    t_end: impl Fn(usize) -> f64,
    starts: &[f64],
    (low, high): (f64, f64),
    to: &[f64],
    mut on_end: impl FnMut(usize, f64, f64) -> bool,
) {
    if starts.is_empty() {
        return;
    }
    // Window of ends for the current y: [lo, hi), with y − t(e) ≤ high from lo on and
    // y − t(e) > low before hi. Both predicates hold on a prefix of the ends (their times
    // increase and `y − t` in f64 is monotone), so each edge is found by galloping, not
    // by stepping. Latest starts never decrease along the ends (module documentation),
    // so the window's largest is its last end's, and the ends before `need` (whose
    // latest start is at most the last taken end) are never offered.
    let (mut lo, mut hi, mut need) = (0usize, 0usize, 0usize);
    let n = starts.len();
    let m = to.len();
    let mut j = 0usize;
    while j < m {
        let y = to[j];
        hi = gallop(hi, n, |i| y - t_end(i) > low);
        lo = gallop(lo, hi, |i| y - t_end(i) > high);
        if lo < hi && hi > need {
            if on_end(j, y, starts[hi - 1]) {
                // Every end before `hi` has a latest start ≤ `starts[hi - 1]` ≤ y, so
                // `need ≥ hi`: the next event offered is after `y`'s window moves past it.
                need = gallop(hi - 1, n, |i| starts[i] <= y);
                if need >= n {
                    break;
                }
                let next = t_end(need);
                j = gallop(j + 1, m, |k| to[k] - next <= low);
            } else {
                j += 1;
            }
            continue;
        }
        // No end of the window can be offered: no later event of `x` is one until the
        // first end that can (at or after `hi` and `need`) is more than `low` before it.
        let first = hi.max(need);
        if first >= n {
            break;
        }
        let next = t_end(first);
        j = gallop(j + 1, m, |k| to[k] - next <= low);
    }
}

/// The gap `(low, high)` of `iv` from type `last` to type `x`, seconds: a zero delay fits
/// only between different types in id order (the model's rules, [`Interval::low_by_time`]).
#[must_use]
pub(crate) fn gap_of(iv: Interval, last: EventType, x: EventType) -> (f64, f64) {
    (iv.low_by_time(last < x), iv.high())
}

/// The first index in `from..to` where `holds` is false, for a predicate that holds on a
/// prefix of the range (`to` when it holds throughout): an exponential search from `from`,
/// then a binary search, so `O(log d)` evaluations for an answer `d` past `from`, and one
/// when the answer is `from` itself.
#[inline]
fn gallop(from: usize, to: usize, holds: impl Fn(usize) -> bool) -> usize {
    if from >= to || !holds(from) {
        return from;
    }
    // `holds(lo)`; find `hi` with `!holds(hi)` or `hi = to`.
    let mut lo = from;
    let mut step = 1usize;
    let mut hi = loop {
        let probe = lo.saturating_add(step);
        if probe >= to {
            break to;
        }
        if !holds(probe) {
            break probe;
        }
        lo = probe;
        step = step.saturating_mul(2);
    };
    // `holds(lo)`, and `hi == to` or `!holds(hi)`.
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// The exact non-overlapped count of `episode` from its occurrence ends: equal to
/// [`count_exact`](crate::episode::count_exact).
#[must_use]
pub fn count_by_ends(index: &TypeIndex, episode: &Episode) -> u64 {
    let last = episode.types()[episode.len() - 1];
    if last.index() >= index.num_types() {
        return 0;
    }
    Ends::of(index, episode).count(index.times(last))
}

/// The earliest end of an occurrence starting at each event of an episode's first type: for
/// counting `u · α` (a node `u` prepended) against many trains of `u` whose other units stay
/// (`guided`'s hybrids of an extension that adds its unit at the start).
///
/// For `α = E(1) → … → E(k)` with distinct types, `earliest_end[i]` is the smallest end time
/// over the occurrences of `α` whose first event is the `i`-th event of `E(1)` (`∞` if none),
/// by a backward pass: the `j`-th node's earliest end at an event `x` is the smallest of the
/// `(j+1)`-th node's over the events `z` of `E(j+1)` with `low_j < t(z) − t(x) ≤ high_j` (the
/// counters' comparisons, [`gap_of`]), a sliding-window minimum (both edges only move forward
/// as `x` advances). Shapes: `first [events of E(1)]`, `earliest_end [events of E(1)]`.
///
/// **Count.** The non-overlapped count is interval scheduling over the occurrences (module
/// documentation, "Count"), and for it only each start's earliest end matters: of the
/// occurrences sharing a start, one with the earliest end can replace any other in a set of
/// disjoint ones. An occurrence of `u · α` is a `u` event at `s` and an occurrence of `α`
/// whose first event `x` has `low < t(x) − s ≤ high`; the earliest end of those starting at
/// `s` is the minimum of `earliest_end` over that window of `E(1)`'s events (again a sliding
/// window). Scanning the starts in time order and keeping the earliest end `b` among the
/// candidates since the last taken end, a start after `b` means no later candidate can end
/// before `b` (its end is at least its start), so `b` is taken: the greedy earliest-end
/// schedule, in `O(|u| + |E(1)|)` per train of `u`.
///
/// **Monotone.** Kept only where finite, the earliest ends never decrease along `E(1)`'s
/// events, so a window's minimum is its first event's. By induction from the last node
/// (its events' own times, sorted): for `x ≤ x'` the window of `x` (the events `z` with
/// `low < t(z) − x ≤ high`) and that of `x'` are ranges of positions whose two edges do not
/// move back (`t(z) − x` in f64 is monotone in `x`), and the earliest end at `x` is the value
/// of the window's first event with a finite one. If that event of `x'` lies in `x`'s window,
/// `x`'s value is at most it; if it lies after `x`'s window, every finite value of `x`'s
/// window comes before it and is at most it. So the next node's earliest ends keep the order,
/// and the minimum over a window is a lookup (`kernels/ends.cu`'s `synfire_count_prefixed`
/// counts the same way on the device).
#[derive(Clone, Debug, Default)]
pub(crate) struct EarliestEnds {
    /// The first type's event times, seconds.
    first: Vec<f64>,
    /// The earliest end of an occurrence starting at each, seconds (`∞`: none).
    earliest_end: Vec<f64>,
}

impl EarliestEnds {
    /// The earliest ends of `episode` (distinct types) in `index`.
    ///
    /// # Panics
    /// If the episode repeats a type (a prepended unit's count would need the merged machine).
    #[must_use]
    pub(crate) fn of(index: &TypeIndex, episode: &Episode) -> Self {
        let types = episode.types();
        assert!(
            types
                .iter()
                .enumerate()
                .all(|(i, t)| !types[..i].contains(t)),
            "EarliestEnds: an episode of distinct types"
        );
        let times = |t: EventType| -> &[f64] {
            if t.index() < index.num_types() {
                index.times(t)
            } else {
                &[]
            }
        };
        let k = types.len();
        let mut ends: Vec<f64> = times(types[k - 1]).to_vec();
        for j in (0..k - 1).rev() {
            let from = times(types[j]);
            let to = times(types[j + 1]);
            let gap = gap_of(episode.intervals()[j], types[j], types[j + 1]);
            ends = window_minima(from, gap, to, &ends);
        }
        // Only the first events that start an occurrence can give one to `u · α`.
        let (first, earliest_end) = times(types[0])
            .iter()
            .zip(&ends)
            .filter(|(_, e)| e.is_finite())
            .map(|(&t, &e)| (t, e))
            .unzip();
        Self {
            first,
            earliest_end,
        }
    }

    /// The first type's events that start an occurrence, seconds. Shape `[starts]`.
    #[must_use]
    pub(crate) fn first(&self) -> &[f64] {
        &self.first
    }

    /// The earliest end of an occurrence starting at each of [`EarliestEnds::first`],
    /// seconds, finite and never decreasing (type documentation, "Monotone"). Shape
    /// `[starts]`.
    #[must_use]
    pub(crate) fn earliest_ends(&self) -> &[f64] {
        &self.earliest_end
    }

    /// The exact non-overlapped count of `u · α` where `u`'s events are `train` (sorted,
    /// seconds) and `gap` the gap from `u` to `α`'s first node ([`gap_of`]); equal to
    /// [`count_exact`](crate::episode::count_exact) on the stream of `α`'s units and `train`.
    #[must_use]
    pub(crate) fn count_prefixed(&self, train: &[f64], (low, high): (f64, f64)) -> u64 {
        let (first, earliest) = (&self.first, &self.earliest_end);
        let n = first.len();
        let mut count = 0u64;
        let mut best = f64::INFINITY;
        // `lo`: the first event of `E(1)` more than `low` after the start `s` (it only moves
        // forward as `s` does); the window is not empty when it is at most `high` after `s`,
        // and its minimum is then `earliest[lo]` (type documentation, "Monotone").
        let mut lo = 0usize;
        let mut j = 0usize;
        while j < train.len() {
            let s = train[j];
            lo = gallop(lo, n, |i| first[i] - s <= low);
            if lo >= n {
                break;
            }
            if first[lo] - s <= high {
                if s > best {
                    count += 1;
                    best = f64::INFINITY;
                }
                best = best.min(earliest[lo]);
                j += 1;
            } else {
                // Empty until `first[lo] − s ≤ high` (monotone in `s`): skip to that start.
                let next = first[lo];
                j = gallop(j + 1, train.len(), |k| next - train[k] > high);
            }
        }
        count + u64::from(best.is_finite())
    }
}

/// For each `x` of `from` (sorted), the minimum of `values[i]` over the events `to[i]`
/// (sorted) with `low < to[i] − x ≤ high` (`∞` where none).
fn window_minima(from: &[f64], gap: (f64, f64), to: &[f64], values: &[f64]) -> Vec<f64> {
    let mut out = vec![f64::INFINITY; from.len()];
    let mut i = 0;
    window_minima_each(from, gap, to, values, |x, m| {
        while from[i] != x {
            i += 1;
        }
        out[i] = m;
        i += 1;
    });
    out
}

/// Calls `found(x, m)`, in order, for each `x` of `from` (sorted) whose window of `to`
/// (sorted; `low < to[i] − x ≤ high`) is not empty, with `m` the minimum of `values` over it:
/// two forward pointers and a monotone deque of window positions; the events of `from` before
/// the next window that can gain an event are skipped by a binary search.
fn window_minima_each(
    from: &[f64],
    (low, high): (f64, f64),
    to: &[f64],
    values: &[f64],
    mut found: impl FnMut(f64, f64),
) {
    let mut deque: std::collections::VecDeque<usize> = std::collections::VecDeque::new();
    let (mut lo, mut hi) = (0usize, 0usize);
    let mut j = 0usize;
    while j < from.len() {
        let x = from[j];
        while hi < to.len() && to[hi] - x <= high {
            while deque.back().is_some_and(|&b| values[b] >= values[hi]) {
                deque.pop_back();
            }
            deque.push_back(hi);
            hi += 1;
        }
        // Times are finite: `d ≤ low` is `¬(d > low)`.
        while lo < hi && to[lo] - x <= low {
            lo += 1;
        }
        while deque.front().is_some_and(|&f| f < lo) {
            deque.pop_front();
        }
        if let Some(&f) = deque.front() {
            found(x, values[f]);
            j += 1;
        } else if hi >= to.len() {
            break;
        } else {
            // The window is empty and stays so until `to[hi] − x ≤ high`: skip to the first
            // such `x` (the predicate fails on a prefix of `from`, `to[hi] − x` being
            // monotone in `x`).
            let next = to[hi];
            j += from[j..].partition_point(|&x| next - x > high).max(1);
        }
    }
}

/// The nodes of the last episode a path ([`EndsPath`], [`crate::episode::bound::ReachPath`])
/// computed, to find how long a prefix the next episode shares with it.
#[derive(Debug, Default)]
pub(crate) struct PathKey {
    types: Vec<EventType>,
    intervals: Vec<(u64, u64)>,
}

impl PathKey {
    /// Becomes `episode`: returns how many of its first nodes (with their intervals) the
    /// previous episode shared, whose entries stay valid; the caller recomputes the rest.
    pub(crate) fn advance(&mut self, episode: &Episode) -> usize {
        let types = episode.types();
        let ivs = episode.intervals();
        let mut shared = 0;
        while shared < types.len()
            && shared < self.types.len()
            && types[shared] == self.types[shared]
            && (shared == 0 || ivs[shared - 1].bits() == self.intervals[shared - 1])
        {
            shared += 1;
        }
        self.types.clear();
        self.types.extend_from_slice(types);
        self.intervals.clear();
        self.intervals.extend(ivs.iter().map(|iv| iv.bits()));
        shared
    }
}

/// Ends along one path of a prefix tree: entry `d` holds the ends of the first `d + 1` nodes
/// of the last episode asked for, so consecutive episodes that share a prefix (as the
/// candidates of one level do, in generation order) extend only from where they differ.
#[derive(Debug, Default)]
pub struct EndsPath {
    key: PathKey,
    ends: Vec<Ends>,
}

impl EndsPath {
    /// An empty path.
    #[must_use]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The ends of `episode`, reusing the ends of the longest prefix shared with the previous
    /// episode asked for.
    pub fn ends(&mut self, index: &TypeIndex, episode: &Episode) -> &Ends {
        let types = episode.types();
        let ivs = episode.intervals();
        let mut shared = self.key.advance(episode);
        if shared == 0 {
            let first = Ends::single(index, types[0]);
            if self.ends.is_empty() {
                self.ends.push(first);
            } else {
                self.ends[0] = first;
            }
            shared = 1;
        }
        for d in shared..types.len() {
            if self.ends.len() <= d {
                self.ends.push(Ends::default());
            }
            let (done, rest) = self.ends.split_at_mut(d);
            done[d - 1].extend_into(index, types[d - 1], ivs[d - 1], types[d], &mut rest[0]);
        }
        &self.ends[types.len() - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::count_exact;

    fn iv(lo: f64, hi: f64) -> Interval {
        Interval::new(lo, hi).unwrap()
    }

    #[test]
    fn paper_example_and_latest_starts() {
        let s = crate::episode::count::tests::paper_stream();
        let idx = TypeIndex::new(&s);
        let (a, b, c) = (EventType(0), EventType(1), EventType(2));
        let ab = Episode::new(vec![a, b], vec![iv(0.0, 100.0)]);
        let ends = Ends::of(&idx, &ab);
        // Every B ends an A→B; B@5 and B@8 start at A@2 at the latest, B@18 at A@13.
        assert_eq!(ends.indices(), &[0, 1, 2]);
        assert_eq!(ends.latest_starts(), &[2.0, 2.0, 13.0]);
        assert_eq!(count_by_ends(&idx, &ab), 2);
        let abc = Episode::new(vec![a, b, c], vec![iv(5.0, 10.0), iv(10.0, 15.0)]);
        assert_eq!(count_by_ends(&idx, &abc), count_exact(&idx, &abc));
        let mut path = EndsPath::new();
        assert_eq!(path.ends(&idx, &abc), &Ends::of(&idx, &abc));
        assert_eq!(path.ends(&idx, &ab), &Ends::of(&idx, &ab));
        let abb = Episode::new(vec![a, b, b], vec![iv(0.0, 100.0), iv(0.0, 20.0)]);
        assert_eq!(path.ends(&idx, &abb), &Ends::of(&idx, &abb));
    }

    /// `gallop` finds the first index where a prefix predicate fails, for every prefix length
    /// and start.
    #[test]
    fn gallop_finds_the_first_failing_index() {
        for len in 0..40usize {
            for cut in 0..=len {
                for from in 0..=len {
                    let want = cut.max(from);
                    assert_eq!(
                        gallop(from, len, |i| i < cut),
                        want,
                        "len {len} cut {cut} from {from}"
                    );
                }
            }
        }
    }

    /// `count_extension` equals building the ends and counting them, and Algorithm 1, and
    /// latest starts never decrease along the ends (the sweep relies on it), on
    /// seeded random streams with ties (times on a 1 ms grid), lag-0 intervals and repeated
    /// types, for every prefix and last node.
    #[test]
    fn count_extension_equals_extend_then_count() {
        use crate::event::{Alphabet, EventStream, Ordering};
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let alphabet = Alphabet::from_labels(["A", "B", "C", "D"]).unwrap();
        let intervals = [
            iv(0.0, 0.005),
            iv(0.005, 0.01),
            Interval::closed(0.0, 0.002).unwrap(),
            iv(0.0, 0.05),
        ];
        let mut checked = 0;
        for _ in 0..40 {
            let n = 50 + next(400) as usize;
            let mut times: Vec<f64> = (0..n).map(|_| next(2000) as f64 * 1e-3).collect();
            times.sort_by(f64::total_cmp);
            let types = (0..n).map(|_| EventType(next(4) as u32)).collect();
            let stream =
                EventStream::new(times, types, alphabet.clone(), Ordering::SortIfNeeded).unwrap();
            let idx = TypeIndex::new(&stream);
            for _ in 0..20 {
                let len = 2 + next(3) as usize;
                let ty: Vec<EventType> = (0..len).map(|_| EventType(next(4) as u32)).collect();
                let ivs: Vec<Interval> = (1..len).map(|_| intervals[next(4) as usize]).collect();
                let episode = Episode::new(ty.clone(), ivs.clone());
                let prefix = Episode::new(ty[..len - 1].to_vec(), ivs[..len - 2].to_vec());
                let ends = Ends::of(&idx, &prefix);
                let whole = Ends::of(&idx, &episode);
                for e in [&ends, &whole] {
                    let starts = e.latest_starts();
                    assert!(
                        starts.windows(2).all(|w| w[0] <= w[1]),
                        "latest starts decrease: {episode:?}"
                    );
                }
                let fused = ends.count_extension(&idx, ty[len - 2], ivs[len - 2], ty[len - 1]);
                assert_eq!(fused, count_by_ends(&idx, &episode), "{episode:?}");
                assert_eq!(fused, count_exact(&idx, &episode), "{episode:?}");
                checked += u64::from(fused > 0);
            }
        }
        assert!(checked > 100, "only {checked} episodes occurred");
    }

    /// `EarliestEnds::count_prefixed` equals Algorithm 1 on the stream, for random streams
    /// with ties (1 ms grid), lag-0 intervals and every order of types, episodes of 1 to 3
    /// distinct types and a distinct prepended unit.
    #[test]
    fn prefixed_count_equals_algorithm_1() {
        use crate::event::{Alphabet, EventStream, Ordering};
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let alphabet = Alphabet::from_labels(["A", "B", "C", "D", "E"]).unwrap();
        let intervals = [
            iv(0.0, 0.005),
            iv(0.005, 0.01),
            Interval::closed(0.0, 0.002).unwrap(),
            iv(0.0, 0.05),
            iv(0.002, 0.004),
        ];
        let mut checked = 0;
        for _ in 0..60 {
            let n = 30 + next(500) as usize;
            let mut times: Vec<f64> = (0..n).map(|_| next(1500) as f64 * 1e-3).collect();
            times.sort_by(f64::total_cmp);
            let types = (0..n).map(|_| EventType(next(5) as u32)).collect();
            let stream =
                EventStream::new(times, types, alphabet.clone(), Ordering::SortIfNeeded).unwrap();
            let idx = TypeIndex::new(&stream);
            for _ in 0..25 {
                let len = 1 + next(3) as usize;
                let mut ty: Vec<EventType> = Vec::new();
                while ty.len() < len + 1 {
                    let t = EventType(next(5) as u32);
                    if !ty.contains(&t) {
                        ty.push(t);
                    }
                }
                let ivs: Vec<Interval> = (0..len).map(|_| intervals[next(5) as usize]).collect();
                let (u, rest) = (ty[0], &ty[1..]);
                let parent = Episode::new(rest.to_vec(), ivs[1..].to_vec());
                let whole = Episode::new(ty.clone(), ivs.clone());
                let earliest = EarliestEnds::of(&idx, &parent);
                assert!(
                    earliest.earliest_end.windows(2).all(|w| w[0] <= w[1]),
                    "earliest ends never decrease: {parent:?}"
                );
                let got = earliest.count_prefixed(idx.times(u), gap_of(ivs[0], u, rest[0]));
                assert_eq!(got, count_exact(&idx, &whole), "{whole:?}");
                checked += u64::from(got > 0);
            }
        }
        assert!(checked > 200, "only {checked} episodes occurred");
    }
}
