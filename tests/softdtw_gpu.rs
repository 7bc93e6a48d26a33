//! The GPU soft-DTW kernels against the f64 CPU reference: values within 1e-4 relative,
//! gradients within 1e-3 of the reference gradient's largest entry, for γ in {0.01, 0.1, 1,
//! 10}, on random walks (unequal lengths, 1 and 3 channels, bands, series longer than one
//! strip), on the real GunPoint series, and for one long pair (tiled kernel). Without a GPU
//! each test prints why and passes; with `SYNFIRE_REQUIRE_GPU=1` it fails instead.

mod common;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use synfire::series::{Series, read_dataset};
use synfire::softdtw::{self, Measure, Options, gpu};

fn worker_or_skip(test: &str) -> Option<synfire::device::SharedWorker> {
    if !common::gpu_or_skip(test) {
        return None;
    }
    Some(synfire::device::shared_worker(None).expect("a GPU was probed"))
}

fn walk(rng: &mut ChaCha8Rng, len: usize, dims: usize) -> Series {
    let mut acc = vec![0.0; dims];
    let mut values = Vec::with_capacity(len * dims);
    for _ in 0..len {
        for a in acc.iter_mut() {
            *a += rng.random_range(-0.5..0.5);
            values.push(*a);
        }
    }
    Series { dims, values }
}

fn set(
    rng: &mut ChaCha8Rng,
    count: usize,
    lens: std::ops::Range<usize>,
    dims: usize,
) -> Vec<Series> {
    (0..count)
        .map(|_| {
            let len = rng.random_range(lens.clone());
            walk(rng, len, dims)
        })
        .collect()
}

fn assert_values(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: count");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * w.abs().max(1.0),
            "{what}: value {k}: GPU {g}, CPU {w}"
        );
    }
}

fn assert_grad(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1e-12_f64, |m, v| m.max(v.abs()));
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-3 * scale,
            "{what}: entry {k}: GPU {g}, CPU {w} (largest |entry| {scale})"
        );
    }
}

