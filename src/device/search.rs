//! SING lower-bound jobs for a device thread (`kernels/search.cu`); `search::gpu` drives them.
//!
//! The leaf-ordered iSAX array of one index is uploaded once ([`GpuWorker::search_load`],
//! 16 bytes per series) and kept, tagged with the index it belongs to. Per query
//! ([`GpuWorker::search_lower_bounds`]) the job uploads the query's bound table (32 KiB) and
//! the active ranges, then, chunk by chunk: reads the current BSF from the host, launches the
//! kernel over the chunk, downloads only the survivors `(position, bound)` and hands them to
//! the host at once, so the CPU workers use them while the next chunk runs.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};

use super::DeviceError;
use super::kernels::SEARCH;
use super::launch::{self, Timer, drv};
use super::worker::{Device, GpuWorker, Ticket};

/// Threads per block of `search_lower_bounds`.
const BLOCK: u32 = 256;
/// Most blocks per multiprocessor (each holds the 32 KiB table in shared memory).
const BLOCKS_PER_SM: u32 = 6;
/// Series per thread the grid is sized for (grid-stride), so the per-block table copy stays
/// small next to the iSAX words read.
const ITEMS_PER_THREAD: u32 = 8;
/// Bytes of one iSAX word.
const WORD_BYTES: usize = 16;
/// Entries of the per-query table (16 segments × 256 symbols).
pub(crate) const TABLE_LEN: usize = 16 * 256;

/// Device buffers of the search lower bounds (the device thread's `Option<SearchBuffers>`
/// slot).
struct SearchBuffers {
    tag: u64,
    words: u32,
    sax: CudaSlice<u8>,
    table: CudaSlice<f64>,
    out_pos: CudaSlice<u32>,
    out_lb: CudaSlice<f64>,
    out_cap: usize,
    count: CudaSlice<u32>,
}

/// The threshold callback of a job: the squared BSF now, or `None` to stop.
pub(crate) type Threshold = Box<dyn Fn() -> Option<f64> + Send>;
/// The publish callback of a job: chunk number, survivors' positions, their squared bounds.
pub(crate) type Publish = Box<dyn FnMut(usize, Vec<u32>, Vec<f64>) + Send>;

/// The lower bounds of one query.
pub(crate) struct LowerBoundJob {
    /// The index the job is for (must match the loaded iSAX array).
    pub tag: u64,
    /// The query's table `T[j][s]`, shape `[16 * 256]`.
    pub table: Vec<f64>,
    /// First leaf-order position of each active range, shape `[ranges]`.
    pub starts: Vec<u32>,
    /// Active-array offset of each range, shape `[ranges + 1]`, starting at 0.
    pub prefix: Vec<u32>,
    /// Series per chunk (≥ 1).
    pub chunk_len: u32,
    /// Called before each chunk.
    pub threshold: Threshold,
    /// Called after each chunk.
    pub publish: Publish,
}

impl std::fmt::Debug for LowerBoundJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LowerBoundJob")
            .field("tag", &self.tag)
            .field("ranges", &self.starts.len())
            .field("chunk_len", &self.chunk_len)
            .finish()
    }
}

/// What a job did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct LowerBoundReport {
    /// Series bounds computed.
    pub lower_bounds: u64,
    /// Chunks processed.
    pub chunks: u64,
    /// Survivors downloaded.
    pub survivors: u64,
    /// Time on the device thread, milliseconds.
    pub millis: f64,
}

/// The device thread's search buffers.
fn buffers(d: &mut Device) -> &mut Option<SearchBuffers> {
    d.slot::<Option<SearchBuffers>>()
}

impl GpuWorker {
    /// The tag of the iSAX array on the device, if any.
    pub(crate) fn search_tag(&self) -> Ticket<Option<u64>> {
        self.run(|d| Ok(buffers(d).as_ref().map(|b| b.tag)))
    }

