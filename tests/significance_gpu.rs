//! Significance with the surrogates mined and counted on the GPUs equals the CPU's, number for
//! number: the same surrogates (Philox, a pure function of seed and index), exact counts on
//! either back end, so the same statistics and p-values. Skipped without a GPU (fails without
//! one when `SYNFIRE_REQUIRE_GPU=1`).

mod common;
use std::path::{Path, PathBuf};

use synfire::device::DeviceChoice;
use synfire::episode::{GpuSettings, Interval, MinerConfig, Threshold, mine};
use synfire::event::Ordering;
use synfire::significance::{
    Correction, SignificanceConfig, test_episodes, test_episodes_on, test_episodes_with_gpu,
};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_surrogates_give_the_cpu_p_values() {
    if !common::gpu_or_skip("gpu_surrogates_give_the_cpu_p_values") {
        return;
    }
    let stream = synfire::read_spikes(
        &fixture("fixtures/spikes/A2929-200711/A2929-200711.nwb"),
        Ordering::RequireSorted,
    )
    .unwrap();
    // A lag-0 interval among them, so the kernels' equal-time rules are exercised too.
    let mut config = MinerConfig::new(
        Interval::parse_list("[0,0.001],(0.001,0.005],0.005-0.010").unwrap(),
        Threshold::MinCount(300),
    );
    config.max_level = 3;
    let data = mine(&stream, &config).unwrap();
    for (method, correction) in [
        ("dither:0.015", Correction::MaxT),
        ("isi-dither:0.015", Correction::Spectrum),
        ("shift:0.5", Correction::Holm),
    ] {
        let sig = SignificanceConfig {
            method: method.parse().unwrap(),
            n_surrogates: 9,
            alpha: 0.05,
            correction,
            seed: 11,
            test_top: Some(40),
            watch: None,
            trials: None,
        };
        let cpu = test_episodes(&stream, &config, &data, &sig).unwrap();
        let gpu = test_episodes_on(
            &stream,
            &config,
            &data,
            &sig,
            DeviceChoice::Gpu,
            &GpuSettings::default(),
        )
        .unwrap();
        assert!(!cpu.tests.is_empty(), "{method}");
        assert_eq!(gpu.tests, cpu.tests, "{method} {correction:?}");
        assert_eq!(gpu.surrogate_max, cpu.surrogate_max, "{method}");
        // A counter the caller lends (a pipeline stage's) gives the same again.
        let mut lent = synfire::episode::select_gpu(
            &stream,
            &config.intervals,
            DeviceChoice::Gpu,
            &GpuSettings::default(),
        )
        .unwrap()
        .expect("a GPU");
        let again = test_episodes_with_gpu(&stream, &config, &data, &sig, &mut lent).unwrap();
        assert_eq!(again.tests, cpu.tests, "{method} on a lent counter");
    }
}
