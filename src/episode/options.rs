//! [`MiningOptions`]: every option of `synfire mine`, in one type shared by the command line,
//! the episodes stage of a pipeline (`[stages.<name>]` with `kind = "episodes"`) and the
//! library, with the same names and defaults everywhere.

use std::path::PathBuf;

use serde::Deserialize;

use super::count::MAX_EPISODE_LEN;
use super::hybrid::{Calibration, ExactAlgorithm};
use super::{GpuSettings, Interval, MinerConfig, Strategy, SupportPer, Threshold};
use crate::device::DeviceChoice;

/// The largest episode size mined when none is given.
pub const DEFAULT_MAX_LEVEL: usize = 10;

fn default_max_level() -> usize {
    DEFAULT_MAX_LEVEL
}

fn default_bounds() -> bool {
    true
}

/// What to mine and where to count: the options of `synfire mine`.
///
/// Intervals are `(low, high]` delays in seconds between consecutive events of an episode.
/// The threshold is `min_count` if given, else `support` relative to `support_per`, else a
/// fraction 0.001 of the events (tdminer's default; [`Threshold::from_options`]).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct MiningOptions {
    /// Inter-event intervals `(low, high]`, seconds, shape `[intervals][2]`:
    /// `[[0.0, 0.005], [0.005, 0.01]]`.
    pub intervals_s: Vec<[f64; 2]>,
    /// Minimum number of non-overlapped occurrences.
    pub min_count: Option<u64>,
    /// Support threshold (see `support_per`).
    pub support: Option<f64>,
    /// `events` (default: a fraction of the events) or `seconds` (occurrences per second).
    #[serde(default)]
    pub support_per: SupportPer,
    /// Largest episode size N (default 10).
    #[serde(default = "default_max_level")]
    pub max_level: usize,
    /// Count every candidate exactly instead of PreElim first (same result; default false).
    #[serde(default)]
    pub one_pass: bool,
    /// Remove join candidates by their successor bound before counting (default true; the
    /// result is the same either way).
    #[serde(default = "default_bounds")]
    pub bounds: bool,
    /// Stop before a level with more candidates than this (default: no limit).
    pub max_candidates: Option<u64>,
    /// Stop after this many seconds of mining, wall clock (default: no limit).
    pub time_budget_s: Option<f64>,
    /// `auto` (default), `cpu` or `gpu`.
    #[serde(default)]
    pub device: DeviceChoice,
    /// GPU ordinals (default: every GPU found).
    pub gpus: Option<Vec<usize>>,
    /// `hybrid` (default), `ptpe` or `mtpe`.
    #[serde(default)]
    pub exact_kernel: ExactAlgorithm,
    /// Calibration file for the hybrid choice (default: the one stored per GPU model).
    pub calibration: Option<PathBuf>,
}

/// One invalid option: its name (as in the TOML section and, with dashes, on the command
/// line) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {message}")]
pub struct OptionError {
    /// The option, e.g. `intervals_s[1]` or `support`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl MiningOptions {
    /// Options with `intervals` (seconds) and every other option at its default.
    #[must_use]
    pub fn new(intervals: &[Interval]) -> Self {
        Self {
            intervals_s: intervals.iter().map(|iv| [iv.low(), iv.high()]).collect(),
            min_count: None,
            support: None,
            support_per: SupportPer::default(),
            max_level: DEFAULT_MAX_LEVEL,
            one_pass: false,
            bounds: true,
            max_candidates: None,
            time_budget_s: None,
            device: DeviceChoice::default(),
            gpus: None,
            exact_kernel: ExactAlgorithm::default(),
            calibration: None,
        }
    }

    /// Checks every option and returns the miner configuration they describe.
    ///
    /// # Errors
    /// As [`MiningOptions::resolve`].
    pub fn miner(&self) -> Result<MinerConfig, Vec<OptionError>> {
        self.resolve().map(|(config, _)| config)
    }