    /// Uploads a leaf-ordered iSAX array (`[words * 16]` bytes) tagged `tag`, replacing any
    /// previous one.
    pub(crate) fn search_load(&self, tag: u64, sax: Arc<Vec<u8>>) -> Ticket<()> {
        self.run(move |d| {
            *buffers(d) = None;
            let words = u32::try_from(sax.len() / WORD_BYTES).map_err(|_| {
                DeviceError::Unsupported(format!(
                    "{} iSAX words (at most 2^32 - 1)",
                    sax.len() / 16
                ))
            })?;
            if sax.is_empty() || !sax.len().is_multiple_of(WORD_BYTES) {
                return Err(DeviceError::Unsupported(format!(
                    "an iSAX array of {} bytes (a positive multiple of 16 expected)",
                    sax.len()
                )));
            }
            let st = d.stream.clone();
            let alloc = drv("cuMemAlloc");
            let new = SearchBuffers {
                tag,
                words,
                sax: st.clone_htod(&sax[..]).map_err(drv("cuMemcpyHtoD"))?,
                table: st.alloc_zeros::<f64>(TABLE_LEN).map_err(&alloc)?,
                out_pos: st.alloc_zeros::<u32>(1).map_err(&alloc)?,
                out_lb: st.alloc_zeros::<f64>(1).map_err(&alloc)?,
                out_cap: 1,
                count: st.alloc_zeros::<u32>(1).map_err(&alloc)?,
            };
            *buffers(d) = Some(new);
            st.synchronize().map_err(drv("cuStreamSynchronize"))
        })
    }

    /// Runs the chunks of one query (see the module doc).
    pub(crate) fn search_lower_bounds(&self, job: LowerBoundJob) -> Ticket<LowerBoundReport> {
        self.run(move |d| {
            let started = Instant::now();
            let f = d.function(&SEARCH, "search_lower_bounds")?;
            let sms = d.info.multiprocessors.max(1);
            let st = d.stream.clone();
            let b = buffers(d).as_mut().ok_or_else(|| {
                DeviceError::Unsupported("search lower bounds before the iSAX upload".into())
            })?;
            let mut job = job;
            if job.tag != b.tag {
                return Err(DeviceError::Unsupported(
                    "the device holds the iSAX array of another index".into(),
                ));
            }
            let ranges = u32::try_from(job.starts.len())
                .map_err(|_| DeviceError::Unsupported("too many active ranges".into()))?;
            let total = job.prefix.last().copied().unwrap_or(0);
            if ranges == 0
                || job.prefix.len() != job.starts.len() + 1
                || job.table.len() != TABLE_LEN
            {
                return Err(DeviceError::Unsupported(
                    "a malformed lower-bound job".into(),
                ));
            }
            // Every position the kernel can read must be inside the uploaded array.
            for (r, &s) in job.starts.iter().enumerate() {
                let len = job.prefix[r + 1].checked_sub(job.prefix[r]);
                if len.is_none_or(|l| u64::from(s) + u64::from(l) > u64::from(b.words)) {
                    return Err(DeviceError::Unsupported(format!(
                        "active range {r} lies outside the iSAX array"
                    )));
                }
            }
            let chunk_len = job.chunk_len.max(1);
            if b.out_cap < chunk_len as usize {
                b.out_pos = st
                    .alloc_zeros::<u32>(chunk_len as usize)
                    .map_err(drv("cuMemAlloc"))?;
                b.out_lb = st
                    .alloc_zeros::<f64>(chunk_len as usize)
                    .map_err(drv("cuMemAlloc"))?;
                b.out_cap = chunk_len as usize;
            }
            st.memcpy_htod(&job.table[..], &mut b.table)
                .map_err(drv("cuMemcpyHtoD"))?;
            let starts = st
                .clone_htod(&job.starts[..])
                .map_err(drv("cuMemcpyHtoD"))?;
            let prefix = st
                .clone_htod(&job.prefix[..])
                .map_err(drv("cuMemcpyHtoD"))?;
            let mut report = LowerBoundReport::default();
            let chunks = total.div_ceil(chunk_len);
            for c in 0..chunks {
                let Some(bsf_sq) = (job.threshold)() else {
                    break;
                };
                let begin = c * chunk_len;
                let end = (u64::from(begin) + u64::from(chunk_len)).min(u64::from(total)) as u32;
                st.memset_zeros(&mut b.count).map_err(drv("cuMemsetD8"))?;
                let blocks = (end - begin)
                    .div_ceil(BLOCK * ITEMS_PER_THREAD)
                    .clamp(1, sms * BLOCKS_PER_SM);
                let mut l = st.launch_builder(&f);
                l.arg(&b.sax).arg(&b.table).arg(&starts).arg(&prefix);
                l.arg(&ranges).arg(&begin).arg(&end).arg(&bsf_sq);
                l.arg(&mut b.out_pos).arg(&mut b.out_lb).arg(&mut b.count);
                let cfg = launch::blocks(blocks, BLOCK);
                // SAFETY: matches `search_lower_bounds` (sax uint4* [words], table f64* [4096],
                // starts u32* [ranges], prefix u32* [ranges + 1], ranges, begin, end u32,
                // bsf_sq f64, out_pos u32* [cap], out_lb f64* [cap], count u32* [1]); the
                // ranges were checked to lie inside the iSAX array above, end <= prefix[ranges],
                // and at most end - begin <= chunk_len <= cap survivors are written.
                unsafe { l.launch(cfg) }.map_err(drv("cuLaunchKernel"))?;
                let n = st.clone_dtoh(&b.count).map_err(drv("cuMemcpyDtoH"))?[0] as usize;
                let n = n.min(b.out_cap);
                let (pos, lb) = if n > 0 {
                    (
                        st.clone_dtoh(&b.out_pos.slice(..n))
                            .map_err(drv("cuMemcpyDtoH"))?,
                        st.clone_dtoh(&b.out_lb.slice(..n))
                            .map_err(drv("cuMemcpyDtoH"))?,
                    )
                } else {
                    (Vec::new(), Vec::new())
                };
                report.lower_bounds += u64::from(end - begin);
                report.chunks += 1;
                report.survivors += n as u64;
                (job.publish)(c as usize, pos, lb);
            }
            report.millis = started.elapsed().as_secs_f64() * 1e3;
            Ok(report)
        })
    }
}

