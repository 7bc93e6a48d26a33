//! Episode-counting jobs for a device thread (`kernels/episodes.cu`); `episode::gpu` drives
//! them.
//!
//! An [`EpisodeWorker`] is a [`GpuWorker`] with the episode kernels loaded (PreElim, PTPE and
//! the MTPE counting and merging kernels for every episode length 1..=16, compiled and loaded
//! when the worker starts, with PTPE's resident-thread count per length). Jobs: upload the
//! event stream (once per mining run or window), count a batch of candidates with the PreElim,
//! PTPE or MTPE kernel. Replies carry only counts back.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};

use super::kernels::{EPISODES, MAX_GPU_NODES, MTPE_RECORDED};
use super::launch::{self, Timer};
use super::worker::{Device, GpuWorker, Ticket};
use super::{DeviceError, DeviceInfo};

/// The event stream as the kernels read it: grouped by type (CSR) plus the interval table.
///
/// Shapes: `offsets [types + 1]`, `times [events]` (seconds), `lo [intervals]`,
/// `hi [intervals]` (seconds). The kernels merge a candidate's types by time; counts do not
/// depend on the order of equal-time events, so stream positions are not needed.
#[derive(Clone, Debug, Default)]
pub struct StreamData {
    /// CSR offsets into `times`/`positions` per event type.
    pub offsets: Vec<u32>,
    /// Event times grouped by type, seconds.
    pub times: Vec<f64>,
    /// Interval lower bounds, seconds.
    pub lo: Vec<f64>,
    /// Interval upper bounds, seconds.
    pub hi: Vec<f64>,
}

/// Candidates of one length `nodes`, flattened: `types [m * nodes]`, interval ids
/// `ivs [m * (nodes - 1)]` into [`StreamData::lo`]/[`StreamData::hi`].
#[derive(Clone, Debug, Default)]
pub struct CandidateBatch {
    /// Episode length N (1..=16).
    pub nodes: usize,
    /// Node types, row-major.
    pub types: Vec<u32>,
    /// Interval ids, row-major.
    pub ivs: Vec<u32>,
}

impl CandidateBatch {
    /// Number of candidates.
    #[must_use]
    pub fn len(&self) -> usize {
        self.types.len().checked_div(self.nodes).unwrap_or(0)
    }

    /// True when there is no candidate.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Which kernel counts a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum EpisodeKernel {
    /// PreElim (paper Algorithm 3): upper bound, O(1) state per node.
    PreElim,
    /// PTPE (one thread per episode, paper Algorithm 1): exact, or
    /// `COUNT_OVERFLOW` (`kernels.rs`) when a per-state list outgrows its capacity.
    Ptpe,
    /// MTPE (paper §5.1): one thread per (episode, segment) counts, then one thread per
    /// episode merges the `(a, count, b)` tuples exactly (`episode::mtpe`). Exact, or
    /// `COUNT_OVERFLOW` (`kernels.rs`) as PTPE.
    Mtpe {
        /// Segment boundaries `τ_0 = -inf < … < τ_R = +inf`, seconds, shape `[R + 1]`
        /// (`episode::mtpe::Segments::bounds`).
        segments: Arc<[f64]>,
    },
    /// PreElim with the MTPE mapping: the PreElim machine per (episode, segment), then the
    /// same exact merge (PreElim counts are exact counts of the relaxed episode, so the merge
    /// applies unchanged). For levels too small to fill the GPU with one thread per episode.
    PreElimMtpe {
        /// As for [`EpisodeKernel::Mtpe`].
        segments: Arc<[f64]>,
    },
}

impl EpisodeKernel {
    /// The MTPE segment boundaries, for the segmented kernels.
    #[must_use]
    pub fn segments(&self) -> Option<&Arc<[f64]>> {
        match self {
            Self::Mtpe { segments } | Self::PreElimMtpe { segments } => Some(segments),
            Self::PreElim | Self::Ptpe => None,
        }
    }
}

/// Counts of one batch from one GPU.
#[derive(Clone, Debug)]
pub struct BatchCounts {
    /// One count per candidate of the range; `COUNT_OVERFLOW` (`kernels.rs`) marks a PTPE
    /// overflow.
    pub counts: Vec<u32>,
    /// Kernel time measured with CUDA events, milliseconds.
    pub kernel_ms: f32,
}

