//! The GPU paths: the projection join ([`super::join`]: DCT coordinates and the grid scan on
//! the device, the grid built on the host), the paper's parallel MK (Algorithms 2–8 as CUDA
//! kernels) and the exact matrix profile, driven from the host through one device thread
//! (`device::motif`).
//!
//! Differences from the paper's OpenACC code, all keeping the result exact:
//! * the subsequence matrix `S` is never materialised: kernels read the series and the
//!   per-subsequence mean and `1/sigma` (8 B per subsequence instead of `8 m`);
//! * `I_S` is sorted on the host (one row of `D` is downloaded), and `D` is permuted on the
//!   device into that order so the bound kernels read contiguous memory;
//! * Algs. 6–8 are fused into one kernel that runs a range of offsets per launch, each thread
//!   leaving its `k` at the first offset whose ordering bound exceeds the BSF; launches repeat
//!   with doubling offset ranges until no thread is still inside its window;
//! * Alg. 5 initialises the BSF from the ordering reference's row only.
//!
//! The device thread is the process-wide one of [`crate::device::shared_worker`]: the context
//! and the compiled kernels outlive the search.
//!
//! Candidate pairs (within `1e-7 (1 + BSF)` of the BSF they saw) come back to the host, which
//! re-measures them with [`Subsequences::distance`] and keeps the smallest
//! `(distance, i, j)`, so the GPU answer equals brute force's. If the candidate list
//! overflows (more than a million near-ties), that search is redone by CPU MK.

use std::sync::Arc;

use rayon::prelude::*;

use super::join::{
    GPU_PAIRS_PER_POINT, Grid, PROJECTION_DIMS, Projection, constant_pair, dct_basis,
    distance_budget, host_dims, initial_width, join_points, next_width, projection_dims,
};
use super::mk::{Mk, OFFSET_MAJOR, choose_references};
use super::profile::scamp_terms;
use super::{
    Method, MethodChoice, Motif, MotifConfig, MotifError, PairSearch, SearchStats, Subsequences,
    valid_pairs,
};
use crate::device::motif::{JoinCells, MAX_PROJECTION_DIMS, MotifCandidates, MotifSeries};
use crate::device::{DeviceError, SharedWorker};

// The join kernels take every coordinate the projection produces.
const _: () = assert!(PROJECTION_DIMS <= MAX_PROJECTION_DIMS);

/// A round's grid as the device job takes it (the arrays move, nothing is copied).
fn join_cells(grid: Grid) -> JoinCells {
    JoinCells {
        order: grid.order,
        cell_start: grid.cell_start,
        nb_start: grid.nb_start,
        nb_cell: grid.nb_cell,
    }
}

/// Matrix-profile tile: rows per thread between direct covariances.
const PROFILE_TILE: u32 = 2048;
/// Offsets of the first MK launch after the offset-major phase (doubling after that).
const FIRST_BLOCK: u32 = 256;

/// MK and the matrix profile on one GPU (see [`PairSearch`]).
pub(crate) struct GpuMotifSearch<'s> {
    subs: &'s Subsequences<'s>,
    cfg: MotifConfig,
    worker: SharedWorker,
    /// `D(ordering reference, j)` in subsequence order (empty for matrix-profile only).
    row0: Vec<f64>,
    reference0: Option<usize>,
    /// The projection join's coordinates (host copy for building grids), once projected.
    projection: Option<Projection>,
    /// Whether the device holds SCAMP's terms (the matrix profile's).
    terms: bool,
    /// Kernel milliseconds (CUDA events) of the last search.
    pub kernel_ms: f64,
}

impl std::fmt::Debug for GpuMotifSearch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuMotifSearch")
            .field("device", &self.worker.info().name)
            .finish_non_exhaustive()
    }
}