/// Threads per block of the batched kernels.
const BATCH_BLOCK: u32 = 256;
/// Blocks per multiprocessor the batched kernels' grids are capped at (grid-stride beyond).
const BATCH_BLOCKS_PER_SM: u32 = 16;
/// Most queries one filter launch takes (a larger batch is cut into ranges of this size).
pub(crate) const BATCH_QUERIES_PER_LAUNCH: usize = 2048;
/// Most surviving pairs one filter launch may hold (8 bytes each, plus 16 for the refined
/// pairs): 2^25 pairs, 768 MiB; an index of `count` series gets `16 × count` of them, at
/// least 2^20: about 0.8% of the pairs of 2,048 queries, 6 times the survivors measured on
/// random walks (0.12–0.14%); a range that overflows is split.
pub(crate) const BATCH_PAIR_CAPACITY: usize = 1 << 25;
/// Device memory left free when deciding whether the series fit beside the PAA.
const BATCH_RESERVE_BYTES: usize = 2 << 30;

/// Device buffers of one index's batched queries (an entry of the device thread's
/// `Vec<BatchBuffers>` slot).
struct BatchBuffers {
    tag: u64,
    count: u32,
    len: u32,
    paa: CudaSlice<f32>,
    weights: CudaSlice<f32>,
    rows: Option<CudaSlice<f32>>,
    rows_filled: usize,
    half: Option<CudaSlice<u16>>,
    half_filled: usize,
    paa_filled: usize,
    pairs: Option<PairBuffers>,
    /// Filter survivors and queries of this index so far (ranges that did not overflow): later
    /// ranges are sized so that the mean fills at most half the pair list (outliers are
    /// handled by the split).
    seen: (u64, u64),
}

impl BatchBuffers {
    /// What the device holds of the series, complete.
    fn held(&self) -> SeriesOnDevice {
        let n = self.count as usize;
        if self.rows.is_some() && self.rows_filled == n {
            SeriesOnDevice::Exact
        } else if self.half.is_some() && self.half_filled == n {
            SeriesOnDevice::Half
        } else {
            SeriesOnDevice::No
        }
    }
}

/// What the GPU holds of an index's series for batches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesOnDevice {
    /// The series as stored (`f32`): exact distances are computed on the device.
    Exact,
    /// A half-precision copy (2 bytes per sample): a second, sound filter on the device; the
    /// host computes exact distances of what it keeps.
    Half,
    /// Nothing: the host computes exact distances of every filter survivor.
    No,
}

