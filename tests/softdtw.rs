//! Soft-DTW against independent oracles: a naive full-matrix implementation of Cuturi &
//! Blondel's Algorithms 1 and 2 (padded matrices, column-major backward sweep, soft-min as
//! a log-sum-exp of negated arguments), central finite differences, and plain DTW; plus the
//! divergence's properties, checkpointing, bands, long pairs, batches and barycenters.

// The oracles index matrices as the paper writes them (R[i][j], 1-based); iterators would hide that.
#![allow(clippy::needless_range_loop)]

use std::num::NonZeroUsize;
use std::path::Path;

use proptest::prelude::*;
use synfire::series::read_dataset;
use synfire::softdtw::{
    Band, BarycenterOptions, Init, Measure, Options, Series, SoftDtwError, Stop, barycenter,
    divergence, divergence_gradient, gradient, paired, paired_gradient, pairwise,
    pairwise_gradient, stored_cells, value,
};

// ---------------------------------------------------------------------------------------
// Oracles

fn in_band(n: usize, m: usize, band: Option<usize>, i: usize, j: usize) -> bool {
    band.is_none_or(|w| {
        (i as i128 * m as i128 - j as i128 * n as i128).abs() <= w as i128 * n.min(m) as i128
    })
}

/// `−γ log Σ_k exp(−r_k/γ)` as `−γ (ν + log Σ exp(−r_k/γ − ν))`, `ν = max_k(−r_k/γ)`.
fn oracle_softmin(r: [f64; 3], gamma: f64) -> f64 {
    let neg: Vec<f64> = r.iter().map(|v| -v / gamma).collect();
    let nu = neg.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if nu == f64::NEG_INFINITY {
        return f64::INFINITY;
    }
    -gamma * (nu + neg.iter().map(|v| (v - nu).exp()).sum::<f64>().ln())
}

/// Naive soft-DTW: value, dx, dy (full (N+2)×(M+2) matrices, the paper's padding).
fn oracle(x: &Series, y: &Series, gamma: f64, band: Option<usize>) -> (f64, Vec<f64>, Vec<f64>) {
    let (n, m, dims) = (x.len(), y.len(), x.dims);
    let mut d = vec![vec![0.0; m + 2]; n + 2];
    for i in 1..=n {
        for j in 1..=m {
            d[i][j] = (0..dims)
                .map(|c| (x.values[(i - 1) * dims + c] - y.values[(j - 1) * dims + c]).powi(2))
                .sum();
        }
    }
    let inf = f64::INFINITY;
    let mut r = vec![vec![inf; m + 2]; n + 2];
    r[0][0] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            if in_band(n, m, band, i, j) {
                r[i][j] =
                    d[i][j] + oracle_softmin([r[i - 1][j - 1], r[i - 1][j], r[i][j - 1]], gamma);
            }
        }
    }
    let v = r[n][m];
    // Algorithm 2: R(·, M+1) = R(N+1, ·) = −∞, R(N+1, M+1) = R(N, M), E(N+1, M+1) = 1;
    // unreachable cells (+∞) get −∞ so that they pass no weight.
    let unreachable: Vec<Vec<bool>> = r
        .iter()
        .map(|row| row.iter().map(|v| *v == inf).collect())
        .collect();
    for (i, row) in r.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if *cell == inf || i == n + 1 || j == m + 1 {
                *cell = f64::NEG_INFINITY;
            }
        }
    }
    r[n + 1][m + 1] = v;
    let mut e = vec![vec![0.0; m + 2]; n + 2];
    e[n + 1][m + 1] = 1.0;
    for j in (1..=m).rev() {
        for i in (1..=n).rev() {
            if unreachable[i][j] {
                continue;
            }
            let a = ((r[i + 1][j] - r[i][j] - d[i + 1][j]) / gamma).exp();
            let b = ((r[i][j + 1] - r[i][j] - d[i][j + 1]) / gamma).exp();
            let c = ((r[i + 1][j + 1] - r[i][j] - d[i + 1][j + 1]) / gamma).exp();
            e[i][j] = e[i + 1][j] * a + e[i][j + 1] * b + e[i + 1][j + 1] * c;
        }
    }
    let mut dx = vec![0.0; n * dims];
    let mut dy = vec![0.0; m * dims];
    for i in 1..=n {
        for j in 1..=m {
            for c in 0..dims {
                let diff = x.values[(i - 1) * dims + c] - y.values[(j - 1) * dims + c];
                dx[(i - 1) * dims + c] += 2.0 * e[i][j] * diff;
                dy[(j - 1) * dims + c] -= 2.0 * e[i][j] * diff;
            }
        }
    }
    (v, dx, dy)
}

