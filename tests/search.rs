//! SING exact similarity search against the brute-force oracle: identical ids (ties by
//! smallest id) and distances on every query, for random walks (property tests over sizes,
//! lengths, leaf capacities, k and worker counts), duplicates and constant series, the UCR
//! fixtures, and sliding windows of the MIT-BIH ECG; the brute force itself against a naive
//! f64 oracle; the MINDIST lower-bound property; persistence; the incremental index; bad
//! input. GPU variants print why and skip without a GPU, and fail instead when
//! `SYNFIRE_REQUIRE_GPU=1`.

mod common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use synfire::device::DeviceChoice;
use synfire::search::collection::{sq_dist, znormalize};
use synfire::search::isax::{QueryTable, node_lb_sq, prunable};
use synfire::search::query::{CpuLowerBounds, LowerBounds, producer_survivors};
use synfire::search::{
    BuildOptions, Collection, IncrementalIndex, Index, Neighbor, QueryOptions, SearchError,
    Searcher,
};

fn fixture(rel: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    if p.exists() { p } else { PathBuf::from(rel) }
}

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

fn walks(n: usize, len: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| walk(len, &mut rng)).collect()
}

/// Noisy copies of members and fresh walks.
fn queries(data: &[Vec<f64>], count: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let len = data[0].len();
    (0..count)
        .map(|i| {
            if i % 2 == 0 {
                let src = &data[rng.random_range(0..data.len())];
                src.iter()
                    .map(|v| {
                        let e: f64 = StandardNormal.sample(&mut rng);
                        v + 0.1 * e
                    })
                    .collect()
            } else {
                walk(len, &mut rng)
            }
        })
        .collect()
}

/// Small approximate searches (`approximate: 0` measures one leaf, as in the paper), so
/// small collections exercise the whole algorithm rather than the approximate search.
fn opts(workers: usize) -> QueryOptions {
    QueryOptions {
        workers,
        queues: 3,
        chunks: 4,
        approximate: 0,
    }
}

fn assert_same(got: &[Neighbor], want: &[Neighbor], what: &str) {
    let ids = |v: &[Neighbor]| v.iter().map(|n| n.id).collect::<Vec<_>>();
    assert_eq!(ids(got), ids(want), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            (g.distance - w.distance).abs() <= 1e-5 * w.distance.max(1e-12),
            "{what}: {} vs {}",
            g.distance,
            w.distance
        );
        assert_eq!(
            g.squared.to_bits(),
            w.squared.to_bits(),
            "{what}: same arithmetic"
        );
    }
}

/// Every query: SING on the CPU workers and with the CPU producer equals brute force.
fn check_index(index: &Index, qs: &[Vec<f64>], k: usize, workers: usize, what: &str) {
    let producer = CpuLowerBounds::new(index);
    for (i, q) in qs.iter().enumerate() {
        let want = index.brute_force(q, k).unwrap();
        assert_eq!(want.neighbors.len(), k.min(index.count()));
        let a = index.knn(q, k, &opts(workers), None).unwrap();
        assert_same(&a.neighbors, &want.neighbors, &format!("{what} query {i}"));
        let wider = QueryOptions {
            approximate: 100,
            ..opts(workers)
        };
        let a = index.knn(q, k, &wider, None).unwrap();
        assert_same(
            &a.neighbors,
            &want.neighbors,
            &format!("{what} query {i} (approximate 100)"),
        );
        let b = index
            .knn(q, k, &opts(workers), Some(&producer as &dyn LowerBounds))
            .unwrap();
        assert!(b.producer_error.is_none());
        assert_same(
            &b.neighbors,
            &want.neighbors,
            &format!("{what} query {i} (producer)"),
        );
    }
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn sing_equals_brute_force_on_random_walks(
        n in 1usize..1500,
        len in prop::sample::select(vec![3usize, 16, 24, 64, 100, 256]),
        leaf in prop::sample::select(vec![1usize, 4, 32, 1024]),
        k in 1usize..12,
        workers in 1usize..4,
        seed in 0u64..1000,
    ) {
        let data = walks(n, len, seed);
        let index = build(&data, leaf);
        let qs = queries(&data, 6, seed + 1);
        check_index(&index, &qs, k, workers, &format!("n={n} len={len} leaf={leaf}"));
    }
}

