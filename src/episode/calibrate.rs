//! The PTPE/MTPE crossover table of a GPU model (paper §7.2, Table 1): measured by
//! `synfire calibrate` or, the first time a process counts on a model that has none, measured
//! once by [`GpuCounter::new`](crate::episode::gpu::GpuCounter::new) with [`Plan::FIRST_USE`]
//! and cached in the user's cache folder; shipped for the models in [`SHIPPED`].
//!
//! [`resolve`] finds a model's table once per process: the cached file
//! ([`Calibration::default_path`]: `$SYNFIRE_KERNEL_CACHE/calibration/`, else
//! `$XDG_CACHE_HOME/synfire/kernels/calibration/`, else `~/.cache/synfire/kernels/calibration/`),
//! else the shipped table, else a measurement (written to the cache through a temporary file
//! and a rename, so processes starting together never read half a file). Every later counter of
//! the process gets the same answer without a word; the one line per model and process says
//! what was used: `debug` for a cached or shipped table, `info` for a new measurement or for
//! running without one (then `f(N) = 1`, [`crate::episode::hybrid::UNCALIBRATED_PENALTY`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::device::DeviceInfo;
use crate::episode::counter::CountError;
use crate::episode::hybrid::{self, Calibration, Crossover, ExactAlgorithm, PenaltyFit};
use crate::episode::model::{Episode, Interval};
use crate::event::EventType;

/// The delay intervals the Sym26 workload is mined and calibrated with (seconds,
/// `Interval::parse_list` syntax): the paper's Table 1 set-up.
pub const SYM26_INTERVALS: &str = "0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016";

/// Tables shipped with synfire, by the file name [`Calibration::default_path`] gives the model
/// (`<device>-sm<XY>.json`): measured by `synfire calibrate` on the machines of
/// `docs/benchmarks.md`.
pub const SHIPPED: &[(&str, &str)] = &[(
    "nvidia-h200-sm90.json",
    include_str!("calibrations/nvidia-h200-sm90.json"),
)];

/// What a calibration times: episode sizes `1..=max_nodes`, each at `2^min_log2_episodes ..=
/// 2^max_log2_episodes` episodes, `repeat` timed runs after one warm-up (the median is used).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Largest episode size timed (sizes above use the fit `a / N + b`).
    pub max_nodes: usize,
    /// Smallest number of episodes timed, as a power of two.
    pub min_log2_episodes: u32,
    /// Largest number of episodes timed, as a power of two.
    pub max_log2_episodes: u32,
    /// Timed repetitions per point after one warm-up.
    pub repeat: usize,
}

impl Plan {
    /// The measurement a counter makes on its first use of a model without a table: sizes
    /// 1–6 at 2^8–2^15 random episodes over the Sym26 stream, one timed run each (about 200
    /// counts of at most 32,768 episodes: seconds, once per model and cache folder).
    pub const FIRST_USE: Self = Self {
        max_nodes: 6,
        min_log2_episodes: 8,
        max_log2_episodes: 15,
        repeat: 1,
    };
}

/// A device that times exact counts (a [`GpuCounter`](crate::episode::gpu::GpuCounter) on one
/// GPU).
pub trait KernelTimer {
    /// The device timed.
    fn device(&self) -> DeviceInfo;
    /// Median kernel milliseconds of `repeat` exact counts of `candidates` with `algorithm`
    /// after one warm-up, and the counts.
    ///
    /// # Errors
    /// [`CountError`] when the device fails.
    fn exact_kernel_ms(
        &self,
        algorithm: ExactAlgorithm,
        candidates: &[Episode],
        repeat: usize,
    ) -> Result<(f64, Vec<u64>), CountError>;
    /// PTPE threads resident on the device for `nodes`-node episodes (`MP × B_MP × T_B`).
    fn resident_threads(&self, nodes: usize) -> u64;
}

/// One step of [`measure`], for a caller that prints a table.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Size `nodes` starts; `pool` is the number of given candidates cycled (`None`: random
    /// ones).
    Size {
        /// Episode size.
        nodes: usize,
        /// Given candidates, if any.
        pool: Option<usize>,
    },
    /// One point timed.
    Timed {
        /// Episode size.
        nodes: usize,
        /// Episodes counted.
        episodes: u64,
        /// PTPE kernel milliseconds.
        ptpe_ms: f64,
        /// MTPE kernel milliseconds.
        mtpe_ms: f64,
    },
}

