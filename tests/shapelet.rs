//! Shapelet discovery against the naive `O(N² L⁴)` oracle: the CPU dynamic program (and, where
//! a GPU exists, the GPU kernels) must pick exactly the oracle's shapelet — same series, start
//! and length, bit-identical gain, gap and threshold — on random sets with duplicates,
//! constant stretches, affine copies and large offsets, for plain and logical (AND/OR) terms.
//! Trees trained on the UCR fixtures classify their TEST splits; models survive a JSON round
//! trip. GPU variants print why and skip without a GPU, and fail instead when
//! `SYNFIRE_REQUIRE_GPU=1`.

mod common;

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use synfire::series::read_dataset;
use synfire::shapelet::discovery::{CpuSearch, Problem, Scored, Search, discover};
use synfire::shapelet::gpu::GpuSearch;
use synfire::shapelet::tree::train_with;
use synfire::shapelet::{Node, Op, ShapeletConfig, ShapeletTree, TrainingSet, oracle};

/// A fixture under the checkout the tests were built in, else under the current directory
/// (a test binary copied to a GPU host and run from the repository root).
fn fixture(rel: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if p.exists() { p } else { PathBuf::from(rel) }
}

/// A UCR split as a training set (and its raw series and labels for prediction).
fn ucr(rel: &str) -> (TrainingSet, Vec<Vec<f64>>, Vec<String>) {
    let d = read_dataset(&fixture(rel)).unwrap();
    let set = TrainingSet::from_dataset(&d, rel).unwrap();
    let series = synfire::shapelet::univariate(&d, rel).unwrap();
    (set, series, d.labels.unwrap())
}

/// Random labelled series: noise plus a class-specific bump at a random place, with the
/// hazards switched on by `hazards` bits: 1 = a duplicate of series 0 with another label,
/// 2 = a constant stretch, 4 = an affine copy (3x + 5) of series 1, 8 = an offset of 1000
/// with a small scale on the last series.
fn random_set(seed: u64, n: usize, len: usize, classes: usize, hazards: u8) -> TrainingSet {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut series: Vec<Vec<f64>> = Vec::with_capacity(n);
    let mut labels: Vec<String> = Vec::with_capacity(n);
    for i in 0..n {
        let class = i % classes;
        let mut s: Vec<f64> = (0..len).map(|_| rng.random_range(-1.0..1.0)).collect();
        let width = 2 + class;
        let at = rng.random_range(0..=len - width.min(len));
        let end = (at + width).min(len);
        for (k, v) in s[at..end].iter_mut().enumerate() {
            *v += 2.0 * (class as f64 + 1.0) * (k as f64 - width as f64 / 2.0).abs();
        }
        series.push(s);
        labels.push(class.to_string());
    }
    if hazards & 1 != 0 && n >= 3 {
        series[n - 1] = series[0].clone();
        labels[n - 1] = ((labels[0].parse::<usize>().unwrap() + 1) % classes).to_string();
    }
    if hazards & 2 != 0 && len >= 6 {
        for v in &mut series[1 % n][1..5] {
            *v = 0.25;
        }
    }
    if hazards & 4 != 0 && n >= 4 {
        series[2] = series[1].iter().map(|v| 3.0 * v + 5.0).collect();
    }
    if hazards & 8 != 0 {
        let last = series.len() - 1;
        series[last] = series[last].iter().map(|v| 1000.0 + 0.01 * v).collect();
    }
    TrainingSet::new(&series, &labels, "random").unwrap()
}

/// Same shapelet, bit-identical gain, gap and threshold.
fn assert_same(got: Option<&Scored>, want: Option<&Scored>, what: &str) {
    match (got, want) {
        (None, None) => {}
        (Some(g), Some(w)) => {
            assert_eq!(g.candidate, w.candidate, "{what}");
            assert_eq!(g.gain.to_bits(), w.gain.to_bits(), "{what}: gain");
            assert_eq!(g.gap.to_bits(), w.gap.to_bits(), "{what}: gap");
            assert_eq!(g.threshold.to_bits(), w.threshold.to_bits(), "{what}");
        }
        (g, w) => panic!("{what}: {g:?} vs {w:?}"),
    }
}

