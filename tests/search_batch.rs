//! Batched queries (`synfire::search::batch`) against the brute-force oracle: the `f32` PAA
//! filter's threshold bounds the kernel's bound on adversarial pairs (so no neighbour is ever
//! filtered out); batches on the CPU, through the CPU model of the device's filter and refine
//! (series on the device or refined on the host, ranges split on overflow, overflowed
//! queries answered on the CPU) and on a GPU give the brute force's ids and distances, bit
//! for bit, on random walks and on the real UCR and ECG fixtures. The GPU variants print why
//! and skip without a GPU, and fail instead when `SYNFIRE_REQUIRE_GPU=1`.

mod common;

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use synfire::device::DeviceChoice;
use synfire::search::batch::{
    BatchJob, SeriesOnDevice, emulate_batch, filter_threshold, half_sq_f32, half_threshold,
    knn_batch_with, lb_f32, paa_f32, to_half, weights_f32,
};
use synfire::search::collection::{sq_dist, znormalize};
use synfire::search::paa::Segments;
use synfire::search::{BuildOptions, Collection, Index, Neighbor, QueryOptions, Searcher};

fn walk(len: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    let mut acc = 0.0;
    (0..len)
        .map(|_| {
            let s: f64 = StandardNormal.sample(rng);
            acc += s;
            acc
        })
        .collect()
}

/// Random walks with exact duplicates (ties) and near-copies among them.
fn collection(n: usize, len: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut data: Vec<Vec<f64>> = Vec::with_capacity(n);
    for i in 0..n {
        let s = if i > 10 && i % 17 == 0 {
            data[rng.random_range(0..i)].clone()
        } else if i > 10 && i % 13 == 0 {
            let src = data[rng.random_range(0..i)].clone();
            src.iter()
                .map(|v| {
                    let e: f64 = StandardNormal.sample(&mut rng);
                    v + 0.01 * e
                })
                .collect()
        } else {
            walk(len, &mut rng)
        };
        data.push(s);
    }
    data
}

/// Noisy copies of members, exact copies and fresh walks, z-normalised.
fn queries(data: &[Vec<f64>], count: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let len = data[0].len();
    (0..count)
        .map(|i| {
            let raw = match i % 3 {
                0 => {
                    let src = &data[rng.random_range(0..data.len())];
                    src.iter()
                        .map(|v| {
                            let e: f64 = StandardNormal.sample(&mut rng);
                            v + 0.1 * e
                        })
                        .collect()
                }
                1 => data[rng.random_range(0..data.len())].clone(),
                _ => walk(len, &mut rng),
            };
            znormalize(&raw)
        })
        .collect()
}

fn build(data: &[Vec<f64>], leaf: usize) -> Index {
    let c = Collection::from_series("test", data).unwrap();
    Index::build(
        &c,
        BuildOptions {
            leaf_capacity: leaf,
        },
    )
    .unwrap()
}

fn opts() -> QueryOptions {
    QueryOptions {
        workers: 2,
        queues: 3,
        chunks: 4,
        approximate: 0,
    }
}

