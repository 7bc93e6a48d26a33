//! Batched exact k-NN queries ([`super::Searcher::query_batch`]): many queries answered
//! together, on the CPU or on one GPU.
//!
//! * **CPU**: SING per query ([`Index::knn_normalized`], no producer), the queries in
//!   parallel on rayon's pool with one search worker each (with fewer queries than workers,
//!   the workers shared out among them): with more queries than cores, parallelism across
//!   queries wastes nothing on a query's synchronisation.
//! * **GPU** ([`GpuBatch`]): the device holds the PAA of every series (16 `f32`, 64 bytes per
//!   series) and, when they fit, the series themselves. For a batch:
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
//!      within the query's BSF; without the series on the device the host computes them;
//!   4. the host takes, per query, the k smallest `(distance², id)`.
//!
//! **Exactness.** Let `D²` be a series' exact squared distance as [`sq_dist`] computes it. The
//! k nearest all have `D² <= BSF` (the BSF is the k-th best of some k series). For such a
//! series the PAA bound `LB <= D` (Cauchy–Schwarz within each segment), and the `f32` bound
//! the kernel computes is at most [`filter_threshold`]`(BSF)` (the error analysis is in that
//! function's documentation and `tests/search_batch.rs` checks it on adversarial pairs), so it
//! survives the filter; its refined distance is exact and `<= BSF`, so it is returned. The
//! answer is therefore the k smallest `(D², id)` over all series: the brute force's answer,
//! ids and distances, ties to the smallest id.
//!
//! A query whose survivors alone overflow the device's pair list (2^25 pairs: an extremely
//! poor first BSF, e.g. a collection of near-copies of the query) is answered by SING on the
//! CPU and counted in [`BatchStats::cpu_fallbacks`].

use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use super::SearchError;
use super::collection::sq_dist;
use super::index::Index;
use super::paa::{SEGMENTS, Segments};
use super::query::{Neighbor, QueryAnswer, QueryOptions, QueryStats};
use crate::device::DeviceError;
use crate::device::search::{BatchArray, BatchLoad};
pub use crate::device::search::{BatchJob, BatchReport};

/// What a batch cost, over all its queries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BatchStats {
    /// Queries answered.
    pub queries: u64,
    /// `"gpu"` or `"cpu"`.
    pub device: &'static str,
    /// Whether the GPU held the series (distances refined on the device) or the host
    /// refined them.
    pub series_on_device: bool,
    /// (Query, series) pairs that passed the GPU's PAA filter.
    pub filter_survivors: u64,
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
                seconds,
                ..BatchStats::default()
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

/// The PAA array of an index for the device: `[count * 16]` `f32` in leaf order, and the
/// largest series norm ([`paa_f32`]); computed once per index (multi-threaded) and kept.
#[must_use]
pub fn index_paa(index: &Index) -> &(Vec<f32>, f64) {
    index.batch_paa.0.get_or_init(|| compute_paa(index))
}

fn compute_paa(index: &Index) -> (Vec<f32>, f64) {
    let parts: Vec<(Vec<f32>, f64)> = (0..index.count)
        .into_par_iter()
        .chunks(1 << 14)
        .map(|positions| {
            let mut v = Vec::with_capacity(positions.len() * SEGMENTS);
            let mut max = 0.0f64;
            for pos in positions {
                let (p, n) = paa_f32(&index.segments, index.row(pos));
                v.extend_from_slice(&p);
                max = max.max(n);
            }
            (v, max)
        })
        .collect();
    let mut out = Vec::with_capacity(index.count * SEGMENTS);
    let mut max = 0.0f64;
    for (v, m) in parts {
        out.extend_from_slice(&v);
        max = max.max(m);
    }
    (out, max)
}

/// The device's work on one batch, as [`crate::device::GpuWorker::search_batch`] does it; the
/// CPU model [`emulate_batch`] stands in for it in tests.
pub type RunBatch<'r> = dyn FnMut(BatchJob) -> Result<BatchReport, DeviceError> + 'r;

/// Answers a batch through `run` (the device, or [`emulate_batch`]): steps 1 and 4 of the
/// module documentation around `run`'s filter and refine. `x_norm` is the index's largest
/// series norm ([`index_paa`]); `series_on_device` says whether `run` refines (else the host
/// computes the survivors' distances).
///
/// # Errors
/// As [`Index::knn_batch_cpu`], and [`SearchError::Device`] when `run` fails.
pub fn knn_batch_with(
    index: &Index,
    qs: &[Vec<f32>],
    k: usize,
    options: &QueryOptions,
    x_norm: f64,
    series_on_device: bool,
    run: &mut RunBatch<'_>,
) -> Result<BatchAnswer, SearchError> {
    let started = Instant::now();
    check_batch(index, qs, k)?;
    let k = k.min(index.count);
    let nq = qs.len();
    if nq == 0 {
        return Ok(BatchAnswer {
            answers: Vec::new(),
            stats: BatchStats {
                device: "gpu",
                series_on_device,
                ..BatchStats::default()
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
        qrows: if series_on_device {
            qs.concat()
        } else {
            Vec::new()
        },
        limit: prepared.iter().map(|p| p.2).collect(),
    };
    // 2–3. Filter and refine.
    let report = run(job).map_err(SearchError::Device)?;
    if report.survivors.len() != nq || report.q.len() != report.pos.len() {
        return Err(SearchError::Device(DeviceError::Unsupported(
            "a malformed batch report".into(),
        )));
    }
    let refined_here = !series_on_device;
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
            series_on_device,
            filter_survivors: report.survivors.iter().map(|&s| u64::from(s)).sum(),
            cpu_fallbacks,
            device_ms: report.device_ms,
            seconds,
        },
    })
}

