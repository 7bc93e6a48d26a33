//! The multi-threaded brute-force scan: the oracle of every search test and the baseline of
//! `synfire bench search` (the role of the paper's UCR Suite-P, §5.1: every thread scans its
//! part of the series array with early-abandoning real distances; the threads share the BSF).
//!
//! It computes distances with the same [`sq_dist`] as SING and keeps the smallest
//! `(distance², id)` pairs, so its answer is the exact answer SING must reproduce: same ids,
//! same distances, ties by smallest id. Early abandoning is exact here too: a series is
//! abandoned only when a partial sum exceeds the k-th best distance of some block of series,
//! which bounds the final k-th best from above.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rayon::prelude::*;

use super::SearchError;
use super::collection::{normalize_query, sq_dist};
use super::index::Index;
use super::query::Neighbor;

/// Series per rayon task.
const BLOCK: usize = 4096;

/// The brute-force answer and its cost.
#[derive(Clone, Debug, PartialEq)]
pub struct BruteAnswer {
    /// The k nearest, nearest first (ties: smallest id first).
    pub neighbors: Vec<Neighbor>,
    /// Real distances computed (every series).
    pub real_distances: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// Exact k-NN of the z-normalised query `q` among `rows` (`[count, len]`, z-normalised) with
/// ids `ids` (`[count]`), by scanning every row on rayon's threads. Returns `min(k, count)`
/// neighbours.
///
/// # Errors
/// [`SearchError::ZeroK`]; [`SearchError::QueryLength`] when `q.len() != len`;
/// [`SearchError::Input`] when the rows and ids disagree.
pub fn knn_rows(
    rows: &[f32],
    ids: &[u32],
    len: usize,
    q: &[f32],
    k: usize,
) -> Result<BruteAnswer, SearchError> {
    let started = Instant::now();
    SearchError::check_request(k, q.len(), len)?;
    if len == 0 || rows.len() != ids.len() * len {
        return Err(SearchError::input(
            "brute force",
            format!(
                "{} values for {} ids of length {len}",
                rows.len(),
                ids.len()
            ),
        ));
    }
    let shared = AtomicU64::new(f64::INFINITY.to_bits());
    let locals: Vec<Vec<(u64, u32)>> = rows
        .par_chunks(BLOCK * len)
        .zip(ids.par_chunks(BLOCK))
        .map(|(block, block_ids)| {
            let mut best: Vec<(u64, u32)> = Vec::with_capacity(k + 1);
            let mut kth = f64::INFINITY;
            for (row, &id) in block.chunks_exact(len).zip(block_ids) {
                let limit = kth.min(f64::from_bits(shared.load(Ordering::Relaxed)));
                if let Some(d) = sq_dist(q, row, limit) {
                    let key = (d.to_bits(), id);
                    if best.len() < k || key < best[best.len() - 1] {
                        let at = best.partition_point(|x| *x < key);
                        best.insert(at, key);
                        best.truncate(k);
                        if best.len() == k {
                            kth = f64::from_bits(best[k - 1].0);
                            shared.fetch_min(kth.to_bits(), Ordering::Relaxed);
                        }
                    }
                }
            }
            best
        })
        .collect();
    let mut all: Vec<(u64, u32)> = locals.into_iter().flatten().collect();
    all.sort_unstable();
    all.truncate(k);
    Ok(BruteAnswer {
        neighbors: all
            .into_iter()
            .map(|(b, id)| Neighbor {
                id,
                distance: f64::from_bits(b).sqrt(),
                squared: f64::from_bits(b),
            })
            .collect(),
        real_distances: ids.len() as u64,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl Index {
    /// Brute-force exact k-NN of a raw query over every series of the index.
    ///
    /// # Errors
    /// As [`knn_rows`], and [`SearchError::Input`] for a NaN or infinite query sample.
    pub fn brute_force(&self, query: &[f64], k: usize) -> Result<BruteAnswer, SearchError> {
        let q = normalize_query(0, query, self.len)?;
        self.brute_force_normalized(&q, k)
    }

    /// [`Index::brute_force`] for a z-normalised query.
    ///
    /// # Errors
    /// As [`knn_rows`].
    pub fn brute_force_normalized(&self, q: &[f32], k: usize) -> Result<BruteAnswer, SearchError> {
        knn_rows(self.series(), self.ids(), self.len, q, k)
    }
}
