//! Episode jobs for a device thread, one file per kernel family; `episode::gpu` and
//! `significance::gpu` drive them.
//!
//! An [`EpisodeWorker`] is a [`GpuWorker`] with the episode kernels loaded (PreElim, PTPE and
//! the MTPE counting and merging kernels for every episode length 1..=16, each length its own
//! program, the first [`EAGER_SIZES`] compiled and loaded at start, longer ones on first use,
//! each with PTPE's resident-thread count). This file holds the worker, the counted stream
//! (uploaded once per mining run or window; the uploaded times kept as the original that
//! surrogates are generated from) and what the families share (the episode slot, the
//! upload helper, [`BatchCounts`], the `Csr` view of a stream grouped by type). The
//! families, each with its jobs and their launches:
//!
//! * [`count`] (`kernels/episodes.cu`): PreElim, PTPE and MTPE counting of a
//!   [`CandidateBatch`];
//! * [`ends`] (`kernels/ends.cu`): exact counts from the prefixes' occurrence ends
//!   ([`EndsJob`]);
//! * [`bounds`] (`kernels/bounds.cu`): the threshold search's join bounds ([`BoundJob`]);
//! * [`surrogates`] (`kernels/surrogates.cu`): surrogates generated from the uploaded
//!   recording ([`SurrogateJob`]);
//! * [`hybrids`] (`kernels/surrogates.cu` and `kernels/ends.cu`): many surrogate trains of a
//!   few units, and hypotheses counted in them from their parents' ends ([`HybridJob`],
//!   significance's `guided` test);
//! * [`floor`] (`kernels/ends.cu` and `kernels/bounds.cu` over a batch of surrogates laid
//!   side by side): the `spectrum` search's one-floor pass ([`FloorJob`]) and a list's counts
//!   in every surrogate of a batch ([`BatchCountJob`]).
//!
//! Replies carry only counts (or bounds) back.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::kernels::MAX_GPU_NODES;
use super::launch;
use super::worker::{Device, GpuWorker, Ticket};
use super::{DeviceError, DeviceInfo};

pub(crate) mod bounds;
pub(crate) mod count;
pub(crate) mod ends;
pub(crate) mod floor;
pub(crate) mod hybrids;
pub(crate) mod surrogates;

pub(crate) use bounds::BoundJob;
pub(crate) use count::{CandidateBatch, EpisodeKernel};
pub(crate) use ends::{EndsJob, EndsLevel};
pub(crate) use floor::{BatchCountJob, FloorGap, FloorJob, FloorResult};
pub(crate) use hybrids::{HybridHyps, HybridJob, HybridUnits, TrainSurrogate};
pub(crate) use surrogates::{DeviceSurrogate, SurrogateJob};

/// The event stream as the kernels read it: grouped by type (CSR) plus the interval table.
///
/// Shapes: `offsets [types + 1]`, `times [events]` (seconds), `lo [intervals]`,
/// `hi [intervals]` (seconds). The kernels merge a candidate's types by time; counts do not
/// depend on the order of equal-time events, so stream positions are not needed.
#[derive(Clone, Debug, Default)]
pub(crate) struct StreamData {
    /// CSR offsets into `times`/`positions` per event type.
    pub offsets: Vec<u32>,
    /// Event times grouped by type, seconds.
    pub times: Vec<f64>,
    /// Interval lower bounds, seconds.
    pub lo: Vec<f64>,
    /// Interval upper bounds, seconds.
    pub hi: Vec<f64>,
}

/// Counts of one batch from one GPU.
#[derive(Clone, Debug)]
pub(crate) struct BatchCounts {
    /// One count per candidate of the range; `COUNT_OVERFLOW` (`kernels.rs`) marks a PTPE
    /// overflow.
    pub counts: Vec<u32>,
    /// Kernel time measured with CUDA events, milliseconds.
    pub kernel_ms: f32,
}

/// What the upload of a stream cost.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamReport {
    /// Bytes uploaded.
    pub bytes: usize,
    /// Device memory in use after the upload (total − free), bytes.
    pub device_used: usize,
}

/// Threads per block of every episode kernel (the paper's `T_B`).
pub(crate) const THREADS_PER_BLOCK: u32 = 128;

/// A device thread with the episode kernels loaded: what `episode::GpuCounter` counts on.
pub(crate) struct EpisodeWorker {
    worker: GpuWorker,
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
    pub(crate) fn start(
        ordinal: usize,
        slot: usize,
        pin_core: Option<usize>,
    ) -> Result<Self, DeviceError> {
        let worker = GpuWorker::start(ordinal, slot, pin_core)?;
        let mut ptpe_resident: Vec<Option<u64>> = worker
            .run(count::load_kernels)
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
    pub(crate) fn info(&self) -> &DeviceInfo {
        self.worker.info()
    }

    /// The thread's name.
    #[must_use]
    pub(crate) fn name(&self) -> &str {
        self.worker.name()
    }

    /// Uploads the event stream, replacing any previous one.
    pub(crate) fn load_stream(&self, data: Arc<StreamData>) -> Ticket<StreamReport> {
        self.worker.run(move |d| load(d, &data))
    }

    /// The counted stream's times, grouped by type (for tests: a generated surrogate against
    /// the host's). Shape `[events]`.
    pub(crate) fn stream_times(&self) -> Ticket<Vec<f64>> {
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

/// The episode slot of a device thread: the kernels loaded so far (index N − 1, see
/// [`count`]) and the uploaded stream.
#[derive(Default)]
struct Episodes {
    kernels: Vec<Option<count::SizeKernels>>,
    data: Option<DeviceStream>,
}

/// Uploads `d` as the counted stream (and its times again as the original that surrogates
/// are generated from), replacing any previous one.
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

/// A stream on the device grouped by type, as the ends and bounds kernels read it: times
/// `[events]` (seconds), offsets `[types + 1]`, and the offsets on the host.
struct Csr<'a> {
    times: &'a CudaSlice<f64>,
    offsets: &'a CudaSlice<u32>,
    host_offsets: &'a [u32],
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
