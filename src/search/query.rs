//! SING's exact k-NN query (paper Algorithms 6–11), with lower bounds produced chunk by chunk
//! by a CPU thread or the GPU ([`LowerBounds`]).
//!
//! One query:
//! 1. **PAA, iSAX word, bound tables** of the z-normalised query ([`super::isax`]).
//! 2. **Approximate search** (Alg. 6 line 76): follow the query's word from its root child
//!    (or, when that root child does not exist, from the one with the smallest MINDIST) to a
//!    leaf, widen to the smallest ancestor holding at least `k` series (then further root
//!    subtrees by MINDIST), and take real distances there: the first BSF (the k-th best).
//! 3. **Active root subtrees** (Alg. 8 `FindIntervals`): root children whose MINDIST the BSF
//!    does not prune, sorted by MINDIST. Their leaf-order ranges, concatenated in that order,
//!    form the *active array*, cut into chunks ([`ChunkPlan`]; the paper's `N_l`).
//! 4. A **lower-bound producer** ([`LowerBounds`]; the GPU in SING, Alg. 6 lines 85–91,
//!    Alg. 12) computes the bound of every series of each chunk in turn, against the BSF of
//!    the moment, and publishes only the survivors `(position, bound)` per chunk
//!    ([`ChunkBoard`]): stream compaction, so little crosses PCIe.
//! 5. Meanwhile `N_c` **CPU workers** (Alg. 9) traverse the active subtrees (fetch-and-add over
//!    them) and put the leaves whose MINDIST the BSF does not prune into `N_q` priority
//!    queues; after a barrier each worker drains queues best-first (Alg. 10), abandoning a
//!    queue at its first prunable leaf. For a leaf (Alg. 11) it uses the producer's survivors
//!    when every chunk the leaf lies in is published, and otherwise computes the bounds
//!    itself; series the bound does not prune get an early-abandoning real distance, and a
//!    better one lowers the shared BSF (an atomic read on the hot path; the k best under a
//!    lock).
//! 6. When the queues are done the producer is told to stop; the answer is the k best.
//!
//! Exactness: a series is skipped only when a lower bound of its distance exceeds the BSF
//! of that moment ([`super::isax::prunable`]), and the BSF only decreases, so every skipped
//! series is farther than the final k-th neighbour; a producer that fails or lags changes
//! only who computes the bounds. Ties go to the smallest id (the k best are the smallest
//! `(distance², id)` pairs).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;
use serde::Serialize;

use super::SearchError;
pub use super::bounds::{
    Candidate, ChunkBoard, ChunkPlan, CpuLowerBounds, LowerBounds, producer_survivors,
};
use super::collection::{normalize_query, sq_dist};
use super::index::Index;
use super::isax::{QueryTable, RootBounds, node_lb_sq, prunable, root_key};
use super::tree::NONE;
use crate::device::DeviceError;

/// Smallest chunk of the active array (series), so small queries are not cut finer than
/// a kernel launch is worth.
pub(crate) const MIN_CHUNK: u32 = 4096;

/// Query options (the paper's `N_c`, `N_q`, `N_l`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueryOptions {
    /// CPU search workers `N_c`, run as tasks on rayon's pool (default: the pool's thread
    /// count, i.e. all cores or `--threads`).
    pub workers: usize,
    /// Priority queues `N_q` (paper: 20).
    pub queues: usize,
    /// Chunks `N_l` of the active array (paper: 32); chunks hold at least `MIN_CHUNK`.
    pub chunks: usize,
    /// Series the approximate search measures at least (default 1024): the query's leaf,
    /// widened to ancestors and then to the root subtrees of smallest MINDIST. The paper
    /// measures one leaf; with 2^16 root children a leaf is small once series are spread
    /// over many root keys, and a tighter first BSF prunes more root subtrees. Exact either
    /// way.
    pub approximate: usize,
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self {
            workers: rayon::current_num_threads().max(1),
            queues: 20,
            chunks: 32,
            approximate: 1024,
        }
    }
}

