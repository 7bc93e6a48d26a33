//! The threshold search's join bounds on the counted stream (`kernels/bounds.cu`; the
//! host's `episode::bound::join_bounds_cpu`, bit for bit), and the bit-set layout of a
//! launch's items ([`BoundItems`]) that the floor pass shares.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, PushKernelArg};

use super::{EpisodeWorker, Episodes, THREADS_PER_BLOCK, upload};
use crate::device::DeviceError;
use crate::device::kernels::BOUNDS;
use crate::device::launch;
use crate::device::worker::{Device, Ticket};

/// One round of join bounds of the threshold search (`significance::spectrum`) on the
/// counted stream: the ends of every prefix chain, the successors of every last pair, and
/// for every join the size of their intersection (`kernels/bounds.cu`; the host's
/// `episode::bound::join_bounds_cpu`, bit for bit).
///
/// Shapes: `chain_types [prefixes * nodes]` (row-major), `chain_low`/`chain_high`
/// `[prefixes * (nodes - 1)]` (seconds; `low` is the gap's `Interval::low_by_time`);
/// `pair_from`/`pair_to`/`pair_low`/`pair_high` `[pairs]`; `join_prefix`/`join_pair`
/// `[joins]`, where a join's pair starts at its prefix's last type.
#[derive(Clone, Debug, Default)]
pub struct BoundJob {
    /// Nodes per prefix (at least 2).
    pub nodes: usize,
    /// Prefix node types, row-major.
    pub chain_types: Vec<u32>,
    /// Prefix gaps' largest non-fitting delays, seconds.
    pub chain_low: Vec<f64>,
    /// Prefix gaps' largest fitting delays, seconds.
    pub chain_high: Vec<f64>,
    /// Last pairs' first types.
    pub pair_from: Vec<u32>,
    /// Last pairs' second types.
    pub pair_to: Vec<u32>,
    /// Last pairs' largest non-fitting delays, seconds.
    pub pair_low: Vec<f64>,
    /// Last pairs' largest fitting delays, seconds.
    pub pair_high: Vec<f64>,
    /// Each join's prefix (index into the prefixes).
    pub join_prefix: Vec<u32>,
    /// Each join's last pair (index into the pairs).
    pub join_pair: Vec<u32>,
}
impl EpisodeWorker {
    /// The join bounds of `job` (see [`BoundJob`]) on the counted stream, one per join.
    pub fn join_bounds(&self, job: Arc<BoundJob>) -> Ticket<Vec<u32>> {
        self.worker.run(move |d| join_bounds(d, &job))
    }
}

/// Words of a bit set over `n` events.
pub(super) fn words_of(n: u32) -> u32 {
    n.div_ceil(64)
}

