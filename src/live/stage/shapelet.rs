//! Shapelet-tree classification of sensor windows (`kind = "shapelet"`): one channel of each
//! window is classified by a trained [`crate::shapelet::ShapeletTree`] (loaded from a model
//! file of `synfire shapelet --save-model`, or trained when the pipeline starts). Prediction
//! uses the canonical distances, so a window's label equals `ShapeletTree::classify` on the
//! same samples.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{AnyStage, Samples, Stage, StageBuilder, StageConfig, StageError};
use crate::device::DeviceChoice;
use crate::live::config::section::ConfigError;
use crate::live::window::{Window, WindowConfig};
use crate::record::StreamKind;
use crate::shapelet::{ShapeletConfig, ShapeletError, ShapeletTree, TrainingSet, train};

/// `[stages.<name>]` with `kind = "shapelet"`: classifies one channel of each sensor window
/// with a shapelet tree, read from `model` (a file of `synfire shapelet --save-model`) or
/// trained when the pipeline starts from the labelled series in `train` (`synfire shapelet`'s
/// options).
#[derive(Clone, Debug, serde::Deserialize)]
pub struct ShapeletStageConfig {
    /// A trained model (JSON).
    pub model: Option<PathBuf>,
    /// Labelled training series (UCR `.ts`, `.tsv`, `.txt`) to train on at startup.
    pub train: Option<PathBuf>,
    /// With `train`: shortest candidate length, samples.
    pub min_length: Option<usize>,
    /// With `train`: longest candidate length, samples.
    pub max_length: Option<usize>,
    /// With `train`: length step (default 1).
    pub step: Option<usize>,
    /// With `train`: shapelets per rule (1 = plain, default; more: logical AND/OR rules).
    pub max_terms: Option<usize>,
    /// With `train`: depth limit of the tree.
    pub max_depth: Option<usize>,
    /// The channel classified (0-based, default 0).
    #[serde(default)]
    pub channel: usize,
    /// Where to train (default `auto`).
    #[serde(default)]
    pub device: DeviceChoice,
}

impl ShapeletStageConfig {
    /// The training options (with `train`).
    #[must_use]
    pub fn shapelet(&self) -> ShapeletConfig {
        ShapeletConfig {
            min_length: self.min_length.unwrap_or(0),
            max_length: self.max_length.unwrap_or(0),
            step: self.step.unwrap_or(1),
            max_terms: self.max_terms.unwrap_or(1),
            max_depth: self.max_depth,
        }
    }
}

/// Where a validated shapelet stage's tree comes from.
#[derive(Debug)]
enum TreeSource {
    /// A model file, read and checked.
    Model(ShapeletTree),
    /// A training set, read and checked, trained on when the stage is built.
    Train {
        set: TrainingSet,
        config: ShapeletConfig,
        device: DeviceChoice,
    },
}

/// A validated shapelet stage.
#[derive(Debug)]
struct ShapeletBuilder {
    tree: TreeSource,
    channel: usize,
}

impl StageConfig for ShapeletStageConfig {
    const KIND: &'static str = "shapelet";
    const INPUT: StreamKind = StreamKind::Sensor;

    /// Reads the model or the training set (once) and checks the options against the window.
    fn validate(&self, window: &WindowConfig) -> Result<Box<dyn StageBuilder>, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut err = |field: &str, message: String| errors.push(ConfigError::new(field, message));
        let mut tree = None;
        let mut needed = None;
        match (&self.model, &self.train) {
            (Some(_), Some(_)) => err("train", "give `model` or `train`, not both".into()),
            (None, None) => err(
                "model",
                "missing: give `model` (a file written by `synfire shapelet --save-model`) or \
                 `train` with `min_length` and `max_length`"
                    .into(),
            ),
            (Some(path), None) => {
                for (field, given) in [
                    ("min_length", self.min_length.is_some()),
                    ("max_length", self.max_length.is_some()),
                    ("step", self.step.is_some()),
                    ("max_terms", self.max_terms.is_some()),
                    ("max_depth", self.max_depth.is_some()),
                ] {
                    if given {
                        err(
                            field,
                            "only with `train` (a model is already trained)".into(),
                        );
                    }
                }
                match ShapeletTree::load(path) {
                    Ok(t) => {
                        needed = Some(t.max_shapelet_length());
                        tree = Some(TreeSource::Model(t));
                    }
                    Err(e) => err("model", e.to_string()),
                }
            }
            (None, Some(path)) => {
                let mut missing = false;
                for (field, v) in [
                    ("min_length", self.min_length),
                    ("max_length", self.max_length),
                ] {
                    if v.is_none() {
                        err(field, "missing (needed with `train`)".into());
                        missing = true;
                    }
                }
                let input = path.display().to_string();
                let set = crate::series::read_dataset(path)
                    .map_err(|e| e.to_string())
                    .and_then(|d| TrainingSet::from_dataset(&d, &input).map_err(|e| e.to_string()));
                match set {
                    Err(e) => err("train", e),
                    Ok(set) if !missing => match self.shapelet().validate(set.length) {
                        Ok(()) => {
                            needed = self.max_length;
                            tree = Some(TreeSource::Train {
                                set,
                                config: self.shapelet(),
                                device: self.device,
                            });
                        }
                        Err(ShapeletError::Config { option, message }) => err(option, message),
                        Err(e) => err("train", e.to_string()),
                    },
                    Ok(_) => {}
                }
            }
        }
        if let (Some(len), Some(needed)) = (window.length_samples, needed)
            && len < needed as u64
        {
            err(
                "window",
                format!(
                    "the shapelets need windows of at least {needed} samples; window `{}` has {len}",
                    window.name
                ),
            );
        }
        match tree {
            Some(tree) if errors.is_empty() => Ok(Box::new(ShapeletBuilder {
                tree,
                channel: self.channel,
            })),
            _ => Err(errors),
        }
    }
}

