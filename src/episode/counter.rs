//! Counting back ends behind one interface, so the level-wise miner does not care where
//! candidates are counted. The CPU back end here is the reference; the GPU back end (device
//! threads) implements the same trait and must return identical counts.

use std::collections::HashMap;

use rayon::prelude::*;

#[cfg(doc)]
use crate::episode::count::count_exact_merged;
use crate::episode::count::{Merged, TypeIndex, count_pair, count_preelim_merged, distinct_types};
use crate::episode::ends::{Ends, EndsPath, count_by_ends};
use crate::episode::model::Episode;
use crate::episode::pairs::{PairQuery, count_pairs};
use crate::event::EventStream;

/// Which counting algorithm to run on a batch of candidates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CountKind {
    /// Exact non-overlapped count (paper Algorithm 1).
    Exact,
    /// Upper bound by the relaxed episode (paper Algorithm 3, Theorem 1).
    PreElim,
}

/// A failure of a counting back end (a device error, say). The CPU back end never fails.
#[derive(Debug, thiserror::Error)]
#[must_use]
pub enum CountError {
    /// The back end could not count; the message names the back end and the cause.
    #[error("{backend}: {message}")]
    Backend {
        /// Back-end name, e.g. `cpu` or `gpu0`.
        backend: String,
        /// What went wrong.
        message: String,
    },
}

/// Counts batches of candidate episodes against one event stream fixed at construction.
pub trait Counter: Send + Sync + std::fmt::Debug {
    /// Short name for logs and reports (`cpu`, `gpu`, …).
    fn name(&self) -> &str;

    /// Counts every candidate; `result[i]` belongs to `candidates[i]`.
    ///
    /// # Errors
    /// [`CountError`] when the back end fails; no partial result is returned.
    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError>;

    /// Events the counter reads for `episode` (for throughput figures).
    fn events_touched(&self, episode: &Episode) -> u64;

    /// How many candidates one [`Counter::count`] call should get: enough to keep the back end
    /// busy, few enough that generating the next batch overlaps counting this one.
    fn preferred_batch(&self) -> usize {
        1 << 14
    }

    /// The join bounds of `job` ([`crate::episode::bound::JoinBounds`]) computed where this
    /// counter holds its stream, equal to
    /// [`join_bounds_cpu`](crate::episode::bound::join_bounds_cpu); `None` when the back end
    /// does not compute them (the caller computes them on the host), as the CPU counter.
    fn join_bounds(&self, job: &crate::episode::bound::JoinBounds) -> Option<Vec<u64>> {
        let _ = job;
        None
    }

    /// Whether [`Counter::join_bounds`] computes bounds (so that a caller builds a job only
    /// for a counter that takes it).
    fn has_join_bounds(&self) -> bool {
        false
    }

    /// Whether a threshold search (`significance::spectrum`) should lower its floor in coarse
    /// steps: each of its rounds costs this back end a round trip (a GPU), so fewer rounds
    /// that count more candidates are cheaper. The search's result does not depend on it.
    fn coarse_thresholds(&self) -> bool {
        false
    }

    /// Whether this back end counts on the host's cores and counts a pair of distinct types
    /// exactly with [`count_pair`], so that a caller wanting more from the same pass over the
    /// two trains may count such pairs itself (the threshold search of
    /// `significance::spectrum` does, with the join bounds' bit sets:
    /// [`pair_count_and_bits`](crate::episode::bound::pair_count_and_bits)) and get the
    /// same counts. `false` for a device counter.
    fn counts_pairs_on_host(&self) -> bool {
        false
    }

    /// Whether PreElim (Algorithm 3) costs this back end less than the exact count for
    /// candidates of `level` nodes. Where it does not, the two-pass miner counts that level
    /// exactly in one pass: the same result (PreElim only eliminates), never more work.
    fn preelim_cheaper(&self, level: usize) -> bool {
        level > 1
    }
}

/// The multi-threaded CPU reference counter.
///
/// Candidates are grouped by their set of distinct event types; each group's events are merged
/// into stream order once ([`Merged`]) and every candidate of the group runs its state machine
/// over that array. Groups are counted in parallel (rayon).
#[derive(Debug)]
pub struct CpuCounter {
    index: TypeIndex,
}

