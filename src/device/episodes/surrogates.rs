//! Surrogates of the uploaded recording generated on the device in place of the counted
//! stream (`kernels/surrogates.cu`): the same draws and arithmetic as the host's, so the same
//! times bit for bit, and no upload.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::hybrids::DeadTimeArgs;
use super::{EpisodeWorker, Episodes, THREADS_PER_BLOCK};
use crate::device::DeviceError;
use crate::device::kernels::SURROGATES;
use crate::device::launch;
use crate::device::worker::{Device, Ticket};

/// A surrogate of the uploaded recording for the device to generate in place of the counted
/// stream (`kernels/surrogates.cu`): the same draws and arithmetic as the host's
/// `significance::Surrogates::unit_train`, so the same times bit for bit.
#[derive(Clone, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub enum DeviceSurrogate {
    /// Each spike uniformly within ±Δ seconds, clamped to the span.
    Dither {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// Each spike within ±Δ seconds and at least its unit's dead time from its neighbours
    /// (even spikes first, then odd; `kernels/surrogates.cu`'s `trains_dead_time` over the
    /// whole recording), clamped to the span.
    DitherDeadTime {
        /// Δ, seconds.
        delta_s: f64,
        /// Each unit's dead time, seconds. Shape `[units]`.
        dead_time_s: Arc<[f64]>,
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
    pub(crate) fn load_surrogate(&self, job: SurrogateJob) -> Ticket<()> {
        self.worker.run(move |d| surrogate(d, &job))
    }
}

/// Generates surrogate `job` of the kept recording into the counted times.
fn surrogate(dev: &mut Device, job: &SurrogateJob) -> Result<(), DeviceError> {
    if let DeviceSurrogate::DitherDeadTime {
        delta_s,
        dead_time_s,
    } = &job.method
    {
        return dead_time_surrogate(dev, job, *delta_s, dead_time_s);
    }
    let s = dev.stream.clone();
    let (name, delta_s, rotated) = match job.method {
        DeviceSurrogate::Dither { delta_s } => ("surrogate_dither", delta_s, 0i32),
        DeviceSurrogate::Shift { delta_s } => ("surrogate_shift", delta_s, 1i32),
        DeviceSurrogate::DitherDeadTime { .. } => unreachable!("handled above"),
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
    let args = GenerateArgs {
        offsets: &data.offsets,
        units: &units,
        original: &data.original,
        out: &mut data.times,
        events: &data.events,
        delta: &delta_s,
        t0: &t0,
        t1: &t1,
        s: &job.surrogate,
        k0: &k0,
        k1: &k1,
    };
    // SAFETY: `generate` is `surrogate_dither` or `surrogate_shift`; `original` and `out`
    // hold the stream's `events` times, `offsets` its units' ranges, and threads with
    // e >= events return before touching memory.
    unsafe { args.launch(&s, &generate, launch::cover(data.events, THREADS_PER_BLOCK)) }?;
    let args = SortUnitsArgs {
        offsets: &data.offsets,
        units: &units,
        x: &mut data.times,
        rotated: &rotated,
    };
    // SAFETY: `sort` is `surrogate_sort_units`; each thread touches only its unit's range of
    // the stream's times.
    unsafe { args.launch(&s, &sort, launch::cover(units, THREADS_PER_BLOCK)) }?;
    s.synchronize().map_err(drv("cuStreamSynchronize"))
}

/// `dither-dead-time` surrogate `job` of the kept recording into the counted times:
/// `trains_dead_time` with one segment per unit (`per` 1, the recording's offsets, the
/// unit's own index as its Philox unit), passes 0 then 1.
fn dead_time_surrogate(
    dev: &mut Device,
    job: &SurrogateJob,
    delta_s: f64,
    dead_time_s: &[f64],
) -> Result<(), DeviceError> {
    let s = dev.stream.clone();
    let generate = dev.function(&SURROGATES, "trains_dead_time")?;
    let data = dev.slot::<Episodes>().data.as_mut().ok_or_else(|| {
        DeviceError::Unsupported("a surrogate before the stream was loaded".into())
    })?;
    let units = data.offsets.len() - 1;
    if dead_time_s.len() != units {
        return Err(DeviceError::Unsupported(format!(
            "{} dead times for a recording of {units} units",
            dead_time_s.len()
        )));
    }
    if data.events == 0 {
        return Ok(());
    }
    let segs = launch::u32_of("units", units)?;
    let dead = super::upload(&s, dead_time_s).map_err(launch::drv("cuMemcpyHtoD"))?;
    let (t0, t1) = job.span;
    let [k0, k1] = job.key;
    for parity in 0..2u32 {
        let args = DeadTimeArgs {
            seg_off: &data.offsets,
            segs: &segs,
            per: &1,
            src_off: &data.offsets,
            unit: None,
            dead: &dead,
            original: &data.original,
            out: &mut data.times,
            total: &data.events,
            delta: &delta_s,
            t0: &t0,
            t1: &t1,
            j0: &job.surrogate,
            k0: &k0,
            k1: &k1,
            parity: &parity,
        };
        // SAFETY: `generate` is `trains_dead_time`; `offsets` holds the units' ranges of
        // `original` and of the counted times (the same layout), `dead` one entry per unit;
        // with `unit` null each segment's unit is its own index; threads past `events` return
        // first; pass 1 runs after pass 0 on the stream.
        unsafe { args.launch(&s, &generate, launch::cover(data.events, THREADS_PER_BLOCK)) }?;
    }
    s.synchronize().map_err(launch::drv("cuStreamSynchronize"))
}

launch::kernel_args! {
    /// The arguments of `surrogate_dither` and `surrogate_shift` (`kernels/surrogates.cu`):
    /// `(const unsigned int* offsets, unsigned int units, const double* original, double* out,
    /// unsigned int events, double delta, double t0, double t1, unsigned long long s,
    /// unsigned int k0, unsigned int k1)`. Shapes: `offsets [units + 1]`, `original`/`out`
    /// `[events]` (seconds); `delta`, `t0`, `t1` seconds; `s` the surrogate, `k0`/`k1` the
    /// Philox key.
    struct GenerateArgs<'a> {
        offsets: &'a CudaSlice<u32>,
        units: &'a u32,
        original: &'a CudaSlice<f64>,
        out: &'a mut CudaSlice<f64>,
        events: &'a u32,
        delta: &'a f64,
        t0: &'a f64,
        t1: &'a f64,
        s: &'a u64,
        k0: &'a u32,
        k1: &'a u32,
    }
}

launch::kernel_args! {
    /// The arguments of `surrogate_sort_units` (`kernels/surrogates.cu`): `(const unsigned
    /// int* offsets, unsigned int units, double* x, int rotated)`. Shapes: `offsets [units +
    /// 1]`, `x [events]`.
    struct SortUnitsArgs<'a> {
        offsets: &'a CudaSlice<u32>,
        units: &'a u32,
        x: &'a mut CudaSlice<f64>,
        rotated: &'a i32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::kernels::SURROGATES;
    use crate::device::launch::kernel_params;

    /// Every launch wrapper pushes the parameters of its kernel's `.cu` signature, in order.
    #[test]
    fn wrappers_match_the_kernel_signatures() {
        assert_eq!(
            kernel_params(SURROGATES.source, "surrogate_dither"),
            GenerateArgs::PARAMS,
            "surrogate_dither"
        );
        assert_eq!(
            kernel_params(SURROGATES.source, "surrogate_shift"),
            GenerateArgs::PARAMS,
            "surrogate_shift"
        );
        assert_eq!(
            kernel_params(SURROGATES.source, "surrogate_sort_units"),
            SortUnitsArgs::PARAMS,
            "surrogate_sort_units"
        );
    }
}