/// One neighbour: the series id and its Euclidean distance to the query (z-normalised).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Neighbor {
    /// Series id (series number, or subsequence start sample).
    pub id: u32,
    /// Euclidean distance.
    pub distance: f64,
    /// Its square, as computed and compared ([`super::collection::sq_dist`]); not printed.
    #[serde(skip)]
    pub squared: f64,
}

/// What one query cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct QueryStats {
    /// Series lower bounds computed, by the workers and the producer together.
    pub lower_bounds: u64,
    /// Of those, computed by the producer (GPU or CPU thread).
    pub producer_lower_bounds: u64,
    /// Real distances computed (including early-abandoned ones).
    pub real_distances: u64,
    /// Leaves taken from the priority queues and examined.
    pub leaves: u64,
    /// Active root subtrees.
    pub active_subtrees: u64,
    /// Series in the active subtrees.
    pub active_series: u64,
    /// Chunks the producer published.
    pub chunks_published: u64,
    /// Wall time, seconds.
    pub seconds: f64,
}

/// The answer to one query.
#[derive(Clone, Debug)]
pub struct QueryAnswer {
    /// The k nearest series, nearest first (ties: smallest id first).
    pub neighbors: Vec<Neighbor>,
    /// Costs.
    pub stats: QueryStats,
    /// The producer's failure, if any (the answer is exact regardless: the workers computed
    /// the bounds it did not deliver).
    pub producer_error: Option<DeviceError>,
}

/// The k best `(distance², id)` so far (a max-heap of at most k).
#[derive(Debug)]
struct TopK {
    k: usize,
    heap: BinaryHeap<(u64, u32)>,
}

impl TopK {
    fn new(k: usize) -> Self {
        Self {
            k,
            heap: BinaryHeap::with_capacity(k + 1),
        }
    }

    fn bsf_sq(&self) -> f64 {
        if self.heap.len() < self.k {
            f64::INFINITY
        } else {
            self.heap
                .peek()
                .map_or(f64::INFINITY, |&(b, _)| f64::from_bits(b))
        }
    }

    /// Inserts `(d_sq, id)` if it is among the k best; returns true when the k-th changed.
    fn offer(&mut self, d_sq: f64, id: u32) -> bool {
        let key = (d_sq.to_bits(), id);
        if self.heap.len() >= self.k && self.heap.peek().is_some_and(|&top| key >= top) {
            return false;
        }
        if self.heap.iter().any(|&(_, i)| i == id) {
            return false;
        }
        self.heap.push(key);
        if self.heap.len() > self.k {
            self.heap.pop();
        }
        self.heap.len() >= self.k
    }

    fn into_sorted(self) -> Vec<Neighbor> {
        let mut v = self.heap.into_vec();
        v.sort_unstable();
        v.into_iter()
            .map(|(b, id)| Neighbor {
                id,
                distance: f64::from_bits(b).sqrt(),
                squared: f64::from_bits(b),
            })
            .collect()
    }
}

/// A queued leaf: `(MINDIST² bits, node, active-array offset)`, smallest bound first.
type QueuedLeaf = Reverse<(u64, u32, u32)>;
type LeafQueue = Mutex<BinaryHeap<QueuedLeaf>>;

/// Leaves per queue a worker collects (on average) before taking the queues' locks.
const PUSH_BATCH: usize = 16;

/// The state of one query shared by its workers.
struct Run<'a> {
    index: &'a Index,
    q: &'a [f32],
    paa: [f64; 16],
    plan: &'a ChunkPlan,
    board: &'a ChunkBoard,
    top: Mutex<TopK>,
    /// Active root subtrees `(MINDIST², node)`, by MINDIST.
    active: &'a [(f64, u32)],
    next_root: AtomicUsize,
    queues: Vec<LeafQueue>,
    finished: Vec<AtomicBool>,
    /// Active root subtrees traversed (phase 1 ends when all are).
    traversed: AtomicUsize,
    /// Leaf-order ranges the approximate search already measured.
    approx: &'a [(u32, u32)],
    lower_bounds: AtomicU64,
    real_distances: AtomicU64,
    leaves: AtomicU64,
}