#[test]
fn larger_collection_many_queries_and_k() {
    let data = walks(20_000, 128, 7);
    let index = build(&data, 64);
    let qs = queries(&data, 40, 8);
    for k in [1, 5, 50] {
        check_index(&index, &qs, k, 3, &format!("k={k}"));
    }
    // The index prunes: far fewer real distances than series on noisy copies.
    let a = index.knn(&qs[0], 1, &opts(2), None).unwrap();
    assert!(a.stats.real_distances < 20_000 / 4, "{:?}", a.stats);
}

#[test]
fn ties_go_to_the_smallest_id() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let base = walk(64, &mut rng);
    let mut data = walks(300, 64, 4);
    for i in [250, 17, 120, 3] {
        data[i] = base.iter().map(|v| 2.0 * v + 5.0).collect(); // same after z-normalisation
    }
    for i in [40, 41, 290] {
        data[i] = vec![1.5; 64]; // constant: the zero vector
    }
    let index = build(&data, 2);
    for k in 1..6 {
        let a = index.knn(&base, k, &opts(2), None).unwrap();
        let want: Vec<u32> = [3, 17, 120, 250].into_iter().take(k).collect();
        let got: Vec<u32> = a.neighbors.iter().take(4).map(|n| n.id).collect();
        assert_eq!(&got[..want.len()], &want[..]);
        assert_eq!(a.neighbors[0].distance, 0.0);
        check_index(&index, &[base.clone(), vec![7.0; 64]], k, 2, "ties");
        let flat = index.knn(&vec![-1.0; 64], 3, &opts(1), None).unwrap();
        assert_eq!(
            flat.neighbors.iter().map(|n| n.id).collect::<Vec<_>>(),
            vec![40, 41, 290]
        );
    }
}

#[test]
fn brute_force_agrees_with_a_naive_f64_oracle() {
    let data = walks(3000, 100, 11);
    let index = build(&data, 16);
    for q in queries(&data, 10, 12) {
        let zq: Vec<f64> = znormalize(&q).iter().map(|&v| f64::from(v)).collect();
        let mut all: Vec<(f64, u32)> = data
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let zs = znormalize(s);
                let d: f64 = zq
                    .iter()
                    .zip(&zs)
                    .map(|(a, b)| (a - f64::from(*b)).powi(2))
                    .sum();
                (d.sqrt(), i as u32)
            })
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let got = index.brute_force(&q, 5).unwrap().neighbors;
        for (g, w) in got.iter().zip(&all) {
            assert_eq!(g.id, w.1);
            assert!((g.distance - w.0).abs() <= 1e-5 * w.0.max(1e-12));
        }
    }
}

#[test]
fn mindist_never_exceeds_the_true_distance() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    for len in [5usize, 16, 50, 128, 256, 333] {
        let data = walks(400, len, len as u64);
        let index = build(&data, 8);
        for _ in 0..20 {
            let q = znormalize(&walk(len, &mut rng));
            let paa = index.segments().paa(&q);
            let table = QueryTable::new(&paa, index.segments(), index.breakpoints());
            for pos in 0..index.count() {
                let d = sq_dist(&q, index.row(pos), f64::INFINITY).unwrap();
                let lb = table.lb_sq(&index.sax()[pos]);
                assert!(lb <= d * (1.0 + 1e-12) + 1e-12, "len {len}: LB {lb} > {d}");
                assert!(!prunable(lb, d));
            }
            for node in &index.tree().nodes {
                let nlb = node_lb_sq(
                    &paa,
                    index.segments(),
                    index.breakpoints(),
                    &node.prefix,
                    &node.bits,
                );
                for pos in node.start..node.start + node.len {
                    let lb = table.lb_sq(&index.sax()[pos as usize]);
                    assert!(nlb <= lb + 1e-9, "node bound {nlb} above series bound {lb}");
                }
            }
        }
    }
}

fn read_ucr(rel: &str) -> Vec<Vec<f64>> {
    let d = synfire::series::read_dataset(&fixture(rel)).unwrap();
    d.series.into_iter().map(|s| s.values).collect()
}

#[test]
fn ucr_fixtures_test_queries_equal_brute_force() {
    for (train, test) in common::UCR_FIXTURES {
        let data = read_ucr(train);
        let qs = read_ucr(test);
        for leaf in [2, 16] {
            let index = build(&data, leaf);
            check_index(&index, &qs, 3, 2, train);
        }
    }
}

