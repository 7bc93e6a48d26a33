//! Per-channel summary of sensor windows: count, missing (NaN) samples, mean, standard
//! deviation (population, two-pass), minimum and maximum. A cheap stage that shows a sensor
//! stream flowing through windows to sinks, and the template of the sensor stages.

use serde::{Deserialize, Serialize};

use super::{AnyStage, Samples, Stage, StageBuilder, StageConfig, StageError};
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
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(SummaryStage))
    }
}

/// One sensor window's result (`kind = "summary"`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SummaryResult {
    /// Stream sample number of the window's first sample.
    pub start_sample: u64,
    /// Nominal sampling rate, Hz.
    pub rate_hz: f64,
    /// One summary per channel, channel 0 first.
    pub channels: Vec<ChannelSummary>,
}

/// One channel's statistics over a window, in the channel's units. The statistics are absent
/// when every sample is missing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChannelSummary {
    /// Samples that are not missing.
    pub count: usize,
    /// Missing (NaN) samples.
    pub missing: usize,
    /// Mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<f64>,
    /// Standard deviation (population: divided by `count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub std: Option<f64>,
    /// Minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// Maximum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl ChannelSummary {
    /// The statistics of `xs` (NaN: missing), two-pass.
    fn of(mut xs: Vec<f64>) -> Self {
        let total = xs.len();
        xs.retain(|v| !v.is_nan());
        let missing = total - xs.len();
        if xs.is_empty() {
            return Self {
                count: 0,
                missing,
                mean: None,
                std: None,
                min: None,
                max: None,
            };
        }
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        Self {
            count: xs.len(),
            missing,
            mean: Some(mean),
            std: Some(var.sqrt()),
            min: Some(xs.iter().copied().fold(f64::INFINITY, f64::min)),
            max: Some(xs.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        }
    }
}

/// The summary stage.
#[derive(Debug, Default)]
pub struct SummaryStage;

impl Stage for SummaryStage {
    type Result = SummaryResult;

    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    fn process(&mut self, window: &Window) -> Result<SummaryResult, StageError> {
        let samples = Samples::of(window)?;
        Ok(SummaryResult {
            start_sample: samples.start_sample,
            rate_hz: samples.rate_hz,
            channels: (0..samples.channels)
                .map(|c| ChannelSummary::of(samples.channel(c)))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarises_each_channel_and_ignores_nan() {
        let w = crate::live::stage::test_window(vec![1.0, 10.0, 3.0, f64::NAN, 5.0, 30.0], 2, 0);
        let r = SummaryStage.process(&w).unwrap();
        let c = &r.channels;
        assert_eq!(c[0].mean, Some(3.0));
        assert_eq!(c[0].min, Some(1.0));
        assert_eq!(c[0].max, Some(5.0));
        assert_eq!(c[1].missing, 1);
        assert_eq!(c[1].mean, Some(20.0));
        assert_eq!(c[1].std, Some(10.0));
    }
}
