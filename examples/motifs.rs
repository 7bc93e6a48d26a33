//! Exact motifs of a real ECG: the closest pairs of one-second stretches in five minutes.
//!
//! Reads the bundled MIT-BIH record 208, lead MLII (108,000 samples at 360 Hz, raw ADC counts;
//! `fixtures/PROVENANCE.md`) and finds its top-3 non-overlapping motifs of length `m = 360`
//! samples (1 s, about one heartbeat) with `synfire::motif::find_motifs`.
//!
//! ```sh
//! cargo run --release --example motifs
//! ```
//!
//! Input: shape `[108000]`, ADC counts (millivolts would be `(raw − 1024) / 200`; the motif
//! distance is between z-normalised subsequences, so the units do not matter). Output: start
//! samples `i < j` (and seconds) of each pair and their z-normalised Euclidean distance, in
//! `[0, 2√m]`. `DeviceChoice::Auto` searches on the GPU when one is usable, else on the CPU;
//! every path returns the same pairs.

use anyhow::Result;
use synfire::{DeviceChoice, MotifConfig, find_motifs};

/// Sampling rate of the record, Hz.
const RATE_HZ: f64 = 360.0;

fn main() -> Result<()> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/sensors/mitbih-208-ecg/ecg.npy"
    );
    let ecg = synfire::series::read_series(path)?;
    println!(
        "{} samples ({:.0} s at {RATE_HZ} Hz)",
        ecg.len(),
        ecg.len() as f64 / RATE_HZ
    );

    let mut config = MotifConfig::new(360); // exclusion zone ceil(m / 4) = 90 samples
    config.top_k = 3;
    let result = find_motifs(&ecg, &config, DeviceChoice::Auto)?;

    println!(
        "m = {}, exclusion = {}, path {} on the {}, {:.2} s",
        result.m,
        result.exclusion,
        result.method.as_str(),
        result.device,
        result.stats.seconds
    );
    for (k, motif) in result.motifs.iter().enumerate() {
        println!(
            "motif {}: i = {} ({:.2} s), j = {} ({:.2} s), distance {:.4}",
            k + 1,
            motif.i,
            motif.i as f64 / RATE_HZ,
            motif.j,
            motif.j as f64 / RATE_HZ,
            motif.distance
        );
    }
    Ok(())
}
