//! Soft-DTW jobs for a device thread (`kernels/softdtw.cu`); `softdtw::gpu` drives them.
//!
//! A batch uploads two sets of series (f32, concatenated, time-major), launches one
//! persistent kernel (one warp per pair) and downloads the values and, with gradients, the
//! per-series gradient sums. Per-warp scratch (strip boundary row; with gradients the stored
//! forward values or soft-min weights of one pair) stays allocated on the device thread
//! between batches, so its size is `resident warps × one pair`, never `pairs × N × M`. A long pair runs as tiles, one
//! launch per tile anti-diagonal.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::DeviceError;
use super::kernels::SOFTDTW;
use super::launch::{self, Timer, drv, u32_of};
use super::worker::{Device, GpuWorker, Ticket};

/// Threads per block of the batch and tile kernels (4 warps); the gradient kernels' launch
/// bounds (`SDTW_GRAD_BLOCK` in `kernels/softdtw.cu`) assume it.
const BLOCK: u32 = 128;
/// Columns per tile of the long-pair kernel (rows per tile: 32 × 8 = 256).
pub(crate) const TILE_COLS: usize = 256;
/// Rows a lane owns in the long-pair kernel.
const TILE_ROWS: usize = 8;
/// The largest per-warp scratch (bytes) a gradient batch may ask for; longer pairs are the
/// caller's to split or run on the CPU.
pub const MAX_WARP_SCRATCH: usize = 256 << 20;

/// A set of series in the layout the kernels read: values `[Σ len × dims]` (f32,
/// time-major, concatenated) and offsets `[count + 1]` in time steps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SeriesSet {
    /// Concatenated values.
    pub values: Vec<f32>,
    /// Start of each series in time steps; `offsets[count]` is the total length.
    pub offsets: Vec<u32>,
}

impl SeriesSet {
    /// Number of series.
    #[must_use]
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True when the set holds no series.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The longest series, in time steps.
    #[must_use]
    pub(crate) fn max_len(&self) -> usize {
        self.offsets
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .max()
            .unwrap_or(0)
    }
}

/// Which pairs a batch computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairMode {
    /// Every `(a[i], b[j])`, pair `p = i · |b| + j`; gradients summed per series.
    AllPairs,
    /// `(a[i], b[i])`; gradients per pair.
    Paired,
}

/// One batch: the sets, the pairs, γ, the band, and whether gradients are wanted.
#[derive(Clone, Debug)]
pub struct SoftDtwBatch {
    /// First set.
    pub a: SeriesSet,
    /// Second set (same channel count).
    pub b: SeriesSet,
    /// Channels per time step.
    pub dims: usize,
    /// Which pairs.
    pub mode: PairMode,
    /// Smoothing γ > 0.
    pub gamma: f64,
    /// Sakoe-Chiba half-width (`softdtw::Band`'s rule); `None`: no band.
    pub band: Option<usize>,
    /// Compute gradients too.
    pub gradient: bool,
}

/// What a batch returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SoftDtwOutput {
    /// One value per pair, in the inputs' units.
    pub values: Vec<f64>,
    /// Gradient with respect to `a`, shaped like `a.values` (all pairs: summed over `b`).
    pub grad_a: Vec<f32>,
    /// Gradient with respect to `b`, shaped like `b.values`.
    pub grad_b: Vec<f32>,
    /// Kernel time, milliseconds (CUDA events).
    pub kernel_ms: f64,
}

fn align(b: usize) -> usize {
    (b + 15) & !15
}

/// Lane rows for series of at most `n` steps: the smallest of 1, 2, 4, 8 with one strip,
/// else 8 (several strips).
fn rows_for(n: usize) -> usize {
    [1, 2, 4, 8].into_iter().find(|&r| n <= 32 * r).unwrap_or(8)
}

