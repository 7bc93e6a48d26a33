//! End-to-end tests of `synfire generate` (sym26, and the dense neuropixels preset): the CSV and NWB outputs hold the same seeded
//! stream, the seed alone determines the bytes, and `synfire mine` recovers the embedded
//! chains (the model is in `src/synth/`: `A→B→C→D` with delays in (4, 6] ms and
//! `E→F→…→L` with delays in (9, 11] ms, on 20 Hz basal Poisson firing for 60 s).

mod common;
use common::synfire;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use synfire::episode::{Episode, Interval, TypeIndex, count_exact};
use synfire::event::{EventStream, EventType, Ordering};
use synfire::ingest::read_spikes;
use tempfile::TempDir;

fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit status {:?}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `synfire generate sym26 --seed SEED [--format FORMAT] -o DIR/NAME`; returns the path.
fn generate(dir: &Path, name: &str, seed: u64, format: Option<&str>) -> PathBuf {
    let path = dir.join(name);
    let mut args = vec![
        "generate".to_owned(),
        "sym26".into(),
        "--seed".into(),
        seed.to_string(),
    ];
    if let Some(f) = format {
        args.extend(["--format".into(), f.into()]);
    }
    args.extend(["-o".into(), path.display().to_string()]);
    let out = synfire(&args);
    assert_success(&out, &args.join(" "));
    assert!(path.is_file(), "{} was written", path.display());
    path
}

fn read(path: &Path) -> EventStream {
    read_spikes(path, Ordering::RequireSorted)
        .unwrap_or_else(|e| panic!("{} reads back: {e}", path.display()))
}

fn letters() -> Vec<String> {
    ('A'..='Z').map(String::from).collect()
}

#[test]
fn csv_and_nwb_outputs_hold_the_same_stream() {
    let dir = TempDir::new().unwrap();
    let csv = read(&generate(dir.path(), "sym26.csv", 3, None));
    let nwb = read(&generate(dir.path(), "sym26.nwb", 3, Some("nwb")));

    assert!(
        (45_000..58_000).contains(&csv.len()),
        "{} events",
        csv.len()
    );
    assert_eq!(csv.alphabet().len(), 26);
    // CSV event types are numbered in order of first appearance; the labels are A..Z.
    let mut labels = csv.alphabet().labels().to_vec();
    labels.sort();
    assert_eq!(labels, letters());
    assert!(
        csv.times().iter().all(|&t| (0.0..60.0).contains(&t)),
        "times in [0, 60) s: {} .. {}",
        csv.start(),
        csv.end()
    );
    assert!(
        csv.counts_per_type().iter().all(|&n| n > 0),
        "every neuron fires"
    );

    assert_eq!(nwb.len(), csv.len());
    let bits = |s: &EventStream| s.times().iter().map(|t| t.to_bits()).collect::<Vec<_>>();
    assert!(bits(&nwb) == bits(&csv), "times are bit-identical");
    // An NWB units table identifies units by integer id: the writer numbers the generator's
    // labels A..Z as units 0..25, so NWB unit k is letter k.
    let numbers: Vec<String> = (0..26).map(|i: u32| i.to_string()).collect();
    assert_eq!(nwb.alphabet().labels(), numbers.as_slice());
    let by_letter = |s: &EventStream| -> Vec<String> {
        s.types()
            .iter()
            .map(|&t| letter(s.alphabet().label(t)))
            .collect()
    };
    assert!(
        by_letter(&nwb)
            == csv
                .types()
                .iter()
                .map(|&t| csv.alphabet().label(t).to_owned())
                .collect::<Vec<_>>(),
        "the same neuron fires each event"
    );
}

/// The letter of an NWB unit id written for Sym26 (`"0"` → `"A"`); other labels unchanged.
fn letter(label: &str) -> String {
    match label.parse::<u8>() {
        Ok(i) if i < 26 => char::from(b'A' + i).to_string(),
        _ => label.to_owned(),
    }
}

