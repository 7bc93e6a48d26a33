//! Exact counts from the prefixes' occurrence ends (`kernels/ends.cu`; the host's
//! `episode::ends`, count for count): each prefix level built on the device from the one
//! before, then each candidate counted from its prefix's ends, on the counted stream or on
//! any stream grouped by type (`count_by_ends_on`, which the floor pass uses on a batch of
//! surrogates).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, PushKernelArg};

use super::{BatchCounts, Csr, EpisodeWorker, Episodes, THREADS_PER_BLOCK, upload};
use crate::device::DeviceError;
use crate::device::kernels::ENDS;
use crate::device::launch::{self, Timer};
use crate::device::worker::{Device, Ticket};

/// One level of an [`EndsJob`]: items `α·x`, each the extension of a parent `α` (an item of
/// the level before, or at the first level the single node `last`) by type `x` with a gap.
///
/// Shapes: every field `[items]`. `low` is the gap's `Interval::low_by_time` (the largest
/// delay that does not fit), `high` its largest fitting delay, seconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndsLevel {
    /// Each item's parent: an index into the previous level (unused at the first level).
    pub parent: Vec<u32>,
    /// The parent's last type.
    pub last: Vec<u32>,
    /// The appended type.
    pub x: Vec<u32>,
    /// Largest non-fitting delay of the appended gap, seconds.
    pub low: Vec<f64>,
    /// Largest fitting delay of the appended gap, seconds.
    pub high: Vec<f64>,
}

impl EndsLevel {
    /// Number of items.
    #[must_use]
    pub fn len(&self) -> usize {
        self.x.len()
    }

    /// True when the level has no item.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Appends an item.
    pub fn push(&mut self, parent: u32, last: u32, x: u32, low: f64, high: f64) {
        self.parent.push(parent);
        self.last.push(last);
        self.x.push(x);
        self.low.push(low);
        self.high.push(high);
    }
}

/// Exact counts of candidates from the occurrence ends of their prefixes, on the counted
/// stream (`kernels/ends.cu`; the host's `episode::ends`, count for count): the ends of each
/// prefix level are built on the device from the level before (the first level from its
/// single nodes), one thread per event of each prefix's last type, then each candidate is
/// counted from its prefix's ends (one thread per candidate).
/// A prefix shared by several candidates is built once.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndsJob {
    /// The prefix levels, shortest first (2 nodes, 3 nodes, …); empty for pairs.
    pub prefixes: Vec<EndsLevel>,
    /// The candidates: parents in the last prefix level (the single node `last` when there
    /// is none).
    pub candidates: EndsLevel,
}
impl EpisodeWorker {
    /// The exact counts of `job`'s candidates (see [`EndsJob`]) on the counted stream.
    pub fn count_by_ends(&self, job: Arc<EndsJob>) -> Ticket<BatchCounts> {
        self.worker.run(move |d| count_by_ends(d, &job))
    }
}

/// Events per chunk when a prefix level's flagged ends are packed (`ends_chunk_*` in
/// `kernels/ends.cu`): each chunk is one thread's serial work.
const ENDS_CHUNK: u32 = 64;

/// Runs [`EndsJob`] (`kernels/ends.cu`): each prefix level's ends into buffers with room
/// for every event of its items' last types, then the candidates' counts.
fn count_by_ends(dev: &mut Device, job: &EndsJob) -> Result<BatchCounts, DeviceError> {
    let s = dev.stream.clone();
    let fns = EndsFunctions::of(dev)?;
    let data =
        dev.slot::<Episodes>().data.as_ref().ok_or_else(|| {
            DeviceError::Unsupported("a count before the stream was loaded".into())
        })?;
    count_by_ends_on(&s, &fns, &Csr::of(data), job)
}

/// The `kernels/ends.cu` functions [`count_by_ends_on`] launches.
pub(super) struct EndsFunctions {
    count: CudaFunction,
    level: CudaFunction,
    chunk_count: CudaFunction,
    chunk_scan: CudaFunction,
    chunk_pack: CudaFunction,
}