impl CpuCounter {
    /// Indexes `stream` by event type (O(n), once per mining run).
    #[must_use]
    pub fn new(stream: &EventStream) -> Self {
        Self {
            index: TypeIndex::new(stream),
        }
    }

    /// The type index this counter reads.
    #[must_use]
    pub fn index(&self) -> &TypeIndex {
        &self.index
    }

    /// The type index, without the counter.
    #[must_use]
    pub fn into_index(self) -> TypeIndex {
        self.index
    }
}

impl CpuCounter {
    /// Exact counts: pairs of distinct types by [`count_pair`]; every other candidate from
    /// the ends of its prefix ([`Ends`]), computed once per run of consecutive candidates
    /// with the same prefix (the join yields a prefix's candidates together) along a prefix
    /// path shared by the runs a worker takes in turn. Equal to [`count_exact_merged`].
    ///
    /// A list whose runs are short (fewer than two candidates a run on average: a list in
    /// report order, such as a significance test's tested episodes ordered by count) is
    /// counted in prefix order instead ([`prefix_order`]) and the counts are put back in the
    /// caller's order, so that episodes sharing a prefix share its ends.
    fn count_exact_by_ends(&self, listed: &[&Episode]) -> Vec<u64> {
        let runs = prefix_runs(listed);
        if runs.len() * 2 > listed.len() && listed.len() > 2 {
            let order = prefix_order(listed);
            let sorted: Vec<&Episode> = order.iter().map(|&i| listed[i]).collect();
            let counts = self.count_runs(&sorted, &prefix_runs(&sorted));
            let mut out = vec![0u64; listed.len()];
            for (&i, c) in order.iter().zip(counts) {
                out[i] = c;
            }
            return out;
        }
        self.count_runs(listed, &runs)
    }

    /// [`CpuCounter::count_exact_by_ends`] over the given runs of `candidates`.
    fn count_runs(&self, candidates: &[&Episode], runs: &[std::ops::Range<usize>]) -> Vec<u64> {
        let index = &self.index;
        let counted: Vec<Vec<u64>> = runs
            .par_iter()
            .map_init(EndsPath::new, |path, run| {
                let members = &candidates[run.clone()];
                let first = members[0];
                let n = first.len();
                if n == 1 {
                    return members.iter().map(|e| count_by_ends(index, e)).collect();
                }
                let prefix_last = first.types()[n - 2];
                let needs_ends = n > 2 || members.iter().any(|e| e.types()[1] == prefix_last);
                let ends: Option<&Ends> = needs_ends.then(|| {
                    let prefix = Episode::new(
                        first.types()[..n - 1].to_vec(),
                        first.intervals()[..n - 2].to_vec(),
                    );
                    path.ends(index, &prefix)
                });
                let mut counts = Vec::with_capacity(members.len());
                for e in members {
                    let x = e.types()[n - 1];
                    let iv = e.intervals()[n - 2];
                    // `ends` is there whenever the first arm applies (`needs_ends`).
                    counts.push(match ends {
                        Some(ends) if n > 2 || prefix_last == x => {
                            ends.count_extension(index, prefix_last, iv, x)
                        }
                        _ => count_pair(
                            index.times(prefix_last),
                            index.times(x),
                            iv.low_by_time(prefix_last < x),
                            iv.high(),
                        ),
                    });
                }
                counts
            })
            .collect();
        counted.into_iter().flatten().collect()
    }
}

/// Runs of consecutive candidates with one prefix (all but the last node).
fn prefix_runs(candidates: &[&Episode]) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, &e) in candidates.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if same_prefix(candidates[r.start], e) => r.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

