//! Many two-node episodes counted in one sweep: the exact non-overlapped counts of pairs
//! `A → B` (`A ≠ B`) for a whole list of `(A, B, interval)`, equal to [`count_pair`] on each.
//!
//! [`count_pair`] reads both trains in full, so a list of pairs costs `Σ (|A| + |B|)` event
//! reads: at level 2 of a dense recording (every ordered pair of `N` units in `I` intervals,
//! all frequent) that is `2·N·I·n` for `n` events, `8·10¹⁰` for 1,000 units over an hour,
//! more than the rest of the search. The sweep here reads each target train `B` once and, at
//! each `B` event, only the events of the listed `A` types that lie within the widest
//! interval before it: `Σ_B |B| · (1 + ρ_A·w)` for the `A` events' rate `ρ_A` and the widest
//! window `w`, which is the cross-correlogram's cost (about 80 events a spike for 1,000 units
//! at 3.8 Hz and `w` = 20 ms). [`count_pairs`] picks the cheaper of the two from the
//! trains' sizes; both give the same counts.
//!
//! # Why the sweep's count is `count_pair`'s
//! For one pair, `count_pair` counts a `B` at `t` (after the last counted occurrence's end
//! `last_end`, `t > last_end`) exactly when the oldest `A` at `a` with `a > last_end` and
//! `¬(t − a > high)` also has `t − a > low`, and then sets `last_end = t`. Since `t − a` is
//! non-increasing in `a` (floating-point subtraction is monotone), that holds exactly when
//! *some* `A` with `a > last_end` has `¬(t − a > high)` and `t − a > low`: the sweep tests
//! that condition, with the same comparisons, over the `A` events whose delay lies in the
//! union of the listed intervals (a superset of each pair's), and keeps `last_end` per pair
//! (times are finite, so `d ≤ high` is `¬(d > high)`).
//! The property test `sweep_equals_count_pair` checks it, ties and zero delays included.
//!
//! # Source
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`), Algorithm 1 specialised to `N = 2`
//! (see [`count_pair`]); the sweep is the standard cross-correlogram loop (e.g. Elephant's
//! `cross_correlation_histogram`) with Algorithm 1's non-overlap rule per pair.

use rayon::prelude::*;

use crate::episode::count::{TypeIndex, count_pair};
use crate::event::EventType;

/// One pair to count: `A → B` with the strict lower bound `low` and the upper bound `high`
/// of the delay (seconds), as [`count_pair`] takes them (`low` from
/// [`Interval::low_by_time`](crate::episode::Interval::low_by_time) or its relaxed form).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairQuery {
    /// The first node's type.
    pub a: EventType,
    /// The second node's type (`≠ a`).
    pub b: EventType,
    /// Strict lower bound of the delay `t(B) − t(A)`, seconds.
    pub low: f64,
    /// Upper bound of the delay, seconds.
    pub high: f64,
}

/// The exact non-overlapped count of each query, `out[i]` for `queries[i]`, equal to
/// [`count_pair`]`(index.times(a), index.times(b), low, high)`; by one sweep per target type
/// (module docs) where that reads fewer events than the pair-by-pair passes, else pair by
/// pair. Parallel over target types (rayon). Memory: the listed `A` types' events merged
/// once (16 bytes an event) and 24 bytes a query.
///
/// # Panics
/// If a query has `a == b` (a self-pair is not a [`count_pair`] query) or names a type
/// outside `index`.
#[must_use]
pub fn count_pairs(index: &TypeIndex, queries: &[PairQuery]) -> Vec<u64> {
    assert!(
        queries.iter().all(|q| q.a != q.b),
        "count_pairs: a self-pair is not a pair query"
    );
    if queries.is_empty() {
        return Vec::new();
    }
    if sweep_cost(index, queries) * 2.0 < pairwise_cost(index, queries) {
        count_pairs_sweep(index, queries)
    } else {
        queries
            .par_iter()
            .map(|q| count_pair(index.times(q.a), index.times(q.b), q.low, q.high))
            .collect()
    }
}

/// Event reads of the pair-by-pair passes: `Σ (|A| + |B|)`.
fn pairwise_cost(index: &TypeIndex, queries: &[PairQuery]) -> f64 {
    queries
        .iter()
        .map(|q| (index.times(q.a).len() + index.times(q.b).len()) as f64)
        .sum()
}

/// Estimated event reads of the sweep: the merge of the `A` types' events, each target
/// train once, and at each target event the `A` events in the widest window (at their mean
/// rate) times the queries an `A` type has for that target.
fn sweep_cost(index: &TypeIndex, queries: &[PairQuery]) -> f64 {
    let mut seen_a = vec![false; index.num_types()];
    let mut seen_b = vec![false; index.num_types()];
    let (mut n_a, mut n_b) = (0usize, 0usize);
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut width = 0.0f64;
    for q in queries {
        for (seen, ty, n) in [(&mut seen_a, q.a, &mut n_a), (&mut seen_b, q.b, &mut n_b)] {
            if !seen[ty.index()] {
                seen[ty.index()] = true;
                let times = index.times(ty);
                *n += times.len();
                if let (Some(&f), Some(&l)) = (times.first(), times.last()) {
                    first = first.min(f);
                    last = last.max(l);
                }
            }
        }
        width = width.max(q.high - q.low.max(0.0));
    }
    let span = (last - first).max(f64::MIN_POSITIVE);
    let targets = seen_b.iter().filter(|&&s| s).count().max(1);
    let per_target = queries.len() as f64 / targets as f64;
    let per_a = per_target / seen_a.iter().filter(|&&s| s).count().max(1) as f64;
    let window = n_a as f64 * (width / span).min(1.0);
    n_a as f64 * (n_a as f64).log2().max(1.0) + n_b as f64 * (1.0 + window * per_a.max(1.0))
}

/// The sweep (module docs), whatever its cost.
pub(crate) fn count_pairs_sweep(index: &TypeIndex, queries: &[PairQuery]) -> Vec<u64> {
    let k = index.num_types();
    // The A types' events merged by time (ties in either order: the window test is by time).
    let mut is_a = vec![false; k];
    for q in queries {
        is_a[q.a.index()] = true;
    }
    let mut merged: Vec<(f64, u32)> = Vec::new();
    for (ty, _) in is_a.iter().enumerate().filter(|(_, a)| **a) {
        let ty = EventType(u32::try_from(ty).expect("type ids are u32"));
        merged.extend(index.times(ty).iter().map(|&t| (t, ty.0)));
    }
    merged.par_sort_unstable_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
    // Queries grouped by target, then by A: `order[starts[b]..starts[b+1]]`.
    let mut order: Vec<usize> = (0..queries.len()).collect();
    order.sort_unstable_by_key(|&i| (queries[i].b.0, queries[i].a.0));
    let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
    for (pos, &i) in order.iter().enumerate() {
        match groups.last_mut() {
            Some(g) if queries[order[g.start]].b == queries[i].b => g.end = pos + 1,
            _ => groups.push(pos..pos + 1),
        }
    }
    let counted: Vec<Vec<(usize, u64)>> = groups
        .par_iter()
        .map_init(
            || vec![(0u32, 0u32); k],
            |slots, g| sweep_target(index, queries, &order[g.clone()], &merged, slots),
        )
        .collect();
    let mut out = vec![0u64; queries.len()];
    for (i, c) in counted.into_iter().flatten() {
        out[i] = c;
    }
    out
}

/// One target's queries (`members`, sorted by `A`) over its train. `slots[a]` is scratch of
/// length `num_types`, all `(0, 0)` on entry and on return: the range of `members` whose
/// `A` is `a`.
fn sweep_target(
    index: &TypeIndex,
    queries: &[PairQuery],
    members: &[usize],
    merged: &[(f64, u32)],
    slots: &mut [(u32, u32)],
) -> Vec<(usize, u64)> {
    let b = queries[members[0]].b;
    let mut high_max = f64::NEG_INFINITY;
    let mut low_min = f64::INFINITY;
    for (pos, &i) in members.iter().enumerate() {
        let q = &queries[i];
        let pos = u32::try_from(pos).expect("fewer than u32::MAX queries a target");
        let slot = &mut slots[q.a.index()];
        if slot.1 == 0 {
            *slot = (pos, pos + 1);
        } else {
            slot.1 = pos + 1;
        }
        high_max = high_max.max(q.high);
        low_min = low_min.min(q.low);
    }
    let lows: Vec<f64> = members.iter().map(|&i| queries[i].low).collect();
    let highs: Vec<f64> = members.iter().map(|&i| queries[i].high).collect();
    let mut last_end = vec![f64::NEG_INFINITY; members.len()];
    let mut counts = vec![0u64; members.len()];
    let (mut lo, mut hi) = (0usize, 0usize);
    for &t in index.times(b) {
        // The A events whose delay may fit some query: ¬(t − a > high_max) and t − a > low_min.
        while lo < merged.len() && t - merged[lo].0 > high_max {
            lo += 1;
        }
        if hi < lo {
            hi = lo;
        }
        while hi < merged.len() && t - merged[hi].0 > low_min {
            hi += 1;
        }
        for &(a, ty) in &merged[lo..hi] {
            let (start, end) = slots[ty as usize];
            for r in start as usize..end as usize {
                let d = t - a;
                if t > last_end[r] && a > last_end[r] && d <= highs[r] && d > lows[r] {
                    counts[r] += 1;
                    last_end[r] = t;
                }
            }
        }
    }
    for &i in members {
        slots[queries[i].a.index()] = (0, 0);
    }
    members.iter().copied().zip(counts).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::event::{Alphabet, EventStream, Ordering};

    fn stream(events: &[(f64, u32)]) -> EventStream {
        let k = events.iter().map(|e| e.1).max().unwrap_or(0) + 1;
        let alphabet = Alphabet::from_labels((0..k).map(|i| format!("u{i}"))).expect("labels");
        let times: Vec<f64> = events.iter().map(|e| e.0).collect();
        let types: Vec<EventType> = events.iter().map(|e| EventType(e.1)).collect();
        EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).expect("valid stream")
    }

    proptest! {
        /// The sweep equals `count_pair` on every query: times on a coarse grid (ties and
        /// zero delays), intervals with and without a zero delay, overlapping intervals.
        #[test]
        fn sweep_equals_count_pair(
            events in proptest::collection::vec((0u32..60, 0u32..5), 1..200),
            ivs in proptest::collection::vec((0u32..4, 1u32..6, any::<bool>()), 1..4),
        ) {
            let evs: Vec<(f64, u32)> = events.iter().map(|&(t, ty)| (f64::from(t) * 0.001, ty)).collect();
            let s = stream(&evs);
            let index = TypeIndex::new(&s);
            let k = index.num_types() as u32;
            let mut queries = Vec::new();
            for a in 0..k {
                for b in 0..k {
                    if a == b { continue; }
                    for &(lo, w, zero) in &ivs {
                        let low = if zero && lo == 0 {
                            if a < b { 0.0f64.next_down() } else { 0.0 }
                        } else {
                            f64::from(lo) * 0.001
                        };
                        queries.push(PairQuery { a: EventType(a), b: EventType(b), low, high: f64::from(lo + w) * 0.001 });
                    }
                }
            }
            let sweep = count_pairs_sweep(&index, &queries);
            let chosen = count_pairs(&index, &queries);
            for (i, q) in queries.iter().enumerate() {
                let oracle = count_pair(index.times(q.a), index.times(q.b), q.low, q.high);
                prop_assert_eq!(sweep[i], oracle, "query {:?}", q);
                prop_assert_eq!(chosen[i], oracle, "query {:?}", q);
            }
        }
    }

    #[test]
    fn sweep_skips_types_without_events_and_repeats_of_a_query() {
        let s = stream(&[(0.0, 0), (0.002, 1), (0.004, 0), (0.005, 1), (0.01, 2)]);
        let index = TypeIndex::new(&s);
        let q = PairQuery {
            a: EventType(0),
            b: EventType(1),
            low: 0.0,
            high: 0.003,
        };
        let r = PairQuery {
            a: EventType(2),
            b: EventType(1),
            low: 0.0,
            high: 0.003,
        };
        assert_eq!(count_pairs_sweep(&index, &[q, r, q]), vec![2, 0, 2]);
    }
}
