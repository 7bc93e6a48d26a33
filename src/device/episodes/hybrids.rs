//! Hybrid counts on the device (significance's `guided` test of extensions): many surrogate
//! trains of a few units generated there (`kernels/surrogates.cu`'s `trains_*`, the host's
//! `Surrogates::unit_train` bit for bit), and each hypothesis counted in each of them from
//! its parent's occurrence ends or earliest ends (`kernels/ends.cu`'s `hybrid_count`, the
//! host's `Ends` sweep and `EarliestEnds::count_prefixed` count for count). Only the counts
//! come back.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::{EpisodeWorker, THREADS_PER_BLOCK, upload};
use crate::device::DeviceError;
use crate::device::kernels::{ENDS, SURROGATES};
use crate::device::launch::{self, Timer};
use crate::device::worker::{Device, Ticket};

/// How a unit's surrogate trains are made on the device (the host's `SurrogateMethod`s that
/// keep a unit's spike count and need no table).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrainSurrogate {
    /// Each spike uniformly within ±Δ seconds, clamped to the span.
    Dither {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// Each spike within ±Δ seconds and at least the unit's dead time from its neighbours
    /// (even spikes first, then odd), clamped to the span.
    DitherDeadTime {
        /// Δ, seconds.
        delta_s: f64,
    },
    /// Each train by one uniform offset within ±Δ seconds, wrapped into the span.
    Shift {
        /// Δ, seconds.
        delta_s: f64,
    },
}

/// The units whose trains are replaced (the hypotheses' added units), each a **slot**.
///
/// Shapes: `unit`, `dead_time_s` `[slots]`; `offsets [slots + 1]`; `times [offsets[slots]]`
/// (each slot's original times, sorted, seconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HybridUnits {
    /// Each slot's unit: its index in the recording the surrogates are of (the Philox unit).
    pub unit: Vec<u32>,
    /// Each slot's dead time (`DitherDeadTime`), seconds.
    pub dead_time_s: Vec<f64>,
    /// CSR offsets into `times`.
    pub offsets: Vec<u32>,
    /// The slots' original times, seconds.
    pub times: Vec<f64>,
}

/// The hypotheses: each an episode whose added unit (a slot) is appended to its parent
/// (`prefixed` 0; `parent_times` the parent's occurrence ends, `parent_values` their latest
/// starts) or prepended (1; its first events that start an occurrence and their earliest
/// ends), with the new gap `(low, high]` (seconds, as `episode::ends::gap_of` gives it).
///
/// Shapes: `slot`, `prefixed`, `low`, `high` `[hyps]`; `parent_off [hyps + 1]`;
/// `parent_times`, `parent_values` `[parent_off[hyps]]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HybridHyps {
    /// Each hypothesis's added unit, a slot of [`HybridUnits`].
    pub slot: Vec<u32>,
    /// 1 where the unit is added at the start, 0 at the end.
    pub prefixed: Vec<u32>,
    /// The new gap's largest non-fitting delay, seconds.
    pub low: Vec<f64>,
    /// The new gap's largest fitting delay, seconds.
    pub high: Vec<f64>,
    /// CSR offsets into `parent_times`/`parent_values`.
    pub parent_off: Vec<u32>,
    /// Ends' times (appended) or first events' times (prepended), seconds.
    pub parent_times: Vec<f64>,
    /// Latest starts (appended) or earliest ends (prepended), seconds.
    pub parent_values: Vec<f64>,
}

/// Counts of hypotheses in hybrids: each [`HybridHyps`] hypothesis counted in surrogates
/// `surrogates` of its added unit (surrogate `j` the same train for every hypothesis adding
/// that unit), generated on the device as [`TrainSurrogate`] with Philox `key` over the
/// recording's `span` (seconds).
#[derive(Clone, Debug, PartialEq)]
pub struct HybridJob {
    /// How the trains are made.
    pub method: TrainSurrogate,
    /// Philox key (the seed's low and high words).
    pub key: [u32; 2],
    /// The recording's span `[T0, T1]`, seconds.
    pub span: (f64, f64),
    /// The surrogate indices.
    pub surrogates: Range<u64>,
    /// The added units.
    pub units: HybridUnits,
    /// The hypotheses.
    pub hyps: HybridHyps,
}

