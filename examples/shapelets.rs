//! A shapelet decision tree trained on a real UCR problem, and its test accuracy.
//!
//! Reads the bundled ItalyPowerDemand splits (electricity demand of Italy, 24 values per day;
//! the two classes are days from October to March and days from April to September; 67
//! training and 1,029 test days; `fixtures/PROVENANCE.md`), trains a tree with
//! `synfire::shapelet::train` on every candidate of length 3 to 24 samples, prints each
//! split's shapelet, and reports the training and test accuracy.
//!
//! ```sh
//! cargo run --release --example shapelets
//! ```
//!
//! Input: series of shape `[24]` (z-normalised demand, as the archive ships it), labels `1`/`2`.
//! A shapelet is `(series, start, length)` in the training split; distances are
//! length-normalised Euclidean distances between z-normalised subsequences, in `[0, 2]`;
//! gains are in nats. `DeviceChoice::Auto` trains on the GPU when one is usable, else on the
//! CPU; both pick the same shapelets.

use std::path::Path;

use anyhow::{Context, Result};
use synfire::{DeviceChoice, ShapeletConfig, TrainingSet, read_dataset, train};

/// The univariate series of a labelled UCR file and their labels.
fn read(path: &str) -> Result<(Vec<Vec<f64>>, Vec<String>)> {
    let data = read_dataset(Path::new(path))?;
    let labels = data.labels.context("the UCR splits are labelled")?;
    let series = data.series.into_iter().map(|s| s.values).collect();
    Ok((series, labels))
}

fn main() -> Result<()> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/ucr/ItalyPowerDemand");
    let (train_series, train_labels) = read(&format!("{dir}/ItalyPowerDemand_TRAIN.ts"))?;
    let (test_series, test_labels) = read(&format!("{dir}/ItalyPowerDemand_TEST.ts"))?;

    let set = TrainingSet::new(&train_series, &train_labels, "ItalyPowerDemand_TRAIN")?;
    let config = ShapeletConfig::new(3, 24);
    let (tree, stats) = train(&set, &config, DeviceChoice::Auto)?;
    println!(
        "{} series of length {}, {} candidates at the root, {} nodes, on the {}, {:.2} s",
        set.len(),
        set.length,
        stats.root_candidates,
        stats.nodes,
        stats.device,
        stats.seconds
    );
    for (node, rule) in tree.rules() {
        let s = &rule.shapelets[0];
        println!(
            "node {node}: shapelet (series {}, start {}, length {}), distance <= {:.4} goes left, gain {:.4}",
            s.series, s.start, s.length, rule.threshold, rule.gain
        );
    }
    let train_accuracy = tree.accuracy(&train_series, &train_labels, "train")?;
    let test_accuracy = tree.accuracy(&test_series, &test_labels, "test")?;
    println!("accuracy: train {train_accuracy:.4}, test {test_accuracy:.4}");
    Ok(())
}