/// Plain DTW with the squared Euclidean cost (hard min).
fn dtw(x: &Series, y: &Series) -> f64 {
    let (n, m, dims) = (x.len(), y.len(), x.dims);
    let mut r = vec![vec![f64::INFINITY; m + 1]; n + 1];
    r[0][0] = 0.0;
    for i in 1..=n {
        for j in 1..=m {
            let d: f64 = (0..dims)
                .map(|c| (x.values[(i - 1) * dims + c] - y.values[(j - 1) * dims + c]).powi(2))
                .sum();
            r[i][j] = d + r[i - 1][j - 1].min(r[i - 1][j]).min(r[i][j - 1]);
        }
    }
    r[n][m]
}

fn close(a: f64, b: f64, rel: f64, abs: f64) -> bool {
    (a - b).abs() <= abs + rel * a.abs().max(b.abs())
}

fn assert_all_close(what: &str, got: &[f64], want: &[f64], rel: f64, abs: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(close(*g, *w, rel, abs), "{what}[{k}]: {g} vs {w}");
    }
}

// ---------------------------------------------------------------------------------------
// Generators

fn series_strategy(
    len: std::ops::RangeInclusive<usize>,
    dims: usize,
) -> impl Strategy<Value = Series> {
    len.prop_flat_map(move |n| {
        proptest::collection::vec(-3.0f64..3.0, n * dims)
            .prop_map(move |values| Series { dims, values })
    })
}

fn pair_strategy() -> impl Strategy<Value = (Series, Series)> {
    (1usize..=3)
        .prop_flat_map(|dims| (series_strategy(1..=12, dims), series_strategy(1..=12, dims)))
}

/// A deterministic smooth-ish series (sines plus a walk) for the larger tests.
fn wave(len: usize, dims: usize, phase: f64) -> Series {
    let mut walk = 0.0;
    let values = (0..len * dims)
        .map(|k| {
            let t = (k / dims) as f64;
            walk += ((k as f64 * 12.9898 + phase).sin() * 43758.5453).fract() * 0.1 - 0.05;
            (t * 0.05 + phase + (k % dims) as f64).sin() + walk
        })
        .collect();
    Series { dims, values }
}

