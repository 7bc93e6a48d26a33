//! MTPE (multiple threads per episode): the stream split into R time segments, one state machine
//! per (episode, segment) in a counting step, then a merge of the per-segment tuples. This module
//! is the CPU reference of exactly what the GPU kernels (`kernels/episodes.cu`,
//! `episodes_mtpe_count_n*` and `episodes_mtpe_merge_n*`) compute, step for step, and it must
//! equal [`count_exact`](super::count::count_exact) for every episode and every segmentation.
//!
//! # The algorithm (paper §5.1, Figs. 5–7, with an exact merge)
//! Segment `p` holds the events with times in `(τ_p, τ_{p+1}]`; `τ_0 = -inf`, `τ_R = +inf`.
//!
//! * **Counting step** (one thread per (episode, segment)): a *free* machine is put in the state
//!   "just completed at `S_p`", with `S_p = τ_p − W′` and `W′` a safe bound on an occurrence's
//!   span (`Σ high`, see [`lookback`]). It runs over the events in `(S_p, τ_{p+1}]` and records
//!   the tuple `(a, count, b)` of [`SegmentTuple`]: the number of its completions inside the
//!   segment, the first [`RECORDED`] of their times (`a`) and the last one (`b`).
//! * **Merging step** (one thread per episode, segments in order): with `T` the true last
//!   completion at or before `τ_p`,
//!   - if `T ≤ S_p` the segment's true completions are exactly the free machine's, so the
//!     count adds `count` and `T` becomes `b`;
//!   - otherwise a *catch-up* machine restarts from `T` (the state after a completion depends
//!     only on its time) and runs until one of its completions coincides with a recorded `a[k]`
//!     — from there on it and the free machine agree, so the rest of the tuple is added — or
//!     to the segment's end.
//!
//! Why the fast path is exact (ADR 0001): (1) after a completion at `T` the state is a
//! function of `T`; (2) `f(T)`, the first completion after a reset at `T`, is the earliest end
//! of a chain starting after `T`, so it is monotone in `T`; (3) a chain ending after `τ_p`
//! starts after `τ_p − W′`. With `T ≤ S_p`: the free machine has no completion in `(S_p, τ_p]`
//! because `f(S_p) ≥ f(T) > τ_p`, and both machines hold exactly the chain ends that start after
//! `S_p`, which are the only ones that can reach past `τ_p`; so they complete at the same times.
//!
//! The paper's merge concatenates tuples pairwise in a tree, assuming one of N machines per
//! segment reproduces the boundary-crossing occurrence. With lower bounds, repeated types and
//! `last_end` that is not guaranteed, so synfire merges in order with a catch-up instead: still
//! one pass over R tuples per episode, and a catch-up only when an occurrence ends within `W′`
//! before a boundary.

use crate::episode::count::{ExactMachine, Merged, TypeIndex, distinct_types};
use crate::episode::model::Episode;

/// How many completion times (`a`) a segment tuple records for the merge's coincidence test.
pub const RECORDED: usize = 4;

/// Segment boundaries `τ_0 = -inf < τ_1 < … < τ_R = +inf` (seconds). Shape `[R + 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Segments {
    bounds: Vec<f64>,
}

impl Segments {
    /// About `r` segments holding equal numbers of the stream's events: interior boundaries are
    /// the times of events `p·n/r`, repeated times dropped (so there may be fewer segments).
    /// `times` must be non-decreasing (a stream's times). `r = 0` is taken as 1.
    #[must_use]
    pub fn by_events(times: &[f64], r: usize) -> Self {
        let r = r.max(1);
        let mut bounds = vec![f64::NEG_INFINITY];
        for p in 1..r {
            if let Some(&t) = times.get(p * times.len() / r)
                && t > *bounds.last().expect("non-empty")
                && t.is_finite()
            {
                bounds.push(t);
            }
        }
        bounds.push(f64::INFINITY);
        Self { bounds }
    }

