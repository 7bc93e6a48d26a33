//! The one-floor pass of the `spectrum` threshold search on the device, for many surrogates
//! at once (`significance::spectrum::max_count_at_floor` is its host reference, result for
//! result).
//!
//! A batch of surrogates is laid side by side as one stream grouped by type: surrogate `s`'s
//! type `a` is type `s × types + a`, so every kernel that reads a stream grouped by type
//! (`kernels/ends.cu`, `kernels/bounds.cu`) works on all of them in one launch, and no episode
//! mixes two surrogates (its types are one surrogate's). Given the floor `φ` and, per
//! surrogate, the pairs whose successor bound reaches `φ` (the host computes those from its
//! own copy of the surrogate: `significance::spectrum::pair_candidates_at`):
//!
//! 1. the pairs are counted exactly (`ends_count`); those with `c ≥ φ` are size 2's
//!    episodes, with their end bits (`bounds_chain_step`) and successor bits
//!    (`bounds_successors`);
//! 2. for each size `k = 3, 4, …`: every join `α ⋈ β` of size `k − 1`'s episodes (β's prefix
//!    is α's suffix) gets the bound `min(c(α), c(β), |Ends(α) ∩ Succ(β's last pair)|)` and
//!    those reaching `φ` are kept, in one launch over every surrogate's joins
//!    (`bounds_floor_joins`, the joins enumerated on the device from each prefix's range of
//!    partners); they are counted exactly from their prefixes' ends (`ends_level`,
//!    `ends_count`), and those with `c ≥ φ` are size `k`'s episodes, with their end bits
//!    stepped from their prefixes' (`bounds_chain_step`).
//!
//! Every episode with `c ≥ φ` of every size is thereby counted (each bound is an upper bound
//! of the count: `episode::bound`; a `k`-episode with `c ≥ φ` has a prefix and a suffix with
//! `c ≥ φ`, anti-monotonicity), so each surrogate's largest count per size among them is the
//! host's, whatever the order of the work. The host keeps only index lists between the
//! steps (each size's episodes, a few thousand per surrogate); the joins, hundreds of
//! thousands per surrogate, never leave the device.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream};

use super::bounds::{BoundItems, ChainStepArgs, FloorJoinsArgs, SuccessorsArgs, words_of};
use super::ends::{EndsFunctions, count_by_ends_on};
use super::{BatchCounts, Csr, EndsJob, EndsLevel, EpisodeWorker, THREADS_PER_BLOCK, upload};
use crate::device::DeviceError;
use crate::device::kernels::BOUNDS;
use crate::device::launch;
use crate::device::worker::{Device, Ticket};

/// One interval of the configuration as the kernels compare delays: a delay `d` fits when
/// `low < d ≤ high`, with `low` the interval's `Interval::low_by_time` for the pair's type
/// order (a zero delay fits only from a smaller to a larger type id, and only where the
/// interval admits it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FloorGap {
    /// `low_by_time(true)`: from a smaller to a larger type id, seconds.
    pub low_up: f64,
    /// `low_by_time(false)`: otherwise, seconds.
    pub low: f64,
    /// The largest fitting delay, seconds.
    pub high: f64,
}

impl FloorGap {
    fn low_for(&self, from: u32, to: u32) -> f64 {
        if from < to { self.low_up } else { self.low }
    }
}

/// A batch of surrogates for the one-floor pass ([`EpisodeWorker::floor_pass`]): their streams (one recording's surrogates keep
/// every type's event count, so one set of offsets), the floor, and each one's candidate
/// pairs.
#[derive(Clone, Debug, Default)]
pub struct FloorJob {
    /// Events per type, as CSR offsets of one surrogate. Shape `[types + 1]`.
    pub offsets: Vec<u32>,
    /// The surrogates' times, each grouped by type by `offsets` (each type's times sorted),
    /// one after the other, seconds. Shape `[surrogates × events]`.
    pub times: Vec<f64>,
    /// The configuration's intervals. Shape `[intervals]`.
    pub gaps: Vec<FloorGap>,
    /// Per surrogate, the pairs `(a, interval index, b)` whose successor bound reaches the
    /// floor (types of one surrogate), any order. Shape `[surrogates][pairs]`.
    pub pairs: Vec<Vec<(u32, u32, u32)>>,
    /// The floor `φ`, occurrences (at least 1).
    pub floor: u32,
    /// The largest episode size searched (at least 2).
    pub max_level: usize,
}

