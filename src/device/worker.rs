//! One named, core-pinned host thread per GPU that owns the GPU's CUDA context for the life of
//! the miner (paper §6.2) and serves jobs over crossbeam channels.
//!
//! Jobs: upload the event stream (once per mining run), count a batch of candidates with the
//! PreElim or PTPE kernel. Replies carry only counts back.

use std::ops::Range;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, PushKernelArg};
use cudarc::nvrtc::Ptx;

use crate::device::kernels::{self, MAX_GPU_NODES, MTPE_RECORDED};
use crate::device::launch::{self, Timer};
use crate::device::{DeviceError, DeviceInfo};

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
    /// [`kernels::COUNT_OVERFLOW`] when a per-state list outgrows its capacity.
    Ptpe,
    /// MTPE (paper §5.1): one thread per (episode, segment) counts, then one thread per
    /// episode merges the `(a, count, b)` tuples exactly (`episode::mtpe`). Exact, or
    /// [`kernels::COUNT_OVERFLOW`] as PTPE.
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
    /// One count per candidate of the range; [`kernels::COUNT_OVERFLOW`] marks a PTPE overflow.
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

enum Job {
    Load {
        data: Arc<StreamData>,
        reply: Sender<Result<StreamReport, DeviceError>>,
    },
    Count {
        kernel: EpisodeKernel,
        batch: Arc<CandidateBatch>,
        range: Range<usize>,
        reply: Sender<Result<BatchCounts, DeviceError>>,
    },
    /// Any other job (motif, soft-DTW, ...): a closure run on the device thread.
    Run(Box<dyn FnOnce(&mut Device) + Send>),
}

/// A handle to one device thread. Dropping it closes the job channel and joins the thread.
pub struct GpuWorker {
    info: DeviceInfo,
    ptpe_resident: Vec<u64>,
    name: String,
    jobs: Option<Sender<Job>>,
    handle: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for GpuWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuWorker")
            .field("name", &self.name)
            .field("info", &self.info)
            .finish()
    }
}

/// A pending reply from a worker.
#[derive(Debug)]
#[must_use = "a ticket must be waited on to get the result"]
pub struct Ticket<T> {
    rx: Receiver<Result<T, DeviceError>>,
    worker: String,
}

impl<T> Ticket<T> {
    /// Blocks until the worker replies.
    ///
    /// # Errors
    /// The job's [`DeviceError`], or [`DeviceError::WorkerGone`] if the thread died.
    pub fn wait(self) -> Result<T, DeviceError> {
        self.rx
            .recv()
            .map_err(|_| DeviceError::WorkerGone(self.worker))?
    }
}

