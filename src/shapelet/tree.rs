//! The shapelet decision tree (Algorithm 2): training, prediction, and the model file.
//!
//! Training starts at the root with every series; a node becomes a **leaf** when its series
//! are of one class, it has fewer than two series, it sits at depth `max_depth` (root = 0),
//! or no candidate splits it with a gain above 1e-12. Otherwise it takes the shapelet of its
//! own series ([`super::discovery::discover`], optionally grown into a logical rule,
//! [`super::logical`]), sends the series with rule distance `≤ θ` left and the others right,
//! and both children are trained the same way. A leaf predicts its majority class (ties: the
//! smaller class id).
//!
//! Nodes are numbered in preorder (a node before its left subtree before its right
//! subtree), so children always have larger ids than their parent. The model serialises to
//! JSON ([`ShapeletTree::save`]); each shapelet carries its samples, so a model classifies
//! without its training file, and its distances equal the training distances bit for bit.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::discovery::{Candidate, Op, Problem, Scored, Search, discover};
use super::distance::{distance_sq, znormalize};
use super::logical;
use super::{ShapeletConfig, ShapeletError, TrainingSet, check_finite};

/// `format` of a model file.
pub const MODEL_FORMAT: &str = "synfire-shapelet-tree";
/// `version` of the model format this code writes and reads.
pub const MODEL_VERSION: u32 = 1;
/// A split must gain more than this (nats) to be used.
pub const MIN_GAIN: f64 = 1e-12;

/// One shapelet: where it was found and its samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shapelet {
    /// Series index in the training set (0-based).
    pub series: usize,
    /// First sample (0-based).
    pub start: usize,
    /// Samples.
    pub length: usize,
    /// The samples as in the training series, shape `[length]`.
    pub values: Vec<f64>,
}

impl Shapelet {
    /// Canonical squared distance to `series` (Eq. 1; `series.len() >= length`).
    #[must_use]
    pub fn distance_sq(&self, series: &[f64]) -> f64 {
        distance_sq(&znormalize(&self.values), series)
    }
}

/// A node's decision rule: a shapelet, or a logical combination of shapelets
/// (`shapelets[0] ops[0] shapelets[1] ops[1] …`, applied left to right).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The terms, at least one.
    pub shapelets: Vec<Shapelet>,
    /// The operators joining them, `shapelets.len() − 1` of them.
    pub ops: Vec<Op>,
    /// Distance `≤ threshold` goes left (Eq. 4).
    pub threshold: f64,
    /// Information gain of the split on the training series, nats (Eq. 3).
    pub gain: f64,
    /// Separation gap of the split on the training series.
    pub gap: f64,
}

impl Rule {
    /// The rule's distance to `series` (`series.len()` at least the longest term).
    #[must_use]
    pub fn distance(&self, series: &[f64]) -> f64 {
        let mut d2 = self.shapelets[0].distance_sq(series);
        for (op, s) in self.ops.iter().zip(&self.shapelets[1..]) {
            d2 = op.combine(d2, s.distance_sq(series));
        }
        d2.sqrt()
    }

    /// Whether `series` goes to the left child.
    #[must_use]
    pub fn goes_left(&self, series: &[f64]) -> bool {
        self.distance(series) <= self.threshold
    }
}

/// A node of the tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Node {
    /// An internal node.
    Split {
        /// The decision rule.
        rule: Rule,
        /// Node id of the left child (distance `≤ θ`).
        left: usize,
        /// Node id of the right child.
        right: usize,
        /// Training series per class at this node.
        counts: Vec<usize>,
    },
    /// A leaf.
    Leaf {
        /// The predicted class id.
        class: usize,
        /// Training series per class at this leaf.
        counts: Vec<usize>,
    },
}

/// A trained shapelet tree (the model file's contents).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShapeletTree {
    /// Always [`MODEL_FORMAT`].
    pub format: String,
    /// Always [`MODEL_VERSION`].
    pub version: u32,
    /// Label text per class id.
    pub classes: Vec<String>,
    /// Length of the training series.
    pub series_length: usize,
    /// The training options.
    pub config: ShapeletConfig,
    /// Nodes in preorder; node 0 is the root.
    pub nodes: Vec<Node>,
}

/// What training did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TrainStats {
    /// `"cpu"` or the GPU's name.
    pub device: String,
    /// Candidates at the root.
    pub root_candidates: u64,
    /// Candidates searched over all discoveries (logical terms included).
    pub candidates: u64,
    /// Discoveries run.
    pub discoveries: usize,
    /// Candidates measured canonically after the fast path.
    pub reevaluated: usize,
    /// Nodes of the tree.
    pub nodes: usize,
    /// Wall seconds of training.
    pub seconds: f64,
}