impl Run<'_> {
    fn offer(&self, d_sq: f64, id: u32) {
        if d_sq > self.board.bsf_sq() {
            return;
        }
        let mut top = self.top.lock();
        if top.offer(d_sq, id) {
            self.board.lower_bsf(top.bsf_sq());
        }
    }

    fn in_approx(&self, pos: u32) -> bool {
        self.approx.iter().any(|&(s, l)| pos >= s && pos - s < l)
    }

    fn real(&self, pos: u32, dists: &mut u64) {
        if self.in_approx(pos) {
            return;
        }
        *dists += 1;
        let id = self.index.ids()[pos as usize];
        if let Some(d) = sq_dist(self.q, self.index.row(pos as usize), self.board.bsf_sq()) {
            self.offer(d, id);
        }
    }

    /// Alg. 3 (`TraverseSubtree`): leaves the BSF does not prune go to the queues round
    /// robin, collected in per-worker batches (one lock per batch; see [`Run::flush`]).
    fn traverse(
        &self,
        node: u32,
        root_start: u32,
        root_base: u32,
        q: &mut usize,
        batches: &mut [Vec<QueuedLeaf>],
    ) {
        let nd = &self.index.tree.nodes[node as usize];
        let lb = node_lb_sq(
            &self.paa,
            &self.index.segments,
            &self.index.breakpoints,
            &nd.prefix,
            &nd.bits,
        );
        if prunable(lb, self.board.bsf_sq()) {
            return;
        }
        if nd.is_leaf() {
            let base = root_base + (nd.start - root_start);
            batches[*q].push(Reverse((lb.to_bits(), node, base)));
            *q = (*q + 1) % self.queues.len();
        } else {
            self.traverse(nd.left, root_start, root_base, q, batches);
            self.traverse(nd.right, root_start, root_base, q, batches);
        }
    }

    /// Moves the batched leaves into the queues, then counts the `done` subtrees they came
    /// from as traversed: a subtree counts only once its leaves are in the queues, so the
    /// end of phase 1 (every subtree counted) means complete queues.
    fn flush(&self, batches: &mut [Vec<QueuedLeaf>], done: &mut usize) {
        for (q, b) in batches.iter_mut().enumerate() {
            if !b.is_empty() {
                self.queues[q].lock().extend(b.drain(..));
            }
        }
        self.traversed.fetch_add(*done, Ordering::AcqRel);
        *done = 0;
    }

    /// Alg. 11: the series of one leaf whose active-array range starts at `base`.
    fn leaf(&self, node: u32, base: u32, lbs: &mut u64, dists: &mut u64) {
        let nd = &self.index.tree.nodes[node as usize];
        let (s, e) = (nd.start, nd.start + nd.len);
        let chunk_len = self.plan.chunk_len.max(1);
        let (c0, c1) = (
            (base / chunk_len) as usize,
            ((base + nd.len - 1) / chunk_len) as usize,
        );
        if (c0..=c1).all(|c| self.board.chunk(c).is_some()) {
            for list in (c0..=c1).filter_map(|c| self.board.chunk(c)) {
                let lo = list.partition_point(|c| c.pos < s);
                for c in list[lo..].iter().take_while(|c| c.pos < e) {
                    if !prunable(c.lb_sq, self.board.bsf_sq()) {
                        self.real(c.pos, dists);
                    }
                }
            }
        } else {
            let sax = self.index.sax();
            for pos in s..e {
                *lbs += 1;
                let lb = self.plan.table.lb_sq(&sax[pos as usize]);
                if !prunable(lb, self.board.bsf_sq()) {
                    self.real(pos, dists);
                }
            }
        }
    }

    /// Alg. 9: one search worker (phase 1: traverse active subtrees into the queues; phase
    /// 2: drain the queues best-first).
    fn worker(&self, pid: usize) {
        let nq = self.queues.len();
        let mut q = pid % nq;
        let mut batches = vec![Vec::new(); nq];
        let mut done = 0;
        loop {
            let i = self.next_root.fetch_add(1, Ordering::Relaxed);
            let Some(&(lb, node)) = self.active.get(i) else {
                break;
            };
            if !prunable(lb, self.board.bsf_sq()) {
                let start = self.index.tree.nodes[node as usize].start;
                self.traverse(node, start, self.plan.prefix[i], &mut q, &mut batches);
            }
            done += 1;
            if batches.iter().map(Vec::len).sum::<usize>() >= PUSH_BATCH * nq {
                self.flush(&mut batches, &mut done);
            }
        }
        self.flush(&mut batches, &mut done);
        // The barrier of Alg. 9 line 115: every queue is complete once every active subtree
        // has been traversed. Counted rather than a barrier over the workers: a subtree is
        // claimed only by a running worker, which finishes it without blocking, so this
        // wait ends whether or not the other workers ever start.
        while self.traversed.load(Ordering::Acquire) < self.active.len() {
            std::thread::yield_now();
        }
        let (mut lbs, mut dists, mut leaves) = (0u64, 0u64, 0u64);
        for off in 0..nq {
            let qi = (pid + off) % nq;
            loop {
                if self.finished[qi].load(Ordering::Acquire) {
                    break;
                }
                let item = self.queues[qi].lock().pop();
                let Some(Reverse((lb, node, base))) = item else {
                    break;
                };
                if prunable(f64::from_bits(lb), self.board.bsf_sq()) {
                    self.finished[qi].store(true, Ordering::Release);
                    break;
                }
                leaves += 1;
                self.leaf(node, base, &mut lbs, &mut dists);
            }
        }
        self.lower_bounds.fetch_add(lbs, Ordering::Relaxed);
        self.real_distances.fetch_add(dists, Ordering::Relaxed);
        self.leaves.fetch_add(leaves, Ordering::Relaxed);
    }
}

