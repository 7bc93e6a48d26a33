//! Soft-DTW of each sensor window against templates (`kind = "softdtw"`): one channel of the
//! window against every series of a template file (Cuturi & Blondel 2017, Eq. 1; CPU f64 or
//! the GPU kernels, `crate::softdtw::gpu`), and the nearest template. Typical use: name which
//! of a few recorded gestures or waveforms each window resembles, tolerant to time warping.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{AnyStage, Samples, Stage, StageBuilder, StageConfig, StageError};
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
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(self.clone()))
    }
}

/// One sensor window's result (`kind = "softdtw"`). A window the measure cannot take (NaN
/// samples, a band too narrow for its length) gives no `device` and `nearest`, empty
/// `values` and a `reason`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SoftDtwWindowResult {
    /// The channel compared (0-based).
    pub channel: usize,
    /// `"soft_dtw"` (the value) or `"divergence"`.
    pub measure: String,
    /// Where it was computed: `"cpu"` or `"gpu"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The template with the smallest value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nearest: Option<NearestTemplate>,
    /// The measure against each template, in file order (a soft minimum over alignments of
    /// summed squared differences: the samples' units squared, dimensionless when
    /// z-normalised).
    pub values: Vec<f64>,
    /// Why the window was not compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The template nearest a window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NearestTemplate {
    /// Its series number in the template file (0-based).
    pub template: usize,
    /// Its value (the minimum of `values`).
    pub value: f64,
    /// Its label, when the file has labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
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
        match gpu::worker_on(self.device)? {
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
    type Result = SoftDtwWindowResult;

    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Compares the configured channel with every template ([`SoftDtwWindowResult`]).
    fn process(&mut self, window: &Window) -> Result<SoftDtwWindowResult, StageError> {
        let samples = Samples::of(window)?;
        let raw = Series::univariate(samples.configured_channel(self.channel)?);
        let x = if self.znormalize && raw.values.iter().all(|v| v.is_finite()) {
            znormalize(&raw)
        } else {
            raw
        };
        let mut out = SoftDtwWindowResult {
            channel: self.channel,
            measure: softdtw::report::measure_name(self.measure).to_owned(),
            device: None,
            nearest: None,
            values: Vec::new(),
            reason: None,
        };
        match self.values(&x) {
            Ok((values, device)) => {
                out.device = Some(device.to_owned());
                out.nearest = values
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(k, &value)| NearestTemplate {
                        template: k,
                        value,
                        label: self.labels.as_ref().map(|l| l[k].clone()),
                    });
                out.values = values;
            }
            Err(SoftDtwError::Device { message }) if self.device == DeviceChoice::Gpu => {
                return Err(StageError::Config(format!(
                    "soft-DTW on the GPU: {message}"
                )));
            }
            Err(e) => out.reason = Some(e.to_string()),
        }
        Ok(out)
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
                let got = &out.values;
                let want = softdtw::pairwise(&[znormalize(q)], &s.templates, &s.opts, s.measure)
                    .unwrap()
                    .remove(0);
                assert_eq!(got, &want);
                let (k, min) = want
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .unwrap();
                let nearest = out.nearest.as_ref().unwrap();
                assert_eq!(nearest.template, k);
                assert_eq!(nearest.value, *min);
                assert!(nearest.label.is_some(), "{labels}");
                assert_eq!(out.device.as_deref(), Some("cpu"));
            }
        }
    }

    #[test]
    fn a_window_with_nan_gives_a_reason_not_an_error() {
        let mut s = stage(false);
        let out = s.process(&window(vec![1.0, f64::NAN, 2.0])).unwrap();
        assert!(out.values.is_empty());
        assert!(out.nearest.is_none());
        assert!(out.reason.as_ref().unwrap().contains("NaN"), "{out:?}");
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
