//! Batched exact k-NN queries ([`super::Searcher::query_batch`]): many queries answered
//! together, on the CPU or on one GPU.
//!
//! * **CPU**: SING per query ([`Index::knn_normalized`], no producer), the queries in
//!   parallel on rayon's pool with one search worker each (with fewer queries than workers,
//!   the workers shared out among them): with more queries than cores, parallelism across
//!   queries wastes nothing on a query's synchronisation.
//! * **GPU** ([`GpuBatch`]): the device holds the PAA of every series (16 `f32`, 64 bytes per
//!   series) and, when they fit, the series themselves, else, when it fits, their binary16
//!   copy ([`SeriesOnDevice`]). For a batch:
//!   1. the host runs each query's approximate search (the first BSF of SING, paper
//!      Algorithm 6 line 76: the k-th best real distance among at least 1,024 series near
//!      the query in the tree) and rounds the BSF up to an `f32` filter threshold
//!      ([`filter_threshold`]);
//!   2. `search_batch_filter` computes the PAA lower bound (Keogh et al. 2001, "Dimensionality
//!      reduction for fast similarity search in large time series databases", KAIS 3(3),
//!      eq. 2: `sum_i (q_i - x_i)^2 >= sum_j l_j (PAA_j(q) - PAA_j(x))^2`, the bound that iSAX's
//!      MINDIST relaxes, so it prunes at least as much) of every (query, series) pair and
//!      keeps the pairs within the threshold;
//!   3. `search_batch_refine` computes the survivors' exact squared distances with
//!      [`sq_dist`]'s operations in [`sq_dist`]'s order (the same bits) and returns the pairs
//!      within the query's BSF; with the binary16 copy instead, `search_batch_refine_half`
//!      keeps the survivors whose `f32` distance to the copy is within a second threshold
//!      ([`half_threshold`]) and the host computes their exact distances; with neither, the
//!      host computes those of every survivor;
//!   4. the host takes, per query, the k smallest `(distance², id)`.
//!
//! **Exactness.** Let `D²` be a series' exact squared distance as [`sq_dist`] computes it. The
//! k nearest all have `D² <= BSF` (the BSF is the k-th best of some k series). For such a
//! series the PAA bound `LB <= D` (Cauchy–Schwarz within each segment), and the `f32` bound
//! the kernel computes is at most [`filter_threshold`]`(BSF)` (the error analysis is in that
//! function's documentation and `tests/search_batch.rs` checks it on adversarial pairs), so it
//! survives the filter; likewise its distance to the binary16 copy is within
//! [`half_threshold`]`(BSF)`; its refined distance is exact and `<= BSF`, so it is returned. The
//! answer is therefore the k smallest `(D², id)` over all series: the brute force's answer,
//! ids and distances, ties to the smallest id.
//!
//! A query whose survivors alone overflow the device's pair list (16 pairs per series, from
//! 2^20 to 2^25: an extremely poor first BSF, e.g. a collection of near-copies of the query)
//! is answered by SING on the CPU and counted in [`BatchStats::cpu_fallbacks`].

use std::time::Instant;

use rayon::prelude::*;

use super::SearchError;
use super::collection::sq_dist;
pub use super::index::BatchPaa;
use super::index::Index;
use super::paa::{SEGMENTS, Segments};
use super::query::{Neighbor, QueryAnswer, QueryOptions, QueryStats};
use crate::device::DeviceError;
use crate::device::search::{BatchArray, BatchLoad};
pub use crate::device::search::{BatchJob, BatchReport, SeriesOnDevice};

/// What a batch cost, over all its queries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchStats {
    /// Queries answered.
    pub queries: u64,
    /// `"gpu"` or `"cpu"`.
    pub device: &'static str,
    /// What the GPU held of the series: `Exact` (distances on the device), `Half` (a
    /// second filter on the device, exact distances on the host) or `No` (exact distances of
    /// every filter survivor on the host); `No` on the CPU.
    pub series: SeriesOnDevice,
    /// (Query, series) pairs that passed the GPU's PAA filter.
    pub filter_survivors: u64,
    /// Of those, the pairs the half-precision filter kept (`Half` only).
    pub half_survivors: u64,
    /// Queries answered by SING on the CPU because their survivors overflowed the device's
    /// pair list.
    pub cpu_fallbacks: u64,
    /// Device time of the batch (filter and refine launches to the last download, CUDA
    /// events), milliseconds; 0 on the CPU.
    pub device_ms: f64,
    /// Wall time of the whole batch, seconds (every query's latency in this batch).
    pub seconds: f64,
}

