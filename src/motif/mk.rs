//! MK on the CPU (Mueen, Keogh, Zhu, Cash, Westover, "Exact discovery of time series motifs",
//! SDM 2009), organised as the paper's Algorithm 1 (`papers/motif-discovery-gpu-ru.txt`, §4.3),
//! multi-threaded with rayon.
//!
//! * Preprocessing, once per series: `r` random reference subsequences (Eq. 7), the distance
//!   matrix `D` (Eq. 8, Alg. 3), the standard deviation of each row (Alg. 4), the references
//!   by descending deviation (`I_SD`) and the subsequences ordered by their distance to the
//!   first of them (`I_S`). `D` is stored permuted into that order, so the bounds of pairs
//!   `offset` apart read contiguous memory.
//! * Search, once per motif: the BSF starts at the closest valid reference pair (Alg. 5).
//!   Pairs `(I_S[k], I_S[k + offset])` get the lower bound
//!   `max_r |D(r, a) - D(r, b)|` (Eq. 4, Eq. 9, Alg. 6); a pair is pruned when a bound
//!   exceeds the BSF (Alg. 7), otherwise its true distance may lower the BSF (Alg. 8).
//! * Stopping: only the ordering reference's bound grows with the offset, so the search stops
//!   for `k` at the first offset whose ordering bound exceeds the BSF — per `k`, which is the
//!   paper's global stop (no pair at an offset survives the ordering bound) applied to each
//!   `k` separately. Bounds of the other references never stop the loop: a pair they prune at
//!   one offset says nothing about the next (DESIGN.md §4 notes this trap in Alg. 7's VERIFY).
//! * The first [`OFFSET_MAJOR`] offsets run offset-major as in Algorithm 1 (they find a small
//!   BSF fast); the rest run per `k`. (`auto` never runs MK: it runs the projection join of [`super::join`].)
//!
//! Bounds are compared with a slack of `1e-9 (1 + BSF)` so rounding never prunes a pair that
//! ties the motif; the winner is the smallest `(distance, i, j)`, as brute force picks it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rand::SeedableRng;
use rayon::prelude::*;

use super::{
    Method, Motif, MotifConfig, MotifError, PairSearch, SearchStats, Subsequences, valid_pairs,
};

/// Offsets searched offset-major before the per-`k` sweep.
pub const OFFSET_MAJOR: usize = 64;
/// Subsequences per parallel task.
const CHUNK: usize = 2048;

/// The MK search state: references, `I_S` and the permuted distance matrix.
#[derive(Debug)]
pub struct Mk<'s> {
    subs: &'s Subsequences<'s>,
    exclusion: usize,
    /// Reference starts, by descending standard deviation of their `D` row (`I_Ref[I_SD]`).
    pub references: Vec<usize>,
    /// Standard deviation of each reference's distances, same order.
    pub deviations: Vec<f64>,
    /// `I_S`: valid subsequences by ascending distance to `references[0]`.
    pub order: Vec<u32>,
    /// `D` permuted: `dp[q * order.len() + k] = D(references[q], order[k])`.
    pub dp: Vec<f64>,
}

/// `D(reference, j)` for every valid `j` (Alg. 3) and the row's standard deviation (Alg. 4).
pub(crate) fn reference_row(subs: &Subsequences<'_>, reference: usize) -> (Vec<f64>, f64) {
    let row: Vec<f64> = (0..subs.count())
        .into_par_iter()
        .with_min_len(CHUNK)
        .map(|j| {
            if subs.valid[j] {
                subs.distance(reference, j)
            } else {
                f64::INFINITY
            }
        })
        .collect();
    let valid: Vec<f64> = row.iter().copied().filter(|d| d.is_finite()).collect();
    let n = valid.len().max(1) as f64;
    let mean = valid.iter().sum::<f64>() / n;
    let sd = (valid.iter().map(|d| (d - mean) * (d - mean)).sum::<f64>() / n).sqrt();
    (row, sd)
}

/// Up to `r` distinct valid reference starts chosen by the seeded generator (Eq. 7).
pub(crate) fn choose_references(subs: &Subsequences<'_>, r: usize, seed: u64) -> Vec<usize> {
    let valid: Vec<usize> = (0..subs.count()).filter(|&i| subs.valid[i]).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rand::seq::index::sample(&mut rng, valid.len(), r.min(valid.len()))
        .into_iter()
        .map(|k| valid[k])
        .collect()
}

impl<'s> Mk<'s> {
    /// Preprocesses `subs` (references, `D`, `I_SD`, `I_S`).
    #[must_use]
    pub fn new(subs: &'s Subsequences<'s>, cfg: &MotifConfig) -> Self {
        let chosen = choose_references(subs, cfg.references, cfg.seed);
        let mut rows: Vec<(usize, Vec<f64>, f64)> = chosen
            .into_iter()
            .map(|r| {
                let (row, sd) = reference_row(subs, r);
                (r, row, sd)
            })
            .collect();
        rows.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
        let mut order: Vec<u32> = (0..subs.count())
            .filter(|&j| subs.valid[j])
            .map(|j| j as u32)
            .collect();
        if let Some((_, first, _)) = rows.first() {
            order.par_sort_unstable_by(|&a, &b| {
                first[a as usize]
                    .total_cmp(&first[b as usize])
                    .then(a.cmp(&b))
            });
        }
        let len = order.len();
        let mut dp = vec![0.0; rows.len() * len];
        for (q, (_, row, _)) in rows.iter().enumerate() {
            dp[q * len..(q + 1) * len]
                .par_iter_mut()
                .zip(order.par_iter())
                .for_each(|(d, &j)| *d = row[j as usize]);
        }
        Self {
            subs,
            exclusion: cfg.exclusion,
            references: rows.iter().map(|r| r.0).collect(),
            deviations: rows.iter().map(|r| r.2).collect(),
            order,
            dp,
        }
    }