/// The positions of `candidates` in depth-first order of their prefix tree: node by node
/// (type, then the gap's interval by bit pattern), an episode before its extensions.
/// Candidates with one prefix become consecutive, an episode's extensions follow it, and
/// neighbouring runs share their longest common prefixes, which [`EndsPath`] reuses: in a
/// list closed under prefixes (the frequent episodes of a recording) the ends of every
/// listed prefix are built once for all its extensions, at every depth.
pub(crate) fn prefix_order(candidates: &[&Episode]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (candidates[a], candidates[b]);
        let (ta, tb) = (a.types(), b.types());
        let (ia, ib) = (a.intervals(), b.intervals());
        (0..a.len().min(b.len()))
            .map(|k| {
                let gap = if k == 0 {
                    std::cmp::Ordering::Equal
                } else {
                    ia[k - 1].bits().cmp(&ib[k - 1].bits())
                };
                gap.then(ta[k].cmp(&tb[k]))
            })
            .find(|o| o.is_ne())
            .unwrap_or_else(|| a.len().cmp(&b.len()))
    });
    order
}

/// Same types and intervals but for the last node (intervals by bit pattern).
fn same_prefix(a: &Episode, b: &Episode) -> bool {
    let n = a.len();
    n == b.len()
        && n >= 2
        && a.types()[..n - 1] == b.types()[..n - 1]
        && a.intervals()[..n - 2]
            .iter()
            .zip(&b.intervals()[..n - 2])
            .all(|(x, y)| x.bits() == y.bits())
}

impl Counter for CpuCounter {
    fn name(&self) -> &str {
        "cpu"
    }

    /// Never: a pair of distinct types is counted by [`count_pair`] for both kinds (PreElim
    /// is the same scan with `low = 0`), and longer candidates are counted exactly from the
    /// ends of their prefix ([`Ends`]), one sweep over the prefix's ends and the last type's
    /// events, which reads fewer events than PreElim's merge of all the candidate's types.
    fn preelim_cheaper(&self, _level: usize) -> bool {
        false
    }

    fn counts_pairs_on_host(&self) -> bool {
        true
    }

    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError> {
        // Two distinct types: the pair counts (`count_pairs`: one sweep per target type or
        // the merge-free pair passes, equal to the machines' counts).
        let pair = |e: &Episode| e.len() == 2 && e.types()[0] != e.types()[1];
        let pairs: Vec<usize> = (0..candidates.len())
            .filter(|&i| pair(&candidates[i]))
            .collect();
        let queries: Vec<PairQuery> = pairs
            .iter()
            .map(|&i| {
                let e = &candidates[i];
                let iv = e.intervals()[0];
                let zero_fits = e.types()[0] < e.types()[1];
                PairQuery {
                    a: e.types()[0],
                    b: e.types()[1],
                    low: match kind {
                        CountKind::Exact => iv.low_by_time(zero_fits),
                        CountKind::PreElim => iv.relaxed().low_by_time(zero_fits),
                    },
                    high: iv.high(),
                }
            })
            .collect();
        let mut out = vec![0u64; candidates.len()];
        for (&i, c) in pairs.iter().zip(count_pairs(&self.index, &queries)) {
            out[i] = c;
        }
        if kind == CountKind::Exact {
            if pairs.len() == candidates.len() {
                return Ok(out);
            }
            let rest: Vec<usize> = (0..candidates.len())
                .filter(|&i| !pair(&candidates[i]))
                .collect();
            let others: Vec<&Episode> = rest.iter().map(|&i| &candidates[i]).collect();
            for (&i, c) in rest.iter().zip(self.count_exact_by_ends(&others)) {
                out[i] = c;
            }
            return Ok(out);
        }
        let f = count_preelim_merged;
        let mut groups: HashMap<Vec<crate::event::EventType>, Vec<usize>> = HashMap::new();
        for (i, e) in candidates.iter().enumerate().filter(|(_, e)| !pair(e)) {
            let mut set = distinct_types(e);
            set.sort_unstable();
            groups.entry(set).or_default().push(i);
        }
        let groups: Vec<_> = groups.into_iter().collect();
        let counted: Vec<Vec<(usize, u64)>> = groups
            .par_iter()
            .map(|(set, members)| {
                let merged = Merged::new(&self.index, set);
                members
                    .iter()
                    .map(|&i| (i, f(&merged, set, &candidates[i])))
                    .collect()
            })
            .collect();
        for (i, c) in counted.into_iter().flatten() {
            out[i] = c;
        }
        Ok(out)
    }

    fn events_touched(&self, episode: &Episode) -> u64 {
        self.index.events_touched(episode)
    }
}