    /// Explicit interior boundaries (strictly increasing, finite), seconds.
    ///
    /// # Errors
    /// A message when a boundary is not finite or not strictly above the previous one.
    pub fn from_interior(interior: &[f64]) -> Result<Self, String> {
        let mut bounds = vec![f64::NEG_INFINITY];
        for &t in interior {
            if !t.is_finite() || t <= *bounds.last().expect("non-empty") {
                return Err(format!(
                    "segment boundary {t} is not finite or not above the previous one"
                ));
            }
            bounds.push(t);
        }
        bounds.push(f64::INFINITY);
        Ok(Self { bounds })
    }

    /// Number of segments R.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bounds.len() - 1
    }

    /// Always false: there is at least one segment.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The boundaries `τ_0 .. τ_R`, seconds. Shape `[R + 1]`.
    #[must_use]
    pub fn bounds(&self) -> &[f64] {
        &self.bounds
    }
}

/// A safe upper bound `W′` on the span (last time − first time, seconds) of any occurrence of
/// `episode`: `Σ high · (1 + 1e-6)`. Every gap is checked as `fl(t′ − t) ≤ high`, and the
/// rounding of each `fl` difference is below `2^-51 · high`, far inside the margin.
#[must_use]
pub fn lookback(episode: &Episode) -> f64 {
    episode.intervals().iter().map(|iv| iv.high()).sum::<f64>() * (1.0 + 1e-6)
}

/// `S_p`: where segment `p`'s free machine starts, `τ_p − W′`, lowered by `|τ_p| · 1e-14` so
/// that the rounding of the subtraction can never put it above the real `τ_p − W′`. The GPU
/// kernel computes the same expression.
#[must_use]
pub fn free_start(tau: f64, lookback: f64) -> f64 {
    tau - lookback - tau.abs() * 1e-14
}

/// The counting step's result for one (episode, segment): the paper's `(a, count, b)` tuple.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SegmentTuple {
    /// Completions of the free machine inside the segment.
    pub count: u64,
    /// The first `min(count, RECORDED)` completion times, seconds (the rest `+inf`).
    pub first: [f64; RECORDED],
    /// The last completion time inside the segment, seconds (`-inf` when `count = 0`).
    pub last: f64,
}

/// Index of the first merged event with time `> after`.
fn first_after(merged: &Merged, after: f64) -> usize {
    merged.times().partition_point(|&t| t <= after)
}

/// The counting step for segment `p` (paper Fig. 6): the free machine from `S_p` to `τ_{p+1}`.
///
/// # Panics
/// If `p >= segments.len()`, or as [`count_exact`](super::count::count_exact).
#[must_use]
pub fn count_segment(
    merged: &Merged,
    set: &[crate::event::EventType],
    episode: &Episode,
    segments: &Segments,
    p: usize,
) -> SegmentTuple {
    let (tau, tau_next) = (segments.bounds[p], segments.bounds[p + 1]);
    let start = free_start(tau, lookback(episode));
    let mut machine = ExactMachine::new(episode, set);
    machine.reset(start);
    let mut tuple = SegmentTuple {
        count: 0,
        first: [f64::INFINITY; RECORDED],
        last: f64::NEG_INFINITY,
    };
    let (times, slots) = (merged.times(), merged.slots());
    for j in first_after(merged, start)..merged.len() {
        let t = times[j];
        if t > tau_next {
            break;
        }
        if machine.step(t, slots[j]) && t > tau {
            if let Some(a) = tuple.first.get_mut(tuple.count as usize) {
                *a = t;
            }
            tuple.count += 1;
            tuple.last = t;
        }
    }
    tuple
}

/// What the merging step found for one episode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MergeOutcome {
    /// The exact non-overlapped count, occurrences.
    pub count: u64,
    /// Segments that needed a catch-up machine.
    pub catch_ups: u64,
    /// Catch-ups that ran to the segment's end without meeting a recorded completion.
    pub unjoined: u64,
}

