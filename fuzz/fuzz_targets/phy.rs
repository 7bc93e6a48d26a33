//! phy/Kilosort folders (`synfire::ingest::phy::read_phy`): the input layout is
//! `synfire_fuzz::PhyInput` (options, then `spike_times.npy`, `spike_clusters.npy`,
//! `params.py`, the cluster TSVs as length-prefixed files), written to a scratch folder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use synfire::ingest::phy::read_phy;
use synfire_fuzz::{PhyInput, Scratch, check_stream};

fuzz_target!(|data: &[u8]| {
    let Some(input) = PhyInput::parse(data) else {
        return;
    };
    let dir = Scratch::folder(&input.files);
    let read = read_phy(&dir.path, &input.options);
    synfire_fuzz::debug(|| synfire_fuzz::outcome(&read));
    let Ok(rec) = read else {
        return;
    };
    check_stream(&rec.stream);
    assert!(rec.sample_rate_hz.is_finite() && rec.sample_rate_hz > 0.0);
    let kept: usize = rec
        .clusters
        .iter()
        .filter(|c| c.kept)
        .map(|c| c.spikes)
        .sum();
    let dropped: usize = rec
        .clusters
        .iter()
        .filter(|c| !c.kept)
        .map(|c| c.spikes)
        .sum();
    assert_eq!(kept, rec.stream.len());
    assert_eq!(dropped, rec.dropped_spikes);
});