/// Runs [`BoundJob`] (`kernels/bounds.cu`): the prefix chains step by step (each step's bits
/// over its node's events, the first step from every event of the first type), the pairs'
/// successor bits, then one and-count per join.
fn join_bounds(dev: &mut Device, job: &BoundJob) -> Result<Vec<u32>, DeviceError> {
    let s = dev.stream.clone();
    let step_f = dev.function(&BOUNDS, "bounds_chain_step")?;
    let succ_f = dev.function(&BOUNDS, "bounds_successors")?;
    let and_f = dev.function(&BOUNDS, "bounds_and_count")?;
    let drv = launch::drv;
    let data = dev.slot::<Episodes>().data.as_ref().ok_or_else(|| {
        DeviceError::Unsupported("join bounds before the stream was loaded".into())
    })?;
    let n = job.nodes;
    let prefixes = job.chain_types.len().checked_div(n).unwrap_or(0);
    let pairs = job.pair_from.len();
    let joins = job.join_prefix.len();
    let types = data.host_offsets.len().saturating_sub(1);
    let malformed =
        n < 2
            || job.chain_types.len() != prefixes * n
            || job.chain_low.len() != prefixes * (n - 1)
            || job.chain_high.len() != prefixes * (n - 1)
            || job.pair_to.len() != pairs
            || job.pair_low.len() != pairs
            || job.pair_high.len() != pairs
            || job.join_pair.len() != joins
            || job
                .chain_types
                .iter()
                .chain(&job.pair_from)
                .chain(&job.pair_to)
                .any(|&t| t as usize >= types)
            || job.join_prefix.iter().any(|&p| p as usize >= prefixes)
            || job.join_pair.iter().any(|&q| q as usize >= pairs)
            || job.join_prefix.iter().zip(&job.join_pair).any(|(&p, &q)| {
                job.chain_types[p as usize * n + n - 1] != job.pair_from[q as usize]
            });
    if malformed {
        return Err(DeviceError::Unsupported(
            "a malformed join-bound job".into(),
        ));
    }
    if joins == 0 {
        return Ok(Vec::new());
    }
    let events = |t: u32| data.host_offsets[t as usize + 1] - data.host_offsets[t as usize];
    let up = drv("cuMemcpyHtoD");
    let alloc = drv("cuMemAlloc");
    let grid = |total: u32| launch::cover(total.max(1), THREADS_PER_BLOCK);
    // The chains, one step at a time, each over its second types' events.
    let mut prev: Option<(CudaSlice<u64>, CudaSlice<u32>)> = None;
    for step in 1..n {
        let node =
            |d: usize| -> Vec<u32> { (0..prefixes).map(|p| job.chain_types[p * n + d]).collect() };
        let gap =
            |v: &[f64]| -> Vec<f64> { (0..prefixes).map(|p| v[p * (n - 1) + step - 1]).collect() };
        let (from, to): (Vec<u32>, Vec<u32>) = (node(step - 1), node(step));
        let it = BoundItems::upload(
            &s,
            &data.host_offsets,
            [&from, &to],
            [&gap(&job.chain_low), &gap(&job.chain_high)],
            &to,
        )?;
        let mut out = s.alloc_zeros::<u64>(it.words.max(1)).map_err(&alloc)?;
        let null: u64 = 0;
        let mut b = s.launch_builder(&step_f);
        b.arg(&data.times)
            .arg(&data.offsets)
            .arg(&it.items)
            .arg(&it.from)
            .arg(&it.to)
            .arg(&it.low)
            .arg(&it.high);
        match &prev {
            Some((bits, off)) => b.arg(bits).arg(off),
            None => b.arg(&null).arg(&null),
        };
        b.arg(&mut out).arg(&it.word_off).arg(&it.item_off);
        // SAFETY: matches `bounds_chain_step` (times f64*, offsets u32*, items u32, from u32*
        // [items], to u32* [items], low f64* [items], high f64* [items], prev u64* (null on
        // the first step), prev_off u32* [items + 1], out u64* [out_off[items]], out_off u32*
        // [items + 1], item_off u32* [items + 1]); every type was checked against the
        // stream's, each element's word lies inside its item's words.
        unsafe { b.launch(grid(it.elements)) }.map_err(drv("cuLaunchKernel"))?;
        prev = Some((out, it.word_off));
    }
    let Some((ends, ends_off_d)) = prev else {
        return Err(DeviceError::Unsupported(
            "a join-bound job without chains".into(),
        ));
    };
    // The pairs' successor bits, over their first types' events.
    let it = BoundItems::upload(
        &s,
        &data.host_offsets,
        [&job.pair_from, &job.pair_to],
        [&job.pair_low, &job.pair_high],
        &job.pair_from,
    )?;
    let mut succ = s.alloc_zeros::<u64>(it.words.max(1)).map_err(&alloc)?;
    let mut b = s.launch_builder(&succ_f);
    b.arg(&data.times)
        .arg(&data.offsets)
        .arg(&it.items)
        .arg(&it.from)
        .arg(&it.to)
        .arg(&it.low)
        .arg(&it.high)
        .arg(&mut succ)
        .arg(&it.word_off)
        .arg(&it.item_off);
    // SAFETY: matches `bounds_successors` (times, offsets, items u32, from u32* [items], to
    // u32* [items], low f64* [items], high f64* [items], out u64* [out_off[items]], out_off
    // u32* [items + 1], item_off u32* [items + 1]); types checked as above.
    unsafe { b.launch(grid(it.elements)) }.map_err(drv("cuLaunchKernel"))?;
    let succ_off_d = it.word_off;
    // One and-count per join, over the prefix's last type's words (the pair's first type).
    let words: Vec<u32> = job
        .join_pair
        .iter()
        .map(|&q| words_of(events(job.pair_from[q as usize])))
        .collect();
    let (jp, jq) = (
        upload(&s, &job.join_prefix).map_err(&up)?,
        upload(&s, &job.join_pair).map_err(&up)?,
    );
    let words_d = upload(&s, &words).map_err(&up)?;
    let mut bound = s.alloc_zeros::<u32>(joins).map_err(&alloc)?;
    let joins_u = launch::u32_of("joins", joins)?;
    let mut b = s.launch_builder(&and_f);
    b.arg(&joins_u)
        .arg(&jp)
        .arg(&jq)
        .arg(&ends)
        .arg(&ends_off_d)
        .arg(&succ)
        .arg(&succ_off_d)
        .arg(&words_d)
        .arg(&mut bound);
    // SAFETY: matches `bounds_and_count` (joins u32, join_prefix u32* [joins], join_pair u32*
    // [joins], ends u64*, ends_off u32* [prefixes + 1], succ u64*, succ_off u32* [pairs + 1],
    // words u32* [joins], bound u32* [joins]); a join's prefix ends on its pair's first type,
    // so both sets have `words[i]` words.
    unsafe { b.launch(grid(joins_u)) }.map_err(drv("cuLaunchKernel"))?;
    s.clone_dtoh(&bound).map_err(drv("cuMemcpyDtoH"))
}