/// The survivors' lists, allocated at the first batch.
struct PairBuffers {
    q: CudaSlice<u32>,
    pos: CudaSlice<u32>,
    out_q: CudaSlice<u32>,
    out_pos: CudaSlice<u32>,
    out_sq: CudaSlice<f64>,
    count: CudaSlice<u32>,
}

/// What [`GpuWorker::search_batch_load`] allocates: room for the PAA of every series (leaf
/// order) and, when asked and when they fit, for the series (else, when asked, for their
/// half-precision copy); each is then filled in chunks ([`GpuWorker::search_batch_fill`],
/// [`GpuWorker::search_batch_fill_half`]), so the host never holds a second copy.
#[derive(Debug)]
pub(crate) struct BatchLoad {
    /// The index the data belongs to.
    pub tag: u64,
    /// Series.
    pub count: usize,
    /// Samples per series.
    pub len: usize,
    /// Segment lengths `l_j` as f32, shape `[16]`.
    pub weights: Vec<f32>,
    /// Whether to allocate room for the series (`[count * len]` f32), when they leave 2 GiB
    /// of device memory free.
    pub rows: bool,
    /// Whether to allocate room for a half-precision copy (`[count * len]` binary16) when the
    /// series themselves do not fit (or were not asked for) and it does.
    pub half: bool,
}

/// Which array a [`GpuWorker::search_batch_fill`] chunk belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BatchArray {
    /// PAA values, 16 f32 per series.
    Paa,
    /// The series, `len` f32 per series.
    Series,
}

/// One batch of queries for `GpuWorker::search_batch`.
#[derive(Debug)]
pub struct BatchJob {
    /// The index the job is for (must match the loaded data).
    pub tag: u64,
    /// Query PAA values, f32, shape `[nq * 16]`.
    pub qpaa: Vec<f32>,
    /// Filter thresholds (f32, rounded up from the BSF), shape `[nq]`.
    pub thresh: Vec<f32>,
    /// The z-normalised queries, shape `[nq * len]`; used when the device holds the series.
    pub qrows: Vec<f32>,
    /// Each query's squared BSF (f64), shape `[nq]`; used when the device holds the series.
    pub limit: Vec<f64>,
    /// Each query's threshold of the half-precision filter (f32), shape `[nq]`; used when the
    /// device holds the half-precision copy (`qrows` too).
    pub thresh2: Vec<f32>,
}

/// What a batch did. With the series on the device, `(q, pos, sq)` are the pairs whose exact
/// squared distance is within the query's limit; with their half-precision copy, `(q, pos)`
/// are the pairs the second filter kept; without either, every filter survivor; in both
/// latter cases `sq` is empty (the host computes the distances).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BatchReport {
    /// Query numbers (into the job's queries).
    pub q: Vec<u32>,
    /// Leaf-order positions.
    pub pos: Vec<u32>,
    /// Exact squared distances (empty when the host refines).
    pub sq: Vec<f64>,
    /// Filter survivors per query, shape `[nq]` (0 for an overflowed query).
    pub survivors: Vec<u32>,
    /// Queries whose survivors alone overflowed the pair list: not answered here.
    pub overflowed: Vec<u32>,
    /// Filter launches (more than the ranges when a range overflowed and was split).
    pub filter_launches: u64,
    /// Pairs the half-precision filter kept (0 unless the device holds that copy).
    pub half_survivors: u64,
    /// Device time from the first launch to the last download (CUDA events), milliseconds.
    pub device_ms: f64,
}

/// Appends the first `n` pairs of the device lists `q`, `pos` to `report`, query numbers
/// shifted by `first` (the range's first query).
fn append_pairs(
    st: &Arc<CudaStream>,
    q: &CudaSlice<u32>,
    pos: &CudaSlice<u32>,
    n: usize,
    first: usize,
    report: &mut BatchReport,
) -> Result<(), DeviceError> {
    let down = drv("cuMemcpyDtoH");
    let q = st.clone_dtoh(&q.slice(..n)).map_err(&down)?;
    report.q.extend(q.into_iter().map(|q| q + first as u32));
    report
        .pos
        .extend(st.clone_dtoh(&pos.slice(..n)).map_err(&down)?);
    Ok(())
}

/// The device thread's batch buffers, one entry per index, oldest load first.
fn batch_buffers(d: &mut Device) -> &mut Vec<BatchBuffers> {
    d.slot::<Vec<BatchBuffers>>()
}

