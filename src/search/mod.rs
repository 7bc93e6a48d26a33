//! Exact k-nearest-neighbour similarity search over collections of z-normalised series: an
//! iSAX index in the MESSI layout queried by SING's CPU + GPU algorithm.
//!
//! Source: Peng, Fatourou & Palpanas, *SING: Sequence Indexing Using GPUs* (PLATON D3.2,
//! `papers/sing-gpu-similarity-search.txt`): §2 (iSAX, the MESSI index), Algorithms 6–12
//! (SING's exact search). The modules, one concept each:
//!
//! * [`paa`]: the PAA segments of a series length (w = 16) and PAA values.
//! * [`isax`]: breakpoints (N(0, 1) quantiles, cardinality 256), iSAX words (16 bytes per
//!   series), the MINDIST lower bounds (per series by a per-query table, per tree node) and
//!   the one pruning rule every path applies ([`isax::prunable`]).
//! * [`collection`]: the series searched (whole series or sliding windows of a long series),
//!   z-normalised and stored as `f32`, and the one real distance every path reports
//!   ([`collection::sq_dist`]).
//! * [`tree`]: the MESSI index tree (2^16 root children keyed by the first bit of each
//!   segment, binary splits, leaf capacity), built multi-threaded, in leaf order.
//! * [`index`]: the assembled index: tree, leaf-ordered iSAX array, leaf-ordered series, ids.
//! * [`bounds`]: what a query shares with its lower-bound producers: the chunks of the active
//!   array, the board of published survivors and the BSF, the [`bounds::LowerBounds`] trait
//!   and its CPU producer.
//! * [`query`]: SING's exact k-NN (approximate search → BSF, active root subtrees, lower
//!   bounds chunk by chunk from a [`bounds::LowerBounds`] producer, CPU workers with priority
//!   queues and a shared BSF).
//! * [`searcher`]: [`Searcher`], the path `--device` picks (CPU, GPU lower bounds, GPU
//!   batches) and the fall-back from a failed GPU.
//! * [`brute`]: the multi-threaded brute-force scan (the oracle).
//! * [`batch`]: batched queries: SING per query in parallel on the CPU; on a GPU the PAA
//!   bound of every (query, series) pair, then exact distances of the survivors.
//! * [`gpu`]: the GPU lower-bound producer (`device::search`).
//! * [`store`]: the on-disk index directory (versioned, memory-mapped reload).
//! * [`incremental`]: an index that grows (the pipeline stage's past windows).
//!
//! Every path — SING on the CPU, SING with GPU lower bounds, GPU batches, brute force — reports the same
//! neighbours: the `k` smallest `(squared distance, id)` pairs, distances computed by
//! [`collection::sq_dist`] (f32 data, f64 accumulation, one summation order), so ties go to
//! the smallest id and distances agree bit for bit.

pub mod batch;
pub mod bounds;
pub mod brute;
pub mod collection;
pub mod gpu;
pub mod incremental;
pub mod index;
pub mod isax;
pub mod paa;
pub mod query;
pub mod searcher;
pub mod store;
pub mod tree;

use std::path::PathBuf;

pub use batch::{BatchAnswer, BatchStats};
pub use collection::{Collection, CollectionKind};
pub use incremental::IncrementalIndex;
pub use index::{BuildOptions, Index};
pub use query::{Neighbor, QueryAnswer, QueryOptions, QueryStats};
pub use searcher::Searcher;

/// Errors of the search module. Every message names the input it is about.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// Bad input data (NaN, ragged series, an empty collection, too many series, ...).
    #[error("{input}: {message}")]
    Input {
        /// The input: a file, a query number, an option.
        input: String,
        /// What is wrong.
        message: String,
    },
    /// `k = 0`.
    #[error("`k` must be at least 1")]
    ZeroK,
    /// A query whose length differs from the index's series length.
    #[error("query {query} has {got} samples, but the index holds series of length {expected}")]
    QueryLength {
        /// The query's number (0-based).
        query: usize,
        /// Its length.
        got: usize,
        /// The index's series length.
        expected: usize,
    },
    /// An index directory written by another version of the on-disk format.
    #[error(
        "{}: index format version {found}, but this synfire reads version {expected}: rebuild it with `synfire search build`",
        .dir.display()
    )]
    Version {
        /// The index directory.
        dir: PathBuf,
        /// The version found.
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// A missing, truncated or inconsistent index directory.
    #[error("{}: not a usable index: {message}", .dir.display())]
    Corrupt {
        /// The index directory.
        dir: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// An I/O failure on an index file.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A series reader failed.
    #[error(transparent)]
    Series(#[from] crate::series::SeriesError),
    /// The GPU failed (only an error where the GPU was demanded; otherwise the CPU answers).
    #[error(transparent)]
    Device(#[from] crate::device::DeviceError),
}

impl SearchError {
    /// Checks a k-NN request: `k >= 1` and a query of the index's series length `len`.
    pub(crate) fn check_request(k: usize, q_len: usize, len: usize) -> Result<(), Self> {
        if k == 0 {
            return Err(Self::ZeroK);
        }
        if q_len != len {
            return Err(Self::QueryLength {
                query: 0,
                got: q_len,
                expected: len,
            });
        }
        Ok(())
    }

    pub(crate) fn input(input: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Input {
            input: input.into(),
            message: message.into(),
        }
    }
}
