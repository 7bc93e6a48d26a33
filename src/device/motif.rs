//! Motif-discovery jobs for a device thread (`kernels/motif.cu`); `motif::gpu` drives them.
//!
//! The series and its statistics are uploaded once ([`GpuWorker::motif_load`]); MK's
//! reference rows, permuted distance matrix and order stay on the device between the top-k
//! searches; each search resets the allowed mask, the BSF and the candidate list, runs MK
//! sweeps or the matrix profile, and downloads only the candidates.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::DeviceError;
use super::kernels::MOTIF;
use super::launch::{self, Timed, Timer, drv, u32_of};
use super::worker::{Device, GpuWorker, Ticket};

/// Threads per block of the motif kernels.
const BLOCK: u32 = 256;
/// Diagonals per matrix-profile thread (`SYNFIRE_MP_DIAGS`).
const PROFILE_DIAGS: u32 = 4;
/// Threads per block of the matrix-profile kernel.
const PROFILE_BLOCK: u32 = 128;
/// Candidate pairs the device can hold per search.
pub(crate) const CANDIDATE_CAPACITY: usize = 1 << 20;

/// A series with its subsequence statistics (see `motif::Subsequences`), shapes `[n]` for
/// `x` and `[N]` (subsequences) for the rest.
#[derive(Clone, Debug, Default)]
pub(crate) struct MotifSeries {
    /// Samples (NaN allowed: those subsequences are invalid).
    pub x: Vec<f64>,
    /// Subsequence length.
    pub m: usize,
    /// Mean per subsequence (shared with the host's statistics).
    pub mean: Arc<[f64]>,
    /// `1 / sigma` per subsequence (0: constant or invalid; shared like `mean`).
    pub inv_std: Arc<[f64]>,
    /// SCAMP's `df` per subsequence (empty: not uploaded now; the matrix profile needs them,
    /// [`GpuWorker::motif_load_terms`]).
    pub df: Vec<f64>,
    /// SCAMP's `dg` per subsequence (empty with `df`).
    pub dg: Vec<f64>,
    /// 1 where the subsequence is finite.
    pub valid: Vec<u8>,
}

/// What a sweep or matrix-profile launch reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct SweepReport {
    /// The BSF after the launch.
    pub bsf: f64,
    /// Some thread's window goes on past the launch's last offset (MK: launch again).
    pub open: bool,
    /// The candidate list overflowed.
    pub overflow: bool,
    /// Kernel time, milliseconds (CUDA events).
    pub kernel_ms: f64,
}

/// What a projection-join round reports.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct JoinReport {
    /// The BSF after the round (the smallest distance measured so far in this search).
    pub bsf: f64,
    /// The candidate list overflowed.
    pub overflow: bool,
    /// The exact distances passed the round's budget; the round stopped early.
    pub aborted: bool,
    /// Kernel time, milliseconds (CUDA events).
    pub kernel_ms: f64,
}

/// Threads (points) per block of the join kernel (`SYNFIRE_JOIN_TILE`).
const JOIN_TILE: u32 = 128;

/// The most projection coordinates per subsequence the join kernels take (a point is four
/// `float4`).
pub(crate) const MAX_PROJECTION_DIMS: usize = 16;

/// The work list of one projection-join round, as plain arrays: the points (subsequence
/// starts) sorted by grid cell and each cell's forward neighbour cells. The host builds it
/// (`motif::join`'s grid, shared with the CPU join).
#[derive(Clone, Debug, Default)]
pub(crate) struct JoinCells {
    /// Point ids (subsequence starts) sorted by cell, shape `[points]`.
    pub order: Vec<u32>,
    /// `cell_start[c]..cell_start[c + 1]` indexes `order`, shape `[cells + 1]`.
    pub cell_start: Vec<u32>,
    /// `nb_start[c]..nb_start[c + 1]` indexes `nb_cell`: cell `c` itself first, then its
    /// forward neighbours; shape `[cells + 1]`.
    pub nb_start: Vec<u32>,
    /// Neighbour cell ids.
    pub nb_cell: Vec<u32>,
}

