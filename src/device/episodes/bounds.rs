//! The threshold search's join bounds on the counted stream (`kernels/bounds.cu`; the
//! host's `episode::bound::join_bounds_cpu`, bit for bit), and the bit-set layout of a
//! launch's items (`BoundItems`) that the floor pass shares.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

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
pub(crate) struct BoundJob {
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
    pub(crate) fn join_bounds(&self, job: Arc<BoundJob>) -> Ticket<Vec<u32>> {
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
        let step = ChainStepArgs {
            times: &data.times,
            offsets: &data.offsets,
            items: &it.items,
            from: &it.from,
            to: &it.to,
            low: &it.low,
            high: &it.high,
            prev: prev.as_ref().map(|(bits, _)| bits),
            prev_off: prev.as_ref().map(|(_, off)| off),
            out: &mut out,
            out_off: &it.word_off,
            item_off: &it.item_off,
        };
        // SAFETY: `step_f` is `bounds_chain_step`; every type was checked against the
        // stream's, each element's word lies inside its item's words, and the previous step's
        // bits (none on the first step) have its items' words (`prev_off [items + 1]`).
        unsafe { step.launch(&s, &step_f, grid(it.elements)) }?;
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
    let successors = SuccessorsArgs {
        times: &data.times,
        offsets: &data.offsets,
        items: &it.items,
        from: &it.from,
        to: &it.to,
        low: &it.low,
        high: &it.high,
        out: &mut succ,
        out_off: &it.word_off,
        item_off: &it.item_off,
    };
    // SAFETY: `succ_f` is `bounds_successors`; types checked as above, each element's word
    // lies inside its item's words.
    unsafe { successors.launch(&s, &succ_f, grid(it.elements)) }?;
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
    let and_count = AndCountArgs {
        joins: &joins_u,
        join_prefix: &jp,
        join_pair: &jq,
        ends: &ends,
        ends_off: &ends_off_d,
        succ: &succ,
        succ_off: &succ_off_d,
        words: &words_d,
        bound: &mut bound,
    };
    // SAFETY: `and_f` is `bounds_and_count`; join prefixes and pairs were checked against
    // their counts, and a join's prefix ends on its pair's first type, so both sets have
    // `words[i]` words.
    unsafe { and_count.launch(&s, &and_f, grid(joins_u)) }?;
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

launch::kernel_args! {
    /// The arguments of `bounds_chain_step` (`kernels/bounds.cu`): `(const double* times,
    /// const unsigned* offsets, unsigned items, const unsigned* from, const unsigned* to, const
    /// double* low, const double* high, const synfire_u64* prev, const unsigned* prev_off,
    /// synfire_u64* out, const unsigned* out_off, const unsigned* item_off)`. Shapes: `from`,
    /// `to`, `low`, `high` `[items]`; `prev` the previous step's bits (null on the first step)
    /// with each item's first word in `prev_off`; `out [out_off[items]]` words, zeroed;
    /// `out_off`/`item_off` `[items + 1]`.
    pub(super) struct ChainStepArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        items: &'a u32,
        from: &'a CudaSlice<u32>,
        to: &'a CudaSlice<u32>,
        low: &'a CudaSlice<f64>,
        high: &'a CudaSlice<f64>,
        prev: Option<&'a CudaSlice<u64>>,
        prev_off: Option<&'a CudaSlice<u32>>,
        out: &'a mut CudaSlice<u64>,
        out_off: &'a CudaSlice<u32>,
        item_off: &'a CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `bounds_successors` (`kernels/bounds.cu`): `(const double* times,
    /// const unsigned* offsets, unsigned items, const unsigned* from, const unsigned* to, const
    /// double* low, const double* high, synfire_u64* out, const unsigned* out_off, const
    /// unsigned* item_off)`. Shapes as [`ChainStepArgs`].
    pub(super) struct SuccessorsArgs<'a> {
        times: &'a CudaSlice<f64>,
        offsets: &'a CudaSlice<u32>,
        items: &'a u32,
        from: &'a CudaSlice<u32>,
        to: &'a CudaSlice<u32>,
        low: &'a CudaSlice<f64>,
        high: &'a CudaSlice<f64>,
        out: &'a mut CudaSlice<u64>,
        out_off: &'a CudaSlice<u32>,
        item_off: &'a CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `bounds_and_count` (`kernels/bounds.cu`): `(unsigned joins, const
    /// unsigned* join_prefix, const unsigned* join_pair, const synfire_u64* ends, const
    /// unsigned* ends_off, const synfire_u64* succ, const unsigned* succ_off, const unsigned*
    /// words, unsigned* bound)`. Shapes: `join_prefix`, `join_pair`, `words`, `bound`
    /// `[joins]`; `ends_off [prefixes + 1]`, `succ_off [pairs + 1]` (first words).
    struct AndCountArgs<'a> {
        joins: &'a u32,
        join_prefix: &'a CudaSlice<u32>,
        join_pair: &'a CudaSlice<u32>,
        ends: &'a CudaSlice<u64>,
        ends_off: &'a CudaSlice<u32>,
        succ: &'a CudaSlice<u64>,
        succ_off: &'a CudaSlice<u32>,
        words: &'a CudaSlice<u32>,
        bound: &'a mut CudaSlice<u32>,
    }
}

launch::kernel_args! {
    /// The arguments of `bounds_floor_joins` (`kernels/bounds.cu`): `(unsigned items, const
    /// unsigned* join_off, const unsigned* part_lo, const synfire_u64* ends, const unsigned*
    /// ends_off, const unsigned* words, const unsigned* cnt, const synfire_u64* succ, const
    /// unsigned* succ_off, const unsigned* scnt, unsigned floor, unsigned capacity, unsigned*
    /// found, unsigned* out_i, unsigned* out_j)`. Shapes: `join_off [items + 1]`; `part_lo`,
    /// `ends_off`, `words`, `cnt` `[items]`; `succ_off`, `scnt` `[suffixes]`; `found [1]`;
    /// `out_i`/`out_j` `[capacity]`.
    pub(super) struct FloorJoinsArgs<'a> {
        items: &'a u32,
        join_off: &'a CudaSlice<u32>,
        part_lo: &'a CudaSlice<u32>,
        ends: &'a CudaSlice<u64>,
        ends_off: &'a CudaSlice<u32>,
        words: &'a CudaSlice<u32>,
        cnt: &'a CudaSlice<u32>,
        succ: &'a CudaSlice<u64>,
        succ_off: &'a CudaSlice<u32>,
        scnt: &'a CudaSlice<u32>,
        floor: &'a u32,
        capacity: &'a u32,
        found: &'a mut CudaSlice<u32>,
        out_i: &'a mut CudaSlice<u32>,
        out_j: &'a mut CudaSlice<u32>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::kernels::BOUNDS;
    use crate::device::launch::kernel_params;

    /// Every launch wrapper pushes the parameters of its kernel's `.cu` signature, in order.
    #[test]
    fn wrappers_match_the_kernel_signatures() {
        assert_eq!(
            kernel_params(BOUNDS.source, "bounds_chain_step"),
            ChainStepArgs::PARAMS,
            "bounds_chain_step"
        );
        assert_eq!(
            kernel_params(BOUNDS.source, "bounds_successors"),
            SuccessorsArgs::PARAMS,
            "bounds_successors"
        );
        assert_eq!(
            kernel_params(BOUNDS.source, "bounds_and_count"),
            AndCountArgs::PARAMS,
            "bounds_and_count"
        );
        assert_eq!(
            kernel_params(BOUNDS.source, "bounds_floor_joins"),
            FloorJoinsArgs::PARAMS,
            "bounds_floor_joins"
        );
    }
}