fn assert_same(got: &[Neighbor], want: &[Neighbor], what: &str) {
    let key = |v: &[Neighbor]| {
        v.iter()
            .map(|n| (n.id, n.squared.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(got), key(want), "{what}");
    for n in got {
        assert_eq!(n.distance.to_bits(), n.squared.sqrt().to_bits(), "{what}");
    }
}

/// The filter's soundness on one pair: the kernel's bound never exceeds the threshold made
/// from the pair's own distance (the tightest BSF under which the series must survive).
/// A walk of `len` samples (with one huge sample in the middle when `spike`) and a copy with
/// Gaussian noise of spread `noise`: the adversarial pairs of the margin proptests.
fn noisy_pair(len: usize, seed: u64, noise: f64, spike: bool) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut a = walk(len, &mut rng);
    if spike {
        a[len / 2] += 1e6;
    }
    let b = a
        .iter()
        .map(|v| {
            let e: f64 = StandardNormal.sample(&mut rng);
            v + noise * e
        })
        .collect();
    (a, b)
}

fn check_pair(seg: &Segments, q: &[f32], x: &[f32], x_norm: f64) {
    let w = weights_f32(seg);
    let (qp, qn) = paa_f32(seg, q);
    let (xp, xn) = paa_f32(seg, x);
    assert!(xn <= x_norm);
    let d = sq_dist(q, x, f64::INFINITY).unwrap();
    let lb = lb_f32(&qp, &xp, &w);
    let t = filter_threshold(d, qn, x_norm);
    assert!(
        lb <= t,
        "len {}: f32 bound {lb} above the threshold {t} of distance² {d}",
        q.len()
    );
}

/// The half-precision filter's soundness on one pair: the kernel's f32 distance to the f16
/// copy never exceeds the threshold made from the pair's own exact distance.
fn check_half(q: &[f32], x: &[f32]) {
    let d = sq_dist(q, x, f64::INFINITY).unwrap();
    let norm = x
        .iter()
        .map(|&v| f64::from(v) * f64::from(v))
        .sum::<f64>()
        .sqrt()
        * (1.0 + 1e-9);
    let got = half_sq_f32(q, &to_half(x));
    let t = half_threshold(d, norm, q.len());
    assert!(
        got <= t,
        "len {}: f16 distance² {got} above {t} (exact {d})",
        q.len()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn the_half_threshold_bounds_the_f16_distance(
        len in 1usize..300,
        seed in any::<u64>(),
        noise in prop_oneof![Just(0.0f64), Just(1e-7), Just(1e-4), Just(0.1), Just(10.0)],
        spike in any::<bool>(),
    ) {
        // A spike leaves the rest of the z-normalised series tiny (f16 subnormals).
        let (a, b) = noisy_pair(len, seed, noise, spike);
        let (q, x) = (znormalize(&a), znormalize(&b));
        check_half(&q, &x);
        check_half(&x, &q);
    }

    #[test]
    fn the_threshold_bounds_the_f32_paa_bound(
        len in 1usize..300,
        seed in any::<u64>(),
        noise in prop_oneof![Just(0.0f64), Just(1e-7), Just(1e-4), Just(0.1), Just(10.0)],
        spike in any::<bool>(),
    ) {
        let seg = Segments::new(len);
        // A spike gives large PAA values in one segment, the worst case for E.
        let (a, b) = noisy_pair(len, seed, noise, spike);
        let (q, x) = (znormalize(&a), znormalize(&b));
        let x_norm = paa_f32(&seg, &x).1;
        check_pair(&seg, &q, &x, x_norm);
        check_pair(&seg, &x, &q, paa_f32(&seg, &q).1);
    }
}

#[test]
fn threshold_is_infinite_for_an_infinite_bsf_and_tight_otherwise() {
    assert_eq!(filter_threshold(f64::INFINITY, 16.0, 16.0), f32::INFINITY);
    assert_eq!(filter_threshold(f64::NAN, 16.0, 16.0), f32::INFINITY);
    // The margin is tiny next to a distance: within 1e-4 relative at distance² 1.
    let t = f64::from(filter_threshold(1.0, 16.0, 16.0));
    assert!((1.0..1.0001).contains(&t), "{t}");
    assert!(filter_threshold(0.0, 16.0, 16.0) > 0.0);
}

/// Every query of `qs` through `knn_batch_with` on the CPU model equals brute force.
#[allow(clippy::too_many_arguments)]
fn check_emulated(
    index: &Index,
    qs: &[Vec<f32>],
    k: usize,
    held: SeriesOnDevice,
    per_launch: usize,
    cap: usize,
    what: &str,
) -> (u64, u64, u64) {
    let mut launches = 0;
    let mut overflowed = 0;
    let mut run = |job: BatchJob| {
        let r = emulate_batch(index, &job, held, per_launch, cap);
        launches += r.filter_launches;
        overflowed += r.overflowed.len() as u64;
        Ok(r)
    };
    let got = knn_batch_with(index, qs, k, &opts(), held, &mut run).unwrap();
    assert_eq!(got.stats.series, held);
    assert!(got.stats.half_survivors <= got.stats.filter_survivors);
    if held != SeriesOnDevice::Half {
        assert_eq!(got.stats.half_survivors, 0);
    }
    assert_eq!(got.answers.len(), qs.len());
    assert_eq!(
        got.stats.cpu_fallbacks, overflowed,
        "{what}: fallbacks counted"
    );
    for (i, (q, a)) in qs.iter().zip(&got.answers).enumerate() {
        let want = index.brute_force_normalized(q, k).unwrap();
        assert_same(&a.neighbors, &want.neighbors, &format!("{what} query {i}"));
    }
    (launches, overflowed, got.stats.filter_survivors)
}

#[test]
fn emulated_gpu_batches_equal_brute_force() {
    for (n, len, leaf, seed) in [(3000, 64, 64, 1u64), (1500, 37, 32, 2), (800, 9, 16, 3)] {
        let data = collection(n, len, seed);
        let index = build(&data, leaf);
        let qs = queries(&data, 40, seed + 100);
        for k in [1, 3, 10] {
            for held in [
                SeriesOnDevice::Exact,
                SeriesOnDevice::Half,
                SeriesOnDevice::No,
            ] {
                let what = format!("n {n} len {len} k {k} series on the device {held:?}");
                let (launches, overflowed, survivors) =
                    check_emulated(&index, &qs, k, held, 16, usize::MAX, &what);
                assert_eq!(launches, 3, "{what}");
                assert_eq!(overflowed, 0);
                // The filter is a filter: far fewer pairs than the whole cross product.
                assert!(survivors < (qs.len() * n / 2) as u64, "{what}: {survivors}");
            }
        }
    }
}

#[test]
fn overflowing_ranges_are_split_and_single_overflows_fall_back_to_the_cpu() {
    let data = collection(2000, 48, 9);
    let index = build(&data, 64);
    let qs = queries(&data, 24, 10);
    // A capacity below some single queries' survivors: ranges are split down to single
    // queries and those are answered on the CPU, every answer still exact.
    let (launches, overflowed, _) =
        check_emulated(&index, &qs, 3, SeriesOnDevice::Exact, 8, 40, "cap 40");
    assert!(launches > 3, "ranges were split: {launches} launches");
    assert!(overflowed > 0, "some queries overflowed alone");
    assert!(overflowed < qs.len() as u64);
}

#[test]
fn cpu_batches_equal_brute_force_and_wrong_lengths_are_named() {
    let data = collection(3000, 64, 5);
    let index = build(&data, 64);
    let qs = queries(&data, 30, 6);
    let mut s = Searcher::new(&index, DeviceChoice::Cpu, opts()).unwrap();
    let got = s.query_batch(&qs, 5).unwrap();
    assert_eq!(got.stats.device, "cpu");
    for (i, (q, a)) in qs.iter().zip(&got.answers).enumerate() {
        let want = index.brute_force_normalized(q, 5).unwrap();
        assert_same(
            &a.neighbors,
            &want.neighbors,
            &format!("cpu batch query {i}"),
        );
    }
    let mut bad = qs.clone();
    bad[7].pop();
    let e = s.query_batch(&bad, 1).unwrap_err().to_string();
    assert!(e.contains("query 7") && e.contains("63 samples"), "{e}");
    assert!(s.query_batch(&qs, 0).is_err());
    assert!(s.query_batch(&[], 1).unwrap().answers.is_empty());
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_batches_equal_brute_force() {
    if !common::gpu_or_skip("gpu_batches_equal_brute_force") {
        return;
    }
    let data = collection(40_000, 256, 31);
    let index = build(&data, 256);
    let qs = queries(&data, 300, 32);
    let mut s = Searcher::new(&index, DeviceChoice::Gpu, QueryOptions::default()).unwrap();
    for k in [1, 10] {
        for batch in [1usize, 7, 300] {
            for chunk in qs.chunks(batch).take(3) {
                let got = s.query_batch(chunk, k).unwrap();
                assert_eq!(got.stats.device, "gpu");
                assert_eq!(got.stats.series, SeriesOnDevice::Exact);
                assert_eq!(got.stats.cpu_fallbacks, 0);
                for (i, (q, a)) in chunk.iter().zip(&got.answers).enumerate() {
                    let want = index.brute_force_normalized(q, k).unwrap();
                    assert_same(
                        &a.neighbors,
                        &want.neighbors,
                        &format!("gpu k {k} query {i}"),
                    );
                }
            }
        }
    }
    // The host refining the device's survivors (second indexes of the same data, uploaded
    // without their series, and with their half-precision copy) gives the same answers.
    for want in [SeriesOnDevice::No, SeriesOnDevice::Half] {
        let index2 = build(&data, 256);
        let host = synfire::search::batch::GpuBatch::new(&index2, None, want).unwrap();
        assert_eq!(host.series(), want);
        let got = host.knn_batch(&qs, 3, &QueryOptions::default()).unwrap();
        assert_eq!(got.stats.series, want);
        if want == SeriesOnDevice::Half {
            // The second filter keeps far fewer pairs than the first.
            assert!(
                got.stats.half_survivors * 10 < got.stats.filter_survivors,
                "{:?}",
                got.stats
            );
        }
        for (i, (q, a)) in qs.iter().zip(&got.answers).enumerate() {
            let want_n = index.brute_force_normalized(q, 3).unwrap();
            assert_same(
                &a.neighbors,
                &want_n.neighbors,
                &format!("gpu {want:?} query {i}"),
            );
        }
    }
}

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn read_ucr(rel: &str) -> Vec<Vec<f64>> {
    let d = synfire::series::read_dataset(&fixture(rel)).unwrap();
    d.series.into_iter().map(|s| s.values).collect()
}

/// Checks one real collection on the GPU: every query batched (batches of 1, 7 and all),
/// one at a time through the single-query GPU path, and through the host-refined variants
/// (series not on the device, and their half-precision copy), each equal to the brute force.
fn check_real_on_gpu(index: &Index, qs: &[Vec<f32>], what: &str) {
    let mut s = Searcher::new(index, DeviceChoice::Gpu, QueryOptions::default()).unwrap();
    assert_eq!(s.device(), "gpu");
    for k in [1, 5] {
        let want: Vec<_> = qs
            .iter()
            .map(|q| index.brute_force_normalized(q, k).unwrap())
            .collect();
        for batch in [1usize, 7, qs.len()] {
            for (c, chunk) in qs.chunks(batch).enumerate().take(4) {
                let got = s.query_batch(chunk, k).unwrap();
                assert_eq!(got.stats.device, "gpu");
                assert_eq!(got.stats.cpu_fallbacks, 0, "{what}: {:?}", got.stats);
                for (i, a) in got.answers.iter().enumerate() {
                    let j = c * batch + i;
                    assert_same(
                        &a.neighbors,
                        &want[j].neighbors,
                        &format!("{what}: gpu batch of {batch}, k {k}, query {j}"),
                    );
                }
            }
        }
        for (j, q) in qs.iter().enumerate().take(10) {
            let f64q: Vec<f64> = q.iter().map(|&v| v as f64).collect();
            let a = s.knn(j, &f64q, k).unwrap();
            let w = index.brute_force(&f64q, k).unwrap();
            assert_same(
                &a.neighbors,
                &w.neighbors,
                &format!("{what}: gpu single query {j}, k {k}"),
            );
        }
    }
    for series in [SeriesOnDevice::No, SeriesOnDevice::Half] {
        let host = synfire::search::batch::GpuBatch::new(index, None, series).unwrap();
        let got = host.knn_batch(qs, 3, &QueryOptions::default()).unwrap();
        for (j, (q, a)) in qs.iter().zip(&got.answers).enumerate() {
            let want = index.brute_force_normalized(q, 3).unwrap();
            assert_same(
                &a.neighbors,
                &want.neighbors,
                &format!("{what}: gpu {series:?} query {j}"),
            );
        }
    }
}

/// The real inputs: each UCR fixture's training set as the collection and its test set as the
/// queries (lengths 24 to 286 samples, leaves of 2 and 16), and every window of 128 and of
/// 256 samples of the MIT-BIH ECG with 200 queries: windows of the record itself (their own
/// nearest neighbour at distance 0, with overlapping near-copies around them) and noisy
/// copies of windows.
fn real_inputs() -> Vec<(String, Index, Vec<Vec<f32>>)> {
    let mut out = Vec::new();
    for (train, test) in common::UCR_FIXTURES {
        let data = read_ucr(train);
        let qs: Vec<Vec<f32>> = read_ucr(test).iter().map(|s| znormalize(s)).collect();
        for leaf in [2, 16] {
            out.push((
                format!("{train} leaf {leaf}"),
                build(&data, leaf),
                qs.clone(),
            ));
        }
    }
    let x = synfire::series::read_series(
        &fixture("fixtures/sensors/mitbih-208-ecg/ecg.npy").to_string_lossy(),
    )
    .unwrap();
    for m in [128usize, 256] {
        let c = Collection::sliding_windows("ecg", &x, m).unwrap();
        let index = Index::build(&c, BuildOptions { leaf_capacity: 256 }).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(90 + m as u64);
        let qs: Vec<Vec<f32>> = (0..200)
            .map(|i| {
                let s = rng.random_range(0..x.len() - m);
                let w = &x[s..s + m];
                if i % 2 == 0 {
                    znormalize(w)
                } else {
                    let noisy: Vec<f64> = w
                        .iter()
                        .map(|v| {
                            let e: f64 = StandardNormal.sample(&mut rng);
                            v + 0.05 * e
                        })
                        .collect();
                    znormalize(&noisy)
                }
            })
            .collect();
        out.push((format!("ecg windows of {m}"), index, qs));
    }
    out
}

#[test]
fn emulated_batches_on_real_series_equal_brute_force() {
    for (what, index, qs) in real_inputs() {
        for held in [
            SeriesOnDevice::Exact,
            SeriesOnDevice::Half,
            SeriesOnDevice::No,
        ] {
            for k in [1, 5] {
                check_emulated(
                    &index,
                    &qs,
                    k,
                    held,
                    64,
                    usize::MAX,
                    &format!("{what} k {k} {held:?}"),
                );
            }
        }
    }
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_batches_on_real_series_equal_brute_force() {
    if !common::gpu_or_skip("gpu_batches_on_real_series_equal_brute_force") {
        return;
    }
    let inputs = real_inputs();
    for (what, index, qs) in &inputs {
        check_real_on_gpu(index, qs, what);
    }
    // Two batch handles of one index asking for different holdings: the later load (the
    // exact series) replaces the earlier (half precision); the first handle's batches use it.
    let (train, test) = common::UCR_FIXTURES[2];
    let index = build(&read_ucr(train), 16);
    let qs: Vec<Vec<f32>> = read_ucr(test).iter().map(|s| znormalize(s)).collect();
    let half = synfire::search::batch::GpuBatch::new(&index, None, SeriesOnDevice::Half).unwrap();
    assert_eq!(half.series(), SeriesOnDevice::Half);
    let exact = synfire::search::batch::GpuBatch::new(&index, None, SeriesOnDevice::Exact).unwrap();
    assert_eq!(exact.series(), SeriesOnDevice::Exact);
    for batch in [&half, &exact] {
        let got = batch.knn_batch(&qs, 3, &QueryOptions::default()).unwrap();
        assert_eq!(got.stats.series, SeriesOnDevice::Exact);
        for (j, (q, a)) in qs.iter().zip(&got.answers).enumerate() {
            let want = index.brute_force_normalized(q, 3).unwrap();
            assert_same(
                &a.neighbors,
                &want.neighbors,
                &format!("{train}: two handles, query {j}"),
            );
        }
    }
    // Several indexes' searchers used in turn on one GPU (the device keeps each one's data):
    // every answer still equals the brute force, with no reload error.
    let mut searchers: Vec<Searcher> = inputs
        .iter()
        .map(|(_, index, _)| {
            Searcher::new(index, DeviceChoice::Gpu, QueryOptions::default()).unwrap()
        })
        .collect();
    for round in 0..2 {
        for ((what, index, qs), s) in inputs.iter().zip(&mut searchers) {
            let got = s.query_batch(&qs[..qs.len().min(20)], 3).unwrap();
            assert_eq!(got.stats.device, "gpu");
            for (j, a) in got.answers.iter().enumerate() {
                let want = index.brute_force_normalized(&qs[j], 3).unwrap();
                assert_same(
                    &a.neighbors,
                    &want.neighbors,
                    &format!("{what}: in turn, round {round}, query {j}"),
                );
            }
        }
    }
}
