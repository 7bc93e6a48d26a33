//! Level-wise candidate generation (CPU).
//!
//! * Level 1: one single-node episode per event type.
//! * Level 2: every ordered pair of frequent level-1 types (repeats allowed) × every interval.
//! * Level k+1: joins `α ⋈ β` of frequent k-episodes where α's suffix (types 2..k and
//!   intervals 2..k-1) equals β's prefix (types 1..k-1, intervals 1..k-2); the candidate is α
//!   followed by β's last interval and type.
//!
//! The join is complete: every occurrence of a (k+1)-episode contains occurrences of its
//! k-prefix and k-suffix, and non-overlapped occurrences stay non-overlapped, so both are at
//! least as frequent as the episode itself (anti-monotonicity of the non-overlapped count).
//!
//! # References
//! Cao et al. §5 ("generating episode candidates … on CPU"); Patnaik, Sastry, Unnikrishnan,
//! "Inferring neuronal network connectivity from spike data: a temporal data mining approach"
//! (the level-wise procedure with inter-event constraints, ref. \[13\] of the paper).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::episode::bound::{PairSlot, ReachPath, SuccessorTable, and_count};
use crate::episode::count::TypeIndex;
use crate::episode::model::{Episode, Interval};
use crate::event::EventType;

/// Level-1 candidates: one episode per event type `0..num_types`.
#[must_use]
pub fn level_one(num_types: usize) -> Vec<Episode> {
    (0..num_types)
        .map(|t| Episode::single(EventType(u32::try_from(t).unwrap_or(u32::MAX))))
        .collect()
}

/// Level-2 candidates: all ordered pairs of `frequent` types (repeats allowed) × `intervals`,
/// ordered by (first type, interval, second type).
#[must_use]
pub fn level_two(frequent: &[EventType], intervals: &[Interval]) -> Vec<Episode> {
    let mut out = Vec::with_capacity(frequent.len() * frequent.len() * intervals.len());
    for &a in frequent {
        for &iv in intervals {
            for &b in frequent {
                out.push(Episode::new(vec![a, b], vec![iv]));
            }
        }
    }
    out
}

/// The level-2 candidates of [`level_two`] for which `keep(first, interval, second)` holds
/// (indices into `frequent` and `intervals`), in the same order, without building the others:
/// with a bound that removes most pairs, the survivors are all that is allocated.
pub(crate) fn level_two_where(
    frequent: &[EventType],
    intervals: &[Interval],
    mut keep: impl FnMut(usize, usize, usize) -> bool,
) -> Vec<Episode> {
    let mut out = Vec::new();
    for (i, &a) in frequent.iter().enumerate() {
        for (k, &iv) in intervals.iter().enumerate() {
            for (j, &b) in frequent.iter().enumerate() {
                if keep(i, k, j) {
                    out.push(Episode::new(vec![a, b], vec![iv]));
                }
            }
        }
    }
    out
}

/// A hashable key for a run of types and intervals (intervals by bit pattern: they all come
/// from one user-given set, so equal intervals have equal bits).
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key(Vec<u32>, Vec<(u64, u64)>);

fn key(types: &[EventType], intervals: &[Interval]) -> Key {
    Key(
        types.iter().map(|t| t.0).collect(),
        intervals.iter().map(|iv| iv.bits()).collect(),
    )
}

/// Level k+1 candidates from the frequent k-episodes (k ≥ 2): every join of an episode whose
/// suffix equals another's prefix (an episode may join with itself, e.g. `A→A` ⋈ `A→A`).
/// Output order follows `frequent` (then the order of the joined partners), so it is
/// deterministic for a deterministic input.
///
/// # Panics
/// If the episodes in `frequent` do not all have the same length k ≥ 2.
#[must_use]
pub fn join(frequent: &[Episode]) -> Vec<Episode> {
    Join::new(frequent).iter().collect()
}

/// The join of [`join`], built once (a hash of prefixes) and then counted or streamed lazily,
/// so the miner can count one chunk of candidates while the next is generated (paper §6.2).
#[derive(Debug)]
pub struct Join<'a> {
    frequent: &'a [Episode],
    by_prefix: HashMap<Key, Vec<usize>>,
}

impl<'a> Join<'a> {
    /// Indexes `frequent` by prefix.
    ///
    /// # Panics
    /// As [`join`].
    #[must_use]
    pub(crate) fn new(frequent: &'a [Episode]) -> Self {
        let mut by_prefix: HashMap<Key, Vec<usize>> = HashMap::new();
        if let Some(first) = frequent.first() {
            let k = first.len();
            assert!(k >= 2, "joins start from level 2");
            for (i, e) in frequent.iter().enumerate() {
                assert_eq!(e.len(), k, "all episodes of a level have the same length");
                by_prefix
                    .entry(key(&e.types()[..k - 1], &e.intervals()[..k - 2]))
                    .or_default()
                    .push(i);
            }
        }
        Self {
            frequent,
            by_prefix,
        }
    }

    fn partners(&self, alpha: &Episode) -> &[usize] {
        self.by_prefix
            .get(&key(&alpha.types()[1..], &alpha.intervals()[1..]))
            .map_or(&[], Vec::as_slice)
    }

    /// Number of candidates the join yields (without building them).
    #[must_use]
    pub(crate) fn len(&self) -> usize {
        self.frequent.iter().map(|a| self.partners(a).len()).sum()
    }

