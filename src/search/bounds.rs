//! What a SING query shares with its lower-bound producers ([`LowerBounds`]): the query's
//! active array cut into chunks ([`ChunkPlan`]), the board on which a producer publishes each
//! chunk's survivors and reads the BSF of the moment ([`ChunkBoard`]), the producer trait and
//! its CPU implementation ([`CpuLowerBounds`], the semantics of `kernels/search.cu`).
//!
//! The query ([`super::query`]) and the GPU producer ([`super::gpu`]) both build on this module
//! and not on each other.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use super::SearchError;
use super::index::Index;
use super::isax::{QueryTable, prunable};
use crate::device::DeviceError;

/// A surviving series of a chunk: leaf-order position and squared lower bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Leaf-order position.
    pub pos: u32,
    /// Squared lower bound (MINDIST²).
    pub lb_sq: f64,
}

/// The active array of one query and its chunks: ranges of leaf-order positions (one per
/// active root subtree, by ascending MINDIST), concatenated.
#[derive(Clone, Debug)]
pub struct ChunkPlan {
    /// The query's bound table, `[16 * 256]` (see [`QueryTable`]).
    pub table: QueryTable,
    /// First leaf-order position of each range, shape `[ranges]`.
    pub starts: Vec<u32>,
    /// Offset of each range in the active array, shape `[ranges + 1]` (`prefix[0] = 0`, the
    /// last is the active array's length).
    pub prefix: Vec<u32>,
    /// Series per chunk (the last may be shorter).
    pub chunk_len: u32,
}

impl ChunkPlan {
    /// Length of the active array.
    #[must_use]
    pub fn total(&self) -> u32 {
        self.prefix.last().copied().unwrap_or(0)
    }

    /// Number of chunks.
    #[must_use]
    pub fn chunks(&self) -> usize {
        self.total().div_ceil(self.chunk_len.max(1)) as usize
    }

    /// Active-array range of chunk `c`.
    #[must_use]
    pub fn chunk(&self, c: usize) -> Range<u32> {
        let a = (c as u64 * u64::from(self.chunk_len)).min(u64::from(self.total())) as u32;
        let b = (u64::from(a) + u64::from(self.chunk_len)).min(u64::from(self.total())) as u32;
        a..b
    }

    /// Calls `f(position)` for every active index in `range`, in order.
    pub fn for_each_position(&self, range: Range<u32>, mut f: impl FnMut(u32)) {
        if range.is_empty() {
            return;
        }
        let mut r = self.prefix.partition_point(|&p| p <= range.start) - 1;
        let mut i = range.start;
        while i < range.end {
            let end = self.prefix[r + 1].min(range.end);
            let base = self.starts[r] - self.prefix[r];
            for a in i..end {
                f(base + a);
            }
            i = end;
            r += 1;
        }
    }
}

/// What the producer and the workers share: the BSF, the stop flag, the published chunks.
#[derive(Debug)]
pub struct ChunkBoard {
    bsf_bits: AtomicU64,
    stop: AtomicBool,
    slots: Vec<OnceLock<Vec<Candidate>>>,
    published: AtomicUsize,
}

impl ChunkBoard {
    /// A board of `chunks` unpublished chunks and the squared BSF `bsf_sq`.
    pub(super) fn new(chunks: usize, bsf_sq: f64) -> Self {
        Self {
            bsf_bits: AtomicU64::new(bsf_sq.to_bits()),
            stop: AtomicBool::new(false),
            slots: (0..chunks).map(|_| OnceLock::new()).collect(),
            published: AtomicUsize::new(0),
        }
    }

    /// The current squared BSF (`+inf` until k series are known).
    #[must_use]
    pub fn bsf_sq(&self) -> f64 {
        f64::from_bits(self.bsf_bits.load(Ordering::Acquire))
    }

    /// True once the workers are done: the producer should stop.
    #[must_use]
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Publishes the survivors of chunk `c` (any order; sorted here by position). A chunk
    /// published twice keeps its first list.
    pub fn publish(&self, c: usize, mut survivors: Vec<Candidate>) {
        survivors.sort_unstable_by_key(|s| s.pos);
        if let Some(slot) = self.slots.get(c)
            && slot.set(survivors).is_ok()
        {
            self.published.fetch_add(1, Ordering::Release);
        }
    }

    /// The survivors of chunk `c`, once published.
    pub(super) fn chunk(&self, c: usize) -> Option<&[Candidate]> {
        self.slots.get(c).and_then(OnceLock::get).map(Vec::as_slice)
    }

    /// Sets the squared BSF to `bsf_sq`, the workers' k-th best so far (it only decreases).
    pub(super) fn lower_bsf(&self, bsf_sq: f64) {
        self.bsf_bits.store(bsf_sq.to_bits(), Ordering::Release);
    }

