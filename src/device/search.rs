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

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::DeviceError;
use super::kernels::SEARCH;
use super::launch::{self, drv};
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
pub const TABLE_LEN: usize = 16 * 256;

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
pub type Threshold = Box<dyn Fn() -> Option<f64> + Send>;
/// The publish callback of a job: chunk number, survivors' positions, their squared bounds.
pub type Publish = Box<dyn FnMut(usize, Vec<u32>, Vec<f64>) + Send>;

/// The lower bounds of one query.
pub struct LowerBoundJob {
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
pub struct LowerBoundReport {
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
    pub fn search_tag(&self) -> Ticket<Option<u64>> {
        self.run(|d| Ok(buffers(d).as_ref().map(|b| b.tag)))
    }

    /// Uploads a leaf-ordered iSAX array (`[words * 16]` bytes) tagged `tag`, replacing any
    /// previous one.
    pub fn search_load(&self, tag: u64, sax: Arc<Vec<u8>>) -> Ticket<()> {
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
    pub fn search_lower_bounds(&self, job: LowerBoundJob) -> Ticket<LowerBoundReport> {
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
