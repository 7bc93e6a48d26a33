//! Motif discovery against the brute-force oracle: CPU MK, CPU matrix profile and (where a
//! GPU exists) GPU MK and the GPU matrix profile must return the same pairs, best first, with
//! distances within 1e-6 relative, on random walks, series with NaN and constant runs, the
//! MIT-BIH ECG and the A2929 head-direction series. GPU variants print why and skip without a
//! GPU, and fail instead when `SYNFIRE_REQUIRE_GPU=1`.

mod common;

use std::path::PathBuf;

use proptest::prelude::*;
use synfire::device::DeviceChoice;
use synfire::motif::{MethodChoice, MotifConfig, MotifResult, find_motifs};
use synfire::series::read_series;

fn fixture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    if p.exists() { p } else { PathBuf::from(rel) }
        .to_string_lossy()
        .into_owned()
}

fn run(x: &[f64], cfg: &MotifConfig, method: MethodChoice, device: DeviceChoice) -> MotifResult {
    let cfg = MotifConfig {
        method,
        ..cfg.clone()
    };
    find_motifs(x, &cfg, device).unwrap()
}

/// Same pairs in the same order, distances within 1e-6 relative.
fn assert_same(got: &MotifResult, want: &MotifResult, what: &str) {
    assert_eq!(
        got.motifs.len(),
        want.motifs.len(),
        "{what}: {:?} vs {:?}",
        got.motifs,
        want.motifs
    );
    for (g, w) in got.motifs.iter().zip(&want.motifs) {
        assert_eq!(
            (g.i, g.j),
            (w.i, w.j),
            "{what}: {:?} vs {:?}",
            got.motifs,
            want.motifs
        );
        let tol = 1e-6 * w.distance.max(1e-12);
        assert!(
            (g.distance - w.distance).abs() <= tol,
            "{what}: distance {} vs {}",
            g.distance,
            w.distance
        );
    }
}

/// Every CPU path (and the GPU paths when `gpu`) against `oracle`.
fn check_all(x: &[f64], cfg: &MotifConfig, oracle: &MotifResult, gpu: bool, what: &str) {
    for method in [
        MethodChoice::ProjectionJoin,
        MethodChoice::Mk,
        MethodChoice::MatrixProfile,
        MethodChoice::Auto,
    ] {
        let got = run(x, cfg, method, DeviceChoice::Cpu);
        assert_same(&got, oracle, &format!("{what}: CPU {method:?}"));
        if gpu {
            let got = run(x, cfg, method, DeviceChoice::Gpu);
            assert_same(&got, oracle, &format!("{what}: GPU {method:?}"));
        }
    }
}

fn brute(x: &[f64], cfg: &MotifConfig) -> MotifResult {
    run(x, cfg, MethodChoice::BruteForce, DeviceChoice::Cpu)
}

fn check_random_walks(gpu: bool) {
    for (seed, n, m, k) in [
        (1, 800, 16, 3),
        (2, 2000, 50, 2),
        (3, 1500, 8, 4),
        (4, 3000, 100, 1),
    ] {
        let x = synfire::synth::random_walk(n, seed);
        let mut cfg = MotifConfig::new(m);
        cfg.top_k = k;
        cfg.seed = seed;
        let oracle = brute(&x, &cfg);
        assert_eq!(oracle.motifs.len(), k);
        for w in oracle.motifs.windows(2) {
            assert!(w[0].distance <= w[1].distance);
        }
        check_all(
            &x,
            &cfg,
            &oracle,
            gpu,
            &format!("random walk seed {seed} n {n} m {m}"),
        );
    }
}