impl JoinCells {
    /// Number of cells.
    #[must_use]
    pub(crate) fn cells(&self) -> usize {
        self.cell_start.len().saturating_sub(1)
    }
}

/// The candidates and counters of one search.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MotifCandidates {
    /// `(distance, i, j)`, `i < j`, as the kernels measured them.
    pub pairs: Vec<(f64, u32, u32)>,
    /// Lower bounds computed (MK).
    pub lower_bounds: u64,
    /// True distances computed (MK).
    pub distances: u64,
}

/// Device buffers of a motif search (the device thread's `Option<MotifBuffers>` slot).
struct MotifBuffers {
    n_sub: u32,
    m: i32,
    x: CudaSlice<f64>,
    mean: CudaSlice<f64>,
    inv_std: CudaSlice<f64>,
    /// SCAMP's terms, once uploaded (only the matrix profile reads them).
    terms: Option<(CudaSlice<f64>, CudaSlice<f64>)>,
    valid: CudaSlice<u8>,
    allowed: CudaSlice<u8>,
    rows: Option<CudaSlice<f64>>,
    refs: u32,
    dp: Option<CudaSlice<f64>>,
    order: Option<CudaSlice<u32>>,
    len: u32,
    offers: Offers,
    counters: CudaSlice<u64>,
    /// Projection-join coordinates `[dims][N]` (f32), once projected.
    coords: Option<CudaSlice<f32>>,
    dims: i32,
}

/// The BSF and the candidate list every search kernel offers pairs to (`synfire_offer` in
/// `kernels/motif.cu`).
struct Offers {
    bsf: CudaSlice<u64>,
    d: CudaSlice<f64>,
    i: CudaSlice<u32>,
    j: CudaSlice<u32>,
    count: CudaSlice<u32>,
    cap: u32,
    flags: CudaSlice<u32>,
}

impl Offers {
    /// Pushes the kernel arguments `bsf u64* [1], cand_d f64* [cap], cand_i, cand_j u32* [cap],
    /// cand_count u32* [1], cap u32, flags u32* [2]`, in that order.
    fn push<'a>(&'a mut self, l: &mut cudarc::driver::LaunchArgs<'a>) {
        l.arg(&mut self.bsf)
            .arg(&mut self.d)
            .arg(&mut self.i)
            .arg(&mut self.j)
            .arg(&mut self.count)
            .arg(&self.cap)
            .arg(&mut self.flags);
    }
}

fn buffers(d: &mut Device) -> Result<&mut MotifBuffers, DeviceError> {
    d.slot::<Option<MotifBuffers>>()
        .as_mut()
        .ok_or_else(|| DeviceError::Unsupported("motif job before motif_load".into()))
}

/// Threads `0..n`, [`BLOCK`] per block.
fn grid(n: u32) -> cudarc::driver::LaunchConfig {
    launch::cover(n, BLOCK)
}

