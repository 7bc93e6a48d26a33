//! The hybrid PTPE/MTPE choice (paper §5.1, Algorithm 2, Eq. 3) and its per-device
//! calibration.
//!
//! Eq. 3: count a level with PTPE when `S > MP × B_MP × T_B × f(N)`, else with MTPE, where `S`
//! is the number of episodes each GPU counts, `MP × B_MP × T_B` the PTPE threads the GPU runs at
//! once (multiprocessors × resident blocks per multiprocessor × threads per block, from the
//! occupancy calculator) and `f(N)` a penalty factor of the episode size `N`. `f(N)` is
//! measured per device by `synfire calibrate`: for each `N` the *crossover point* (the number of
//! episodes from which PTPE beats MTPE, paper Table 1) divided by the resident-thread count.
//! Sizes not measured use the fit `f(N) = a / N + b`, the form the paper found best (§7.2).
//!
//! Calibrations are JSON files, one per device model, stored under the kernel cache directory
//! (`<cache>/calibration/<device>-sm<XY>.json`) and found once per process by
//! [`crate::episode::calibrate::resolve`] (cached, shipped, or measured on first use).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which exact kernel counts the survivors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExactAlgorithm {
    /// One thread per episode (paper §5.1, PTPE).
    Ptpe,
    /// Threads per (episode, segment) and an exact merge (paper §5.1, MTPE; `episode::mtpe`).
    Mtpe,
    /// PTPE or MTPE per level and episode size by Eq. 3 (paper Algorithm 2).
    #[default]
    Hybrid,
    /// Exact counts of episodes of three or more nodes from the occurrence ends of their
    /// prefixes, each prefix built once for all its extensions (`episode::ends`,
    /// `kernels/ends.cu`): one thread per candidate sweeps its prefix's ends against the
    /// last type's events. PreElim, pairs (whose prefix is a single node: nothing to share)
    /// and single nodes as [`ExactAlgorithm::Hybrid`].
    Ends,
}

/// The penalty `f(N) = a / N + b` fitted over the measured sizes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PenaltyFit {
    /// Coefficient of `1 / N`.
    pub a: f64,
    /// Constant term.
    pub b: f64,
}

impl PenaltyFit {
    /// Least squares of `f` on `1 / N` over `points` (`(N, f)`); with one point, a constant.
    /// `None` for no points.
    #[must_use]
    pub fn fit(points: &[(usize, f64)]) -> Option<Self> {
        let n = points.len() as f64;
        if points.is_empty() {
            return None;
        }
        let xs: Vec<f64> = points.iter().map(|&(k, _)| 1.0 / k as f64).collect();
        let ys: Vec<f64> = points.iter().map(|&(_, f)| f).collect();
        let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
        let sxx: f64 = xs.iter().map(|x| (x - mx) * (x - mx)).sum();
        let sxy: f64 = xs.iter().zip(&ys).map(|(x, y)| (x - mx) * (y - my)).sum();
        let a = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        Some(Self { a, b: my - a * mx })
    }

    /// `f(N)`, never below 0.
    #[must_use]
    pub fn at(&self, nodes: usize) -> f64 {
        (self.a / nodes.max(1) as f64 + self.b).max(0.0)
    }
}

/// One measured crossover point.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Crossover {
    /// Episode size N.
    pub nodes: usize,
    /// Episodes per GPU from which PTPE was at least as fast as MTPE (paper Table 1).
    pub episodes: u64,
    /// PTPE threads resident on the device for this N (`MP × B_MP × T_B`).
    pub resident_threads: u64,
    /// `f(N) = episodes / resident_threads`.
    pub penalty: f64,
}

/// A device's calibration, as `synfire calibrate` writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Device name, e.g. `NVIDIA H200`.
    pub device: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors.
    pub multiprocessors: u32,
    /// What was timed (workload and settings).
    pub workload: String,
    /// Measured crossover points, by N.
    pub crossovers: Vec<Crossover>,
    /// `f(N)` fitted over `crossovers`.
    pub fit: PenaltyFit,
}

/// Errors reading or writing a calibration file.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    /// The file could not be read or written.
    #[error("calibration file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a calibration.
    #[error("calibration file {path} is not a synfire calibration: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
}

/// `f(N)` without a calibration: 1, i.e. Eq. 2 (PTPE once it fills the GPU).
pub const UNCALIBRATED_PENALTY: PenaltyFit = PenaltyFit { a: 0.0, b: 1.0 };

impl Calibration {
    /// `f(N)`: the measured value for `nodes`, else the fit.
    #[must_use]
    pub fn penalty(&self, nodes: usize) -> f64 {
        self.crossovers
            .iter()
            .find(|c| c.nodes == nodes)
            .map_or_else(|| self.fit.at(nodes), |c| c.penalty)
    }