impl<'s> GpuMotifSearch<'s> {
    /// Takes the device thread of GPU `gpu` (a CUDA ordinal; `None`: the first GPU), uploads
    /// the series and, unless only the matrix profile was asked for, runs MK's preprocessing
    /// (Algs. 2–4).
    ///
    /// # Errors
    /// [`DeviceError`] when there is no usable GPU (or no GPU `gpu`) or a kernel fails.
    pub(crate) fn start(
        subs: &'s Subsequences<'s>,
        cfg: &MotifConfig,
        gpu: Option<usize>,
    ) -> Result<Self, DeviceError> {
        let worker = crate::device::shared_worker(gpu)?;
        let started = std::time::Instant::now();
        // SCAMP's terms only when the matrix profile is what was asked for; the projection
        // join uploads them if it falls back to the profile (`ensure_terms`).
        let terms = cfg.method == MethodChoice::MatrixProfile;
        let (df, dg) = if terms {
            scamp_terms(subs)
        } else {
            (Vec::new(), Vec::new())
        };
        // The statistics are shared; the series and validity are copied in parallel (fresh
        // pages fault in on every core at once).
        let series = MotifSeries {
            x: subs.x.par_iter().copied().collect(),
            m: subs.m,
            mean: subs.mean.clone(),
            inv_std: subs.inv_std.clone(),
            df,
            dg,
            valid: subs.valid.par_iter().map(|&v| u8::from(v)).collect(),
        };
        let built_ms = started.elapsed().as_secs_f64() * 1e3;
        worker.motif_load(Arc::new(series)).wait()?;
        tracing::debug!(
            host_ms = built_ms,
            total_ms = started.elapsed().as_secs_f64() * 1e3,
            "GPU motif start: series terms and copies on the host, then the upload"
        );
        let mut me = Self {
            subs,
            cfg: cfg.clone(),
            worker,
            row0: Vec::new(),
            reference0: None,
            projection: None,
            terms,
            kernel_ms: 0.0,
        };
        if cfg.method == MethodChoice::Mk {
            me.prepare_mk()?;
        }
        Ok(me)
    }

    fn prepare_mk(&mut self) -> Result<(), DeviceError> {
        let refs = choose_references(self.subs, self.cfg.references, self.cfg.seed);
        if refs.is_empty() {
            return Ok(());
        }
        let refs32: Vec<u32> = refs.iter().map(|&r| r as u32).collect();
        let sds = self.worker.motif_reference_rows(refs32).wait()?;
        let mut rank: Vec<u32> = (0..refs.len() as u32).collect();
        rank.sort_by(|&a, &b| {
            sds[b as usize]
                .total_cmp(&sds[a as usize])
                .then(refs[a as usize].cmp(&refs[b as usize]))
        });
        let row0 = self.worker.motif_row(rank[0] as usize).wait()?;
        let mut order: Vec<u32> = (0..self.subs.count())
            .filter(|&j| self.subs.valid[j])
            .map(|j| j as u32)
            .collect();
        order.par_sort_unstable_by(|&a, &b| {
            row0[a as usize]
                .total_cmp(&row0[b as usize])
                .then(a.cmp(&b))
        });
        self.worker
            .motif_set_order(Arc::new(order), rank.clone())
            .wait()?;
        self.reference0 = Some(refs[rank[0] as usize]);
        self.row0 = row0;
        Ok(())
    }

    /// Alg. 5 on the ordering reference's row.
    fn initial_bsf(&self, allowed: &[bool]) -> Option<Motif> {
        let r = self.reference0?;
        if !allowed[r] {
            return None;
        }
        self.row0
            .iter()
            .enumerate()
            .filter(|&(j, d)| allowed[j] && r.abs_diff(j) > self.cfg.exclusion && d.is_finite())
            .map(|(j, &d)| Motif {
                i: r.min(j),
                j: r.max(j),
                distance: d,
            })
            .fold(None, |a, m| Motif::best(a, Some(m)))
    }

    fn resolve(&self, candidates: &[(f64, u32, u32)], bsf: f64) -> Option<Motif> {
        // The kernels' record window: 1e-7 relative, or the matrix profile's 1e-9 * 2m in the
        // squared distance, whichever is wider.
        let tol = 1e-9 * 2.0 * self.subs.m as f64;
        let cut = (bsf + 1e-7 * (1.0 + bsf)).max((bsf * bsf + tol).sqrt());
        super::best_exact(
            self.subs,
            candidates
                .iter()
                .filter(|c| c.0 <= cut)
                .map(|&(_, i, j)| (i as usize, j as usize)),
        )
    }

