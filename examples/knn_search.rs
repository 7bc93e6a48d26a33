//! Exact k-nearest-neighbour search (SING): index a labelled collection, query it, classify.
//!
//! Builds an iSAX index of the bundled UCR ECG200 training split (100 heartbeats of 96
//! samples, labels -1 and 1; `fixtures/PROVENANCE.md`), answers the exact 3 nearest
//! neighbours of each of the 100 test heartbeats with a `synfire::search::Searcher`, and
//! reports the accuracy of the 1-nearest-neighbour label.
//!
//! ```sh
//! cargo run --release --example knn_search
//! ```
//!
//! Input: series of shape `[96]` in the archive's raw units; the index z-normalises every
//! series and query, so distances are Euclidean between z-normalised series (unitless).
//! Neighbour ids are series numbers of the training split. `DeviceChoice::Auto` computes the
//! lower bounds on the GPU when one is usable, else on the CPU; the answers are identical.

use anyhow::{Context, Result};
use synfire::search::{BuildOptions, Collection, QueryOptions};
use synfire::{DeviceChoice, Index, Searcher, read_dataset};

fn main() -> Result<()> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/ucr/ECG200");
    let train = read_dataset(format!("{dir}/ECG200_TRAIN.tsv").as_ref())?;
    let test = read_dataset(format!("{dir}/ECG200_TEST.tsv").as_ref())?;
    let train_labels = train.labels.as_ref().context("ECG200_TRAIN has labels")?;
    let test_labels = test.labels.as_ref().context("ECG200_TEST has labels")?;

    let collection = Collection::from_dataset("ECG200_TRAIN", &train)?;
    let index = Index::build(&collection, BuildOptions::default())?;
    println!(
        "index: {} series of length {}",
        index.count(),
        index.series_len()
    );

    let mut searcher = Searcher::new(&index, DeviceChoice::Auto, QueryOptions::default())?;
    let mut correct = 0;
    for (q, series) in test.series.iter().enumerate() {
        let answer = searcher.knn(q, &series.values, 3)?;
        let nearest = answer.neighbors[0];
        if train_labels[nearest.id as usize] == test_labels[q] {
            correct += 1;
        }
        if q < 3 {
            let ids: Vec<String> = answer
                .neighbors
                .iter()
                .map(|n| format!("{} ({:.3})", n.id, n.distance))
                .collect();
            println!("query {q} (label {}): {}", test_labels[q], ids.join(", "));
        }
    }
    println!(
        "1-NN accuracy on {} test series: {:.3} (lower bounds on the {})",
        test.len(),
        f64::from(correct) / test.len() as f64,
        searcher.device()
    );
    Ok(())
}
