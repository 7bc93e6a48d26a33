//! Exact time-series motif discovery: the closest pair of z-normalised subsequences.
//!
//! # Definitions
//! Series `x` of `n` samples, subsequence length `m`, `N = n - m + 1` subsequences
//! (`papers/motif-discovery-gpu-ru.txt`, §2.1, Eqs. 1–3). The **motif** is the pair `(i, j)`,
//! `i < j`, of minimum z-normalised Euclidean distance among the pairs outside the
//! **exclusion zone**: `j - i > exclusion` (default `exclusion = ceil(m / 4)`, stumpy's
//! convention; the paper's `w` is `exclusion + 1`). Ties go to the smallest `(i, j)`.
//! Constant and non-finite subsequences are handled as [`znorm::Subsequences`] documents.
//!
//! **Top-k**: motif `k + 1` is the closest valid pair none of whose members overlaps a member
//! of motifs `1..=k` (overlap: starts less than `m` apart).
//!
//! # Paths (all exact, all reporting [`znorm::Subsequences::distance`])
//! * [`mk`]: MK (Mueen et al. 2009) as the paper's Algorithm 1 organises it: `r` random
//!   reference subsequences, the distance matrix `D` (Alg. 3), the ordering by the reference
//!   of largest standard deviation (Alg. 4), the initial BSF (Alg. 5), then the offset loop with
//!   triangle-inequality lower bounds (Eq. 4, Eq. 9, Algs. 6–8) — multi-threaded.
//! * [`profile`]: the exact matrix profile by the diagonal covariance recurrence of SCAMP
//!   (Zimmerman et al. 2019), `O(N^2)` — the robust path when pruning fails.
//! * [`brute`]: every pair, `O(N^2 m)`: the test oracle.
//! * [`join`]: the projection join: DCT lower bounds (GEMINI, Faloutsos et al. 1994) and a
//!   grid ε-join over the first coefficients, widened until the best pair lies inside it.
//! * GPU: the same projection join, MK and matrix profile as CUDA kernels (`gpu.rs`).
//!
//! [`find_motifs`] (auto) runs the projection join and switches to the matrix profile when its
//! grid would bound more than half of all pairs or its survivors would cost more exact
//! distances than the matrix profile's cells; the result says which path answered
//! ([`Method`]).

pub mod brute;
pub(crate) mod gpu;
pub mod grid;
pub mod join;
pub mod mk;
pub mod profile;
pub mod projection;
pub mod znorm;

use std::time::Instant;

use serde::Serialize;

use crate::device::DeviceError;
use crate::device::DeviceTarget;
pub use znorm::Subsequences;

/// Default number of MK reference subsequences `r` (the paper's experiments use 10).
pub const DEFAULT_REFERENCES: usize = 10;

/// What to search.
#[derive(Clone, Debug, PartialEq)]
pub struct MotifConfig {
    /// Subsequence length `m`, samples (≥ 2).
    pub m: usize,
    /// Exclusion zone: pairs need `j - i > exclusion`. Default [`default_exclusion`]`(m, 4)`.
    pub exclusion: usize,
    /// How many non-overlapping motifs (≥ 1).
    pub top_k: usize,
    /// MK reference subsequences `r` (≥ 1).
    pub references: usize,
    /// Seed of the reference choice (results do not depend on it, only the work does).
    pub seed: u64,
    /// Which exact path.
    pub method: MethodChoice,
}

impl MotifConfig {
    /// `m` with the default exclusion (`ceil(m/4)`), top-1, 10 references, seed 0, auto path.
    #[must_use]
    pub fn new(m: usize) -> Self {
        Self {
            m,
            exclusion: default_exclusion(m, 4),
            top_k: 1,
            references: DEFAULT_REFERENCES,
            seed: 0,
            method: MethodChoice::Auto,
        }
    }
}