/// What the upload of a stream cost.
#[derive(Clone, Copy, Debug)]
pub struct StreamReport {
    /// Bytes uploaded.
    pub bytes: usize,
    /// Device memory in use after the upload (total − free), bytes.
    pub device_used: usize,
}

/// Threads per block of every episode kernel (the paper's `T_B`).
pub const THREADS_PER_BLOCK: u32 = 128;

/// A device thread with the episode kernels loaded: what `episode::GpuCounter` counts on.
pub struct EpisodeWorker {
    worker: GpuWorker,
    ptpe_resident: Vec<u64>,
}

impl std::fmt::Debug for EpisodeWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.worker, f)
    }
}

impl EpisodeWorker {
    /// Starts the device thread ([`GpuWorker::start`]: `synfire:gpu-<ordinal>`, suffixed
    /// `-<slot>` when one GPU gets several workers, pinned to core `pin_core` when given) and
    /// compiles and loads the episode kernels there. Returns once the kernels are loaded.
    ///
    /// # Errors
    /// Any [`DeviceError`] of context creation, NVRTC or module loading.
    pub fn start(
        ordinal: usize,
        slot: usize,
        pin_core: Option<usize>,
    ) -> Result<Self, DeviceError> {
        let worker = GpuWorker::start(ordinal, slot, pin_core)?;
        let ptpe_resident = worker.run(load_kernels).wait()?;
        Ok(Self {
            worker,
            ptpe_resident,
        })
    }

    /// The device this worker owns.
    #[must_use]
    pub fn info(&self) -> &DeviceInfo {
        self.worker.info()
    }

    /// The thread's name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.worker.name()
    }

    /// How many PTPE threads for episodes of `nodes` nodes the GPU runs at once:
    /// `MP × B_MP × T_B` of the paper's Eq. 2 (multiprocessors × resident blocks per
    /// multiprocessor from the occupancy calculator × [`THREADS_PER_BLOCK`]).
    /// 0 for `nodes` outside 1..=16.
    #[must_use]
    pub fn ptpe_resident_threads(&self, nodes: usize) -> u64 {
        nodes
            .checked_sub(1)
            .and_then(|i| self.ptpe_resident.get(i))
            .copied()
            .unwrap_or(0)
    }

    /// Uploads the event stream, replacing any previous one.
    pub fn load_stream(&self, data: Arc<StreamData>) -> Ticket<StreamReport> {
        self.worker.run(move |d| load(d, &data))
    }

    /// Counts candidates `range` of `batch` with `kernel` against the uploaded stream.
    pub fn count(
        &self,
        kernel: EpisodeKernel,
        batch: Arc<CandidateBatch>,
        range: Range<usize>,
    ) -> Ticket<BatchCounts> {
        self.worker.run(move |d| count(d, kernel, &batch, range))
    }
}

/// Copies `v` to the device without a host copy; an empty slice becomes one zero element
/// (zero-length device allocations are not allowed, and the kernels never read it).
fn upload<T: cudarc::driver::DeviceRepr + Default>(
    s: &Arc<CudaStream>,
    v: &[T],
) -> Result<CudaSlice<T>, cudarc::driver::DriverError> {
    if v.is_empty() {
        s.clone_htod(&[T::default()][..])
    } else {
        s.clone_htod(v)
    }
}

/// Device buffers of an uploaded stream.
struct DeviceStream {
    offsets: CudaSlice<u32>,
    times: CudaSlice<f64>,
    lo: CudaSlice<f64>,
    hi: CudaSlice<f64>,
}

/// The loaded episode kernels, per N = 1..=16.
struct Kernels {
    preelim: Vec<CudaFunction>,
    ptpe: Vec<CudaFunction>,
    /// Per machine (0: exact, 1: PreElim), per N: the MTPE counting and merging kernels.
    mtpe_count: [Vec<CudaFunction>; 2],
    mtpe_merge: [Vec<CudaFunction>; 2],
}

/// The episode slot of a device thread: the kernels and the uploaded stream.
#[derive(Default)]
struct Episodes {
    kernels: Option<Kernels>,
    data: Option<DeviceStream>,
}

