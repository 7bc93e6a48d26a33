//! Firing rates of spike windows: for each unit the source has announced, its spike count in
//! the window and its rate `count / (end_s − start_s)` in Hz, and the population rate (all
//! spikes over the window's length). The spike counterpart of `summary`: a cheap monitor of a
//! probe's units (a unit that falls silent shows as 0 Hz), and the worked example of
//! `docs/adding-a-stage.md`.

use serde::{Deserialize, Serialize};

use super::{AnyStage, Stage, StageBuilder, StageConfig, StageError};
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig, WindowData};
use crate::record::StreamKind;

/// `[stages.<name>]` with `kind = "rate"`: per-unit firing rates of spike windows.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct RateConfig {
    /// List only units firing at least this rate, Hz (default 0: every announced unit,
    /// silent ones included).
    #[serde(default)]
    pub min_rate_hz: f64,
}

impl StageConfig for RateConfig {
    const KIND: &'static str = "rate";
    const INPUT: StreamKind = StreamKind::Spikes;

    fn validate(&self, _window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        if !(self.min_rate_hz.is_finite() && self.min_rate_hz >= 0.0) {
            return Err(vec![ConfigError::new(
                "min_rate_hz",
                format!("must be a rate ≥ 0 Hz, got {}", self.min_rate_hz),
            )]);
        }
        Ok(Box::new(self.clone()))
    }
}

impl StageBuilder for RateConfig {
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(RateStage {
            min_rate_hz: self.min_rate_hz,
        }))
    }
}

/// One spike window's result (`kind = "rate"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RateResult {
    /// The window's length, seconds (`window_end_s − window_start_s`).
    pub duration_s: f64,
    /// All spikes in the window over its length, Hz.
    pub population_rate_hz: f64,
    /// Units at or above `min_rate_hz`, in the order the source announced them.
    pub units: Vec<UnitRate>,
}

/// One unit's firing in a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnitRate {
    /// The unit's name, as the source announced it.
    pub unit: String,
    /// Spikes in the window.
    pub spikes: u64,
    /// `spikes / duration_s`, Hz.
    pub rate_hz: f64,
}

/// The rate stage.
#[derive(Debug)]
pub struct RateStage {
    min_rate_hz: f64,
}

impl Stage for RateStage {
    type Result = RateResult;

    fn input(&self) -> StreamKind {
        StreamKind::Spikes
    }

    fn process(&mut self, window: &Window) -> Result<RateResult, StageError> {
        let WindowData::Spikes { units, names, .. } = &window.data else {
            return Err(StageError::WrongInput {
                expected: StreamKind::Spikes,
                got: StreamKind::Sensor,
            });
        };
        let duration_s = window.end_s - window.start_s;
        if !(duration_s.is_finite() && duration_s > 0.0) {
            return Err(StageError::Config(format!(
                "window [{}, {}) s has no positive length",
                window.start_s, window.end_s
            )));
        }
        let top = units.iter().map(|&u| u as usize + 1).max().unwrap_or(0);
        let mut spikes = vec![0_u64; names.len().max(top)];
        for &u in units {
            spikes[u as usize] += 1;
        }
        let units = spikes
            .iter()
            .enumerate()
            .map(|(id, &n)| UnitRate {
                unit: names
                    .get(id)
                    .map_or_else(|| id.to_string(), |s| s.to_string()),
                spikes: n,
                rate_hz: n as f64 / duration_s,
            })
            .filter(|u| u.rate_hz >= self.min_rate_hz)
            .collect();
        Ok(RateResult {
            duration_s,
            population_rate_hz: window.events() as f64 / duration_s,
            units,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{RateConfig, RateStage};
    use crate::live::stage::{Stage, StageError};
    use crate::live::window::{Window, WindowData};

    fn spikes(units: Vec<u32>, names: &[&str]) -> Window {
        let mut w = crate::live::stage::test_window(Vec::new(), 1, 0);
        w.start_s = 10.0;
        w.end_s = 12.0;
        w.data = WindowData::Spikes {
            times: (0..units.len()).map(|i| 10.0 + i as f64 * 0.01).collect(),
            units,
            names: names.iter().map(|s| Arc::from(*s)).collect(),
        };
        w
    }

    #[test]
    fn rates_are_counts_over_the_window_length() {
        let mut stage = RateStage { min_rate_hz: 0.0 };
        let r = stage
            .process(&spikes(vec![0, 2, 0, 0, 2], &["a", "b", "c"]))
            .unwrap();
        assert_eq!(r.duration_s, 2.0);
        assert_eq!(r.population_rate_hz, 2.5);
        let got: Vec<(&str, u64, f64)> = r
            .units
            .iter()
            .map(|u| (u.unit.as_str(), u.spikes, u.rate_hz))
            .collect();
        assert_eq!(got, [("a", 3, 1.5), ("b", 0, 0.0), ("c", 2, 1.0)]);
        let mut only_active = RateStage { min_rate_hz: 1.0 };
        let r = only_active
            .process(&spikes(vec![0, 2, 0, 0, 2], &["a", "b", "c"]))
            .unwrap();
        let names: Vec<&str> = r.units.iter().map(|u| u.unit.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn a_sensor_window_and_a_bad_option_are_errors() {
        let mut stage = RateStage { min_rate_hz: 0.0 };
        let sensor = crate::live::stage::test_window(vec![1.0, 2.0], 1, 0);
        assert!(matches!(
            stage.process(&sensor),
            Err(StageError::WrongInput { .. })
        ));
        let window: crate::live::window::WindowConfig =
            toml::from_str("source = \"s\"\nlength_s = 1.0\nhop_s = 1.0").unwrap();
        let bad = RateConfig { min_rate_hz: -1.0 };
        let errors = crate::live::stage::StageConfig::validate(&bad, &window).unwrap_err();
        assert_eq!(errors[0].field, "min_rate_hz");
    }

    /// The line `run` writes: the envelope, then these keys in this order (consumers read
    /// them by key).
    #[test]
    fn rate_lines_keep_their_keys() {
        let mut stage = RateStage { min_rate_hz: 0.0 };
        let got = crate::live::stage::tests::lines(
            &mut stage,
            vec![crate::live::stage::tests::spike_window()],
        );
        crate::live::stage::tests::assert_keys(
            "rate",
            &got[0],
            &[
                "duration_s: float",
                "population_rate_hz: float",
                "units: array",
                "units[].unit: string",
                "units[].spikes: int",
                "units[].rate_hz: float",
            ],
        );
        let r = got[0].1.result.as_ref().unwrap();
        assert_eq!(r.units[0].spikes + r.units[1].spikes, 24);
    }
}