#[test]
fn the_seed_alone_determines_the_bytes() {
    let dir = TempDir::new().unwrap();
    let a = std::fs::read(generate(dir.path(), "a.csv", 3, None)).unwrap();
    let b = std::fs::read(generate(dir.path(), "b.csv", 3, Some("csv"))).unwrap();
    let c = std::fs::read(generate(dir.path(), "c.csv", 4, None)).unwrap();
    assert!(a.len() > 500_000, "{} bytes", a.len());
    assert!(a == b, "seed 3 twice gives byte-identical CSV");
    assert!(a != c, "seeds 3 and 4 give different CSV");
}

#[test]
fn generate_to_an_unwritable_path_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    for format in ["csv", "nwb"] {
        let path = dir.path().join(format!("no/such/dir/out.{format}"));
        let out = synfire([
            "generate",
            "sym26",
            "--format",
            format,
            "-o",
            &path.display().to_string(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{format}: {err}");
        assert!(!err.contains("panicked"), "{format}: {err}");
        assert!(err.contains(&path.display().to_string()), "{format}: {err}");
    }
}

/// Mines `path` with the Sym26 settings and returns the JSON document.
fn mine(path: &Path) -> Value {
    let args = [
        "mine",
        &path.display().to_string(),
        "--intervals",
        "0.004-0.006,0.009-0.011",
        "--min-count",
        "400",
        "--max-level",
        "4",
        "--format",
        "json",
        "-q",
    ];
    let out = synfire(args);
    assert_success(&out, &args.join(" "));
    serde_json::from_slice(&out.stdout).expect("mine prints JSON")
}

/// `(labels, [low, high] per gap, count)` of every episode.
type Found = Vec<(Vec<String>, Vec<(f64, f64)>, u64)>;

fn found(doc: &Value) -> Found {
    doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let labels = e["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect();
            let ivs = e["intervals_s"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_f64().unwrap(), p[1].as_f64().unwrap()))
                .collect();
            (labels, ivs, e["count"].as_u64().unwrap())
        })
        .collect()
}

#[test]
fn mining_sym26_finds_the_embedded_chains() {
    let dir = TempDir::new().unwrap();
    let csv_path = generate(dir.path(), "sym26.csv", 3, None);
    let doc = mine(&csv_path);
    assert_eq!(doc["params"]["min_count"].as_u64(), Some(400));
    let eps = found(&doc);
    let short = (0.004, 0.006);
    let long = (0.009, 0.011);
    let abcd: Vec<String> = ["A", "B", "C", "D"].map(String::from).to_vec();

    let hit = eps
        .iter()
        .find(|(labels, ivs, _)| *labels == abcd && *ivs == [short; 3])
        .unwrap_or_else(|| panic!("A→B→C→D with (4, 6] ms gaps is not among {eps:#?}"));
    assert!(hit.2 >= 400, "{hit:?}");

    // The count is the exact non-overlapped count of the library's counter.
    let stream = read(&csv_path);
    let iv = Interval::new(short.0, short.1).unwrap();
    let types: Vec<EventType> = abcd
        .iter()
        .map(|l| stream.alphabet().get(l).unwrap())
        .collect();
    let episode = Episode::new(types, vec![iv; 3]);
    assert_eq!(count_exact(&TypeIndex::new(&stream), &episode), hit.2);

    // No false positives at level 4: every 4-node episode is four consecutive neurons of an
    // embedded chain, with that chain's delay window at every gap.
    let chains: [(&str, (f64, f64)); 2] = [("ABCD", short), ("EFGHIJKL", long)];
    let level4: Vec<_> = eps.iter().filter(|(l, _, _)| l.len() == 4).collect();
    assert!(level4.len() >= 2, "{level4:#?}");
    for (labels, ivs, _) in &level4 {
        let word: String = labels.concat();
        assert!(
            chains
                .iter()
                .any(|(chain, delay)| chain.contains(&word) && ivs.iter().all(|iv| iv == delay)),
            "{labels:?} {ivs:?} is not a window of an embedded chain"
        );
    }
    assert!(
        level4
            .iter()
            .any(|(l, ivs, _)| l.concat() == "EFGH" && ivs.iter().all(|iv| *iv == long)),
        "the long chain's first window E→F→G→H is found: {level4:#?}"
    );

    // The NWB copy mines to the same episodes and counts, under the unit ids 0..25.
    // Ties in count are ordered by dense type id, which differ between the two files (CSV:
    // first appearance; NWB: unit order), so compare level by level as sorted lists.
    let nwb_doc = mine(&generate(dir.path(), "sym26.nwb", 3, Some("nwb")));
    let mut renamed: Found = found(&nwb_doc)
        .into_iter()
        .map(|(l, ivs, c)| (l.iter().map(|s| letter(s)).collect(), ivs, c))
        .collect();
    let mut eps = eps;
    for list in [&mut renamed, &mut eps] {
        list.sort_by(|a, b| {
            (a.0.len(), &a.0, &a.2)
                .cmp(&(b.0.len(), &b.0, &b.2))
                .then(a.1.partial_cmp(&b.1).unwrap())
        });
    }
    assert_eq!(renamed, eps);
    assert_eq!(nwb_doc["levels"].as_array().unwrap().len(), 4);
}