/// What the one-floor pass ([`EpisodeWorker::floor_pass`]) finds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FloorResult {
    /// Per surrogate, at index `k`, the largest count among its `k`-episodes with `c ≥ φ`
    /// (0 when none; indices 0 and 1 are 0). Shape `[surrogates][max_level + 1]`.
    pub best: Vec<Vec<u64>>,
    /// Candidates counted exactly (pairs and joins, all surrogates).
    pub counted: u64,
    /// Joins whose bound the device computed (all surrogates).
    pub joins: u64,
    /// Kernel time of the exact counts (CUDA events), milliseconds.
    pub kernel_ms: f32,
    /// Kernel time of the joins' bounds (CUDA events), milliseconds.
    pub joins_ms: f32,
    /// Time of the whole pass on the device's thread (uploads, launches, the host's index
    /// work between them), milliseconds.
    pub wall_ms: f64,
    /// The same time by step (each step's launches waited for), milliseconds.
    pub steps_ms: Vec<(&'static str, f64)>,
    /// When the last step ended.
    lap_at: Option<std::time::Instant>,
}

/// Adds the time since the last step to step `name` of `result.steps_ms`, after the
/// launches so far have run (the pass synchronises after each step anyway: it reads back
/// counts and joins).
fn lap(
    s: &Arc<CudaStream>,
    result: &mut FloorResult,
    name: &'static str,
) -> Result<(), DeviceError> {
    s.synchronize()
        .map_err(launch::drv("cuStreamSynchronize"))?;
    let now = std::time::Instant::now();
    let ms = result
        .lap_at
        .map_or(0.0, |t| now.duration_since(t).as_secs_f64() * 1e3);
    result.lap_at = Some(now);
    match result.steps_ms.iter_mut().find(|(n, _)| *n == name) {
        Some((_, t)) => *t += ms,
        None => result.steps_ms.push((name, ms)),
    }
    Ok(())
}

impl EpisodeWorker {
    /// The one-floor pass of the `spectrum` search over a batch of surrogates
    /// ([`FloorJob`]; independent of the counted stream, which it leaves as it is).
    pub(crate) fn floor_pass(&self, job: Arc<FloorJob>) -> Ticket<FloorResult> {
        self.worker.run(move |d| floor_pass(d, &job))
    }

    /// The exact counts of a list in each of a batch of streams ([`BatchCountJob`]); per
    /// job, stream by stream; and the kernel milliseconds.
    pub(crate) fn count_batch(&self, job: Arc<BatchCountJob>) -> Ticket<(Vec<Vec<u32>>, f32)> {
        self.worker.run(move |d| count_batch(d, &job))
    }
}

/// An episode of one size in the pass: its surrogate, its keys for joining, its last gap,
/// its count.
#[derive(Clone, Copy, Debug)]
struct Ep {
    surrogate: u32,
    /// What a join partner's prefix must equal: size 2, the batched first type; larger, the
    /// prefix's index in the size below.
    pkey: u32,
    /// What it offers as a prefix: size 2, the batched second type; larger, the suffix's
    /// index in the size below.
    skey: u32,
    /// The batched types of its last gap's two ends.
    prev_last: u32,
    last: u32,
    /// Its last gap's interval index.
    gap: u32,
    /// Its last pair's index among size 2's episodes (successor bits).
    last_pair: u32,
    count: u32,
}

/// A size's episodes with `c ≥ φ` and, when a larger size follows, their end bits.
struct Level {
    eps: Vec<Ep>,
    /// End bits over each episode's last type's events, and each one's first word (host).
    ends: Option<(CudaSlice<u64>, Vec<u32>)>,
}

