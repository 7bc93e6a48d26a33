//! Exhaustive shapelet discovery and the shapelet decision tree (Ye & Keogh 2009; Mueen, Keogh
//! & Young 2011; Chang, Deka, Hwu & Roth, *Efficient Pattern-Based Time Series Classification
//! on GPU*, `../shared/papers/shapelets-gpu.txt`), on the CPU (f64, rayon) and on the GPU.
//!
//! # Definitions (the paper's equation numbers)
//!
//! * Training set `D = {(T_j, y_j)}`, `N` series of one length `L`, class labels `y_j`
//!   (any number of classes).
//! * **Candidate** (pivot) `T_{i,s,l}`: the `l` samples of series `i` from start `s`
//!   (0-based), for every `i`, every length `l` in `min_length, min_length + step, …,
//!   ≤ max_length`, and every `s ≤ L − l`.
//! * **Distance of two subsequences** (Eq. 2): the length-normalised Euclidean distance of the
//!   z-normalised subsequences, `sqrt((1/l) Σ_t (ẑ_a[t] − ẑ_b[t])²)`, `ẑ = (x − μ)/σ` with the
//!   population standard deviation. A **constant** subsequence (`σ ≤ 1e-10 |μ|`, including
//!   `σ = 0`) z-normalises to the zero vector, so distances lie in `[0, 2]`
//!   ([`distance::Stats`]).
//! * **Distance of a candidate to a series** (Eq. 1): the minimum over the series' positions.
//! * **Split** (Eqs. 3–4): series with distance `≤ θ` go left, the others right; `θ` is the
//!   midpoint of two consecutive distinct sorted distances; its quality is the **information
//!   gain** `I = E(D) − |D_L|/|D| E(D_L) − |D_R|/|D| E(D_R)` with the entropy `E` over the
//!   classes in nats; ties in gain go to the larger **separation gap**
//!   `mean_{D_R}(dist) − mean_{D_L}(dist)` ([`split`]).
//! * **Shapelet**: the candidate of the best split, in the total order of [`discovery::Scored`]:
//!   largest gain, then largest gap, then the smallest `(series, start, length)`.
//! * **Tree** (Algorithm 2): a node finds the shapelet of its own series (candidates drawn from
//!   them, distances to them), sends distance `≤ θ` left and the rest right, and recurses until
//!   a node is pure, has fewer than two series, reaches `max_depth`, or no split gains
//!   information ([`tree`]).
//! * **Logical shapelets** (§II, Mueen et al.): optionally a node's rule grows greedily by
//!   `AND` (distance = the maximum of the terms' distances) or `OR` (the minimum) terms while
//!   the gain improves ([`logical`]).
//!
//! # Exactness
//!
//! Every path reports the **canonical** values: distances by the direct formula of Eq. 2
//! ([`distance`]), gains from the integer class counts through one table of `n ln n`
//! ([`split::EntropyTable`]), gaps with one fixed summation order. The fast paths (the CPU and
//! GPU dynamic programs of Eqs. 6–7) compute approximate squared distances with a proven error
//! bound; a split counts as *safe* only where the bounds separate its two sides, and the host
//! re-measures canonically every candidate that could, within those bounds, be or tie with
//! the best ([`discovery`]). So the CPU, the GPU and the naive `O(N² L⁴)` oracle ([`oracle`])
//! pick the same shapelet with bit-identical gains.

pub mod discovery;
pub mod distance;
pub mod gpu;
pub mod logical;
#[doc(hidden)]
pub mod oracle;
pub mod report;
pub mod split;
pub mod tree;

use crate::device::DeviceError;
use crate::series::Dataset;

pub use discovery::{Candidate, Op, Scored};
pub use tree::{Node, Rule, Shapelet, ShapeletTree, TrainStats, train_with};

