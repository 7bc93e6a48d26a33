//! Exact motif by a lower-bounding projection and a grid ε-join (the `projection_join` path).
//!
//! # The bound
//! Each z-normalised subsequence `z_i` (a vector of norm `sqrt(m)`, or 0 when constant) is
//! projected onto the first [`PROJECTION_DIMS`] non-constant vectors of the orthonormal DCT-II
//! basis, `p_i[f] = sum_t c_f[t] z_i[t]`, `c_f[t] = sqrt(2/m) cos(pi (t + 1/2) f / m)`,
//! `f = 1..=K` (the DC vector is orthogonal to every z-normalised subsequence). An orthonormal
//! projection is a contraction, so `||p_i - p_j|| <= ||z_i - z_j|| = dist(i, j)`: the
//! lower-bounding lemma of the GEMINI framework (Faloutsos, Ranganathan & Manolopoulos,
//! "Fast subsequence matching in time-series databases", SIGMOD 1994, Lemma 1; DCT features as
//! in Korn, Jagadish & Faloutsos, SIGMOD 1997). It plays the role of MK's reference bounds
//! (`papers/motif-discovery-gpu-ru.txt`, Eq. 4 and Algs. 6–7) with a much tighter bound:
//! series with the `1/f` spectra of sensor data keep most of their energy in the first
//! coefficients (on a random walk with `m = 100`, 16 coefficients leave fewer than 1 pair in
//! 10^6 whose bound is below the motif distance; MK's 32 references leave 1 in 1,300).
//!
//! # The join
//! Every pair at distance `<= w` differs by at most `w` in every coordinate, so it lies in the
//! same or adjacent cells of a grid of width `w` over the first [`GRID_DIMS`] coordinates.
//! The join visits, for each cell, the cell itself and its `(3^d - 1) / 2` "forward"
//! neighbours, bounds every pair there with all `K` coordinates, and measures the survivors
//! exactly ([`Subsequences::distance`]). The width is not known in advance: the search starts
//! from a width whose grid predicts a modest number of pairs, and widens it until the best pair
//! found lies within the width searched (then no closer pair can have been missed). The bound
//! only ever skips pairs whose distance exceeds the current best, so ties are all measured and
//! the smallest `(distance, i, j)` wins, exactly as in brute force.
//!
//! # Rounding
//! Coordinates are computed in f64 and stored as f32 (`|p| <= sqrt(m)`, so each is within
//! `sqrt(m) 2^-24` of the exact value); bounds are compared against a radius widened by
//! `1e-5` relative plus `8 sqrt(K)` times that error, which covers the f32 differences and sums
//! (see [`Projection::radius`]).
//!
//! Constant subsequences project to the origin; pairs of two constants (distance 0) are
//! settled directly, never enumerated.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rayon::prelude::*;

pub use super::grid::{GRID_DIMS, Grid, host_dims};
use super::profile::MatrixProfile;
pub use super::projection::{PROJECTION_DIMS, Projection, dct_basis, projection_dims};
use super::{
    Method, MethodChoice, Motif, MotifConfig, MotifError, PairSearch, SearchStats, Subsequences,
    valid_pairs,
};

/// The first width is chosen so the grid predicts at most this many pairs per point on the
/// CPU (a bound costs a few nanoseconds per core there).
pub(crate) const CPU_PAIRS_PER_POINT: f64 = 256.0;
/// The same on the GPU, which bounds about 5e11 pairs per second (H100).
pub(crate) const GPU_PAIRS_PER_POINT: f64 = 8192.0;
/// Width growth between rounds that found nothing.
const GROWTH: f64 = 1.25;
/// Points sampled to predict a grid's pairs.
const SAMPLE: usize = 8192;

/// Predicts the pairs a grid of `width` would bound over `points` from an evenly spaced
/// sample (scaled by the squared sampling ratio).
fn predicted_pairs(proj: &Projection, points: &[u32], width: f64) -> f64 {
    let step = (points.len() / SAMPLE).max(1);
    let sample: Vec<u32> = points.iter().step_by(step).copied().collect();
    let g = Grid::build(proj, &sample, width);
    let ratio = points.len() as f64 / sample.len().max(1) as f64;
    g.pairs as f64 * ratio * ratio
}