/// Runs the pass for `job` on this device (module documentation).
///
/// # Errors
/// [`DeviceError::Unsupported`] for a malformed job (a type, interval or length out of
/// range; more than `u32::MAX` events, joins or words in one batch); driver errors.
pub(super) fn floor_pass(dev: &mut Device, job: &FloorJob) -> Result<FloorResult, DeviceError> {
    let n_sur = job.pairs.len();
    let types = job.offsets.len().saturating_sub(1);
    let events = job.offsets.last().copied().unwrap_or(0) as usize;
    let bad = |what: &str| DeviceError::Unsupported(format!("a malformed floor job: {what}"));
    if job.max_level < 2 || job.floor == 0 {
        return Err(bad("max level below 2 or a zero floor"));
    }
    if job.times.len() != n_sur * events || job.offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(bad("times do not match the offsets and surrogates"));
    }
    let n_gaps = job.gaps.len() as u32;
    if job
        .pairs
        .iter()
        .flatten()
        .any(|&(a, v, b)| a as usize >= types || b as usize >= types || v >= n_gaps)
    {
        return Err(bad("a pair's type or interval out of range"));
    }
    let mut result = FloorResult {
        best: vec![vec![0; job.max_level + 1]; n_sur],
        ..FloorResult::default()
    };
    if n_sur == 0 || events == 0 {
        return Ok(result);
    }
    let started = std::time::Instant::now();
    result.lap_at = Some(started);
    let s = dev.stream.clone();
    let ends_fns = EndsFunctions::of(dev)?;
    let step_f = dev.function(&BOUNDS, "bounds_chain_step")?;
    let succ_f = dev.function(&BOUNDS, "bounds_successors")?;
    let joins_f = dev.function(&BOUNDS, "bounds_floor_joins")?;
    let drv = launch::drv;
    let (times, offsets, host_offsets) = upload_batch(&s, &job.offsets, &job.times, n_sur)?;
    let csr = Csr {
        times: &times,
        offsets: &offsets,
        host_offsets: &host_offsets,
    };
    let floor = job.floor;
    let batched = |k: usize, t: u32| (k * types) as u32 + t;

    // Size 2: the candidate pairs, counted.
    lap(&s, &mut result, "upload")?;
    let mut cands = Vec::new();
    for (k, pairs) in job.pairs.iter().enumerate() {
        // Sorted and distinct as `pair_candidates_at` gives them; sorted here otherwise.
        let mut sorted = std::borrow::Cow::Borrowed(pairs);
        if !pairs.windows(2).all(|w| w[0] < w[1]) {
            let mut own = pairs.clone();
            own.sort_unstable();
            own.dedup();
            sorted = std::borrow::Cow::Owned(own);
        }
        for &(a, v, b) in sorted.iter() {
            let (a, b) = (batched(k, a), batched(k, b));
            cands.push(Ep {
                surrogate: k as u32,
                pkey: a,
                skey: b,
                prev_last: a,
                last: b,
                gap: v,
                last_pair: 0,
                count: 0,
            });
        }
    }
    lap(&s, &mut result, "pair list")?;
    let counted = count_eps(&s, &ends_fns, &csr, job, &[], &cands)?;
    result.counted += cands.len() as u64;
    result.kernel_ms += counted.kernel_ms;
    let mut level = keep(&mut cands, &counted.counts, floor, &mut result.best, 2);
    lap(&s, &mut result, "pair counts")?;
    for (i, e) in level.iter_mut().enumerate() {
        e.last_pair = i as u32;
    }
    // Each size-2 episode's successor bits: the last pair of every larger episode is one.
    let succ = {
        let from: Vec<u32> = level.iter().map(|e| e.prev_last).collect();
        let to: Vec<u32> = level.iter().map(|e| e.last).collect();
        let (low, high) = gap_bounds(job, &level);
        let it = BoundItems::upload(&s, &host_offsets, [&from, &to], [&low, &high], &from)?;
        let mut bits = s
            .alloc_zeros::<u64>(it.words.max(1))
            .map_err(drv("cuMemAlloc"))?;
        let successors = SuccessorsArgs {
            times: &times,
            offsets: &offsets,
            items: &it.items,
            from: &it.from,
            to: &it.to,
            low: &it.low,
            high: &it.high,
            out: &mut bits,
            out_off: &it.word_off,
            item_off: &it.item_off,
        };
        // SAFETY: `succ_f` is `bounds_successors`; every type is a batched type below `bt`,
        // checked when the pairs were read, and each element's word lies inside its item's
        // words.
        unsafe {
            successors.launch(
                &s,
                &succ_f,
                launch::cover(it.elements.max(1), THREADS_PER_BLOCK),
            )
        }?;
        (bits, it.host_word_off)
    };
    lap(&s, &mut result, "successor bits")?;
    let mut sizes: Vec<Level> = Vec::with_capacity(job.max_level + 1);
    sizes.push(Level {
        eps: Vec::new(),
        ends: None,
    });
    sizes.push(Level {
        eps: Vec::new(),
        ends: None,
    });
    sizes.push(Level {
        eps: level,
        ends: None,
    });
    for k in 3..=job.max_level {
        // The end bits of size k − 1's episodes, stepped from their prefixes'.
        let ends = {
            let (below, at) = sizes.split_at(k - 1);
            let prev = &at[0];
            if prev.eps.is_empty() {
                break;
            }
            let prefix_bits = below.last().and_then(|l| l.ends.as_ref());
            chain_bits(&s, &step_f, &csr, job, &prev.eps, prefix_bits)?
        };
        sizes[k - 1].ends = Some(ends);
        let prev = &sizes[k - 1];
        let (ends_bits, ends_off) = prev.ends.as_ref().expect("set above");
        // Partners: the episodes whose prefix key equals a prefix's suffix key.
        lap(&s, &mut result, "end bits")?;
        let keys = prev
            .eps
            .iter()
            .map(|e| e.pkey.max(e.skey))
            .max()
            .unwrap_or(0) as usize
            + 1;
        let mut start = vec![0u32; keys + 1];
        for e in &prev.eps {
            start[e.pkey as usize + 1] += 1;
        }
        for i in 0..keys {
            start[i + 1] += start[i];
        }
        let mut order = vec![0u32; prev.eps.len()];
        let mut fill = start.clone();
        for (j, e) in prev.eps.iter().enumerate() {
            order[fill[e.pkey as usize] as usize] = j as u32;
            fill[e.pkey as usize] += 1;
        }
        let mut join_off = Vec::with_capacity(prev.eps.len() + 1);
        join_off.push(0u32);
        let mut part_lo = Vec::with_capacity(prev.eps.len());
        let mut total = 0u64;
        for e in &prev.eps {
            let (lo, hi) = (start[e.skey as usize], start[e.skey as usize + 1]);
            part_lo.push(lo);
            total += u64::from(hi - lo);
            join_off.push(launch::u32_of("joins in one batch", total as usize)?);
        }
        result.joins += total;
        if total == 0 {
            break;
        }
        let words: Vec<u32> = prev
            .eps
            .iter()
            .map(|e| words_of(host_offsets[e.last as usize + 1] - host_offsets[e.last as usize]))
            .collect();
        let cnt: Vec<u32> = prev.eps.iter().map(|e| e.count).collect();
        let succ_off: Vec<u32> = order
            .iter()
            .map(|&j| succ.1[prev.eps[j as usize].last_pair as usize])
            .collect();
        let scnt: Vec<u32> = order.iter().map(|&j| prev.eps[j as usize].count).collect();
        let up = drv("cuMemcpyHtoD");
        let items = launch::u32_of("prefixes in one batch", prev.eps.len())?;
        let d_join_off = upload(&s, &join_off).map_err(&up)?;
        let d_part_lo = upload(&s, &part_lo).map_err(&up)?;
        let d_ends_off = upload(&s, &ends_off[..prev.eps.len()]).map_err(&up)?;
        let d_words = upload(&s, &words).map_err(&up)?;
        let d_cnt = upload(&s, &cnt).map_err(&up)?;
        let d_succ_off = upload(&s, &succ_off).map_err(&up)?;
        let d_scnt = upload(&s, &scnt).map_err(&up)?;
        let mut capacity = (4 * prev.eps.len()).max(1 << 16) as u32;
        lap(&s, &mut result, "partners")?;
        let found = loop {
            let mut found = s.alloc_zeros::<u32>(1).map_err(drv("cuMemAlloc"))?;
            let mut out_i = s
                .alloc_zeros::<u32>(capacity as usize)
                .map_err(drv("cuMemAlloc"))?;
            let mut out_j = s
                .alloc_zeros::<u32>(capacity as usize)
                .map_err(drv("cuMemAlloc"))?;
            let total32 = join_off[prev.eps.len()];
            let timer = launch::Timer::start(&s)?;
            let joins = FloorJoinsArgs {
                items: &items,
                join_off: &d_join_off,
                part_lo: &d_part_lo,
                ends: ends_bits,
                ends_off: &d_ends_off,
                words: &d_words,
                cnt: &d_cnt,
                succ: &succ.0,
                succ_off: &d_succ_off,
                scnt: &d_scnt,
                floor: &floor,
                capacity: &capacity,
                found: &mut found,
                out_i: &mut out_i,
                out_j: &mut out_j,
            };
            // SAFETY: `joins_f` is `bounds_floor_joins`; a join's partner index part_lo[i] +
            // (g − join_off[i]) lies in the prefix's range of `order`; a prefix's words cover
            // its last type's events, as do its partners' last pairs' successor bits (their
            // first type is the prefix's last); writes stop at capacity.
            unsafe {
                joins.launch(
                    &s,
                    &joins_f,
                    launch::cover(total32.max(1), THREADS_PER_BLOCK),
                )
            }?;
            let timed = timer.stop(&s)?;
            let n = s.clone_dtoh(&found).map_err(drv("cuMemcpyDtoH"))?[0];
            result.joins_ms += timed.ms()?;
            if n <= capacity {
                let i = s.clone_dtoh(&out_i).map_err(drv("cuMemcpyDtoH"))?;
                let j = s.clone_dtoh(&out_j).map_err(drv("cuMemcpyDtoH"))?;
                let mut pairs: Vec<(u32, u32)> = i[..n as usize]
                    .iter()
                    .zip(&j[..n as usize])
                    .map(|(&i, &j)| (i, order[j as usize]))
                    .collect();
                pairs.sort_unstable();
                break pairs;
            }
            capacity = n;
        };
        lap(&s, &mut result, "joins")?;
        let mut cands: Vec<Ep> = found
            .iter()
            .map(|&(i, j)| {
                let (a, b) = (&prev.eps[i as usize], &prev.eps[j as usize]);
                Ep {
                    surrogate: a.surrogate,
                    pkey: i,
                    skey: j,
                    prev_last: a.last,
                    last: b.last,
                    gap: b.gap,
                    last_pair: b.last_pair,
                    count: 0,
                }
            })
            .collect();
        if cands.is_empty() {
            break;
        }
        lap(&s, &mut result, "join list")?;
        let counted = count_eps(&s, &ends_fns, &csr, job, &sizes, &cands)?;
        lap(&s, &mut result, "counts")?;
        result.counted += cands.len() as u64;
        result.kernel_ms += counted.kernel_ms;
        let eps = keep(&mut cands, &counted.counts, floor, &mut result.best, k);
        lap(&s, &mut result, "keep")?;
        sizes.push(Level { eps, ends: None });
    }
    result.wall_ms = started.elapsed().as_secs_f64() * 1e3;
    Ok(result)
}