/// Trains a shapelet tree on `set` (Algorithm 2) on `device`: the CPU, the GPU, or `Auto`
/// (the GPU when one is usable, else the CPU with one log line), on its GPU: a
/// [`DeviceTarget`](crate::device::DeviceTarget) names it (`target.gpu`, a CUDA ordinal), a
/// plain [`DeviceChoice`](crate::device::DeviceChoice) takes the first GPU.
///
/// # Errors
/// [`ShapeletError::Config`] for options that do not fit the set; [`ShapeletError::Device`]
/// with `Gpu` when no GPU works or the GPU ordinal does not exist.
pub fn train(
    set: &TrainingSet,
    cfg: &ShapeletConfig,
    device: impl Into<crate::device::DeviceTarget>,
) -> Result<(ShapeletTree, TrainStats), ShapeletError> {
    let target = device.into();
    cfg.validate(set.length)?;
    let mut search = gpu::select(target)?;
    train_with(set, cfg, search.as_mut())
}

/// What to search and how deep to grow the tree.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ShapeletConfig {
    /// Shortest candidate length, samples (≥ 2).
    pub min_length: usize,
    /// Longest candidate length, samples (≥ `min_length`, ≤ the series length).
    pub max_length: usize,
    /// Length step (≥ 1).
    pub step: usize,
    /// Shapelets per node rule: 1 = plain shapelets; `k > 1` lets a rule grow to `k` terms
    /// joined by AND/OR (logical shapelets).
    pub max_terms: usize,
    /// Deepest split level (root = 0); `None`: grow until pure or no gain.
    pub max_depth: Option<usize>,
}

impl ShapeletConfig {
    /// Lengths `min..=max` by 1, plain shapelets, unlimited depth.
    #[must_use]
    pub fn new(min_length: usize, max_length: usize) -> Self {
        Self {
            min_length,
            max_length,
            step: 1,
            max_terms: 1,
            max_depth: None,
        }
    }

    /// The candidate lengths, ascending.
    #[must_use]
    pub fn lengths(&self) -> Vec<usize> {
        (self.min_length..=self.max_length)
            .step_by(self.step.max(1))
            .collect()
    }

    /// Checks the options against series of `series_length` samples.
    ///
    /// # Errors
    /// [`ShapeletError::Config`] naming the option: `min_length < 2`, `step = 0`,
    /// `max_length < min_length`, `max_length > series_length`, `max_terms = 0`.
    pub fn validate(&self, series_length: usize) -> Result<(), ShapeletError> {
        let bad = |option: &'static str, message: String| ShapeletError::Config { option, message };
        if self.min_length < 2 {
            return Err(bad(
                "min_length",
                format!(
                    "must be at least 2 (a subsequence of one sample z-normalises to 0), got {}",
                    self.min_length
                ),
            ));
        }
        if self.step == 0 {
            return Err(bad("step", "must be at least 1".into()));
        }
        if self.max_length < self.min_length {
            return Err(bad(
                "max_length",
                format!(
                    "{} is below min_length = {}",
                    self.max_length, self.min_length
                ),
            ));
        }
        if self.max_length > series_length {
            return Err(bad(
                "max_length",
                format!(
                    "{} exceeds the series length {series_length}",
                    self.max_length
                ),
            ));
        }
        if self.max_terms == 0 {
            return Err(bad("max_terms", "must be at least 1".into()));
        }
        Ok(())
    }

    /// Number of candidates of `n` series of length `series_length`: `n Σ_l (L − l + 1)`.
    #[must_use]
    pub fn candidates(&self, n: usize, series_length: usize) -> u64 {
        self.lengths()
            .iter()
            .map(|&l| (series_length + 1).saturating_sub(l) as u64)
            .sum::<u64>()
            * n as u64
    }
}

