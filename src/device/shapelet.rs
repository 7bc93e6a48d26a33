//! Shapelet-discovery jobs for a device thread (`kernels/shapelet.cu`); `shapelet::gpu` drives
//! them.
//!
//! The training series are uploaded once ([`GpuWorker::shapelet_load`]). Each tree node is one
//! job ([`GpuWorker::shapelet_node`]): it uploads the node's series list, classes and `n ln n`
//! table, then, per range of lengths that fits the memory budget, computes the window
//! statistics, runs the search on persistent warps (their number bounded by the scratch
//! budget, paper §V-C), reduces `G*` and `gap*` and appends the contenders to a bounded pool,
//! which it downloads at the end. Memory: the series, per warp `8 (N (L + 128) + 32) + 128 (N +
//! 2C)` bytes, per launch 24 B per window statistic and 32 B per candidate record, and the
//! pool.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::DeviceError;
use super::kernels::SHAPELET;
use super::launch::{self, Timer, drv, u32_of};
use super::worker::{Device, GpuWorker, Ticket};

/// Threads per block of the search kernel (4 warps).
const SEARCH_BLOCK: u32 = 128;
/// Threads per block of the other kernels.
const BLOCK: u32 = 256;
/// Lengths per search work item (an item carries its first row and column across them).
const LENGTHS_PER_ITEM: u32 = 8;
/// Contenders the pool holds per node.
pub(crate) const POOL_CAPACITY: u32 = 1 << 20;

/// The training series, row-major `[N, L]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ShapeletSeries {
    /// Samples, shape `[N * L]`.
    pub values: Vec<f64>,
    /// Series length `L`.
    pub len: usize,
}

/// One node's discovery (`shapelet::discovery::Problem` in device terms).
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeJob {
    /// The node's series (indices into the uploaded series), shape `[n]`.
    pub subset: Vec<u32>,
    /// Class id of each node series, shape `[n]`.
    pub classes: Vec<u32>,
    /// Series per class at the node, shape `[C]`.
    pub totals: Vec<u32>,
    /// Candidate lengths, ascending.
    pub lengths: Vec<u32>,
    /// `k ln k` for `k = 0..=n` (`shapelet::split::EntropyTable`).
    pub xlogx: Vec<f64>,
    /// `F(n) − Σ_c F(t_c)` from the same table.
    pub h_total: f64,
    /// Largest `|sample|` of each node series, shape `[n]`.
    pub xmax: Vec<f64>,
    /// For a logical term: 1 = AND, 2 = OR, and the rule's canonical squared distances `[n]`.
    pub base: Option<(i32, Vec<f64>)>,
}

/// A contender from the pool.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct PoolEntry {
    /// Series index (in the uploaded series).
    pub series: u32,
    /// Start.
    pub start: u32,
    /// Length.
    pub length: u32,
    /// `[g_safe, gap_lo, gap_hi, g_up]` (`shapelet::split::FastRecord`).
    pub record: [f64; 4],
}

/// What a node job returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct NodeReport {
    /// The contenders.
    pub entries: Vec<PoolEntry>,
    /// More contenders than [`POOL_CAPACITY`]: the entries are incomplete.
    pub overflow: bool,
    /// Kernel time, milliseconds (CUDA events).
    pub kernel_ms: f64,
    /// Search launches (length ranges).
    pub launches: u32,
    /// Persistent warps of the search.
    pub warps: u32,
}

/// The uploaded training series, and the work buffers of the last node (kept: the root is
/// the largest node, so later nodes reuse them).
struct ShapeletBuffers {
    x: CudaSlice<f64>,
    n_all: usize,
    len: u32,
    work: Option<Work>,
}

/// Element counts of a node's work buffers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sizes {
    /// Window statistics per array (`nlen * n * L`).
    cells: usize,
    /// Candidate records per array.
    records: usize,
    /// Scratch doubles of all warps.
    scratch: usize,
    /// Scratch words of all warps.
    uscratch: usize,
}

impl Sizes {
    fn fits(&self, need: &Self) -> bool {
        self.cells >= need.cells
            && self.records >= need.records
            && self.scratch >= need.scratch
            && self.uscratch >= need.uscratch
    }