impl Index {
    /// Exact k nearest neighbours of a raw query (z-normalised here), SING's algorithm on the
    /// CPU workers with `producer` (if any) computing lower bounds alongside.
    ///
    /// # Errors
    /// [`SearchError::ZeroK`], [`SearchError::QueryLength`], or [`SearchError::Input`] for a
    /// NaN or infinite sample.
    pub fn knn(
        &self,
        query: &[f64],
        k: usize,
        options: &QueryOptions,
        producer: Option<&dyn LowerBounds>,
    ) -> Result<QueryAnswer, SearchError> {
        let q = normalize_query(0, query, self.len)?;
        self.knn_normalized(&q, k, options, producer)
    }

    /// [`Index::knn`] for a query already z-normalised ([`super::collection::znormalize`]).
    /// Returns `min(k, count)` neighbours.
    ///
    /// # Errors
    /// [`SearchError::ZeroK`], [`SearchError::QueryLength`].
    pub fn knn_normalized(
        &self,
        q: &[f32],
        k: usize,
        options: &QueryOptions,
        producer: Option<&dyn LowerBounds>,
    ) -> Result<QueryAnswer, SearchError> {
        let started = Instant::now();
        SearchError::check_request(k, q.len(), self.len)?;
        let k = k.min(self.count);
        let paa = self.segments.paa(q);
        let word = self.breakpoints.word(&paa);
        let table = QueryTable::new(&paa, &self.segments, &self.breakpoints);
        let root_lbs = self.root_lbs(&paa);

        // Approximate search: the first BSF.
        let (top, approx) = self.approximate(q, &word, &root_lbs, k, k.max(options.approximate));
        let approx_distances: u64 = approx.iter().map(|&(_, l)| u64::from(l)).sum();
        let bsf = top.bsf_sq();

        // Active root subtrees (Alg. 8) and the active array; a producer gets them by
        // ascending MINDIST, so its first chunks are the most promising.
        let mut active: Vec<(f64, u32)> = root_lbs
            .into_iter()
            .filter(|&(lb, _)| !prunable(lb, bsf))
            .collect();
        if producer.is_some() {
            // The most promising eighth first, sorted (the first chunks); the rest as is.
            let head = active.len().div_ceil(8);
            let key = |&(lb, node): &(f64, u32)| (lb.to_bits(), node);
            if head < active.len() {
                active.select_nth_unstable_by_key(head, key);
            }
            active[..head].sort_unstable_by_key(key);
        }
        let mut starts = Vec::with_capacity(active.len());
        let mut prefix = Vec::with_capacity(active.len() + 1);
        prefix.push(0u32);
        for &(_, node) in &active {
            let nd = &self.tree.nodes[node as usize];
            starts.push(nd.start);
            prefix.push(prefix.last().copied().unwrap_or(0) + nd.len);
        }
        let total = prefix.last().copied().unwrap_or(0);
        let chunk_len = total.div_ceil(options.chunks.max(1) as u32).max(MIN_CHUNK);
        let plan = Arc::new(ChunkPlan {
            table,
            starts,
            prefix,
            chunk_len,
        });
        let board = Arc::new(ChunkBoard::new(plan.chunks(), bsf));
        let workers = options.workers.max(1);
        let run = Run {
            index: self,
            q,
            paa,
            plan: &plan,
            board: &board,
            top: Mutex::new(top),
            active: &active,
            next_root: AtomicUsize::new(0),
            queues: (0..options.queues.max(1))
                .map(|_| Mutex::new(BinaryHeap::new()))
                .collect(),
            finished: (0..options.queues.max(1))
                .map(|_| AtomicBool::new(false))
                .collect(),
            traversed: AtomicUsize::new(0),
            approx: &approx,
            lower_bounds: AtomicU64::new(0),
            real_distances: AtomicU64::new(0),
            leaves: AtomicU64::new(0),
        };
        let produced = std::thread::scope(|s| {
            let producer = producer.filter(|_| total > 0).map(|p| {
                let (plan, board) = (&plan, &board);
                std::thread::Builder::new()
                    .name("synfire:search-lb".into())
                    .spawn_scoped(s, move || p.produce(plan, board))
            });
            // The workers are rayon tasks: no thread is started per query, and a task no
            // idle pool thread picks up is run by the thread waiting for the scope (it then
            // finds the work done), so a busy machine never stalls a query on a wake-up.
            rayon::scope(|rs| {
                for pid in 1..workers {
                    let run = &run;
                    rs.spawn(move |_| run.worker(pid));
                }
                run.worker(0);
            });
            board.stop();
            match producer {
                None => Ok(0),
                Some(Ok(h)) => h.join().unwrap_or_else(|_| {
                    Err(DeviceError::Unsupported(
                        "the lower-bound producer panicked".into(),
                    ))
                }),
                Some(Err(e)) => Err(DeviceError::Unsupported(format!(
                    "could not start the lower-bound producer thread: {e}"
                ))),
            }
        });
        let (producer_lbs, producer_error) = match produced {
            Ok(n) => (n, None),
            Err(e) => (0, Some(e)),
        };
        let stats = QueryStats {
            lower_bounds: run.lower_bounds.load(Ordering::Relaxed) + producer_lbs,
            producer_lower_bounds: producer_lbs,
            real_distances: run.real_distances.load(Ordering::Relaxed) + approx_distances,
            leaves: run.leaves.load(Ordering::Relaxed),
            active_subtrees: active.len() as u64,
            active_series: u64::from(total),
            chunks_published: board.published() as u64,
            seconds: 0.0,
        };
        let neighbors = run.top.into_inner().into_sorted();
        Ok(QueryAnswer {
            neighbors,
            stats: QueryStats {
                seconds: started.elapsed().as_secs_f64(),
                ..stats
            },
            producer_error,
        })
    }