/// Errors of training and prediction. Every message names the input or option.
#[derive(Debug, thiserror::Error)]
pub enum ShapeletError {
    /// The collection has no labels (e.g. `.npy` or a `.ts` without `@classLabel`).
    #[error(
        "{input}: the series have no class labels; shapelet discovery needs a labelled set \
         (.ts with @classLabel, .tsv or .txt)"
    )]
    Unlabelled {
        /// The input.
        input: String,
    },
    /// Fewer than two series.
    #[error("{input}: {count} series; at least 2 are needed")]
    TooFew {
        /// The input.
        input: String,
        /// Series found.
        count: usize,
    },
    /// A series with more than one channel.
    #[error("{input}: series {index} has {dims} channels; shapelets need univariate series")]
    Multivariate {
        /// The input.
        input: String,
        /// 0-based series index.
        index: usize,
        /// Its channels.
        dims: usize,
    },
    /// Series of different lengths in a training set.
    #[error(
        "{input}: series {index} has {len} samples, series 0 has {expected}; training needs \
         series of equal length"
    )]
    Ragged {
        /// The input.
        input: String,
        /// 0-based index of the first series of another length.
        index: usize,
        /// Its length.
        len: usize,
        /// The length of series 0.
        expected: usize,
    },
    /// A NaN or infinite sample.
    #[error(
        "{input}: series {index}, sample {position} is {value}; missing or non-finite samples \
         are not allowed"
    )]
    NotFinite {
        /// The input.
        input: String,
        /// 0-based series index.
        index: usize,
        /// 0-based sample index.
        position: usize,
        /// The value.
        value: f64,
    },
    /// A series shorter than a shapelet it must be compared with.
    #[error(
        "{input}: series {index} has {len} samples; the model's shapelets need at least {needed}"
    )]
    SeriesTooShort {
        /// The input.
        input: String,
        /// 0-based series index.
        index: usize,
        /// Its length.
        len: usize,
        /// The longest shapelet of the model.
        needed: usize,
    },
    /// Labels and series do not pair up.
    #[error("{input}: {labels} labels for {series} series")]
    LabelCount {
        /// The input.
        input: String,
        /// Labels given.
        labels: usize,
        /// Series given.
        series: usize,
    },
    /// A bad option.
    #[error("`{option}`: {message}")]
    Config {
        /// The option (`min_length`, `step`, …).
        option: &'static str,
        /// What is wrong.
        message: String,
    },
    /// A model file that cannot be used.
    #[error("{path}: not a usable synfire shapelet model: {message}")]
    Model {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The GPU path failed (with `device = gpu`; `auto` falls back to the CPU).
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// A validated training set: `N ≥ 2` finite univariate series of one length `L` with class
/// ids.
///
/// Class ids number the distinct labels in order of first appearance; `classes[c]` is the
/// label text of class `c`.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingSet {
    /// Series length `L`.
    pub length: usize,
    /// The samples, row-major, shape `[N, L]`.
    pub values: Vec<f64>,
    /// Class id per series, shape `[N]`.
    pub labels: Vec<usize>,
    /// Label text per class id.
    pub classes: Vec<String>,
}

impl TrainingSet {
    /// Builds a training set from series and their labels.
    ///
    /// # Errors
    /// [`ShapeletError::TooFew`], [`ShapeletError::LabelCount`], [`ShapeletError::Ragged`],
    /// [`ShapeletError::NotFinite`], each naming `input`.
    pub fn new(series: &[Vec<f64>], labels: &[String], input: &str) -> Result<Self, ShapeletError> {
        if labels.len() != series.len() {
            return Err(ShapeletError::LabelCount {
                input: input.into(),
                labels: labels.len(),
                series: series.len(),
            });
        }
        if series.len() < 2 {
            return Err(ShapeletError::TooFew {
                input: input.into(),
                count: series.len(),
            });
        }
        let length = series[0].len();
        let mut values = Vec::with_capacity(series.len() * length);
        for (index, s) in series.iter().enumerate() {
            if s.len() != length {
                return Err(ShapeletError::Ragged {
                    input: input.into(),
                    index,
                    len: s.len(),
                    expected: length,
                });
            }
            check_finite(s, input, index)?;
            values.extend_from_slice(s);
        }
        let mut classes: Vec<String> = Vec::new();
        let ids = labels
            .iter()
            .map(|l| match classes.iter().position(|c| c == l) {
                Some(c) => c,
                None => {
                    classes.push(l.clone());
                    classes.len() - 1
                }
            })
            .collect();
        Ok(Self {
            length,
            values,
            labels: ids,
            classes,
        })
    }