const GAMMAS: [f64; 4] = [0.01, 0.1, 1.0, 10.0];

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn pairwise_values_and_gradients_match_cpu() {
    let Some(w) = worker_or_skip("pairwise_values_and_gradients_match_cpu") else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for (dims, lens) in [(1, 20..300), (3, 5..80), (1, 250..600)] {
        let a = set(&mut rng, 6, lens.clone(), dims);
        let b = set(&mut rng, 5, lens.clone(), dims);
        for gamma in GAMMAS {
            for band in [None, Some(lens.end)] {
                let opts = Options {
                    band,
                    ..Options::new(gamma)
                };
                let what = format!("dims {dims}, lengths {lens:?}, gamma {gamma}, band {band:?}");
                let cpu = softdtw::pairwise_gradient(&a, &b, &opts, Measure::SoftDtw).unwrap();
                let g = gpu::pairwise_gradient(&w, &a, &b, &opts, Measure::SoftDtw).unwrap();
                let v = gpu::pairwise(&w, &a, &b, &opts, Measure::SoftDtw).unwrap();
                assert_values(&v.concat(), &cpu.values.concat(), &what);
                assert_values(&g.values.concat(), &cpu.values.concat(), &what);
                for (i, (x, y)) in g.grad_a.iter().zip(&cpu.grad_a).enumerate() {
                    assert_grad(x, y, &format!("{what}: grad_a[{i}]"));
                }
                for (j, (x, y)) in g.grad_b.iter().zip(&cpu.grad_b).enumerate() {
                    assert_grad(x, y, &format!("{what}: grad_b[{j}]"));
                }
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn paired_and_divergence_match_cpu() {
    let Some(w) = worker_or_skip("paired_and_divergence_match_cpu") else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let a = set(&mut rng, 7, 30..140, 2);
    let b = set(&mut rng, 7, 30..140, 2);
    for gamma in GAMMAS {
        let opts = Options::new(gamma);
        for measure in [Measure::SoftDtw, Measure::Divergence] {
            let what = format!("gamma {gamma}, {measure:?}");
            let cpu = softdtw::paired_gradient(&a, &b, &opts, measure).unwrap();
            let g = gpu::paired_gradient(&w, &a, &b, &opts, measure).unwrap();
            let v = gpu::paired(&w, &a, &b, &opts, measure).unwrap();
            let want: Vec<f64> = cpu.iter().map(|c| c.value).collect();
            assert_values(&v, &want, &what);
            for (i, (x, y)) in g.iter().zip(&cpu).enumerate() {
                assert_values(&[x.value], &[y.value], &what);
                assert_grad(&x.dx, &y.dx, &format!("{what}: dx[{i}]"));
                assert_grad(&x.dy, &y.dy, &format!("{what}: dy[{i}]"));
            }
        }
        let cpu = softdtw::pairwise(&a, &b, &opts, Measure::Divergence).unwrap();
        let g = gpu::pairwise(&w, &a, &b, &opts, Measure::Divergence).unwrap();
        // Divergences are differences of values: compare against the values' scale.
        let scale = softdtw::pairwise(&a, &b, &opts, Measure::SoftDtw).unwrap();
        for ((x, y), s) in g.concat().iter().zip(cpu.concat()).zip(scale.concat()) {
            assert!(
                (x - y).abs() <= 2e-4 * s.abs().max(1.0),
                "divergence {x} vs {y}"
            );
        }
    }
}

/// Pairs like `synfire bench softdtw`'s (length-256 walks), one gradient per pair: at
/// γ = 0.01 the marginal path's forward values reach 10^5–10^6 base-2 units, and walks 100×
/// as steep push relevant cells beyond its fixed-point range onto the weights path; both must
/// hold the accuracy bound.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn benchmark_walks_at_small_gamma_match_cpu() {
    let Some(w) = worker_or_skip("benchmark_walks_at_small_gamma_match_cpu") else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    for (gamma, steep) in [(0.01, 1.0), (0.1, 1.0), (0.01, 100.0)] {
        let mut scaled = |count| {
            set(&mut rng, count, 256..257, 1)
                .into_iter()
                .map(|s| Series {
                    dims: 1,
                    values: s.values.iter().map(|v| v * steep).collect(),
                })
                .collect::<Vec<_>>()
        };
        let a = scaled(12);
        let b = scaled(12);
        let opts = Options::new(gamma);
        let what = format!("gamma {gamma}, walks x{steep}");
        let cpu = softdtw::paired_gradient(&a, &b, &opts, Measure::SoftDtw).unwrap();
        let g = gpu::paired_gradient(&w, &a, &b, &opts, Measure::SoftDtw).unwrap();
        for (i, (x, y)) in g.iter().zip(&cpu).enumerate() {
            assert_values(&[x.value], &[y.value], &what);
            assert_grad(&x.dx, &y.dx, &format!("{what}: dx[{i}]"));
            assert_grad(&x.dy, &y.dy, &format!("{what}: dy[{i}]"));
        }
    }
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gunpoint_matches_cpu() {
    let Some(w) = worker_or_skip("gunpoint_matches_cpu") else {
        return;
    };
    let d = read_dataset("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts".as_ref()).unwrap();
    let (a, b) = d.series.split_at(20);
    for gamma in GAMMAS {
        let opts = Options::new(gamma);
        let cpu = softdtw::pairwise_gradient(a, b, &opts, Measure::SoftDtw).unwrap();
        let g = gpu::pairwise_gradient(&w, a, b, &opts, Measure::SoftDtw).unwrap();
        assert_values(
            &g.values.concat(),
            &cpu.values.concat(),
            &format!("GunPoint, gamma {gamma}"),
        );
        for (x, y) in g.grad_a.iter().zip(&cpu.grad_a) {
            assert_grad(x, y, &format!("GunPoint grad_a, gamma {gamma}"));
        }
    }
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn long_pair_matches_cpu() {
    let Some(w) = worker_or_skip("long_pair_matches_cpu") else {
        return;
    };
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    for (n, m, band) in [
        (3000, 2500, None),
        (4096, 4096, Some(300)),
        (700, 1900, None),
    ] {
        let x = walk(&mut rng, n, 1);
        let y = walk(&mut rng, m, 1);
        for gamma in [0.1, 1.0] {
            let opts = Options {
                band,
                ..Options::new(gamma)
            };
            let cpu = softdtw::value(&x, &y, &opts).unwrap();
            let (v, _) = gpu::value_long(&w, &x, &y, &opts).unwrap();
            assert_values(
                &[v],
                &[cpu],
                &format!("{n} x {m}, gamma {gamma}, band {band:?}"),
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn bad_input_is_an_error_not_a_panic() {
    let Some(w) = worker_or_skip("bad_input_is_an_error_not_a_panic") else {
        return;
    };
    let a = vec![Series::univariate(vec![1.0, f64::NAN])];
    let b = vec![Series::univariate(vec![1.0])];
    let e = gpu::pairwise(&w, &a, &b, &Options::new(1.0), Measure::SoftDtw).unwrap_err();
    assert!(e.to_string().contains("a[0]"), "{e}");
    let big = vec![Series::univariate(vec![1e300])];
    let e = gpu::pairwise(&w, &big, &b, &Options::new(1.0), Measure::SoftDtw).unwrap_err();
    assert!(e.to_string().contains("f32"), "{e}");
    let e = gpu::pairwise(&w, &b, &b, &Options::new(0.0), Measure::SoftDtw).unwrap_err();
    assert!(e.to_string().contains("gamma"), "{e}");
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn barycenter_on_the_gpu_reaches_the_cpu_objective() {
    let Some(w) = worker_or_skip("barycenter_on_the_gpu_reaches_the_cpu_objective") else {
        return;
    };
    let d = read_dataset("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts".as_ref()).unwrap();
    let set: Vec<Series> = d.series.into_iter().take(12).collect();
    for gamma in [0.1, 1.0] {
        let mut opts = softdtw::BarycenterOptions::new(gamma);
        opts.max_iterations = 30;
        let cpu = softdtw::barycenter(&set, &opts).unwrap();
        let g = softdtw::gpu::barycenter(&w, &set, &opts).unwrap();
        let (fc, fg) = (*cpu.objective.last().unwrap(), *g.objective.last().unwrap());
        // Both minimise the same objective from the same start; the GPU's f32 gradients may
        // stop it at a slightly different point, never at a worse one by more than 1%.
        assert!(
            fg <= fc + 1e-2 * fc.abs().max(1.0),
            "gamma {gamma}: GPU objective {fg}, CPU {fc}"
        );
        // Re-evaluated in f64, the GPU's barycenter is as good as the CPU's.
        let eval = |z: &Series| -> f64 {
            set.iter()
                .map(|x| softdtw::value(z, x, &Options::new(gamma)).unwrap())
                .sum::<f64>()
                / set.len() as f64
        };
        let (ec, eg) = (eval(&cpu.series), eval(&g.series));
        assert!(
            eg <= ec + 1e-2 * ec.abs().max(1.0),
            "gamma {gamma}: f64 objective GPU {eg}, CPU {ec}"
        );
    }
}