/// Errors of [`measure`].
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// The device failed.
    #[error(transparent)]
    Count(#[from] CountError),
    /// PTPE and MTPE disagreed on a count (a kernel bug: the table would be meaningless).
    #[error("PTPE and MTPE counts differ ({nodes} nodes, {episodes} episodes)")]
    Mismatch {
        /// Episode size.
        nodes: usize,
        /// Episodes counted.
        episodes: usize,
    },
    /// Nothing to time: no event type, no interval, or `max_nodes` 0.
    #[error("nothing to calibrate on: {0}")]
    Empty(&'static str),
}

/// Measures the crossover table of `timer`'s device: for each size, the given `pools[N - 1]`
/// (cycled) or random episodes over `types` event types and `intervals` (seeded), timed with
/// PTPE and MTPE; the crossover ([`hybrid::crossover`]) over the resident threads is `f(N)`.
/// `workload` describes the stream for the file. `on_step` sees each size and point.
///
/// # Errors
/// [`CalibrateError`]: a device failure, PTPE and MTPE disagreeing, or nothing to time.
pub fn measure(
    timer: &dyn KernelTimer,
    types: u32,
    intervals: &[Interval],
    pools: &[Vec<Episode>],
    plan: &Plan,
    workload: String,
    on_step: &mut dyn FnMut(Step),
) -> Result<Calibration, CalibrateError> {
    if types == 0 || intervals.is_empty() || plan.max_nodes == 0 {
        return Err(CalibrateError::Empty(
            "a stream with event types, intervals and episodes of at least one node",
        ));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let repeat = plan.repeat.max(1);
    let mut crossovers = Vec::with_capacity(plan.max_nodes);
    for nodes in 1..=plan.max_nodes {
        let pool = pools.get(nodes - 1).filter(|p| !p.is_empty());
        on_step(Step::Size {
            nodes,
            pool: pool.map(Vec::len),
        });
        let mut timings = Vec::new();
        for log2 in plan.min_log2_episodes..=plan.max_log2_episodes.max(plan.min_log2_episodes) {
            let m = 1usize << log2;
            let cands: Vec<Episode> = match pool {
                Some(p) => p.iter().cycle().take(m).cloned().collect(),
                None => random_candidates(&mut rng, types, intervals, nodes, m),
            };
            let (ptpe_ms, a) = timer.exact_kernel_ms(ExactAlgorithm::Ptpe, &cands, repeat)?;
            let (mtpe_ms, b) = timer.exact_kernel_ms(ExactAlgorithm::Mtpe, &cands, repeat)?;
            if a != b {
                return Err(CalibrateError::Mismatch { nodes, episodes: m });
            }
            on_step(Step::Timed {
                nodes,
                episodes: m as u64,
                ptpe_ms,
                mtpe_ms,
            });
            timings.push((m as u64, ptpe_ms, mtpe_ms));
        }
        let episodes = hybrid::crossover(&timings).unwrap_or(0);
        let resident = timer.resident_threads(nodes).max(1);
        crossovers.push(Crossover {
            nodes,
            episodes,
            resident_threads: resident,
            penalty: episodes as f64 / resident as f64,
        });
    }
    let points: Vec<(usize, f64)> = crossovers.iter().map(|c| (c.nodes, c.penalty)).collect();
    let fit = PenaltyFit::fit(&points).unwrap_or(hybrid::UNCALIBRATED_PENALTY);
    let info = timer.device();
    Ok(Calibration {
        device: info.name,
        compute_capability: info.compute_capability,
        multiprocessors: info.multiprocessors,
        workload,
        crossovers,
        fit,
    })
}

/// `count` episodes of `nodes` nodes with random types and intervals.
fn random_candidates(
    rng: &mut ChaCha8Rng,
    types: u32,
    intervals: &[Interval],
    nodes: usize,
    count: usize,
) -> Vec<Episode> {
    (0..count)
        .map(|_| {
            Episode::new(
                (0..nodes)
                    .map(|_| EventType(rng.random_range(0..types)))
                    .collect(),
                (1..nodes)
                    .map(|_| intervals[rng.random_range(0..intervals.len())])
                    .collect(),
            )
        })
        .collect()
}

/// Where a model's table came from, as [`resolve`] found it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Source {
    /// Read from the user's cache folder.
    Cached(PathBuf),
    /// Shipped with synfire ([`SHIPPED`]).
    Shipped,
    /// Measured now, and written to the cache (the path), or not (`None`: no cache folder,
    /// or it could not be written; logged).
    Measured(Option<PathBuf>),
    /// None: the hybrid choice uses `f(N) = 1`; the reason.
    Uncalibrated(String),
}

/// The shipped table for the cache file name `file` (`<device>-sm<XY>.json`), if any.
///
/// # Panics
/// Never for the tables in [`SHIPPED`] (a unit test parses each).
#[must_use]
pub fn shipped(file: &str) -> Option<Calibration> {
    SHIPPED
        .iter()
        .find(|(name, _)| *name == file)
        .map(|(_, text)| serde_json::from_str(text).expect("a shipped calibration parses"))
}

/// The process-wide answers of [`resolve`], by model key (`<device>-sm<XY>`).
fn resolved() -> &'static Mutex<HashMap<String, Option<Calibration>>> {
    static RESOLVED: OnceLock<Mutex<HashMap<String, Option<Calibration>>>> = OnceLock::new();
    RESOLVED.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The crossover table of the GPU model `device` (compute capability `cc`), found once per
/// process and then returned to every caller without a log line: the file in `cache` (a
/// folder; [`Calibration::default_path`]'s when `None`), else [`shipped`], else `measure()`
/// (saved into `cache`). Concurrent callers for one model wait for the first, so a model is
/// measured at most once per process (and once per cache folder). A cached file that does not
/// parse is reported (`warn`) and replaced by a new measurement. `measure` returns the table
/// or why there is none.
///
/// Logs one line per model and process: `debug` for a cached or shipped table, `info` for a
/// measurement and for no table (with the reason).
pub fn resolve(
    device: &str,
    cc: (i32, i32),
    cache: Option<&Path>,
    measure: impl FnOnce() -> Result<Calibration, String>,
) -> Option<Calibration> {
    let file = Calibration::file_name(device, cc);
    let mut memo = resolved().lock();
    if let Some(known) = memo.get(&file) {
        return known.clone();
    }
    let path = match cache {
        Some(dir) => Some(dir.join(&file)),
        None => Calibration::default_path(device, cc),
    };
    let (calibration, source) = find(path.as_deref(), &file, measure);
    match &source {
        Source::Cached(p) => {
            tracing::debug!(gpu = device, file = %p.display(), "PTPE/MTPE calibration of this GPU model from the cache.");
        }
        Source::Shipped => {
            tracing::debug!(
                gpu = device,
                "PTPE/MTPE calibration of this GPU model: the table shipped with synfire."
            );
        }
        Source::Measured(Some(p)) => {
            tracing::info!(gpu = device, file = %p.display(), "Calibrated the PTPE/MTPE choice for this GPU model once (kept for later runs; `synfire calibrate` measures it in more detail).");
        }
        Source::Measured(None) => {
            tracing::info!(
                gpu = device,
                "Calibrated the PTPE/MTPE choice for this GPU model for this run (no cache folder to keep it in)."
            );
        }
        Source::Uncalibrated(why) => {
            tracing::info!(gpu = device, reason = %why, "No calibration for this GPU model; the hybrid PTPE/MTPE choice uses f(N) = 1 (run `synfire calibrate`).");
        }
    }
    memo.insert(file, calibration.clone());
    calibration
}

/// [`resolve`]'s search, without the memo or the log line.
fn find(
    path: Option<&Path>,
    file: &str,
    measure: impl FnOnce() -> Result<Calibration, String>,
) -> (Option<Calibration>, Source) {
    if let Some(p) = path.filter(|p| p.exists()) {
        match Calibration::load(p) {
            Ok(c) => return (Some(c), Source::Cached(p.to_path_buf())),
            Err(e) => {
                tracing::warn!(error = %e, "Ignoring the cached calibration; measuring it again.");
            }
        }
    }
    if let Some(c) = shipped(file) {
        return (Some(c), Source::Shipped);
    }
    let started = Instant::now();
    match measure() {
        Ok(c) => {
            tracing::debug!(
                seconds = started.elapsed().as_secs_f64(),
                "Calibration measured."
            );
            let kept = path.and_then(|p| match c.save_atomically(p) {
                Ok(()) => Some(p.to_path_buf()),
                Err(e) => {
                    tracing::warn!(error = %e, "Could not cache the calibration; it is measured again next run.");
                    None
                }
            });
            (Some(c), Source::Measured(kept))
        }
        Err(why) => (None, Source::Uncalibrated(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn table(device: &str, b: f64) -> Calibration {
        Calibration {
            device: device.into(),
            compute_capability: (9, 0),
            multiprocessors: 132,
            workload: "test".into(),
            crossovers: vec![Crossover {
                nodes: 2,
                episodes: 1024,
                resident_threads: 512,
                penalty: 2.0,
            }],
            fit: PenaltyFit { a: 0.0, b },
        }
    }

    /// Log lines written by `tracing` while `f` runs on this thread, as text.
    fn logged(f: impl FnOnce()) -> String {
        #[derive(Clone, Default)]
        struct Buf(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    /// First use: measured once, written to the cache folder, and found there by a later
    /// process (a fresh search) without measuring again; the log says which, at which level.
    #[test]
    fn measured_once_then_read_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let device = "Fake GPU 9000 (measured once)";
        let measured = AtomicUsize::new(0);
        let text = logged(|| {
            for _ in 0..3 {
                let c = resolve(device, (9, 0), Some(dir.path()), || {
                    measured.fetch_add(1, Ordering::SeqCst);
                    Ok(table(device, 1.5))
                });
                assert_eq!(c, Some(table(device, 1.5)));
            }
        });
        assert_eq!(measured.load(Ordering::SeqCst), 1);
        let file = dir.path().join("fake-gpu-9000-measured-once-sm90.json");
        assert!(file.exists(), "the table is cached at {}", file.display());
        assert_eq!(
            text.matches("Calibrated the PTPE/MTPE choice").count(),
            1,
            "{text}"
        );
        assert!(text.contains(" INFO "), "{text}");
        // A later process: the cached file, no measurement, a debug line.
        let mut lines = String::new();
        let found = find(Some(&file), "unused.json", || panic!("measured again"));
        assert_eq!(
            found,
            (Some(table(device, 1.5)), Source::Cached(file.clone()))
        );
        // The log level for a cached table, through `resolve` with a model new to the process.
        let other = "Fake GPU 9001 (cached)";
        let cached = dir.path().join(Calibration::file_name(other, (9, 0)));
        table(other, 0.5).save(&cached).unwrap();
        lines.push_str(&logged(|| {
            let c = resolve(other, (9, 0), Some(dir.path()), || panic!("measured"));
            assert_eq!(c, Some(table(other, 0.5)));
        }));
        assert!(
            lines.contains(" DEBUG ") && lines.contains("from the cache"),
            "{lines}"
        );
        assert!(!lines.contains(" INFO "), "{lines}");
    }

    /// However many counters start at once (threads), a model without a table is measured
    /// once and the "No calibration" line is written once per process.
    #[test]
    fn no_calibration_is_said_once_however_many_counters_start() {
        let dir = tempfile::tempdir().unwrap();
        let device = "Fake GPU 9002 (none)";
        let attempts = AtomicUsize::new(0);
        let text = logged(|| {
            let dispatch = tracing::dispatcher::get_default(Clone::clone);
            std::thread::scope(|s| {
                for _ in 0..16 {
                    s.spawn(|| {
                        tracing::dispatcher::with_default(&dispatch, || {
                            let c = resolve(device, (8, 9), Some(dir.path()), || {
                                attempts.fetch_add(1, Ordering::SeqCst);
                                Err("the measurement failed (test)".into())
                            });
                            assert_eq!(c, None);
                        });
                    });
                }
            });
        });
        assert_eq!(attempts.load(Ordering::SeqCst), 1);
        assert_eq!(
            text.matches("No calibration for this GPU model").count(),
            1,
            "{text}"
        );
        assert!(text.contains("the measurement failed (test)"), "{text}");
        assert!(
            !dir.path()
                .join(Calibration::file_name(device, (8, 9)))
                .exists()
        );
    }

    /// A shipped model needs no measurement and no file; a corrupt cached file is replaced by
    /// a measurement.
    #[test]
    fn shipped_tables_parse_and_a_corrupt_cache_is_measured_again() {
        for (file, _) in SHIPPED {
            let c = shipped(file).unwrap();
            assert_eq!(
                Calibration::file_name(&c.device, c.compute_capability),
                *file
            );
            assert!(!c.crossovers.is_empty());
        }
        let dir = tempfile::tempdir().unwrap();
        let (c, source) = find(
            Some(&dir.path().join("nvidia-h200-sm90.json")),
            "nvidia-h200-sm90.json",
            || panic!("measured"),
        );
        assert_eq!(source, Source::Shipped);
        assert_eq!(c.unwrap().device, "NVIDIA H200");
        let bad = dir.path().join("bad-sm90.json");
        std::fs::write(&bad, "{ not json").unwrap();
        let (c, source) = find(Some(&bad), "bad-sm90.json", || Ok(table("Bad", 3.0)));
        assert_eq!(c, Some(table("Bad", 3.0)));
        assert_eq!(source, Source::Measured(Some(bad.clone())));
        assert_eq!(Calibration::load(&bad).unwrap(), table("Bad", 3.0));
    }

    /// `measure` over a fake device: one point per size and count, the crossover where the
    /// fake PTPE gets faster, and a PTPE/MTPE disagreement refused.
    #[test]
    fn measure_finds_the_crossover_of_a_fake_device() {
        struct Fake {
            disagree: bool,
        }
        impl KernelTimer for Fake {
            fn device(&self) -> DeviceInfo {
                DeviceInfo {
                    ordinal: 0,
                    name: "Fake".into(),
                    compute_capability: (9, 0),
                    multiprocessors: 4,
                    total_memory: 0,
                    driver_version: 13000,
                }
            }
            fn exact_kernel_ms(
                &self,
                algorithm: ExactAlgorithm,
                candidates: &[Episode],
                _repeat: usize,
            ) -> Result<(f64, Vec<u64>), CountError> {
                let m = candidates.len() as f64;
                // PTPE: 4 ms + 1 ms per 128 episodes; MTPE: 1 ms per 64: PTPE from 512 on.
                let (ms, bump) = match algorithm {
                    ExactAlgorithm::Ptpe => (4.0 + m / 128.0, 0),
                    _ => (m / 64.0, u64::from(self.disagree)),
                };
                Ok((
                    ms,
                    candidates.iter().map(|e| e.len() as u64 + bump).collect(),
                ))
            }
            fn resident_threads(&self, _nodes: usize) -> u64 {
                128
            }
        }
        let intervals = Interval::parse_list(SYM26_INTERVALS).unwrap();
        let plan = Plan {
            max_nodes: 3,
            min_log2_episodes: 6,
            max_log2_episodes: 10,
            repeat: 1,
        };
        let mut steps = Vec::new();
        let c = measure(
            &Fake { disagree: false },
            5,
            &intervals,
            &[],
            &plan,
            "w".into(),
            &mut |s| steps.push(s),
        )
        .unwrap();
        assert_eq!(steps.len(), 3 * (1 + 5));
        assert_eq!(c.crossovers.len(), 3);
        for x in &c.crossovers {
            // 4 + m / 128 <= m / 64 <=> m >= 512: tested 64, 128, ..., 1024.
            assert_eq!(x.episodes, 512, "{x:?}");
            assert!((x.penalty - 4.0).abs() < 1e-12);
        }
        let err = measure(
            &Fake { disagree: true },
            5,
            &intervals,
            &[],
            &plan,
            "w".into(),
            &mut |_| {},
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                CalibrateError::Mismatch {
                    nodes: 1,
                    episodes: 64
                }
            ),
            "{err}"
        );
        assert!(matches!(
            measure(
                &Fake { disagree: false },
                0,
                &intervals,
                &[],
                &plan,
                "w".into(),
                &mut |_| {}
            ),
            Err(CalibrateError::Empty(_))
        ));
    }
}