impl EndsFunctions {
    /// Loads (once per device) and returns the ends kernels.
    pub(super) fn of(dev: &mut Device) -> Result<Self, DeviceError> {
        Ok(Self {
            count: dev.function(&ENDS, "ends_count")?,
            level: dev.function(&ENDS, "ends_level")?,
            chunk_count: dev.function(&ENDS, "ends_chunk_count")?,
            chunk_scan: dev.function(&ENDS, "ends_chunk_scan")?,
            chunk_pack: dev.function(&ENDS, "ends_chunk_pack")?,
        })
    }
}

/// [`count_by_ends`] on any stream grouped by type (`data`): the counted stream, or a batch
/// of surrogates laid side by side as one stream of `surrogates × types` types
/// (`device::episodes::floor`).
pub(super) fn count_by_ends_on(
    s: &Arc<CudaStream>,
    fns: &EndsFunctions,
    data: &Csr<'_>,
    job: &EndsJob,
) -> Result<BatchCounts, DeviceError> {
    let s = s.clone();
    let (count_f, level_f, chunk_count_f, chunk_scan_f, chunk_pack_f) = (
        &fns.count,
        &fns.level,
        &fns.chunk_count,
        &fns.chunk_scan,
        &fns.chunk_pack,
    );
    let drv = launch::drv;
    let types = data.host_offsets.len().saturating_sub(1);
    let levels: Vec<&EndsLevel> = job.prefixes.iter().chain([&job.candidates]).collect();
    let malformed = levels.iter().enumerate().any(|(d, l)| {
        let n = l.len();
        let parents = if d == 0 { 0 } else { levels[d - 1].len() };
        l.parent.len() != n
            || l.last.len() != n
            || l.low.len() != n
            || l.high.len() != n
            || l.last.iter().chain(&l.x).any(|&t| t as usize >= types)
            || (d > 0
                && (0..n).any(|i| {
                    let p = l.parent[i] as usize;
                    p >= parents || levels[d - 1].x[p] != l.last[i]
                }))
    });
    if malformed {
        return Err(DeviceError::Unsupported("a malformed ends job".into()));
    }
    let m = job.candidates.len();
    if m == 0 {
        return Ok(BatchCounts {
            counts: Vec::new(),
            kernel_ms: 0.0,
        });
    }
    let events =
        |t: u32| u64::from(data.host_offsets[t as usize + 1] - data.host_offsets[t as usize]);
    let (up, alloc) = (drv("cuMemcpyHtoD"), drv("cuMemAlloc"));
    let grid = |items: u32| launch::cover(items.max(1), THREADS_PER_BLOCK);
    // Uploads of every level, and the prefix levels' buffers, before the timed region.
    struct Level {
        items: u32,
        parent: CudaSlice<u32>,
        last: CudaSlice<u32>,
        x: CudaSlice<u32>,
        low: CudaSlice<f64>,
        high: CudaSlice<f64>,
    }
    let mut uploaded = Vec::with_capacity(levels.len());
    for l in &levels {
        uploaded.push(Level {
            items: launch::u32_of("ends items", l.len())?,
            parent: upload(&s, &l.parent).map_err(&up)?,
            last: upload(&s, &l.last).map_err(&up)?,
            x: upload(&s, &l.x).map_err(&up)?,
            low: upload(&s, &l.low).map_err(&up)?,
            high: upload(&s, &l.high).map_err(&up)?,
        });
    }
    struct Buffers {
        idx: CudaSlice<u32>,
        starts: CudaSlice<f64>,
        off: CudaSlice<u64>,
        len: CudaSlice<u32>,
        /// `off` as `u32` (the level's threads, one per event of an item's x), and their number.
        item_off: (CudaSlice<u32>, u32),
        /// Per event: whether it ends an occurrence, and its latest start, before packing.
        flags: CudaSlice<u32>,
        unpacked: CudaSlice<f64>,
        /// Prefix sums of the items' chunks of [`ENDS_CHUNK`] events, and their number.
        chunk_off: (CudaSlice<u32>, u32),
        /// Per chunk: its flagged events, then its first packed position.
        counts: CudaSlice<u32>,
        bases: CudaSlice<u32>,
    }
    let mut buffers = Vec::with_capacity(job.prefixes.len());
    for l in &job.prefixes {
        let mut off = Vec::with_capacity(l.len() + 1);
        let mut total = 0u64;
        off.push(0u64);
        for &x in &l.x {
            total += events(x);
            off.push(total);
        }
        let room = usize::try_from(total.max(1))
            .map_err(|_| DeviceError::Unsupported(format!("{total} ends in one job")))?;
        let narrow = off
            .iter()
            .map(|&o| launch::u32_of("prefix ends in one job", o as usize))
            .collect::<Result<Vec<u32>, _>>()?;
        let threads = *narrow.last().unwrap_or(&0);
        let item_off = (upload(&s, &narrow).map_err(&up)?, threads);
        let mut chunk_off = Vec::with_capacity(l.len() + 1);
        chunk_off.push(0u32);
        for w in narrow.windows(2) {
            let last = *chunk_off.last().unwrap_or(&0);
            chunk_off.push(last + (w[1] - w[0]).div_ceil(ENDS_CHUNK));
        }
        let chunks = *chunk_off.last().unwrap_or(&0);
        buffers.push(Buffers {
            idx: s.alloc_zeros::<u32>(room).map_err(&alloc)?,
            starts: s.alloc_zeros::<f64>(room).map_err(&alloc)?,
            off: upload(&s, &off).map_err(&up)?,
            len: s.alloc_zeros::<u32>(l.len().max(1)).map_err(&alloc)?,
            item_off,
            flags: s.alloc_zeros::<u32>(room).map_err(&alloc)?,
            unpacked: s.alloc_zeros::<f64>(room).map_err(&alloc)?,
            chunk_off: (upload(&s, &chunk_off).map_err(&up)?, chunks),
            counts: s
                .alloc_zeros::<u32>(chunks.max(1) as usize)
                .map_err(&alloc)?,
            bases: s
                .alloc_zeros::<u32>(chunks.max(1) as usize)
                .map_err(&alloc)?,
        });
    }
    let mut out = s.alloc_zeros::<u32>(m).map_err(&alloc)?;
    let null: u64 = 0;
    /// The arguments `ends_level` and `ends_count` start with: the stream, the level's
    /// items, and the previous level's ends (null pointers at the first level).
    fn item_args<'a>(
        s: &'a Arc<CudaStream>,
        f: &'a CudaFunction,
        data: &'a Csr<'a>,
        l: &'a Level,
        prev: Option<&'a Buffers>,
        null: &'a u64,
    ) -> cudarc::driver::LaunchArgs<'a> {
        let mut b = s.launch_builder(f);
        b.arg(data.times)
            .arg(data.offsets)
            .arg(&l.items)
            .arg(&l.parent)
            .arg(&l.last)
            .arg(&l.x)
            .arg(&l.low)
            .arg(&l.high);
        match prev {
            Some(p) => b.arg(&p.idx).arg(&p.starts).arg(&p.off).arg(&p.len),
            None => b.arg(null).arg(null).arg(null).arg(null),
        };
        b
    }
    let timer = Timer::start(&s)?;
    for (d, l) in uploaded.iter().enumerate() {
        let counting = d == uploaded.len() - 1;
        if !counting {
            // A prefix level, data-parallel: flags and starts per event, then packed.
            let (before, rest) = buffers.split_at_mut(d);
            let o = &mut rest[0];
            let (item_off, threads) = &o.item_off;
            let mut b = item_args(&s, level_f, data, l, before.last(), &null);
            b.arg(&mut o.flags)
                .arg(&mut o.unpacked)
                .arg(&o.off)
                .arg(item_off);
            // SAFETY: matches `ends_level` in kernels/ends.cu (times f64*, offsets u32*
            // [types + 1], items u32, parent/last/x u32* [items], low/high f64* [items], the
            // previous level's idx u32*, starts f64*, off u64* [parents + 1], len u32*
            // [parents] (null at the first level, where no parent is read), flags u32* and
            // starts f64* [off[items]], out_off u64* [items + 1], item_off u32* [items + 1],
            // the same sums as out_off). Types and parents were checked above (a parent's
            // last type is the item's), each thread writes its own element of its item's
            // room, and threads past item_off[items] return first.
            unsafe { b.launch(launch::cover((*threads).max(1), THREADS_PER_BLOCK)) }
                .map_err(drv("cuLaunchKernel"))?;
            let (chunk_off, chunks) = &o.chunk_off;
            let chunk_grid = launch::cover((*chunks).max(1), THREADS_PER_BLOCK);
            let mut b = s.launch_builder(chunk_count_f);
            b.arg(&l.items)
                .arg(item_off)
                .arg(chunk_off)
                .arg(&ENDS_CHUNK)
                .arg(&o.flags)
                .arg(&o.off)
                .arg(&mut o.counts);
            // SAFETY: matches `ends_chunk_count` (items u32, item_off u32* [items + 1],
            // chunk_off u32* [items + 1], chunk u32, flags u32* [off[items]], out_off u64*
            // [items + 1], counts u32* [chunks]); chunk_off holds ceil(events / chunk) per
            // item, so every chunk lies inside its item's room; threads past the last chunk
            // return first.
            unsafe { b.launch(chunk_grid) }.map_err(drv("cuLaunchKernel"))?;
            let mut b = s.launch_builder(chunk_scan_f);
            b.arg(&l.items)
                .arg(chunk_off)
                .arg(&o.counts)
                .arg(&mut o.bases)
                .arg(&mut o.len);
            // SAFETY: matches `ends_chunk_scan` (items u32, chunk_off u32* [items + 1],
            // counts u32* [chunks], bases u32* [chunks], out_len u32* [items]).
            unsafe { b.launch(grid(l.items)) }.map_err(drv("cuLaunchKernel"))?;
            let mut b = s.launch_builder(chunk_pack_f);
            b.arg(&l.items)
                .arg(item_off)
                .arg(chunk_off)
                .arg(&ENDS_CHUNK)
                .arg(&o.flags)
                .arg(&o.unpacked)
                .arg(&o.off)
                .arg(&o.bases)
                .arg(&mut o.idx)
                .arg(&mut o.starts);
            // SAFETY: matches `ends_chunk_pack` (items, item_off, chunk_off, chunk, flags u32*
            // and starts f64* [off[items]], out_off u64* [items + 1], bases u32* [chunks],
            // out_idx u32* and out_starts f64* [off[items]]); a chunk writes from its base,
            // at most its flagged events, all inside its item's room (bases sum the earlier
            // chunks' flags).
            unsafe { b.launch(chunk_grid) }.map_err(drv("cuLaunchKernel"))?;
            continue;
        }
        let mut b = item_args(&s, count_f, data, l, buffers.last(), &null);
        b.arg(&mut out);
        // SAFETY: matches `ends_count` in kernels/ends.cu (times, offsets, items u32,
        // parent/last/x u32* [items], low/high f64* [items], the last prefix level's idx u32*,
        // starts f64*, off u64* [parents + 1], len u32* [parents] (null for pairs, whose
        // parents are single nodes), count u32* [items]); checked as above, threads with
        // p >= items return first.
        unsafe { b.launch(grid(l.items)) }.map_err(drv("cuLaunchKernel"))?;
    }
    let timed = timer.stop(&s)?;
    let counts = s.clone_dtoh(&out).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = timed.ms()?;
    Ok(BatchCounts { counts, kernel_ms })
}