/// The answers of one batch, in query order, and its costs.
#[derive(Clone, Debug)]
pub struct BatchAnswer {
    /// One answer per query, in the order given; each answer's `stats.seconds` is the
    /// batch's wall time.
    pub answers: Vec<QueryAnswer>,
    /// Costs of the batch.
    pub stats: BatchStats,
}

/// The segment lengths `l_j` as `f32` (exact: at most 2^24 samples per segment are
/// represented exactly; longer series are refused by [`GpuBatch::new`]).
#[must_use]
pub fn weights_f32(segments: &Segments) -> [f32; SEGMENTS] {
    std::array::from_fn(|j| segments.weight(j) as f32)
}

/// The PAA of a series rounded to `f32` (each mean computed in `f64` by [`Segments::paa`],
/// then rounded to nearest), and `sqrt(sum_j l_j PAA_j^2)` of the `f64` PAA (rounded up by a
/// relative 1e-9), the norm [`filter_threshold`] needs.
#[must_use]
pub fn paa_f32(segments: &Segments, x: &[f32]) -> ([f32; SEGMENTS], f64) {
    let p = segments.paa(x);
    let norm = (0..SEGMENTS)
        .map(|j| segments.weight(j) * p[j] * p[j])
        .sum::<f64>()
        .sqrt()
        * (1.0 + 1e-9);
    (std::array::from_fn(|j| p[j] as f32), norm)
}

/// The kernel's `f32` PAA bound (`synfire_paa_lb` in `kernels/search.cu`), operation for
/// operation: `acc = 0; for j: d = q_j - x_j; acc = acc + w_j * (d * d)`, every operation
/// rounded to nearest, none fused. The device computes the same bits.
#[must_use]
pub fn lb_f32(q: &[f32; SEGMENTS], x: &[f32; SEGMENTS], w: &[f32; SEGMENTS]) -> f32 {
    let mut acc = 0.0f32;
    for j in 0..SEGMENTS {
        let d = q[j] - x[j];
        acc += w[j] * (d * d);
    }
    acc
}

/// The `f32` filter threshold of a query whose squared BSF is `bsf_sq`: a series whose
/// [`sq_dist`] is at most `bsf_sq` always has [`lb_f32`] at most this value.
///
/// `q_norm` and `x_norm` bound `sqrt(sum_j l_j P_j^2)` of the query's and of every series'
/// exact PAA (as [`paa_f32`] returns them; for series, their maximum).
///
/// Proof (`u = 2^-24`, the unit roundoff of `f32`; `P_j`, `Q_j` exact PAA values, `D_j = Q_j -
/// P_j`, `LB² = sum_j l_j D_j²`, so `LB <= D` by Cauchy–Schwarz in each segment): the stored
/// `p_j = fl(P_j)` has `|p_j - P_j| <= u |P_j|` (plus the `f64` mean's error, below 1e-9
/// relative), and the computed difference `d_j = fl(q_j - p_j)` has `|d_j - D_j| <= (2u + u²)
/// (|Q_j| + |P_j|) = e_j`. By Minkowski's inequality in the weighted norm,
/// `sqrt(sum_j l_j d_j²) <= LB + E` with `E = (2u + u²) (q_norm + x_norm)`. The two products
/// and sixteen additions of non-negative terms raise the computed sum by at most a factor
/// `(1 + u)^18`. So `lb_f32 <= (1 + u)^18 (LB + E)² <= (1 + u)^18 (sqrt(D²) + E)²`, and for `D²
/// <= bsf_sq` (with `D²`'s own `f64` rounding, below 1e-12 relative) the value below bounds
/// it; it is computed in `f64` with further relative margins and rounded up to `f32`.
/// Infinite or NaN `bsf_sq` gives `+inf` (every pair survives).
#[must_use]
pub fn filter_threshold(bsf_sq: f64, q_norm: f64, x_norm: f64) -> f32 {
    if !(bsf_sq.is_finite() && q_norm.is_finite() && x_norm.is_finite()) {
        return f32::INFINITY;
    }
    let u = f64::from(f32::EPSILON) / 2.0;
    let e = (2.0 * u + u * u) * (q_norm + x_norm) + 1e-9 * (1.0 + q_norm + x_norm);
    let growth = (1.0 + u).powi(18);
    let t = ((bsf_sq.max(0.0) * (1.0 + 1e-12)).sqrt() + e).powi(2) * growth * (1.0 + 1e-12);
    round_up_f32(t)
}