    /// Initial BSF (Alg. 5): the closest allowed pair that has a reference as a member.
    fn initial_bsf(&self, allowed: &[bool]) -> Option<Motif> {
        let len = self.order.len();
        let mut best = None;
        for (q, &r) in self.references.iter().enumerate() {
            if !allowed[r] {
                continue;
            }
            let row = &self.dp[q * len..(q + 1) * len];
            for (k, &j) in self.order.iter().enumerate() {
                let j = j as usize;
                if allowed[j] && r.abs_diff(j) > self.exclusion {
                    let m = Motif {
                        i: r.min(j),
                        j: r.max(j),
                        distance: row[k],
                    };
                    best = Motif::best(best, Some(m));
                }
            }
        }
        best
    }

    /// Bounds and, if they pass, measures pair `(order[k], order[p])`.
    #[inline]
    fn check(&self, k: usize, p: usize, allowed: &[bool], bsf: &AtomicU64, local: &mut Local) {
        let (a, b) = (self.order[k] as usize, self.order[p] as usize);
        if !(allowed[a] && allowed[b]) || a.abs_diff(b) <= self.exclusion {
            return;
        }
        let len = self.order.len();
        local.lower_bounds += 1;
        let limit = slack(f64::from_bits(bsf.load(Ordering::Relaxed)));
        for q in 1..self.references.len() {
            let row = &self.dp[q * len..];
            if (row[p] - row[k]).abs() > limit {
                return;
            }
        }
        local.distances += 1;
        let d = self.subs.distance(a, b);
        if d <= limit {
            let m = Motif {
                i: a.min(b),
                j: a.max(b),
                distance: d,
            };
            local.best = Motif::best(local.best, Some(m));
            bsf.fetch_min(d.to_bits(), Ordering::Relaxed);
        }
    }
}

/// The bound above which a pair is pruned.
#[inline]
fn slack(bsf: f64) -> f64 {
    bsf + 1e-9 * (1.0 + bsf)
}

#[derive(Clone, Copy, Debug, Default)]
struct Local {
    best: Option<Motif>,
    lower_bounds: u64,
    distances: u64,
}

impl Local {
    fn merge(self, o: Self) -> Self {
        Self {
            best: Motif::best(self.best, o.best),
            lower_bounds: self.lower_bounds + o.lower_bounds,
            distances: self.distances + o.distances,
        }
    }
}

impl PairSearch for Mk<'_> {
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        let started = Instant::now();
        let len = self.order.len();
        let pairs = valid_pairs(allowed, self.exclusion);
        if self.references.is_empty() || len < 2 {
            let stats = SearchStats {
                pairs,
                ..SearchStats::default()
            };
            return Ok((None, Method::Mk, stats));
        }
        let init = self.initial_bsf(allowed);
        let bsf = AtomicU64::new(init.map_or(f64::INFINITY, |m| m.distance).to_bits());
        let dp0 = &self.dp[..len];
        let major = OFFSET_MAJOR.min(len - 1);
        let chunks: Vec<usize> = (0..len).step_by(CHUNK).collect();
        // Phase 1: offsets 1..=major, offset-major within each chunk of k.
        let phase1 = chunks
            .par_iter()
            .map(|&k0| {
                let mut local = Local::default();
                for o in 1..=major {
                    for k in k0..(k0 + CHUNK).min(len - o) {
                        let p = k + o;
                        if dp0[p] - dp0[k] <= slack(f64::from_bits(bsf.load(Ordering::Relaxed))) {
                            self.check(k, p, allowed, &bsf, &mut local);
                        }
                    }
                }
                local
            })
            .reduce(Local::default, Local::merge);
        // Phase 2: per k, offsets beyond `major` until the ordering bound exceeds the BSF.
        let phase2 = chunks
            .par_iter()
            .map(|&k0| {
                let mut local = Local::default();
                for k in k0..(k0 + CHUNK).min(len) {
                    let mut p = k + major + 1;
                    while p < len
                        && dp0[p] - dp0[k] <= slack(f64::from_bits(bsf.load(Ordering::Relaxed)))
                    {
                        self.check(k, p, allowed, &bsf, &mut local);
                        p += 1;
                    }
                }
                local
            })
            .reduce(Local::default, Local::merge);
        let all = phase1.merge(phase2);
        // Re-measure the reference pair of Alg. 5 with the exact distance.
        let init = init.map(|m| Motif {
            distance: self.subs.distance(m.i, m.j),
            ..m
        });
        let stats = SearchStats {
            pairs,
            lower_bounds: all.lower_bounds,
            distances: all.distances,
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok((Motif::best(init, all.best), Method::Mk, stats))
    }
}
