//! Soft-DTW barycenters of a real UCR problem, and nearest-barycenter classification.
//!
//! Reads the bundled GunPoint splits (x coordinate of an actor's hand drawing a gun or
//! pointing, 150 video frames per motion; 50 training and 150 test motions, labels `1`/`2`;
//! `fixtures/PROVENANCE.md`), computes one soft-DTW barycenter per class of the training split
//! (`synfire::softdtw::barycenter`, or `softdtw::gpu::barycenter` on a GPU worker; L-BFGS), then labels every test motion by the
//! barycenter of smallest soft-DTW divergence (`pairwise`, `Measure::Divergence`).
//!
//! ```sh
//! cargo run --release --example softdtw
//! ```
//!
//! Input: series of shape `[150]` (one channel; the archive's values). Soft-DTW's cost is the
//! squared difference, so `gamma` and the values printed are in squared input units. With
//! `DeviceChoice::Auto` the gradients and divergences are computed on the GPU (f32) when one
//! is usable, else on the CPU (f64).

use std::path::Path;

use anyhow::{Context, Result};
use synfire::softdtw::{BarycenterOptions, Measure, Options, Series, barycenter, gpu, pairwise};
use synfire::{DeviceChoice, read_dataset};

fn main() -> Result<()> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/ucr/GunPoint");
    let train = read_dataset(Path::new(&format!("{dir}/GunPoint_TRAIN.ts")))?;
    let test = read_dataset(Path::new(&format!("{dir}/GunPoint_TEST.ts")))?;
    let train_labels = train.labels.context("GunPoint_TRAIN is labelled")?;
    let test_labels = test.labels.context("GunPoint_TEST is labelled")?;

    let worker = gpu::worker_on(DeviceChoice::Auto)?;
    // Smoothing, squared input units: small values approach DTW (and take more iterations).
    let gamma = 0.1;
    let mut classes: Vec<String> = train_labels.clone();
    classes.sort();
    classes.dedup();
    let mut centers = Vec::new();
    for class in &classes {
        let members: Vec<Series> = train
            .series
            .iter()
            .zip(&train_labels)
            .filter(|(_, l)| *l == class)
            .map(|(s, _)| s.clone())
            .collect();
        let opts = BarycenterOptions::new(gamma);
        let b = match &worker {
            Some(w) => gpu::barycenter(w, &members, &opts)?,
            None => barycenter(&members, &opts)?,
        };
        println!(
            "class {class}: barycenter of {} series, objective {:.3} -> {:.3} in {} iterations ({:?})",
            members.len(),
            b.objective[0],
            b.objective[b.objective.len() - 1],
            b.iterations,
            b.stop
        );
        centers.push(b.series);
    }

    let opts = Options::new(gamma);
    let divergences = match &worker {
        Some(w) => gpu::pairwise(w, &test.series, &centers, &opts, Measure::Divergence)?,
        None => pairwise(&test.series, &centers, &opts, Measure::Divergence)?,
    };
    let correct = divergences
        .iter()
        .zip(&test_labels)
        .filter(|(row, label)| {
            let nearest = (0..row.len()).min_by(|&a, &b| row[a].total_cmp(&row[b]));
            nearest.is_some_and(|c| classes[c] == **label)
        })
        .count();
    println!(
        "nearest-barycenter accuracy on {} test series: {:.3} (on the {})",
        test_labels.len(),
        correct as f64 / test_labels.len() as f64,
        if worker.is_some() { "GPU" } else { "CPU" }
    );
    Ok(())
}