impl HybridJob {
    /// Whether every shape agrees (the kernels read nothing out of range).
    fn well_formed(&self) -> bool {
        let u = &self.units;
        let h = &self.hyps;
        let slots = u.unit.len();
        let n = h.slot.len();
        let csr = |off: &[u32], len: usize| {
            off.first() == Some(&0)
                && off.windows(2).all(|w| w[0] <= w[1])
                && off.last().is_some_and(|&l| l as usize == len)
        };
        u.dead_time_s.len() == slots
            && u.offsets.len() == slots + 1
            && csr(&u.offsets, u.times.len())
            && h.prefixed.len() == n
            && h.low.len() == n
            && h.high.len() == n
            && h.parent_off.len() == n + 1
            && h.parent_values.len() == h.parent_times.len()
            && csr(&h.parent_off, h.parent_times.len())
            && h.slot.iter().all(|&a| (a as usize) < slots)
            && h.prefixed.iter().all(|&p| p <= 1)
    }
}

/// Counts of a [`HybridJob`]: `counts [hyps × surrogates]`, hypothesis by hypothesis (row
/// `h` holds its count in each surrogate, in order), and the kernels' time.
#[derive(Clone, Debug)]
pub(crate) struct HybridCounts {
    /// The counts, row by hypothesis.
    pub counts: Vec<u32>,
    /// Kernel time measured with CUDA events, milliseconds.
    pub kernel_ms: f32,
}

/// The most train elements (f64) one launch generates: a launch covers as many surrogates
/// as fit (256 MiB of trains), so the device memory a job takes is bounded whatever its size.
const TRAIN_ELEMENTS: usize = 1 << 25;

/// The most counts (threads) one launch writes.
const COUNT_ELEMENTS: usize = 1 << 26;

impl EpisodeWorker {
    /// The counts of `job` (see [`HybridJob`]); independent of the counted stream.
    pub(crate) fn hybrid_counts(&self, job: Arc<HybridJob>) -> Ticket<HybridCounts> {
        self.worker.run(move |d| hybrid_counts(d, &job))
    }
}