    fn profile(
        &mut self,
        allowed: &[bool],
        mask: &Arc<Vec<u8>>,
        bsf: f64,
        mut earlier: MotifCandidates,
    ) -> Result<(Option<Motif>, bool, MotifCandidates), DeviceError> {
        if !self.terms {
            let (df, dg) = scamp_terms(self.subs);
            self.worker.motif_load_terms(df, dg).wait()?;
            self.terms = true;
        }
        self.worker.motif_begin(mask.clone(), bsf).wait()?;
        let excl = self.cfg.exclusion as u32;
        let sm = (self.subs.m as f64).sqrt();
        let state: Vec<f64> = (0..self.subs.count())
            .map(|i| {
                let inv = self.subs.inv_std[i] / sm;
                if !self.subs.valid[i] {
                    f64::NAN
                } else if allowed[i] {
                    inv
                } else {
                    -inv - 1.0
                }
            })
            .collect();
        let report = self
            .worker
            .motif_profile(Arc::new(state), excl, PROFILE_TILE)
            .wait()?;
        self.kernel_ms += report.kernel_ms;
        let c = self.worker.motif_candidates().wait()?;
        earlier.pairs.extend(c.pairs);
        earlier.distances += valid_pairs(allowed, self.cfg.exclusion);
        Ok((
            self.resolve(&earlier.pairs, report.bsf),
            report.overflow,
            earlier,
        ))
    }
}

/// How a GPU projection join ended.
enum JoinEnd {
    /// The exact best pair (`None`: no valid pair) and the search's candidates.
    Done(Option<Motif>, MotifCandidates),
    /// Auto mode: the bounds were weak; the matrix profile should answer, starting from
    /// this BSF and these candidates.
    Weak(f64, MotifCandidates),
    /// The candidate list overflowed.
    Overflow,
}

impl GpuMotifSearch<'_> {
    fn projection(&mut self) -> Result<&Projection, DeviceError> {
        if self.projection.is_none() {
            let started = std::time::Instant::now();
            let m = self.subs.m;
            let dims = projection_dims(m);
            // Only the grid's coordinates come back: the device bounds with all `dims`.
            let host = host_dims(dims);
            let coords = self
                .worker
                .motif_project(dims, host, Arc::new(dct_basis(m, dims)))
                .wait()?;
            self.projection = Some(Projection::from_leading_coords(coords, host, dims, m));
            tracing::debug!(
                ms = started.elapsed().as_secs_f64() * 1e3,
                "GPU projection (kernel and download)"
            );
        }
        Ok(self.projection.as_ref().expect("projected above"))
    }

    /// The projection join's rounds on the device (see [`super::join`]).
    fn join(
        &mut self,
        allowed: &[bool],
        mask: &Arc<Vec<u8>>,
        pairs: u64,
    ) -> Result<JoinEnd, DeviceError> {
        let (subs, cfg) = (self.subs, self.cfg.clone());
        let setup = std::time::Instant::now();
        let points = join_points(subs, allowed);
        let constant = constant_pair(subs, allowed, cfg.exclusion);
        let budget = distance_budget(pairs, subs.m, cfg.method);
        let max_distance = 2.0 * (subs.m as f64).sqrt();
        tracing::debug!(
            ms = setup.elapsed().as_secs_f64() * 1e3,
            "projection join: points and constant pairs"
        );
        let started = std::time::Instant::now();
        let mut w = initial_width(self.projection()?, &points, subs.m, GPU_PAIRS_PER_POINT);
        tracing::debug!(
            width = w,
            ms = started.elapsed().as_secs_f64() * 1e3,
            "projection join: first width (with the projection)"
        );
        self.worker
            .motif_begin(mask.clone(), constant.map_or(f64::INFINITY, |c| c.distance))
            .wait()?;
        let excl = cfg.exclusion as u32;
        loop {
            let proj = self.projection.as_ref().expect("projected above");
            let slack = proj.radius(0.0);
            let built = std::time::Instant::now();
            let grid = Grid::build(proj, &points, proj.radius(w));
            let build_ms = built.elapsed().as_secs_f64() * 1e3;
            if cfg.method == MethodChoice::Auto && grid.pairs > pairs / 2 {
                let c = self.worker.motif_candidates().wait()?;
                let bsf = self.best_so_far(&c, constant);
                return Ok(JoinEnd::Weak(bsf, c));
            }
            let cells = grid.cells();
            let bounded = grid.pairs;
            let report = self
                .worker
                .motif_join(Arc::new(join_cells(grid)), excl, w, slack, budget)
                .wait()?;
            self.kernel_ms += report.kernel_ms;
            tracing::debug!(
                width = w,
                build_ms,
                cells,
                pairs = bounded,
                bsf = report.bsf,
                kernel_ms = report.kernel_ms,
                "GPU projection join round"
            );
            if report.overflow {
                return Ok(JoinEnd::Overflow);
            }
            if report.aborted {
                let c = self.worker.motif_candidates().wait()?;
                let bsf = self.best_so_far(&c, constant);
                return Ok(JoinEnd::Weak(bsf, c));
            }
            let found = report.bsf.is_finite().then_some(Motif {
                i: 0,
                j: 0,
                distance: report.bsf,
            });
            match next_width(w, found, max_distance) {
                Some(next) => w = next,
                None => {
                    let resolving = std::time::Instant::now();
                    let c = self.worker.motif_candidates().wait()?;
                    let best = Motif::best(self.resolve(&c.pairs, report.bsf), constant);
                    tracing::debug!(
                        candidates = c.pairs.len(),
                        ms = resolving.elapsed().as_secs_f64() * 1e3,
                        "GPU projection join: candidates downloaded and resolved"
                    );
                    return Ok(JoinEnd::Done(best, c));
                }
            }
        }
    }

    /// The BSF a hand-over to the matrix profile may start from: the best exact distance
    /// among the candidates so far (or the constant pair's).
    fn best_so_far(&self, c: &MotifCandidates, constant: Option<Motif>) -> f64 {
        let exact = super::best_exact(
            self.subs,
            c.pairs.iter().map(|&(_, i, j)| (i as usize, j as usize)),
        );
        Motif::best(exact, constant).map_or(f64::INFINITY, |m| m.distance)
    }
}

