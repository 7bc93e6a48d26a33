//! Episode-counting jobs for a device thread (`kernels/episodes.cu`); `episode::gpu` drives
//! them.
//!
//! An [`EpisodeWorker`] is a [`GpuWorker`] with the episode kernels loaded (PreElim, PTPE and
//! the MTPE counting and merging kernels for every episode length 1..=16, each length its own
//! program, the first [`EAGER_SIZES`] compiled and loaded at start, longer ones on first use,
//! each with PTPE's resident-thread count). Jobs: upload the
//! event stream (once per mining run or window), count a batch of candidates with the PreElim,
//! PTPE or MTPE kernel. Replies carry only counts back.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};

use super::kernels::{BOUNDS, ENDS, EPISODES, MAX_GPU_NODES, MTPE_RECORDED, SURROGATES};
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

/// One round of join bounds of the threshold search (`significance::spectrum`) on the
/// counted stream: the ends of every prefix chain, the successors of every last pair, and
/// for every join the size of their intersection (`kernels/bounds.cu`; the host's
/// `episode::bound::join_bounds_cpu`, bit for bit).
///
/// Shapes: `chain_types [prefixes * nodes]` (row-major), `chain_low`/`chain_high`
/// `[prefixes * (nodes - 1)]` (seconds; `low` is the gap's `Interval::low_by_time`);
/// `pair_from`/`pair_to`/`pair_low`/`pair_high` `[pairs]`; `join_prefix`/`join_pair`
/// `[joins]`, where a join's pair starts at its prefix's last type.
#[derive(Clone, Debug, Default)]
pub struct BoundJob {
    /// Nodes per prefix (at least 2).
    pub nodes: usize,
    /// Prefix node types, row-major.
    pub chain_types: Vec<u32>,
    /// Prefix gaps' largest non-fitting delays, seconds.
    pub chain_low: Vec<f64>,
    /// Prefix gaps' largest fitting delays, seconds.
    pub chain_high: Vec<f64>,
    /// Last pairs' first types.
    pub pair_from: Vec<u32>,
    /// Last pairs' second types.
    pub pair_to: Vec<u32>,
    /// Last pairs' largest non-fitting delays, seconds.
    pub pair_low: Vec<f64>,
    /// Last pairs' largest fitting delays, seconds.
    pub pair_high: Vec<f64>,
    /// Each join's prefix (index into the prefixes).
    pub join_prefix: Vec<u32>,
    /// Each join's last pair (index into the pairs).
    pub join_pair: Vec<u32>,
}

/// One level of an [`EndsJob`]: items `α·x`, each the extension of a parent `α` (an item of
/// the level before, or at the first level the single node `last`) by type `x` with a gap.
///
/// Shapes: every field `[items]`. `low` is the gap's `Interval::low_by_time` (the largest
/// delay that does not fit), `high` its largest fitting delay, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndsLevel {
    /// Each item's parent: an index into the previous level (unused at the first level).
    pub parent: Vec<u32>,
    /// The parent's last type.
    pub last: Vec<u32>,
    /// The appended type.
    pub x: Vec<u32>,
    /// Largest non-fitting delay of the appended gap, seconds.
    pub low: Vec<f64>,
    /// Largest fitting delay of the appended gap, seconds.
    pub high: Vec<f64>,
}

impl EndsLevel {
    /// Number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// True when the level has no item.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Appends an item.
    pub fn push(&mut self, parent: u32, last: u32, x: u32, low: f64, high: f64) {
        self.parent.push(parent);
        self.last.push(last);
        self.x.push(x);
        self.low.push(low);
        self.high.push(high);
    }
}

/// Exact counts of candidates from the occurrence ends of their prefixes, on the counted
/// stream (`kernels/ends.cu`; the host's `episode::ends`, count for count): the ends of each
/// prefix level are built on the device from the level before (the first level from its
/// single nodes), one thread per event of each prefix's last type, then each candidate is
/// counted from its prefix's ends (one thread per candidate).
/// A prefix shared by several candidates is built once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndsJob {
    /// The prefix levels, shortest first (2 nodes, 3 nodes, …); empty for pairs.
    pub prefixes: Vec<EndsLevel>,
    /// The candidates: parents in the last prefix level (the single node `last` when there
    /// is none).
    pub candidates: EndsLevel,
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

/// A surrogate of the uploaded recording for the device to generate in place of the counted
/// stream (`kernels/surrogates.cu`): the same draws and arithmetic as the host's
/// `significance::Surrogates::unit_train`, so the same times bit for bit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SurrogateJob {
    /// The method.
    pub method: DeviceSurrogate,
    /// Philox key (the seed's low and high words).
    pub key: [u32; 2],
    /// Surrogate index.
    pub surrogate: u64,
    /// The recording's span `[T0, T1]`, seconds.
    pub span: (f64, f64),
}

/// The surrogate methods the device generates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DeviceSurrogate {
    /// Each spike uniformly within ±Δ seconds, clamped to the span.
    Dither {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// Each unit's train by one uniform offset within ±Δ seconds, wrapped into the span.
    Shift {
        /// Δ, seconds.
        delta_s: f64,
    },
}