/// The smallest `f32` at least `t` (`+inf` beyond `f32::MAX`).
fn round_up_f32(t: f64) -> f32 {
    let f = t as f32;
    if f64::from(f) >= t {
        f
    } else if f.is_infinite() {
        f32::INFINITY
    } else {
        f.next_up()
    }
}

impl Index {
    /// Exact k-NN of every z-normalised query of `qs` on the CPU: SING per query
    /// ([`Index::knn_normalized`] with `max(1, workers / queries)` workers and no producer),
    /// the queries in parallel on rayon's pool. Returns `min(k, count)` neighbours per query.
    ///
    /// # Errors
    /// [`SearchError::ZeroK`]; [`SearchError::QueryLength`] naming the first query of the wrong
    /// length.
    pub fn knn_batch_cpu(
        &self,
        qs: &[Vec<f32>],
        k: usize,
        options: &QueryOptions,
    ) -> Result<BatchAnswer, SearchError> {
        let started = Instant::now();
        check_batch(self, qs, k)?;
        // Fewer queries than workers: the workers are shared out among the queries.
        let one = QueryOptions {
            workers: (options.workers / qs.len().max(1)).max(1),
            ..*options
        };
        let mut answers = qs
            .par_iter()
            .map(|q| self.knn_normalized(q, k, &one, None))
            .collect::<Result<Vec<_>, _>>()?;
        let seconds = started.elapsed().as_secs_f64();
        for a in &mut answers {
            a.stats.seconds = seconds;
        }
        Ok(BatchAnswer {
            answers,
            stats: BatchStats {
                queries: qs.len() as u64,
                device: "cpu",
                series: SeriesOnDevice::No,
                filter_survivors: 0,
                half_survivors: 0,
                cpu_fallbacks: 0,
                device_ms: 0.0,
                seconds,
            },
        })
    }
}

fn check_batch(index: &Index, qs: &[Vec<f32>], k: usize) -> Result<(), SearchError> {
    if k == 0 {
        return Err(SearchError::ZeroK);
    }
    if let Some((i, q)) = qs.iter().enumerate().find(|(_, q)| q.len() != index.len) {
        return Err(SearchError::input(
            format!("query {i}"),
            format!("{} samples, the index's series have {}", q.len(), index.len),
        ));
    }
    Ok(())
}

/// The PAA array of an index for the device and the norms the thresholds need
/// ([`BatchPaa`]); computed at the first call and kept with the index.
#[must_use]
pub(crate) fn index_paa(index: &Index) -> &BatchPaa {
    index.batch_paa.0.get_or_init(|| compute_paa(index))
}