/// Bytes of one warp's scratch (the layout of `sdtw_batch` in `kernels/softdtw.cu`).
fn warp_scratch(
    acc: usize,
    rows: usize,
    m_max: usize,
    n_max: usize,
    dims: usize,
    grad: bool,
) -> usize {
    let strips = n_max.div_ceil(32 * rows).max(1);
    let mut b = align((m_max + 1) * acc) + align(2 * acc);
    if grad {
        // Soft-min weights (8 bytes a cell) or, on the marginal path, forward values as
        // fixed-point offsets plus one base per lane and step (4 (rows + 1) / rows bytes a cell).
        b += align(strips * (m_max + 31) * 32 * rows * 8);
        b += align(m_max * 8);
        b += align(m_max * dims * 4);
        b += align(strips * 32 * rows * dims * 4);
    }
    align(b)
}

/// Bytes of per-warp scratch a gradient batch over series of these lengths needs.
#[must_use]
pub(crate) fn gradient_scratch(n_max: usize, m_max: usize, dims: usize) -> usize {
    warp_scratch(8, rows_for(n_max), m_max, n_max, dims, true)
}

/// Device buffers kept between soft-DTW jobs (the device thread's `SoftDtwBuffers` slot).
#[derive(Default)]
struct SoftDtwBuffers {
    scratch: Option<CudaSlice<u8>>,
}