/// `synfire generate neuropixels` writes the library's dense preset: the same stream as
/// `synth::generate_dense`, 300 units labelled `u0`…`u299`.
#[test]
fn the_neuropixels_preset_is_the_library_stream() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("np.csv");
    let args = [
        "generate",
        "neuropixels",
        "--seed",
        "4",
        "-o",
        path.to_str().unwrap(),
    ];
    assert_success(&synfire(args), "generate neuropixels");
    let written = read(&path);
    let (want, _) =
        synfire::synth::generate_dense(&synfire::synth::DenseParams::neuropixels(4)).unwrap();
    assert_eq!(written.len(), want.len());
    assert_eq!(written.alphabet().len(), 300);
    let labels = |s: &EventStream| -> Vec<String> {
        s.types()
            .iter()
            .map(|t| s.alphabet().label(*t).to_owned())
            .collect()
    };
    assert_eq!(labels(&written), labels(&want));
    for (a, b) in written.times().iter().zip(want.times()) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
}

/// `synfire generate session` takes the session options (here a 20-unit, 10 s session with
/// shared up/down states) and writes the library's stream for them; the other presets
/// refuse them.
#[test]
fn the_session_preset_takes_its_options() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("session.csv");
    let args = [
        "generate",
        "session",
        "--units",
        "20",
        "--seconds",
        "10",
        "--chains",
        "2",
        "--comodulation",
        "up-down",
        "--seed",
        "3",
        "-o",
        path.to_str().unwrap(),
    ];
    let out = synfire(args);
    assert_success(&out, &args.join(" "));
    let stream = read(&path);
    assert_eq!(stream.alphabet().len(), 20);
    assert!(stream.times().iter().all(|&t| (0.0..10.0).contains(&t)));
    // The library's stream for the same options, spike for spike.
    let mut p = synfire::synth::DenseParams::session(3);
    p.units = 20;
    p.duration_s = 10.0;
    p.chains =
        synfire::synth::planted_chains(20, 2, (3, 4), &synfire::synth::dense::SESSION_WINDOWS_S)
            .unwrap();
    p.up_down = Some(synfire::synth::UpDownStates::slow_wave());
    let (expected, _) = synfire::synth::generate_dense(&p).unwrap();
    assert_eq!(stream.len(), expected.len());

    let out = synfire([
        "generate",
        "sym26",
        "--units",
        "5",
        "-o",
        path.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`session` preset only"), "{err}");
}