/// Loads every episode kernel into the device's slot and returns PTPE's resident threads per
/// N (occupancy calculator).
fn load_kernels(d: &mut Device) -> Result<Vec<u64>, DeviceError> {
    let mut load = |name: String| d.function(&EPISODES, &name);
    let preelim = (1..=MAX_GPU_NODES)
        .map(|n| load(format!("episodes_preelim_n{n}")))
        .collect::<Result<_, _>>()?;
    let ptpe: Vec<CudaFunction> = (1..=MAX_GPU_NODES)
        .map(|n| load(format!("episodes_ptpe_n{n}")))
        .collect::<Result<_, _>>()?;
    let mut family = |prefix: &str, step: &str| {
        (1..=MAX_GPU_NODES)
            .map(|n| load(format!("episodes_{prefix}_{step}_n{n}")))
            .collect::<Result<Vec<_>, _>>()
    };
    let mtpe_count = [family("mtpe", "count")?, family("preelim_mtpe", "count")?];
    let mtpe_merge = [family("mtpe", "merge")?, family("preelim_mtpe", "merge")?];
    let multiprocessors = d.info.multiprocessors;
    let ptpe_resident = ptpe
        .iter()
        .map(|f: &CudaFunction| {
            f.occupancy_max_active_blocks_per_multiprocessor(THREADS_PER_BLOCK, 0, None)
                .map(|b| u64::from(multiprocessors) * u64::from(b) * u64::from(THREADS_PER_BLOCK))
                .map_err(|e| DeviceError::driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))
        })
        .collect::<Result<_, _>>()?;
    d.slot::<Episodes>().kernels = Some(Kernels {
        preelim,
        ptpe,
        mtpe_count,
        mtpe_merge,
    });
    Ok(ptpe_resident)
}

fn load(dev: &mut Device, d: &StreamData) -> Result<StreamReport, DeviceError> {
    let s = &dev.stream.clone();
    let up = |e| DeviceError::driver("cuMemcpyHtoD", e);
    let slot = dev.slot::<Episodes>();
    slot.data = None;
    slot.data = Some(DeviceStream {
        offsets: upload(s, &d.offsets).map_err(up)?,
        times: upload(s, &d.times).map_err(up)?,
        lo: upload(s, &d.lo).map_err(up)?,
        hi: upload(s, &d.hi).map_err(up)?,
    });
    s.synchronize()
        .map_err(|e| DeviceError::driver("cuStreamSynchronize", e))?;
    let (free, total) = dev
        .ctx
        .mem_get_info()
        .map_err(|e| DeviceError::driver("cuMemGetInfo", e))?;
    let bytes = d.offsets.len() * 4 + d.times.len() * 8 + (d.lo.len() + d.hi.len()) * 8;
    Ok(StreamReport {
        bytes,
        device_used: total - free,
    })
}

