//! [`MiningOptions`]: every option of `synfire mine`, in one type shared by the command line,
//! the episodes stage of a pipeline (`[stages.<name>]` with `kind = "episodes"`) and the
//! library, with the same names and defaults everywhere. Its `significance` slot holds a test
//! of the mined episodes where a layer above supplies one
//! (`significance::MineOptions = MiningOptions<significance::SignificanceOptions>`); plain
//! `MiningOptions` take none ([`NoTest`]).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::count::MAX_EPISODE_LEN;
use super::hybrid::{Calibration, ExactAlgorithm};
use super::memory::MemoryBudget;
use super::model::{IntervalError, IntervalUnit};
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

/// One interval of [`MiningOptions`]: the numbers `[low, high]` (meaning `(low, high]`) or the
/// notation `"(0.004,0.006]"`, `"[0,0.001]"` (a closed lower bound admits a zero delay;
/// [`crate::episode::model`]). Its unit is the field's (seconds or samples).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum IntervalSpec {
    /// `[low, high]`, meaning `(low, high]`.
    Pair([f64; 2]),
    /// `(low,high]`, `[low,high]` or `low-high`.
    Text(String),
}

impl std::fmt::Display for IntervalSpec {
    /// As written: `[low, high]` or the text.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pair([lo, hi]) => write!(f, "[{lo}, {hi}]"),
            Self::Text(text) => f.write_str(text),
        }
    }
}

impl IntervalSpec {
    /// `iv` in its own unit, as text that reads back to exactly `iv`.
    #[must_use]
    pub fn of(iv: Interval) -> Self {
        let g = iv.given();
        let open = if g.closed { '[' } else { '(' };
        Self::Text(format!("{open}{},{}]", g.low, g.high))
    }

    /// The interval, with its bounds in `unit`.
    ///
    /// # Errors
    /// [`IntervalError`] for malformed text or bounds.
    pub fn resolve(&self, unit: IntervalUnit) -> Result<Interval, IntervalError> {
        match self {
            Self::Pair([lo, hi]) => Interval::parse_in(&format!("({lo},{hi}]"), unit),
            Self::Text(text) => Interval::parse_in(text, unit),
        }
    }
}

/// What to mine and where to count: the options of `synfire mine`.
///
/// Intervals are delays between consecutive events of an episode, `(low, high]` or
/// `[low, high]`, in seconds (`intervals_s`) or in whole samples of a clock
/// (`intervals_samples` with `sample_rate_hz`; [`Interval::samples`]). The threshold is `min_count` if given, else `support` relative to `support_per`, else a
/// fraction 0.001 of the events (tdminer's default; [`Threshold::from_options`]).
///
/// `T` is the test of the mined episodes the options may carry in `significance` (read and
/// written in the same document): [`NoTest`] (none) by default,
/// `significance::SignificanceOptions` in `significance::MineOptions`. Serialised, the
/// options read back to the same value.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct MiningOptions<T = NoTest> {
    /// Inter-event intervals in seconds, each `[low, high]` (meaning `(low, high]`) or a
    /// notation string: `[[0.0, 0.005], "(0.005,0.01]", "[0,0.001]"]`.
    #[serde(default)]
    pub intervals_s: Vec<IntervalSpec>,
    /// Inter-event intervals in whole samples of the `sample_rate_hz` clock, in the same
    /// forms: `["[0,5]", "(5,150]"]` (instead of `intervals_s`).
    #[serde(default)]
    pub intervals_samples: Vec<IntervalSpec>,
    /// The clock of `intervals_samples`, Hz (e.g. 30000 for a Neuropixels AP band).
    pub sample_rate_hz: Option<f64>,
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
    /// Stop a level before the process holds more memory than this: `"auto"` (default: what
    /// it holds at the start plus a third of the available memory), `"off"`, or a size
    /// (`"8G"`, or bytes). [`MemoryBudget`].
    #[serde(default)]
    pub memory_budget: MemoryBudget,
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
    /// Test the mined episodes against surrogates (`synfire mine --surrogates …`; in a
    /// pipeline, `[stages.<name>.significance]`, each window tested on its own): `T`'s options
    /// (`significance::SignificanceOptions`, which check themselves). Not read by
    /// [`MiningOptions::resolve`].
    #[serde(default = "Option::default")]
    pub significance: Option<T>,
}

/// The test slot of plain [`MiningOptions`]: no test (no value of this type exists, so a
/// document that gives `significance` is refused; `significance::MineOptions` reads one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub enum NoTest {}

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
    /// Options with `intervals`, every other option at its default and no test. Intervals in samples
    /// go to `intervals_samples` (with the first one's rate), the others to `intervals_s`.
    #[must_use]
    pub fn new(intervals: &[Interval]) -> Self {
        let rate = intervals.iter().find_map(|iv| match iv.given().unit {
            IntervalUnit::Samples { rate_hz } => Some(rate_hz),
            IntervalUnit::Seconds => None,
        });
        let (in_samples, in_seconds): (Vec<Interval>, Vec<Interval>) = intervals
            .iter()
            .partition(|iv| matches!(iv.given().unit, IntervalUnit::Samples { .. }));
        Self {
            intervals_s: in_seconds.into_iter().map(IntervalSpec::of).collect(),
            intervals_samples: in_samples.into_iter().map(IntervalSpec::of).collect(),
            sample_rate_hz: rate,
            min_count: None,
            support: None,
            support_per: SupportPer::default(),
            max_level: DEFAULT_MAX_LEVEL,
            one_pass: false,
            bounds: true,
            max_candidates: None,
            time_budget_s: None,
            memory_budget: MemoryBudget::default(),
            device: DeviceChoice::default(),
            gpus: None,
            exact_kernel: ExactAlgorithm::default(),
            calibration: None,
            significance: None,
        }
    }
}