/// A batch on the device: times, batched offsets, and those offsets on the host.
type Uploaded = (CudaSlice<f64>, CudaSlice<u32>, Vec<u32>);

/// Uploads `n_sur` streams grouped by type by the same `offsets` (`[types + 1]`), their times
/// side by side (`[n_sur × events]`), as one stream of `n_sur × types` types: returns the
/// times, the batched offsets and those offsets on the host.
fn upload_batch(
    s: &Arc<CudaStream>,
    offsets: &[u32],
    times: &[f64],
    n_sur: usize,
) -> Result<Uploaded, DeviceError> {
    let types = offsets.len().saturating_sub(1);
    let events = offsets.last().copied().unwrap_or(0) as usize;
    if times.len() != n_sur * events || offsets.windows(2).any(|w| w[0] > w[1]) {
        return Err(DeviceError::Unsupported(
            "a batch of streams whose times do not match their offsets".into(),
        ));
    }
    launch::u32_of("surrogates × events", n_sur * events)?;
    let bt = launch::u32_of("surrogates × types", n_sur * types)?;
    let mut host_offsets = Vec::with_capacity(bt as usize + 1);
    for k in 0..n_sur {
        let base = (k * events) as u32;
        host_offsets.extend(offsets[..types].iter().map(|&o| base + o));
    }
    host_offsets.push((n_sur * events) as u32);
    let up = launch::drv("cuMemcpyHtoD");
    let d_times = upload(s, times).map_err(&up)?;
    let d_offsets = upload(s, &host_offsets).map_err(&up)?;
    Ok((d_times, d_offsets, host_offsets))
}