    /// Reads a calibration.
    ///
    /// # Errors
    /// [`CalibrationError`] naming the file.
    pub fn load(path: &Path) -> Result<Self, CalibrationError> {
        let text = std::fs::read_to_string(path).map_err(|source| CalibrationError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| CalibrationError::Parse {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Writes the calibration as pretty JSON, creating parent directories.
    ///
    /// # Errors
    /// [`CalibrationError::Io`] naming the file.
    pub fn save(&self, path: &Path) -> Result<(), CalibrationError> {
        let io = |source| CalibrationError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let text = serde_json::to_string_pretty(self).expect("a calibration serializes");
        std::fs::write(path, text + "\n").map_err(io)
    }

    /// Where the calibration of a device model is stored by default:
    /// `<kernel cache>/calibration/<name>-sm<major><minor>.json` (name lower-cased, runs of
    /// other characters than letters and digits replaced by `-`). `None` without a cache
    /// directory.
    #[must_use]
    pub fn default_path(device: &str, compute_capability: (i32, i32)) -> Option<PathBuf> {
        crate::device::kernels::cache_dir().map(|d| {
            d.join("calibration")
                .join(Self::file_name(device, compute_capability))
        })
    }

    /// The file name of a device model's calibration, `<name>-sm<major><minor>.json` (name
    /// lower-cased, runs of other characters than letters and digits replaced by `-`), e.g.
    /// `nvidia-h200-sm90.json`.
    #[must_use]
    pub fn file_name(device: &str, compute_capability: (i32, i32)) -> String {
        let mut slug = String::new();
        for ch in device.chars() {
            if ch.is_ascii_alphanumeric() {
                slug.push(ch.to_ascii_lowercase());
            } else if !slug.ends_with('-') {
                slug.push('-');
            }
        }
        let slug = slug.trim_matches('-');
        let (major, minor) = compute_capability;
        format!("{slug}-sm{major}{minor}.json")
    }

    /// [`Calibration::save`] through a temporary file in the same folder and a rename, so a
    /// process reading `path` meanwhile sees the old file or the new one, never part of one.
    ///
    /// # Errors
    /// [`CalibrationError::Io`] naming the file.
    pub fn save_atomically(&self, path: &Path) -> Result<(), CalibrationError> {
        let io = |source| CalibrationError::Io {
            path: path.to_path_buf(),
            source,
        };
        let name = path
            .file_name()
            .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
        let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        self.save(&tmp)?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(e)
        })
    }
}

/// The crossover from timings: the smallest tested episode count from which PTPE is at least
/// as fast as MTPE at every larger tested count. `timings` are `(episodes, ptpe_s, mtpe_s)` in
/// increasing `episodes`. When PTPE never wins, twice the largest count tested (MTPE up to
/// there and beyond what was seen); when it always wins, the smallest count.
#[must_use]
pub fn crossover(timings: &[(u64, f64, f64)]) -> Option<u64> {
    let last = timings.last()?;
    let mut from = 2 * last.0;
    for &(s, ptpe, mtpe) in timings.iter().rev() {
        if ptpe <= mtpe {
            from = s;
        } else {
            break;
        }
    }
    Some(from)
}

#[cfg(test)]
impl Calibration {
    /// A small calibration for tests: one crossover at N = 3 (penalty 0.25), fit `1 / N`.
    pub(crate) fn example() -> Self {
        Self {
            device: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            multiprocessors: 132,
            workload: "test".into(),
            crossovers: vec![Crossover {
                nodes: 3,
                episodes: 4096,
                resident_threads: 16384,
                penalty: 0.25,
            }],
            fit: PenaltyFit { a: 1.0, b: 0.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_over_n_plus_b() {
        let pts: Vec<(usize, f64)> = (2..=8).map(|n| (n, 3.0 / n as f64 + 0.25)).collect();
        let fit = PenaltyFit::fit(&pts).unwrap();
        assert!(
            (fit.a - 3.0).abs() < 1e-9 && (fit.b - 0.25).abs() < 1e-9,
            "{fit:?}"
        );
        assert_eq!(PenaltyFit::fit(&[]), None);
        let one = PenaltyFit::fit(&[(3, 0.5)]).unwrap();
        assert!((one.at(7) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn crossover_is_where_ptpe_stays_ahead() {
        let t = [
            (64, 2.0, 1.0),
            (128, 1.0, 2.0), // a blip: MTPE wins again at 256
            (256, 3.0, 2.0),
            (512, 2.0, 2.0),
            (1024, 1.0, 3.0),
        ];
        assert_eq!(crossover(&t), Some(512));
        assert_eq!(crossover(&[(64, 2.0, 1.0)]), Some(128));
        assert_eq!(crossover(&[(64, 1.0, 2.0), (128, 1.0, 2.0)]), Some(64));
        assert_eq!(crossover(&[]), None);
    }

    #[test]
    fn calibration_round_trips_and_names_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("c.json");
        let c = Calibration::example();
        c.save(&path).unwrap();
        let back = Calibration::load(&path).unwrap();
        assert_eq!(back, c);
        assert!((back.penalty(3) - 0.25).abs() < 1e-12);
        assert!((back.penalty(4) - 0.25).abs() < 1e-12); // fit 1/4
        std::fs::write(&path, "{").unwrap();
        let err = Calibration::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("c.json") && err.contains("not a synfire calibration"),
            "{err}"
        );
    }
}
