//! Surrogates of the uploaded recording generated on the device in place of the counted
//! stream (`kernels/surrogates.cu`): the same draws and arithmetic as the host's, so the same
//! times bit for bit, and no upload.

use cudarc::driver::PushKernelArg;

use super::{EpisodeWorker, Episodes, THREADS_PER_BLOCK};
use crate::device::DeviceError;
use crate::device::kernels::SURROGATES;
use crate::device::launch;
use crate::device::worker::{Device, Ticket};

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
impl EpisodeWorker {
    /// Replaces the counted stream by surrogate `job` of the recording uploaded last by
    /// [`EpisodeWorker::load_stream`] (kept on the device), generated there: no upload.
    pub fn load_surrogate(&self, job: SurrogateJob) -> Ticket<()> {
        self.worker.run(move |d| surrogate(d, job))
    }
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
