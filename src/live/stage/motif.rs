//! Exact motifs of each sensor window (`kind = "motif"`): the top-k closest pairs of
//! z-normalised subsequences of one channel, by [`crate::motif::find_motifs`] (MK or the matrix
//! profile, CPU or GPU; the GPU's device thread is the process-wide one and outlives windows).

use serde_json::{Map, Value, json};

use super::{Samples, Stage, StageBuilder, StageConfig, StageError};
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
    fn build(&self) -> Result<Box<dyn Stage>, StageError> {
        Ok(Box::new(MotifStage::new(
            self.motif(),
            self.channel,
            self.device,
        )))
    }
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
    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Fields: `channel`, `m`, `exclusion`, `method`, `device`, and `motifs`, each with
    /// `i`, `j` (window-relative subsequence starts), `start_i`, `start_j` (stream sample
    /// numbers) and `distance`. A window with too few samples gives an empty list and a
    /// `reason`.
    fn process(&mut self, window: &Window) -> Result<Map<String, Value>, StageError> {
        let samples = Samples::of(window)?;
        let start_sample = samples.start_sample;
        let x = samples.configured_channel(self.channel)?;
        let mut m = Map::new();
        m.insert("channel".into(), Value::from(self.channel));
        m.insert("m".into(), Value::from(self.cfg.m));
        m.insert("exclusion".into(), Value::from(self.cfg.exclusion));
        match find_motifs(&x, &self.cfg, self.device) {
            Ok(r) => {
                m.insert("method".into(), Value::from(r.method.as_str()));
                m.insert("device".into(), Value::from(r.device));
                let motifs: Vec<Value> = r
                    .motifs
                    .iter()
                    .map(|p| {
                        json!({"i": p.i, "j": p.j, "start_i": start_sample + p.i as u64,
                               "start_j": start_sample + p.j as u64, "distance": p.distance})
                    })
                    .collect();
                m.insert("motifs".into(), Value::from(motifs));
            }
            Err(crate::motif::MotifError::Device(e)) => return Err(e.into()),
            Err(e) => {
                m.insert("motifs".into(), Value::Array(Vec::new()));
                m.insert("reason".into(), Value::from(e.to_string()));
            }
        }
        Ok(m)
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
        let got = &out["motifs"][0];
        assert_eq!(
            (got["i"].as_u64(), got["j"].as_u64()),
            (Some(want.i as u64), Some(want.j as u64))
        );
        assert_eq!(got["start_i"].as_u64(), Some(1000 + want.i as u64));
        // Channel 0 (a ramp) would give distance 0: every window of a ramp z-normalises alike.
        assert!(got["distance"].as_f64().unwrap() > 0.0);
        let short = s.process(&window(vec![1.0; 10], 2)).unwrap();
        assert!(short["reason"].as_str().unwrap().contains("samples"));
        assert!(s.process(&window(vec![1.0; 10], 1)).is_err());
    }
}