    /// A training set from a labelled collection read by [`crate::series::read_dataset`].
    ///
    /// # Errors
    /// [`ShapeletError::Unlabelled`], [`ShapeletError::Multivariate`] and those of
    /// [`TrainingSet::new`].
    pub fn from_dataset(dataset: &Dataset, input: &str) -> Result<Self, ShapeletError> {
        let labels = dataset
            .labels
            .as_ref()
            .ok_or_else(|| ShapeletError::Unlabelled {
                input: input.into(),
            })?;
        let series = univariate(dataset, input)?;
        Self::new(&series, labels, input)
    }

    /// Number of series `N`.
    #[must_use]
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no series (never true for a constructed set).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Series `i`, shape `[L]`.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    #[must_use]
    pub fn series(&self, i: usize) -> &[f64] {
        &self.values[i * self.length..(i + 1) * self.length]
    }

    /// The class id of each label text in `labels` (`None` for a label not seen in training).
    #[must_use]
    pub fn class_of(&self, label: &str) -> Option<usize> {
        self.classes.iter().position(|c| c == label)
    }
}

/// The univariate series of a collection (any lengths; NaN kept).
///
/// # Errors
/// [`ShapeletError::Multivariate`] naming `input` and the series.
pub fn univariate(dataset: &Dataset, input: &str) -> Result<Vec<Vec<f64>>, ShapeletError> {
    dataset
        .series
        .iter()
        .enumerate()
        .map(|(index, s)| {
            if s.dims == 1 {
                Ok(s.values.clone())
            } else {
                Err(ShapeletError::Multivariate {
                    input: input.into(),
                    index,
                    dims: s.dims,
                })
            }
        })
        .collect()
}

/// Checks that every sample of series `index` is finite.
///
/// # Errors
/// [`ShapeletError::NotFinite`] naming `input`, the series and the sample.
pub fn check_finite(series: &[f64], input: &str, index: usize) -> Result<(), ShapeletError> {
    match series.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(position) => Err(ShapeletError::NotFinite {
            input: input.into(),
            index,
            position,
            value: series[position],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_option() {
        let c = ShapeletConfig::new(2, 10);
        assert!(c.validate(10).is_ok());
        assert_eq!(c.lengths().len(), 9);
        let e = ShapeletConfig::new(0, 5).validate(10).unwrap_err();
        assert!(e.to_string().contains("`min_length`"), "{e}");
        let e = ShapeletConfig::new(3, 11).validate(10).unwrap_err();
        assert!(
            e.to_string().contains("exceeds the series length 10"),
            "{e}"
        );
        let mut c = ShapeletConfig::new(3, 5);
        c.step = 0;
        assert!(c.validate(10).unwrap_err().to_string().contains("`step`"));
        c.step = 2;
        assert_eq!(c.lengths(), [3, 5]);
        assert_eq!(c.candidates(4, 10), 4 * (8 + 6));
        let e = ShapeletConfig::new(5, 3).validate(10).unwrap_err();
        assert!(e.to_string().contains("below min_length"), "{e}");
    }

    #[test]
    fn training_set_checks_its_input() {
        let l = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let ok = TrainingSet::new(
            &[vec![1.0, 2.0], vec![3.0, 4.0], vec![0.0, 1.0]],
            &l(&["b", "a", "b"]),
            "x",
        )
        .unwrap();
        assert_eq!(ok.labels, [0, 1, 0]);
        assert_eq!(ok.classes, ["b", "a"]);
        assert_eq!(ok.series(1), [3.0, 4.0]);
        let e = TrainingSet::new(&[vec![1.0, 2.0], vec![3.0]], &l(&["a", "b"]), "x").unwrap_err();
        assert!(matches!(e, ShapeletError::Ragged { index: 1, .. }), "{e}");
        let e = TrainingSet::new(&[vec![1.0, f64::NAN], vec![3.0, 1.0]], &l(&["a", "b"]), "x")
            .unwrap_err();
        assert!(e.to_string().contains("series 0, sample 1 is NaN"), "{e}");
        let e = TrainingSet::new(&[vec![1.0, 2.0]], &l(&["a"]), "x").unwrap_err();
        assert!(matches!(e, ShapeletError::TooFew { count: 1, .. }));
        let e = TrainingSet::new(&[vec![1.0], vec![2.0]], &l(&["a"]), "x").unwrap_err();
        assert!(matches!(e, ShapeletError::LabelCount { .. }));
    }
}