/// Runs [`HybridJob`]: the slots' trains of as many surrogates as fit at once, then every
/// hypothesis counted in them, launch after launch.
fn hybrid_counts(dev: &mut Device, job: &HybridJob) -> Result<HybridCounts, DeviceError> {
    if !job.well_formed() {
        return Err(DeviceError::Unsupported("a malformed hybrid job".into()));
    }
    let s = dev.stream.clone();
    let (generate_name, rotated) = match job.method {
        TrainSurrogate::Dither { .. } => ("trains_dither", Some(0i32)),
        TrainSurrogate::Shift { .. } => ("trains_shift", Some(1i32)),
        TrainSurrogate::DitherDeadTime { .. } => ("trains_dead_time", None),
    };
    let generate = dev.function(&SURROGATES, generate_name)?;
    let sort = dev.function(&SURROGATES, "surrogate_sort_units")?;
    let count_f = dev.function(&ENDS, "hybrid_count")?;
    let delta = match job.method {
        TrainSurrogate::Dither { delta_s }
        | TrainSurrogate::Shift { delta_s }
        | TrainSurrogate::DitherDeadTime { delta_s } => delta_s,
    };
    let (up, alloc, down) = (
        launch::drv("cuMemcpyHtoD"),
        launch::drv("cuMemAlloc"),
        launch::drv("cuMemcpyDtoH"),
    );
    let hyps = job.hyps.slot.len();
    let total = usize::try_from(job.surrogates.end.saturating_sub(job.surrogates.start))
        .map_err(|_| DeviceError::Unsupported("too many hybrids in one job".into()))?;
    let mut counts = vec![0u32; hyps * total];
    if hyps == 0 || total == 0 {
        return Ok(HybridCounts {
            counts,
            kernel_ms: 0.0,
        });
    }
    let u = &job.units;
    let h = &job.hyps;
    let slots = u.unit.len();
    let per_surrogate = u.times.len().max(1);
    // Surrogates a launch covers: the trains and the counts within their bounds.
    let per = (TRAIN_ELEMENTS / per_surrogate)
        .min(COUNT_ELEMENTS / hyps)
        .clamp(1, total);
    let unit = upload(&s, &u.unit).map_err(&up)?;
    let dead = upload(&s, &u.dead_time_s).map_err(&up)?;
    let src_off = upload(&s, &u.offsets[..slots]).map_err(&up)?;
    let original = upload(&s, &u.times).map_err(&up)?;
    let slot = upload(&s, &h.slot).map_err(&up)?;
    let prefixed = upload(&s, &h.prefixed).map_err(&up)?;
    let low = upload(&s, &h.low).map_err(&up)?;
    let high = upload(&s, &h.high).map_err(&up)?;
    let parent_off = upload(&s, &h.parent_off).map_err(&up)?;
    let parent_times = upload(&s, &h.parent_times).map_err(&up)?;
    let parent_values = upload(&s, &h.parent_values).map_err(&up)?;
    let mut trains = s.alloc_zeros::<f64>(per_surrogate * per).map_err(&alloc)?;
    let mut out = s.alloc_zeros::<u32>(hyps * per).map_err(&alloc)?;
    let (t0, t1) = job.span;
    let [k0, k1] = job.key;
    let hyps_u32 = launch::u32_of("hybrid hypotheses", hyps)?;
    let mut kernel_ms = 0f32;
    let mut done = 0usize;
    while done < total {
        let n = per.min(total - done);
        let j0 = job.surrogates.start + done as u64;
        // Segment a · n + jj: slot a's surrogate j0 + jj.
        let mut seg_off = Vec::with_capacity(slots * n + 1);
        seg_off.push(0u32);
        for a in 0..slots {
            let len = u.offsets[a + 1] - u.offsets[a];
            for _ in 0..n {
                let last = *seg_off.last().unwrap_or(&0);
                seg_off.push(last + len);
            }
        }
        let elements = *seg_off.last().unwrap_or(&0);
        let segs = launch::u32_of("hybrid train segments", slots * n)?;
        let per_u32 = launch::u32_of("hybrids per launch", n)?;
        let seg_dev = upload(&s, &seg_off).map_err(&up)?;
        let timer = Timer::start(&s)?;
        if elements > 0 {
            let grid = launch::cover(elements, THREADS_PER_BLOCK);
            match rotated {
                Some(rotated) => {
                    let args = TrainsArgs {
                        seg_off: &seg_dev,
                        segs: &segs,
                        per: &per_u32,
                        src_off: &src_off,
                        unit: &unit,
                        original: &original,
                        out: &mut trains,
                        total: &elements,
                        delta: &delta,
                        t0: &t0,
                        t1: &t1,
                        j0: &j0,
                        k0: &k0,
                        k1: &k1,
                    };
                    // SAFETY: `generate` is `trains_dither` or `trains_shift`; `seg_off` holds
                    // `segs + 1` increasing offsets ending at `elements`, within `trains`
                    // (room for `per` surrogates of every slot); each segment's slot `a <
                    // slots` reads `original` from `src_off[a]` for the slot's length; threads
                    // past `elements` return first.
                    unsafe { args.launch(&s, &generate, grid) }?;
                    let args = SortArgs {
                        offsets: &seg_dev,
                        units: &segs,
                        x: &mut trains,
                        rotated: &rotated,
                    };
                    // SAFETY: `sort` is `surrogate_sort_units`; each thread sorts its own
                    // segment of `trains`.
                    unsafe { args.launch(&s, &sort, launch::cover(segs, THREADS_PER_BLOCK)) }?;
                }
                None => {
                    for parity in 0..2u32 {
                        let args = DeadTimeArgs {
                            seg_off: &seg_dev,
                            segs: &segs,
                            per: &per_u32,
                            src_off: &src_off,
                            unit: Some(&unit),
                            dead: &dead,
                            original: &original,
                            out: &mut trains,
                            total: &elements,
                            delta: &delta,
                            t0: &t0,
                            t1: &t1,
                            j0: &j0,
                            k0: &k0,
                            k1: &k1,
                            parity: &parity,
                        };
                        // SAFETY: `generate` is `trains_dead_time`; as above, and `dead` has
                        // one entry per slot. Pass 0 writes every element from `original`;
                        // pass 1 (after it on the stream) rewrites the odd ones from their
                        // even neighbours in the same segment.
                        unsafe { args.launch(&s, &generate, grid) }?;
                    }
                }
            }
        }
        let args = HybridCountArgs {
            hyps: &hyps_u32,
            per: &per_u32,
            unit: &slot,
            prefixed: &prefixed,
            low: &low,
            high: &high,
            parent_off: &parent_off,
            parent_times: &parent_times,
            parent_values: &parent_values,
            seg_off: &seg_dev,
            trains: &trains,
            count: &mut out,
        };
        let threads = launch::u32_of("hybrid counts per launch", hyps * n)?;
        // SAFETY: `count_f` is `hybrid_count`; every hypothesis's slot is below `slots`
        // (checked), so its segment `slot · per + jj` lies in `seg_off`; its parent's range
        // lies in `parent_times`/`parent_values` (checked CSR); `count` has `hyps · per`
        // elements and the grid-stride loop stops there.
        unsafe {
            args.launch(
                &s,
                &count_f,
                launch::cover(threads.max(1), THREADS_PER_BLOCK),
            )
        }?;
        kernel_ms += timer.stop(&s)?.ms()?;
        let got = s.clone_dtoh(&out).map_err(&down)?;
        for hyp in 0..hyps {
            counts[hyp * total + done..hyp * total + done + n]
                .copy_from_slice(&got[hyp * n..hyp * n + n]);
        }
        done += n;
    }
    Ok(HybridCounts { counts, kernel_ms })
}