/// `ceil(m / denominator)` (`--exclusion-denom`); a zero denominator gives 0.
#[must_use]
pub fn default_exclusion(m: usize, denominator: usize) -> usize {
    if denominator == 0 {
        0
    } else {
        m.div_ceil(denominator)
    }
}

/// Which exact path to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MethodChoice {
    /// The projection join, switching to the matrix profile when its bounds are weak.
    #[default]
    Auto,
    /// The projection join only ([`join`]).
    ProjectionJoin,
    /// MK only.
    Mk,
    /// The matrix profile only.
    MatrixProfile,
    /// Every pair (the oracle; `O(N^2 m)`).
    BruteForce,
}

/// The path that produced a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// The projection join ([`join`]).
    ProjectionJoin,
    /// MK with reference lower bounds.
    Mk,
    /// The exact matrix profile.
    MatrixProfile,
    /// Every pair.
    BruteForce,
}

impl Method {
    /// The name used in JSON and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ProjectionJoin => "projection_join",
            Self::Mk => "mk",
            Self::MatrixProfile => "matrix_profile",
            Self::BruteForce => "brute_force",
        }
    }
}

/// One motif: subsequence starts `i < j` (0-based) and their z-normalised distance.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Motif {
    /// Start of the first subsequence.
    pub i: usize,
    /// Start of the second subsequence (`j - i > exclusion`).
    pub j: usize,
    /// z-normalised Euclidean distance ([`Subsequences::distance`]).
    pub distance: f64,
}

impl Motif {
    /// Whether `self` beats `other`: smaller distance, then smaller `(i, j)`.
    #[must_use]
    pub fn better_than(&self, other: &Self) -> bool {
        (self.distance, self.i, self.j) < (other.distance, other.i, other.j)
    }

    /// The better of two optional motifs.
    #[must_use]
    pub fn best(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y.better_than(&x) { y } else { x }),
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// Work counters of a search.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SearchStats {
    /// Valid pairs outside the exclusion zone (what brute force evaluates).
    pub pairs: u64,
    /// Pairs whose lower bound was computed (MK).
    pub lower_bounds: u64,
    /// Pairs whose true distance was computed (matrix-profile cells count here).
    pub distances: u64,
    /// Wall seconds of the whole search, including preprocessing.
    pub seconds: f64,
}

impl SearchStats {
    fn add(&mut self, o: &Self) {
        self.lower_bounds += o.lower_bounds;
        self.distances += o.distances;
        self.pairs += o.pairs;
    }
}

/// The answer of [`find_motifs`] (`synfire motif --format json`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MotifResult {
    /// Samples in the series.
    pub n: usize,
    /// Subsequence length.
    pub m: usize,
    /// Exclusion zone used.
    pub exclusion: usize,
    /// The path that found the top motif.
    pub method: Method,
    /// `"cpu"` or the GPU's name.
    pub device: String,
    /// Up to `top_k` motifs, best first (fewer when no further valid pair exists).
    pub motifs: Vec<Motif>,
    /// Work counters, summed over the `top_k` searches.
    pub stats: SearchStats,
}