fn compute_paa(index: &Index) -> BatchPaa {
    let parts: Vec<(Vec<f32>, f64, f64)> = (0..index.count)
        .into_par_iter()
        .chunks(1 << 14)
        .map(|positions| {
            let mut v = Vec::with_capacity(positions.len() * SEGMENTS);
            let (mut max, mut row_max) = (0.0f64, 0.0f64);
            for pos in positions {
                let row = index.row(pos);
                let (p, n) = paa_f32(&index.segments, row);
                v.extend_from_slice(&p);
                max = max.max(n);
                let r = row
                    .iter()
                    .map(|&x| f64::from(x) * f64::from(x))
                    .sum::<f64>();
                row_max = row_max.max(r.sqrt() * (1.0 + 1e-9));
            }
            (v, max, row_max)
        })
        .collect();
    let mut out = BatchPaa {
        paa: Vec::with_capacity(index.count * SEGMENTS),
        paa_norm: 0.0,
        row_norm: 0.0,
    };
    for (v, m, r) in parts {
        out.paa.extend_from_slice(&v);
        out.paa_norm = out.paa_norm.max(m);
        out.row_norm = out.row_norm.max(r);
    }
    out
}

/// Sends rows `0..count` in chunks of `rows_per_chunk` through `send(first, end)` (a device
/// job), keeping at most two chunks in flight, and waits for all of them.
fn upload_chunks(
    count: usize,
    rows_per_chunk: usize,
    mut send: impl FnMut(usize, usize) -> crate::device::worker::Ticket<()>,
) -> Result<(), SearchError> {
    let mut pending = std::collections::VecDeque::new();
    for first in (0..count).step_by(rows_per_chunk.max(1)) {
        pending.push_back(send(first, (first + rows_per_chunk).min(count)));
        if pending.len() > 2
            && let Some(t) = pending.pop_front()
        {
            t.wait().map_err(SearchError::Device)?;
        }
    }
    for t in pending {
        t.wait().map_err(SearchError::Device)?;
    }
    Ok(())
}

/// [`to_half`] of many samples, in parallel.
fn to_half_par(x: &[f32]) -> Vec<u16> {
    let mut out = vec![0u16; x.len()];
    out.par_chunks_mut(1 << 16)
        .zip(x.par_chunks(1 << 16))
        .for_each(|(o, v)| {
            for (o, &v) in o.iter_mut().zip(v) {
                *o = half::f16::from_f32(v).to_bits();
            }
        });
    out
}

/// A series rounded to IEEE binary16 (round to nearest, ties to even; the `half` crate), as
/// bit patterns: the GPU's half-precision copy.
#[must_use]
pub fn to_half(x: &[f32]) -> Vec<u16> {
    x.iter()
        .map(|&v| half::f16::from_f32(v).to_bits())
        .collect()
}

/// The kernel's `f32` squared distance between a query and a half-precision series
/// (`synfire_half_to_float` and `search_batch_refine_half` in `kernels/search.cu`), operation
/// for operation: `acc = 0; for t: d = q_t - x16_t; acc = acc + d * d`, each rounded to
/// nearest, none fused.
///
/// # Panics
/// When the lengths differ.
#[must_use]
pub fn half_sq_f32(q: &[f32], x16: &[u16]) -> f32 {
    assert_eq!(
        q.len(),
        x16.len(),
        "half_sq_f32 of series of different lengths"
    );
    let mut acc = 0.0f32;
    for (&a, &h) in q.iter().zip(x16) {
        let d = a - half::f16::from_bits(h).to_f32();
        acc += d * d;
    }
    acc
}

/// The `f32` threshold of the half-precision filter for a query whose squared BSF is
/// `bsf_sq`, over series of `len` samples whose Euclidean norms are at most `row_norm`: a
/// series whose [`sq_dist`] is at most `bsf_sq` always has [`half_sq_f32`] at most this
/// value.
///
/// Proof (`u = 2^-24`): binary16 rounding moves each sample by at most `2^-11 |x_t|` (normal
/// range) or `2^-25` (subnormal range), so `‖x − x̃‖ <= ε = 2^-11 row_norm + 2^-25 sqrt(len)`
/// and `‖q − x̃‖ <= D + ε`, `D` the exact distance. The kernel's difference, square and
/// sequential sum of `len` non-negative terms raise the computed value by at most a factor
/// `(1 + u)^(len + 2)`. `D² <= bsf_sq (1 + (len + 2) 2^-52)` covers [`sq_dist`]'s own `f64`
/// rounding. The value is computed in `f64` with a further relative 1e-12 and rounded up to
/// `f32`; infinite or NaN inputs give `+inf`.
#[must_use]
pub fn half_threshold(bsf_sq: f64, row_norm: f64, len: usize) -> f32 {
    if !(bsf_sq.is_finite() && row_norm.is_finite()) {
        return f32::INFINITY;
    }
    let u = f64::from(f32::EPSILON) / 2.0;
    let n = len as f64;
    let eps = row_norm * 2f64.powi(-11) + 2f64.powi(-25) * n.sqrt();
    let d = (bsf_sq.max(0.0) * (1.0 + (n + 2.0) * 2f64.powi(-52))).sqrt();
    let growth = (1.0 + u).powi(i32::try_from(len + 2).unwrap_or(i32::MAX));
    round_up_f32((d + eps).powi(2) * growth * (1.0 + 1e-12))
}

