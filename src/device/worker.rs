//! A named, core-pinned host thread for one GPU that submits all of its user's work to that
//! GPU (paper §6.2: one host thread per device) and runs jobs, in order, over a bounded
//! crossbeam channel.
//!
//! Who holds what: [`GpuWorker::start`]'s thread retains the GPU's *primary* context
//! (`CudaContext::new`), so every worker on one GPU (the workers of each `GpuCounter`, the
//! significance engine's 4 to 32 counters among them, and `device::shared_worker`'s one per
//! GPU) shares one CUDA context; what is private to a worker is its thread, its handle of the
//! context, its stream, its loaded modules and its buffers, none of which leaves the thread.
//! Each worker submits to a stream of its own (non-blocking, made at its start), so the work
//! of different workers on one GPU may overlap on the device, and a worker's stream
//! synchronisation waits for its own work only; within a worker, jobs and their launches and
//! copies run in order.
//!
//! The worker knows no domain. A job is a closure run on the device thread with its
//! `Device`: the context, the stream, the modules loaded so far (each kernel file compiled
//! and loaded on first use) and typed scratch slots (`Device::slot`) in which each domain
//! module (`device::episodes`, `device::motif`, …) keeps its own private buffers between jobs.
//! Domain modules import this one; this one imports none of them.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream};
use cudarc::nvrtc::Ptx;

use crate::device::kernels::{self, KernelFile};
use crate::device::{DeviceError, DeviceInfo};

/// A job: a closure run on the device thread.
type Job = Box<dyn FnOnce(&mut Device) + Send>;