/// `search` equals the oracle on `set` (plain, then AND/OR terms after the oracle's pick).
fn check_against_oracle(set: &TrainingSet, lengths: &[usize], search: &mut dyn Search) {
    let subset: Vec<usize> = (0..set.len()).collect();
    let node = Problem::new(set, &subset, lengths);
    let want = oracle::best_shapelet(&node);
    let got = discover(&node, search).unwrap();
    assert_same(got.best.as_ref(), want.as_ref(), "plain");
    assert_eq!(got.candidates, node.candidates());
    let Some(first) = want else { return };
    for op in [Op::And, Op::Or] {
        let p = node.with_base(op, &first.d2);
        let want = oracle::best_shapelet(&p);
        let got = discover(&p, search).unwrap();
        assert_same(got.best.as_ref(), want.as_ref(), &format!("{op:?}"));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn cpu_equals_the_oracle_on_random_sets(
        seed in any::<u64>(),
        n in 2usize..9,
        len in 5usize..16,
        classes in 2usize..4,
        hazards in 0u8..16,
        min_l in 2usize..4,
        span in 0usize..12,
        step in 1usize..3,
    ) {
        let set = random_set(seed, n, len, classes, hazards);
        let mut cfg = ShapeletConfig::new(min_l.min(len), (min_l + span).min(len));
        cfg.step = step;
        check_against_oracle(&set, &cfg.lengths(), &mut CpuSearch::default());
    }
}

/// Series that are all alike (every distance ties) and a set of one class.
#[test]
fn degenerate_sets() {
    let labels: Vec<String> = ["a", "b", "a", "b"].map(String::from).to_vec();
    let same = vec![vec![1.0, 2.0, 0.0, 3.0, 1.0]; 4];
    let set = TrainingSet::new(&same, &labels, "same").unwrap();
    check_against_oracle(&set, &[2, 3, 5], &mut CpuSearch::default());
    let flat = vec![vec![2.0; 6]; 4];
    let set = TrainingSet::new(&flat, &labels, "flat").unwrap();
    check_against_oracle(&set, &[2, 6], &mut CpuSearch::default());
    let (tree, _) =
        train_with(&set, &ShapeletConfig::new(2, 6), &mut CpuSearch::default()).unwrap();
    assert_eq!(tree.nodes.len(), 1, "nothing splits identical series");
    let one: Vec<String> = vec!["x".into(); 4];
    let set = TrainingSet::new(&same, &one, "one class").unwrap();
    let (tree, stats) =
        train_with(&set, &ShapeletConfig::new(2, 5), &mut CpuSearch::default()).unwrap();
    assert!(matches!(tree.nodes[..], [Node::Leaf { class: 0, .. }]));
    assert_eq!(stats.discoveries, 0);
}

/// The CPU equals the oracle on real data: ItalyPowerDemand (all lengths) and a part of
/// GunPoint.
#[test]
fn cpu_equals_the_oracle_on_ucr_data() {
    let (italy, _, _) = ucr("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let lengths: Vec<usize> = (2..=24).collect();
    check_against_oracle(&italy, &lengths, &mut CpuSearch::default());
    let (gun, _, _) = ucr("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts");
    let part = TrainingSet {
        values: gun.values[..16 * gun.length].to_vec(),
        labels: gun.labels[..16].to_vec(),
        ..gun.clone()
    };
    check_against_oracle(&part, &[2, 3, 20, 45], &mut CpuSearch::default());
}

/// Trains on a UCR TRAIN split with `cfg` and returns (train accuracy, test accuracy, tree).
fn train_and_test(
    name: &str,
    train: &str,
    test: &str,
    cfg: &ShapeletConfig,
    search: &mut dyn Search,
) -> (f64, f64, ShapeletTree) {
    let (set, series, labels) = ucr(train);
    let (tree, stats) = train_with(&set, cfg, search).unwrap();
    assert!(stats.nodes >= 3, "{name}: a tree with at least one split");
    let train_acc = tree.accuracy(&series, &labels, train).unwrap();
    // Prediction reproduces the training partition exactly: the training accuracy is the
    // leaves' majority share.
    let majority: usize = tree
        .nodes
        .iter()
        .map(|n| match n {
            Node::Leaf { counts, .. } => counts.iter().copied().max().unwrap_or(0),
            Node::Split { .. } => 0,
        })
        .sum();
    assert_eq!(train_acc, majority as f64 / set.len() as f64, "{name}");
    let d = read_dataset(&fixture(test)).unwrap();
    let test_series = synfire::shapelet::univariate(&d, test).unwrap();
    let test_acc = tree
        .accuracy(&test_series, d.labels.as_ref().unwrap(), test)
        .unwrap();
    (train_acc, test_acc, tree)
}

/// Trees on the four UCR sets (coarse length grids on the CPU) beat the majority class on
/// their TEST splits by a wide margin, and models survive a JSON round trip.
#[test]
fn ucr_trees_classify_their_test_splits() {
    for (name, min, max, step, floor) in [
        ("ItalyPowerDemand", 3, 24, 1, 0.85),
        ("GunPoint", 10, 150, 10, 0.8),
        ("ECG200", 5, 96, 7, 0.7),
        ("Coffee", 20, 280, 20, 0.7),
    ] {
        let ext = match name {
            "Coffee" => "txt",
            "ECG200" => "tsv",
            _ => "ts",
        };
        let train = format!("fixtures/ucr/{name}/{name}_TRAIN.{ext}");
        let test = format!("fixtures/ucr/{name}/{name}_TEST.{ext}");
        let mut cfg = ShapeletConfig::new(min, max);
        cfg.step = step;
        let (train_acc, test_acc, tree) =
            train_and_test(name, &train, &test, &cfg, &mut CpuSearch::default());
        eprintln!("{name}: train {train_acc:.3} test {test_acc:.3}");
        assert!(test_acc >= floor, "{name}: test accuracy {test_acc}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.json");
        tree.save(&path).unwrap();
        let back = ShapeletTree::load(&path).unwrap();
        assert_eq!(back, tree, "{name}: the model file round-trips bit for bit");
    }
}

/// Logical rules: a depth-1 tree with AND/OR terms gains at least as much as plain shapelets.
#[test]
fn logical_rules_grow_only_when_they_gain() {
    let (set, _, _) = ucr("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let mut cfg = ShapeletConfig::new(4, 12);
    cfg.max_depth = Some(1);
    let (plain, _) = train_with(&set, &cfg, &mut CpuSearch::default()).unwrap();
    cfg.max_terms = 3;
    let (logical, stats) = train_with(&set, &cfg, &mut CpuSearch::default()).unwrap();
    let root = |t: &ShapeletTree| match &t.nodes[0] {
        Node::Split { rule, .. } => rule.clone(),
        Node::Leaf { .. } => panic!("no split"),
    };
    let (p, l) = (root(&plain), root(&logical));
    assert_eq!(p.shapelets[0], l.shapelets[0]);
    assert!(l.gain >= p.gain);
    assert_eq!(l.ops.len() + 1, l.shapelets.len());
    if l.shapelets.len() > 1 {
        assert!(l.gain > p.gain + 1e-12);
    }
    assert!(
        stats.discoveries >= 3,
        "plain + one AND + one OR discovery at least"
    );
}

/// Bad input gets errors naming it.
#[test]
fn bad_input_is_an_error() {
    let labels: Vec<String> = ["a", "b"].map(String::from).to_vec();
    let e = TrainingSet::new(&[vec![1.0, 2.0, 3.0], vec![1.0, 2.0]], &labels, "r.tsv").unwrap_err();
    assert!(
        e.to_string().contains("r.tsv: series 1 has 2 samples"),
        "{e}"
    );
    let set = TrainingSet::new(&[vec![1.0, 2.0, 3.0], vec![3.0, 1.0, 2.0]], &labels, "x").unwrap();
    let e = train_with(&set, &ShapeletConfig::new(2, 4), &mut CpuSearch::default()).unwrap_err();
    assert!(e.to_string().contains("`max_length`"), "{e}");
    let (tree, _) =
        train_with(&set, &ShapeletConfig::new(2, 3), &mut CpuSearch::default()).unwrap();
    let e = tree
        .predict(&[vec![1.0, f64::NAN, 2.0]], "new")
        .unwrap_err();
    assert!(
        e.to_string().contains("new: series 0, sample 1 is NaN"),
        "{e}"
    );
    if tree.max_shapelet_length() > 1 {
        let e = tree.predict(&[vec![1.0]], "short").unwrap_err();
        assert!(
            e.to_string().contains("short: series 0 has 1 samples"),
            "{e}"
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, "{\"format\": \"something else\"}").unwrap();
    let e = ShapeletTree::load(&path).unwrap_err().to_string();
    assert!(e.contains("bad.json") && e.contains("not a usable"), "{e}");
}

// ---------------------------------------------------------------------------------------
// GPU variants: the same checks with the GPU search.

const UCR: [(&str, &str); 4] = [
    ("Coffee", "txt"),
    ("GunPoint", "ts"),
    ("ECG200", "tsv"),
    ("ItalyPowerDemand", "ts"),
];

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_equals_the_oracle_on_random_sets() {
    if !common::gpu_or_skip("gpu_equals_the_oracle_on_random_sets") {
        return;
    }
    let mut gpu = GpuSearch::start().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for case in 0..120u64 {
        let n = rng.random_range(2..9);
        let len = rng.random_range(5..40);
        let set = random_set(case, n, len, rng.random_range(2..4), (case % 16) as u8);
        let min_l = rng.random_range(2..4usize).min(len);
        let mut cfg = ShapeletConfig::new(min_l, (min_l + rng.random_range(0..20)).min(len));
        cfg.step = rng.random_range(1..3);
        check_against_oracle(&set, &cfg.lengths(), &mut gpu);
    }
}

/// GPU and CPU pick the same shapelet (series, start, length; the gain within 1e-9 — in fact
/// bit for bit) at the root of the four UCR sets, all lengths from 2, step 1.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_equals_cpu_on_the_ucr_sets() {
    if !common::gpu_or_skip("gpu_equals_cpu_on_the_ucr_sets") {
        return;
    }
    let mut gpu = GpuSearch::start().unwrap();
    for (name, ext) in UCR {
        let (set, _, _) = ucr(&format!("fixtures/ucr/{name}/{name}_TRAIN.{ext}"));
        let lengths: Vec<usize> = (2..=set.length).collect();
        let subset: Vec<usize> = (0..set.len()).collect();
        let node = Problem::new(&set, &subset, &lengths);
        let g = discover(&node, &mut gpu).unwrap();
        let c = discover(&node, &mut CpuSearch::default()).unwrap();
        let (g, c) = (g.best.unwrap(), c.best.unwrap());
        eprintln!("{name}: {:?} gain {} gap {}", g.candidate, g.gain, g.gap);
        assert_eq!(g.candidate, c.candidate, "{name}");
        assert!((g.gain - c.gain).abs() <= 1e-9, "{name}");
        assert_same(Some(&g), Some(&c), name);
    }
}

/// Whole trees (all lengths, plain and logical) are identical on the GPU and the CPU.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_trees_equal_cpu_trees() {
    if !common::gpu_or_skip("gpu_trees_equal_cpu_trees") {
        return;
    }
    for (name, ext) in [("ItalyPowerDemand", "ts"), ("GunPoint", "ts")] {
        let (set, _, _) = ucr(&format!("fixtures/ucr/{name}/{name}_TRAIN.{ext}"));
        let mut cfg = ShapeletConfig::new(2, set.length);
        for terms in [1, 2] {
            cfg.max_terms = terms;
            let (g, stats) =
                synfire::shapelet::train(&set, &cfg, synfire::device::DeviceChoice::Gpu).unwrap();
            assert_ne!(stats.device, "cpu");
            let (c, _) = train_with(&set, &cfg, &mut CpuSearch::default()).unwrap();
            assert_eq!(g, c, "{name}, {terms} terms");
        }
    }
}

/// A pipeline classifies the windows of a sensor stream (the bundled head-direction series)
/// with a tree trained at startup (`train`) and with the same tree saved to a file (`model`):
/// both stages label every complete window as the tree does offline.
#[test]
fn pipeline_stage_classifies_sensor_windows() {
    let nwb = fixture("fixtures/spikes/A2929-200711/A2929-200711.nwb");
    let hd = synfire::series::read_series(&format!(
        "{}:/acquisition/CompassDirection/rz",
        nwb.display()
    ))
    .unwrap();
    // Training windows of 120 samples labelled by the net turn over the window.
    let mut rows = String::new();
    let (mut series, mut labels) = (Vec::new(), Vec::new());
    for w in 0..60 {
        let x = &hd[w * 997..w * 997 + 120];
        let label = if x[119] > x[0] { "1" } else { "2" };
        rows += label;
        for v in x {
            rows += &format!("\t{v}");
        }
        rows += "\n";
        series.push(x.to_vec());
        labels.push(label.to_owned());
    }
    let dir = tempfile::tempdir().unwrap();
    let train_file = dir.path().join("turns_TRAIN.tsv");
    std::fs::write(&train_file, rows).unwrap();
    // The tsv reader keeps the printed values: train offline on what it reads.
    let d = read_dataset(&train_file).unwrap();
    let set = TrainingSet::from_dataset(&d, "turns").unwrap();
    let mut cfg = ShapeletConfig::new(10, 40);
    cfg.step = 10;
    let (tree, _) = train_with(&set, &cfg, &mut CpuSearch::default()).unwrap();
    let model = dir.path().join("turns.json");
    tree.save(&model).unwrap();
    let out = dir.path().join("out.jsonl");
    let text = format!(
        r#"
[sources.heading]
kind = "hdf5"
path = "{nwb}"
series = "/acquisition/CompassDirection/rz"
frame_samples = 256

[windows.w]
source = "heading"
length_samples = 120
hop_samples = 120

[stages.trained]
kind = "shapelet"
window = "w"
train = "{train}"
min_length = 10
max_length = 40
step = 10
device = "cpu"

[stages.loaded]
kind = "shapelet"
window = "w"
model = "{model}"

[sinks.file]
kind = "jsonl"
path = "{out}"
"#,
        nwb = nwb.display(),
        train = train_file.display(),
        model = model.display(),
        out = out.display(),
    );
    let config = synfire::live::config::PipelineConfig::parse(&text, Path::new("shapelet.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = crossbeam_channel::unbounded();
    synfire::live::run(
        &config,
        synfire::live::RunOptions {
            tap: Some(tx),
            ..Default::default()
        },
    )
    .unwrap();
    let results: Vec<serde_json::Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    let mut checked = 0;
    for stage in ["trained", "loaded"] {
        let mine: Vec<&serde_json::Value> =
            results.iter().filter(|r| r["stage"] == stage).collect();
        assert_eq!(mine.len(), hd.len().div_ceil(120), "{stage}");
        for r in mine.iter().filter(|r| r["complete"] == true) {
            let start = r["start_sample"].as_u64().unwrap() as usize;
            let (_, class) = tree.classify(&hd[start..start + 120], "hd", 0).unwrap();
            assert_eq!(
                r["label"],
                tree.classes[class].as_str(),
                "{stage} at {start}"
            );
            checked += 1;
        }
    }
    assert!(checked > 900, "{checked}");
    let predicted = tree.predict(&series, "turns").unwrap();
    let right = predicted
        .iter()
        .zip(&labels)
        .filter(|&(&c, l)| tree.classes[c] == *l)
        .count();
    assert!(right >= 54, "training windows right: {right} of 60");
}
