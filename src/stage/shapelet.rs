//! Shapelet-tree classification of sensor windows (`kind = "shapelet"`): one channel of each
//! window is classified by a trained [`crate::shapelet::ShapeletTree`] (loaded from a model
//! file of `synfire shapelet --save-model`, or trained when the pipeline starts). Prediction
//! uses the canonical distances, so a window's label equals `ShapeletTree::classify` on the
//! same samples.

use serde_json::{Map, Value};

use super::{Samples, Stage, StageError, StreamKind};
use crate::shapelet::{ShapeletError, ShapeletTree};
use crate::window::Window;

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
    fn input(&self) -> StreamKind {
        StreamKind::Sensor
    }

    /// Fields: `channel`, `samples`, `start_sample` (stream sample number of the window's
    /// first sample), then `label` (class text), `class` (class id) and `leaf` (node id); a
    /// window holding NaN (gaps) or shorter than the longest shapelet gets `label: null` and
    /// a `reason`.
    fn process(&mut self, window: &Window) -> Result<Map<String, Value>, StageError> {
        let samples = Samples::of(window)?;
        let x = samples.configured_channel(self.channel)?;
        let mut m = Map::new();
        m.insert("channel".into(), Value::from(self.channel));
        m.insert("samples".into(), Value::from(x.len()));
        m.insert("start_sample".into(), Value::from(samples.start_sample));
        match self.tree.classify(&x, "window", 0) {
            Ok((leaf, class)) => {
                m.insert(
                    "label".into(),
                    Value::from(self.tree.classes[class].clone()),
                );
                m.insert("class".into(), Value::from(class));
                m.insert("leaf".into(), Value::from(leaf));
            }
            Err(e @ (ShapeletError::NotFinite { .. } | ShapeletError::SeriesTooShort { .. })) => {
                m.insert("label".into(), Value::Null);
                m.insert("reason".into(), Value::from(e.to_string()));
            }
            Err(e) => return Err(StageError::Config(e.to_string())),
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapelet::discovery::CpuSearch;
    use crate::shapelet::{ShapeletConfig, TrainingSet, train_with};

    fn window(values: Vec<f64>, channels: usize) -> Window {
        crate::stage::test_window(values, channels, 500)
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
            assert_eq!(out["label"], labels[i].as_str(), "series {i}");
            let (leaf, class) = tree.classify(s, "t", i).unwrap();
            assert_eq!(out["class"], class);
            assert_eq!(out["leaf"], leaf);
            assert_eq!(out["start_sample"], 500);
        }
        let mut gap = series[0].clone();
        gap[3] = f64::NAN;
        let out = stage
            .process(&window(gap.iter().flat_map(|&x| [0.0, x]).collect(), 2))
            .unwrap();
        assert_eq!(out["label"], Value::Null);
        assert!(out["reason"].as_str().unwrap().contains("NaN"));
        let out = stage.process(&window(vec![0.0; 4], 2)).unwrap();
        assert!(out["reason"].as_str().unwrap().contains("samples"));
        assert!(stage.process(&window(vec![0.0; 30], 1)).is_err());
    }
}