/// A handle to one device thread. Dropping it closes the job channel and joins the thread.
pub struct GpuWorker {
    info: DeviceInfo,
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
    /// workers), pins it to core `pin_core` when given and creates the CUDA context there.
    /// Returns once the thread is ready. Kernel files are compiled and loaded by the jobs that
    /// use them (`device::episodes::EpisodeWorker` loads the episode kernels at its start).
    ///
    /// # Errors
    /// [`DeviceError::NoDriver`], [`DeviceError::InvalidOrdinal`], or any [`DeviceError`] of
    /// context creation.
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
        let (ready_tx, ready_rx) = bounded::<Result<DeviceInfo, DeviceError>>(1);
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
                        let _ = ready_tx.send(Ok(device.info.clone()));
                        device.serve(&jobs_rx);
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })
            .map_err(|e| DeviceError::Driver { call: "spawning the device thread", message: e.to_string() })?;
        let info = ready_rx
            .recv()
            .map_err(|_| DeviceError::WorkerGone(name.clone()))??;
        Ok(Self {
            info,
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

    /// Runs `f` on the device thread with its [`Device`] and returns its result: the way the
    /// domain device modules (`device::episodes`, `device::motif`, ...) submit their jobs.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Device) -> Result<T, DeviceError> + Send + 'static,
    ) -> Ticket<T> {
        let (reply, rx) = bounded(1);
        let job: Job = Box::new(move |device: &mut Device| {
            let _ = reply.send(f(device));
        });
        if let Some(jobs) = &self.jobs {
            // A send error means the thread is gone; the ticket then reports WorkerGone.
            let _ = jobs.send(job);
        }
        Ticket {
            rx,
            worker: self.name.clone(),
        }
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

/// Thread-local state of a device thread: context, stream, loaded modules and the domains'
/// scratch slots.
pub(crate) struct Device {
    pub(crate) info: DeviceInfo,
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) stream: Arc<CudaStream>,
    /// Modules of the kernel files, loaded on first use.
    /// Loaded modules by (kernel file, variant).
    modules: HashMap<(&'static str, u32), Arc<CudaModule>>,
    /// The domains' scratch ([`Device::slot`]).
    slots: Slots,
    /// Background work started by this device thread (kernel compilation ahead of use,
    /// [`Device::in_background`]), joined when the device closes: a process must not exit
    /// while NVRTC runs on another thread (its teardown then crashes).
    background: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Device {
    fn drop(&mut self) {
        for h in self.background.drain(..) {
            let _ = h.join();
        }
    }
}

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
        // This handle's buffers are allocated, used and freed on `stream` only (every job
        // runs on this thread with this `Device`), so the stream's order already orders every
        // use: cudarc's per-buffer events (made for one handle driving several streams) would
        // only add driver calls. Off before the stream is made, so no buffer ever has them.
        // SAFETY: no buffer of this handle is used on another stream, written by two streams
        // or freed while another stream uses it (cudarc's conditions): there is one stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx
            .new_stream()
            .map_err(|e| DeviceError::driver("cuStreamCreate", e))?;
        Ok(Self {
            info,
            ctx,
            stream,
            modules: HashMap::new(),
            slots: Slots::default(),
            background: Vec::new(),
        })
    }

    /// Runs `work` on a new thread, joined before this device closes (finished handles are
    /// reaped here).
    pub(crate) fn in_background(&mut self, work: impl FnOnce() + Send + 'static) {
        self.background.retain(|h| !h.is_finished());
        self.background.push(std::thread::spawn(work));
    }

    /// The module of one variant of `file` ([`kernels::image_for`]), loaded on first use.
    pub(crate) fn module_variant(
        &mut self,
        file: &KernelFile,
        variant: u32,
    ) -> Result<Arc<CudaModule>, DeviceError> {
        if let Some(m) = self.modules.get(&(file.name, variant)) {
            return Ok(m.clone());
        }
        let image = kernels::image_for(
            file,
            variant,
            self.info.compute_capability,
            self.info.driver_version,
        )?;
        let started = std::time::Instant::now();
        let m = self
            .ctx
            .load_module(Ptx::from_binary(image.as_ref().clone()))
            .map_err(|e| DeviceError::Load {
                what: file.name.into(),
                message: e.to_string(),
            })?;
        tracing::debug!(
            kernel = file.name,
            variant,
            seconds = started.elapsed().as_secs_f64(),
            "Loaded module."
        );
        self.modules.insert((file.name, variant), m.clone());
        Ok(m)
    }

    /// Function `name` of kernel file `file`, compiling (cached) and loading the module on
    /// first use.
    pub(crate) fn function(
        &mut self,
        file: &KernelFile,
        name: &str,
    ) -> Result<CudaFunction, DeviceError> {
        self.function_in(file, 0, name)
    }

    /// Function `name` of one variant of `file` ([`Device::module_variant`]).
    pub(crate) fn function_in(
        &mut self,
        file: &KernelFile,
        variant: u32,
        name: &str,
    ) -> Result<CudaFunction, DeviceError> {
        self.module_variant(file, variant)?
            .load_function(name)
            .map_err(|e| DeviceError::Load {
                what: name.into(),
                message: e.to_string(),
            })
    }

    /// The device thread's value of type `T`, created by `T::default()` on first use and kept
    /// for the life of the thread: where a domain keeps its buffers between jobs. Each domain
    /// keys its slots by types private to it, so no other module can reach them.
    pub(crate) fn slot<T: Default + 'static>(&mut self) -> &mut T {
        self.slots.get()
    }

    fn serve(mut self, jobs: &Receiver<Job>) {
        while let Ok(job) = jobs.recv() {
            job(&mut self);
        }
    }
}

/// A type map: at most one value of each type, created by `Default` on first use.
#[derive(Default)]
struct Slots(HashMap<TypeId, Box<dyn Any>>);

impl Slots {
    /// The value of type `T`, created on first use.
    fn get<T: Default + 'static>(&mut self) -> &mut T {
        self.0
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(T::default()))
            .downcast_mut::<T>()
            .expect("a slot holds the type it is keyed by")
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    #[test]
    fn slots_keep_one_value_per_type() {
        #[derive(Default)]
        struct A(Vec<u32>);
        #[derive(Default)]
        struct B(Option<u64>);
        let mut slots = Slots::default();
        assert!(slots.get::<A>().0.is_empty());
        slots.get::<A>().0.push(7);
        *slots.get::<Option<B>>() = Some(B(Some(3)));
        slots.get::<B>().0 = Some(9);
        assert_eq!(slots.get::<A>().0, [7]);
        assert_eq!(slots.get::<Option<B>>().as_ref().and_then(|b| b.0), Some(3));
        assert_eq!(slots.get::<B>().0, Some(9));
    }
}