/// The class counts of `subset`.
fn class_counts(set: &TrainingSet, subset: &[usize]) -> Vec<usize> {
    let mut counts = vec![0; set.classes.len()];
    for &j in subset {
        counts[set.labels[j]] += 1;
    }
    counts
}

/// The majority class (ties: the smallest id).
fn majority(counts: &[usize]) -> usize {
    let mut best = 0;
    for (c, &k) in counts.iter().enumerate() {
        if k > counts[best] {
            best = c;
        }
    }
    best
}

fn shapelet_of(set: &TrainingSet, c: Candidate) -> Shapelet {
    Shapelet {
        series: c.series,
        start: c.start,
        length: c.length,
        values: set.series(c.series)[c.start..c.start + c.length].to_vec(),
    }
}

/// A node still to build: its series, its depth, and its parent's id and side (left = true).
type Pending = (Vec<usize>, usize, Option<(usize, bool)>);

/// Trains a tree on `set` with the fast path `search` (Algorithm 2).
///
/// # Errors
/// [`ShapeletError::Config`] for options that do not fit the set; the search's errors.
pub fn train_with(
    set: &TrainingSet,
    cfg: &ShapeletConfig,
    search: &mut dyn Search,
) -> Result<(ShapeletTree, TrainStats), ShapeletError> {
    cfg.validate(set.length)?;
    let started = Instant::now();
    let lengths = cfg.lengths();
    let mut stats = TrainStats {
        device: search.device(),
        root_candidates: cfg.candidates(set.len(), set.length),
        ..TrainStats::default()
    };
    let mut nodes: Vec<Node> = Vec::new();
    // Nodes to build, popped left first so ids come out in preorder.
    let mut stack: Vec<Pending> = vec![((0..set.len()).collect(), 0, None)];
    while let Some((subset, depth, parent)) = stack.pop() {
        let id = nodes.len();
        if let Some((p, is_left)) = parent
            && let Some(Node::Split { left, right, .. }) = nodes.get_mut(p)
        {
            *(if is_left { left } else { right }) = id;
        }
        let counts = class_counts(set, &subset);
        let leaf = Node::Leaf {
            class: majority(&counts),
            counts: counts.clone(),
        };
        let classes_here = counts.iter().filter(|&&k| k > 0).count();
        if classes_here <= 1 || subset.len() < 2 || cfg.max_depth.is_some_and(|d| depth >= d) {
            nodes.push(leaf);
            continue;
        }
        let problem = Problem::new(set, &subset, &lengths);
        let found = discover(&problem, search)?;
        stats.discoveries += 1;
        stats.candidates += found.candidates;
        stats.reevaluated += found.reevaluated;
        let Some(first) = found.best.filter(|b| b.gain > MIN_GAIN) else {
            nodes.push(leaf);
            continue;
        };
        let ext = logical::extend(&problem, &first, cfg.max_terms, search)?;
        stats.discoveries += ext.discoveries;
        stats.candidates += ext.candidates;
        stats.reevaluated += ext.reevaluated;
        let terms = ext.terms;
        let last: &Scored = terms.last().map_or(&first, |(_, s)| s);
        let rule = Rule {
            shapelets: std::iter::once(first.candidate)
                .chain(terms.iter().map(|(_, s)| s.candidate))
                .map(|c| shapelet_of(set, c))
                .collect(),
            ops: terms.iter().map(|(op, _)| *op).collect(),
            threshold: last.threshold,
            gain: last.gain,
            gap: last.gap,
        };
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for (k, &j) in subset.iter().enumerate() {
            if last.d2[k].sqrt() <= last.threshold {
                left.push(j);
            } else {
                right.push(j);
            }
        }
        debug_assert_eq!(left.len(), last.left);
        nodes.push(Node::Split {
            rule,
            left: usize::MAX,
            right: usize::MAX,
            counts,
        });
        stack.push((right, depth + 1, Some((id, false))));
        stack.push((left, depth + 1, Some((id, true))));
    }
    stats.nodes = nodes.len();
    stats.seconds = started.elapsed().as_secs_f64();
    Ok((
        ShapeletTree {
            format: MODEL_FORMAT.into(),
            version: MODEL_VERSION,
            classes: set.classes.clone(),
            series_length: set.length,
            config: cfg.clone(),
            nodes,
        },
        stats,
    ))
}