impl GpuWorker {
    /// Uploads SCAMP's terms of the loaded series (`[N]` each), which the matrix profile
    /// reads; a series loaded with them needs none.
    pub(crate) fn motif_load_terms(&self, df: Vec<f64>, dg: Vec<f64>) -> Ticket<()> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = buffers(d)?;
            if df.len() != b.n_sub as usize || dg.len() != b.n_sub as usize {
                return Err(DeviceError::Unsupported(
                    "SCAMP terms of another length".into(),
                ));
            }
            let up = drv("cuMemcpyHtoD");
            b.terms = Some((
                st.clone_htod(&df).map_err(&up)?,
                st.clone_htod(&dg).map_err(&up)?,
            ));
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// Uploads a series and its statistics, replacing any previous one.
    pub(crate) fn motif_load(&self, s: Arc<MotifSeries>) -> Ticket<()> {
        self.run(move |d| {
            *d.slot::<Option<MotifBuffers>>() = None;
            let st = d.stream.clone();
            let up = drv("cuMemcpyHtoD");
            let alloc = drv("cuMemAlloc");
            let n_sub = u32_of("subsequences", s.mean.len())?;
            let bufs = MotifBuffers {
                n_sub,
                m: i32::try_from(s.m)
                    .map_err(|_| DeviceError::Unsupported(format!("m = {}", s.m)))?,
                x: st.clone_htod(&s.x).map_err(&up)?,
                mean: st.clone_htod(&*s.mean).map_err(&up)?,
                inv_std: st.clone_htod(&*s.inv_std).map_err(&up)?,
                terms: if s.df.is_empty() {
                    None
                } else {
                    if s.df.len() != s.mean.len() || s.dg.len() != s.mean.len() {
                        return Err(DeviceError::Unsupported(
                            "SCAMP terms of another length".into(),
                        ));
                    }
                    Some((
                        st.clone_htod(&s.df).map_err(&up)?,
                        st.clone_htod(&s.dg).map_err(&up)?,
                    ))
                },
                valid: st.clone_htod(&s.valid).map_err(&up)?,
                allowed: st.clone_htod(&s.valid).map_err(&up)?,
                rows: None,
                refs: 0,
                dp: None,
                order: None,
                len: 0,
                offers: Offers {
                    bsf: st.alloc_zeros::<u64>(1).map_err(&alloc)?,
                    d: st.alloc_zeros::<f64>(CANDIDATE_CAPACITY).map_err(&alloc)?,
                    i: st.alloc_zeros::<u32>(CANDIDATE_CAPACITY).map_err(&alloc)?,
                    j: st.alloc_zeros::<u32>(CANDIDATE_CAPACITY).map_err(&alloc)?,
                    count: st.alloc_zeros::<u32>(1).map_err(&alloc)?,
                    cap: CANDIDATE_CAPACITY as u32,
                    flags: st.alloc_zeros::<u32>(4).map_err(&alloc)?,
                },
                counters: st.alloc_zeros::<u64>(2).map_err(&alloc)?,
                coords: None,
                dims: 0,
            };
            *d.slot::<Option<MotifBuffers>>() = Some(bufs);
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// Computes the distance rows of the references (Alg. 3) on the device and returns each
    /// row's standard deviation (Alg. 4) over the valid subsequences.
    pub(crate) fn motif_reference_rows(&self, refs: Vec<u32>) -> Ticket<Vec<f64>> {
        self.run(move |d| {
            let f = d.function(&MOTIF, "motif_reference_row")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            let n = b.n_sub as usize;
            let mut rows = st
                .alloc_zeros::<f64>(n * refs.len().max(1))
                .map_err(drv("cuMemAlloc"))?;
            let mut sums = st
                .alloc_zeros::<f64>(3 * refs.len().max(1))
                .map_err(drv("cuMemAlloc"))?;
            for (q, &r) in refs.iter().enumerate() {
                let mut row = rows.slice_mut(q * n..(q + 1) * n);
                let mut sum = sums.slice_mut(3 * q..3 * q + 3);
                let mut l = st.launch_builder(&f);
                l.arg(&b.x).arg(&b.mean).arg(&b.inv_std).arg(&b.valid);
                l.arg(&b.n_sub)
                    .arg(&b.m)
                    .arg(&r)
                    .arg(&mut row)
                    .arg(&mut sum);
                // SAFETY: matches `motif_reference_row` (x f64* [n], mean, inv_std f64* [N],
                // valid u8* [N], n_sub u32, m i32, ref u32 < N, row f64* [N], sums f64* [3]);
                // threads with j >= N return first; the caller passes valid reference starts.
                unsafe { l.launch(grid(b.n_sub)) }.map_err(drv("cuLaunchKernel"))?;
            }
            let sums = st.clone_dtoh(&sums).map_err(drv("cuMemcpyDtoH"))?;
            b.rows = Some(rows);
            b.refs = u32_of("references", refs.len())?;
            Ok(sums
                .chunks(3)
                .take(refs.len())
                .map(|s| {
                    let c = s[2].max(1.0);
                    let mean = s[0] / c;
                    (s[1] / c - mean * mean).max(0.0).sqrt()
                })
                .collect())
        })
    }

    /// Downloads reference row `q` (distances to every subsequence; +inf for invalid ones).
    pub(crate) fn motif_row(&self, q: usize) -> Ticket<Vec<f64>> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = buffers(d)?;
            let n = b.n_sub as usize;
            let rows = b
                .rows
                .as_ref()
                .ok_or_else(|| DeviceError::Unsupported("motif_row before the rows".into()))?;
            st.clone_dtoh(&rows.slice(q * n..(q + 1) * n))
                .map_err(drv("cuMemcpyDtoH"))
        })
    }

