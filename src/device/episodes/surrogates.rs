//! Surrogates of the uploaded recording generated on the device in place of the counted
//! stream (`kernels/surrogates.cu`): the same draws and arithmetic as the host's, so the same
//! times bit for bit, and no upload.

use cudarc::driver::CudaSlice;

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
    pub(crate) fn load_surrogate(&self, job: SurrogateJob) -> Ticket<()> {
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