/// A list of episodes to count exactly in each of a batch of streams (surrogates of one
/// recording: one set of offsets), as [`EndsJob`]s over one stream's types.
#[derive(Clone, Debug, Default)]
pub(crate) struct BatchCountJob {
    /// Events per type, as CSR offsets of one stream. Shape `[types + 1]`.
    pub offsets: Vec<u32>,
    /// The streams' times, each grouped by type by `offsets`, one after the other, seconds.
    /// Shape `[streams × events]`.
    pub times: Vec<f64>,
    /// Number of streams.
    pub streams: usize,
    /// The episodes, as jobs over one stream's types (`episode::gpu::ends_jobs`).
    pub jobs: Vec<EndsJob>,
}

/// Runs [`BatchCountJob`]: each job's candidates counted in every stream at once (the job's
/// items repeated per stream with that stream's types, as [`floor_pass`] lays a batch out).
/// Returns, per job, the counts stream by stream: shape `[jobs][streams × candidates]`.
///
/// # Errors
/// [`DeviceError::Unsupported`] for a malformed job; driver errors.
pub(super) fn count_batch(
    dev: &mut Device,
    job: &BatchCountJob,
) -> Result<(Vec<Vec<u32>>, f32), DeviceError> {
    let types = job.offsets.len().saturating_sub(1) as u32;
    if job.streams == 0 || job.jobs.is_empty() {
        return Ok((vec![Vec::new(); job.jobs.len()], 0.0));
    }
    let s = dev.stream.clone();
    let fns = EndsFunctions::of(dev)?;
    let (times, offsets, host_offsets) = upload_batch(&s, &job.offsets, &job.times, job.streams)?;
    let csr = Csr {
        times: &times,
        offsets: &offsets,
        host_offsets: &host_offsets,
    };
    let mut out = Vec::with_capacity(job.jobs.len());
    let mut kernel_ms = 0.0;
    for one in &job.jobs {
        let repeat = |l: &EndsLevel, parents: usize| {
            let mut r = EndsLevel::default();
            for k in 0..job.streams as u32 {
                for i in 0..l.len() {
                    r.push(
                        l.parent[i] + k * parents as u32,
                        l.last[i] + k * types,
                        l.x[i] + k * types,
                        l.low[i],
                        l.high[i],
                    );
                }
            }
            r
        };
        let mut prefixes = Vec::with_capacity(one.prefixes.len());
        let mut parents = 0;
        for l in &one.prefixes {
            prefixes.push(repeat(l, parents));
            parents = l.len();
        }
        let batched = EndsJob {
            prefixes,
            candidates: repeat(&one.candidates, parents),
        };
        let counted = count_by_ends_on(&s, &fns, &csr, &batched)?;
        kernel_ms += counted.kernel_ms;
        out.push(counted.counts);
    }
    Ok((out, kernel_ms))
}