impl StageBuilder for ShapeletBuilder {
    /// The stage, with the tree trained now when the configuration gave `train`.
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        let tree = match &self.tree {
            TreeSource::Model(t) => t.clone(),
            TreeSource::Train {
                set,
                config,
                device,
            } => {
                train(set, config, *device)
                    .map_err(|e| StageError::Config(e.to_string()))?
                    .0
            }
        };
        Ok(Box::new(
            ShapeletStage::new(tree, self.channel)
                .map_err(|e| StageError::Config(e.to_string()))?,
        ))
    }
}

/// One sensor window's result (`kind = "shapelet"`). A window holding NaN (gaps) or shorter
/// than the longest shapelet gets `label: null`, no `class` and `leaf`, and a `reason`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapeletWindowResult {
    /// The channel classified (0-based).
    pub channel: usize,
    /// Samples in the window.
    pub samples: usize,
    /// Stream sample number of the window's first sample.
    pub start_sample: u64,
    /// The class's text; `null` when the window could not be classified (always written).
    pub label: Option<String>,
    /// The class id (index into the tree's classes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<usize>,
    /// The id of the leaf (tree node) that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf: Option<usize>,
    /// Why the window could not be classified.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The shapelet stage.
#[derive(Debug)]
pub struct ShapeletStage {
    tree: ShapeletTree,
    channel: usize,
}

impl ShapeletStage {
    /// Classifies channel `channel` of each window with `tree`.
    ///
    /// # Errors
    /// [`ShapeletError::Model`] when `tree` is not a valid tree.
    pub fn new(tree: ShapeletTree, channel: usize) -> Result<Self, ShapeletError> {
        tree.validate().map_err(|message| ShapeletError::Model {
            path: "(stage)".into(),
            message,
        })?;
        Ok(Self { tree, channel })
    }
}

impl Stage for ShapeletStage {
    type Result = ShapeletWindowResult;

    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Classifies the configured channel ([`ShapeletWindowResult`]).
    fn process(&mut self, window: &Window) -> Result<ShapeletWindowResult, StageError> {
        let samples = Samples::of(window)?;
        let x = samples.configured_channel(self.channel)?;
        let mut out = ShapeletWindowResult {
            channel: self.channel,
            samples: x.len(),
            start_sample: samples.start_sample,
            label: None,
            class: None,
            leaf: None,
            reason: None,
        };
        match self.tree.classify(&x, "window", 0) {
            Ok((leaf, class)) => {
                out.label = Some(self.tree.classes[class].clone());
                out.class = Some(class);
                out.leaf = Some(leaf);
            }
            Err(e @ (ShapeletError::NotFinite { .. } | ShapeletError::SeriesTooShort { .. })) => {
                out.reason = Some(e.to_string());
            }
            Err(e) => return Err(StageError::Config(e.to_string())),
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapelet::discovery::CpuSearch;
    use crate::shapelet::{ShapeletConfig, TrainingSet, train_with};

    fn window(values: Vec<f64>, channels: usize) -> Window {
        crate::live::stage::test_window(values, channels, 500)
    }

    #[test]
    fn labels_windows_like_the_tree() {
        // Class "peak": a bump; class "flat": noise only.
        let series: Vec<Vec<f64>> = (0..8)
            .map(|i| {
                (0..30)
                    .map(|t| {
                        let noise = ((i * 31 + t * 7) % 11) as f64 * 0.01;
                        let bump = if i % 2 == 0 && (10 + i..16 + i).contains(&t) {
                            3.0
                        } else {
                            0.0
                        };
                        noise + bump
                    })
                    .collect()
            })
            .collect();
        let labels: Vec<String> = (0..8)
            .map(|i| if i % 2 == 0 { "peak" } else { "flat" }.to_owned())
            .collect();
        let set = TrainingSet::new(&series, &labels, "t").unwrap();
        let (tree, _) =
            train_with(&set, &ShapeletConfig::new(4, 8), &mut CpuSearch::default()).unwrap();
        let mut stage = ShapeletStage::new(tree.clone(), 1).unwrap();
        for (i, s) in series.iter().enumerate() {
            // Channel 0 is garbage; channel 1 carries the series.
            let v: Vec<f64> = s.iter().flat_map(|&x| [1e6, x]).collect();
            let out = stage.process(&window(v, 2)).unwrap();
            assert_eq!(out.label.as_deref(), Some(labels[i].as_str()), "series {i}");
            let (leaf, class) = tree.classify(s, "t", i).unwrap();
            assert_eq!(out.class, Some(class));
            assert_eq!(out.leaf, Some(leaf));
            assert_eq!(out.start_sample, 500);
            assert_eq!((out.channel, out.samples), (1, s.len()));
            assert_eq!(out.reason, None);
        }
        let mut gap = series[0].clone();
        gap[3] = f64::NAN;
        let out = stage
            .process(&window(gap.iter().flat_map(|&x| [0.0, x]).collect(), 2))
            .unwrap();
        assert_eq!((out.label, out.class, out.leaf), (None, None, None));
        assert!(out.reason.unwrap().contains("NaN"));
        let out = stage.process(&window(vec![0.0; 4], 2)).unwrap();
        assert_eq!(out.label, None);
        assert!(out.reason.unwrap().contains("samples"));
        assert!(stage.process(&window(vec![0.0; 30], 1)).is_err());
    }
}