/// Threads per block of every episode kernel (the paper's `T_B`).
pub const THREADS_PER_BLOCK: u32 = 128;

/// A device thread with the episode kernels loaded: what `episode::GpuCounter` counts on.
pub struct EpisodeWorker {
    pub(super) worker: GpuWorker,
    /// PTPE resident threads per N, known once that size is loaded.
    ptpe_resident: std::sync::Mutex<Vec<Option<u64>>>,
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
        let mut ptpe_resident: Vec<Option<u64>> = worker
            .run(load_kernels)
            .wait()?
            .into_iter()
            .map(Some)
            .collect();
        ptpe_resident.resize(MAX_GPU_NODES, None);
        Ok(Self {
            worker,
            ptpe_resident: std::sync::Mutex::new(ptpe_resident),
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
    /// A size above [`EAGER_SIZES`] is compiled and loaded here on first use. 0 for `nodes`
    /// outside 1..=16, or when that size's kernels cannot be loaded (the count that follows
    /// reports the error).
    #[must_use]
    pub fn ptpe_resident_threads(&self, nodes: usize) -> u64 {
        let Some(i) = nodes.checked_sub(1).filter(|&i| i < MAX_GPU_NODES) else {
            return 0;
        };
        let known = self
            .ptpe_resident
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)[i];
        if let Some(r) = known {
            return r;
        }
        match self
            .worker
            .run(move |d| ensure_size(d, nodes).map(|k| k.ptpe_resident))
            .wait()
        {
            Ok(r) => {
                self.ptpe_resident
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)[i] = Some(r);
                r
            }
            Err(e) => {
                tracing::warn!(nodes, error = %e, "Could not load the episode kernels.");
                0
            }
        }
    }

    /// Uploads the event stream, replacing any previous one.
    pub fn load_stream(&self, data: Arc<StreamData>) -> Ticket<StreamReport> {
        self.worker.run(move |d| load(d, &data))
    }

    /// Replaces the counted stream by surrogate `job` of the recording uploaded last by
    /// [`EpisodeWorker::load_stream`] (kept on the device), generated there: no upload.
    pub fn load_surrogate(&self, job: SurrogateJob) -> Ticket<()> {
        self.worker.run(move |d| surrogate(d, job))
    }

    /// The counted stream's times, grouped by type (for tests: a generated surrogate against
    /// the host's). Shape `[events]`.
    pub fn stream_times(&self) -> Ticket<Vec<f64>> {
        self.worker.run(|d| {
            let s = d.stream.clone();
            let data = d
                .slot::<Episodes>()
                .data
                .as_ref()
                .ok_or_else(|| DeviceError::Unsupported("no stream loaded".into()))?;
            s.clone_dtoh(&data.times)
                .map_err(|e| DeviceError::driver("cuMemcpyDtoH", e))
        })
    }

    /// The join bounds of `job` (see [`BoundJob`]) on the counted stream, one per join.
    pub fn join_bounds(&self, job: Arc<BoundJob>) -> Ticket<Vec<u32>> {
        self.worker.run(move |d| join_bounds(d, &job))
    }

