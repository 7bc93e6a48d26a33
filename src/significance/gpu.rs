//! The significance jobs on the GPUs: where `significance` meets the device layer directly.
//!
//! A [`GpuCounter`] counts the recording and the surrogates generated on its devices
//! (`episode::gpu`); the jobs here borrow its device workers (`GpuCounter::worker`) for work
//! that is the significance tests' own, over batches of surrogates laid side by side as one
//! stream (`device::episodes::floor`):
//!
//! * [`floor_job`] and [`floor_pass`]: the `spectrum` search's one-floor pass (host reference
//!   `spectrum::max_count_at_floor`), which `Engine::spectrum_maxima` runs per batch of
//!   surrogates;
//! * [`count_batch`]: a list's exact counts in every surrogate of a batch, which
//!   `Engine::sums_of_counts` runs per batch;
//! * [`hybrid_counts`]: `guided`'s extensions counted in hybrids (their added unit's train
//!   replaced by its surrogates, generated on the device), which `Engine::hybrid_counts`
//!   runs, the surrogates shared out among the counter's devices.
//!
//! A floor job thus goes from here to `device::episodes::floor` and back; the counter's
//! counted stream is left as it is.

use std::sync::Arc;

use super::spectrum::pair_candidates_at;
use crate::device::{BatchCountJob, DeviceError, FloorGap, FloorJob, FloorResult, HybridJob};
use crate::episode::count::TypeIndex;
use crate::episode::gpu::{ENDS_JOB_ROOM, ends_jobs};
use crate::episode::{Episode, GpuCounter, MinerConfig};
use crate::event::EventStream;

/// The device job of the one-floor pass (`crate::device::episodes::floor`, whose host
/// reference is [`max_count_at_floor`](super::spectrum::max_count_at_floor)) at `floor` for a
/// batch of streams, each given with its [`TypeIndex`] and its single counts (shape
/// `[types]`): their times grouped by type side by side, and each one's pairs at the floor
/// ([`pair_candidates_at`]). `None` when the streams' types' event counts differ (one set of
/// offsets serves the batch; surrogates keep every unit's count) or there is no stream.
#[must_use]
pub fn floor_job(
    config: &MinerConfig,
    floor: u64,
    batch: &[(&EventStream, &TypeIndex, &[u64])],
) -> Option<FloorJob> {
    use rayon::prelude::*;
    let (_, first, _) = batch.first()?;
    let offsets: Vec<u32> = first
        .offsets()
        .iter()
        .map(|&o| u32::try_from(o).ok())
        .collect::<Option<_>>()?;
    if batch
        .iter()
        .any(|(_, index, _)| index.offsets() != first.offsets())
    {
        return None;
    }
    let pairs = batch
        .par_iter()
        .map(|(x, index, c1)| {
            pair_candidates_at(x, index, config, c1, floor)
                .into_iter()
                .map(|(a, v, b)| (a.0, u32::try_from(v).unwrap_or(u32::MAX), b.0))
                .collect()
        })
        .collect();
    let mut times = Vec::with_capacity(batch.len() * first.all_times().len());
    for (_, index, _) in batch {
        times.extend_from_slice(index.all_times());
    }
    Some(FloorJob {
        offsets,
        times,
        gaps: config
            .intervals
            .iter()
            .map(|iv| FloorGap {
                low_up: iv.low_by_time(true),
                low: iv.low_by_time(false),
                high: iv.high(),
            })
            .collect(),
        pairs,
        floor: u32::try_from(floor).unwrap_or(u32::MAX),
        max_level: config.max_level,
    })
}

/// Runs the `spectrum` search's one-floor pass for a batch of surrogates
/// (`crate::device::episodes::floor`) on `gpu`'s device `worker % devices` (a counter has a
/// worker on every GPU it uses); the counted stream is left as it is.
///
/// # Errors
/// [`DeviceError`] for a malformed job or a failing device.
pub fn floor_pass(
    gpu: &GpuCounter,
    job: Arc<FloorJob>,
    worker: usize,
) -> Result<FloorResult, DeviceError> {
    gpu.worker(worker).floor_pass(job).wait()
}