/// Errors of motif discovery.
#[derive(Debug, thiserror::Error)]
pub enum MotifError {
    /// `m` is below 2 (a z-normalised subsequence of one sample is meaningless).
    #[error("subsequence length m = {m} is too short; m must be at least 2")]
    MTooShort {
        /// The length asked for.
        m: usize,
    },
    /// The series is shorter than needed for one valid pair.
    #[error(
        "the series has {n} samples; m = {m} with exclusion zone {exclusion} needs at least \
         {needed} (two subsequences more than {exclusion} apart)"
    )]
    SeriesTooShort {
        /// Samples in the series.
        n: usize,
        /// Subsequence length.
        m: usize,
        /// Exclusion zone.
        exclusion: usize,
        /// Samples needed.
        needed: usize,
    },
    /// More subsequences than 32-bit ids address (the searches index subsequences by `u32`).
    #[error(
        "the series has {n} samples, {subsequences} subsequences of m = {m}; at most \
         4,294,967,295 subsequences are supported"
    )]
    SeriesTooLong {
        /// Samples in the series.
        n: usize,
        /// Subsequence length.
        m: usize,
        /// Subsequences `n - m + 1`.
        subsequences: usize,
    },
    /// `top_k` or `references` is 0.
    #[error("{what} must be at least 1")]
    Zero {
        /// The option.
        what: &'static str,
    },
    /// The GPU path failed (with `--device gpu`; `auto` falls back to the CPU).
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// Checks `cfg` against a series of `n` samples.
///
/// # Errors
/// [`MotifError::MTooShort`], [`MotifError::Zero`], [`MotifError::SeriesTooShort`].
pub fn validate(n: usize, cfg: &MotifConfig) -> Result<(), MotifError> {
    if cfg.m < 2 {
        return Err(MotifError::MTooShort { m: cfg.m });
    }
    if cfg.top_k == 0 {
        return Err(MotifError::Zero { what: "top_k" });
    }
    if cfg.references == 0 {
        return Err(MotifError::Zero { what: "references" });
    }
    let needed = cfg.m + cfg.exclusion + 1;
    if n < needed {
        return Err(MotifError::SeriesTooShort {
            n,
            m: cfg.m,
            exclusion: cfg.exclusion,
            needed,
        });
    }
    let subsequences = n + 1 - cfg.m;
    if u32::try_from(subsequences).is_err() {
        return Err(MotifError::SeriesTooLong {
            n,
            m: cfg.m,
            subsequences,
        });
    }
    Ok(())
}

/// One exact closest-pair search over the allowed subsequences: the interface every path
/// (CPU MK, matrix profile, brute force, GPU) implements. State prepared once (MK's `D`,
/// device buffers) is reused by the `top_k` searches.
pub trait PairSearch {
    /// The closest valid pair with both members allowed (`allowed[i]`, shape `[N]`), or
    /// `None`, with the path that answered and its work counters.
    ///
    /// # Errors
    /// Device errors of GPU paths.
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError>;

    /// `"cpu"` or the GPU's name.
    fn device(&self) -> String {
        "cpu".into()
    }
}

/// Logs the switch from the projection join to the matrix profile: at INFO the first time in
/// the process, at DEBUG after (a live motif stage meets it in every window).
pub(crate) fn note_weak_bounds() {
    static FIRST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
    if FIRST.swap(false, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            "Projection bounds are weak on this series; switching to the matrix profile (logged \
             once; later switches at debug level)."
        );
    } else {
        tracing::debug!("Projection bounds are weak; switching to the matrix profile.");
    }
}

/// The best of `pairs` by the exact distance ([`Subsequences::distance`]), then `(i, j)`:
/// how the fast paths settle their near-tied candidates.
pub(crate) fn best_exact(
    subs: &Subsequences<'_>,
    pairs: impl IntoIterator<Item = (usize, usize)>,
) -> Option<Motif> {
    pairs
        .into_iter()
        .map(|(i, j)| Motif {
            i: i.min(j),
            j: i.max(j),
            distance: subs.distance(i, j),
        })
        .fold(None, |acc, m| Motif::best(acc, Some(m)))
}

/// Valid pairs among `allowed` outside the exclusion zone (for [`SearchStats::pairs`]).
#[must_use]
pub fn valid_pairs(allowed: &[bool], exclusion: usize) -> u64 {
    // Pairs (i, j), j > i + exclusion, both allowed: going down from the end, `later` counts
    // the allowed starts at or after i + exclusion + 1 (no array, so no page faults on a
    // large series).
    let n = allowed.len();
    let mut later = 0u64;
    let mut pairs = 0u64;
    for i in (0..n).rev() {
        if let Some(&a) = allowed.get(i + exclusion + 1) {
            later += u64::from(a);
        }
        if allowed[i] {
            pairs += later;
        }
    }
    pairs
}