/// The batch buffers of the index tagged `tag`, if the device holds them.
fn batch_entry(d: &mut Device, tag: u64) -> Option<&mut BatchBuffers> {
    batch_buffers(d).iter_mut().find(|b| b.tag == tag)
}

impl GpuWorker {
    /// What the device holds of the series of the index tagged `tag` for batches (once its
    /// PAA array is complete), `None` when it holds nothing of it.
    pub(crate) fn search_batch_held(&self, tag: u64) -> Ticket<Option<SeriesOnDevice>> {
        self.run(move |d| {
            Ok(batch_entry(d, tag)
                .filter(|b| b.paa_filled == b.count as usize)
                .map(|b| b.held()))
        })
    }

    /// Allocates the batch data of an index (replacing its earlier data, if any): room for
    /// its PAA array and, when asked and when they fit, for its series or their half-precision
    /// copy. Answers what of the series will be held. The data of other indexes stay on the
    /// device (several searchers share it) unless the new index needs their memory: the
    /// oldest loads are dropped first, until what the new one asks for fits or none is left
    /// (a later batch of a dropped index loads it again, [`crate::search::batch::GpuBatch`]).
    pub(crate) fn search_batch_load(&self, load: BatchLoad) -> Ticket<SeriesOnDevice> {
        self.run(move |d| {
            batch_buffers(d).retain(|b| b.tag != load.tag);
            let count = launch::u32_of("series", load.count)?;
            let len = launch::u32_of("series length", load.len)?;
            if load.count == 0 || load.weights.len() != 16 || load.len == 0 {
                return Err(DeviceError::Unsupported("a malformed batch upload".into()));
            }
            let st = d.stream.clone();
            // Bytes the series (at `bytes_per_sample`) need beside a full pair list and the
            // reserve: the test for holding them, and for dropping older indexes' data first.
            let needs = |bytes_per_sample: usize| {
                load.count * load.len * bytes_per_sample
                    + BATCH_PAIR_CAPACITY * 24
                    + BATCH_RESERVE_BYTES
            };
            let preferred = needs(if load.rows {
                4
            } else if load.half {
                2
            } else {
                0
            }) + load.count * 16 * 4;
            while !batch_buffers(d).is_empty() {
                let (free, _) = d.ctx.mem_get_info().map_err(drv("cuMemGetInfo"))?;
                if free >= preferred {
                    break;
                }
                batch_buffers(d).remove(0);
                st.synchronize().map_err(drv("cuStreamSynchronize"))?;
            }
            let alloc = drv("cuMemAlloc");
            let paa = st.alloc_zeros::<f32>(load.count * 16).map_err(&alloc)?;
            let weights = st
                .clone_htod(&load.weights[..])
                .map_err(drv("cuMemcpyHtoD"))?;
            let (free, _) = d.ctx.mem_get_info().map_err(drv("cuMemGetInfo"))?;
            let fits = |bytes_per_sample: usize| needs(bytes_per_sample) <= free;
            let rows = if load.rows && fits(4) {
                Some(
                    st.alloc_zeros::<f32>(load.count * load.len)
                        .map_err(&alloc)?,
                )
            } else {
                None
            };
            let half = if rows.is_none() && load.half && fits(2) {
                Some(
                    st.alloc_zeros::<u16>(load.count * load.len)
                        .map_err(&alloc)?,
                )
            } else {
                None
            };
            let held = if rows.is_some() {
                SeriesOnDevice::Exact
            } else if half.is_some() {
                SeriesOnDevice::Half
            } else {
                SeriesOnDevice::No
            };
            batch_buffers(d).push(BatchBuffers {
                tag: load.tag,
                count,
                len,
                paa,
                weights,
                rows,
                rows_filled: 0,
                half,
                half_filled: 0,
                paa_filled: 0,
                pairs: None,
                seen: (0, 0),
            });
            st.synchronize().map_err(drv("cuStreamSynchronize"))?;
            Ok(held)
        })
    }