    /// The exact counts of `job`'s candidates (see [`EndsJob`]) on the counted stream.
    pub fn count_by_ends(&self, job: Arc<EndsJob>) -> Ticket<BatchCounts> {
        self.worker.run(move |d| count_by_ends(d, &job))
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
pub(super) fn upload<T: cudarc::driver::DeviceRepr + Default>(
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
    /// `offsets` on the host (surrogates keep every type's event count).
    host_offsets: Vec<u32>,
    times: CudaSlice<f64>,
    /// The uploaded (recording's) times, which surrogates are generated from; `times` is
    /// the surrogate while one is loaded. Events and types as `times`.
    original: CudaSlice<f64>,
    /// Number of events (`times` may hold one padding element when empty).
    events: u32,
    lo: CudaSlice<f64>,
    hi: CudaSlice<f64>,
}

/// The episode kernels for one episode size N, loaded from that size's own program.
struct SizeKernels {
    preelim: CudaFunction,
    ptpe: CudaFunction,
    /// Per machine (0: exact, 1: PreElim): the MTPE counting and merging kernels.
    mtpe_count: [CudaFunction; 2],
    mtpe_merge: [CudaFunction; 2],
    /// PTPE threads resident at once (occupancy calculator), Eq. 2's `MP × B_MP × T_B`.
    ptpe_resident: u64,
}

/// The episode slot of a device thread: the kernels loaded so far (index N − 1) and the
/// uploaded stream.
#[derive(Default)]
struct Episodes {
    kernels: Vec<Option<SizeKernels>>,
    data: Option<DeviceStream>,
}

/// Episode sizes compiled and loaded when a worker starts (in parallel); larger ones are
/// compiled when first counted, the next size ahead in the background. Their NVRTC time grows
/// with N (tens of seconds each for N ≥ 10 on an H100 host), so a first run on a fresh host
/// pays only for the sizes it mines.
pub const EAGER_SIZES: usize = 4;

/// Compiles (cached) and loads sizes `1..=EAGER_SIZES` and returns their PTPE resident
/// threads.
fn load_kernels(d: &mut Device) -> Result<Vec<u64>, DeviceError> {
    let sizes: Vec<u32> = (1..=EAGER_SIZES as u32).collect();
    super::kernels::prepare(
        &EPISODES,
        &sizes,
        d.info.compute_capability,
        d.info.driver_version,
    )?;
    (1..=EAGER_SIZES)
        .map(|n| ensure_size(d, n).map(|k| k.ptpe_resident))
        .collect()
}

/// The kernels for episodes of `n` nodes (1..=16), compiling (cached) and loading them on
/// first use; the first use of a size also starts compiling the next size in the background,
/// so a level-wise run finds it ready.
fn ensure_size(d: &mut Device, n: usize) -> Result<&SizeKernels, DeviceError> {
    if n == 0 || n > MAX_GPU_NODES {
        return Err(DeviceError::Unsupported(format!(
            "episodes of {n} nodes (the kernels take 1..={MAX_GPU_NODES})"
        )));
    }
    let loaded = d
        .slot::<Episodes>()
        .kernels
        .get(n - 1)
        .is_some_and(Option::is_some);
    if !loaded {
        let (cc, driver) = (d.info.compute_capability, d.info.driver_version);
        if n < MAX_GPU_NODES {
            let next = n as u32 + 1;
            // Fills the image caches only; an error shows when that size is loaded.
            d.in_background(move || {
                let _ = super::kernels::image_for(&EPISODES, next, cc, driver);
            });
        }
        let variant = n as u32;
        let mut load = |name: String| d.function_in(&EPISODES, variant, &name);
        let preelim = load(format!("episodes_preelim_n{n}"))?;
        let ptpe = load(format!("episodes_ptpe_n{n}"))?;
        let mtpe_count = [
            load(format!("episodes_mtpe_count_n{n}"))?,
            load(format!("episodes_preelim_mtpe_count_n{n}"))?,
        ];
        let mtpe_merge = [
            load(format!("episodes_mtpe_merge_n{n}"))?,
            load(format!("episodes_preelim_mtpe_merge_n{n}"))?,
        ];
        let blocks = ptpe
            .occupancy_max_active_blocks_per_multiprocessor(THREADS_PER_BLOCK, 0, None)
            .map_err(|e| DeviceError::driver("cuOccupancyMaxActiveBlocksPerMultiprocessor", e))?;
        let ptpe_resident =
            u64::from(d.info.multiprocessors) * u64::from(blocks) * u64::from(THREADS_PER_BLOCK);
        let kernels = &mut d.slot::<Episodes>().kernels;
        if kernels.len() < MAX_GPU_NODES {
            kernels.resize_with(MAX_GPU_NODES, || None);
        }
        kernels[n - 1] = Some(SizeKernels {
            preelim,
            ptpe,
            mtpe_count,
            mtpe_merge,
            ptpe_resident,
        });
    }
    d.slot::<Episodes>().kernels[n - 1]
        .as_ref()
        .ok_or_else(|| DeviceError::Unsupported(format!("episode kernels for {n} nodes")))
}

fn load(dev: &mut Device, d: &StreamData) -> Result<StreamReport, DeviceError> {
    let s = &dev.stream.clone();
    let up = |e| DeviceError::driver("cuMemcpyHtoD", e);
    let slot = dev.slot::<Episodes>();
    slot.data = None;
    let events = launch::u32_of("events", d.times.len())?;
    let times = upload(s, &d.times).map_err(up)?;
    let original = s
        .clone_dtod(&times)
        .map_err(|e| DeviceError::driver("cuMemcpyDtoD", e))?;
    slot.data = Some(DeviceStream {
        offsets: upload(s, &d.offsets).map_err(up)?,
        host_offsets: d.offsets.clone(),
        times,
        original,
        events,
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

/// Generates surrogate `job` of the kept recording into the counted times.
fn surrogate(dev: &mut Device, job: SurrogateJob) -> Result<(), DeviceError> {
    let s = dev.stream.clone();
    let (name, delta_s, rotated) = match job.method {
        DeviceSurrogate::Dither { delta_s } => ("surrogate_dither", delta_s, 0i32),
        DeviceSurrogate::Shift { delta_s } => ("surrogate_shift", delta_s, 1i32),
    };
    let generate = dev.function(&SURROGATES, name)?;
    let sort = dev.function(&SURROGATES, "surrogate_sort_units")?;
    let drv = |call: &'static str| move |e| DeviceError::driver(call, e);
    let data = dev.slot::<Episodes>().data.as_mut().ok_or_else(|| {
        DeviceError::Unsupported("a surrogate before the stream was loaded".into())
    })?;
    if data.events == 0 {
        return Ok(());
    }
    let units = launch::u32_of("units", data.offsets.len() - 1)?;
    let (t0, t1) = job.span;
    let [k0, k1] = job.key;
    let mut b = s.launch_builder(&generate);
    b.arg(&data.offsets)
        .arg(&units)
        .arg(&data.original)
        .arg(&mut data.times)
        .arg(&data.events)
        .arg(&delta_s)
        .arg(&t0)
        .arg(&t1)
        .arg(&job.surrogate)
        .arg(&k0)
        .arg(&k1);
    // SAFETY: the argument list matches `surrogate_dither` / `surrogate_shift` in
    // kernels/surrogates.cu (offsets u32* [units + 1], units u32, original f64* [events],
    // out f64* [events], events u32, delta f64, t0 f64, t1 f64, s u64, k0 u32, k1 u32);
    // threads with e >= events return before touching memory.
    unsafe { b.launch(launch::cover(data.events, THREADS_PER_BLOCK)) }
        .map_err(drv("cuLaunchKernel"))?;
    let mut b = s.launch_builder(&sort);
    b.arg(&data.offsets)
        .arg(&units)
        .arg(&mut data.times)
        .arg(&rotated);
    // SAFETY: matches `surrogate_sort_units` (offsets u32* [units + 1], units u32, x f64*
    // [events], rotated i32); each thread touches only its unit's range.
    unsafe { b.launch(launch::cover(units, THREADS_PER_BLOCK)) }.map_err(drv("cuLaunchKernel"))?;
    s.synchronize().map_err(drv("cuStreamSynchronize"))
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
    ensure_size(dev, n)?;
    let Episodes { kernels, data } = dev.slot::<Episodes>();
    let kernels = kernels[n - 1].as_ref().ok_or_else(|| {
        DeviceError::Unsupported(format!("episode kernels for {n} nodes not loaded"))
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
    // The arguments every kernel starts with: times, offsets, lo,
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
            let mut b = exact_family(&kernels.preelim);
            b.arg(&mut out);
            // SAFETY: the argument list matches `episodes_preelim_n{n}` in kernels/episodes.cu
            // (times f64*, offsets u32*, lo f64*, hi f64*, types u32* [m*n],
            // ivs u32* [m*(n-1)], n_cands u32, out u32* [m]); every buffer is as long as the
            // kernel reads, and threads with c >= m return before touching memory.
            unsafe { b.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
        }
        EpisodeKernel::Ptpe => {
            let mut b = exact_family(&kernels.ptpe);
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
            let mut b = exact_family(&kernels.mtpe_count[machine]);
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
            let mut b = exact_family(&kernels.mtpe_merge[machine]);
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

/// Events per chunk when a prefix level's flagged ends are packed (`ends_chunk_*` in
/// `kernels/ends.cu`): each chunk is one thread's serial work.
const ENDS_CHUNK: u32 = 64;

/// Runs [`EndsJob`] (`kernels/ends.cu`): each prefix level's ends into buffers with room
/// for every event of its items' last types, then the candidates' counts.
fn count_by_ends(dev: &mut Device, job: &EndsJob) -> Result<BatchCounts, DeviceError> {
    let s = dev.stream.clone();
    let fns = EndsFunctions::of(dev)?;
    let data =
        dev.slot::<Episodes>().data.as_ref().ok_or_else(|| {
            DeviceError::Unsupported("a count before the stream was loaded".into())
        })?;
    count_by_ends_on(&s, &fns, &Csr::of(data), job)
}

/// The `kernels/ends.cu` functions [`count_by_ends_on`] launches.
pub(super) struct EndsFunctions {
    count: CudaFunction,
    level: CudaFunction,
    chunk_count: CudaFunction,
    chunk_scan: CudaFunction,
    chunk_pack: CudaFunction,
}

impl EndsFunctions {
    /// Loads (once per device) and returns the ends kernels.
    pub(super) fn of(dev: &mut Device) -> Result<Self, DeviceError> {
        Ok(Self {
            count: dev.function(&ENDS, "ends_count")?,
            level: dev.function(&ENDS, "ends_level")?,
            chunk_count: dev.function(&ENDS, "ends_chunk_count")?,
            chunk_scan: dev.function(&ENDS, "ends_chunk_scan")?,
            chunk_pack: dev.function(&ENDS, "ends_chunk_pack")?,
        })
    }
}

/// A stream on the device grouped by type, as the ends and bounds kernels read it: times
/// `[events]` (seconds), offsets `[types + 1]`, and the offsets on the host.
pub(super) struct Csr<'a> {
    pub(super) times: &'a CudaSlice<f64>,
    pub(super) offsets: &'a CudaSlice<u32>,
    pub(super) host_offsets: &'a [u32],
}

impl<'a> Csr<'a> {
    fn of(data: &'a DeviceStream) -> Self {
        Self {
            times: &data.times,
            offsets: &data.offsets,
            host_offsets: &data.host_offsets,
        }
    }
}

/// [`count_by_ends`] on any stream grouped by type (`data`): the counted stream, or a batch
/// of surrogates laid side by side as one stream of `surrogates × types` types
/// (`device::floor`).
pub(super) fn count_by_ends_on(
    s: &Arc<CudaStream>,
    fns: &EndsFunctions,
    data: &Csr<'_>,
    job: &EndsJob,
) -> Result<BatchCounts, DeviceError> {
    let s = s.clone();
    let (count_f, level_f, chunk_count_f, chunk_scan_f, chunk_pack_f) = (
        &fns.count,
        &fns.level,
        &fns.chunk_count,
        &fns.chunk_scan,
        &fns.chunk_pack,
    );
    let drv = launch::drv;
    let types = data.host_offsets.len().saturating_sub(1);
    let levels: Vec<&EndsLevel> = job.prefixes.iter().chain([&job.candidates]).collect();
    let malformed = levels.iter().enumerate().any(|(d, l)| {
        let n = l.len();
        let parents = if d == 0 { 0 } else { levels[d - 1].len() };
        l.parent.len() != n
            || l.last.len() != n
            || l.low.len() != n
            || l.high.len() != n
            || l.last.iter().chain(&l.x).any(|&t| t as usize >= types)
            || (d > 0
                && (0..n).any(|i| {
                    let p = l.parent[i] as usize;
                    p >= parents || levels[d - 1].x[p] != l.last[i]
                }))
    });
    if malformed {
        return Err(DeviceError::Unsupported("a malformed ends job".into()));
    }
    let m = job.candidates.len();
    if m == 0 {
        return Ok(BatchCounts {
            counts: Vec::new(),
            kernel_ms: 0.0,
        });
    }
    let events =
        |t: u32| u64::from(data.host_offsets[t as usize + 1] - data.host_offsets[t as usize]);
    let (up, alloc) = (drv("cuMemcpyHtoD"), drv("cuMemAlloc"));
    let grid = |items: u32| launch::cover(items.max(1), THREADS_PER_BLOCK);
    // Uploads of every level, and the prefix levels' buffers, before the timed region.
    struct Level {
        items: u32,
        parent: CudaSlice<u32>,
        last: CudaSlice<u32>,
        x: CudaSlice<u32>,
        low: CudaSlice<f64>,
        high: CudaSlice<f64>,
    }
    let mut uploaded = Vec::with_capacity(levels.len());
    for l in &levels {
        uploaded.push(Level {
            items: launch::u32_of("ends items", l.len())?,
            parent: upload(&s, &l.parent).map_err(&up)?,
            last: upload(&s, &l.last).map_err(&up)?,
            x: upload(&s, &l.x).map_err(&up)?,
            low: upload(&s, &l.low).map_err(&up)?,
            high: upload(&s, &l.high).map_err(&up)?,
        });
    }
    struct Buffers {
        idx: CudaSlice<u32>,
        starts: CudaSlice<f64>,
        off: CudaSlice<u64>,
        len: CudaSlice<u32>,
        /// `off` as `u32` (the level's threads, one per event of an item's x), and their number.
        item_off: (CudaSlice<u32>, u32),
        /// Per event: whether it ends an occurrence, and its latest start, before packing.
        flags: CudaSlice<u32>,
        unpacked: CudaSlice<f64>,
        /// Prefix sums of the items' chunks of [`ENDS_CHUNK`] events, and their number.
        chunk_off: (CudaSlice<u32>, u32),
        /// Per chunk: its flagged events, then its first packed position.
        counts: CudaSlice<u32>,
        bases: CudaSlice<u32>,
    }
    let mut buffers = Vec::with_capacity(job.prefixes.len());
    for l in &job.prefixes {
        let mut off = Vec::with_capacity(l.len() + 1);
        let mut total = 0u64;
        off.push(0u64);
        for &x in &l.x {
            total += events(x);
            off.push(total);
        }
        let room = usize::try_from(total.max(1))
            .map_err(|_| DeviceError::Unsupported(format!("{total} ends in one job")))?;
        let narrow = off
            .iter()
            .map(|&o| launch::u32_of("prefix ends in one job", o as usize))
            .collect::<Result<Vec<u32>, _>>()?;
        let threads = *narrow.last().unwrap_or(&0);
        let item_off = (upload(&s, &narrow).map_err(&up)?, threads);
        let mut chunk_off = Vec::with_capacity(l.len() + 1);
        chunk_off.push(0u32);
        for w in narrow.windows(2) {
            let last = *chunk_off.last().unwrap_or(&0);
            chunk_off.push(last + (w[1] - w[0]).div_ceil(ENDS_CHUNK));
        }
        let chunks = *chunk_off.last().unwrap_or(&0);
        buffers.push(Buffers {
            idx: s.alloc_zeros::<u32>(room).map_err(&alloc)?,
            starts: s.alloc_zeros::<f64>(room).map_err(&alloc)?,
            off: upload(&s, &off).map_err(&up)?,
            len: s.alloc_zeros::<u32>(l.len().max(1)).map_err(&alloc)?,
            item_off,
            flags: s.alloc_zeros::<u32>(room).map_err(&alloc)?,
            unpacked: s.alloc_zeros::<f64>(room).map_err(&alloc)?,
            chunk_off: (upload(&s, &chunk_off).map_err(&up)?, chunks),
            counts: s
                .alloc_zeros::<u32>(chunks.max(1) as usize)
                .map_err(&alloc)?,
            bases: s
                .alloc_zeros::<u32>(chunks.max(1) as usize)
                .map_err(&alloc)?,
        });
    }
    let mut out = s.alloc_zeros::<u32>(m).map_err(&alloc)?;
    let null: u64 = 0;
    /// The arguments `ends_level` and `ends_count` start with: the stream, the level's
    /// items, and the previous level's ends (null pointers at the first level).
    fn item_args<'a>(
        s: &'a Arc<CudaStream>,
        f: &'a CudaFunction,
        data: &'a Csr<'a>,
        l: &'a Level,
        prev: Option<&'a Buffers>,
        null: &'a u64,
    ) -> cudarc::driver::LaunchArgs<'a> {
        let mut b = s.launch_builder(f);
        b.arg(data.times)
            .arg(data.offsets)
            .arg(&l.items)
            .arg(&l.parent)
            .arg(&l.last)
            .arg(&l.x)
            .arg(&l.low)
            .arg(&l.high);
        match prev {
            Some(p) => b.arg(&p.idx).arg(&p.starts).arg(&p.off).arg(&p.len),
            None => b.arg(null).arg(null).arg(null).arg(null),
        };
        b
    }
    let timer = Timer::start(&s)?;
    for (d, l) in uploaded.iter().enumerate() {
        let counting = d == uploaded.len() - 1;
        if !counting {
            // A prefix level, data-parallel: flags and starts per event, then packed.
            let (before, rest) = buffers.split_at_mut(d);
            let o = &mut rest[0];
            let (item_off, threads) = &o.item_off;
            let mut b = item_args(&s, level_f, data, l, before.last(), &null);
            b.arg(&mut o.flags)
                .arg(&mut o.unpacked)
                .arg(&o.off)
                .arg(item_off);
            // SAFETY: matches `ends_level` in kernels/ends.cu (times f64*, offsets u32*
            // [types + 1], items u32, parent/last/x u32* [items], low/high f64* [items], the
            // previous level's idx u32*, starts f64*, off u64* [parents + 1], len u32*
            // [parents] (null at the first level, where no parent is read), flags u32* and
            // starts f64* [off[items]], out_off u64* [items + 1], item_off u32* [items + 1],
            // the same sums as out_off). Types and parents were checked above (a parent's
            // last type is the item's), each thread writes its own element of its item's
            // room, and threads past item_off[items] return first.
            unsafe { b.launch(launch::cover((*threads).max(1), THREADS_PER_BLOCK)) }
                .map_err(drv("cuLaunchKernel"))?;
            let (chunk_off, chunks) = &o.chunk_off;
            let chunk_grid = launch::cover((*chunks).max(1), THREADS_PER_BLOCK);
            let mut b = s.launch_builder(chunk_count_f);
            b.arg(&l.items)
                .arg(item_off)
                .arg(chunk_off)
                .arg(&ENDS_CHUNK)
                .arg(&o.flags)
                .arg(&o.off)
                .arg(&mut o.counts);
            // SAFETY: matches `ends_chunk_count` (items u32, item_off u32* [items + 1],
            // chunk_off u32* [items + 1], chunk u32, flags u32* [off[items]], out_off u64*
            // [items + 1], counts u32* [chunks]); chunk_off holds ceil(events / chunk) per
            // item, so every chunk lies inside its item's room; threads past the last chunk
            // return first.
            unsafe { b.launch(chunk_grid) }.map_err(drv("cuLaunchKernel"))?;
            let mut b = s.launch_builder(chunk_scan_f);
            b.arg(&l.items)
                .arg(chunk_off)
                .arg(&o.counts)
                .arg(&mut o.bases)
                .arg(&mut o.len);
            // SAFETY: matches `ends_chunk_scan` (items u32, chunk_off u32* [items + 1],
            // counts u32* [chunks], bases u32* [chunks], out_len u32* [items]).
            unsafe { b.launch(grid(l.items)) }.map_err(drv("cuLaunchKernel"))?;
            let mut b = s.launch_builder(chunk_pack_f);
            b.arg(&l.items)
                .arg(item_off)
                .arg(chunk_off)
                .arg(&ENDS_CHUNK)
                .arg(&o.flags)
                .arg(&o.unpacked)
                .arg(&o.off)
                .arg(&o.bases)
                .arg(&mut o.idx)
                .arg(&mut o.starts);
            // SAFETY: matches `ends_chunk_pack` (items, item_off, chunk_off, chunk, flags u32*
            // and starts f64* [off[items]], out_off u64* [items + 1], bases u32* [chunks],
            // out_idx u32* and out_starts f64* [off[items]]); a chunk writes from its base,
            // at most its flagged events, all inside its item's room (bases sum the earlier
            // chunks' flags).
            unsafe { b.launch(chunk_grid) }.map_err(drv("cuLaunchKernel"))?;
            continue;
        }
        let mut b = item_args(&s, count_f, data, l, buffers.last(), &null);
        b.arg(&mut out);
        // SAFETY: matches `ends_count` in kernels/ends.cu (times, offsets, items u32,
        // parent/last/x u32* [items], low/high f64* [items], the last prefix level's idx u32*,
        // starts f64*, off u64* [parents + 1], len u32* [parents] (null for pairs, whose
        // parents are single nodes), count u32* [items]); checked as above, threads with
        // p >= items return first.
        unsafe { b.launch(grid(l.items)) }.map_err(drv("cuLaunchKernel"))?;
    }
    let timed = timer.stop(&s)?;
    let counts = s.clone_dtoh(&out).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = timed.ms()?;
    Ok(BatchCounts { counts, kernel_ms })
}

/// Words of a bit set over `n` events.
pub(super) fn words_of(n: u32) -> u32 {
    n.div_ceil(64)
}

/// Runs [`BoundJob`] (`kernels/bounds.cu`): the prefix chains step by step (each step's bits
/// over its node's events, the first step from every event of the first type), the pairs'
/// successor bits, then one and-count per join.
fn join_bounds(dev: &mut Device, job: &BoundJob) -> Result<Vec<u32>, DeviceError> {
    let s = dev.stream.clone();
    let step_f = dev.function(&BOUNDS, "bounds_chain_step")?;
    let succ_f = dev.function(&BOUNDS, "bounds_successors")?;
    let and_f = dev.function(&BOUNDS, "bounds_and_count")?;
    let drv = launch::drv;
    let data = dev.slot::<Episodes>().data.as_ref().ok_or_else(|| {
        DeviceError::Unsupported("join bounds before the stream was loaded".into())
    })?;
    let n = job.nodes;
    let prefixes = job.chain_types.len().checked_div(n).unwrap_or(0);
    let pairs = job.pair_from.len();
    let joins = job.join_prefix.len();
    let types = data.host_offsets.len().saturating_sub(1);
    let malformed =
        n < 2
            || job.chain_types.len() != prefixes * n
            || job.chain_low.len() != prefixes * (n - 1)
            || job.chain_high.len() != prefixes * (n - 1)
            || job.pair_to.len() != pairs
            || job.pair_low.len() != pairs
            || job.pair_high.len() != pairs
            || job.join_pair.len() != joins
            || job
                .chain_types
                .iter()
                .chain(&job.pair_from)
                .chain(&job.pair_to)
                .any(|&t| t as usize >= types)
            || job.join_prefix.iter().any(|&p| p as usize >= prefixes)
            || job.join_pair.iter().any(|&q| q as usize >= pairs)
            || job.join_prefix.iter().zip(&job.join_pair).any(|(&p, &q)| {
                job.chain_types[p as usize * n + n - 1] != job.pair_from[q as usize]
            });
    if malformed {
        return Err(DeviceError::Unsupported(
            "a malformed join-bound job".into(),
        ));
    }
    if joins == 0 {
        return Ok(Vec::new());
    }
    let events = |t: u32| data.host_offsets[t as usize + 1] - data.host_offsets[t as usize];
    let up = drv("cuMemcpyHtoD");
    let alloc = drv("cuMemAlloc");
    let grid = |total: u32| launch::cover(total.max(1), THREADS_PER_BLOCK);
    // The chains, one step at a time, each over its second types' events.
    let mut prev: Option<(CudaSlice<u64>, CudaSlice<u32>)> = None;
    for step in 1..n {
        let node =
            |d: usize| -> Vec<u32> { (0..prefixes).map(|p| job.chain_types[p * n + d]).collect() };
        let gap =
            |v: &[f64]| -> Vec<f64> { (0..prefixes).map(|p| v[p * (n - 1) + step - 1]).collect() };
        let (from, to): (Vec<u32>, Vec<u32>) = (node(step - 1), node(step));
        let it = BoundItems::upload(
            &s,
            &data.host_offsets,
            [&from, &to],
            [&gap(&job.chain_low), &gap(&job.chain_high)],
            &to,
        )?;
        let mut out = s.alloc_zeros::<u64>(it.words.max(1)).map_err(&alloc)?;
        let null: u64 = 0;
        let mut b = s.launch_builder(&step_f);
        b.arg(&data.times)
            .arg(&data.offsets)
            .arg(&it.items)
            .arg(&it.from)
            .arg(&it.to)
            .arg(&it.low)
            .arg(&it.high);
        match &prev {
            Some((bits, off)) => b.arg(bits).arg(off),
            None => b.arg(&null).arg(&null),
        };
        b.arg(&mut out).arg(&it.word_off).arg(&it.item_off);
        // SAFETY: matches `bounds_chain_step` (times f64*, offsets u32*, items u32, from u32*
        // [items], to u32* [items], low f64* [items], high f64* [items], prev u64* (null on
        // the first step), prev_off u32* [items + 1], out u64* [out_off[items]], out_off u32*
        // [items + 1], item_off u32* [items + 1]); every type was checked against the
        // stream's, each element's word lies inside its item's words.
        unsafe { b.launch(grid(it.elements)) }.map_err(drv("cuLaunchKernel"))?;
        prev = Some((out, it.word_off));
    }
    let Some((ends, ends_off_d)) = prev else {
        return Err(DeviceError::Unsupported(
            "a join-bound job without chains".into(),
        ));
    };
    // The pairs' successor bits, over their first types' events.
    let it = BoundItems::upload(
        &s,
        &data.host_offsets,
        [&job.pair_from, &job.pair_to],
        [&job.pair_low, &job.pair_high],
        &job.pair_from,
    )?;
    let mut succ = s.alloc_zeros::<u64>(it.words.max(1)).map_err(&alloc)?;
    let mut b = s.launch_builder(&succ_f);
    b.arg(&data.times)
        .arg(&data.offsets)
        .arg(&it.items)
        .arg(&it.from)
        .arg(&it.to)
        .arg(&it.low)
        .arg(&it.high)
        .arg(&mut succ)
        .arg(&it.word_off)
        .arg(&it.item_off);
    // SAFETY: matches `bounds_successors` (times, offsets, items u32, from u32* [items], to
    // u32* [items], low f64* [items], high f64* [items], out u64* [out_off[items]], out_off
    // u32* [items + 1], item_off u32* [items + 1]); types checked as above.
    unsafe { b.launch(grid(it.elements)) }.map_err(drv("cuLaunchKernel"))?;
    let succ_off_d = it.word_off;
    // One and-count per join, over the prefix's last type's words (the pair's first type).
    let words: Vec<u32> = job
        .join_pair
        .iter()
        .map(|&q| words_of(events(job.pair_from[q as usize])))
        .collect();
    let (jp, jq) = (
        upload(&s, &job.join_prefix).map_err(&up)?,
        upload(&s, &job.join_pair).map_err(&up)?,
    );
    let words_d = upload(&s, &words).map_err(&up)?;
    let mut bound = s.alloc_zeros::<u32>(joins).map_err(&alloc)?;
    let joins_u = launch::u32_of("joins", joins)?;
    let mut b = s.launch_builder(&and_f);
    b.arg(&joins_u)
        .arg(&jp)
        .arg(&jq)
        .arg(&ends)
        .arg(&ends_off_d)
        .arg(&succ)
        .arg(&succ_off_d)
        .arg(&words_d)
        .arg(&mut bound);
    // SAFETY: matches `bounds_and_count` (joins u32, join_prefix u32* [joins], join_pair u32*
    // [joins], ends u64*, ends_off u32* [prefixes + 1], succ u64*, succ_off u32* [pairs + 1],
    // words u32* [joins], bound u32* [joins]); a join's prefix ends on its pair's first type,
    // so both sets have `words[i]` words.
    unsafe { b.launch(grid(joins_u)) }.map_err(drv("cuLaunchKernel"))?;
    s.clone_dtoh(&bound).map_err(drv("cuMemcpyDtoH"))
}

/// One launch's items on the device: their first and second types, their gaps' delays, and
/// where each item's elements (the events of its counted type) and bit-set words start.
pub(super) struct BoundItems {
    pub(super) items: u32,
    pub(super) from: CudaSlice<u32>,
    pub(super) to: CudaSlice<u32>,
    pub(super) low: CudaSlice<f64>,
    pub(super) high: CudaSlice<f64>,
    /// Prefix sums of the items' element counts. Shape `[items + 1]`.
    pub(super) item_off: CudaSlice<u32>,
    /// Prefix sums of the items' word counts. Shape `[items + 1]`.
    pub(super) word_off: CudaSlice<u32>,
    /// `word_off` on the host. Shape `[items + 1]`.
    pub(super) host_word_off: Vec<u32>,
    /// Elements (threads) in all.
    pub(super) elements: u32,
    /// Words of all the items' bit sets.
    pub(super) words: usize,
}

impl BoundItems {
    /// Uploads `[from, to]`, `[low, high]` and the offsets of bit sets over the events of
    /// `counted[i]` (types of the stream whose CSR offsets are `offsets`).
    pub(super) fn upload(
        s: &Arc<CudaStream>,
        offsets: &[u32],
        [from, to]: [&[u32]; 2],
        [low, high]: [&[f64]; 2],
        counted: &[u32],
    ) -> Result<Self, DeviceError> {
        let up = |e| DeviceError::driver("cuMemcpyHtoD", e);
        let (mut item_off, mut word_off) = (vec![0u32], vec![0u32]);
        let (mut elements, mut words) = (0u64, 0u64);
        for &t in counted {
            let n = offsets[t as usize + 1] - offsets[t as usize];
            elements += u64::from(n);
            words += u64::from(words_of(n));
            item_off.push(launch::u32_of("bound elements", elements as usize)?);
            word_off.push(launch::u32_of("bound words", words as usize)?);
        }
        Ok(Self {
            items: launch::u32_of("bound items", counted.len())?,
            from: upload(s, from).map_err(up)?,
            to: upload(s, to).map_err(up)?,
            low: upload(s, low).map_err(up)?,
            high: upload(s, high).map_err(up)?,
            item_off: upload(s, &item_off).map_err(up)?,
            word_off: upload(s, &word_off).map_err(up)?,
            host_word_off: word_off.clone(),
            elements: *item_off.last().unwrap_or(&0),
            words: words as usize,
        })
    }
}