/// The merging step (one pass over the segments in order, with catch-ups; see the module
/// docs). `tuples[p]` must be [`count_segment`]'s result for segment `p`.
///
/// # Panics
/// If `tuples.len() != segments.len()`, or as [`count_exact`](super::count::count_exact).
#[must_use]
pub fn merge_segments(
    merged: &Merged,
    set: &[crate::event::EventType],
    episode: &Episode,
    segments: &Segments,
    tuples: &[SegmentTuple],
) -> MergeOutcome {
    assert_eq!(tuples.len(), segments.len(), "one tuple per segment");
    let w = lookback(episode);
    let (times, slots) = (merged.times(), merged.slots());
    let mut machine = ExactMachine::new(episode, set);
    let mut total = 0u64;
    let (mut catch_ups, mut unjoined) = (0u64, 0u64);
    // The true last completion at or before τ_p.
    let mut last = f64::NEG_INFINITY;
    for (p, tuple) in tuples.iter().enumerate() {
        let (tau, tau_next) = (segments.bounds[p], segments.bounds[p + 1]);
        if last <= free_start(tau, w) {
            total += tuple.count;
            if tuple.count > 0 {
                last = tuple.last;
            }
            continue;
        }
        // Catch-up: the true machine, restarted from its last completion.
        catch_ups += 1;
        machine.reset(last);
        let recorded = (tuple.count as usize).min(RECORDED);
        let mut k = 0;
        let mut own = 0u64;
        let mut joined = false;
        for j in first_after(merged, last)..merged.len() {
            let t = times[j];
            if t > tau_next {
                break;
            }
            if !machine.step(t, slots[j]) {
                continue;
            }
            own += 1;
            last = t;
            while k < recorded && tuple.first[k] < t {
                k += 1;
            }
            if k < recorded && tuple.first[k] == t {
                // Same completion time, same state from here on: the free machine's
                // completions after a[k] are the true ones.
                total += own + (tuple.count - k as u64 - 1);
                last = tuple.last;
                joined = true;
                break;
            }
        }
        if !joined {
            total += own;
            unjoined += 1;
        }
    }
    MergeOutcome {
        count: total,
        catch_ups,
        unjoined,
    }
}

/// The exact count of `episode` by MTPE over `segments`: the counting step for every segment,
/// then the merge. Its `count` equals [`count_exact`](super::count::count_exact) (checked by property tests
/// in `tests/episodes_oracle.rs`).
///
/// # Panics
/// As [`count_exact`](super::count::count_exact).
#[must_use]
pub fn count_mtpe(index: &TypeIndex, episode: &Episode, segments: &Segments) -> MergeOutcome {
    let set = distinct_types(episode);
    let merged = Merged::new(index, &set);
    let tuples: Vec<SegmentTuple> = (0..segments.len())
        .map(|p| count_segment(&merged, &set, episode, segments, p))
        .collect();
    merge_segments(&merged, &set, episode, segments, &tuples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_by_events_drop_repeated_times() {
        let s = Segments::by_events(&[1.0, 1.0, 1.0, 1.0, 2.0, 3.0], 6);
        assert_eq!(
            s.bounds(),
            &[f64::NEG_INFINITY, 1.0, 2.0, 3.0, f64::INFINITY]
        );
        assert_eq!(Segments::by_events(&[], 8).len(), 1);
        assert!(Segments::from_interior(&[1.0, 1.0]).is_err());
        assert!(Segments::from_interior(&[f64::NAN]).is_err());
    }

    #[test]
    fn free_start_is_below_the_real_difference() {
        for &tau in &[1e6_f64, 123_456.789, -5.0, 0.0, 1e-9] {
            let w = 0.003;
            let s = free_start(tau, w);
            assert!(s <= tau - w, "{tau}");
        }
    }
}