    /// Tells the producer to stop.
    pub(super) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Chunks published so far.
    pub(super) fn published(&self) -> usize {
        self.published.load(Ordering::Acquire)
    }
}

/// A producer of lower bounds for the chunks of a query (SING's GPU role; also a CPU thread).
///
/// `produce` is called on a thread of its own while the workers run. For each chunk
/// `c in 0..plan.chunks()`, in order, it must read the BSF ([`ChunkBoard::bsf_sq`]), compute
/// `Σ_j T[j][word_j]` for every series of the chunk (the table's sum, in segment order) and
/// publish those the rule [`prunable`] does not prune ([`ChunkBoard::publish`]); it should
/// stop early once [`ChunkBoard::stopped`].
pub trait LowerBounds: Sync {
    /// `"cpu"` or `"gpu"`.
    fn name(&self) -> &'static str;

    /// Produces the chunks of one query; returns the number of lower bounds computed.
    ///
    /// # Errors
    /// A [`DeviceError`]; the query stays exact (the workers compute what is missing).
    fn produce(&self, plan: &Arc<ChunkPlan>, board: &Arc<ChunkBoard>) -> Result<u64, DeviceError>;
}

/// The lower-bound producer on one CPU thread: the semantics of `kernels/search.cu`, used
/// to test the chunk streaming without a GPU.
#[derive(Clone, Copy, Debug)]
pub struct CpuLowerBounds<'a> {
    index: &'a Index,
}

impl<'a> CpuLowerBounds<'a> {
    /// A producer reading `index`'s iSAX array.
    #[must_use]
    pub fn new(index: &'a Index) -> Self {
        Self { index }
    }
}

impl LowerBounds for CpuLowerBounds<'_> {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn produce(&self, plan: &Arc<ChunkPlan>, board: &Arc<ChunkBoard>) -> Result<u64, DeviceError> {
        let sax = self.index.sax();
        let mut computed = 0u64;
        for c in 0..plan.chunks() {
            if board.stopped() {
                break;
            }
            let bsf = board.bsf_sq();
            let mut out = Vec::new();
            plan.for_each_position(plan.chunk(c), |pos| {
                let lb = plan.table.lb_sq(&sax[pos as usize]);
                if !prunable(lb, bsf) {
                    out.push(Candidate { pos, lb_sq: lb });
                }
            });
            computed += u64::from(plan.chunk(c).len() as u32);
            board.publish(c, out);
        }
        Ok(computed)
    }
}

/// Runs `producer` alone over the whole iSAX array of `index` (every root subtree active, in
/// key order) for the z-normalised query `q` against a fixed squared BSF, and returns each
/// chunk's survivors sorted by position: what tests compare between producers (the GPU's
/// must equal the CPU's bit for bit).
///
/// # Errors
/// [`SearchError::QueryLength`], or the producer's [`DeviceError`] as [`SearchError::Device`].
pub fn producer_survivors(
    index: &Index,
    q: &[f32],
    bsf_sq: f64,
    chunk_len: u32,
    producer: &dyn LowerBounds,
) -> Result<Vec<Vec<Candidate>>, SearchError> {
    if q.len() != index.len {
        return Err(SearchError::QueryLength {
            query: 0,
            got: q.len(),
            expected: index.len,
        });
    }
    let paa = index.segments.paa(q);
    let mut starts = Vec::new();
    let mut prefix = vec![0u32];
    for &key in &index.tree.keys {
        let nd = &index.tree.nodes[index.tree.roots[usize::from(key)] as usize];
        starts.push(nd.start);
        prefix.push(prefix.last().copied().unwrap_or(0) + nd.len);
    }
    let plan = Arc::new(ChunkPlan {
        table: QueryTable::new(&paa, &index.segments, &index.breakpoints),
        starts,
        prefix,
        chunk_len: chunk_len.max(1),
    });
    let board = Arc::new(ChunkBoard::new(plan.chunks(), bsf_sq));
    producer.produce(&plan, &board)?;
    Ok((0..plan.chunks())
        .map(|c| {
            board
                .chunk(c)
                .map(<[Candidate]>::to_vec)
                .unwrap_or_default()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_walks_positions_across_ranges_and_chunks() {
        let plan = ChunkPlan {
            table: QueryTable::new(
                &[0.0; 16],
                &super::super::paa::Segments::new(16),
                &super::super::isax::Breakpoints::standard(),
            ),
            starts: vec![100, 10, 50],
            prefix: vec![0, 3, 5, 9],
            chunk_len: 4,
        };
        assert_eq!(plan.chunks(), 3);
        let mut all = Vec::new();
        for c in 0..plan.chunks() {
            plan.for_each_position(plan.chunk(c), |p| all.push(p));
        }
        assert_eq!(all, vec![100, 101, 102, 10, 11, 50, 51, 52, 53]);
    }
}