    /// MINDIST² of the query (its PAA) to every existing root child, with the child's node.
    fn root_lbs(&self, paa: &[f64; super::paa::SEGMENTS]) -> Vec<(f64, u32)> {
        let roots = RootBounds::new(paa, &self.segments, &self.breakpoints);
        self.tree
            .keys
            .iter()
            .map(|&key| (roots.lb_sq(key), self.tree.roots[usize::from(key)]))
            .collect()
    }

    /// The approximate search alone, for a z-normalised query of the index's length and
    /// `1 <= k <= count`: the squared k-th best distance among at least `k.max(want)` series
    /// (the first BSF of [`Index::knn_normalized`], an upper bound of the exact k-th
    /// neighbour's) and the real distances it computed.
    pub(crate) fn first_bsf(&self, q: &[f32], k: usize, want: usize) -> (f64, u64) {
        let paa = self.segments.paa(q);
        let word = self.breakpoints.word(&paa);
        let root_lbs = self.root_lbs(&paa);
        let (top, approx) = self.approximate(q, &word, &root_lbs, k, k.max(want));
        (
            top.bsf_sq(),
            approx.iter().map(|&(_, l)| u64::from(l)).sum(),
        )
    }

    /// The approximate search: the k best among at least `want` series, and the leaf-order
    /// ranges it measured. From the query's own root subtree, then from root subtrees by
    /// ascending MINDIST, it takes the smallest node on the query's path (the query's leaf,
    /// widened to ancestors) that supplies the series still needed, so no query measures a
    /// large root subtree whole.
    fn approximate(
        &self,
        q: &[f32],
        word: &super::isax::Word,
        root_lbs: &[(f64, u32)],
        k: usize,
        want: usize,
    ) -> (TopK, Vec<(u32, u32)>) {
        let nodes = &self.tree.nodes;
        // The node of `root`'s subtree on the query's path holding at least `need` series
        // (or the whole subtree).
        let node_for = |root: u32, need: usize| {
            let mut path = vec![root];
            let mut n = root;
            while !nodes[n as usize].is_leaf() {
                n = nodes[n as usize].child_for(word);
                path.push(n);
            }
            while (nodes[n as usize].len as usize) < need && path.len() > 1 {
                path.pop();
                n = path.last().copied().unwrap_or(root);
            }
            &nodes[n as usize]
        };
        // Root subtrees by ascending MINDIST: the smallest 64 sorted first, the rest if needed.
        let mut by_lb: Vec<(u64, u32)> =
            root_lbs.iter().map(|&(lb, n)| (lb.to_bits(), n)).collect();
        let head = by_lb.len().min(64);
        if head < by_lb.len() {
            by_lb.select_nth_unstable(head);
        }
        by_lb[..head].sort_unstable();
        let own = self.tree.roots[usize::from(root_key(word))];
        let mut ranges = Vec::new();
        let mut have = 0usize;
        if own != NONE {
            let nd = node_for(own, want);
            ranges.push((nd.start, nd.len));
            have += nd.len as usize;
        }
        let mut i = 0;
        while have < want && i < by_lb.len() {
            if i == head {
                by_lb[head..].sort_unstable();
            }
            let r = by_lb[i].1;
            i += 1;
            if r != own {
                let nd = node_for(r, want - have);
                ranges.push((nd.start, nd.len));
                have += nd.len as usize;
            }
        }
        let mut top = TopK::new(k);
        for &(s, l) in &ranges {
            for pos in s..s + l {
                if let Some(d) = sq_dist(q, self.row(pos as usize), top.bsf_sq()) {
                    top.offer(d, self.ids()[pos as usize]);
                }
            }
        }
        (top, ranges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topk_keeps_the_smallest_pairs_and_breaks_ties_by_id() {
        let mut t = TopK::new(2);
        assert!(!t.offer(4.0, 9));
        assert!(t.offer(1.0, 5));
        assert_eq!(t.bsf_sq(), 4.0);
        assert!(t.offer(1.0, 3)); // tie with id 5 at 1.0: both kept, 4.0 leaves
        assert!(!t.offer(1.0, 7)); // a tie with a larger id does not enter
        assert!(!t.offer(0.5, 3)); // already present
        let v = t.into_sorted();
        assert_eq!(v.iter().map(|n| n.id).collect::<Vec<_>>(), vec![3, 5]);
    }
}