// ---------------------------------------------------------------------------------------
// Properties against the oracles

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn value_and_gradient_match_the_naive_oracle(
        (x, y) in pair_strategy(),
        gamma in prop::sample::select(vec![0.01, 0.1, 1.0, 10.0]),
        band in prop::option::of(0usize..8),
    ) {
        let opts = Options { band, ..Options::new(gamma) };
        let (v, dx, dy) = oracle(&x, &y, gamma, band);
        let reachable = Band::new(x.len(), y.len(), band).check().is_ok();
        if !reachable {
            // The oracle finds no path either, and the API says so.
            prop_assert_eq!(v, f64::INFINITY);
            let narrow = matches!(value(&x, &y, &opts), Err(SoftDtwError::BandTooNarrow { .. }));
            prop_assert!(narrow);
            return Ok(());
        }
        let got = value(&x, &y, &opts).unwrap();
        prop_assert!(close(got, v, 1e-12, 1e-12), "value {} vs oracle {}", got, v);
        let g = gradient(&x, &y, &opts).unwrap();
        prop_assert_eq!(g.value, got);
        assert_all_close("dx", &g.dx, &dx, 1e-9, 1e-9);
        assert_all_close("dy", &g.dy, &dy, 1e-9, 1e-9);
    }

    #[test]
    fn checkpointed_backward_equals_full_backward(
        (x, y) in pair_strategy(),
        k in 1usize..14,
        gamma in 0.05f64..5.0,
    ) {
        let full = gradient(&x, &y, &Options::new(gamma)).unwrap();
        let opts = Options { checkpoint_every: NonZeroUsize::new(k), ..Options::new(gamma) };
        prop_assert_eq!(gradient(&x, &y, &opts).unwrap(), full);
    }

    #[test]
    fn divergence_is_zero_on_equal_series_and_nonnegative(
        (x, y) in pair_strategy(),
        gamma in prop::sample::select(vec![0.01, 0.1, 1.0, 10.0]),
    ) {
        let opts = Options::new(gamma);
        prop_assert_eq!(divergence(&x, &x, &opts).unwrap(), 0.0);
        let d = divergence(&x, &y, &opts).unwrap();
        let scale = value(&x, &y, &opts).unwrap().abs() + 1.0;
        prop_assert!(d >= -1e-12 * scale, "divergence {} < 0", d);
        // Symmetric up to rounding.
        let back = divergence(&y, &x, &opts).unwrap();
        prop_assert!(close(d, back, 1e-10, 1e-10));
    }

    #[test]
    fn small_gamma_approaches_dtw((x, y) in pair_strategy()) {
        let hard = dtw(&x, &y);
        for gamma in [1.0, 0.1, 1e-3, 1e-6] {
            let soft = value(&x, &y, &Options::new(gamma)).unwrap();
            // softmin ≤ min and softmin ≥ min − γ log 3, once per step of the path.
            let slack = gamma * 3f64.ln() * (x.len() + y.len() - 1) as f64;
            prop_assert!(soft <= hard * (1.0 + 1e-12) + 1e-12, "{} > dtw {}", soft, hard);
            prop_assert!(soft >= hard - slack - 1e-12, "{} < dtw {} - {}", soft, hard, slack);
        }
    }

    #[test]
    fn band_wider_than_both_lengths_equals_no_band((x, y) in pair_strategy(), gamma in 0.01f64..10.0) {
        let none = gradient(&x, &y, &Options::new(gamma)).unwrap();
        for w in [x.len().max(y.len()), usize::MAX] {
            prop_assert_eq!(&gradient(&x, &y, &Options::new(gamma).with_band(w)).unwrap(), &none);
        }
    }
}

/// Central differences `(f(z + h) − f(z − h)) / 2h` of every coordinate.
fn finite_differences(f: impl Fn(&Series) -> f64, s: &Series, h: f64) -> Vec<f64> {
    (0..s.values.len())
        .map(|k| {
            let mut p = s.clone();
            p.values[k] += h;
            let mut q = s.clone();
            q.values[k] -= h;
            (f(&p) - f(&q)) / (2.0 * h)
        })
        .collect()
}

#[test]
fn gradients_match_central_differences() {
    for &(n, m, dims, gamma, band) in &[
        (9, 13, 1, 0.5, None),
        (11, 7, 2, 1.0, Some(3)),
        (8, 8, 3, 0.1, Some(2)),
        (6, 10, 1, 10.0, None),
    ] {
        let (x, y) = (wave(n, dims, 0.3), wave(m, dims, 1.7));
        let opts = Options {
            band,
            ..Options::new(gamma)
        };
        let g = gradient(&x, &y, &opts).unwrap();
        let fx = finite_differences(|s| value(s, &y, &opts).unwrap(), &x, 1e-6);
        let fy = finite_differences(|s| value(&x, s, &opts).unwrap(), &y, 1e-6);
        assert_all_close("dx vs differences", &g.dx, &fx, 1e-6, 1e-7);
        assert_all_close("dy vs differences", &g.dy, &fy, 1e-6, 1e-7);
        let dg = divergence_gradient(&x, &y, &opts).unwrap();
        assert_eq!(dg.value, divergence(&x, &y, &opts).unwrap());
        let fx = finite_differences(|s| divergence(s, &y, &opts).unwrap(), &x, 1e-6);
        let fy = finite_differences(|s| divergence(&x, s, &opts).unwrap(), &y, 1e-6);
        assert_all_close("divergence dx", &dg.dx, &fx, 1e-6, 1e-7);
        assert_all_close("divergence dy", &dg.dy, &fy, 1e-6, 1e-7);
    }
}

// ---------------------------------------------------------------------------------------
// Long pairs