/// The device's work on one batch, as `crate::device::GpuWorker::search_batch` does it; the
/// CPU model [`emulate_batch`] stands in for it in tests.
pub type RunBatch<'r> = dyn FnMut(BatchJob) -> Result<BatchReport, DeviceError> + 'r;

/// Answers a batch through `run` (the device, or [`emulate_batch`]): steps 1 and 4 of the
/// module documentation around `run`'s filter and refine. `held` says what `run` holds of
/// the series: with `Exact` it returns exact distances, else the host computes those of the
/// pairs it returns.
///
/// # Errors
/// As [`Index::knn_batch_cpu`], and [`SearchError::Device`] when `run` fails.
pub fn knn_batch_with(
    index: &Index,
    qs: &[Vec<f32>],
    k: usize,
    options: &QueryOptions,
    held: SeriesOnDevice,
    run: &mut RunBatch<'_>,
) -> Result<BatchAnswer, SearchError> {
    let started = Instant::now();
    let norms = index_paa(index);
    let (x_norm, row_norm) = (norms.paa_norm, norms.row_norm);
    check_batch(index, qs, k)?;
    let k = k.min(index.count);
    let nq = qs.len();
    if nq == 0 {
        return Ok(BatchAnswer {
            answers: Vec::new(),
            stats: BatchStats {
                queries: 0,
                device: "gpu",
                series: held,
                filter_survivors: 0,
                half_survivors: 0,
                cpu_fallbacks: 0,
                device_ms: 0.0,
                seconds: started.elapsed().as_secs_f64(),
            },
        });
    }
    // 1. PAA, first BSF and threshold of every query.
    let prepared: Vec<([f32; SEGMENTS], f32, f64, u64)> = qs
        .par_iter()
        .map(|q| {
            let (p, q_norm) = paa_f32(&index.segments, q);
            let (bsf, approx) = index.first_bsf(q, k, options.approximate);
            (p, filter_threshold(bsf, q_norm, x_norm), bsf, approx)
        })
        .collect();
    let job = BatchJob {
        tag: index.tag(),
        qpaa: prepared.iter().flat_map(|p| p.0).collect(),
        thresh: prepared.iter().map(|p| p.1).collect(),
        qrows: if held == SeriesOnDevice::No {
            Vec::new()
        } else {
            qs.concat()
        },
        limit: prepared.iter().map(|p| p.2).collect(),
        thresh2: if held == SeriesOnDevice::Half {
            prepared
                .iter()
                .map(|p| half_threshold(p.2, row_norm, index.len))
                .collect()
        } else {
            Vec::new()
        },
    };
    // 2–3. Filter and refine.
    let report = run(job).map_err(SearchError::Device)?;
    if report.survivors.len() != nq || report.q.len() != report.pos.len() {
        return Err(SearchError::Device(DeviceError::Unsupported(
            "a malformed batch report".into(),
        )));
    }
    let refined_here = held != SeriesOnDevice::Exact;
    if report.sq.len() != if refined_here { 0 } else { report.q.len() } {
        return Err(SearchError::Device(DeviceError::Unsupported(
            "a malformed batch report".into(),
        )));
    }
    if let Some((&q, &pos)) = report
        .q
        .par_iter()
        .zip(report.pos.par_iter())
        .find_any(|&(&q, &pos)| q as usize >= nq || pos as usize >= index.count)
    {
        return Err(SearchError::Device(DeviceError::Unsupported(format!(
            "a batch report names query {q} or series position {pos}"
        ))));
    }
    // Without the series on the device, every survivor's exact distance here, in parallel
    // over the pairs (so a batch of one query uses every core too).
    let kept: Vec<(u32, u64, u32)> = if refined_here {
        report
            .q
            .par_iter()
            .zip(report.pos.par_iter())
            .filter_map(|(&q, &pos)| {
                let limit = prepared[q as usize].2;
                sq_dist(&qs[q as usize], index.row(pos as usize), limit)
                    .map(|s| (q, s.to_bits(), pos))
            })
            .collect()
    } else {
        report
            .q
            .iter()
            .zip(&report.pos)
            .zip(&report.sq)
            .map(|((&q, &pos), &s)| (q, s.to_bits(), pos))
            .collect()
    };
    let mut per_query: Vec<Vec<(u64, u32)>> = vec![Vec::new(); nq];
    for (q, bits, pos) in kept {
        per_query[q as usize].push((bits, pos));
    }
    // 4. The k best of each query; overflowed queries by SING on the CPU.
    let overflowed: std::collections::HashSet<u32> = report.overflowed.iter().copied().collect();
    let cpu_options = QueryOptions {
        workers: 1,
        ..*options
    };
    let lower_bounds = index.count as u64;
    let answers: Vec<(QueryAnswer, bool)> = per_query
        .into_par_iter()
        .enumerate()
        .map(|(q, cands)| {
            let fallback = |why: &str| -> Result<(QueryAnswer, bool), SearchError> {
                if !why.is_empty() {
                    tracing::error!(
                        query = q,
                        why,
                        "Batch answer incomplete; answering this query on the CPU."
                    );
                }
                Ok((index.knn_normalized(&qs[q], k, &cpu_options, None)?, true))
            };
            if overflowed.contains(&(q as u32)) {
                return fallback("");
            }
            let mut best: Vec<(u64, u32)> = cands
                .into_iter()
                .map(|(bits, pos)| (bits, index.ids()[pos as usize]))
                .collect();
            best.sort_unstable();
            best.dedup();
            if best.len() < k {
                // Cannot happen when the bound is sound: the first BSF's own k series are
                // within it.
                return fallback("fewer than k series passed the filter");
            }
            best.truncate(k);
            let neighbors = best
                .into_iter()
                .map(|(bits, id)| {
                    let s = f64::from_bits(bits);
                    Neighbor {
                        id,
                        distance: s.sqrt(),
                        squared: s,
                    }
                })
                .collect();
            let stats = QueryStats {
                lower_bounds,
                producer_lower_bounds: lower_bounds,
                real_distances: prepared[q].3 + u64::from(report.survivors[q]),
                active_series: lower_bounds,
                ..QueryStats::default()
            };
            Ok((
                QueryAnswer {
                    neighbors,
                    stats,
                    producer_error: None,
                },
                false,
            ))
        })
        .collect::<Result<_, SearchError>>()?;
    let seconds = started.elapsed().as_secs_f64();
    let cpu_fallbacks = answers.iter().filter(|a| a.1).count() as u64;
    Ok(BatchAnswer {
        answers: answers
            .into_iter()
            .map(|(mut a, _)| {
                a.stats.seconds = seconds;
                a
            })
            .collect(),
        stats: BatchStats {
            queries: nq as u64,
            device: "gpu",
            series: held,
            filter_survivors: report.survivors.iter().map(|&s| u64::from(s)).sum(),
            half_survivors: report.half_survivors,
            cpu_fallbacks,
            device_ms: report.device_ms,
            seconds,
        },
    })
}