#[test]
fn ecg_sliding_windows_equal_brute_force() {
    let x = synfire::series::read_series(
        &fixture("fixtures/sensors/mitbih-208-ecg/ecg.npy").to_string_lossy(),
    )
    .unwrap();
    let x = &x[..x.len().min(60_000)];
    let c = Collection::sliding_windows("ecg", x, 128).unwrap();
    let index = Index::build(&c, BuildOptions { leaf_capacity: 256 }).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let qs: Vec<Vec<f64>> = (0..12)
        .map(|_| {
            let s = rng.random_range(0..x.len() - 128);
            x[s..s + 128].to_vec()
        })
        .collect();
    check_index(&index, &qs, 4, 2, "ecg");
    // A window of the series is its own nearest neighbour, at distance 0.
    let a = index.knn(&x[1000..1128], 1, &opts(2), None).unwrap();
    assert_eq!((a.neighbors[0].id, a.neighbors[0].distance), (1000, 0.0));
}

#[test]
fn index_persists_and_reloads() {
    let data = walks(3000, 96, 31);
    let index = build(&data, 32);
    let dir = tempfile::tempdir().unwrap();
    index.save(dir.path()).unwrap();
    let loaded = Index::load(dir.path()).unwrap();
    assert_eq!(loaded.count(), 3000);
    assert_eq!(loaded.series_len(), 96);
    assert_eq!(loaded.tree(), index.tree());
    assert_eq!(loaded.sax(), index.sax());
    assert_eq!(loaded.kind(), index.kind());
    for q in queries(&data, 8, 32) {
        let a = index.knn(&q, 3, &opts(2), None).unwrap();
        let b = loaded.knn(&q, 3, &opts(2), None).unwrap();
        assert_same(&b.neighbors, &a.neighbors, "reloaded");
    }
}

fn corrupt(dir: &Path, f: impl FnOnce(&Path)) -> String {
    let data = walks(500, 32, 41);
    build(&data, 8).save(dir).unwrap();
    f(dir);
    Index::load(dir).unwrap_err().to_string()
}