/// The device's filter and refine computed on the CPU with the kernels' operations (the
/// model the tests run without a GPU; `tools/search-emulation.cpp` checks the kernels
/// themselves against the same loops): every `(query, position)` with [`lb_f32`] within the
/// threshold survives; with `series_on_device` the survivors within the limit come back with
/// their [`sq_dist`]. `cap` is the pair list's capacity per range of queries, as on the
/// device (queries in ranges of `per_launch`, split on overflow down to single queries).
#[must_use]
pub fn emulate_batch(
    index: &Index,
    paa: &[f32],
    job: &BatchJob,
    series_on_device: bool,
    per_launch: usize,
    cap: usize,
) -> BatchReport {
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
            if series_on_device {
                let qrow = &job.qrows[q * len..(q + 1) * len];
                if let Some(s) = sq_dist(qrow, index.row(pos), job.limit[q]) {
                    report.q.push(q as u32);
                    report.pos.push(pos as u32);
                    report.sq.push(s);
                }
            } else {
                report.q.push(q as u32);
                report.pos.push(pos as u32);
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
    x_norm: f64,
    series_on_device: bool,
}

impl<'a> GpuBatch<'a> {
    /// Uploads `index`'s PAA array to GPU `ordinal` (`None`: the first GPU) and, when `series`
    /// is set and they fit beside it with 2 GiB to spare, its series (`count × len × 4`
    /// bytes); reuses what the GPU already holds of this index.
    ///
    /// # Errors
    /// [`SearchError::Device`]: no driver or GPU, a failed upload; [`SearchError::Input`] for
    /// segments longer than 2^24 samples.
    pub fn new(
        index: &'a Index,
        ordinal: Option<usize>,
        series: bool,
    ) -> Result<Self, SearchError> {
        if (0..SEGMENTS).any(|j| index.segments.weight(j) > f64::from(1u32 << 24)) {
            return Err(SearchError::input(
                "index",
                "series longer than 2^28 samples: their segment lengths are not exact in f32",
            ));
        }
        let started = Instant::now();
        let worker = crate::device::shared_worker(ordinal).map_err(SearchError::Device)?;
        let (paa, x_norm) = index_paa(index);
        let x_norm = *x_norm;
        let held = worker
            .search_batch_tag()
            .wait()
            .map_err(SearchError::Device)?;
        let series_on_device = match held {
            Some((tag, full)) if tag == index.tag() && (full || !series) => full,
            _ => {
                let tag = index.tag();
                let held = worker
                    .search_batch_load(BatchLoad {
                        tag,
                        count: index.count,
                        len: index.len,
                        weights: weights_f32(&index.segments).to_vec(),
                        rows: series,
                    })
                    .wait()
                    .map_err(SearchError::Device)?;
                // Chunks of at most 64 MiB, two in flight.
                let mut arrays = vec![(BatchArray::Paa, SEGMENTS, paa.as_slice())];
                if held {
                    arrays.push((BatchArray::Series, index.len, index.series()));
                }
                for (array, width, values) in arrays {
                    let rows_per_chunk = ((1usize << 24) / width).max(1);
                    let mut pending = std::collections::VecDeque::new();
                    for first in (0..index.count).step_by(rows_per_chunk) {
                        let end = (first + rows_per_chunk).min(index.count);
                        let chunk = values[first * width..end * width].to_vec();
                        pending.push_back(worker.search_batch_fill(tag, array, first, chunk));
                        if pending.len() > 2
                            && let Some(t) = pending.pop_front()
                        {
                            t.wait().map_err(SearchError::Device)?;
                        }
                    }
                    for t in pending {
                        t.wait().map_err(SearchError::Device)?;
                    }
                }
                held
            }
        };
        tracing::debug!(
            series_on_device,
            seconds = started.elapsed().as_secs_f64(),
            "Prepared the GPU for batched queries."
        );
        Ok(Self {
            index,
            ordinal,
            x_norm,
            series_on_device,
        })
    }

    /// Whether the GPU holds the series (else the host computes the survivors' distances).
    #[must_use]
    pub fn series_on_device(&self) -> bool {
        self.series_on_device
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
        let mut run = |job: BatchJob| worker.search_batch(job).wait();
        knn_batch_with(
            self.index,
            qs,
            k,
            options,
            self.x_norm,
            self.series_on_device,
            &mut run,
        )
    }
}