    /// Copies series `first_row..first_row + values.len() / width` (leaf order) of `array`
    /// (width 16 for the PAA, `len` for the series) to the device; chunks of one array must
    /// arrive in order.
    pub(crate) fn search_batch_fill(
        &self,
        tag: u64,
        array: BatchArray,
        first_row: usize,
        values: Vec<f32>,
    ) -> Ticket<()> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = batch_entry(d, tag)
                .ok_or_else(|| DeviceError::Unsupported("a chunk before its upload".into()))?;
            let (width, dev, filled) = match array {
                BatchArray::Paa => (16, Some(&mut b.paa), &mut b.paa_filled),
                BatchArray::Series => (b.len as usize, b.rows.as_mut(), &mut b.rows_filled),
            };
            let dev =
                dev.ok_or_else(|| DeviceError::Unsupported("no room for the series".into()))?;
            let end = first_row * width + values.len();
            if first_row != *filled || !values.len().is_multiple_of(width) || end > dev.len() {
                return Err(DeviceError::Unsupported(format!(
                    "{array:?} chunk at row {first_row} out of order or out of bounds"
                )));
            }
            st.memcpy_htod(&values[..], &mut dev.slice_mut(first_row * width..end))
                .map_err(drv("cuMemcpyHtoD"))?;
            st.synchronize().map_err(drv("cuStreamSynchronize"))?;
            *filled = end / width;
            Ok(())
        })
    }

    /// Copies the half-precision series `first_row..` (leaf order, binary16 bit patterns) to
    /// the device; chunks must arrive in order.
    pub(crate) fn search_batch_fill_half(
        &self,
        tag: u64,
        first_row: usize,
        values: Vec<u16>,
    ) -> Ticket<()> {
        self.run(move |d| {
            let st = d.stream.clone();
            let b = batch_entry(d, tag)
                .ok_or_else(|| DeviceError::Unsupported("a chunk before its upload".into()))?;
            let width = b.len as usize;
            let dev = b.half.as_mut().ok_or_else(|| {
                DeviceError::Unsupported("no room for the half-precision series".into())
            })?;
            let end = first_row * width + values.len();
            if first_row != b.half_filled || !values.len().is_multiple_of(width) || end > dev.len()
            {
                return Err(DeviceError::Unsupported(format!(
                    "half-precision chunk at row {first_row} out of order or out of bounds"
                )));
            }
            st.memcpy_htod(&values[..], &mut dev.slice_mut(first_row * width..end))
                .map_err(drv("cuMemcpyHtoD"))?;
            st.synchronize().map_err(drv("cuStreamSynchronize"))?;
            b.half_filled = end / width;
            Ok(())
        })
    }

    /// Runs one batch (see [`BatchReport`]): the queries in ranges of at most
    /// `BATCH_QUERIES_PER_LAUNCH` (2,048), fewer once earlier ranges of the index showed how
    /// many survivors a query has on average (a range is sized to fill half the pair list); a
    /// range whose survivors overflow the pair list is split in halves, down to single
    /// queries, which are reported in `overflowed`.
    pub(crate) fn search_batch(&self, job: BatchJob) -> Ticket<BatchReport> {
        self.run(move |d| {
            let filter = d.function(&SEARCH, "search_batch_filter")?;
            let refine_f = d.function(&SEARCH, "search_batch_refine")?;
            let half_f = d.function(&SEARCH, "search_batch_refine_half")?;
            let sms = d.info.multiprocessors.max(1);
            let st = d.stream.clone();
            let b = batch_entry(d, job.tag)
                .filter(|b| b.paa_filled == b.count as usize)
                .ok_or_else(|| {
                    DeviceError::Unsupported(
                        "a batch of an index whose data the device does not hold (never \
                         loaded, or dropped to make room for another index's)"
                            .into(),
                    )
                })?;
            let nq = job.thresh.len();
            let held = b.held();
            let refine = held == SeriesOnDevice::Exact;
            let half = held == SeriesOnDevice::Half;
            if nq == 0
                || job.qpaa.len() != nq * 16
                || ((refine || half) && job.qrows.len() != nq * b.len as usize)
                || (refine && job.limit.len() != nq)
                || (half && job.thresh2.len() != nq)
            {
                return Err(DeviceError::Unsupported("a malformed batch job".into()));
            }
            let alloc = drv("cuMemAlloc");
            if b.pairs.is_none() {
                let cap = (b.count as usize)
                    .saturating_mul(16)
                    .clamp(1 << 20, BATCH_PAIR_CAPACITY);
                b.pairs = Some(PairBuffers {
                    q: st.alloc_zeros::<u32>(cap).map_err(&alloc)?,
                    pos: st.alloc_zeros::<u32>(cap).map_err(&alloc)?,
                    out_q: st.alloc_zeros::<u32>(cap).map_err(&alloc)?,
                    out_pos: st.alloc_zeros::<u32>(cap).map_err(&alloc)?,
                    out_sq: st.alloc_zeros::<f64>(cap).map_err(&alloc)?,
                    count: st.alloc_zeros::<u32>(2).map_err(&alloc)?,
                });
            }
            let up = drv("cuMemcpyHtoD");
            let down = drv("cuMemcpyDtoH");
            let qpaa = st.clone_htod(&job.qpaa[..]).map_err(&up)?;
            let thresh = st.clone_htod(&job.thresh[..]).map_err(&up)?;
            let mut per_query = st.alloc_zeros::<u32>(nq).map_err(&alloc)?;
            let qrows = if refine || half {
                Some(st.clone_htod(&job.qrows[..]).map_err(&up)?)
            } else {
                None
            };
            let limit = if refine {
                Some(st.clone_htod(&job.limit[..]).map_err(&up)?)
            } else {
                None
            };
            let thresh2 = if half {
                Some(st.clone_htod(&job.thresh2[..]).map_err(&up)?)
            } else {
                None
            };
            let Some(p) = b.pairs.as_mut() else {
                return Err(DeviceError::Unsupported("no pair buffers".into()));
            };
            let cap = launch::u32_of("pair capacity", p.q.len())?;
            let mut report = BatchReport {
                survivors: vec![0; nq],
                ..BatchReport::default()
            };
            // Ranges of queries expected to fill at most half the pair list (from what earlier
            // ranges of this index kept), at most BATCH_QUERIES_PER_LAUNCH.
            let per_launch = if b.seen.0 > 0 {
                let mean = b.seen.0 as f64 / b.seen.1 as f64;
                ((f64::from(cap) / 2.0 / mean) as usize).clamp(1, BATCH_QUERIES_PER_LAUNCH)
            } else {
                BATCH_QUERIES_PER_LAUNCH
            };
            let mut ranges: Vec<(usize, usize)> = (0..nq)
                .step_by(per_launch)
                .map(|a| (a, (a + per_launch).min(nq)))
                .rev()
                .collect();
            let grid_cap = sms * BATCH_BLOCKS_PER_SM;
            let timer = Timer::start(&st)?;
            while let Some((a, z)) = ranges.pop() {
                let n_here = launch::u32_of("queries", z - a)?;
                st.memset_zeros(&mut p.count).map_err(drv("cuMemsetD8"))?;
                st.memset_zeros(&mut per_query.slice_mut(a..z))
                    .map_err(drv("cuMemsetD8"))?;
                let blocks = b.count.div_ceil(BATCH_BLOCK).clamp(1, grid_cap);
                {
                    let (qp, th) = (qpaa.slice(a * 16..z * 16), thresh.slice(a..z));
                    let mut pq = per_query.slice_mut(a..z);
                    let mut l = st.launch_builder(&filter);
                    l.arg(&b.paa)
                        .arg(&b.count)
                        .arg(&b.weights)
                        .arg(&qp)
                        .arg(&th);
                    l.arg(&n_here).arg(&mut p.q).arg(&mut p.pos).arg(&cap);
                    l.arg(&mut p.count).arg(&mut pq);
                    // SAFETY: matches `search_batch_filter` (paa f32* [count * 16], count u32,
                    // weights f32* [16], qpaa f32* [nq * 16], thresh f32* [nq], nq u32, out_q and
                    // out_pos u32* [cap], cap u32, out_count u32* [1], per_query u32* [nq]);
                    // the kernel writes a slot only below cap and reads queries below nq.
                    unsafe { l.launch(launch::blocks(blocks, BATCH_BLOCK)) }
                        .map_err(drv("cuLaunchKernel"))?;
                }
                report.filter_launches += 1;
                let n = st.clone_dtoh(&p.count.slice(..1)).map_err(&down)?[0];
                if n > cap {
                    if z - a > 1 {
                        let mid = a + (z - a) / 2;
                        ranges.push((mid, z));
                        ranges.push((a, mid));
                    } else {
                        report.overflowed.push(a as u32);
                    }
                    continue;
                }
                let survivors = st.clone_dtoh(&per_query.slice(a..z)).map_err(&down)?;
                report.survivors[a..z].copy_from_slice(&survivors);
                b.seen = (b.seen.0 + u64::from(n), b.seen.1 + (z - a) as u64);
                if n == 0 {
                    continue;
                }
                let n_us = n as usize;
                if let (true, Some(rows), Some(qrows), Some(limit)) =
                    (refine, b.rows.as_ref(), qrows.as_ref(), limit.as_ref())
                {
                    let (qr, lim) = (
                        qrows.slice(a * b.len as usize..z * b.len as usize),
                        limit.slice(a..z),
                    );
                    let mut kept = p.count.slice_mut(1..2);
                    let blocks = n.div_ceil(BATCH_BLOCK).clamp(1, grid_cap);
                    let mut l = st.launch_builder(&refine_f);
                    l.arg(rows)
                        .arg(&b.len)
                        .arg(&qr)
                        .arg(&p.q)
                        .arg(&p.pos)
                        .arg(&n);
                    l.arg(&lim)
                        .arg(&mut p.out_q)
                        .arg(&mut p.out_pos)
                        .arg(&mut p.out_sq);
                    l.arg(&mut kept);
                    // SAFETY: matches `search_batch_refine` (rows f32* [count * len], len u32,
                    // qrows f32* [nq * len], pair_q and pair_pos u32* [n], n u32, limit f64*
                    // [nq], out_q and out_pos u32* [cap], out_sq f64* [cap], out_count u32*
                    // [1]); the pairs were written by the filter (q < nq, pos < count) and at
                    // most n <= cap are kept.
                    unsafe { l.launch(launch::blocks(blocks, BATCH_BLOCK)) }
                        .map_err(drv("cuLaunchKernel"))?;
                    let kept = st.clone_dtoh(&p.count.slice(1..2)).map_err(&down)?[0] as usize;
                    if kept > 0 {
                        append_pairs(&st, &p.out_q, &p.out_pos, kept, a, &mut report)?;
                        report
                            .sq
                            .extend(st.clone_dtoh(&p.out_sq.slice(..kept)).map_err(&down)?);
                    }
                } else if let (true, Some(rows16), Some(qrows), Some(thresh2)) =
                    (half, b.half.as_ref(), qrows.as_ref(), thresh2.as_ref())
                {
                    let (qr, th2) = (
                        qrows.slice(a * b.len as usize..z * b.len as usize),
                        thresh2.slice(a..z),
                    );
                    let mut kept = p.count.slice_mut(1..2);
                    let blocks = n.div_ceil(BATCH_BLOCK).clamp(1, grid_cap);
                    let mut l = st.launch_builder(&half_f);
                    l.arg(rows16)
                        .arg(&b.len)
                        .arg(&qr)
                        .arg(&p.q)
                        .arg(&p.pos)
                        .arg(&n);
                    l.arg(&th2)
                        .arg(&mut p.out_q)
                        .arg(&mut p.out_pos)
                        .arg(&mut kept);
                    // SAFETY: matches `search_batch_refine_half` (rows16 u16* [count * len],
                    // len u32, qrows f32* [nq * len], pair_q and pair_pos u32* [n], n u32,
                    // thresh2 f32* [nq], out_q and out_pos u32* [cap], out_count u32* [1]); the
                    // pairs were written by the filter (q < nq, pos < count) and at most
                    // n <= cap are kept.
                    unsafe { l.launch(launch::blocks(blocks, BATCH_BLOCK)) }
                        .map_err(drv("cuLaunchKernel"))?;
                    let kept = st.clone_dtoh(&p.count.slice(1..2)).map_err(&down)?[0] as usize;
                    report.half_survivors += kept as u64;
                    if kept > 0 {
                        append_pairs(&st, &p.out_q, &p.out_pos, kept, a, &mut report)?;
                    }
                } else {
                    append_pairs(&st, &p.q, &p.pos, n_us, a, &mut report)?;
                }
            }
            let timed = timer.stop(&st)?;
            st.synchronize().map_err(drv("cuStreamSynchronize"))?;
            report.device_ms = f64::from(timed.ms()?);
            Ok(report)
        })
    }
}