/// One launch's items on the device: their first and second types, their gaps' delays, and
/// where each item's elements (the events of its counted type) and bit-set words start.
pub(super) struct BoundItems {
    pub(super) items: u32,
    pub(super) from: CudaSlice<u32>,
    pub(super) to: CudaSlice<u32>,
    pub(super) low: CudaSlice<f64>,
    pub(super) high: CudaSlice<f64>,
    /// Prefix sums of the items' element counts. Shape `[items + 1]`.
    pub(super) item_off: CudaSlice<u32>,
    /// Prefix sums of the items' word counts. Shape `[items + 1]`.
    pub(super) word_off: CudaSlice<u32>,
    /// `word_off` on the host. Shape `[items + 1]`.
    pub(super) host_word_off: Vec<u32>,
    /// Elements (threads) in all.
    pub(super) elements: u32,
    /// Words of all the items' bit sets.
    pub(super) words: usize,
}

impl BoundItems {
    /// Uploads `[from, to]`, `[low, high]` and the offsets of bit sets over the events of
    /// `counted[i]` (types of the stream whose CSR offsets are `offsets`).
    pub(super) fn upload(
        s: &Arc<CudaStream>,
        offsets: &[u32],
        [from, to]: [&[u32]; 2],
        [low, high]: [&[f64]; 2],
        counted: &[u32],
    ) -> Result<Self, DeviceError> {
        let up = |e| DeviceError::driver("cuMemcpyHtoD", e);
        let (mut item_off, mut word_off) = (vec![0u32], vec![0u32]);
        let (mut elements, mut words) = (0u64, 0u64);
        for &t in counted {
            let n = offsets[t as usize + 1] - offsets[t as usize];
            elements += u64::from(n);
            words += u64::from(words_of(n));
            item_off.push(launch::u32_of("bound elements", elements as usize)?);
            word_off.push(launch::u32_of("bound words", words as usize)?);
        }
        Ok(Self {
            items: launch::u32_of("bound items", counted.len())?,
            from: upload(s, from).map_err(up)?,
            to: upload(s, to).map_err(up)?,
            low: upload(s, low).map_err(up)?,
            high: upload(s, high).map_err(up)?,
            item_off: upload(s, &item_off).map_err(up)?,
            word_off: upload(s, &word_off).map_err(up)?,
            host_word_off: word_off.clone(),
            elements: *item_off.last().unwrap_or(&0),
            words: words as usize,
        })
    }
}
