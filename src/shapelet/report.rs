//! The JSON document of `synfire shapelet --format json` (`docs/shapelet.md`).
//!
//! ```json
//! {"classes": ["1", "2"], "device": "cpu", "series": 50, "series_length": 150,
//!  "min_length": 2, "max_length": 150, "step": 1, "max_terms": 1, "max_depth": null,
//!  "shapelets": [{"node": 0, "depth": 0, "series": 3, "start": 40, "length": 38,
//!                 "threshold": 0.41, "gain": 0.69, "gap": 0.52}],
//!  "tree": {"node": 0, "shapelet": 0, "counts": [24, 26],
//!           "left": {"node": 1, "label": "1", "counts": [24, 0]},
//!           "right": {"node": 2, "label": "2", "counts": [0, 26]}},
//!  "train_accuracy": 1.0, "test_accuracy": 0.92,
//!  "stats": {"device": "cpu", "root_candidates": 565250, ...}}
//! ```
//!
//! All indices are 0-based; `series` is the index in the training file. A logical rule adds
//! `"terms": [{"op": "and", "series", "start", "length"}]` to its shapelet entry; its
//! `threshold`, `gain` and `gap` are the whole rule's.

use serde::Serialize;
use serde_json::{Value, json};

use super::discovery::Op;
use super::tree::{Node, ShapeletTree, TrainStats};

/// A further term of a logical rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Term {
    /// How it joins the rule.
    pub op: Op,
    /// Series index in the training set.
    pub series: usize,
    /// First sample.
    pub start: usize,
    /// Samples.
    pub length: usize,
}

/// One split node's shapelet.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShapeletEntry {
    /// Node id (preorder).
    pub node: usize,
    /// Depth of the node (root = 0).
    pub depth: usize,
    /// Series index in the training set.
    pub series: usize,
    /// First sample.
    pub start: usize,
    /// Samples.
    pub length: usize,
    /// Distance `≤ threshold` goes left.
    pub threshold: f64,
    /// Information gain, nats.
    pub gain: f64,
    /// Separation gap.
    pub gap: f64,
    /// Further terms of a logical rule.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<Term>,
}

/// The document.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Label text per class id.
    pub classes: Vec<String>,
    /// `"cpu"` or the GPU's name.
    pub device: String,
    /// Training series.
    pub series: usize,
    /// Their length.
    pub series_length: usize,
    /// Shortest candidate length.
    pub min_length: usize,
    /// Longest candidate length.
    pub max_length: usize,
    /// Length step.
    pub step: usize,
    /// Terms per rule (1: plain shapelets).
    pub max_terms: usize,
    /// Depth limit.
    pub max_depth: Option<usize>,
    /// The split nodes' shapelets in preorder.
    pub shapelets: Vec<ShapeletEntry>,
    /// The tree, nested: split nodes `{"node", "shapelet", "counts", "left", "right"}`
    /// (`shapelet` indexes `shapelets`), leaves `{"node", "label", "counts"}`.
    pub tree: Value,
    /// Accuracy on the training series.
    pub train_accuracy: f64,
    /// Accuracy on the test series, when given.
    pub test_accuracy: Option<f64>,
    /// Work counters.
    pub stats: TrainStats,
}

impl Report {
    /// The document of a trained tree.
    #[must_use]
    pub fn new(
        tree: &ShapeletTree,
        stats: TrainStats,
        series: usize,
        train_accuracy: f64,
        test_accuracy: Option<f64>,
    ) -> Self {
        let depth = depths(tree);
        let shapelets: Vec<ShapeletEntry> = tree
            .rules()
            .map(|(id, r)| {
                let s = &r.shapelets[0];
                ShapeletEntry {
                    node: id,
                    depth: depth[id],
                    series: s.series,
                    start: s.start,
                    length: s.length,
                    threshold: r.threshold,
                    gain: r.gain,
                    gap: r.gap,
                    terms: r
                        .ops
                        .iter()
                        .zip(&r.shapelets[1..])
                        .map(|(&op, t)| Term {
                            op,
                            series: t.series,
                            start: t.start,
                            length: t.length,
                        })
                        .collect(),
                }
            })
            .collect();
        let index: Vec<Option<usize>> = {
            let mut v = vec![None; tree.nodes.len()];
            for (k, e) in shapelets.iter().enumerate() {
                v[e.node] = Some(k);
            }
            v
        };
        Self {
            classes: tree.classes.clone(),
            device: stats.device.clone(),
            series,
            series_length: tree.series_length,
            min_length: tree.config.min_length,
            max_length: tree.config.max_length,
            step: tree.config.step,
            max_terms: tree.config.max_terms,
            max_depth: tree.config.max_depth,
            shapelets,
            tree: nested(tree, 0, &index),
            train_accuracy,
            test_accuracy,
            stats,
        }
    }
}

/// Depth of every node (root = 0).
fn depths(tree: &ShapeletTree) -> Vec<usize> {
    let mut depth = vec![0; tree.nodes.len()];
    for (id, n) in tree.nodes.iter().enumerate() {
        if let Node::Split { left, right, .. } = n {
            let below = depth[id] + 1;
            for c in [*left, *right] {
                if let Some(d) = depth.get_mut(c) {
                    *d = below;
                }
            }
        }
    }
    depth
}

fn nested(tree: &ShapeletTree, id: usize, index: &[Option<usize>]) -> Value {
    match &tree.nodes[id] {
        Node::Leaf { class, counts } => {
            json!({"node": id, "label": tree.classes[*class], "counts": counts})
        }
        Node::Split {
            left,
            right,
            counts,
            ..
        } => json!({
            "node": id,
            "shapelet": index[id],
            "counts": counts,
            "left": nested(tree, *left, index),
            "right": nested(tree, *right, index),
        }),
    }
}