#[test]
fn length_65536_pair_finishes_in_linear_memory() {
    let n = 65_536;
    let (x, y) = (wave(n, 1, 0.0), wave(n, 1, 0.4));
    // W = 0 on equal lengths admits only the diagonal, where the soft-min of one finite
    // argument is exact: the value is the squared Euclidean distance.
    let euclid: f64 = x
        .values
        .iter()
        .zip(&y.values)
        .map(|(a, b)| (a - b) * (a - b))
        .sum();
    let v0 = value(&x, &y, &Options::new(1.0).with_band(0)).unwrap();
    assert!(close(v0, euclid, 1e-10, 0.0), "{v0} vs {euclid}");
    // A wider band: between the soft-DTW of no band and the diagonal; the backward pass agrees.
    let banded = value(&x, &y, &Options::new(0.1).with_band(16)).unwrap();
    assert!(banded.is_finite() && banded < euclid);
    // The unbanded gradient of a pair this long would keep √N·M cells, not N·M.
    assert!(stored_cells(n, n, None) < 3 * 257 * (n + 1));
}

#[test]
fn long_unequal_pair_value_matches_checkpointed_backward() {
    // 2,048 × 3,000 cells exceed the full-matrix threshold: the gradient uses checkpoints
    // every ⌈√2048⌉ = 46 rows, recomputing blocks; its value must equal the two-row value
    // bit for bit, and its gradient the one with another block size.
    let (x, y) = (wave(2048, 1, 0.2), wave(3000, 1, 0.9));
    let opts = Options::new(0.5);
    let v = value(&x, &y, &opts).unwrap();
    let g = gradient(&x, &y, &opts).unwrap();
    assert_eq!(g.value, v);
    let other = gradient(
        &x,
        &y,
        &Options {
            checkpoint_every: NonZeroUsize::new(301),
            ..opts
        },
    )
    .unwrap();
    assert_eq!(other, g);
    // Banded long pair with gradient: 16,384 steps, band 8.
    let (x, y) = (wave(16_384, 2, 0.0), wave(16_000, 2, 0.5));
    let opts = Options::new(0.2).with_band(8);
    let g = gradient(&x, &y, &opts).unwrap();
    assert_eq!(g.value, value(&x, &y, &opts).unwrap());
    assert!(g.dx.iter().chain(&g.dy).all(|v| v.is_finite()));
}

// ---------------------------------------------------------------------------------------
// Batches

fn italy() -> Vec<Series> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    read_dataset(&path).unwrap().series
}

#[test]
fn batches_equal_single_pairs() {
    let all = italy();
    let (a, b) = (&all[..7], &all[10..15]);
    let opts = Options::new(0.3).with_band(4);
    for measure in [Measure::SoftDtw, Measure::Divergence] {
        let single = |x: &Series, y: &Series| match measure {
            Measure::SoftDtw => value(x, y, &opts).unwrap(),
            Measure::Divergence => divergence(x, y, &opts).unwrap(),
        };
        let values = pairwise(a, b, &opts, measure).unwrap();
        assert_eq!((values.len(), values[0].len()), (7, 5));
        for (i, row) in values.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                assert!(close(*v, single(&a[i], &b[j]), 1e-14, 1e-14));
            }
        }
        let p = paired(&a[..5], b, &opts, measure).unwrap();
        for (i, v) in p.iter().enumerate() {
            assert!(close(*v, values[i][i], 1e-14, 1e-14));
        }
        let pg = pairwise_gradient(a, b, &opts, measure).unwrap();
        for (row, want) in pg.values.iter().zip(&values) {
            assert_all_close("values", row, want, 1e-14, 1e-14);
        }
        let grad = |x: &Series, y: &Series| match measure {
            Measure::SoftDtw => gradient(x, y, &opts).unwrap(),
            Measure::Divergence => divergence_gradient(x, y, &opts).unwrap(),
        };
        for i in 0..a.len() {
            let mut want = vec![0.0; a[i].values.len()];
            for y in b {
                for (w, d) in want.iter_mut().zip(grad(&a[i], y).dx) {
                    *w += d;
                }
            }
            assert_all_close("grad_a", &pg.grad_a[i], &want, 1e-10, 1e-12);
        }
        for j in 0..b.len() {
            let mut want = vec![0.0; b[j].values.len()];
            for x in a {
                for (w, d) in want.iter_mut().zip(grad(x, &b[j]).dy) {
                    *w += d;
                }
            }
            assert_all_close("grad_b", &pg.grad_b[j], &want, 1e-10, 1e-12);
        }
        let per = paired_gradient(&a[..5], b, &opts, measure).unwrap();
        for (i, g) in per.iter().enumerate() {
            assert_eq!(g, &grad(&a[i], &b[i]));
        }
    }
}