launch::kernel_args! {
    /// The arguments of `trains_dither` and `trains_shift` (`kernels/surrogates.cu`): `(const
    /// unsigned int* seg_off, unsigned int segs, unsigned int per, const unsigned int* src_off,
    /// const unsigned int* unit, const double* original, double* out, unsigned int total,
    /// double delta, double t0, double t1, unsigned long long j0, unsigned int k0, unsigned
    /// int k1)`. Shapes: `seg_off [segs + 1]`, `src_off`/`unit` `[slots]`, `original
    /// [slot times]`, `out [total]`; `delta`, `t0`, `t1` seconds; `j0` the first surrogate.
    struct TrainsArgs<'a> {
        seg_off: &'a CudaSlice<u32>,
        segs: &'a u32,
        per: &'a u32,
        src_off: &'a CudaSlice<u32>,
        unit: &'a CudaSlice<u32>,
        original: &'a CudaSlice<f64>,
        out: &'a mut CudaSlice<f64>,
        total: &'a u32,
        delta: &'a f64,
        t0: &'a f64,
        t1: &'a f64,
        j0: &'a u64,
        k0: &'a u32,
        k1: &'a u32,
    }
}

launch::kernel_args! {
    /// The arguments of `trains_dead_time` (`kernels/surrogates.cu`): those of
    /// [`TrainsArgs`] with `const double* dead` (`[slots]`, seconds) after `unit` and
    /// `unsigned int parity` (0, then 1) last; `unit` null: each slot its own index (one
    /// surrogate of the whole counted stream, `device::episodes::surrogates`).
    pub(super) struct DeadTimeArgs<'a> {
        seg_off: &'a CudaSlice<u32>,
        segs: &'a u32,
        per: &'a u32,
        src_off: &'a CudaSlice<u32>,
        unit: Option<&'a CudaSlice<u32>>,
        dead: &'a CudaSlice<f64>,
        original: &'a CudaSlice<f64>,
        out: &'a mut CudaSlice<f64>,
        total: &'a u32,
        delta: &'a f64,
        t0: &'a f64,
        t1: &'a f64,
        j0: &'a u64,
        k0: &'a u32,
        k1: &'a u32,
        parity: &'a u32,
    }
}

