//! The device layer: the only code that touches `cudarc`.
//!
//! * [`probe`] finds GPUs without ever letting cudarc panic: it checks that the driver library
//!   (`libcuda`) and NVRTC can be loaded before the first cudarc call.
//! * [`choice`] is `--device auto|cpu|gpu` ([`DeviceChoice`], with a GPU ordinal
//!   [`DeviceTarget`]) and the one start-or-fall-back policy every domain applies to it
//!   ([`resolve`]).
//! * [`worker::GpuWorker`] is a named host thread for one GPU, pinned to a core, that retains
//!   the GPU's primary context once and keeps its handle (with its stream, the modules loaded
//!   so far and the domains' scratch slots) for the life of its user, running jobs over
//!   crossbeam channels (paper §6.2: one host thread submits a device's work). It knows no
//!   domain. Several workers may share one GPU's primary context (every `GpuCounter` has its
//!   own worker per GPU, `shared_worker` one per GPU); each submits only from its own thread,
//!   to a non-blocking stream of its own, so workers overlap on the device (the `worker`
//!   module documentation says who creates and holds what).
//! * The domain modules submit their jobs to it: `episodes` (`EpisodeWorker`, one file per
//!   kernel family: the episode counters, ends, bounds, surrogates, and
//!   `episodes::floor`, the `spectrum` search's one-floor pass over a batch of surrogates),
//!   `motif`, `search`, `shapelet`, [`softdtw`]. They take plain data and
//!   share the launch plumbing (grids, CUDA-event timing); none imports a type of the domain
//!   it serves.
//! * `kernels` embeds `kernels/*.cu`, compiles them with NVRTC for each device's
//!   architecture, and caches the PTX per process and on disk.
//!
//! Nothing above this module knows about CUDA types: callers see [`DeviceInfo`],
//! [`DeviceError`] and plain host vectors.

pub mod choice;
pub(crate) mod episodes;
pub mod error;
pub(crate) mod kernels;
mod launch;
pub(crate) mod motif;
pub(crate) mod search;
pub(crate) mod shapelet;
pub mod softdtw;
pub mod worker;

pub use choice::{DeviceChoice, DeviceTarget, resolve};
pub(crate) use episodes::{
    BatchCountJob, CandidateBatch, DeviceSurrogate, EndsJob, EndsLevel, EpisodeKernel,
    EpisodeWorker, FloorGap, FloorJob, FloorResult, HybridHyps, HybridJob, HybridUnits, StreamData,
    StreamReport, SurrogateJob, TrainSurrogate,
};
pub use error::DeviceError;
pub use kernels::MAX_GPU_NODES;
pub use worker::{GpuWorker, Ticket};

use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys::CUdevice_attribute;

/// What [`probe`] reports about one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Marketing name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// Compute capability (major, minor), e.g. (9, 0).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory, bytes.
    pub total_memory: usize,
    /// Driver version as reported by `cuDriverGetVersion` (e.g. 13000 for CUDA 13.0).
    pub driver_version: i32,
}

/// True when the CUDA driver library and NVRTC can be loaded. Never panics.
#[must_use]
pub fn libraries_present() -> bool {
    // SAFETY: these only try to dlopen the libraries by name; no CUDA call is made.
    unsafe { cudarc::driver::sys::is_culib_present() && cudarc::nvrtc::sys::is_culib_present() }
}

/// Lists the GPUs of this host.
///
/// # Errors
/// [`DeviceError::NoDriver`] when `libcuda` or NVRTC cannot be loaded (no GPU host),
/// [`DeviceError::NoDevices`] when the driver reports zero devices, [`DeviceError::Driver`]
/// for a failing driver call.
pub fn probe() -> Result<Vec<DeviceInfo>, DeviceError> {
    if !libraries_present() {
        return Err(DeviceError::NoDriver);
    }
    let count =
        CudaContext::device_count().map_err(|e| DeviceError::driver("cuDeviceGetCount", e))?;
    if count <= 0 {
        return Err(DeviceError::NoDevices);
    }
    let driver_version = driver_version()?;
    (0..count as usize)
        .map(|ordinal| {
            let ctx =
                CudaContext::new(ordinal).map_err(|e| DeviceError::driver("cuCtxCreate", e))?;
            info_of(&ctx, driver_version)
        })
        .collect()
}

fn driver_version() -> Result<i32, DeviceError> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: the driver library is loaded (checked by the caller); `v` is a valid out pointer.
    let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
    r.result()
        .map_err(|e| DeviceError::driver("cuDriverGetVersion", e))?;
    Ok(v)
}

pub(crate) fn info_of(
    ctx: &std::sync::Arc<CudaContext>,
    driver_version: i32,
) -> Result<DeviceInfo, DeviceError> {
    let d = |what: &'static str| move |e| DeviceError::driver(what, e);
    Ok(DeviceInfo {
        ordinal: ctx.ordinal(),
        name: ctx.name().map_err(d("cuDeviceGetName"))?,
        compute_capability: ctx
            .compute_capability()
            .map_err(d("cuDeviceGetAttribute"))?,
        multiprocessors: ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(d("cuDeviceGetAttribute"))? as u32,
        total_memory: ctx.total_mem().map_err(d("cuDeviceTotalMem"))?,
        driver_version,
    })
}

/// A process-wide device thread, locked for the caller's exclusive use.
pub type SharedWorker = parking_lot::ArcMutexGuard<parking_lot::RawMutex, GpuWorker>;

type Pool =
    parking_lot::Mutex<std::collections::BTreeMap<usize, Arc<parking_lot::Mutex<GpuWorker>>>>;

/// The process-wide device thread of GPU `ordinal` (`None`: the first GPU), started on first
/// use and kept, with its context, compiled modules and buffers, for the life of the process,
/// so repeated stage calls (motif searches, soft-DTW batches, pipeline windows) pay the
/// context creation and NVRTC once. The guard gives its holder the thread to itself: a
/// second caller waits until the first drops it.
///
/// # Errors
/// [`probe`]'s errors, [`DeviceError::InvalidOrdinal`], or the worker's start errors.
pub fn shared_worker(ordinal: Option<usize>) -> Result<SharedWorker, DeviceError> {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(Default::default);
    let mut map = pool.lock();
    let key = match ordinal {
        Some(o) => o,
        None => match map.keys().next() {
            Some(&o) => o,
            None => probe()?.first().ok_or(DeviceError::NoDevices)?.ordinal,
        },
    };
    let slot = match map.get(&key) {
        Some(w) => w.clone(),
        None => {
            let w = Arc::new(parking_lot::Mutex::new(GpuWorker::start(key, 0, None)?));
            map.insert(key, w.clone());
            w
        }
    };
    drop(map);
    Ok(parking_lot::Mutex::lock_arc(&slot))
}