    /// Stores `I_S` (`order`, valid subsequences by distance to the ordering reference) and
    /// builds `D` permuted into it, rows in the order `rank` (`I_SD`).
    pub(crate) fn motif_set_order(&self, order: Arc<Vec<u32>>, rank: Vec<u32>) -> Ticket<()> {
        self.run(move |d| {
            let f = d.function(&MOTIF, "motif_gather")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            let len = u32_of("ordered subsequences", order.len())?;
            let r = u32_of("references", rank.len())?;
            let ord = st.clone_htod(&order[..]).map_err(drv("cuMemcpyHtoD"))?;
            let rank_d = st.clone_htod(&rank).map_err(drv("cuMemcpyHtoD"))?;
            let mut dp = st
                .alloc_zeros::<f64>((order.len() * rank.len()).max(1))
                .map_err(drv("cuMemAlloc"))?;
            let rows = b
                .rows
                .as_ref()
                .ok_or_else(|| DeviceError::Unsupported("motif_set_order before rows".into()))?;
            if len > 0 && r > 0 {
                let mut l = st.launch_builder(&f);
                l.arg(rows)
                    .arg(&ord)
                    .arg(&rank_d)
                    .arg(&len)
                    .arg(&b.n_sub)
                    .arg(&mut dp);
                let cfg = launch::cover_rows(len, r, BLOCK);
                // SAFETY: matches `motif_gather` (rows f64* [refs*N], order u32* [len] < N,
                // rank u32* [r] < refs, len u32, n_sub u32, dp f64* [r*len]); threads with
                // k >= len return first.
                unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
            }
            b.dp = Some(dp);
            b.order = Some(ord);
            b.len = len;
            b.refs = r;
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// Starts a search: the allowed mask (1 = may pair), the initial BSF, an empty candidate
    /// list and zero counters.
    pub(crate) fn motif_begin(&self, allowed: Arc<Vec<u8>>, bsf: f64) -> Ticket<()> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = buffers(d)?;
            st.memcpy_htod(&allowed[..], &mut b.allowed)
                .map_err(drv("cuMemcpyHtoD"))?;
            st.memcpy_htod(&[bsf.to_bits()], &mut b.offers.bsf)
                .map_err(drv("cuMemcpyHtoD"))?;
            st.memset_zeros(&mut b.offers.count)
                .map_err(drv("cuMemsetD8"))?;
            st.memset_zeros(&mut b.offers.flags)
                .map_err(drv("cuMemsetD8"))?;
            st.memset_zeros(&mut b.counters)
                .map_err(drv("cuMemsetD8"))?;
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// MK offsets `[o_begin, o_end)` for every k (Algs. 6–8 fused).
    pub(crate) fn motif_mk_sweep(
        &self,
        exclusion: u32,
        o_begin: u32,
        o_end: u32,
    ) -> Ticket<SweepReport> {
        self.run(move |d| {
            let f = d.function(&MOTIF, "motif_mk_sweep")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            let (Some(dp), Some(order)) = (b.dp.as_ref(), b.order.as_ref()) else {
                return Err(DeviceError::Unsupported(
                    "motif_mk_sweep before the order".into(),
                ));
            };
            st.memset_zeros(&mut b.offers.flags)
                .map_err(drv("cuMemsetD8"))?;
            let timer = Timer::start(&st)?;
            let mut l = st.launch_builder(&f);
            l.arg(dp)
                .arg(&b.refs)
                .arg(&b.len)
                .arg(order)
                .arg(&b.allowed);
            l.arg(&exclusion).arg(&o_begin).arg(&o_end);
            l.arg(&b.x).arg(&b.mean).arg(&b.inv_std).arg(&b.m);
            b.offers.push(&mut l);
            l.arg(&mut b.counters);
            // SAFETY: matches `motif_mk_sweep` (dp f64* [r*len], r, len u32, order u32* [len],
            // allowed u8* [N], exclusion, o_begin, o_end u32, x f64* [n], mean, inv_std f64*
            // [N], m i32, bsf u64* [1], cand_d f64* [cap], cand_i, cand_j u32* [cap],
            // cand_count u32* [1], cap u32, flags u32* [2], counters u64* [2]); threads with
            // k >= len return first and p = k + o < len is checked before reading.
            unsafe { l.launch(grid(b.len)) }.map_err(drv("cuLaunchKernel"))?;
            let timed = timer.stop(&st)?;
            report(&st, b, &timed)
        })
    }

    /// The exact matrix profile's closest pair over diagonals `> exclusion`, tiles of `tile`
    /// rows, 4 diagonals per thread. `state` packs each subsequence's state (see
    /// `motif_profile` in `kernels/motif.cu`): NaN = invalid, `>= 0` = allowed with
    /// `1 / (sqrt(m) sigma)`, `< 0` = valid but not allowed.
    pub(crate) fn motif_profile(
        &self,
        state: Arc<Vec<f64>>,
        exclusion: u32,
        tile: u32,
    ) -> Ticket<SweepReport> {
        self.run(move |d| {
            let f = d.function(&MOTIF, "motif_profile")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            let state_d = st.clone_htod(&state[..]).map_err(drv("cuMemcpyHtoD"))?;
            let first = exclusion + 1;
            let diagonals = b.n_sub.saturating_sub(first);
            let tile = tile.max(1);
            let timer = Timer::start(&st)?;
            if diagonals > 0 {
                let tiles = b.n_sub.div_ceil(tile);
                let threads = diagonals.div_ceil(PROFILE_DIAGS);
                // Keep every launch's grid.y within the hardware limit of 65,535.
                for y0 in (0..tiles).step_by(65_535) {
                    let ys = (tiles - y0).min(65_535);
                    let offset_rows = y0 * tile;
                    let mut l = st.launch_builder(&f);
                    let (df, dg) = b.terms.as_ref().ok_or_else(|| {
                        DeviceError::Unsupported("the matrix profile before its SCAMP terms".into())
                    })?;
                    l.arg(&b.x).arg(&b.mean).arg(&state_d).arg(df).arg(dg);
                    l.arg(&b.n_sub)
                        .arg(&b.m)
                        .arg(&first)
                        .arg(&tile)
                        .arg(&offset_rows);
                    b.offers.push(&mut l);
                    let cfg = launch::cover_rows(threads, ys, PROFILE_BLOCK);
                    // SAFETY: matches `motif_profile` (x f64* [n], mean, state, df, dg f64* [N],
                    // n_sub u32, m i32, first_diag, tile, row_offset u32, bsf u64* [1],
                    // cand_d f64* [cap], cand_i, cand_j u32* [cap], cand_count u32* [1], cap
                    // u32, flags u32* [2]); every j read is checked against n_sub first.
                    unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
                }
            }
            let timed = timer.stop(&st)?;
            report(&st, b, &timed)
        })
    }

    /// Projects every subsequence onto the `dims` (at most `MAX_PROJECTION_DIMS`) rows of
    /// `basis` (`[dims][m]`, the DCT-II vectors of `motif::join`), keeps the f32 coordinates
    /// `[dims][N]` on the device and returns the first `host_dims` rows (`[host_dims][N]`,
    /// `host_dims` clamped to `1..=dims`): the host builds grids from the first few, and the
    /// device bounds with all of them.
    pub(crate) fn motif_project(
        &self,
        dims: usize,
        host_dims: usize,
        basis: Arc<Vec<f64>>,
    ) -> Ticket<Vec<f32>> {
        self.run(move |d| {
            let f = d.function(&MOTIF, "motif_project")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            if dims == 0 || dims > MAX_PROJECTION_DIMS {
                return Err(DeviceError::Unsupported(format!(
                    "projection dims = {dims}"
                )));
            }
            let dims_i = dims as i32;
            let basis_d = st.clone_htod(&basis[..]).map_err(drv("cuMemcpyHtoD"))?;
            let mut coords = st
                .alloc_zeros::<f32>(dims * b.n_sub as usize)
                .map_err(drv("cuMemAlloc"))?;
            let mut l = st.launch_builder(&f);
            l.arg(&b.x).arg(&b.mean).arg(&b.inv_std).arg(&b.valid);
            l.arg(&b.n_sub)
                .arg(&b.m)
                .arg(&dims_i)
                .arg(&basis_d)
                .arg(&mut coords);
            // SAFETY: matches `motif_project` (x f64* [n], mean, inv_std f64* [N], valid u8* [N],
            // n_sub u32, m i32, dims i32 <= 16, basis f64* [dims*m], coords f32* [dims*N]);
            // threads with i >= N return first.
            unsafe { l.launch(grid(b.n_sub)) }.map_err(drv("cuLaunchKernel"))?;
            let rows = host_dims.clamp(1, dims) * b.n_sub as usize;
            let host = st
                .clone_dtoh(&coords.slice(..rows))
                .map_err(drv("cuMemcpyDtoH"))?;
            b.coords = Some(coords);
            b.dims = dims_i;
            Ok(host)
        })
    }

    /// One projection-join round over `grid` (built on the host, see `JoinCells`):
    /// pairs whose f32 bound is within `min(width, BSF) (1 + 1e-5) + slack` are measured and
    /// offered to the BSF; at most `budget` exact distances in this search.
    pub(crate) fn motif_join(
        &self,
        grid: Arc<JoinCells>,
        exclusion: u32,
        width: f64,
        slack: f64,
        budget: u64,
    ) -> Ticket<JoinReport> {
        self.run(move |d| {
            let gather = d.function(&MOTIF, "motif_join_gather")?;
            let f = d.function(&MOTIF, "motif_join")?;
            let st = d.stream.clone();
            let b = buffers(d)?;
            let coords = b.coords.as_ref().ok_or_else(|| {
                DeviceError::Unsupported("motif_join before motif_project".into())
            })?;
            let up = drv("cuMemcpyHtoD");
            let len = u32_of("joined subsequences", grid.order.len())?;
            let mut blocks: Vec<u32> = Vec::new();
            for c in 0..grid.cells() {
                let (s0, s1) = (grid.cell_start[c], grid.cell_start[c + 1]);
                let mut first = s0;
                while first < s1 {
                    blocks.push(c as u32);
                    blocks.push(first);
                    first = first.saturating_add(JOIN_TILE);
                }
            }
            let nblocks = u32_of("join blocks", blocks.len() / 2)?;
            st.memset_zeros(&mut b.offers.flags)
                .map_err(drv("cuMemsetD8"))?;
            let timer = Timer::start(&st)?;
            if len > 0 && nblocks > 0 {
                let order = st.clone_htod(&grid.order[..]).map_err(&up)?;
                let cell_start = st.clone_htod(&grid.cell_start[..]).map_err(&up)?;
                let nb_start = st.clone_htod(&grid.nb_start[..]).map_err(&up)?;
                let nb_cell = st.clone_htod(&grid.nb_cell[..]).map_err(&up)?;
                let blocks_d = st.clone_htod(&blocks[..]).map_err(&up)?;
                let mut pts = st
                    .alloc_zeros::<f32>(grid.order.len() * 16)
                    .map_err(drv("cuMemAlloc"))?;
                let mut l = st.launch_builder(&gather);
                l.arg(coords)
                    .arg(&b.n_sub)
                    .arg(&b.dims)
                    .arg(&order)
                    .arg(&len)
                    .arg(&mut pts);
                // SAFETY: matches `motif_join_gather` (coords f32* [dims*N], n_sub u32, dims
                // i32, order u32* [len] < N, len u32, pts float4* [len*4]); threads with
                // pos >= len return first.
                unsafe { l.launch(launch::cover(len, BLOCK)) }.map_err(drv("cuLaunchKernel"))?;
                let mut l = st.launch_builder(&f);
                l.arg(&pts)
                    .arg(&order)
                    .arg(&cell_start)
                    .arg(&nb_start)
                    .arg(&nb_cell)
                    .arg(&blocks_d);
                l.arg(&exclusion).arg(&width).arg(&slack).arg(&budget);
                l.arg(&b.x).arg(&b.mean).arg(&b.inv_std).arg(&b.m);
                b.offers.push(&mut l);
                l.arg(&mut b.counters);
                let cfg = launch::blocks(nblocks, JOIN_TILE);
                // SAFETY: matches `motif_join` (pts float4* [len*4], order u32* [len],
                // cell_start u32* [cells+1], nb_start u32* [cells+1], nb_cell u32*, blocks u32*
                // [2*nblocks] = (cell, first position), exclusion u32, width, slack f64, budget
                // u64, x f64* [n], mean, inv_std f64* [N], m i32, the offers, counters u64*
                // [2]); every position read lies in a cell range of `order`.
                unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
            }
            let timed = timer.stop(&st)?;
            let flags = st
                .clone_dtoh(&b.offers.flags)
                .map_err(drv("cuMemcpyDtoH"))?;
            let bsf = st.clone_dtoh(&b.offers.bsf).map_err(drv("cuMemcpyDtoH"))?;
            Ok(JoinReport {
                bsf: f64::from_bits(bsf[0]),
                overflow: flags[0] != 0,
                aborted: flags[2] != 0,
                kernel_ms: f64::from(timed.ms()?),
            })
        })
    }

    /// Downloads the candidates and counters of the current search.
    pub(crate) fn motif_candidates(&self) -> Ticket<MotifCandidates> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = buffers(d)?;
            let count = st
                .clone_dtoh(&b.offers.count)
                .map_err(drv("cuMemcpyDtoH"))?[0] as usize;
            let count = count.min(CANDIDATE_CAPACITY);
            let counters = st.clone_dtoh(&b.counters).map_err(drv("cuMemcpyDtoH"))?;
            let mut pairs = Vec::with_capacity(count);
            if count > 0 {
                let dd = st
                    .clone_dtoh(&b.offers.d.slice(..count))
                    .map_err(drv("cuMemcpyDtoH"))?;
                let ii = st
                    .clone_dtoh(&b.offers.i.slice(..count))
                    .map_err(drv("cuMemcpyDtoH"))?;
                let jj = st
                    .clone_dtoh(&b.offers.j.slice(..count))
                    .map_err(drv("cuMemcpyDtoH"))?;
                for k in 0..count {
                    pairs.push((dd[k], ii[k], jj[k]));
                }
            }
            Ok(MotifCandidates {
                pairs,
                lower_bounds: counters[0],
                distances: counters[1],
            })
        })
    }
}

fn report(
    st: &Arc<cudarc::driver::CudaStream>,
    b: &MotifBuffers,
    timed: &Timed,
) -> Result<SweepReport, DeviceError> {
    let flags = st
        .clone_dtoh(&b.offers.flags)
        .map_err(drv("cuMemcpyDtoH"))?;
    let bsf = st.clone_dtoh(&b.offers.bsf).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = f64::from(timed.ms()?);
    Ok(SweepReport {
        bsf: f64::from_bits(bsf[0]),
        open: flags[1] != 0,
        overflow: flags[0] != 0,
        kernel_ms,
    })
}