impl ShapeletTree {
    /// Checks the structure: format and version, children after their parent and in range,
    /// rules with one operator between consecutive terms, shapelets of `length ≥ 2` finite
    /// samples, finite thresholds, class ids and count vectors that fit `classes`.
    ///
    /// # Errors
    /// A message naming the node and the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.format != MODEL_FORMAT {
            return Err(format!(
                "`format` is {:?}, expected {MODEL_FORMAT:?}",
                self.format
            ));
        }
        if self.version != MODEL_VERSION {
            return Err(format!(
                "`version` {} is not supported (expected {MODEL_VERSION})",
                self.version
            ));
        }
        if self.classes.is_empty() {
            return Err("`classes` is empty".into());
        }
        if self.nodes.is_empty() {
            return Err("`nodes` is empty".into());
        }
        let c = self.classes.len();
        for (id, node) in self.nodes.iter().enumerate() {
            let at = |field: &str, what: String| Err(format!("`nodes[{id}].{field}`: {what}"));
            match node {
                Node::Leaf { class, counts } => {
                    if *class >= c {
                        return at("class", format!("{class} is not a class id (< {c})"));
                    }
                    if counts.len() != c {
                        return at(
                            "counts",
                            format!("{} entries for {c} classes", counts.len()),
                        );
                    }
                }
                Node::Split {
                    rule,
                    left,
                    right,
                    counts,
                } => {
                    for (field, child) in [("left", *left), ("right", *right)] {
                        if child <= id || child >= self.nodes.len() {
                            return at(
                                field,
                                format!(
                                    "node {child} must come after node {id} and exist ({} nodes)",
                                    self.nodes.len()
                                ),
                            );
                        }
                    }
                    if counts.len() != c {
                        return at(
                            "counts",
                            format!("{} entries for {c} classes", counts.len()),
                        );
                    }
                    if rule.shapelets.is_empty() {
                        return at("rule.shapelets", "is empty".into());
                    }
                    if rule.ops.len() + 1 != rule.shapelets.len() {
                        return at(
                            "rule.ops",
                            format!(
                                "{} operators for {} shapelets",
                                rule.ops.len(),
                                rule.shapelets.len()
                            ),
                        );
                    }
                    if !rule.threshold.is_finite() {
                        return at("rule.threshold", "is not finite".into());
                    }
                    for (k, s) in rule.shapelets.iter().enumerate() {
                        if s.values.len() != s.length || s.length < 2 {
                            return at(
                                &format!("rule.shapelets[{k}]"),
                                format!(
                                    "length {} with {} values (at least 2, equal)",
                                    s.length,
                                    s.values.len()
                                ),
                            );
                        }
                        if s.values.iter().any(|v| !v.is_finite()) {
                            return at(
                                &format!("rule.shapelets[{k}].values"),
                                "holds a non-finite value".into(),
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The longest shapelet (series to classify need at least this many samples; 0 for a
    /// single leaf).
    #[must_use]
    pub fn max_shapelet_length(&self) -> usize {
        self.rules()
            .flat_map(|(_, r)| r.shapelets.iter().map(|s| s.length))
            .max()
            .unwrap_or(0)
    }

    /// The split nodes' rules with their node ids, in preorder.
    pub fn rules(&self) -> impl Iterator<Item = (usize, &Rule)> {
        self.nodes.iter().enumerate().filter_map(|(id, n)| match n {
            Node::Split { rule, .. } => Some((id, rule)),
            Node::Leaf { .. } => None,
        })
    }

    /// The leaf `series` reaches. Requires a valid tree and a finite series of at least
    /// [`ShapeletTree::max_shapelet_length`] samples.
    fn leaf_of(&self, series: &[f64]) -> usize {
        let mut id = 0;
        // Children come after parents, so this takes at most `nodes.len()` steps.
        for _ in 0..self.nodes.len() {
            match &self.nodes[id] {
                Node::Leaf { .. } => return id,
                Node::Split {
                    rule, left, right, ..
                } => {
                    id = if rule.goes_left(series) {
                        *left
                    } else {
                        *right
                    }
                }
            }
        }
        id
    }

    /// The leaf node id and class id of one series.
    ///
    /// # Errors
    /// [`ShapeletError::NotFinite`], [`ShapeletError::SeriesTooShort`] naming `input` and
    /// `index`; [`ShapeletError::Model`] for an invalid tree.
    pub fn classify(
        &self,
        series: &[f64],
        input: &str,
        index: usize,
    ) -> Result<(usize, usize), ShapeletError> {
        self.validate().map_err(|message| ShapeletError::Model {
            path: "(in memory)".into(),
            message,
        })?;
        self.check_series(series, input, index)?;
        let leaf = self.leaf_of(series);
        match &self.nodes[leaf] {
            Node::Leaf { class, .. } => Ok((leaf, *class)),
            Node::Split { .. } => Err(ShapeletError::Model {
                path: "(in memory)".into(),
                message: "a path does not end in a leaf".into(),
            }),
        }
    }

    fn check_series(&self, series: &[f64], input: &str, index: usize) -> Result<(), ShapeletError> {
        check_finite(series, input, index)?;
        let needed = self.max_shapelet_length();
        if series.len() < needed {
            return Err(ShapeletError::SeriesTooShort {
                input: input.into(),
                index,
                len: series.len(),
                needed,
            });
        }
        Ok(())
    }

    /// The class id of every series (in parallel).
    ///
    /// # Errors
    /// As [`ShapeletTree::classify`], for the first bad series.
    pub fn predict(&self, series: &[Vec<f64>], input: &str) -> Result<Vec<usize>, ShapeletError> {
        use rayon::prelude::*;
        self.validate().map_err(|message| ShapeletError::Model {
            path: "(in memory)".into(),
            message,
        })?;
        for (index, s) in series.iter().enumerate() {
            self.check_series(s, input, index)?;
        }
        Ok(series
            .par_iter()
            .map(|s| match &self.nodes[self.leaf_of(s)] {
                Node::Leaf { class, .. } => *class,
                Node::Split { .. } => 0,
            })
            .collect())
    }

    /// The fraction of `series` whose predicted label equals `labels` (a label the model
    /// never saw counts as wrong).
    ///
    /// # Errors
    /// [`ShapeletError::LabelCount`] and those of [`ShapeletTree::predict`].
    pub fn accuracy(
        &self,
        series: &[Vec<f64>],
        labels: &[String],
        input: &str,
    ) -> Result<f64, ShapeletError> {
        if labels.len() != series.len() {
            return Err(ShapeletError::LabelCount {
                input: input.into(),
                labels: labels.len(),
                series: series.len(),
            });
        }
        if series.is_empty() {
            return Ok(0.0);
        }
        let predicted = self.predict(series, input)?;
        let right = predicted
            .iter()
            .zip(labels)
            .filter(|&(&c, l)| self.classes[c] == *l)
            .count();
        Ok(right as f64 / series.len() as f64)
    }

    /// Writes the model as JSON.
    ///
    /// # Errors
    /// [`ShapeletError::Model`] naming `path` when it cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), ShapeletError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| ShapeletError::Model {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        std::fs::write(path, text + "\n").map_err(|e| ShapeletError::Model {
            path: path.display().to_string(),
            message: format!("cannot write the file: {e}"),
        })
    }

    /// Reads and validates a model written by [`ShapeletTree::save`].
    ///
    /// # Errors
    /// [`ShapeletError::Model`] naming `path`: unreadable, not JSON of this schema, or not a
    /// valid tree ([`ShapeletTree::validate`]).
    pub fn load(path: &Path) -> Result<Self, ShapeletError> {
        let err = |message: String| ShapeletError::Model {
            path: path.display().to_string(),
            message,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| err(format!("cannot read the file: {e}")))?;
        let tree: Self = serde_json::from_str(&text).map_err(|e| err(e.to_string()))?;
        tree.validate().map_err(err)?;
        Ok(tree)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majority_ties_go_to_the_smaller_id() {
        assert_eq!(majority(&[2, 3, 3]), 1);
        assert_eq!(majority(&[0, 0]), 0);
    }

    #[test]
    fn validation_names_the_field() {
        let mut t = ShapeletTree {
            format: MODEL_FORMAT.into(),
            version: MODEL_VERSION,
            classes: vec!["a".into(), "b".into()],
            series_length: 10,
            config: ShapeletConfig::new(2, 5),
            nodes: vec![
                Node::Split {
                    rule: Rule {
                        shapelets: vec![Shapelet {
                            series: 0,
                            start: 0,
                            length: 3,
                            values: vec![1.0, 2.0, 3.0],
                        }],
                        ops: vec![],
                        threshold: 0.5,
                        gain: 0.1,
                        gap: 0.2,
                    },
                    left: 1,
                    right: 2,
                    counts: vec![1, 1],
                },
                Node::Leaf {
                    class: 0,
                    counts: vec![1, 0],
                },
                Node::Leaf {
                    class: 1,
                    counts: vec![0, 1],
                },
            ],
        };
        assert!(t.validate().is_ok());
        assert_eq!(t.max_shapelet_length(), 3);
        let (_, class) = t.classify(&[1.0, 2.0, 3.0, 0.0], "x", 0).unwrap();
        assert_eq!(class, 0);
        assert!(matches!(
            t.classify(&[1.0, 2.0], "x", 4),
            Err(ShapeletError::SeriesTooShort { index: 4, .. })
        ));
        if let Node::Split { left, .. } = &mut t.nodes[0] {
            *left = 0;
        }
        assert!(t.validate().unwrap_err().contains("`nodes[0].left`"));
        let e = t.classify(&[1.0, 2.0, 3.0], "x", 0).unwrap_err();
        assert!(matches!(e, ShapeletError::Model { .. }));
    }
}
