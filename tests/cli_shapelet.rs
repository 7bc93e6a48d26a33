//! `synfire shapelet` end to end: the JSON document on a real UCR set (0-based indices, the
//! tree, accuracies), the saved model classifying the test split exactly as the run reported,
//! the three text formats, and bad input (ragged, NaN, unlabelled, bad lengths) failing with a
//! message naming it.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use synfire::series::read_dataset;
use synfire::shapelet::{ShapeletTree, univariate};

/// A fixture under the checkout the tests were built in, else under the current directory
/// (a test binary copied to a GPU host and run from the repository root).
fn fixture(rel: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    if p.exists() { p } else { PathBuf::from(rel) }
}

fn run_ok(args: &[&str]) -> String {
    let out = common::synfire(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn run_err(args: &[&str]) -> String {
    let out = common::synfire(args);
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

#[test]
fn json_document_and_saved_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("italy.json");
    let train = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let test = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TEST.ts");
    let out = run_ok(&[
        "shapelet",
        train.to_str().unwrap(),
        "--test",
        test.to_str().unwrap(),
        "--min-length",
        "3",
        "--max-length",
        "24",
        "--device",
        "cpu",
        "--format",
        "json",
        "--save-model",
        model.to_str().unwrap(),
    ]);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["series"], 67);
    assert_eq!(doc["device"], "cpu");
    let shapelets = doc["shapelets"].as_array().unwrap();
    assert!(!shapelets.is_empty());
    for s in shapelets {
        for key in ["series", "start", "length", "threshold", "gain", "gap"] {
            assert!(s.get(key).is_some(), "{key} missing in {s}");
        }
        let (series, start, length) = (
            s["series"].as_u64().unwrap(),
            s["start"].as_u64().unwrap(),
            s["length"].as_u64().unwrap(),
        );
        assert!(series < 67 && (3..=24).contains(&length) && start + length <= 24);
        assert!(s["gain"].as_f64().unwrap() > 0.0);
    }
    assert_eq!(doc["tree"]["node"], 0);
    assert_eq!(doc["tree"]["shapelet"], 0);
    let test_acc = doc["test_accuracy"].as_f64().unwrap();
    assert!(test_acc > 0.85, "{test_acc}");
    assert_eq!(doc["train_accuracy"], 1.0);
    // The saved model reproduces the reported test accuracy.
    let tree = ShapeletTree::load(&model).unwrap();
    let d = read_dataset(&test).unwrap();
    let series = univariate(&d, "test").unwrap();
    let acc = tree
        .accuracy(&series, d.labels.as_ref().unwrap(), "test")
        .unwrap();
    assert_eq!(acc, test_acc);
    let text = run_ok(&[
        "shapelet",
        train.to_str().unwrap(),
        "--min-length",
        "5",
        "--max-length",
        "9",
        "--device",
        "cpu",
        "--logical",
        "--max-terms",
        "2",
        "--format",
        "text",
    ]);
    assert!(text.contains("67 series of length 24, 2 classes"), "{text}");
    assert!(text.contains("train accuracy"), "{text}");
}

#[test]
fn the_three_ucr_formats() {
    for (rel, n) in [
        ("fixtures/ucr/Coffee/Coffee_TRAIN.txt", 28),
        ("fixtures/ucr/ECG200/ECG200_TRAIN.tsv", 100),
        ("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts", 50),
    ] {
        let out = run_ok(&[
            "shapelet",
            fixture(rel).to_str().unwrap(),
            "--min-length",
            "20",
            "--max-length",
            "40",
            "--step",
            "20",
            "--max-depth",
            "1",
            "--device",
            "cpu",
        ]);
        let doc: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(doc["series"], n, "{rel}");
        assert_eq!(doc["shapelets"].as_array().unwrap().len(), 1, "{rel}");
    }
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let ragged = write("ragged.tsv", "1\t1.0\t2.0\t3.0\n2\t1.0\t2.0\n");
    let e = run_err(&[
        "shapelet",
        &ragged,
        "--min-length",
        "2",
        "--max-length",
        "2",
    ]);
    assert!(e.contains("ragged.tsv: series 1 has 2 samples"), "{e}");
    let nan = write("nan.tsv", "1\t1.0\t2.0\t3.0\n2\t1.0\tNaN\t2.0\n");
    let e = run_err(&["shapelet", &nan, "--min-length", "2", "--max-length", "2"]);
    assert!(e.contains("nan.tsv: series 1, sample 1 is NaN"), "{e}");
    let ok = write("ok.tsv", "1\t1.0\t2.0\t3.0\n2\t3.0\t1.0\t2.0\n");
    for (args, want) in [
        (
            vec!["--min-length", "0", "--max-length", "2"],
            "`min_length`",
        ),
        (
            vec!["--min-length", "2", "--max-length", "2", "--step", "0"],
            "`step`",
        ),
        (
            vec!["--min-length", "2", "--max-length", "4"],
            "exceeds the series length 3",
        ),
        (
            vec!["--min-length", "3", "--max-length", "2"],
            "below min_length",
        ),
    ] {
        let mut a = vec!["shapelet", ok.as_str(), "--device", "cpu"];
        a.extend(args);
        let e = run_err(&a);
        assert!(e.contains(want), "{e}");
    }
    let e = run_err(&[
        "shapelet",
        "/nonexistent/x.ts",
        "--min-length",
        "2",
        "--max-length",
        "2",
    ]);
    assert!(e.contains("/nonexistent/x.ts"), "{e}");
    let unlabelled = write(
        "u.ts",
        "@problemName u\n@univariate true\n@classLabel false\n@data\n1,2,3\n3,1,2\n",
    );
    let e = run_err(&[
        "shapelet",
        &unlabelled,
        "--min-length",
        "2",
        "--max-length",
        "2",
    ]);
    assert!(e.contains("no class labels"), "{e}");
    if synfire::device::probe().is_err() {
        let e = run_err(&[
            "shapelet",
            &ok,
            "--min-length",
            "2",
            "--max-length",
            "2",
            "--device",
            "gpu",
        ]);
        assert!(e.contains("CUDA") || e.contains("GPU"), "{e}");
    }
}

/// `--gpus` on a one-GPU command: one ordinal is taken, more than one (or any with
/// `--device cpu`) is an error naming the flag, before any data is read.
#[test]
fn gpus_names_one_gpu_for_a_sensor_command() {
    let train = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let train = train.to_str().unwrap();
    let base = ["shapelet", train, "--min-length", "3", "--max-length", "3"];
    let e = run_err(&[&base[..], &["--gpus", "0,1"]].concat());
    assert!(e.contains("runs on one GPU") && e.contains("--gpus"), "{e}");
    let e = run_err(&[&base[..], &["--device", "cpu", "--gpus", "0"]].concat());
    assert!(e.contains("--device cpu"), "{e}");
    let out = run_ok(&[&base[..], &["--device", "cpu", "--max-depth", "1"]].concat());
    assert!(!out.is_empty());
}