#[test]
fn batch_errors_name_the_series() {
    let mut all = italy();
    all[3].values[2] = f64::NAN;
    let e = pairwise(&all[..2], &all[..5], &Options::new(1.0), Measure::SoftDtw).unwrap_err();
    assert!(e.to_string().starts_with("b[3]: time step 2"), "{e}");
    let e = paired(&all[..2], &all[..3], &Options::new(1.0), Measure::SoftDtw).unwrap_err();
    assert!(
        matches!(
            e,
            SoftDtwError::Count {
                len: 2,
                other_len: 3,
                ..
            }
        ),
        "{e}"
    );
    let two = vec![Series {
        dims: 2,
        values: vec![0.0; 8],
    }];
    let e = pairwise(&all[..1], &two, &Options::new(1.0), Measure::SoftDtw).unwrap_err();
    assert!(e.to_string().contains("b[0] has 2 channels"), "{e}");
    assert!(
        pairwise(&[], &all[..2], &Options::new(1.0), Measure::SoftDtw)
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------
// Barycenters

#[test]
fn barycenter_decreases_the_objective_to_a_stationary_point() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let data = read_dataset(&path).unwrap();
    let labels = data.labels.unwrap();
    let set: Vec<Series> = data
        .series
        .into_iter()
        .zip(&labels)
        .filter(|(_, l)| *l == "1")
        .map(|(s, _)| s)
        .collect();
    assert_eq!(set.len(), 34);
    let mut opts = BarycenterOptions::new(1.0);
    opts.max_iterations = 0;
    let start = barycenter(&set, &opts).unwrap();
    assert_eq!(start.stop, Stop::MaxIterations);
    opts.max_iterations = 200;
    opts.f_tolerance = 0.0;
    opts.grad_tolerance = 1e-7;
    let b = barycenter(&set, &opts).unwrap();
    assert_eq!(b.objective[0], start.objective[0]);
    assert_eq!(b.objective.len(), b.iterations + 1);
    assert!(
        b.objective.windows(2).all(|w| w[1] < w[0]),
        "{:?}",
        b.objective
    );
    assert!(
        b.gradient_norm <= 1e-4 * start.gradient_norm,
        "{} vs start {}",
        b.gradient_norm,
        start.gradient_norm
    );
    // The objective really is Σ_k sdtw(z, x_k) / K, and no input series does better.
    let f = |z: &Series| {
        set.iter()
            .map(|x| value(z, x, &opts.soft).unwrap())
            .sum::<f64>()
            / set.len() as f64
    };
    let last = *b.objective.last().unwrap();
    assert!(close(f(&b.series), last, 1e-12, 1e-12));
    assert!(set.iter().all(|x| f(x) > last));
}

#[test]
fn barycenter_weights_and_unequal_lengths() {
    let all = italy();
    // Zero weights drop series: the weighted barycenter of {x0, x1} with weights (1, 0) is
    // the barycenter of {x0} from the same start.
    let mut opts = BarycenterOptions::new(0.5);
    opts.init = Init::Series(all[5].clone());
    opts.weights = Some(vec![2.0, 0.0]);
    let w = barycenter(&all[..2], &opts).unwrap();
    opts.weights = None;
    let alone = barycenter(&all[..1], &opts).unwrap();
    assert_eq!(w.series, alone.series);
    // Unequal lengths start from the medoid and keep its length.
    let mut set = all[..4].to_vec();
    set[1].values.truncate(20);
    set[2].values.truncate(18);
    let opts = BarycenterOptions::new(1.0);
    let b = barycenter(&set, &opts).unwrap();
    let k = b.medoid.expect("medoid start");
    assert_eq!(b.series.len(), set[k].len());
    assert!(b.objective.windows(2).all(|w| w[1] < w[0]));
}