fn count(
    dev: &mut Device,
    kernel: EpisodeKernel,
    batch: &CandidateBatch,
    range: Range<usize>,
) -> Result<BatchCounts, DeviceError> {
    let n = batch.nodes;
    if n == 0 || n > MAX_GPU_NODES {
        return Err(DeviceError::Unsupported(format!(
            "episodes of {n} nodes (the kernels take 1..={MAX_GPU_NODES})"
        )));
    }
    let m = range.len();
    if m == 0 {
        return Ok(BatchCounts {
            counts: Vec::new(),
            kernel_ms: 0.0,
        });
    }
    let m32 = u32::try_from(m)
        .map_err(|_| DeviceError::Unsupported(format!("{m} candidates in one batch")))?;
    let s = &dev.stream.clone();
    let Episodes { kernels, data } = dev.slot::<Episodes>();
    let kernels = kernels.as_ref().ok_or_else(|| {
        DeviceError::Unsupported("count before the episode kernels were loaded".into())
    })?;
    let data = data
        .as_ref()
        .ok_or_else(|| DeviceError::Unsupported("count before the stream was loaded".into()))?;
    let drv = |call: &'static str| move |e| DeviceError::driver(call, e);
    let types = s
        .clone_htod(&batch.types[range.start * n..range.end * n])
        .map_err(drv("cuMemcpyHtoD"))?;
    let ivs = upload(s, &batch.ivs[range.start * (n - 1)..range.end * (n - 1)])
        .map_err(drv("cuMemcpyHtoD"))?;
    let mut out = s.alloc_zeros::<u32>(m).map_err(drv("cuMemAlloc"))?;
    let block = THREADS_PER_BLOCK;
    let cfg = launch::cover(m32, block);
    // MTPE buffers, allocated before the timed region.
    let mut mtpe = if let Some(segments) = kernel.segments() {
        let r = segments.len().saturating_sub(1);
        let threads = u32::try_from(m * r).ok().filter(|_| r > 0).ok_or_else(|| {
            DeviceError::Unsupported(format!(
                "MTPE with {r} segments for {m} candidates (needs 1..2^32 threads)"
            ))
        })?;
        Some((
            r as u32,
            threads,
            s.clone_htod(&segments[..]).map_err(drv("cuMemcpyHtoD"))?,
            s.alloc_zeros::<u32>(m * r).map_err(drv("cuMemAlloc"))?,
            s.alloc_zeros::<f64>(m * r * MTPE_RECORDED)
                .map_err(drv("cuMemAlloc"))?,
            s.alloc_zeros::<f64>(m * r).map_err(drv("cuMemAlloc"))?,
        ))
    } else {
        None
    };
    let timer = Timer::start(s)?;
    // The arguments every kernel but per-thread PreElim starts with: times, offsets, lo,
    // hi, types [m*n], ivs [m*(n-1)], n_cands.
    let exact_family = |f| {
        let mut b = s.launch_builder(f);
        b.arg(&data.times)
            .arg(&data.offsets)
            .arg(&data.lo)
            .arg(&data.hi)
            .arg(&types)
            .arg(&ivs)
            .arg(&m32);
        b
    };
    match kernel {
        EpisodeKernel::PreElim => {
            let f = &kernels.preelim[n - 1];
            let mut b = s.launch_builder(f);
            b.arg(&data.times).arg(&data.offsets).arg(&data.hi);
            b.arg(&types).arg(&ivs).arg(&m32).arg(&mut out);
            // SAFETY: the argument list matches `episodes_preelim_n{n}` in kernels/episodes.cu
            // (times f64*, offsets u32*, hi f64*, types u32* [m*n],
            // ivs u32* [m*(n-1)], n_cands u32, out u32* [m]); every buffer is as long as the
            // kernel reads, and threads with c >= m return before touching memory.
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
        }
        EpisodeKernel::Ptpe => {
            let mut b = exact_family(&kernels.ptpe[n - 1]);
            b.arg(&mut out);
            // SAFETY: as above, for `episodes_ptpe_n{n}` (times, offsets, lo f64*, hi, types,
            // ivs, n_cands, out).
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
        }
        EpisodeKernel::Mtpe { .. } | EpisodeKernel::PreElimMtpe { .. } => {
            let machine = usize::from(matches!(kernel, EpisodeKernel::PreElimMtpe { .. }));
            let (r, threads, bounds, seg_count, seg_first, seg_last) =
                mtpe.as_mut().expect("allocated above for MTPE");
            let (r, threads) = (*r, *threads);
            let mut b = exact_family(&kernels.mtpe_count[machine][n - 1]);
            b.arg(&*bounds).arg(&r);
            b.arg(&mut *seg_count)
                .arg(&mut *seg_first)
                .arg(&mut *seg_last);
            let count_cfg = launch::cover(threads, block);
            // SAFETY: matches `episodes_{mtpe,preelim_mtpe}_count_n{n}`: times, offsets,
            // lo, hi, types [m*n], ivs [m*(n-1)], n_cands u32, bounds f64* [r+1], r_segs
            // u32, seg_count u32* [m*r], seg_first f64* [m*r*RECORDED], seg_last f64*
            // [m*r]; threads with g / m >= r return before touching memory.
            unsafe { b.launch(count_cfg) }.map_err(drv("cuLaunchKernel"))?;
            let mut b = exact_family(&kernels.mtpe_merge[machine][n - 1]);
            b.arg(&*bounds).arg(&r);
            b.arg(&*seg_count)
                .arg(&*seg_first)
                .arg(&*seg_last)
                .arg(&mut out);
            // SAFETY: matches `episodes_{mtpe,preelim_mtpe}_merge_n{n}` (the count kernel's
            // buffers, read only, then out u32* [m]); threads with c >= m return first.
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
        }
    }
    let timed = timer.stop(s)?;
    let counts = s.clone_dtoh(&out).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = timed.ms()?;
    Ok(BatchCounts { counts, kernel_ms })
}
