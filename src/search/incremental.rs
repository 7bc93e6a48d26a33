//! An index that grows one series at a time: the pipeline stage's index of past windows.
//!
//! The leaf-ordered layout of SING (contiguous root subtrees, the iSAX array on the GPU) does
//! not admit insertions in place, so new series wait in a **pending** buffer and the index is
//! **rebuilt** (multi-threaded, [`Index::build`]) once the buffer holds a quarter as many
//! series as the index (at least `MIN_REBUILD`): the rebuild work per insertion is then a
//! small constant multiple of a build's per-series cost, and a query scans at most about a
//! fifth of the series outside the index. A query is answered exactly: SING on the index
//! (CPU or GPU lower bounds), then an early-abandoning scan of the pending series against
//! that answer's k-th distance, merged by `(distance², id)`.
//!
//! Ids are kept as the caller's `u64` (sample numbers, window numbers); internally series
//! are numbered in insertion order, so ties still go to the smallest (earliest) id. With a
//! `capacity`, a rebuild keeps only the newest `capacity` series.

use std::collections::VecDeque;

use super::SearchError;
use super::collection::{Collection, CollectionKind, sq_dist};
use super::index::{BuildOptions, Index};
use super::query::{Neighbor, QueryOptions, QueryStats};
use super::searcher::Searcher;
use crate::device::DeviceTarget;

/// Pending series that trigger the first build (and the least that trigger a rebuild).
pub(crate) const MIN_REBUILD: usize = 1024;

/// A growing exact k-NN index over z-normalised series of one length.
#[derive(Debug)]
pub struct IncrementalIndex {
    len: usize,
    options: BuildOptions,
    capacity: usize,
    main: Option<Index>,
    /// External id per internal id (internal = position in this deque + `first`).
    externals: VecDeque<u64>,
    first: u64,
    pending: Vec<f32>,
    rebuilds: u64,
}

/// One neighbour of an incremental query: the caller's id and the distance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IncrementalNeighbor {
    /// The id given at insertion.
    pub id: u64,
    /// Euclidean distance (z-normalised).
    pub distance: f64,
}

impl IncrementalIndex {
    /// An empty index of series of length `len`, keeping at most `capacity` series (the
    /// newest; `usize::MAX` keeps all).
    ///
    /// # Errors
    /// [`SearchError::Input`] for `len = 0`, `capacity = 0` or a leaf capacity of 0.
    pub fn new(len: usize, options: BuildOptions, capacity: usize) -> Result<Self, SearchError> {
        if len == 0 || capacity == 0 || options.leaf_capacity == 0 {
            return Err(SearchError::input(
                "incremental index",
                format!(
                    "series length {len}, capacity {capacity}, leaf capacity {}: each must be at least 1",
                    options.leaf_capacity
                ),
            ));
        }
        Ok(Self {
            len,
            options,
            capacity,
            main: None,
            externals: VecDeque::new(),
            first: 0,
            pending: Vec::new(),
            rebuilds: 0,
        })
    }

    /// The series length, samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Series held (indexed and pending).
    #[must_use]
    pub fn count(&self) -> usize {
        self.externals.len()
    }