/// The device's filter and refine computed on the CPU with the kernels' operations (the
/// model the tests run without a GPU; `tools/search-emulation.cpp` checks the kernels
/// themselves against the same loops): every `(query, position)` with [`lb_f32`] within the
/// threshold survives; with `Exact` the survivors within the limit come back with their
/// [`sq_dist`], with `Half` those whose [`half_sq_f32`] is within the second threshold, with
/// `No` all of them. `cap` is the pair list's capacity per range of queries, as on the
/// device (queries in ranges of `per_launch`, split on overflow down to single queries).
#[must_use]
pub fn emulate_batch(
    index: &Index,
    job: &BatchJob,
    held: SeriesOnDevice,
    per_launch: usize,
    cap: usize,
) -> BatchReport {
    let paa = &index_paa(index).paa;
    let w = weights_f32(&index.segments);
    let nq = job.thresh.len();
    let len = index.len;
    let mut report = BatchReport {
        survivors: vec![0; nq],
        ..BatchReport::default()
    };
    let mut ranges: Vec<(usize, usize)> = (0..nq)
        .step_by(per_launch.max(1))
        .map(|a| (a, (a + per_launch.max(1)).min(nq)))
        .rev()
        .collect();
    while let Some((a, z)) = ranges.pop() {
        report.filter_launches += 1;
        let mut pairs = Vec::new();
        for q in a..z {
            let qp: [f32; SEGMENTS] = std::array::from_fn(|j| job.qpaa[q * SEGMENTS + j]);
            for pos in 0..index.count {
                let xp: [f32; SEGMENTS] = std::array::from_fn(|j| paa[pos * SEGMENTS + j]);
                if lb_f32(&qp, &xp, &w) <= job.thresh[q] {
                    pairs.push((q, pos));
                }
            }
        }
        if pairs.len() > cap {
            if z - a > 1 {
                let mid = a + (z - a) / 2;
                ranges.push((mid, z));
                ranges.push((a, mid));
            } else {
                report.overflowed.push(a as u32);
            }
            continue;
        }
        for &(q, pos) in &pairs {
            report.survivors[q] += 1;
            let qrow = || &job.qrows[q * len..(q + 1) * len];
            match held {
                SeriesOnDevice::Exact => {
                    if let Some(s) = sq_dist(qrow(), index.row(pos), job.limit[q]) {
                        report.q.push(q as u32);
                        report.pos.push(pos as u32);
                        report.sq.push(s);
                    }
                }
                SeriesOnDevice::Half => {
                    if half_sq_f32(qrow(), &to_half(index.row(pos))) <= job.thresh2[q] {
                        report.half_survivors += 1;
                        report.q.push(q as u32);
                        report.pos.push(pos as u32);
                    }
                }
                SeriesOnDevice::No => {
                    report.q.push(q as u32);
                    report.pos.push(pos as u32);
                }
            }
        }
    }
    report
}

