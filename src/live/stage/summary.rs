//! Per-channel summary of sensor windows: count, missing (NaN) samples, mean, standard
//! deviation (population, two-pass), minimum and maximum. A cheap stage that shows a sensor
//! stream flowing through windows to sinks, and the template of the sensor stages.

use serde_json::{Map, Value, json};

use super::{Samples, Stage, StageBuilder, StageConfig, StageError};
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig};
use crate::record::StreamKind;

/// `[stages.<name>]` with `kind = "summary"`: per-channel statistics of sensor windows. No
/// options besides `window`.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct SummaryConfig {}

impl StageConfig for SummaryConfig {
    const KIND: &'static str = "summary";
    const INPUT: StreamKind = StreamKind::Sensor;

    fn validate(&self, _window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        Ok(Box::new(SummaryBuilder))
    }
}

#[derive(Debug)]
struct SummaryBuilder;

impl StageBuilder for SummaryBuilder {
    fn build(&self) -> Result<Box<dyn Stage>, StageError> {
        Ok(Box::new(SummaryStage))
    }
}

/// The summary stage.
#[derive(Debug, Default)]
pub struct SummaryStage;

impl Stage for SummaryStage {
    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    fn process(&mut self, window: &Window) -> Result<Map<String, Value>, StageError> {
        let samples = Samples::of(window)?;
        let per_channel: Vec<Value> = (0..samples.channels)
            .map(|c| {
                let mut xs = samples.channel(c);
                let total = xs.len();
                xs.retain(|v| !v.is_nan());
                let missing = total - xs.len();
                if xs.is_empty() {
                    return json!({"count": 0, "missing": missing});
                }
                let n = xs.len() as f64;
                let mean = xs.iter().sum::<f64>() / n;
                let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
                let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                json!({"count": xs.len(), "missing": missing, "mean": mean, "std": var.sqrt(), "min": min, "max": max})
            })
            .collect();
        let mut m = Map::new();
        m.insert("start_sample".into(), Value::from(samples.start_sample));
        m.insert("rate_hz".into(), Value::from(samples.rate_hz));
        m.insert("channels".into(), Value::from(per_channel));
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_each_channel_and_ignores_nan() {
        let w = crate::live::stage::test_window(vec![1.0, 10.0, 3.0, f64::NAN, 5.0, 30.0], 2, 0);
        let m = SummaryStage.process(&w).unwrap();
        let c = &m["channels"];
        assert_eq!(c[0]["mean"], 3.0);
        assert_eq!(c[0]["min"], 1.0);
        assert_eq!(c[0]["max"], 5.0);
        assert_eq!(c[1]["missing"], 1);
        assert_eq!(c[1]["mean"], 20.0);
        assert_eq!(c[1]["std"], 10.0);
    }
}