/// Finds the top-k motifs of `x` on `device` (`Auto`: the GPU when one is usable, else the
/// CPU with one log line), on its GPU: a [`DeviceTarget`] names it (`target.gpu`, a CUDA
/// ordinal), a plain [`DeviceChoice`](crate::device::DeviceChoice) takes the first GPU.
///
/// # Errors
/// [`validate`]'s errors; [`MotifError::Device`] when the choice is `Gpu` and no GPU works,
/// or the GPU ordinal does not exist.
pub fn find_motifs(
    x: &[f64],
    cfg: &MotifConfig,
    device: impl Into<DeviceTarget>,
) -> Result<MotifResult, MotifError> {
    let target: DeviceTarget = device.into();
    validate(x.len(), cfg)?;
    let started = Instant::now();
    let subs = Subsequences::new(x, cfg.m);
    tracing::debug!(
        ms = started.elapsed().as_secs_f64() * 1e3,
        n = x.len(),
        "motif: subsequence statistics"
    );
    let gpu = if cfg.method == MethodChoice::BruteForce {
        None
    } else {
        target.resolve("motif search", |gpu| {
            gpu::GpuMotifSearch::start(&subs, cfg, gpu)
        })?
    };
    let mut search: Box<dyn PairSearch + '_> = match gpu {
        Some(g) => Box::new(g),
        None => cpu_search(&subs, cfg),
    };
    let mut allowed = subs.valid.clone();
    let mut motifs = Vec::new();
    let mut stats = SearchStats::default();
    let mut method = None;
    for _ in 0..cfg.top_k {
        let (best, used, s) = search.best_pair(&allowed)?;
        method.get_or_insert(used);
        stats.add(&s);
        let Some(best) = best else { break };
        for start in [best.i, best.j] {
            let lo = start.saturating_sub(cfg.m - 1);
            let hi = (start + cfg.m).min(allowed.len());
            allowed[lo..hi].iter_mut().for_each(|a| *a = false);
        }
        motifs.push(best);
    }
    stats.seconds = started.elapsed().as_secs_f64();
    Ok(MotifResult {
        n: x.len(),
        m: cfg.m,
        exclusion: cfg.exclusion,
        method: method.unwrap_or(Method::ProjectionJoin),
        device: search.device(),
        motifs,
        stats,
    })
}

fn cpu_search<'s>(subs: &'s Subsequences<'s>, cfg: &MotifConfig) -> Box<dyn PairSearch + 's> {
    match cfg.method {
        MethodChoice::BruteForce => Box::new(brute::BruteForce::new(subs, cfg.exclusion)),
        MethodChoice::MatrixProfile => Box::new(profile::MatrixProfile::new(subs, cfg.exclusion)),
        MethodChoice::Mk => Box::new(mk::Mk::new(subs, cfg)),
        MethodChoice::ProjectionJoin | MethodChoice::Auto => {
            Box::new(join::ProjectionJoin::new(subs, cfg))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_pairs_counts_outside_the_zone() {
        let allowed = [true, true, false, true, true];
        // Pairs with j - i > 1 among {0,1,3,4}: (0,3),(0,4),(1,3),(1,4).
        assert_eq!(valid_pairs(&allowed, 1), 4);
        assert_eq!(valid_pairs(&allowed, 0), 6);
    }

    #[test]
    fn bad_configs_are_errors() {
        let mut c = MotifConfig::new(1);
        assert!(matches!(
            validate(100, &c),
            Err(MotifError::MTooShort { m: 1 })
        ));
        c = MotifConfig::new(10);
        let e = validate(12, &c).unwrap_err().to_string();
        assert!(e.contains("12 samples"), "{e}");
        c.top_k = 0;
        assert!(matches!(validate(100, &c), Err(MotifError::Zero { .. })));
    }
}