    /// True when no series is held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.externals.is_empty()
    }

    /// Series waiting outside the index.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.pending.len() / self.len
    }

    /// Rebuilds so far.
    #[must_use]
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// Adds a z-normalised series with the caller's id (ids should increase with time, so
    /// ties go to the earliest).
    ///
    /// # Errors
    /// [`SearchError::QueryLength`] for a series of another length; a rebuild's errors.
    pub fn insert(&mut self, id: u64, row: &[f32]) -> Result<(), SearchError> {
        if row.len() != self.len {
            return Err(SearchError::QueryLength {
                query: 0,
                got: row.len(),
                expected: self.len,
            });
        }
        self.pending.extend_from_slice(row);
        self.externals.push_back(id);
        let indexed = self.main.as_ref().map_or(0, Index::count);
        if self.pending() >= MIN_REBUILD.max(indexed / 4) {
            self.rebuild()?;
        }
        Ok(())
    }

    fn rebuild(&mut self) -> Result<(), SearchError> {
        let (mut rows, mut ids) = match self.main.take() {
            Some(m) => m.rows_by_id(),
            None => (Vec::new(), Vec::new()),
        };
        let base = self.first + ids.len() as u64;
        rows.append(&mut self.pending);
        ids.extend((0..(rows.len() / self.len - ids.len()) as u64).map(|i| (base + i) as u32));
        // Keep the newest `capacity`, renumbered from 0.
        let excess = self.externals.len().saturating_sub(self.capacity);
        self.externals.drain(..excess);
        let rows = rows.split_off(excess * self.len);
        let n = rows.len() / self.len;
        ids.clear();
        ids.extend(0..n as u32);
        self.first = 0;
        let c = Collection::from_normalized(
            CollectionKind::Series {
                source: "incremental".into(),
            },
            self.len,
            rows,
            ids,
        )?;
        self.main = Some(Index::build(&c, self.options)?);
        self.rebuilds += 1;
        Ok(())
    }

    /// The exact k nearest held series of the z-normalised query `q`, nearest first (ties:
    /// earliest first), with the index query's costs (the pending scan's distances added). GPU
    /// lower bounds come from `device`'s GPU (a [`DeviceTarget`] names it; a plain
    /// [`DeviceChoice`](crate::device::DeviceChoice): the first GPU).
    ///
    /// # Errors
    /// [`SearchError::ZeroK`], [`SearchError::QueryLength`], and with `Gpu` a GPU failure.
    pub fn knn(
        &self,
        q: &[f32],
        k: usize,
        device: impl Into<DeviceTarget>,
        options: QueryOptions,
    ) -> Result<(Vec<IncrementalNeighbor>, QueryStats), SearchError> {
        let target: DeviceTarget = device.into();
        SearchError::check_request(k, q.len(), self.len)?;
        let mut best: Vec<(u64, u32)> = Vec::with_capacity(k + 1);
        let mut stats = QueryStats::default();
        if let Some(main) = &self.main {
            let answer = Searcher::new(main, target, options)?.knn_normalized(q, k)?;
            stats = answer.stats;
            best.extend(
                answer
                    .neighbors
                    .iter()
                    .map(|n: &Neighbor| (n.squared.to_bits(), n.id)),
            );
        }
        Ok(self.with_pending(q, k, best, stats))
    }

    /// The exact k nearest held series of each z-normalised query of `qs`, answered together:
    /// [`Searcher::query_batch`] on the index (batched GPU filter and refine, or the queries
    /// in parallel on the CPU), then each query's scan of the pending series, as
    /// [`IncrementalIndex::knn`] does for one, on `device` as there.
    ///
    /// # Errors
    /// As [`IncrementalIndex::knn`], naming the first query of the wrong length.
    pub fn knn_batch(
        &self,
        qs: &[Vec<f32>],
        k: usize,
        device: impl Into<DeviceTarget>,
        options: QueryOptions,
    ) -> Result<Vec<(Vec<IncrementalNeighbor>, QueryStats)>, SearchError> {
        let target: DeviceTarget = device.into();
        if k == 0 {
            return Err(SearchError::ZeroK);
        }
        if let Some((i, q)) = qs.iter().enumerate().find(|(_, q)| q.len() != self.len) {
            return Err(SearchError::QueryLength {
                query: i,
                got: q.len(),
                expected: self.len,
            });
        }
        let main: Vec<(Vec<(u64, u32)>, QueryStats)> = match &self.main {
            Some(main) if !qs.is_empty() => Searcher::new(main, target, options)?
                .query_batch(qs, k)?
                .answers
                .into_iter()
                .map(|a| {
                    let best = a
                        .neighbors
                        .iter()
                        .map(|n| (n.squared.to_bits(), n.id))
                        .collect();
                    (best, a.stats)
                })
                .collect(),
            _ => vec![(Vec::new(), QueryStats::default()); qs.len()],
        };
        use rayon::prelude::*;
        Ok(qs
            .par_iter()
            .zip(main)
            .map(|(q, (best, stats))| self.with_pending(q, k, best, stats))
            .collect())
    }

    /// Merges the index's answer `best` (the k smallest `(distance² bits, internal id)`) with
    /// an early-abandoning scan of the pending series, and maps the ids back.
    fn with_pending(
        &self,
        q: &[f32],
        k: usize,
        mut best: Vec<(u64, u32)>,
        mut stats: QueryStats,
    ) -> (Vec<IncrementalNeighbor>, QueryStats) {
        let indexed = self.main.as_ref().map_or(0, Index::count);
        let started = std::time::Instant::now();
        for (i, row) in self.pending.chunks_exact(self.len).enumerate() {
            let limit = if best.len() >= k {
                f64::from_bits(best[k - 1].0)
            } else {
                f64::INFINITY
            };
            stats.real_distances += 1;
            if let Some(d) = sq_dist(q, row, limit) {
                let key = (d.to_bits(), (indexed + i) as u32);
                let at = best.partition_point(|x| *x < key);
                best.insert(at, key);
                best.truncate(k);
            }
        }
        stats.seconds += started.elapsed().as_secs_f64();
        let out = best
            .into_iter()
            .map(|(b, internal)| IncrementalNeighbor {
                id: self.externals[internal as usize],
                distance: f64::from_bits(b).sqrt(),
            })
            .collect();
        (out, stats)
    }
}