    /// Checks every option and returns the miner configuration and the GPU settings they
    /// describe; a `calibration` file is read here, once.
    ///
    /// # Errors
    /// Every invalid option ([`OptionError`] naming it): intervals that are not
    /// `0 ≤ low < high` or occur twice, none at all, both `min_count` and `support`, a threshold
    /// out of range, `max_level` outside `1..=64`, a zero `max_candidates`, a `time_budget_s`
    /// that is not a positive number, an unreadable `calibration` file.
    pub fn resolve(&self) -> Result<(MinerConfig, GpuSettings), Vec<OptionError>> {
        let mut errors = Vec::new();
        let mut err = |field: String, message: String| errors.push(OptionError { field, message });
        let mut intervals = Vec::new();
        for (i, [lo, hi]) in self.intervals_s.iter().enumerate() {
            match Interval::new(*lo, *hi) {
                Ok(iv) if intervals.contains(&iv) => {
                    err(format!("intervals_s[{i}]"), "occurs twice".to_owned());
                }
                Ok(iv) => intervals.push(iv),
                Err(e) => err(format!("intervals_s[{i}]"), e.to_string()),
            }
        }
        if self.intervals_s.is_empty() {
            err(
                "intervals_s".into(),
                "needs at least one [low, high] pair".into(),
            );
        }
        if self.min_count.is_some() && self.support.is_some() {
            err(
                "support".into(),
                "give `min_count` or `support`, not both".into(),
            );
        }
        let threshold = Threshold::from_options(self.min_count, self.support, self.support_per);
        let mut config = MinerConfig::new(intervals, threshold);
        config.max_level = self.max_level;
        config.bounds = self.bounds;
        config.max_candidates = self.max_candidates;
        config.time_budget_s = self.time_budget_s;
        if self.max_candidates == Some(0) {
            err("max_candidates".into(), "must be at least 1".into());
        }
        if let Some(s) = self.time_budget_s
            && !(s.is_finite() && s > 0.0)
        {
            err(
                "time_budget_s".into(),
                format!("must be a positive number of seconds, got {s}"),
            );
        }
        config.strategy = if self.one_pass {
            Strategy::OnePass
        } else {
            Strategy::TwoPass
        };
        if let Err(e) = threshold.validate() {
            let field = if self.min_count.is_some() {
                "min_count"
            } else {
                "support"
            };
            err(field.into(), e.to_string());
        }
        if config.max_level == 0 || config.max_level > MAX_EPISODE_LEN {
            err(
                "max_level".into(),
                format!(
                    "must be between 1 and {MAX_EPISODE_LEN}, got {}",
                    config.max_level
                ),
            );
        }
        let calibration = match &self.calibration {
            Some(path) => match Calibration::load(path) {
                Ok(c) => Some(c),
                Err(e) => {
                    err("calibration".into(), e.to_string());
                    None
                }
            },
            None => None,
        };
        if errors.is_empty() {
            let gpu = GpuSettings {
                gpus: self.gpus.clone(),
                exact: self.exact_kernel,
                calibration,
            };
            Ok((config, gpu))
        } else {
            Err(errors)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::MiningOptions;
    use crate::episode::hybrid::Calibration;
    use crate::episode::{Interval, Threshold};

    #[test]
    fn resolve_reads_the_calibration_once_into_the_settings_and_names_every_bad_option() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let c = Calibration::example();
        c.save(&path).unwrap();
        let mut opts = MiningOptions::new(&[Interval::new(0.0, 0.005).unwrap()]);
        opts.min_count = Some(3);
        opts.calibration = Some(path.clone());
        let (config, gpu) = opts.resolve().unwrap();
        assert_eq!(config.threshold, Threshold::MinCount(3));
        assert_eq!(gpu.calibration, Some(c));
        // The file is not read again: removing it changes nothing for the settings in hand.
        std::fs::remove_file(&path).unwrap();
        assert!(gpu.calibration.is_some());

        opts.max_level = 0;
        opts.intervals_s.push([0.01, 0.005]);
        let errors = opts.resolve().unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["intervals_s[1]", "max_level", "calibration"]);
        assert!(
            errors[2].message.contains("c.json"),
            "{}",
            errors[2].message
        );
    }
}