fn i64_of(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn i32_of(what: &str, v: usize) -> Result<i32, DeviceError> {
    i32::try_from(v)
        .map_err(|_| DeviceError::Unsupported(format!("{what} = {v} (at most 2^31 - 1)")))
}

/// Scratch of at least `bytes`, reusing the kept allocation when it is large enough.
fn scratch(d: &mut Device, bytes: usize) -> Result<&mut CudaSlice<u8>, DeviceError> {
    let st = d.stream.clone();
    let buffers = d.slot::<SoftDtwBuffers>();
    let keep = buffers.scratch.as_ref().is_some_and(|s| s.len() >= bytes);
    if !keep {
        buffers.scratch = None;
        // SAFETY: the kernels use no scratch entry before writing it (the marginal backward
        // pass prefetches the entries of idle lane steps too, and discards their values).
        let s = unsafe { st.alloc::<u8>(bytes.max(16)) }.map_err(drv("cuMemAlloc"))?;
        buffers.scratch = Some(s);
    }
    Ok(buffers.scratch.as_mut().expect("just allocated"))
}

impl GpuWorker {
    /// Runs one soft-DTW batch (values, and gradients when asked).
    ///
    /// # Errors
    /// [`DeviceError`] from the driver, NVRTC or module loading; `Unsupported` when a count
    /// exceeds the kernels' 32-bit indices or a gradient pair needs more than
    /// [`MAX_WARP_SCRATCH`] bytes of scratch.
    pub fn softdtw_batch(&self, job: Arc<SoftDtwBatch>) -> Ticket<SoftDtwOutput> {
        self.run(move |d| {
            let (na, nb) = (job.a.len(), job.b.len());
            let pairs = match job.mode {
                PairMode::AllPairs => na * nb,
                PairMode::Paired => na.min(nb),
            };
            if pairs == 0 {
                return Ok(SoftDtwOutput {
                    grad_a: vec![0.0; job.a.values.len()],
                    grad_b: vec![0.0; job.b.values.len()],
                    ..Default::default()
                });
            }
            let pairs_u = u32_of("pairs", pairs)?;
            let dims = i32_of("dims", job.dims)?;
            let (n_max, m_max) = (job.a.max_len(), job.b.max_len());
            let rows = rows_for(n_max);
            let d_suffix = if job.dims == 1 { 1 } else { 0 };
            let name = if job.gradient {
                format!("softdtw_grad_r{rows}_d{d_suffix}")
            } else {
                format!("softdtw_values_r{rows}_d{d_suffix}")
            };
            let f = d.function(&SOFTDTW, &name)?;
            let acc = if job.gradient { 8 } else { 4 };
            let stride = warp_scratch(acc, rows, m_max, n_max, job.dims, job.gradient);
            if stride > MAX_WARP_SCRATCH {
                return Err(DeviceError::Unsupported(format!(
                    "a soft-DTW gradient of {n_max} x {m_max} steps needs {stride} bytes of \
                     scratch per warp (at most {MAX_WARP_SCRATCH})"
                )));
            }
            let per_sm = f
                .occupancy_max_active_blocks_per_multiprocessor(BLOCK, 0, None)
                .map_err(drv("cuOccupancyMaxActiveBlocksPerMultiprocessor"))?
                .max(1);
            let warps_per_block = (BLOCK / 32) as usize;
            let mut blocks = (per_sm * d.info.multiprocessors) as usize;
            blocks = blocks.min(pairs.div_ceil(warps_per_block)).max(1);
            // Keep the scratch within a quarter of the device memory.
            let budget = d.info.total_memory / 4;
            while blocks > 1 && blocks * warps_per_block * stride > budget {
                blocks /= 2;
            }
            let st = d.stream.clone();
            let up = drv("cuMemcpyHtoD");
            let ax = st.clone_htod(&job.a.values).map_err(&up)?;
            let aoff = st.clone_htod(&job.a.offsets).map_err(&up)?;
            let bx = st.clone_htod(&job.b.values).map_err(&up)?;
            let boff = st.clone_htod(&job.b.offsets).map_err(&up)?;
            let alloc = drv("cuMemAlloc");
            let mut values = st.alloc_zeros::<f64>(pairs).map_err(&alloc)?;
            let mut ga = st
                .alloc_zeros::<f32>(job.a.values.len().max(1))
                .map_err(&alloc)?;
            let mut gb = st
                .alloc_zeros::<f32>(job.b.values.len().max(1))
                .map_err(&alloc)?;
            let na_u = u32_of("series in a", na.max(1))?;
            let nb_u = u32_of("series in b", nb.max(1))?;
            let mode: u32 = match job.mode {
                PairMode::AllPairs => 0,
                PairMode::Paired => 1,
            };
            let scale = (std::f64::consts::LOG2_E / job.gamma) as f32;
            let band: i64 = job.band.map_or(-1, i64_of);
            let stride_i = i64_of(stride);
            let m_max_i = i32_of("series length", m_max)?;
            let strips = i32_of("strips", n_max.div_ceil(32 * rows).max(1))?;
            let scratch = scratch(d, blocks * warps_per_block * stride)?;
            let timer = Timer::start(&st)?;
            let mut l = st.launch_builder(&f);
            l.arg(&ax).arg(&aoff).arg(&bx).arg(&boff);
            l.arg(&na_u)
                .arg(&nb_u)
                .arg(&pairs_u)
                .arg(&mode)
                .arg(&dims)
                .arg(&scale)
                .arg(&band);
            l.arg(&mut values);
            if job.gradient {
                l.arg(&mut ga).arg(&mut gb);
            }
            l.arg(scratch).arg(&stride_i).arg(&m_max_i);
            if job.gradient {
                l.arg(&strips);
            }
            let cfg = launch::blocks(u32_of("blocks", blocks)?, BLOCK);
            // SAFETY: matches `softdtw_values_r*` / `softdtw_grad_r*` (ax f32*, aoff u32*
            // [na + 1], bx f32*, boff u32* [nb + 1], na, nb, pairs, mode u32, dims i32, scale f32,
            // band i64, values f64* [pairs], (ga, gb f32* shaped like ax, bx), scratch u8*
            // [warps * stride], stride i64, m_max i32, (strips_max i32)); the scratch holds
            // `stride` bytes for each of the grid's warps, sized by `warp_scratch` for the
            // longest series of each set.
            unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
            let timed = timer.stop(&st)?;
            let down = drv("cuMemcpyDtoH");
            let values = st.clone_dtoh(&values).map_err(&down)?;
            let (grad_a, grad_b) = if job.gradient {
                let mut a = st.clone_dtoh(&ga).map_err(&down)?;
                let mut b = st.clone_dtoh(&gb).map_err(&down)?;
                a.truncate(job.a.values.len());
                b.truncate(job.b.values.len());
                (a, b)
            } else {
                (Vec::new(), Vec::new())
            };
            let kernel_ms = f64::from(timed.ms()?);
            Ok(SoftDtwOutput {
                values,
                grad_a,
                grad_b,
                kernel_ms,
            })
        })
    }

    /// The soft-DTW value of one long pair, tiled: tiles of 256 rows by [`TILE_COLS`]
    /// columns, one warp each, one launch per tile anti-diagonal; memory `O(N + M)`.
    /// Returns `(value, kernel milliseconds)`.
    ///
    /// # Errors
    /// As [`GpuWorker::softdtw_batch`].
    pub(crate) fn softdtw_long(
        &self,
        x: Arc<Vec<f32>>,
        y: Arc<Vec<f32>>,
        dims: usize,
        gamma: f64,
        band: Option<usize>,
    ) -> Ticket<(f64, f64)> {
        self.run(move |d| {
            let dims_i = i32_of("dims", dims)?;
            let n = x.len() / dims.max(1);
            let m = y.len() / dims.max(1);
            let (n_i, m_i) = (i32_of("length of x", n)?, i32_of("length of y", m)?);
            let name = format!(
                "softdtw_tile_r{TILE_ROWS}_d{}",
                if dims == 1 { 1 } else { 0 }
            );
            let f = d.function(&SOFTDTW, &name)?;
            let strip_rows = 32 * TILE_ROWS;
            let strips = n.div_ceil(strip_rows);
            let blocks = m.div_ceil(TILE_COLS);
            let st = d.stream.clone();
            let up = drv("cuMemcpyHtoD");
            let alloc = drv("cuMemAlloc");
            let xd = st.clone_htod(&x[..]).map_err(&up)?;
            let yd = st.clone_htod(&y[..]).map_err(&up)?;
            let mut hrow = st.alloc_zeros::<f32>(3 * (m + 1)).map_err(&alloc)?;
            let mut vcol = st
                .alloc_zeros::<f32>(3 * (strips * strip_rows + 1))
                .map_err(&alloc)?;
            let mut last = st.alloc_zeros::<f32>(1).map_err(&alloc)?;
            let scale = (std::f64::consts::LOG2_E / gamma) as f32;
            let band_i: i64 = band.map_or(-1, i64_of);
            let tile_cols = TILE_COLS as i32;
            let timer = Timer::start(&st)?;
            for diag in 0..strips + blocks - 1 {
                let s_min = (diag + 1).saturating_sub(blocks);
                let s_max = diag.min(strips - 1);
                let tiles = s_max + 1 - s_min;
                let diag_i = i32_of("tile diagonal", diag)?;
                let mut l = st.launch_builder(&f);
                l.arg(&xd).arg(&n_i).arg(&yd).arg(&m_i).arg(&dims_i);
                l.arg(&scale).arg(&band_i).arg(&tile_cols).arg(&diag_i);
                l.arg(&mut hrow).arg(&mut vcol).arg(&mut last);
                let threads = u32_of("tile threads", tiles * 32)?;
                let cfg = launch::cover(threads, BLOCK);
                // SAFETY: matches `softdtw_tile_r8_d*` (x f32* [n dims], n i32, y f32*
                // [m dims], m, dims i32, scale f32, band i64, tile_cols, diag i32, hrow f32*
                // [3 (m + 1)], vcol f32* [3 (strips 256 + 1)], last f32* [1]); warps beyond
                // the diagonal's tiles return at once.
                unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
            }
            let timed = timer.stop(&st)?;
            let r = st.clone_dtoh(&last).map_err(drv("cuMemcpyDtoH"))?[0];
            let kernel_ms = f64::from(timed.ms()?);
            Ok((f64::from(r) / f64::from(scale), kernel_ms))
        })
    }
}

#[cfg(test)]
mod tests {
    /// A launch with more threads than a kernel's `__launch_bounds__` fails: the kernel's
    /// block size must be the host's.
    #[test]
    fn launch_bounds_match_the_block_size() {
        let line = super::SOFTDTW
            .source
            .lines()
            .find(|l| l.starts_with("#define SDTW_GRAD_BLOCK "))
            .expect("SDTW_GRAD_BLOCK is defined");
        let value: u32 = line.split_whitespace().nth(2).unwrap().parse().unwrap();
        assert_eq!(value, super::BLOCK);
    }
}
