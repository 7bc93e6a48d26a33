//! Soft-DTW of each sensor window against templates (`kind = "softdtw"`): one channel of the
//! window against every series of a template file (Cuturi & Blondel 2017, Eq. 1; CPU f64 or
//! the GPU kernels, `crate::softdtw::gpu`), and the nearest template. Typical use: name which
//! of a few recorded gestures or waveforms each window resembles, tolerant to time warping.

use serde_json::{Map, Value, json};

use std::path::PathBuf;

use super::{Samples, Stage, StageBuilder, StageConfig, StageError};
use crate::device::DeviceChoice;
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig};
use crate::record::StreamKind;
use crate::series::{Series, read_dataset};
use crate::softdtw::{self, Measure, Options, SoftDtwError, gpu};

/// `[stages.<name>]` with `kind = "softdtw"`: soft-DTW of one channel of each sensor window
/// against a set of templates (`synfire softdtw`'s options), with the nearest template.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct SoftDtwStageConfig {
    /// The templates: a UCR `.ts`/`.tsv`/`.txt` file or `.npy` `[B, L]` (labels, when the
    /// file has them, name the nearest template).
    pub templates: PathBuf,
    /// Smoothing γ > 0.
    pub gamma: f64,
    /// Sakoe-Chiba half-width (default: none).
    #[serde(default)]
    pub band: Option<usize>,
    /// The channel compared (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Z-normalise the window and every template first (default true), so shapes compare
    /// whatever the units.
    #[serde(default = "yes")]
    pub znormalize: bool,
    /// Report the soft-DTW divergence instead of the value (default false).
    #[serde(default)]
    pub divergence: bool,
    /// Where to compute (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

fn yes() -> bool {
    true
}

impl StageConfig for SoftDtwStageConfig {
    const KIND: &'static str = "softdtw";
    const INPUT: StreamKind = StreamKind::Sensor;

    /// Checks γ and reads the templates (once: the stage is built from what was read).
    fn validate(&self, _window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        if !(self.gamma.is_finite() && self.gamma > 0.0) {
            errors.push(ConfigError::new(
                "gamma",
                format!("must be a finite number above 0, got {}", self.gamma),
            ));
        }
        if !self.templates.exists() {
            errors.push(ConfigError::new(
                "templates",
                format!("{} does not exist", self.templates.display()),
            ));
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Box::new(SoftDtwStage::new(self).map_err(|e| vec![e])?))
    }
}

impl StageBuilder for SoftDtwStage {
    fn build(&self) -> Result<Box<dyn Stage>, StageError> {
        Ok(Box::new(self.clone()))
    }
}

/// The soft-DTW stage.
#[derive(Clone, Debug)]
pub struct SoftDtwStage {
    templates: Vec<Series>,
    labels: Option<Vec<String>>,
    opts: Options,
    measure: Measure,
    channel: usize,
    znormalize: bool,
    device: DeviceChoice,
}

/// `x` z-normalised per channel (a constant channel becomes zeros).
fn znormalize(s: &Series) -> Series {
    let d = s.dims.max(1);
    let n = s.values.len() / d;
    let mut out = s.values.clone();
    for c in 0..d {
        let col = || s.values.iter().skip(c).step_by(d);
        let mean = col().sum::<f64>() / n.max(1) as f64;
        let var = col().map(|v| (v - mean).powi(2)).sum::<f64>() / n.max(1) as f64;
        let inv = if var > 0.0 { 1.0 / var.sqrt() } else { 0.0 };
        for t in 0..n {
            out[t * d + c] = (s.values[t * d + c] - mean) * inv;
        }
    }
    Series {
        dims: s.dims,
        values: out,
    }
}

impl SoftDtwStage {
    /// Loads the templates and checks the options.
    ///
    /// # Errors
    /// An unreadable or empty template file, multivariate templates (the stage compares one
    /// channel), or invalid soft-DTW options, naming the file and the field.
    pub fn new(cfg: &SoftDtwStageConfig) -> Result<Self, ConfigError> {
        let templates_error = |message: String| ConfigError::new("templates", message);
        let data = read_dataset(&cfg.templates).map_err(|e| templates_error(e.to_string()))?;
        if data.series.is_empty() {
            return Err(templates_error(format!(
                "{}: no template series",
                cfg.templates.display()
            )));
        }
        if let Some(k) = data.series.iter().position(|s| s.dims != 1) {
            return Err(templates_error(format!(
                "{}: template {k} has {} channels; the soft-DTW stage compares one channel",
                cfg.templates.display(),
                data.series[k].dims
            )));
        }
        let opts = Options {
            band: cfg.band,
            ..Options::new(cfg.gamma)
        };
        opts.validate()
            .map_err(|e| ConfigError::new("band", e.to_string()))?;
        let templates = if cfg.znormalize {
            data.series.iter().map(znormalize).collect()
        } else {
            data.series
        };
        Ok(Self {
            templates,
            labels: data.labels,
            opts,
            measure: if cfg.divergence {
                Measure::Divergence
            } else {
                Measure::SoftDtw
            },
            channel: cfg.channel,
            znormalize: cfg.znormalize,
            device: cfg.device,
        })
    }