impl PairSearch for GpuMotifSearch<'_> {
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        let started = std::time::Instant::now();
        self.kernel_ms = 0.0;
        let pairs = valid_pairs(allowed, self.cfg.exclusion);
        let mask = Arc::new(
            allowed
                .par_iter()
                .map(|&a| u8::from(a))
                .collect::<Vec<u8>>(),
        );
        let excl = self.cfg.exclusion as u32;
        let join = matches!(
            self.cfg.method,
            MethodChoice::Auto | MethodChoice::ProjectionJoin
        );
        let (best, method, overflow, c) = if join {
            match self.join(allowed, &mask, pairs)? {
                JoinEnd::Done(b, c) => (b, Method::ProjectionJoin, false, c),
                JoinEnd::Overflow => (
                    None,
                    Method::ProjectionJoin,
                    true,
                    MotifCandidates::default(),
                ),
                JoinEnd::Weak(bsf, c) => {
                    crate::motif::note_weak_bounds();
                    let (b, o, c) = self.profile(allowed, &mask, bsf, c)?;
                    (b, Method::MatrixProfile, o, c)
                }
            }
        } else if self.reference0.is_none() {
            let (b, o, c) =
                self.profile(allowed, &mask, f64::INFINITY, MotifCandidates::default())?;
            (b, Method::MatrixProfile, o, c)
        } else {
            let init = self.initial_bsf(allowed);
            let bsf0 = init.map_or(f64::INFINITY, |m| m.distance);
            self.worker.motif_begin(mask.clone(), bsf0).wait()?;
            let len = self.subs.valid.iter().filter(|&&v| v).count() as u32;
            let major = (OFFSET_MAJOR as u32).min(len.saturating_sub(1));
            let mut report = self.worker.motif_mk_sweep(excl, 1, 1 + major).wait()?;
            self.kernel_ms += report.kernel_ms;
            {
                let (mut o, mut block) = (1 + major, FIRST_BLOCK);
                while report.open && !report.overflow && o < len {
                    let end = o.saturating_add(block).min(len);
                    report = self.worker.motif_mk_sweep(excl, o, end).wait()?;
                    self.kernel_ms += report.kernel_ms;
                    o = end;
                    block = block.saturating_mul(2);
                }
                let c = self.worker.motif_candidates().wait()?;
                let best = Motif::best(
                    self.resolve(&c.pairs, report.bsf),
                    init.map(|m| Motif {
                        distance: self.subs.distance(m.i, m.j),
                        ..m
                    }),
                );
                (best, Method::Mk, report.overflow, c)
            }
        };
        if overflow {
            tracing::warn!(
                "More than a million near-tied motif candidates on the GPU; redoing this search with CPU MK."
            );
            let (b, _, s) = Mk::new(
                self.subs,
                &MotifConfig {
                    method: MethodChoice::Mk,
                    ..self.cfg.clone()
                },
            )
            .best_pair(allowed)?;
            return Ok((b, Method::Mk, s));
        }
        let stats = SearchStats {
            pairs,
            lower_bounds: c.lower_bounds,
            distances: c.distances,
            seconds: started.elapsed().as_secs_f64(),
        };
        Ok((best, method, stats))
    }

    fn device(&self) -> String {
        self.worker.info().name.clone()
    }
}