    fn max(&self, o: &Self) -> Self {
        Self {
            cells: self.cells.max(o.cells),
            records: self.records.max(o.records),
            scratch: self.scratch.max(o.scratch),
            uscratch: self.uscratch.max(o.uscratch),
        }
    }
}

/// A node's device buffers. Every element is written before it is read (statistics and
/// records by the kernels that produce them, scratch by its warp), so none needs zeroing.
struct Work {
    sizes: Sizes,
    st_mean: CudaSlice<f64>,
    st_w: CudaSlice<f64>,
    st_q: CudaSlice<f64>,
    recs: [CudaSlice<f64>; 4],
    scratch: CudaSlice<f64>,
    uscratch: CudaSlice<u32>,
    next_item: CudaSlice<u32>,
    key: CudaSlice<u64>,
    pool_u: CudaSlice<u32>,
    pool_r: CudaSlice<f64>,
    pool_count: CudaSlice<u32>,
    flags: CudaSlice<u32>,
}

impl Work {
    fn new(st: &Arc<cudarc::driver::CudaStream>, sizes: Sizes) -> Result<Self, DeviceError> {
        let alloc = drv("cuMemAlloc");
        let f = |n: usize| st.alloc_zeros::<f64>(n.max(1)).map_err(&alloc);
        let u = |n: usize| st.alloc_zeros::<u32>(n.max(1)).map_err(&alloc);
        Ok(Self {
            sizes,
            st_mean: f(sizes.cells)?,
            st_w: f(sizes.cells)?,
            st_q: f(sizes.cells)?,
            recs: [
                f(sizes.records)?,
                f(sizes.records)?,
                f(sizes.records)?,
                f(sizes.records)?,
            ],
            scratch: f(sizes.scratch)?,
            uscratch: u(sizes.uscratch)?,
            next_item: u(1)?,
            key: st.alloc_zeros::<u64>(1).map_err(&alloc)?,
            pool_u: u(3 * POOL_CAPACITY as usize)?,
            pool_r: f(4 * POOL_CAPACITY as usize)?,
            pool_count: u(1)?,
            flags: u(2)?,
        })
    }
}

/// The order-preserving key of `shp_order` in `kernels/shapelet.cu`, inverted.
fn unorder(o: u64) -> f64 {
    if o >> 63 == 1 {
        f64::from_bits(o & 0x7fff_ffff_ffff_ffff)
    } else {
        f64::from_bits(!o)
    }
}

fn grid_stride(count: u64, sms: u32) -> LaunchConfig {
    let blocks = count
        .div_ceil(u64::from(BLOCK))
        .clamp(1, u64::from(sms.max(1)) * 16);
    launch::blocks(blocks as u32, BLOCK)
}

/// The device thread's shapelet buffers.
fn buffers(d: &mut Device) -> &mut Option<ShapeletBuffers> {
    d.slot::<Option<ShapeletBuffers>>()
}