/// The first width: a rung of a geometric ladder whose grid predicts at most
/// `pairs_per_point` pairs per point, found by bisection (the largest such rung when the
/// prediction shrinks with the width, as it does but for sampling noise; the width only
/// changes the cost, never the answer).
pub(crate) fn initial_width(
    proj: &Projection,
    points: &[u32],
    m: usize,
    pairs_per_point: f64,
) -> f64 {
    let budget = pairs_per_point * points.len() as f64;
    let top = 2.0 * (m as f64).sqrt();
    // Steps of 2^(1/4): a grid's pairs grow about as w^3 here, so each step is a factor ~1.7.
    // Rungs k = 0, 1, ..: w = top / 2^(k/4), down to 1e-6. The predicted pairs shrink with
    // the width, so the first rung within the budget is found by bisection (a handful of
    // sample grids instead of one per rung).
    let step = 2f64.powf(0.25);
    let rungs = ((top / 1e-6).ln() / step.ln()).ceil().max(0.0) as u32;
    let width = |k: u32| top / step.powi(k as i32);
    let fits = |k: u32| predicted_pairs(proj, points, proj.radius(width(k))) <= budget;
    if fits(0) {
        return top;
    }
    // fits(lo) is false; fits(hi) is taken as true at the last rung.
    let (mut lo, mut hi) = (0u32, rungs);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    width(hi)
}

/// Pairs of two allowed constant subsequences (distance 0): the smallest `(i, j)` with
/// `j - i > exclusion`.
pub(crate) fn constant_pair(
    subs: &Subsequences<'_>,
    allowed: &[bool],
    exclusion: usize,
) -> Option<Motif> {
    let constants: Vec<usize> = (0..subs.count())
        .into_par_iter()
        .filter(|&i| allowed[i] && subs.valid[i] && subs.inv_std[i] == 0.0)
        .collect();
    constants.iter().find_map(|&i| {
        let k = constants.partition_point(|&j| j <= i + exclusion);
        constants.get(k).map(|&j| Motif {
            i,
            j,
            distance: subs.distance(i, j),
        })
    })
}

/// What one join round found.
#[derive(Clone, Copy, Debug, Default)]
struct Round {
    best: Option<Motif>,
    bounds: u64,
    distances: u64,
    aborted: bool,
}

/// CPU projection join (see the module docs and [`PairSearch`]).
#[derive(Debug)]
pub struct ProjectionJoin<'s> {
    subs: &'s Subsequences<'s>,
    cfg: MotifConfig,
    proj: Projection,
}

impl<'s> ProjectionJoin<'s> {
    /// Projects every subsequence of `subs`.
    #[must_use]
    pub fn new(subs: &'s Subsequences<'s>, cfg: &MotifConfig) -> Self {
        Self {
            subs,
            cfg: cfg.clone(),
            proj: Projection::new(subs),
        }
    }

    /// One round at width `w`: every pair of the grid bounded, survivors measured exactly.
    /// `budget` caps the exact distances (auto mode hands over to the matrix profile).
    fn round(&self, grid: &Grid, w: f64, seed: Option<Motif>, budget: u64) -> Round {
        let (proj, subs, excl) = (&self.proj, self.subs, self.cfg.exclusion);
        // Point-major coordinates in grid order: the inner loop reads contiguous memory.
        let sorted = grid.gather(proj);
        let constant: Vec<bool> = grid
            .order
            .iter()
            .map(|&i| subs.inv_std[i as usize] == 0.0)
            .collect();
        let bsf = AtomicU64::new(seed.map_or(f64::INFINITY, |s| s.distance).min(w).to_bits());
        let distances = AtomicU64::new(0);
        let abort = AtomicBool::new(false);
        let (best, bounds) = (0..grid.cells())
            .into_par_iter()
            .fold(
                || (None::<Motif>, 0u64),
                |(mut best, mut bounds), c| {
                    if abort.load(Ordering::Relaxed) {
                        return (best, bounds);
                    }
                    let cs = grid.cell_start[c] as usize..grid.cell_start[c + 1] as usize;
                    let nbs =
                        &grid.nb_cell[grid.nb_start[c] as usize..grid.nb_start[c + 1] as usize];
                    for apos in cs {
                        let a = grid.order[apos] as usize;
                        let pa = &sorted[apos];
                        let r2 = proj.radius2_f32(f64::from_bits(bsf.load(Ordering::Relaxed)));
                        for (e, &nc) in nbs.iter().enumerate() {
                            let from = if e == 0 {
                                apos + 1
                            } else {
                                grid.cell_start[nc as usize] as usize
                            };
                            let to = grid.cell_start[nc as usize + 1] as usize;
                            bounds += (to - from) as u64;
                            for bpos in from..to {
                                if exceeds(pa, &sorted[bpos], r2) {
                                    continue;
                                }
                                let b = grid.order[bpos] as usize;
                                if a.abs_diff(b) <= excl || (constant[apos] && constant[bpos]) {
                                    continue;
                                }
                                if distances.fetch_add(1, Ordering::Relaxed) >= budget {
                                    abort.store(true, Ordering::Relaxed);
                                    return (best, bounds);
                                }
                                let m = Motif {
                                    i: a.min(b),
                                    j: a.max(b),
                                    distance: subs.distance(a, b),
                                };
                                if m.distance <= w {
                                    bsf.fetch_min(m.distance.to_bits(), Ordering::Relaxed);
                                }
                                // Beyond the width it is still an upper bound for the next round.
                                best = Motif::best(best, Some(m));
                            }
                        }
                    }
                    (best, bounds)
                },
            )
            .reduce(|| (None, 0), |(a, x), (b, y)| (Motif::best(a, b), x + y));
        Round {
            best,
            bounds,
            distances: distances.load(Ordering::Relaxed),
            aborted: abort.load(Ordering::Relaxed),
        }
    }
}

