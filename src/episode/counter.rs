//! Counting back ends behind one interface, so the level-wise miner does not care where
//! candidates are counted. The CPU back end here is the reference; the GPU back end (device
//! threads) implements the same trait and must return identical counts.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::episode::count::{
    Merged, TypeIndex, count_exact_merged, count_pair, count_preelim_merged, distinct_types,
};
use crate::episode::model::Episode;
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

impl Counter for CpuCounter {
    fn name(&self) -> &str {
        "cpu"
    }

    /// Not at level 2: a pair of distinct types is counted by [`count_pair`] for both kinds
    /// (PreElim is the same scan with `low = 0`), so PreElim would only add a pass.
    fn preelim_cheaper(&self, level: usize) -> bool {
        level > 2
    }

    fn count(&self, kind: CountKind, candidates: &[Episode]) -> Result<Vec<u64>, CountError> {
        let f = match kind {
            CountKind::Exact => count_exact_merged,
            CountKind::PreElim => count_preelim_merged,
        };
        // Two distinct types: the merge-free pair count (equal to the machines' counts).
        let pair = |e: &Episode| e.len() == 2 && e.types()[0] != e.types()[1];
        let mut out = vec![0u64; candidates.len()];
        out.par_iter_mut()
            .zip(candidates)
            .filter(|(_, e)| pair(e))
            .for_each(|(o, e)| {
                let iv = e.intervals()[0];
                let low = match kind {
                    CountKind::Exact => iv.low(),
                    CountKind::PreElim => 0.0,
                };
                *o = count_pair(
                    self.index.times(e.types()[0]),
                    self.index.times(e.types()[1]),
                    low,
                    iv.high(),
                );
            });
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