impl GpuWorker {
    /// Uploads the training series, replacing any previous ones.
    pub(crate) fn shapelet_load(&self, s: Arc<ShapeletSeries>) -> Ticket<()> {
        self.run(move |d| {
            *buffers(d) = None;
            let st = d.stream.clone();
            let len = u32_of("series length", s.len)?;
            if s.len == 0 || s.values.is_empty() {
                return Err(DeviceError::Unsupported("no series to upload".into()));
            }
            let x = st.clone_htod(&s.values).map_err(drv("cuMemcpyHtoD"))?;
            *buffers(d) = Some(ShapeletBuffers {
                x,
                n_all: s.values.len() / s.len,
                len,
                work: None,
            });
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// Runs one node's discovery (see the module docs) and returns its contenders.
    #[allow(clippy::too_many_lines)] // one node's launches in order: plan, upload, per range, download
    pub(crate) fn shapelet_node(&self, job: Arc<NodeJob>) -> Ticket<NodeReport> {
        self.run(move |d| {
            let f_stats = d.function(&SHAPELET, "shapelet_stats")?;
            let f_search = d.function(&SHAPELET, "shapelet_search")?;
            let f_gain = d.function(&SHAPELET, "shapelet_max_gain")?;
            let f_gap = d.function(&SHAPELET, "shapelet_max_gap")?;
            let f_compact = d.function(&SHAPELET, "shapelet_compact")?;
            let sms = d.info.multiprocessors;
            let total_memory = d.info.total_memory;
            let st = d.stream.clone();
            let b = buffers(d)
                .as_mut()
                .ok_or_else(|| DeviceError::Unsupported("shapelet_node before the load".into()))?;
            let n = job.subset.len();
            let len = b.len as usize;
            if n < 2 || job.lengths.is_empty() {
                return Ok(NodeReport::default());
            }
            if job.subset.iter().any(|&j| j as usize >= b.n_all)
                || job.lengths.iter().any(|&l| l < 2 || l as usize > len)
            {
                return Err(DeviceError::Unsupported(
                    "shapelet_node: series or lengths out of range".into(),
                ));
            }
            let n32 = u32_of("node series", n)?;
            let classes = u32_of("classes", job.totals.len())?;
            // Memory plan: a quarter of the device for this job.
            let budget = total_memory / 4;
            let per_warp_f64 = n * len + 32 * (4 * n + 1);
            let per_warp_u32 = 32 * (n + 2 * job.totals.len());
            let per_warp_bytes = 8 * per_warp_f64 + 4 * per_warp_u32;
            let occupancy = f_search
                .occupancy_max_active_blocks_per_multiprocessor(SEARCH_BLOCK, 0, None)
                .map_err(drv("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?;
            let warps_by_memory = (budget / 4) / per_warp_bytes.max(1);
            let resident = (sms as usize) * (occupancy.max(1) as usize) * 4;
            // Length ranges per launch: statistics + records within half the budget.
            let launch_bytes = budget / 2;
            let mut ranges: Vec<(usize, usize)> = Vec::new();
            let mut start = 0;
            while start < job.lengths.len() {
                let mut end = start;
                let mut bytes = 0usize;
                while end < job.lengths.len() {
                    let m = len + 1 - job.lengths[end] as usize;
                    let more = 24 * n * len + 32 * n * m;
                    if end > start && bytes + more > launch_bytes {
                        break;
                    }
                    bytes += more;
                    end += 1;
                }
                ranges.push((start, end));
                start = end;
            }
            let max_nlen = ranges.iter().map(|r| r.1 - r.0).max().unwrap_or(1);
            let max_records = ranges
                .iter()
                .map(|&(a, e)| {
                    n * job.lengths[a..e]
                        .iter()
                        .map(|&l| len + 1 - l as usize)
                        .sum::<usize>()
                })
                .max()
                .unwrap_or(1);
            let first_blocks = (len + 1 - job.lengths[0] as usize).div_ceil(32);
            let most_items = n * first_blocks * max_nlen.div_ceil(LENGTHS_PER_ITEM as usize);
            let warps = resident.min(warps_by_memory).min(most_items.max(1));
            if warps == 0 {
                return Err(DeviceError::Unsupported(format!(
                    "a node of {n} series of length {len} needs {per_warp_bytes} bytes per warp, \
                     more than the memory budget"
                )));
            }
            let grid = warps.div_ceil(4);
            let warps = grid * 4;
            let up = drv("cuMemcpyHtoD");
            let subset = st.clone_htod(&job.subset).map_err(&up)?;
            let cls = st.clone_htod(&job.classes).map_err(&up)?;
            let totals = st.clone_htod(&job.totals).map_err(&up)?;
            let xlogx = st.clone_htod(&job.xlogx).map_err(&up)?;
            let xmax = st.clone_htod(&job.xmax).map_err(&up)?;
            let (op, base_host) = match &job.base {
                Some((op, v)) => (*op, v.clone()),
                None => (0, vec![0.0; n]),
            };
            let base = st.clone_htod(&base_host).map_err(&up)?;
            let need = Sizes {
                cells: max_nlen * n * len,
                records: max_records,
                scratch: warps * per_warp_f64,
                uscratch: warps * per_warp_u32,
            };
            let have = b.work.as_ref().map(|w| w.sizes);
            if !have.is_some_and(|h| h.fits(&need)) {
                b.work = None;
                b.work = Some(Work::new(&st, have.map_or(need, |h| h.max(&need)))?);
            }
            let ShapeletBuffers {
                x,
                len: len32,
                work,
                ..
            } = b;
            let (x, len32) = (&*x, *len32);
            let Some(Work {
                st_mean,
                st_w,
                st_q,
                recs,
                scratch,
                uscratch,
                next_item,
                key,
                pool_u,
                pool_r,
                pool_count,
                flags,
                ..
            }) = work.as_mut()
            else {
                return Err(DeviceError::Unsupported(
                    "shapelet work buffers missing".into(),
                ));
            };
            st.memset_zeros(pool_count).map_err(drv("cuMemsetD8"))?;
            st.memset_zeros(flags).map_err(drv("cuMemsetD8"))?;
            let cap = POOL_CAPACITY;
            let timer = Timer::start(&st)?;
            let (mut g_run, mut gap_run) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
            let null: u64 = 0;
            for &(a, e) in &ranges {
                let lengths_h: Vec<u32> = job.lengths[a..e].to_vec();
                let nlen = u32_of("lengths", lengths_h.len())?;
                let mut len_off = vec![0u32; lengths_h.len() + 1];
                for (i, &l) in lengths_h.iter().enumerate() {
                    len_off[i + 1] = len_off[i] + (len32 - l + 1);
                }
                let records = n as u64 * u64::from(len_off[lengths_h.len()]);
                let lengths_d = st.clone_htod(&lengths_h).map_err(&up)?;
                let len_off_d = st.clone_htod(&len_off).map_err(&up)?;
                // Window statistics.
                let threads = lengths_h.len() as u64 * n as u64 * len as u64;
                {
                    let mut l = st.launch_builder(&f_stats);
                    l.arg(x)
                        .arg(&subset)
                        .arg(&n32)
                        .arg(&len32)
                        .arg(&lengths_d)
                        .arg(&nlen)
                        .arg(&mut *st_mean)
                        .arg(&mut *st_w)
                        .arg(&mut *st_q);
                    let cfg = launch::blocks(
                        u32_of("blocks", threads.div_ceil(u64::from(BLOCK)) as usize)?,
                        BLOCK,
                    );
                    // SAFETY: matches `shapelet_stats` (x f64* [N*L], subset u32* [n] < N, n, len
                    // u32, lengths u32* [nlen] in 2..=len, nlen u32, mean, w, q f64* [nlen*n*len]);
                    // threads past nlen*n*len or with u + l > len return first.
                    unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
                }
                // The search.
                let blocks = (len32 - lengths_h[0] + 1).div_ceil(32);
                let items = u32_of(
                    "work items",
                    n * blocks as usize * lengths_h.len().div_ceil(LENGTHS_PER_ITEM as usize),
                )?;
                st.memset_zeros(&mut *next_item)
                    .map_err(drv("cuMemsetD8"))?;
                {
                    let [r0, r1, r2, r3] = &mut *recs;
                    let mut l = st.launch_builder(&f_search);
                    l.arg(x)
                        .arg(&subset)
                        .arg(&cls)
                        .arg(&totals)
                        .arg(&n32)
                        .arg(&len32)
                        .arg(&classes)
                        .arg(&lengths_d)
                        .arg(&nlen)
                        .arg(&len_off_d)
                        .arg(&*st_mean)
                        .arg(&*st_w)
                        .arg(&*st_q)
                        .arg(&xmax)
                        .arg(&xlogx)
                        .arg(&job.h_total)
                        .arg(&base)
                        .arg(&op)
                        .arg(&LENGTHS_PER_ITEM)
                        .arg(&blocks)
                        .arg(&items)
                        .arg(&mut *next_item)
                        .arg(&mut *scratch)
                        .arg(&mut *uscratch)
                        .arg(r0)
                        .arg(r1)
                        .arg(r2)
                        .arg(r3)
                        .arg(&null);
                    let cfg = launch::blocks(u32_of("blocks", grid)?, SEARCH_BLOCK);
                    // SAFETY: matches `shapelet_search` (see its signature in kernels/shapelet.cu):
                    // scratch holds `warps` warps of per_warp_f64 doubles and per_warp_u32 words,
                    // every warp of the grid is one of them; records hold n * len_off[nlen]
                    // entries; items = n * blocks * ceil(nlen / 8); debug is null.
                    unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
                }
                // G* of this launch.
                st.memset_zeros(&mut *key).map_err(drv("cuMemsetD8"))?;
                {
                    let mut l = st.launch_builder(&f_gain);
                    l.arg(&recs[0]).arg(&records).arg(&mut *key);
                    // SAFETY: matches `shapelet_max_gain` (g_safe f64* [count], count u64, out
                    // u64* [1]); grid-stride over count.
                    unsafe { l.launch(grid_stride(records, sms)) }
                        .map_err(drv("cuLaunchKernel"))?;
                }
                let g = unorder(st.clone_dtoh(&*key).map_err(drv("cuMemcpyDtoH"))?[0]);
                if g > g_run {
                    g_run = g;
                    gap_run = f64::NEG_INFINITY;
                }
                if g == g_run {
                    st.memset_zeros(&mut *key).map_err(drv("cuMemsetD8"))?;
                    let mut l = st.launch_builder(&f_gap);
                    l.arg(&recs[0])
                        .arg(&recs[1])
                        .arg(&records)
                        .arg(&g_run)
                        .arg(&mut *key);
                    // SAFETY: matches `shapelet_max_gap` (g_safe, gap_lo f64* [count], count u64,
                    // g f64, out u64* [1]); grid-stride over count.
                    unsafe { l.launch(grid_stride(records, sms)) }
                        .map_err(drv("cuLaunchKernel"))?;
                    let k = st.clone_dtoh(&*key).map_err(drv("cuMemcpyDtoH"))?[0];
                    if k != 0 {
                        gap_run = gap_run.max(unorder(k));
                    }
                }
                {
                    let mut l = st.launch_builder(&f_compact);
                    l.arg(&recs[0])
                        .arg(&recs[1])
                        .arg(&recs[2])
                        .arg(&recs[3])
                        .arg(&records)
                        .arg(&g_run)
                        .arg(&gap_run)
                        .arg(&subset)
                        .arg(&lengths_d)
                        .arg(&nlen)
                        .arg(&len_off_d)
                        .arg(&mut *pool_u)
                        .arg(&mut *pool_r)
                        .arg(&mut *pool_count)
                        .arg(&cap)
                        .arg(&mut *flags);
                    // SAFETY: matches `shapelet_compact` (records f64* [count] x4, count u64, g,
                    // gap f64, subset u32* [n], lengths u32* [nlen], nlen, len_off u32* [nlen+1],
                    // pool_u u32* [3 cap], pool_r f64* [4 cap], pool_count u32* [1], cap u32,
                    // flags u32* [2]); slots >= cap are never written.
                    unsafe { l.launch(grid_stride(records, sms)) }
                        .map_err(drv("cuLaunchKernel"))?;
                }
            }
            let timed = timer.stop(&st)?;
            let dl = drv("cuMemcpyDtoH");
            let count = (st.clone_dtoh(&*pool_count).map_err(&dl)?[0]).min(cap) as usize;
            let overflow = st.clone_dtoh(&*flags).map_err(&dl)?[0] != 0;
            let mut entries = Vec::with_capacity(count);
            if count > 0 {
                let u = st.clone_dtoh(&pool_u.slice(..3 * count)).map_err(&dl)?;
                let r = st.clone_dtoh(&pool_r.slice(..4 * count)).map_err(&dl)?;
                for i in 0..count {
                    entries.push(PoolEntry {
                        series: u[3 * i],
                        start: u[3 * i + 1],
                        length: u[3 * i + 2],
                        record: [r[4 * i], r[4 * i + 1], r[4 * i + 2], r[4 * i + 3]],
                    });
                }
            }
            let kernel_ms = f64::from(timed.ms()?);
            Ok(NodeReport {
                entries,
                overflow,
                kernel_ms,
                launches: u32_of("launches", ranges.len())?,
                warps: u32_of("warps", warps)?,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unorder_inverts_the_kernel_key() {
        // shp_order from kernels/shapelet.cu, in Rust.
        let order = |x: f64| {
            let b = x.to_bits() as i64;
            if b < 0 {
                !(b as u64)
            } else {
                (b as u64) | 0x8000_0000_0000_0000
            }
        };
        let xs = [
            f64::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-300,
            0.69,
            f64::INFINITY,
        ];
        for w in xs.windows(2) {
            assert!(order(w[0]) <= order(w[1]), "{w:?}");
        }
        for x in xs {
            assert_eq!(unorder(order(x)).to_bits(), x.to_bits());
        }
    }
}
