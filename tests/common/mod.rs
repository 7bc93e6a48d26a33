//! Helpers shared by the integration tests (`mod common;` in each test crate; each crate uses
//! some of them, hence `dead_code` is allowed).
#![allow(dead_code)]

pub mod live;

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the binary with `args`, logging at the default level and without colours.
pub fn synfire<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(args)
        .env_remove("SYNFIRE_LOG")
        .env("NO_COLOR", "1")
        .output()
        .expect("the synfire binary runs")
}

/// True when a GPU is usable. Without one, prints why `test` skips its GPU part and returns
/// false, or fails when `SYNFIRE_REQUIRE_GPU=1` (the GPU host's runs).
pub fn gpu_or_skip(test: &str) -> bool {
    match synfire::device::probe() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                std::env::var("SYNFIRE_REQUIRE_GPU").as_deref() != Ok("1"),
                "{test}: SYNFIRE_REQUIRE_GPU=1 but no GPU is usable: {e}"
            );
            eprintln!("{test}: skipped on the GPU: {e}");
            false
        }
    }
}

/// The bundled real recording A2929-200711 (NWB, 15 units, 1,200 s).
pub fn a2929() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/spikes/A2929-200711/A2929-200711.nwb")
}

/// A free loopback TCP port (bound, then released for the test to use).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The stream of `times` (seconds, sorted) and `types` (`0..k`, labelled `u0`, `u1`, …).
///
/// # Panics
/// On unsorted times or a type outside `0..k`.
pub fn stream(times: &[f64], types: &[u32], k: u32) -> synfire::event::EventStream {
    use synfire::event::{Alphabet, EventStream, EventType, Ordering};
    let alphabet = Alphabet::from_labels((0..k).map(|i| format!("u{i}"))).unwrap();
    EventStream::new(
        times.to_vec(),
        types.iter().map(|&t| EventType(t)).collect(),
        alphabet,
        Ordering::RequireSorted,
    )
    .unwrap()
}

/// The bundled UCR data sets as `(training file, test file)`, relative to the crate root:
/// Coffee, ECG200, GunPoint and ItalyPowerDemand (`fixtures/ucr/*/PROVENANCE.txt`).
pub const UCR_FIXTURES: [(&str, &str); 4] = [
    (
        "fixtures/ucr/Coffee/Coffee_TRAIN.txt",
        "fixtures/ucr/Coffee/Coffee_TEST.txt",
    ),
    (
        "fixtures/ucr/ECG200/ECG200_TRAIN.tsv",
        "fixtures/ucr/ECG200/ECG200_TEST.tsv",
    ),
    (
        "fixtures/ucr/GunPoint/GunPoint_TRAIN.ts",
        "fixtures/ucr/GunPoint/GunPoint_TEST.ts",
    ),
    (
        "fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts",
        "fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TEST.ts",
    ),
];

/// 20 units for 30 s of the dense generator (seed 5, median rate 8 Hz) with one embedded chain
/// `u0 → u1 → u2` (delays 3–4 ms): at 0–5 and 5–10 ms and a minimum count of 12, frequent
/// episodes at three levels, surrogates fast to mine, and a `spectrum` test with significant
/// and non-significant episodes (`tests/significance_split.rs`, `tests/significance_gpu.rs`).
pub fn chain_recording() -> synfire::event::EventStream {
    use synfire::synth::dense::{DenseParams, generate_dense};
    use synfire::synth::sym26::Chain;
    let mut p = DenseParams::neuropixels(5);
    p.units = 20;
    p.duration_s = 30.0;
    p.rate_median_hz = 8.0;
    p.sync_pairs = Vec::new();
    p.chains = vec![Chain {
        neurons: vec![0, 1, 2],
        delay_s: (0.003, 0.004),
    }];
    generate_dense(&p).unwrap().0
}
