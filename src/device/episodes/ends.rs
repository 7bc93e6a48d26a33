//! Exact counts from the prefixes' occurrence ends (`kernels/ends.cu`; the host's
//! `episode::ends`, count for count): each prefix level built on the device from the one
//! before, then each candidate counted from its prefix's ends, on the counted stream or on
//! any stream grouped by type (`count_by_ends_on`, which the floor pass uses on a batch of
//! surrogates).

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream};

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
pub(crate) struct EndsLevel {
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
    pub(crate) fn len(&self) -> usize {
        self.x.len()
    }

    /// Appends an item.
    pub(crate) fn push(&mut self, parent: u32, last: u32, x: u32, low: f64, high: f64) {
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
pub(crate) struct EndsJob {
    /// The prefix levels, shortest first (2 nodes, 3 nodes, …); empty for pairs.
    pub prefixes: Vec<EndsLevel>,
    /// The candidates: parents in the last prefix level (the single node `last` when there
    /// is none).
    pub candidates: EndsLevel,
}
impl EpisodeWorker {
    /// The exact counts of `job`'s candidates (see [`EndsJob`]) on the counted stream.
    pub(crate) fn count_by_ends(&self, job: Arc<EndsJob>) -> Ticket<BatchCounts> {
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
    let timer = Timer::start(&s)?;
    for (d, l) in uploaded.iter().enumerate() {
        let (before, rest) = buffers.split_at_mut(d);
        let prev = before.last();
        if d + 1 < uploaded.len() {
            // A prefix level, data-parallel: flags and starts per event, then packed.
            let o = &mut rest[0];
            let (item_off, threads) = &o.item_off;
            let (chunk_off, chunks) = &o.chunk_off;
            let chunk_grid = launch::cover((*chunks).max(1), THREADS_PER_BLOCK);
            let level = EndsLevelArgs {
                times: data.times,
                offsets: data.offsets,
                items: &l.items,
                parent: &l.parent,
                last: &l.last,
                x: &l.x,
                low: &l.low,
                high: &l.high,
                prev_idx: prev.map(|p| &p.idx),
                prev_starts: prev.map(|p| &p.starts),
                prev_off: prev.map(|p| &p.off),
                prev_len: prev.map(|p| &p.len),
                flags: &mut o.flags,
                starts: &mut o.unpacked,
                out_off: &o.off,
                item_off,
            };
            // SAFETY: `level_f` is `ends_level`. Types and parents were checked above (a
            // parent's last type is the item's); flags and starts have room for every event of
            // the items' x (`out_off`), each thread writes its own element of its item's room,
            // and threads past item_off[items] return first; the previous level's buffers are
            // null at the first level, where no parent is read.
            unsafe {
                level.launch(
                    &s,
                    level_f,
                    launch::cover((*threads).max(1), THREADS_PER_BLOCK),
                )
            }?;
            let count = ChunkCountArgs {
                items: &l.items,
                item_off,
                chunk_off,
                chunk: &ENDS_CHUNK,
                flags: &o.flags,
                out_off: &o.off,
                counts: &mut o.counts,
            };
            // SAFETY: `chunk_count_f` is `ends_chunk_count`; chunk_off holds ceil(events /
            // chunk) per item, so every chunk lies inside its item's room; `counts` has one
            // element per chunk and threads past the last chunk return first.
            unsafe { count.launch(&s, chunk_count_f, chunk_grid) }?;
            let scan = ChunkScanArgs {
                items: &l.items,
                chunk_off,
                counts: &o.counts,
                bases: &mut o.bases,
                out_len: &mut o.len,
            };
            // SAFETY: `chunk_scan_f` is `ends_chunk_scan`; one thread per item, `bases` per
            // chunk and `out_len` per item.
            unsafe { scan.launch(&s, chunk_scan_f, grid(l.items)) }?;
            let pack = ChunkPackArgs {
                items: &l.items,
                item_off,
                chunk_off,
                chunk: &ENDS_CHUNK,
                flags: &o.flags,
                starts: &o.unpacked,
                out_off: &o.off,
                bases: &o.bases,
                out_idx: &mut o.idx,
                out_starts: &mut o.starts,
            };
            // SAFETY: `chunk_pack_f` is `ends_chunk_pack`; a chunk writes from its base, at
            // most its flagged events, all inside its item's room (bases sum the earlier
            // chunks' flags).
            unsafe { pack.launch(&s, chunk_pack_f, chunk_grid) }?;
            continue;
        }
        let counting = EndsCountArgs {
            times: data.times,
            offsets: data.offsets,
            items: &l.items,
            parent: &l.parent,
            last: &l.last,
            x: &l.x,
            low: &l.low,
            high: &l.high,
            prev_idx: prev.map(|p| &p.idx),
            prev_starts: prev.map(|p| &p.starts),
            prev_off: prev.map(|p| &p.off),
            prev_len: prev.map(|p| &p.len),
            count: &mut out,
        };
        // SAFETY: `count_f` is `ends_count`; checked as above (the last prefix level's buffers
        // null for pairs, whose parents are single nodes), `count` has one element per item and
        // threads with p >= items return first.
        unsafe { counting.launch(&s, count_f, grid(l.items)) }?;
    }
    let timed = timer.stop(&s)?;
    let counts = s.clone_dtoh(&out).map_err(drv("cuMemcpyDtoH"))?;
    let kernel_ms = timed.ms()?;
    Ok(BatchCounts { counts, kernel_ms })
}

launch::kernel_args! {
    /// The arguments of `ends_level` (`kernels/ends.cu`): `(const double* times, const
    /// unsigned* offsets, unsigned items, const unsigned* parent, const unsigned* last, const
    /// unsigned* x, const double* low, const double* high, const unsigned* prev_idx, const
    /// double* prev_starts, const synfire_u64* prev_off, const unsigned* prev_len, unsigned*
    /// flags, double* starts, const synfire_u64* out_off, const unsigned* item_off)`. Shapes:
    /// `parent`..`high` `[items]`; the previous level's `prev_idx`/`prev_starts` (its packed
    /// ends), `prev_off [parents + 1]`, `prev_len [parents]` (null at the first level);
    /// `flags`/`starts` `[out_off[items]]`; `out_off`/`item_off` `[items + 1]`.
    struct EndsLevelArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        items: &'a u32,
        parent: &'a CudaSlice<u32>,
        last: &'a CudaSlice<u32>,
        x: &'a CudaSlice<u32>,
        low: &'a CudaSlice<f64>,
        high: &'a CudaSlice<f64>,
        prev_idx: Option<&'a CudaSlice<u32>>,
        prev_starts: Option<&'a CudaSlice<f64>>,
        prev_off: Option<&'a CudaSlice<u64>>,
        prev_len: Option<&'a CudaSlice<u32>>,
        flags: &'a mut CudaSlice<u32>,
        starts: &'a mut CudaSlice<f64>,
        out_off: &'a CudaSlice<u64>,
        item_off: &'a CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `ends_count` (`kernels/ends.cu`): `(const double* times, const
    /// unsigned* offsets, unsigned items, const unsigned* parent, const unsigned* last, const
    /// unsigned* x, const double* low, const double* high, const unsigned* prev_idx, const
    /// double* prev_starts, const synfire_u64* prev_off, const unsigned* prev_len, unsigned*
    /// count)`. Shapes as [`EndsLevelArgs`]; `count [items]`.
    struct EndsCountArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        items: &'a u32,
        parent: &'a CudaSlice<u32>,
        last: &'a CudaSlice<u32>,
        x: &'a CudaSlice<u32>,
        low: &'a CudaSlice<f64>,
        high: &'a CudaSlice<f64>,
        prev_idx: Option<&'a CudaSlice<u32>>,
        prev_starts: Option<&'a CudaSlice<f64>>,
        prev_off: Option<&'a CudaSlice<u64>>,
        prev_len: Option<&'a CudaSlice<u32>>,
        count: &'a mut CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `ends_chunk_count` (`kernels/ends.cu`): `(unsigned items, const
    /// unsigned* item_off, const unsigned* chunk_off, unsigned chunk, const unsigned* flags,
    /// const synfire_u64* out_off, unsigned* counts)`. Shapes: `item_off`/`chunk_off`/`out_off`
    /// `[items + 1]`, `flags [out_off[items]]`, `counts [chunk_off[items]]`.
    struct ChunkCountArgs<'a> {
        items: &'a u32,
        item_off: &'a CudaSlice<u32>,
        chunk_off: &'a CudaSlice<u32>,
        chunk: &'a u32,
        flags: &'a CudaSlice<u32>,
        out_off: &'a CudaSlice<u64>,
        counts: &'a mut CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `ends_chunk_scan` (`kernels/ends.cu`): `(unsigned items, const
    /// unsigned* chunk_off, const unsigned* counts, unsigned* bases, unsigned* out_len)`.
    /// Shapes: `chunk_off [items + 1]`, `counts`/`bases` `[chunk_off[items]]`, `out_len
    /// [items]`.
    struct ChunkScanArgs<'a> {
        items: &'a u32,
        chunk_off: &'a CudaSlice<u32>,
        counts: &'a CudaSlice<u32>,
        bases: &'a mut CudaSlice<u32>,
        out_len: &'a mut CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `ends_chunk_pack` (`kernels/ends.cu`): `(unsigned items, const
    /// unsigned* item_off, const unsigned* chunk_off, unsigned chunk, const unsigned* flags,
    /// const double* starts, const synfire_u64* out_off, const unsigned* bases, unsigned*
    /// out_idx, double* out_starts)`. Shapes as [`ChunkCountArgs`]; `starts`, `out_idx`,
    /// `out_starts` `[out_off[items]]`, `bases [chunk_off[items]]`.
    struct ChunkPackArgs<'a> {
        items: &'a u32,
        item_off: &'a CudaSlice<u32>,
        chunk_off: &'a CudaSlice<u32>,
        chunk: &'a u32,
        flags: &'a CudaSlice<u32>,
        starts: &'a CudaSlice<f64>,
        out_off: &'a CudaSlice<u64>,
        bases: &'a CudaSlice<u32>,
        out_idx: &'a mut CudaSlice<u32>,
        out_starts: &'a mut CudaSlice<f64>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::kernels::ENDS;
    use crate::device::launch::kernel_params;

    /// Every launch wrapper pushes the parameters of its kernel's `.cu` signature, in order.
    #[test]
    fn wrappers_match_the_kernel_signatures() {
        assert_eq!(
            kernel_params(ENDS.source, "ends_level"),
            EndsLevelArgs::PARAMS,
            "ends_level"
        );
        assert_eq!(
            kernel_params(ENDS.source, "ends_count"),
            EndsCountArgs::PARAMS,
            "ends_count"
        );
        assert_eq!(
            kernel_params(ENDS.source, "ends_chunk_count"),
            ChunkCountArgs::PARAMS,
            "ends_chunk_count"
        );
        assert_eq!(
            kernel_params(ENDS.source, "ends_chunk_scan"),
            ChunkScanArgs::PARAMS,
            "ends_chunk_scan"
        );
        assert_eq!(
            kernel_params(ENDS.source, "ends_chunk_pack"),
            ChunkPackArgs::PARAMS,
            "ends_chunk_pack"
        );
    }
}
