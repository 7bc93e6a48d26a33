//! PreElim, PTPE and MTPE counting of a batch of candidates on the counted stream
//! (`kernels/episodes.cu`, one program per episode size): the kernels of a size loaded on
//! first use (the first [`EAGER_SIZES`] at the worker's start), PTPE's resident-thread count
//! per size, and the counting job.

use std::ops::Range;
use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice};

use super::{BatchCounts, EpisodeWorker, Episodes, THREADS_PER_BLOCK, upload};
use crate::device::DeviceError;
use crate::device::kernels::{EPISODES, MAX_GPU_NODES, MTPE_RECORDED};
use crate::device::launch::{self, Timer};
use crate::device::worker::{Device, Ticket};

/// Candidates of one length `nodes`, flattened: `types [m * nodes]`, interval ids
/// `ivs [m * (nodes - 1)]` into [`StreamData::lo`](super::StreamData::lo) and
/// [`StreamData::hi`](super::StreamData::hi).
#[derive(Clone, Debug, Default)]
pub(crate) struct CandidateBatch {
    /// Episode length N (1..=16).
    pub nodes: usize,
    /// Node types, row-major.
    pub types: Vec<u32>,
    /// Interval ids, row-major.
    pub ivs: Vec<u32>,
}

/// Which kernel counts a batch.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum EpisodeKernel {
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
    pub(crate) fn segments(&self) -> Option<&Arc<[f64]>> {
        match self {
            Self::Mtpe { segments } | Self::PreElimMtpe { segments } => Some(segments),
            Self::PreElim | Self::Ptpe => None,
        }
    }
}
impl EpisodeWorker {
    /// How many PTPE threads for episodes of `nodes` nodes the GPU runs at once:
    /// `MP × B_MP × T_B` of the paper's Eq. 2 (multiprocessors × resident blocks per
    /// multiprocessor from the occupancy calculator × [`THREADS_PER_BLOCK`]).
    /// A size above [`EAGER_SIZES`] is compiled and loaded here on first use. 0 for `nodes`
    /// outside 1..=16, or when that size's kernels cannot be loaded (the count that follows
    /// reports the error).
    #[must_use]
    pub(crate) fn ptpe_resident_threads(&self, nodes: usize) -> u64 {
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

    /// Counts candidates `range` of `batch` with `kernel` against the uploaded stream.
    pub(crate) fn count(
        &self,
        kernel: EpisodeKernel,
        batch: Arc<CandidateBatch>,
        range: Range<usize>,
    ) -> Ticket<BatchCounts> {
        self.worker.run(move |d| count(d, kernel, &batch, range))
    }
}

/// The episode kernels for one episode size N, loaded from that size's own program.
pub(super) struct SizeKernels {
    preelim: CudaFunction,
    ptpe: CudaFunction,
    /// Per machine (0: exact, 1: PreElim): the MTPE counting and merging kernels.
    mtpe_count: [CudaFunction; 2],
    mtpe_merge: [CudaFunction; 2],
    /// PTPE threads resident at once (occupancy calculator), Eq. 2's `MP × B_MP × T_B`.
    ptpe_resident: u64,
}

/// Episode sizes compiled and loaded when a worker starts (in parallel); larger ones are
/// compiled when first counted, the next size ahead in the background. Their NVRTC time grows
/// with N (tens of seconds each for N ≥ 10 on an H100 host), so a first run on a fresh host
/// pays only for the sizes it mines.
pub(crate) const EAGER_SIZES: usize = 4;

/// Compiles (cached) and loads sizes `1..=EAGER_SIZES` and returns their PTPE resident
/// threads.
pub(super) fn load_kernels(d: &mut Device) -> Result<Vec<u64>, DeviceError> {
    let sizes: Vec<u32> = (1..=EAGER_SIZES as u32).collect();
    crate::device::kernels::prepare(
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
                let _ = crate::device::kernels::image_for(&EPISODES, next, cc, driver);
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
    match kernel {
        EpisodeKernel::PreElim | EpisodeKernel::Ptpe => {
            let f = if kernel == EpisodeKernel::PreElim {
                &kernels.preelim
            } else {
                &kernels.ptpe
            };
            let args = CountArgs {
                times: &data.times,
                offsets: &data.offsets,
                lo: &data.lo,
                hi: &data.hi,
                types: &types,
                ivs: &ivs,
                n_cands: &m32,
                out: &mut out,
            };
            // SAFETY: `f` is `episodes_preelim_n{n}` or `episodes_ptpe_n{n}` of this batch's
            // size; `types` and `ivs` hold the range's m candidates of n nodes, every type and
            // interval indexes the uploaded stream's, and threads with c >= m return before
            // touching memory.
            unsafe { args.launch(s, f, cfg) }?;
        }
        EpisodeKernel::Mtpe { .. } | EpisodeKernel::PreElimMtpe { .. } => {
            let machine = usize::from(matches!(kernel, EpisodeKernel::PreElimMtpe { .. }));
            let (r, threads, bounds, seg_count, seg_first, seg_last) =
                mtpe.as_mut().expect("allocated above for MTPE");
            let (r, threads) = (*r, *threads);
            let args = MtpeCountArgs {
                times: &data.times,
                offsets: &data.offsets,
                lo: &data.lo,
                hi: &data.hi,
                types: &types,
                ivs: &ivs,
                n_cands: &m32,
                bounds,
                r_segs: &r,
                seg_count,
                seg_first,
                seg_last,
            };
            // SAFETY: `mtpe_count` is `episodes_{mtpe,preelim_mtpe}_count_n{n}`; candidates
            // as above, `bounds [r + 1]`, the segment buffers `[m * r]` (`seg_first` times
            // `MTPE_RECORDED`); threads with g / m >= r return before touching memory.
            unsafe {
                args.launch(
                    s,
                    &kernels.mtpe_count[machine],
                    launch::cover(threads, block),
                )
            }?;
            let args = MtpeMergeArgs {
                times: &data.times,
                offsets: &data.offsets,
                lo: &data.lo,
                hi: &data.hi,
                types: &types,
                ivs: &ivs,
                n_cands: &m32,
                bounds,
                r_segs: &r,
                seg_count,
                seg_first,
                seg_last,
                out: &mut out,
            };
            // SAFETY: `mtpe_merge` is `episodes_{mtpe,preelim_mtpe}_merge_n{n}`; the count
            // kernel's buffers, read only, then `out [m]`; threads with c >= m return first.
            unsafe { args.launch(s, &kernels.mtpe_merge[machine], cfg) }?;
        }
    }
    let timed = timer.stop(s)?;
    let counts = s.clone_dtoh(&out).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = timed.ms()?;
    Ok(BatchCounts { counts, kernel_ms })
}

launch::kernel_args! {
    /// The arguments of `episodes_preelim_n{N}` and `episodes_ptpe_n{N}`
    /// (`kernels/episodes.cu`): `(const double* times, const u32* offsets, const double* lo,
    /// const double* hi, const u32* types, const u32* ivs, u32 n_cands, u32* out)`. Shapes:
    /// the stream's `times [events]` and `offsets [types + 1]`, the intervals' `lo`/`hi`
    /// `[intervals]` (seconds); `types [n_cands × N]`, `ivs [n_cands × (N − 1)]`, `out
    /// [n_cands]`.
    struct CountArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        lo: &'a CudaSlice<f64>,
        hi: &'a CudaSlice<f64>,
        types: &'a CudaSlice<u32>,
        ivs: &'a CudaSlice<u32>,
        n_cands: &'a u32,
        out: &'a mut CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `episodes_mtpe_count_n{N}` and `episodes_preelim_mtpe_count_n{N}`
    /// (`kernels/episodes.cu`): [`CountArgs`]' first seven, then `(const double* bounds, u32
    /// r_segs, u32* seg_count, double* seg_first, double* seg_last)`. Shapes: `bounds [r_segs
    /// + 1]` (seconds), `seg_count`/`seg_last` `[n_cands × r_segs]`, `seg_first [n_cands ×
    /// r_segs × MTPE_RECORDED]`.
    struct MtpeCountArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        lo: &'a CudaSlice<f64>,
        hi: &'a CudaSlice<f64>,
        types: &'a CudaSlice<u32>,
        ivs: &'a CudaSlice<u32>,
        n_cands: &'a u32,
        bounds: &'a CudaSlice<f64>,
        r_segs: &'a u32,
        seg_count: &'a mut CudaSlice<u32>,
        seg_first: &'a mut CudaSlice<f64>,
        seg_last: &'a mut CudaSlice<f64>,
    }
}

launch::kernel_args! {
    /// The arguments of `episodes_mtpe_merge_n{N}` and `episodes_preelim_mtpe_merge_n{N}`
    /// (`kernels/episodes.cu`): [`MtpeCountArgs`]' with the segment buffers read only (`const
    /// u32* seg_count, const double* seg_first, const double* seg_last`), then `u32* out`
    /// `[n_cands]`.
    struct MtpeMergeArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        lo: &'a CudaSlice<f64>,
        hi: &'a CudaSlice<f64>,
        types: &'a CudaSlice<u32>,
        ivs: &'a CudaSlice<u32>,
        n_cands: &'a u32,
        bounds: &'a CudaSlice<f64>,
        r_segs: &'a u32,
        seg_count: &'a CudaSlice<u32>,
        seg_first: &'a CudaSlice<f64>,
        seg_last: &'a CudaSlice<f64>,
        out: &'a mut CudaSlice<u32>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::kernels::EPISODES;
    use crate::device::launch::kernel_params;

    /// Every launch wrapper pushes the parameters of its kernel's `.cu` signature, in order.
    #[test]
    fn wrappers_match_the_kernel_signatures() {
        assert_eq!(
            kernel_params(EPISODES.source, "episodes_preelim_n##NN"),
            CountArgs::PARAMS,
            "episodes_preelim_n##NN"
        );
        assert_eq!(
            kernel_params(EPISODES.source, "episodes_ptpe_n##NN"),
            CountArgs::PARAMS,
            "episodes_ptpe_n##NN"
        );
        assert_eq!(
            kernel_params(EPISODES.source, "episodes_##NAME##_count_n##NN"),
            MtpeCountArgs::PARAMS,
            "episodes_##NAME##_count_n##NN"
        );
        assert_eq!(
            kernel_params(EPISODES.source, "episodes_##NAME##_merge_n##NN"),
            MtpeMergeArgs::PARAMS,
            "episodes_##NAME##_merge_n##NN"
        );
    }
}