impl GpuWorker {
    /// Starts the thread `synfire:gpu-<ordinal>` (suffixed `-<slot>` when one GPU gets several
    /// workers), pins it to core `pin_core` when given, creates the CUDA context and compiles the
    /// kernels there. Returns once the thread is ready.
    ///
    /// # Errors
    /// Any [`DeviceError`] of context creation, NVRTC or module loading.
    pub fn start(
        ordinal: usize,
        slot: usize,
        pin_core: Option<usize>,
    ) -> Result<Self, DeviceError> {
        if !super::libraries_present() {
            return Err(DeviceError::NoDriver);
        }
        let name = if slot == 0 {
            format!("synfire:gpu-{ordinal}")
        } else {
            format!("synfire:gpu-{ordinal}-{slot}")
        };
        let (jobs_tx, jobs_rx) = bounded::<Job>(4);
        let (ready_tx, ready_rx) = bounded::<Result<(DeviceInfo, Vec<u64>), DeviceError>>(1);
        let thread_name = name.clone();
        let handle = std::thread::Builder::new()
            .name(thread_name.clone())
            .spawn(move || {
                if let Some(core) = pin_core {
                    let pinned = core_affinity::get_core_ids()
                        .and_then(|ids| ids.into_iter().find(|c| c.id == core))
                        .is_some_and(core_affinity::set_for_current);
                    if !pinned {
                        tracing::debug!(thread = %thread_name, core, "Could not pin the device thread.");
                    }
                }
                match Device::open(ordinal) {
                    Ok(device) => {
                        let _ = ready_tx.send(Ok((device.info.clone(), device.ptpe_resident.clone())));
                        device.serve(&jobs_rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| DeviceError::Driver { call: "spawning the device thread", message: e.to_string() })?;
        let (info, ptpe_resident) = ready_rx
            .recv()
            .map_err(|_| DeviceError::WorkerGone(name.clone()))??;
        Ok(Self {
            info,
            ptpe_resident,
            name,
            jobs: Some(jobs_tx),
            handle: Some(handle),
        })
    }

    /// The device this worker owns.
    #[must_use]
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// The thread's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
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

    fn submit<T>(&self, make: impl FnOnce(Sender<Result<T, DeviceError>>) -> Job) -> Ticket<T> {
        let (tx, rx) = bounded(1);
        if let Some(jobs) = &self.jobs {
            // A send error means the thread is gone; the ticket then reports WorkerGone.
            let _ = jobs.send(make(tx));
        }
        Ticket {
            rx,
            worker: self.name.clone(),
        }
    }

    /// Uploads the event stream, replacing any previous one.
    pub fn load_stream(&self, data: Arc<StreamData>) -> Ticket<StreamReport> {
        self.submit(|reply| Job::Load { data, reply })
    }

    /// Counts candidates `range` of `batch` with `kernel` against the uploaded stream.
    pub fn count(
        &self,
        kernel: EpisodeKernel,
        batch: Arc<CandidateBatch>,
        range: Range<usize>,
    ) -> Ticket<BatchCounts> {
        self.submit(|reply| Job::Count {
            kernel,
            batch,
            range,
            reply,
        })
    }
}

impl GpuWorker {
    /// Runs `f` on the device thread with its [`Device`] and returns its result: the way the
    /// stage-specific device modules (`device::motif`, ...) submit their jobs.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Device) -> Result<T, DeviceError> + Send + 'static,
    ) -> Ticket<T> {
        self.submit(|reply| {
            Job::Run(Box::new(move |device: &mut Device| {
                let _ = reply.send(f(device));
            }))
        })
    }
}

impl Drop for GpuWorker {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
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

/// Thread-local state of a device thread: context, stream, module functions, uploaded data.
pub(crate) struct Device {
    pub(crate) info: DeviceInfo,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// Modules of kernel files other than `episodes.cu`, loaded on first use.
    modules: std::collections::HashMap<&'static str, Arc<cudarc::driver::CudaModule>>,
    /// Motif-discovery buffers (`device::motif`).
    pub(crate) motif: Option<super::motif::MotifBuffers>,
    /// Soft-DTW scratch (`device::softdtw`).
    pub(crate) softdtw: super::softdtw::SoftDtwBuffers,
    /// Similarity-search buffers (`device::search`).
    pub(crate) search: Option<super::search::SearchBuffers>,
    /// Shapelet-discovery training series (`device::shapelet`).
    pub(crate) shapelet: Option<super::shapelet::ShapeletBuffers>,
    preelim: Vec<CudaFunction>,
    ptpe: Vec<CudaFunction>,
    /// Per machine (0: exact, 1: PreElim), per N: the MTPE counting and merging kernels.
    mtpe_count: [Vec<CudaFunction>; 2],
    mtpe_merge: [Vec<CudaFunction>; 2],
    ptpe_resident: Vec<u64>,
    data: Option<DeviceStream>,
}

/// Threads per block of every episode kernel (the paper's `T_B`).
pub const THREADS_PER_BLOCK: u32 = 128;

impl Device {
    fn open(ordinal: usize) -> Result<Self, DeviceError> {
        let count =
            CudaContext::device_count().map_err(|e| DeviceError::driver("cuDeviceGetCount", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(DeviceError::InvalidOrdinal {
                ordinal,
                count: count.max(0) as usize,
            });
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| DeviceError::driver("cuCtxCreate", e))?;
        let info = super::info_of(&ctx, super::driver_version()?)?;
        let ptx = kernels::ptx_for(
            &kernels::EPISODES,
            info.compute_capability,
            info.driver_version,
        )?;
        let module =
            ctx.load_module(Ptx::from_src(ptx.as_str()))
                .map_err(|e| DeviceError::Load {
                    what: kernels::EPISODES.name.into(),
                    message: e.to_string(),
                })?;
        let load = |name: String| {
            module.load_function(&name).map_err(|e| DeviceError::Load {
                what: name.clone(),
                message: e.to_string(),
            })
        };
        let preelim = (1..=MAX_GPU_NODES)
            .map(|n| load(format!("episodes_preelim_n{n}")))
            .collect::<Result<_, _>>()?;
        let ptpe: Vec<CudaFunction> = (1..=MAX_GPU_NODES)
            .map(|n| load(format!("episodes_ptpe_n{n}")))
            .collect::<Result<_, _>>()?;
        let family = |prefix: &str, step: &str| {
            (1..=MAX_GPU_NODES)
                .map(|n| load(format!("episodes_{prefix}_{step}_n{n}")))
                .collect::<Result<Vec<_>, _>>()
        };
        let mtpe_count = [family("mtpe", "count")?, family("preelim_mtpe", "count")?];
        let mtpe_merge = [family("mtpe", "merge")?, family("preelim_mtpe", "merge")?];
        let ptpe_resident = ptpe
            .iter()
            .map(|f: &CudaFunction| {
                f.occupancy_max_active_blocks_per_multiprocessor(THREADS_PER_BLOCK, 0, None)
                    .map(|b| {
                        u64::from(info.multiprocessors)
                            * u64::from(b)
                            * u64::from(THREADS_PER_BLOCK)
                    })
                    .map_err(|e| {
                        DeviceError::driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e)
                    })
            })
            .collect::<Result<_, _>>()?;
        let stream = ctx.default_stream();
        Ok(Self {
            info,
            ctx,
            stream,
            preelim,
            ptpe,
            mtpe_count,
            mtpe_merge,
            ptpe_resident,
            data: None,
            modules: std::collections::HashMap::new(),
            motif: None,
            softdtw: Default::default(),
            search: None,
            shapelet: None,
        })
    }

    /// Function `name` of kernel file `file`, compiling (cached) and loading the module on
    /// first use.
    pub(crate) fn function(
        &mut self,
        file: &kernels::KernelFile,
        name: &str,
    ) -> Result<CudaFunction, DeviceError> {
        let module = match self.modules.get(file.name) {
            Some(m) => m.clone(),
            None => {
                let ptx =
                    kernels::ptx_for(file, self.info.compute_capability, self.info.driver_version)?;
                let m = self
                    .ctx
                    .load_module(Ptx::from_src(ptx.as_str()))
                    .map_err(|e| DeviceError::Load {
                        what: file.name.into(),
                        message: e.to_string(),
                    })?;
                self.modules.insert(file.name, m.clone());
                m
            }
        };
        module.load_function(name).map_err(|e| DeviceError::Load {
            what: name.into(),
            message: e.to_string(),
        })
    }

    fn serve(mut self, jobs: &Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            match job {
                Job::Load { data, reply } => {
                    let _ = reply.send(self.load(&data));
                }
                Job::Count {
                    kernel,
                    batch,
                    range,
                    reply,
                } => {
                    let _ = reply.send(self.count(kernel, &batch, range));
                }
                Job::Run(f) => f(&mut self),
            }
        }
    }

    fn load(&mut self, d: &StreamData) -> Result<StreamReport, DeviceError> {
        let s = &self.stream;
        let up = |e| DeviceError::driver("cuMemcpyHtoD", e);
        self.data = None;
        self.data = Some(DeviceStream {
            offsets: upload(s, &d.offsets).map_err(up)?,
            times: upload(s, &d.times).map_err(up)?,
            lo: upload(s, &d.lo).map_err(up)?,
            hi: upload(s, &d.hi).map_err(up)?,
        });
        s.synchronize()
            .map_err(|e| DeviceError::driver("cuStreamSynchronize", e))?;
        let (free, total) = self
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
        &mut self,
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
        let data = self
            .data
            .as_ref()
            .ok_or_else(|| DeviceError::Unsupported("count before the stream was loaded".into()))?;
        let s = &self.stream;
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
                let f = &self.preelim[n - 1];
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
                let mut b = exact_family(&self.ptpe[n - 1]);
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
                let mut b = exact_family(&self.mtpe_count[machine][n - 1]);
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
                let mut b = exact_family(&self.mtpe_merge[machine][n - 1]);
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
}
