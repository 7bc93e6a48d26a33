//! End-to-end tests of `synfire softdtw` and `synfire barycenter` on the bundled UCR fixtures:
//! the JSON layout, agreement with the library (the f64 CPU reference, `--device cpu`, to 4 ulp;
//! the f32 GPU path and its tolerance are tested in `softdtw_gpu.rs`), and errors that name the
//! input.

mod common;
use common::synfire;

use std::path::{Path, PathBuf};

use serde_json::Value;
use synfire::series::{npy, read_dataset};
use synfire::softdtw::{Options, divergence, gradient, value};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn json(args: &[&str]) -> Value {
    let out = synfire(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Equal up to one or two ulps: serde_json's default float parser is not always correctly
/// rounded (its `float_roundtrip` feature is off).
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
}

fn numbers(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn softdtw_all_pairs_with_gradients() {
    let italy = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let dir = tempfile::tempdir().unwrap();
    // B: three series of ECG200 cut to 30 steps, as a `.npy` batch.
    let ecg = read_dataset(&fixture("fixtures/ucr/ECG200/ECG200_TRAIN.tsv")).unwrap();
    let b: Vec<_> = ecg.series[..3]
        .iter()
        .map(|s| synfire::softdtw::Series::univariate(s.values[..30].to_vec()))
        .collect();
    let b_path = dir.path().join("b.npy");
    let flat: Vec<f64> = b.iter().flat_map(|s| s.values.clone()).collect();
    npy::write_f64(&b_path, &[3, 30], &flat).unwrap();
    let doc = json(&[
        "softdtw",
        italy.to_str().unwrap(),
        b_path.to_str().unwrap(),
        "--device",
        "cpu",
        "--gamma",
        "0.5",
        "--grad",
    ]);
    assert_eq!(doc["gamma"], 0.5);
    assert_eq!(doc["measure"], "soft_dtw");
    let a = read_dataset(&italy).unwrap().series;
    let values = doc["values"].as_array().unwrap();
    assert_eq!(values.len(), 67);
    let opts = Options::new(0.5);
    for (i, row) in values.iter().enumerate() {
        let row = numbers(row);
        assert_eq!(row.len(), 3);
        for (j, v) in row.iter().enumerate() {
            let want = value(&a[i], &b[j], &opts).unwrap();
            assert!(same(*v, want), "{v} vs {want}");
        }
    }
    // grad_a[i] = Σ_j ∂values[i][j]/∂a_i.
    let ga = numbers(&doc["grad_a"][4]);
    let mut want = vec![0.0; 24];
    for y in &b {
        for (w, d) in want.iter_mut().zip(gradient(&a[4], y, &opts).unwrap().dx) {
            *w += d;
        }
    }
    for (g, w) in ga.iter().zip(&want) {
        assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{g} vs {w}");
    }
    assert_eq!(doc["grad_b"].as_array().unwrap().len(), 3);
    assert_eq!(numbers(&doc["grad_b"][0]).len(), 30);
}

#[test]
fn softdtw_divergence_and_band() {
    let gun = fixture("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts");
    let g = gun.to_str().unwrap();
    let doc = json(&[
        "softdtw",
        g,
        g,
        "--device",
        "cpu",
        "--gamma",
        "1",
        "--divergence",
        "--band",
        "10",
    ]);
    assert_eq!(doc["measure"], "divergence");
    assert_eq!(doc["band"], 10);
    assert!(doc.get("grad_a").is_none());
    let s = read_dataset(&gun).unwrap().series;
    let values = doc["values"].as_array().unwrap();
    assert_eq!(values.len(), 50);
    let opts = Options::new(1.0).with_band(10);
    for i in [0, 17, 49] {
        let row = numbers(&values[i]);
        assert_eq!(row[i], 0.0);
        let want = divergence(&s[i], &s[3], &opts).unwrap();
        assert!(same(row[3], want), "{} vs {want}", row[3]);
    }
}

#[test]
fn barycenter_document() {
    let italy = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let doc = json(&[
        "barycenter",
        italy.to_str().unwrap(),
        "--gamma",
        "1",
        "--label",
        "2",
        "--iterations",
        "30",
    ]);
    assert_eq!(doc["series"], 33);
    assert_eq!(doc["length"], 24);
    assert_eq!(doc["dims"], 1);
    assert_eq!(numbers(&doc["barycenter"]).len(), 24);
    let objective = numbers(&doc["objective"]);
    assert!(objective.len() >= 2 && objective.len() <= 31);
    assert!(objective.windows(2).all(|w| w[1] < w[0]), "{objective:?}");
}

#[test]
fn errors_name_the_input() {
    let italy = fixture("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    let i = italy.to_str().unwrap();
    let err = |args: &[&str]| {
        let out = synfire(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let e = err(&["softdtw", i, i, "--gamma", "0"]);
    assert!(e.contains("`gamma`"), "{e}");
    let e = err(&["softdtw", i, "missing.tsv", "--gamma", "1"]);
    assert!(e.contains("missing.tsv"), "{e}");
    let gun = fixture("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts");
    let e = err(&[
        "softdtw",
        i,
        gun.to_str().unwrap(),
        "--gamma",
        "1",
        "--band",
        "1",
    ]);
    assert!(e.contains("band") && e.contains("24 x 150"), "{e}");
    let e = err(&["barycenter", i, "--gamma", "1", "--label", "7"]);
    assert!(e.contains("no series labelled `7`"), "{e}");
}