/// Batched queries on one GPU: the device holds the index's PAA array and, when they fit,
/// its series (uploaded once, by [`GpuBatch::new`]).
#[derive(Debug)]
pub struct GpuBatch<'a> {
    index: &'a Index,
    ordinal: Option<usize>,
    held: SeriesOnDevice,
}

/// A rank of what the device holds: `Exact` > `Half` > `No`.
fn rank(h: SeriesOnDevice) -> u8 {
    match h {
        SeriesOnDevice::Exact => 2,
        SeriesOnDevice::Half => 1,
        SeriesOnDevice::No => 0,
    }
}

/// Makes the GPU hold `index`'s batch data, at least what `want` asks of its series where it
/// fits (reusing what it already holds), and answers what it holds.
fn prepare(
    index: &Index,
    ordinal: Option<usize>,
    want: SeriesOnDevice,
) -> Result<SeriesOnDevice, SearchError> {
    let started = Instant::now();
    let worker = crate::device::shared_worker(ordinal).map_err(SearchError::Device)?;
    let paa = &index_paa(index).paa;
    let now = worker
        .search_batch_held(index.tag())
        .wait()
        .map_err(SearchError::Device)?;
    let held = match now {
        Some(held) if rank(held) >= rank(want) => held,
        _ => {
            let tag = index.tag();
            let held = worker
                .search_batch_load(BatchLoad {
                    tag,
                    count: index.count,
                    len: index.len,
                    weights: weights_f32(&index.segments).to_vec(),
                    rows: want == SeriesOnDevice::Exact,
                    half: want != SeriesOnDevice::No,
                })
                .wait()
                .map_err(SearchError::Device)?;
            // Chunks of at most 64 MiB, two in flight.
            let rows_per_chunk = |bytes_per_row: usize| ((1usize << 26) / bytes_per_row).max(1);
            let (count, len) = (index.count, index.len);
            upload_chunks(count, rows_per_chunk(SEGMENTS * 4), |first, end| {
                let chunk = paa[first * SEGMENTS..end * SEGMENTS].to_vec();
                worker.search_batch_fill(tag, BatchArray::Paa, first, chunk)
            })?;
            match held {
                SeriesOnDevice::Exact => {
                    upload_chunks(count, rows_per_chunk(len * 4), |first, end| {
                        let chunk = index.series()[first * len..end * len].to_vec();
                        worker.search_batch_fill(tag, BatchArray::Series, first, chunk)
                    })?;
                }
                SeriesOnDevice::Half => {
                    upload_chunks(count, rows_per_chunk(len * 2), |first, end| {
                        let chunk = to_half_par(&index.series()[first * len..end * len]);
                        worker.search_batch_fill_half(tag, first, chunk)
                    })?;
                }
                SeriesOnDevice::No => {}
            }
            held
        }
    };
    tracing::debug!(
        series = ?held,
        seconds = started.elapsed().as_secs_f64(),
        "Prepared the GPU for batched queries."
    );
    Ok(held)
}