/// The `(low, high)` of each episode's last gap, for its type order.
fn gap_bounds(job: &FloorJob, eps: &[Ep]) -> (Vec<f64>, Vec<f64>) {
    eps.iter()
        .map(|e| {
            let g = &job.gaps[e.gap as usize];
            (g.low_for(e.prev_last, e.last), g.high)
        })
        .unzip()
}

/// Keeps the candidates with `counts ≥ floor` (their counts set), noting each surrogate's
/// largest at size `k`.
fn keep(cands: &mut [Ep], counts: &[u32], floor: u32, best: &mut [Vec<u64>], k: usize) -> Vec<Ep> {
    let mut out = Vec::new();
    for (e, &c) in cands.iter_mut().zip(counts) {
        e.count = c;
        if c >= floor {
            let b = &mut best[e.surrogate as usize][k];
            *b = (*b).max(u64::from(c));
            out.push(*e);
        }
    }
    out
}

/// The exact counts of `cands` (size `sizes.len()`, or 2 when `sizes` is empty) from their
/// prefixes' ends: the prefix chain of every candidate, each size's distinct prefixes once,
/// down to size 2 (`EndsJob`).
fn count_eps(
    s: &Arc<CudaStream>,
    fns: &EndsFunctions,
    csr: &Csr<'_>,
    job: &FloorJob,
    sizes: &[Level],
    cands: &[Ep],
) -> Result<BatchCounts, DeviceError> {
    let item = |e: &Ep, parent: u32, level: &mut EndsLevel| {
        let g = &job.gaps[e.gap as usize];
        level.push(
            parent,
            e.prev_last,
            e.last,
            g.low_for(e.prev_last, e.last),
            g.high,
        );
    };
    let mut candidates = EndsLevel::default();
    if sizes.len() <= 2 {
        for e in cands {
            item(e, 0, &mut candidates);
        }
        return count_by_ends_on(
            s,
            fns,
            csr,
            &EndsJob {
                prefixes: Vec::new(),
                candidates,
            },
        );
    }
    // Size by size downwards: the distinct prefixes (indices into the size below) of the
    // items above, and each item's parent among them.
    let mut chain: Vec<EndsLevel> = Vec::new();
    let mut wanted: Vec<u32> = cands.iter().map(|e| e.pkey).collect();
    let mut above: Vec<Ep> = cands.to_vec();
    let mut size = sizes.len() - 1;
    let mut parents_of_above: Vec<u32>;
    loop {
        let mut distinct = wanted.clone();
        distinct.sort_unstable();
        distinct.dedup();
        parents_of_above = wanted
            .iter()
            .map(|p| distinct.binary_search(p).map_or(0, |i| i as u32))
            .collect();
        let mut level = EndsLevel::default();
        let here: Vec<Ep> = distinct
            .iter()
            .map(|&p| sizes[size].eps[p as usize])
            .collect();
        for (e, parent) in above.iter().zip(&parents_of_above) {
            item(e, *parent, &mut level);
        }
        chain.push(level);
        if size == 2 {
            let mut first = EndsLevel::default();
            for e in &here {
                item(e, 0, &mut first);
            }
            chain.push(first);
            break;
        }
        wanted = here.iter().map(|e| e.pkey).collect();
        above = here;
        size -= 1;
    }
    chain.reverse();
    let candidates = chain.pop().unwrap_or_default();
    count_by_ends_on(
        s,
        fns,
        csr,
        &EndsJob {
            prefixes: chain,
            candidates,
        },
    )
}