/// The exact counts of `list` (episodes of two or more nodes, any lengths) in each of a
/// batch of streams that share one set of type offsets (`offsets`, `[types + 1]`; their
/// times grouped by type side by side in `times`, `[streams × events]`, seconds), counted
/// together on `gpu`'s device `worker % devices` (`crate::device::episodes::floor`: one
/// launch per length for the whole batch), and added to `gpu`'s running totals. Returns the
/// counts stream by stream, each in `list`'s order: shape `[streams × list]`.
///
/// # Errors
/// [`DeviceError::Unsupported`] for an episode of fewer than two nodes or a malformed
/// batch; a failing device.
pub fn count_batch(
    gpu: &GpuCounter,
    list: &[Episode],
    offsets: Vec<u32>,
    times: Vec<f64>,
    streams: usize,
    worker: usize,
) -> Result<Vec<u64>, DeviceError> {
    if list.iter().any(|e| e.len() < 2) {
        return Err(DeviceError::Unsupported(
            "a batch count of single-node episodes".into(),
        ));
    }
    let events_of = |t: u32| -> u64 {
        let t = t as usize;
        match (offsets.get(t), offsets.get(t + 1)) {
            (Some(&a), Some(&b)) => u64::from(b.saturating_sub(a)),
            _ => 0,
        }
    };
    let mut by_length: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (i, e) in list.iter().enumerate() {
        by_length.entry(e.len()).or_default().push(i);
    }
    let room = (ENDS_JOB_ROOM / streams.max(1) as u64).max(1);
    let mut jobs = Vec::new();
    let mut positions = Vec::new();
    for members in by_length.values() {
        let refs: Vec<&Episode> = members.iter().map(|&i| &list[i]).collect();
        for (job, at) in ends_jobs(&refs, events_of, room) {
            jobs.push(job);
            positions.push(at.into_iter().map(|p| members[p]).collect::<Vec<_>>());
        }
    }
    let job = BatchCountJob {
        offsets,
        times,
        streams,
        jobs,
    };
    let (counts, ms) = gpu.worker(worker).count_batch(Arc::new(job)).wait()?;
    let mut out = vec![0u64; streams * list.len()];
    for (part, at) in counts.iter().zip(&positions) {
        let n = at.len();
        for k in 0..streams {
            for (j, &i) in at.iter().enumerate() {
                out[k * list.len() + i] = u64::from(part[k * n + j]);
            }
        }
    }
    gpu.record_ends((streams * list.len()) as u64, ms);
    Ok(out)
}

/// The counts of `job` (`crate::device::episodes::hybrids`: each hypothesis in each
/// surrogate of `job.surrogates`), the surrogates shared out in consecutive ranges among
/// `gpu`'s devices, added to `gpu`'s running totals. Shape `[hyps × surrogates]`, row by
/// hypothesis, equal to the host's counts of the same hybrids (`guided`'s `hybrid_group`).
///
/// # Errors
/// [`DeviceError::Unsupported`] for a malformed job; a failing device.
pub fn hybrid_counts(gpu: &GpuCounter, job: HybridJob) -> Result<Vec<u32>, DeviceError> {
    let hyps = job.hyps.slot.len();
    let (from, to) = (
        job.surrogates.start,
        job.surrogates.end.max(job.surrogates.start),
    );
    let total = (to - from) as usize;
    let devices = gpu.worker_count().clamp(1, total.max(1));
    let share = total.div_ceil(devices) as u64;
    let mut tickets = Vec::with_capacity(devices);
    for w in 0..devices {
        let a = (from + w as u64 * share).min(to);
        let b = (a + share).min(to);
        let mut part = job.clone();
        part.surrogates = a..b;
        tickets.push((
            (b - a) as usize,
            gpu.worker(w).hybrid_counts(Arc::new(part)),
        ));
    }
    let mut out = vec![0u32; hyps * total];
    let (mut at, mut ms) = (0usize, 0f32);
    for (n, ticket) in tickets {
        let part = ticket.wait()?;
        for h in 0..hyps {
            out[h * total + at..h * total + at + n].copy_from_slice(&part.counts[h * n..h * n + n]);
        }
        at += n;
        ms += part.kernel_ms;
    }
    gpu.record_ends((hyps * total) as u64, ms);
    Ok(out)
}