impl<'a> GpuBatch<'a> {
    /// Uploads `index`'s PAA array to GPU `ordinal` (`None`: the first GPU) and, as `want`
    /// asks and memory allows (2 GiB left free): `Exact`, its series (`count × len × 4`
    /// bytes), or when they do not fit their half-precision copy (`count × len × 2` bytes);
    /// `Half`, the copy only; `No`, neither. Reuses what the GPU already holds of this index
    /// when that is at least what `want` asks.
    ///
    /// # Errors
    /// [`SearchError::Device`]: no driver or GPU, a failed upload; [`SearchError::Input`] for
    /// segments longer than 2^24 samples.
    pub fn new(
        index: &'a Index,
        ordinal: Option<usize>,
        want: SeriesOnDevice,
    ) -> Result<Self, SearchError> {
        if (0..SEGMENTS).any(|j| index.segments.weight(j) > f64::from(1u32 << 24)) {
            return Err(SearchError::input(
                "index",
                "series longer than 2^28 samples: their segment lengths are not exact in f32",
            ));
        }
        let held = prepare(index, ordinal, want)?;
        Ok(Self {
            index,
            ordinal,
            held,
        })
    }

    /// What the GPU holds of the series ([`SeriesOnDevice`]).
    #[must_use]
    pub fn series(&self) -> SeriesOnDevice {
        self.held
    }

    /// Exact k-NN of every z-normalised query of `qs` (module documentation). Returns
    /// `min(k, count)` neighbours per query.
    ///
    /// # Errors
    /// [`SearchError::ZeroK`], [`SearchError::Input`] for a query of the wrong length,
    /// [`SearchError::Device`] for a GPU failure.
    pub fn knn_batch(
        &self,
        qs: &[Vec<f32>],
        k: usize,
        options: &QueryOptions,
    ) -> Result<BatchAnswer, SearchError> {
        let worker = crate::device::shared_worker(self.ordinal).map_err(SearchError::Device)?;
        // Another index's load may have dropped this one's data to make room (the device keeps
        // several indexes' data while they fit): it is loaded again, as before. A searcher of
        // the same index may have loaded more of its series since: the batch uses what is there.
        let held = match worker
            .search_batch_held(self.index.tag())
            .wait()
            .map_err(SearchError::Device)?
        {
            Some(h) if rank(h) >= rank(self.held) => h,
            _ => prepare(self.index, self.ordinal, self.held)?,
        };
        let mut run = |job: BatchJob| worker.search_batch(job).wait();
        knn_batch_with(self.index, qs, k, options, held, &mut run)
    }
}