/// The end bits of `eps` over their last types' events: from every event of the first type
/// for pairs (`prefix_bits` none), else stepped from their prefixes' end bits (`pkey` indexes
/// the size below, whose bits and first words `prefix_bits` holds). Returns the bits and each
/// episode's first word.
fn chain_bits(
    s: &Arc<CudaStream>,
    step_f: &cudarc::driver::CudaFunction,
    csr: &Csr<'_>,
    job: &FloorJob,
    eps: &[Ep],
    prefix_bits: Option<&(CudaSlice<u64>, Vec<u32>)>,
) -> Result<(CudaSlice<u64>, Vec<u32>), DeviceError> {
    let drv = launch::drv;
    let from: Vec<u32> = eps.iter().map(|e| e.prev_last).collect();
    let to: Vec<u32> = eps.iter().map(|e| e.last).collect();
    let (low, high) = gap_bounds(job, eps);
    let it = BoundItems::upload(s, csr.host_offsets, [&from, &to], [&low, &high], &to)?;
    let mut out = s
        .alloc_zeros::<u64>(it.words.max(1))
        .map_err(drv("cuMemAlloc"))?;
    let prev_off = match prefix_bits {
        Some((_, first)) => {
            let per: Vec<u32> = eps.iter().map(|e| first[e.pkey as usize]).collect();
            Some(upload(s, &per).map_err(drv("cuMemcpyHtoD"))?)
        }
        None => None,
    };
    let (prev, prev_off) = match (prefix_bits, &prev_off) {
        (Some((bits, _)), Some(off)) => (Some(bits), Some(off)),
        _ => (None, None),
    };
    let step = ChainStepArgs {
        times: csr.times,
        offsets: csr.offsets,
        items: &it.items,
        from: &it.from,
        to: &it.to,
        low: &it.low,
        high: &it.high,
        prev,
        prev_off,
        out: &mut out,
        out_off: &it.word_off,
        item_off: &it.item_off,
    };
    // SAFETY: `step_f` is `bounds_chain_step`; `prev_off` holds each item's prefix's first
    // word (null for pairs), and a prefix's bits are over its last type's events, which are
    // `from[item]`'s; each element's word lies inside its item's words.
    unsafe {
        step.launch(
            s,
            step_f,
            launch::cover(it.elements.max(1), THREADS_PER_BLOCK),
        )
    }?;
    Ok((out, it.host_word_off))
}