#[test]
fn broken_index_directories_are_clear_errors() {
    let t = tempfile::tempdir().unwrap();
    let e = Index::load(&t.path().join("missing"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("index.json") && e.contains("synfire search build"),
        "{e}"
    );
    let d = t.path().join("version");
    let e = corrupt(&d, |d| {
        let h = std::fs::read_to_string(d.join("index.json")).unwrap();
        std::fs::write(
            d.join("index.json"),
            h.replace("\"version\": 1", "\"version\": 7"),
        )
        .unwrap();
    });
    assert!(e.contains("version 7") && e.contains("rebuild"), "{e}");
    let d = t.path().join("truncated");
    let e = corrupt(&d, |d| {
        let s = std::fs::read(d.join("series.f32")).unwrap();
        std::fs::write(d.join("series.f32"), &s[..s.len() - 4]).unwrap();
    });
    assert!(e.contains("series.f32"), "{e}");
    let d = t.path().join("tree");
    let e = corrupt(&d, |d| {
        let mut s = std::fs::read(d.join("tree.bin")).unwrap();
        let n = s.len();
        for b in &mut s[n - 40..n - 20] {
            *b = 0xff;
        }
        std::fs::write(d.join("tree.bin"), &s).unwrap();
    });
    assert!(e.contains("tree.bin"), "{e}");
    // One flipped byte in the iSAX array: the checksum.
    let d = t.path().join("isax");
    let e = corrupt(&d, |d| {
        let mut s = std::fs::read(d.join("isax.u8")).unwrap();
        s[100] ^= 1;
        std::fs::write(d.join("isax.u8"), &s).unwrap();
    });
    assert!(e.contains("isax.u8") && e.contains("checksum"), "{e}");
    // A damaged node (its prefix wider than its cardinality): refused, no panic.
    let d = t.path().join("prefix");
    let e = corrupt(&d, |d| {
        let mut s = std::fs::read(d.join("tree.bin")).unwrap();
        let first_node = 4 * 65_536;
        s[first_node] = 0xff;
        std::fs::write(d.join("tree.bin"), &s).unwrap();
    });
    assert!(e.contains("tree.bin") && e.contains("checksum"), "{e}");
    let d = t.path().join("garbage");
    let e = corrupt(&d, |d| {
        std::fs::write(d.join("index.json"), "{\"format\": 3}").unwrap()
    });
    assert!(e.contains("not a synfire"), "{e}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let data = walks(100, 40, 51);
    let index = build(&data, 8);
    assert!(matches!(
        index.knn(&data[0], 0, &opts(1), None),
        Err(SearchError::ZeroK)
    ));
    let e = index.knn(&data[0][..39], 1, &opts(1), None).unwrap_err();
    assert!(
        matches!(
            e,
            SearchError::QueryLength {
                got: 39,
                expected: 40,
                ..
            }
        ),
        "{e}"
    );
    let mut nan = data[0].clone();
    nan[3] = f64::NAN;
    assert!(
        index
            .knn(&nan, 1, &opts(1), None)
            .unwrap_err()
            .to_string()
            .contains("non-finite")
    );
    assert!(index.brute_force(&nan, 1).is_err());
    let e = Collection::from_series("f.tsv", &[vec![1.0; 5], vec![1.0; 6]]).unwrap_err();
    assert!(e.to_string().contains("f.tsv") && e.to_string().contains("equal length"));
    let c = Collection::from_series("f", &data).unwrap();
    assert!(Index::build(&c, BuildOptions { leaf_capacity: 0 }).is_err());
    // k above the collection size returns every series.
    assert_eq!(
        index
            .knn(&data[0], 500, &opts(2), None)
            .unwrap()
            .neighbors
            .len(),
        100
    );
}

#[test]
fn incremental_index_equals_brute_force_as_it_grows() {
    let data = walks(5000, 48, 61);
    let mut inc =
        IncrementalIndex::new(48, BuildOptions { leaf_capacity: 16 }, usize::MAX).unwrap();
    let qs = queries(&data, 4, 62);
    let mut held: Vec<Vec<f32>> = Vec::new();
    for (i, s) in data.iter().enumerate() {
        let z = znormalize(s);
        if i % 701 == 0 && !held.is_empty() {
            for q in &qs {
                let zq = znormalize(q);
                let (got, _) = inc.knn(&zq, 3, DeviceChoice::Cpu, opts(2)).unwrap();
                let ids: Vec<u32> = (0..held.len() as u32).collect();
                let rows: Vec<f32> = held.concat();
                let want = synfire::search::brute::knn_rows(&rows, &ids, 48, &zq, 3).unwrap();
                let g: Vec<(u64, f64)> = got.iter().map(|n| (n.id, n.distance)).collect();
                let w: Vec<(u64, f64)> = want
                    .neighbors
                    .iter()
                    .map(|n| (1000 + u64::from(n.id) * 10, n.distance))
                    .collect();
                assert_eq!(g, w, "after {} insertions", held.len());
            }
        }
        inc.insert(1000 + i as u64 * 10, &z).unwrap();
        held.push(z);
    }
    assert!(inc.rebuilds() >= 3, "{}", inc.rebuilds());
    // With a capacity, only the newest series are searched after a rebuild.
    let mut small = IncrementalIndex::new(48, BuildOptions::default(), 1500).unwrap();
    for (i, s) in data.iter().take(3000).enumerate() {
        small.insert(i as u64, &znormalize(s)).unwrap();
    }
    let (got, _) = small
        .knn(&znormalize(&data[0]), 1, DeviceChoice::Cpu, opts(1))
        .unwrap();
    assert!(got[0].id > 0, "the oldest series was evicted");
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_lower_bounds_equal_the_cpu_producer_and_answers_equal_brute_force() {
    if !common::gpu_or_skip("gpu_lower_bounds_equal_the_cpu_producer_and_answers_equal_brute_force")
    {
        return;
    }
    let data = walks(30_000, 256, 71);
    let index = build(&data, 128);
    let gpu = synfire::search::gpu::GpuLowerBounds::new(&index, None).unwrap();
    let cpu = CpuLowerBounds::new(&index);
    let mut rng = ChaCha8Rng::seed_from_u64(72);
    for _ in 0..5 {
        let q = znormalize(&walk(256, &mut rng));
        for bsf in [0.0, 50.0, 200.0, f64::INFINITY] {
            for chunk in [4096u32, 10_000] {
                let a = producer_survivors(&index, &q, bsf, chunk, &gpu).unwrap();
                let b = producer_survivors(&index, &q, bsf, chunk, &cpu).unwrap();
                assert_eq!(a.len(), b.len());
                for (x, y) in a.iter().zip(&b) {
                    assert_eq!(x.len(), y.len());
                    for (p, r) in x.iter().zip(y) {
                        assert_eq!((p.pos, p.lb_sq.to_bits()), (r.pos, r.lb_sq.to_bits()));
                    }
                }
            }
        }
    }
    let mut s = Searcher::new(&index, DeviceChoice::Gpu, opts(4)).unwrap();
    assert_eq!(s.device(), "gpu");
    for (i, q) in queries(&data, 20, 73).iter().enumerate() {
        for k in [1, 10] {
            let a = s.knn(i, q, k).unwrap();
            let want = index.brute_force(q, k).unwrap();
            assert_same(&a.neighbors, &want.neighbors, &format!("gpu query {i}"));
            assert!(a.producer_error.is_none());
        }
    }
}

#[test]
fn device_gpu_without_a_gpu_is_an_error_and_auto_falls_back() {
    let data = walks(200, 32, 81);
    let index = build(&data, 8);
    let mut auto = Searcher::new(&index, DeviceChoice::Auto, opts(2)).unwrap();
    let a = auto.knn(0, &data[5], 2).unwrap();
    assert_eq!(a.neighbors[0].id, 5);
    if synfire::device::probe().is_err() {
        assert_eq!(auto.device(), "cpu");
        assert!(Searcher::new(&index, DeviceChoice::Gpu, opts(2)).is_err());
    }
}

#[test]
fn cli_build_query_json_equals_brute_force_and_reports_bad_input() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("gp");
    let train = fixture("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts");
    let test = fixture("fixtures/ucr/GunPoint/GunPoint_TEST.ts");
    let out = common::synfire([
        "search",
        "build",
        train.to_str().unwrap(),
        "--index",
        dir.to_str().unwrap(),
        "--leaf-capacity",
        "4",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = common::synfire([
        "search",
        "query",
        "--index",
        dir.to_str().unwrap(),
        test.to_str().unwrap(),
        "--k",
        "3",
        "--format",
        "json",
        "--device",
        "cpu",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let index = Index::load(&dir).unwrap();
    let qs = read_ucr(test.to_str().unwrap());
    let results = doc["results"].as_array().unwrap();
    assert_eq!(results.len(), qs.len());
    for (i, q) in qs.iter().enumerate() {
        let want = index.brute_force(q, 3).unwrap().neighbors;
        let got = &results[i];
        assert_eq!(got["query"].as_u64(), Some(i as u64));
        for (g, w) in got["neighbors"].as_array().unwrap().iter().zip(&want) {
            assert_eq!(g["id"].as_u64(), Some(u64::from(w.id)));
            let d = g["distance"].as_f64().unwrap();
            assert!((d - w.distance).abs() <= 1e-12 * w.distance.max(1e-12));
        }
    }
    for key in ["lower_bounds", "real_distances", "seconds"] {
        assert!(doc["stats"][key].is_number(), "stats.{key}");
    }
    assert_eq!(doc["batch"].as_u64(), Some(256));
    // One query at a time (SING) and batches of 7 give the same answers as the default batch.
    for batch in ["1", "7"] {
        let out = common::synfire([
            "search",
            "query",
            "--index",
            dir.to_str().unwrap(),
            test.to_str().unwrap(),
            "--k",
            "3",
            "--device",
            "cpu",
            "--batch",
            batch,
        ]);
        assert!(out.status.success());
        let other: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(other["results"], doc["results"], "--batch {batch}");
    }
    let out = common::synfire([
        "search",
        "query",
        "--index",
        dir.to_str().unwrap(),
        test.to_str().unwrap(),
        "--batch",
        "0",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("`--batch` must be at least 1"));
    // Sliding windows of the ECG, queried with windows of the ECG itself.
    let ecg = fixture("fixtures/sensors/mitbih-208-ecg/ecg.npy");
    let wdir = t.path().join("ecg");
    let out = common::synfire([
        "search",
        "build",
        ecg.to_str().unwrap(),
        "--window",
        "128",
        "--index",
        wdir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let x = synfire::series::read_series(&ecg.to_string_lossy()).unwrap();
    let qfile = t.path().join("q.tsv");
    let line = |s: usize| {
        std::iter::once("0".to_owned())
            .chain(x[s..s + 128].iter().map(|v| v.to_string()))
            .collect::<Vec<_>>()
            .join("\t")
    };
    std::fs::write(&qfile, format!("{}\n{}\n", line(5000), line(77_000))).unwrap();
    let out = common::synfire([
        "search",
        "query",
        "--index",
        wdir.to_str().unwrap(),
        qfile.to_str().unwrap(),
        "--k",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["results"][0]["neighbors"][0]["id"].as_u64(), Some(5000));
    assert_eq!(
        doc["results"][1]["neighbors"][0]["id"].as_u64(),
        Some(77_000)
    );
    // Bad input: each a clear error, no panic.
    let err = |args: &[&str], needle: &str| {
        let out = common::synfire(args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && e.contains(needle), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{e}");
    };
    let d = dir.to_str().unwrap();
    let ts = test.to_str().unwrap();
    err(
        &["search", "query", "--index", d, ts, "--k", "0"],
        "at least 1",
    );
    err(
        &["search", "query", "--index", wdir.to_str().unwrap(), ts],
        "length 128",
    );
    err(
        &["search", "query", "--index", "/nonexistent/idx", ts],
        "index.json",
    );
    let ragged = t.path().join("ragged.tsv");
    std::fs::write(&ragged, "1\t1\t2\t3\n1\t1\t2\n").unwrap();
    err(
        &["search", "build", ragged.to_str().unwrap(), "--index", d],
        "equal length",
    );
    let nan = t.path().join("nan.tsv");
    std::fs::write(&nan, "1\t1\tNaN\t3\n1\t1\t2\t4\n").unwrap();
    err(
        &["search", "build", nan.to_str().unwrap(), "--index", d],
        "non-finite",
    );
    let h = std::fs::read_to_string(dir.join("index.json")).unwrap();
    std::fs::write(
        dir.join("index.json"),
        h.replace("\"version\": 1", "\"version\": 2"),
    )
    .unwrap();
    err(&["search", "query", "--index", d, ts], "version 2");
    if synfire::device::probe().is_err() {
        err(
            &[
                "search",
                "query",
                "--index",
                wdir.to_str().unwrap(),
                qfile.to_str().unwrap(),
                "--device",
                "gpu",
            ],
            "--device gpu",
        );
    }
}

#[test]
fn bench_search_runs_and_verifies_against_brute_force() {
    let out = common::synfire([
        "bench",
        "search",
        "--series",
        "3000",
        "--length",
        "64",
        "--queries",
        "6",
        "--device",
        "cpu,cpu-stream",
        "--k",
        "2",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("| cpu | all (6) |")
            && text.contains("| cpu-stream | all (6) |")
            && text.contains("10^8"),
        "{text}"
    );
}

#[test]
fn shipped_search_pipeline_answers_equal_brute_force() {
    use synfire::live::config::PipelineConfig;
    use synfire::live::sink::jsonl::JsonlConfig;
    use synfire::live::{RunOptions, run};
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let mut config = PipelineConfig::load(Path::new("pipelines/replay-search.toml")).unwrap();
    for s in config.sinks.values_mut() {
        if let Some(j) = s.options_mut::<JsonlConfig>() {
            j.path = Some(
                std::env::temp_dir().join(format!("synfire-search-{}.jsonl", std::process::id())),
            );
        }
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    run(
        &config,
        RunOptions {
            tap: Some(tx),
            ..Default::default()
        },
    )
    .unwrap();
    let results: Vec<serde_json::Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    let hd = synfire::series::read_series(
        "fixtures/spikes/A2929-200711/A2929-200711.nwb:/acquisition/CompassDirection/rz",
    )
    .unwrap();
    // 63,527 samples, windows of 600 every 300.
    assert!(results.len() > 200, "{}", results.len());
    let m = 240;
    let mut checked = 0;
    for r in results.iter().filter(|r| r["complete"] == true).step_by(40) {
        let q0 = r["query_start_sample"].as_u64().unwrap() as usize;
        let got = r["neighbors"].as_array().unwrap();
        if q0 < m {
            assert!(got.is_empty());
            continue;
        }
        let c = Collection::sliding_windows("hd", &hd[..q0], m).unwrap();
        let q = znormalize(&hd[q0..q0 + m]);
        let want = synfire::search::brute::knn_rows(c.rows(), c.ids(), m, &q, 3).unwrap();
        for (g, w) in got.iter().zip(&want.neighbors) {
            assert_eq!(g["start_sample"].as_u64(), Some(u64::from(w.id)), "{r}");
            assert_eq!(g["distance"].as_f64(), Some(w.distance));
        }
        assert_eq!(got.len(), 3);
        checked += 1;
    }
    assert!(checked >= 4, "{checked}");
}