    /// True when the join yields nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The candidates, in [`join`]'s order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Episode> + Send + '_ {
        self.frequent.iter().flat_map(move |alpha| {
            self.partners(alpha)
                .iter()
                .map(move |&j| joined(alpha, &self.frequent[j]))
        })
    }

    /// The candidates in [`join`]'s order without those whose successor bound
    /// ([`crate::episode::bound`]) is below `min_count`, one vector per block of prefixes
    /// (possibly empty); each removed candidate adds 1 to `removed`. Candidates whose last pair `table`
    /// lacks are kept (no bound).
    ///
    /// Lazy: one block of prefixes at a time (bounded in parallel), so memory is bounded by
    /// the survivors of one block, plus the ends of one prefix path per worker.
    pub(crate) fn iter_bounded<'s>(
        &'s self,
        index: &'s TypeIndex,
        table: &'s SuccessorTable,
        min_count: u64,
        removed: &'s AtomicU64,
    ) -> impl Iterator<Item = Vec<Episode>> + Send + 's {
        let slots: Vec<Option<PairSlot>> = self
            .frequent
            .iter()
            .map(|beta| {
                let k = beta.len();
                table.slot(
                    beta.types()[k - 2],
                    beta.intervals()[k - 2],
                    beta.types()[k - 1],
                )
            })
            .collect();
        // Blocks of prefixes, each block's prefixes bounded in parallel (in order).
        self.frequent.chunks(PREFIX_BLOCK).map(move |block| {
            // Runs of consecutive prefixes (which share prefixes themselves) are bounded in
            // parallel, each along one path of ends, in order.
            let groups: Vec<Vec<Episode>> = block
                .par_chunks(PREFIX_RUN)
                .map(|run| {
                    let (mut path, mut bits) = (ReachPath::default(), Vec::new());
                    let mut keep = Vec::new();
                    let mut dropped = 0;
                    for alpha in run {
                        let partners = self.partners(alpha);
                        if partners.is_empty() {
                            continue;
                        }
                        path.end_bits(index, alpha, &mut bits);
                        for &j in partners {
                            let fits = slots[j]
                                .is_none_or(|s| and_count(&bits, table.bits(s)) >= min_count);
                            if fits {
                                keep.push(joined(alpha, &self.frequent[j]));
                            } else {
                                dropped += 1;
                            }
                        }
                    }
                    removed.fetch_add(dropped, Ordering::Relaxed);
                    keep
                })
                .collect();
            groups.into_iter().flatten().collect()
        })
    }
}

/// Prefixes bounded together in parallel by [`Join::iter_bounded`].
const PREFIX_BLOCK: usize = 1024;

/// Consecutive prefixes bounded by one worker along one path of ends.
const PREFIX_RUN: usize = 32;

/// `alpha` followed by `beta`'s last interval and type.
fn joined(alpha: &Episode, beta: &Episode) -> Episode {
    let k = alpha.len();
    let mut types = Vec::with_capacity(k + 1);
    types.extend_from_slice(alpha.types());
    types.push(beta.types()[k - 1]);
    let mut intervals = Vec::with_capacity(k);
    intervals.extend_from_slice(alpha.intervals());
    intervals.push(beta.intervals()[k - 2]);
    Episode::new(types, intervals)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(lo: f64, hi: f64) -> Interval {
        Interval::new(lo, hi).unwrap()
    }

    #[test]
    fn level_two_where_keeps_exactly_the_chosen_pairs_in_order() {
        let types = [EventType(0), EventType(1), EventType(2)];
        let ivs = [
            Interval::new(0.0, 0.005).unwrap(),
            Interval::new(0.005, 0.01).unwrap(),
        ];
        let keep = |i: usize, k: usize, j: usize| (i + 2 * k + j).is_multiple_of(3);
        let expected: Vec<Episode> = level_two(&types, &ivs)
            .into_iter()
            .enumerate()
            .filter(|(n, _)| {
                let (i, k, j) = (n / (2 * 3), (n / 3) % 2, n % 3);
                keep(i, k, j)
            })
            .map(|(_, e)| e)
            .collect();
        assert!(!expected.is_empty() && expected.len() < 18);
        assert_eq!(level_two_where(&types, &ivs, keep), expected);
    }

    #[test]
    fn level_two_is_all_pairs_times_intervals() {
        let types = [EventType(0), EventType(3), EventType(7)];
        let ivs = [iv(0.0, 0.01), iv(0.01, 0.02)];
        let c = level_two(&types, &ivs);
        assert_eq!(c.len(), 3 * 3 * 2);
        assert!(c.iter().any(|e| e.types() == [EventType(3), EventType(3)]));
    }

    #[test]
    fn join_matches_suffix_and_prefix_including_intervals() {
        let (a, b, c) = (EventType(0), EventType(1), EventType(2));
        let (i1, i2) = (iv(0.0, 0.01), iv(0.01, 0.02));
        let frequent = vec![
            Episode::new(vec![a, b], vec![i1]),
            Episode::new(vec![b, c], vec![i2]),
            Episode::new(vec![b, c], vec![i1]),
            Episode::new(vec![c, a], vec![i1]),
        ];
        let got = join(&frequent);
        let want = vec![
            Episode::new(vec![a, b, c], vec![i1, i2]),
            Episode::new(vec![a, b, c], vec![i1, i1]),
            Episode::new(vec![b, c, a], vec![i2, i1]),
            Episode::new(vec![b, c, a], vec![i1, i1]),
            Episode::new(vec![c, a, b], vec![i1, i1]),
        ];
        assert_eq!(got, want);
        assert_eq!(Join::new(&frequent).len(), want.len());
        // Level 3 -> 4: the shared middle must agree on the interval too.
        let l3 = vec![
            Episode::new(vec![a, b, c], vec![i1, i2]),
            Episode::new(vec![b, c, a], vec![i1, i1]), // b-(i1)-c does not match b-(i2)-c
            Episode::new(vec![b, c, a], vec![i2, i1]),
        ];
        assert_eq!(
            join(&l3),
            vec![Episode::new(vec![a, b, c, a], vec![i1, i2, i1])]
        );
    }
}
