//! Exact motifs of each sensor window (`kind = "motif"`): the top-k closest pairs of
//! z-normalised subsequences of one channel, by [`crate::motif::find_motifs`] (MK or the matrix
//! profile, CPU or GPU; the GPU's device thread is the process-wide one and outlives windows).

use serde::{Deserialize, Serialize};

use super::{AnyStage, Samples, Stage, StageBuilder, StageConfig, StageError};
use crate::device::DeviceChoice;
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig};
use crate::motif::{MethodChoice, MotifConfig, default_exclusion, find_motifs};
use crate::record::StreamKind;

/// `[stages.<name>]` with `kind = "motif"`: exact top-k motifs of one channel of each sensor
/// window (`synfire motif`'s options).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct MotifStageConfig {
    /// Subsequence length, samples (≥ 2).
    pub m: usize,
    /// Exclusion zone = ceil(m / exclusion_denom) (default 4).
    #[serde(default = "default_exclusion_denom")]
    pub exclusion_denom: usize,
    /// Non-overlapping motifs per window (default 1).
    #[serde(default = "one")]
    pub top_k: usize,
    /// The channel searched (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Exact path (default `auto`).
    #[serde(default)]
    pub method: MethodChoice,
    /// Where to search (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

fn default_exclusion_denom() -> usize {
    4
}

fn one() -> usize {
    1
}

impl MotifStageConfig {
    /// The search configuration.
    #[must_use]
    pub fn motif(&self) -> MotifConfig {
        MotifConfig {
            exclusion: default_exclusion(self.m, self.exclusion_denom),
            top_k: self.top_k,
            method: self.method,
            ..MotifConfig::new(self.m)
        }
    }
}

impl StageConfig for MotifStageConfig {
    const KIND: &'static str = "motif";
    const INPUT: StreamKind = StreamKind::Sensor;

    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        if self.m < 2 {
            errors.push(ConfigError::new(
                "m",
                format!("must be at least 2, got {}", self.m),
            ));
        }
        if self.exclusion_denom == 0 {
            errors.push(ConfigError::new("exclusion_denom", "must be at least 1"));
        }
        if self.top_k == 0 {
            errors.push(ConfigError::new("top_k", "must be at least 1"));
        }
        if let Some(len) = window.length_samples {
            let cfg = self.motif();
            let needed = cfg.m + cfg.exclusion + 1;
            if len < needed as u64 {
                errors.push(ConfigError::new(
                    "m",
                    format!(
                        "m = {} needs windows of at least {needed} samples; window `{}` has {len}",
                        self.m, window.name
                    ),
                ));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Box::new(self.clone()))
    }
}

impl StageBuilder for MotifStageConfig {
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(MotifStage::new(
            self.motif(),
            self.channel,
            self.device,
        )))
    }
}

/// One sensor window's result (`kind = "motif"`). A window with too few samples for one
/// pair gives no `method` and `device`, an empty `motifs` and a `reason`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MotifWindowResult {
    /// The channel searched (0-based).
    pub channel: usize,
    /// Subsequence length, samples.
    pub m: usize,
    /// Exclusion zone, samples: a pair's starts are more than this apart.
    pub exclusion: usize,
    /// The exact path that found the top motif (`synfire motif`'s `method`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// `"cpu"` or the GPU's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Up to `top_k` motifs, best first, later ones not overlapping earlier ones.
    pub motifs: Vec<WindowMotif>,
    /// Why the window was not searched (too few samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One motif of a window: the pair of length-`m` subsequences starting at `i` and `j`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowMotif {
    /// Start of the first subsequence, samples from the window's first sample.
    pub i: usize,
    /// Start of the second subsequence (`j - i > exclusion`), samples from the window's first.
    pub j: usize,
    /// Stream sample number of the first subsequence's start.
    pub start_i: u64,
    /// Stream sample number of the second subsequence's start.
    pub start_j: u64,
    /// z-normalised Euclidean distance of the pair.
    pub distance: f64,
}

/// The motif stage.
#[derive(Debug)]
pub struct MotifStage {
    cfg: MotifConfig,
    channel: usize,
    device: DeviceChoice,
}

impl MotifStage {
    /// Searches channel `channel` of each window with `cfg` on `device`.
    #[must_use]
    pub fn new(cfg: MotifConfig, channel: usize, device: DeviceChoice) -> Self {
        Self {
            cfg,
            channel,
            device,
        }
    }
}

impl Stage for MotifStage {
    type Result = MotifWindowResult;

    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Searches the configured channel ([`MotifWindowResult`]).
    fn process(&mut self, window: &Window) -> Result<MotifWindowResult, StageError> {
        let samples = Samples::of(window)?;
        let start_sample = samples.start_sample;
        let x = samples.configured_channel(self.channel)?;
        let mut out = MotifWindowResult {
            channel: self.channel,
            m: self.cfg.m,
            exclusion: self.cfg.exclusion,
            method: None,
            device: None,
            motifs: Vec::new(),
            reason: None,
        };
        match find_motifs(&x, &self.cfg, self.device) {
            Ok(r) => {
                out.method = Some(r.method.as_str().to_owned());
                out.device = Some(r.device);
                out.motifs = r
                    .motifs
                    .iter()
                    .map(|p| WindowMotif {
                        i: p.i,
                        j: p.j,
                        start_i: start_sample + p.i as u64,
                        start_j: start_sample + p.j as u64,
                        distance: p.distance,
                    })
                    .collect();
            }
            Err(crate::motif::MotifError::Device(e)) => return Err(e.into()),
            Err(e) => out.reason = Some(e.to_string()),
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(values: Vec<f64>, channels: usize) -> Window {
        crate::live::stage::test_window(values, channels, 1000)
    }

    #[test]
    fn finds_the_brute_force_motif_of_the_chosen_channel() {
        // Channel 1: bumps at 10 and 60 on random noise; channel 0: a ramp.
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let n = 100;
        let mut v = vec![0.0; 2 * n];
        for t in 0..n {
            v[2 * t] = t as f64;
            let bump = |c: usize| {
                if (c..c + 8).contains(&t) {
                    ((t - c) as f64 - 3.5).powi(2)
                } else {
                    0.0
                }
            };
            v[2 * t + 1] = bump(10) + bump(60) + rng.random_range(0.0..0.1);
        }
        let mut cfg = MotifConfig::new(8);
        cfg.method = crate::motif::MethodChoice::BruteForce;
        let x: Vec<f64> = v.iter().skip(1).step_by(2).copied().collect();
        let want = find_motifs(&x, &cfg, DeviceChoice::Cpu).unwrap().motifs[0];
        let mut s = MotifStage::new(MotifConfig::new(8), 1, DeviceChoice::Cpu);
        let out = s.process(&window(v, 2)).unwrap();
        let got = &out.motifs[0];
        assert_eq!((got.i, got.j), (want.i, want.j));
        assert_eq!(got.start_i, 1000 + want.i as u64);
        // Channel 0 (a ramp) would give distance 0: every window of a ramp z-normalises alike.
        assert!(got.distance > 0.0);
        let short = s.process(&window(vec![1.0; 10], 2)).unwrap();
        assert!(short.reason.unwrap().contains("samples"));
        assert!(short.motifs.is_empty());
        assert!(s.process(&window(vec![1.0; 10], 1)).is_err());
    }
}