launch::kernel_args! {
    /// The arguments of `surrogate_sort_units` (`kernels/surrogates.cu`) over the hybrid
    /// trains' segments: `(const unsigned int* offsets, unsigned int units, double* x, int
    /// rotated)`.
    struct SortArgs<'a> {
        offsets: &'a CudaSlice<u32>,
        units: &'a u32,
        x: &'a mut CudaSlice<f64>,
        rotated: &'a i32,
    }
}

launch::kernel_args! {
    /// The arguments of `hybrid_count` (`kernels/ends.cu`): `(unsigned hyps, unsigned per,
    /// const unsigned* unit, const unsigned* prefixed, const double* low, const double* high,
    /// const unsigned* parent_off, const double* parent_times, const double* parent_values,
    /// const unsigned* seg_off, const double* trains, unsigned* count)`. Shapes: `unit`..`high`
    /// `[hyps]` (`unit` the hypothesis's slot), `parent_off [hyps + 1]`, `seg_off [slots · per
    /// + 1]`, `count [hyps · per]`.
    struct HybridCountArgs<'a> {
        hyps: &'a u32,
        per: &'a u32,
        unit: &'a CudaSlice<u32>,
        prefixed: &'a CudaSlice<u32>,
        low: &'a CudaSlice<f64>,
        high: &'a CudaSlice<f64>,
        parent_off: &'a CudaSlice<u32>,
        parent_times: &'a CudaSlice<f64>,
        parent_values: &'a CudaSlice<f64>,
        seg_off: &'a CudaSlice<u32>,
        trains: &'a CudaSlice<f64>,
        count: &'a mut CudaSlice<u32>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::launch::kernel_params;

    /// Every launch wrapper pushes the parameters of its kernel's `.cu` signature, in order.
    #[test]
    fn wrappers_match_the_kernel_signatures() {
        for name in ["trains_dither", "trains_shift"] {
            assert_eq!(
                kernel_params(SURROGATES.source, name),
                TrainsArgs::PARAMS,
                "{name}"
            );
        }
        assert_eq!(
            kernel_params(SURROGATES.source, "trains_dead_time"),
            DeadTimeArgs::PARAMS
        );
        assert_eq!(
            kernel_params(SURROGATES.source, "surrogate_sort_units"),
            SortArgs::PARAMS
        );
        assert_eq!(
            kernel_params(ENDS.source, "hybrid_count"),
            HybridCountArgs::PARAMS
        );
    }

    /// A job whose shapes disagree is refused before any launch.
    #[test]
    fn malformed_jobs_are_found() {
        let units = HybridUnits {
            unit: vec![3],
            dead_time_s: vec![0.001],
            offsets: vec![0, 2],
            times: vec![0.1, 0.2],
        };
        let hyps = HybridHyps {
            slot: vec![0],
            prefixed: vec![0],
            low: vec![0.0],
            high: vec![0.005],
            parent_off: vec![0, 1],
            parent_times: vec![0.15],
            parent_values: vec![0.1],
        };
        let job = HybridJob {
            method: TrainSurrogate::Dither { delta_s: 0.01 },
            key: [1, 2],
            span: (0.0, 1.0),
            surrogates: 0..10,
            units,
            hyps,
        };
        assert!(job.well_formed());
        let mut bad = job.clone();
        bad.hyps.slot[0] = 1;
        assert!(!bad.well_formed(), "a slot out of range");
        let mut bad = job.clone();
        bad.units.offsets = vec![0, 3];
        assert!(!bad.well_formed(), "offsets past the times");
        let mut bad = job;
        bad.hyps.parent_values.clear();
        assert!(!bad.well_formed(), "a value per parent time");
    }
}