/// Whether the f32 squared bound between `a` and `b` exceeds `r2`, checked every 4
/// coordinates so most pairs leave after the first four.
#[inline]
fn exceeds(a: &[f32; PROJECTION_DIMS], b: &[f32; PROJECTION_DIMS], r2: f32) -> bool {
    let mut s = [0f32; 4];
    for q in 0..PROJECTION_DIMS / 4 {
        for l in 0..4 {
            let d = a[4 * q + l] - b[4 * q + l];
            s[l] += d * d;
        }
        // Any order of the partial sums is within the radius' slack (1e-5 relative).
        if (s[0] + s[1]) + (s[2] + s[3]) > r2 {
            return true;
        }
    }
    false
}

/// The points a search joins: valid and allowed.
pub(crate) fn join_points(subs: &Subsequences<'_>, allowed: &[bool]) -> Vec<u32> {
    (0..subs.count())
        .into_par_iter()
        .filter(|&i| allowed[i] && subs.valid[i])
        .map(|i| i as u32)
        .collect()
}

/// The next width after a round at `w` that found `best` (`None`: done, `best` is exact).
/// A pair found beyond the width is an upper bound: searching up to it ends the search.
pub(crate) fn next_width(w: f64, best: Option<Motif>, max_distance: f64) -> Option<f64> {
    match best {
        Some(b) if b.distance <= w => None,
        Some(b) => Some(b.distance.max(w * 1.000_001)),
        None if w > max_distance => None,
        None => Some(w * GROWTH),
    }
}

/// Exact distances a round may measure before auto mode prefers the matrix profile: the
/// matrix profile costs about one exact distance per `m` of its cells.
pub(crate) fn distance_budget(pairs: u64, m: usize, method: MethodChoice) -> u64 {
    if method == MethodChoice::Auto {
        (pairs / (4 * m as u64).max(1)).max(1 << 20)
    } else {
        u64::MAX
    }
}

impl PairSearch for ProjectionJoin<'_> {
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        let started = std::time::Instant::now();
        let subs = self.subs;
        let pairs = valid_pairs(allowed, self.cfg.exclusion);
        let points = join_points(subs, allowed);
        let constant = constant_pair(subs, allowed, self.cfg.exclusion);
        let max_distance = 2.0 * (subs.m as f64).sqrt();
        let budget = distance_budget(pairs, subs.m, self.cfg.method);
        let mut stats = SearchStats {
            pairs,
            ..SearchStats::default()
        };
        let mut w = initial_width(&self.proj, &points, subs.m, CPU_PAIRS_PER_POINT);
        let best = loop {
            let built = std::time::Instant::now();
            let grid = Grid::build(&self.proj, &points, self.proj.radius(w));
            let build_ms = built.elapsed().as_secs_f64() * 1e3;
            if self.cfg.method == MethodChoice::Auto && grid.pairs > pairs / 2 {
                return self.fallback(allowed, stats, started);
            }
            let r = self.round(&grid, w, constant, budget);
            tracing::debug!(
                width = w,
                build_ms,
                cells = grid.cells(),
                pairs = grid.pairs,
                distances = r.distances,
                best = r.best.map_or(f64::NAN, |b| b.distance),
                "projection join round"
            );
            stats.lower_bounds += r.bounds;
            stats.distances += r.distances;
            if r.aborted {
                return self.fallback(allowed, stats, started);
            }
            let best = Motif::best(r.best, constant);
            match next_width(w, best, max_distance) {
                None => break best,
                Some(next) => w = next,
            }
        };
        stats.seconds = started.elapsed().as_secs_f64();
        Ok((best, Method::ProjectionJoin, stats))
    }
}

impl ProjectionJoin<'_> {
    fn fallback(
        &self,
        allowed: &[bool],
        mut stats: SearchStats,
        started: std::time::Instant,
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        crate::motif::note_weak_bounds();
        let (best, method, s) =
            MatrixProfile::new(self.subs, self.cfg.exclusion).best_pair(allowed)?;
        stats.distances += s.distances;
        stats.seconds = started.elapsed().as_secs_f64();
        Ok((best, method, stats))
    }
}