impl<T> MiningOptions<T> {
    /// The same options with `significance` in the test slot (a test of another type, or
    /// none).
    #[must_use]
    pub fn with_test<U>(self, significance: Option<U>) -> MiningOptions<U> {
        MiningOptions {
            intervals_s: self.intervals_s,
            intervals_samples: self.intervals_samples,
            sample_rate_hz: self.sample_rate_hz,
            min_count: self.min_count,
            support: self.support,
            support_per: self.support_per,
            max_level: self.max_level,
            one_pass: self.one_pass,
            bounds: self.bounds,
            max_candidates: self.max_candidates,
            time_budget_s: self.time_budget_s,
            memory_budget: self.memory_budget,
            device: self.device,
            gpus: self.gpus,
            exact_kernel: self.exact_kernel,
            calibration: self.calibration,
            significance,
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
        let samples = match self.sample_rate_hz {
            Some(rate_hz) if rate_hz.is_finite() && rate_hz > 0.0 => {
                Some(IntervalUnit::Samples { rate_hz })
            }
            Some(rate) => {
                err(
                    "sample_rate_hz".into(),
                    format!("must be a positive number of Hz, got {rate}"),
                );
                None
            }
            None => None,
        };
        let fields = [
            (
                "intervals_s",
                &self.intervals_s,
                Some(IntervalUnit::Seconds),
            ),
            ("intervals_samples", &self.intervals_samples, samples),
        ];
        for (field, specs, unit) in fields {
            let Some(unit) = unit else { continue };
            for (i, spec) in specs.iter().enumerate() {
                match spec.resolve(unit) {
                    Ok(iv) if intervals.contains(&iv) => {
                        err(format!("{field}[{i}]"), "occurs twice".to_owned());
                    }
                    Ok(iv) => intervals.push(iv),
                    Err(e) => err(format!("{field}[{i}]"), format!("`{spec}`: {e}")),
                }
            }
        }
        match (
            self.intervals_s.is_empty(),
            self.intervals_samples.is_empty(),
        ) {
            (true, true) => err(
                "intervals_s".into(),
                "needs at least one interval, e.g. [0.0, 0.005] or \"[0,0.001]\"".into(),
            ),
            (false, false) => err(
                "intervals_samples".into(),
                "give `intervals_s` or `intervals_samples`, not both".into(),
            ),
            (true, false) if self.sample_rate_hz.is_none() => err(
                "sample_rate_hz".into(),
                "`intervals_samples` needs the clock's `sample_rate_hz`".into(),
            ),
            (false, true) if self.sample_rate_hz.is_some() => err(
                "sample_rate_hz".into(),
                "applies to `intervals_samples` (intervals in samples), not `intervals_s`".into(),
            ),
            _ => {}
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
        config.memory_budget = self.memory_budget.resolve();
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
                mtpe_threads_per_slot: None,
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
        opts.intervals_s
            .push(super::IntervalSpec::Pair([0.01, 0.005]));
        let errors = opts.resolve().unwrap_err();
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["intervals_s[1]", "max_level", "calibration"]);
        assert!(
            errors[2].message.contains("c.json"),
            "{}",
            errors[2].message
        );
    }

    #[test]
    fn intervals_in_samples_and_closed_ones_resolve_exactly() {
        let toml_like = r#"{"intervals_samples": ["[0,5]", [5, 150]], "sample_rate_hz": 30000,
            "min_count": 2}"#;
        let opts: MiningOptions = serde_json::from_str(toml_like).unwrap();
        let config = opts.miner().unwrap();
        assert_eq!(
            config.intervals,
            vec![
                Interval::samples(0.0, 5.0, true, 30_000.0).unwrap(),
                Interval::samples(5.0, 150.0, false, 30_000.0).unwrap(),
            ]
        );
        // What `new` writes reads back to the same intervals.
        let again = MiningOptions::new(&config.intervals);
        assert_eq!(again.miner().unwrap().intervals, config.intervals);
        let seconds = MiningOptions::new(&[Interval::closed(0.0, 0.001).unwrap()]);
        assert_eq!(
            seconds.miner().unwrap().intervals,
            vec![Interval::closed(0.0, 0.001).unwrap()]
        );
        let mut bad = opts.clone();
        bad.sample_rate_hz = None;
        let fields: Vec<String> = bad
            .resolve()
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(fields, ["sample_rate_hz"]);
        let mut both = opts;
        both.intervals_s = vec![super::IntervalSpec::Text("[0,0.001]".into())];
        assert!(both.resolve().is_err());
    }
}