    fn values(&self, x: &Series) -> Result<(Vec<f64>, &'static str), SoftDtwError> {
        let a = std::slice::from_ref(x);
        match gpu::worker_for(self.device)? {
            Some(w) => Ok((
                gpu::pairwise(&w, a, &self.templates, &self.opts, self.measure)?.remove(0),
                "gpu",
            )),
            None => Ok((
                softdtw::pairwise(a, &self.templates, &self.opts, self.measure)?.remove(0),
                "cpu",
            )),
        }
    }
}

impl Stage for SoftDtwStage {
    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Fields: `channel`, `measure`, `device`, `values` (one per template, in file order) and
    /// `nearest` (`template`, `label` when the file has labels, `value`). A window the measure
    /// cannot take (NaN samples, a band too narrow for its length) gives no values and a
    /// `reason`.
    fn process(&mut self, window: &Window) -> Result<Map<String, Value>, StageError> {
        let samples = Samples::of(window)?;
        let raw = Series::univariate(samples.configured_channel(self.channel)?);
        let x = if self.znormalize && raw.values.iter().all(|v| v.is_finite()) {
            znormalize(&raw)
        } else {
            raw
        };
        let mut m = Map::new();
        m.insert("channel".into(), Value::from(self.channel));
        m.insert(
            "measure".into(),
            Value::from(softdtw::report::measure_name(self.measure)),
        );
        match self.values(&x) {
            Ok((values, device)) => {
                m.insert("device".into(), Value::from(device));
                let best = values
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(k, &v)| (k, v));
                if let Some((k, v)) = best {
                    let mut nearest = json!({"template": k, "value": v});
                    if let Some(labels) = &self.labels {
                        nearest["label"] = Value::from(labels[k].clone());
                    }
                    m.insert("nearest".into(), nearest);
                }
                m.insert("values".into(), Value::from(values));
            }
            Err(SoftDtwError::Device { message }) if self.device == DeviceChoice::Gpu => {
                return Err(StageError::Config(format!(
                    "soft-DTW on the GPU: {message}"
                )));
            }
            Err(e) => {
                m.insert("values".into(), Value::Array(Vec::new()));
                m.insert("reason".into(), Value::from(e.to_string()));
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(values: Vec<f64>) -> Window {
        crate::live::stage::test_window(values, 1, 0)
    }

    fn stage(divergence: bool) -> SoftDtwStage {
        let cfg = SoftDtwStageConfig {
            templates: "fixtures/ucr/GunPoint/GunPoint_TRAIN.ts".into(),
            gamma: 0.1,
            band: None,
            channel: 0,
            znormalize: true,
            divergence,
            device: DeviceChoice::Cpu,
        };
        SoftDtwStage::new(&cfg).unwrap()
    }

    #[test]
    fn values_equal_the_reference_and_the_nearest_is_their_minimum() {
        let data = read_dataset("fixtures/ucr/GunPoint/GunPoint_TEST.ts".as_ref()).unwrap();
        for divergence in [false, true] {
            let mut s = stage(divergence);
            for (q, labels) in data
                .series
                .iter()
                .zip(data.labels.as_ref().unwrap())
                .take(3)
            {
                let out = s.process(&window(q.values.clone())).unwrap();
                let got: Vec<f64> = out["values"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_f64().unwrap())
                    .collect();
                let want = softdtw::pairwise(&[znormalize(q)], &s.templates, &s.opts, s.measure)
                    .unwrap()
                    .remove(0);
                assert_eq!(got, want);
                let (k, min) = want
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap();
                assert_eq!(out["nearest"]["template"], k);
                assert_eq!(out["nearest"]["value"].as_f64().unwrap(), *min);
                assert!(out["nearest"]["label"].is_string(), "{labels}");
            }
        }
    }

    #[test]
    fn a_window_with_nan_gives_a_reason_not_an_error() {
        let mut s = stage(false);
        let out = s.process(&window(vec![1.0, f64::NAN, 2.0])).unwrap();
        assert_eq!(out["values"].as_array().unwrap().len(), 0);
        assert!(out["reason"].as_str().unwrap().contains("NaN"), "{out:?}");
    }

    #[test]
    fn a_missing_channel_is_a_config_error() {
        let mut s = stage(false);
        s.channel = 3;
        assert!(matches!(
            s.process(&window(vec![1.0, 2.0])),
            Err(StageError::Config(_))
        ));
    }
}