#[test]
fn random_walks_cpu() {
    check_random_walks(false);
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn random_walks_gpu() {
    if common::gpu_or_skip("random_walks_gpu") {
        check_random_walks(true);
    }
}

fn check_nan_and_constant(gpu: bool) {
    let mut x = synfire::synth::random_walk(1200, 9);
    x[100..140].iter_mut().for_each(|v| *v = 3.0); // constant run: pairs inside it tie at 0
    x[500] = f64::NAN;
    x[900..905].iter_mut().for_each(|v| *v = f64::INFINITY);
    let mut cfg = MotifConfig::new(12);
    cfg.top_k = 3;
    let oracle = brute(&x, &cfg);
    // The constant run holds 29 constant subsequences; the first pair outside the exclusion
    // zone (3) is (100, 104), at distance 0.
    assert_eq!(
        (
            oracle.motifs[0].i,
            oracle.motifs[0].j,
            oracle.motifs[0].distance
        ),
        (100, 104, 0.0)
    );
    for m in &oracle.motifs {
        assert!(m.distance.is_finite());
        for s in [m.i, m.j] {
            assert!(
                !(489..=500).contains(&s) && !(889..=904).contains(&s),
                "{m:?} spans a NaN"
            );
        }
    }
    check_all(&x, &cfg, &oracle, gpu, "NaN and constant run");
    // All constant: the motif is (0, exclusion + 1) at distance 0.
    let flat = vec![7.5; 300];
    let cfg = MotifConfig::new(20);
    let r = run(&flat, &cfg, MethodChoice::Auto, DeviceChoice::Cpu);
    assert_eq!(
        (r.motifs[0].i, r.motifs[0].j, r.motifs[0].distance),
        (0, 6, 0.0)
    );
    // All NaN: no motif, no panic.
    let nan = vec![f64::NAN; 300];
    let r = run(&nan, &cfg, MethodChoice::Auto, DeviceChoice::Cpu);
    assert!(r.motifs.is_empty());
}

#[test]
fn nan_and_constant_cpu() {
    check_nan_and_constant(false);
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn nan_and_constant_gpu() {
    if common::gpu_or_skip("nan_and_constant_gpu") {
        check_nan_and_constant(true);
    }
}

fn check_real(gpu: bool) {
    let ecg = read_series(&fixture("fixtures/sensors/mitbih-208-ecg/ecg.npy")).unwrap();
    assert_eq!(ecg.len(), 108_000);
    // Brute force on the first 8,000 samples (22 s of ECG); all paths must agree.
    let part = &ecg[..8_000];
    let mut cfg = MotifConfig::new(100);
    cfg.top_k = 2;
    let oracle = brute(part, &cfg);
    check_all(part, &cfg, &oracle, gpu, "ECG 8,000 samples");
    let hd = read_series(&format!(
        "{}:/acquisition/CompassDirection/rz",
        fixture("fixtures/spikes/A2929-200711/A2929-200711.nwb")
    ))
    .unwrap();
    let part = &hd[..hd.len().min(6_000)];
    let mut cfg = MotifConfig::new(64);
    cfg.top_k = 2;
    let oracle = brute(part, &cfg);
    check_all(part, &cfg, &oracle, gpu, "head direction");
}

#[test]
fn real_series_cpu() {
    check_real(false);
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn real_series_gpu() {
    if common::gpu_or_skip("real_series_gpu") {
        check_real(true);
        // The whole ECG: the CPU matrix profile is the reference (brute force would take
        // minutes); GPU MK and the GPU matrix profile must match it.
        let ecg = read_series(&fixture("fixtures/sensors/mitbih-208-ecg/ecg.npy")).unwrap();
        let mut cfg = MotifConfig::new(100);
        cfg.top_k = 3;
        let want = run(&ecg, &cfg, MethodChoice::MatrixProfile, DeviceChoice::Cpu);
        for method in [
            MethodChoice::ProjectionJoin,
            MethodChoice::Mk,
            MethodChoice::MatrixProfile,
            MethodChoice::Auto,
        ] {
            let got = run(&ecg, &cfg, method, DeviceChoice::Gpu);
            assert_same(&got, &want, &format!("whole ECG: GPU {method:?}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Small random series (walks, noise, repeated values, NaN) in every configuration.
    #[test]
    fn cpu_paths_equal_brute_force(
        seed in 0u64..1000,
        n in 30usize..260,
        m in 2usize..24,
        denom in 1usize..6,
        k in 1usize..4,
        quantise in any::<bool>(),
        nan_at in proptest::option::of(0usize..260),
    ) {
        prop_assume!(m < n);
        let mut x = synfire::synth::random_walk(n, seed);
        if quantise {
            x.iter_mut().for_each(|v| *v = v.round()); // ties and flat stretches
        }
        if let Some(p) = nan_at.filter(|&p| p < n) {
            x[p] = f64::NAN;
        }
        let mut cfg = MotifConfig::new(m);
        cfg.exclusion = synfire::motif::default_exclusion(m, denom);
        cfg.top_k = k;
        cfg.seed = seed;
        if synfire::motif::validate(n, &cfg).is_err() {
            return Ok(());
        }
        let oracle = brute(&x, &cfg);
        for method in [MethodChoice::ProjectionJoin, MethodChoice::Mk, MethodChoice::MatrixProfile] {
            let got = run(&x, &cfg, method, DeviceChoice::Cpu);
            assert_same(&got, &oracle, &format!("{method:?}"));
        }
    }
}

/// A periodic series repeats every subsequence exactly (up to rounding) many times: the
/// projection join's bounds cannot separate the near-ties, and every tie must still be
/// measured so the smallest `(i, j)` wins.
fn check_periodic(gpu: bool) {
    let x: Vec<f64> = (0..3000)
        .map(|t| (t as f64 * std::f64::consts::TAU / 37.0).sin() + 0.25 * (t as f64 / 5.0).cos())
        .collect();
    let mut cfg = MotifConfig::new(50);
    cfg.top_k = 2;
    let oracle = brute(&x, &cfg);
    check_all(&x, &cfg, &oracle, gpu, "periodic");
}

#[test]
fn periodic_cpu() {
    check_periodic(false);
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn periodic_gpu() {
    if common::gpu_or_skip("periodic_gpu") {
        check_periodic(true);
    }
}

#[test]
fn bad_input_is_an_error() {
    let x = synfire::synth::random_walk(50, 1);
    let e = find_motifs(&x, &MotifConfig::new(60), DeviceChoice::Cpu).unwrap_err();
    assert!(e.to_string().contains("50 samples"), "{e}");
    let e = find_motifs(&x, &MotifConfig::new(1), DeviceChoice::Cpu).unwrap_err();
    assert!(e.to_string().contains("m = 1"), "{e}");
}
