//! `synfire mine --surrogates …`: the significance fields in JSON and text, reproducibility by
//! seed, the listing options, and clear errors for bad options. The procedures' statistics are
//! tested in `tests/significance.rs`; here the command line must carry exactly what the library
//! computes.

mod common;
use common::synfire;
use std::path::{Path, PathBuf};

use serde_json::Value;
use synfire::episode::{Interval, MinerConfig, Threshold, mine};
use synfire::event::Ordering;
use synfire::significance::{Correction, SignificanceConfig, test_episodes};
use tempfile::TempDir;

/// The real 15-unit fixture (98,794 spikes over about 1200 s).
const A2929: &str = "fixtures/spikes/A2929-200711/A2929-200711.nwb";
const INTERVALS: &str = "0.000-0.005,0.005-0.010";

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// `synfire mine` of A2929 up to `max_level` nodes (min count 300) with `extra` options.
fn mine_a2929(max_level: &str, extra: &[&str]) -> std::process::Output {
    let input = fixture(A2929);
    let mut args = vec![
        "mine",
        input.to_str().unwrap(),
        "--intervals",
        INTERVALS,
        "--min-count",
        "300",
        "--max-level",
        max_level,
        "-q",
    ];
    args.extend_from_slice(extra);
    synfire(&args)
}

/// `synfire mine` of A2929 at level 2 with `extra` options.
fn mine_level2(extra: &[&str]) -> std::process::Output {
    mine_a2929("2", extra)
}

/// The JSON document of `synfire mine` of A2929 up to 3 nodes with `extra` options.
fn run_json(extra: &[&str]) -> Value {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(extra);
    let out = mine_a2929("3", &args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON document")
}

/// The library's `max-t` on A2929 with `run_json`'s settings and `SIG`'s test (and
/// `test_top`, `sample_split`): the stream and the result.
fn library_max_t(
    test_top: Option<usize>,
    sample_split: Option<f64>,
) -> (
    synfire::event::EventStream,
    synfire::significance::SignificanceResult,
) {
    let stream = synfire::read_spikes(&fixture(A2929), Ordering::RequireSorted).unwrap();
    let mut cfg = MinerConfig::new(
        Interval::parse_list(INTERVALS).unwrap(),
        Threshold::MinCount(300),
    );
    cfg.max_level = 3;
    let data = mine(&stream, &cfg).unwrap();
    let sig = SignificanceConfig {
        method: "dither:0.01".parse().unwrap(),
        n_surrogates: 19,
        alpha: 0.1,
        correction: Correction::MaxT,
        seed: 0,
        test_top,
        watch: None,
        trials: None,
        significant_only: false,
        sample_split,
    };
    let lib = test_episodes(&stream, &cfg, &data, &sig).unwrap();
    (stream, lib)
}

/// The standard output of a command that must have succeeded.
fn succeeded(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The cells of the table rows of `text` that start with `prefix`.
fn table_rows<'a>(text: &'a str, prefix: &str) -> Vec<Vec<&'a str>> {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect()
}

const SIG: [&str; 8] = [
    "--surrogates",
    "dither:0.01",
    "--n-surrogates",
    "19",
    "--alpha",
    "0.1",
    "--correction",
    "max-t",
];

#[test]
fn json_carries_the_library_s_tests_with_the_documented_names() {
    let doc = run_json(&SIG);
    let sig = &doc["significance"];
    assert_eq!(sig["method"], "dither:0.01");
    assert_eq!(sig["n_surrogates"], 19);
    assert_eq!(sig["correction"], "max-t");
    assert_eq!(sig["seed"], 0);
    // The library on the same input and settings.
    let (_, lib) = library_max_t(None, None);
    assert_eq!(sig["tested"], lib.tests.len());
    assert!(!lib.tests.is_empty());
    let episodes = doc["episodes"].as_array().unwrap();
    let tested: Vec<&Value> = episodes
        .iter()
        .filter(|e| e.get("p_value").is_some())
        .collect();
    assert_eq!(tested.len(), lib.tests.len());
    for (e, t) in tested.iter().zip(&lib.tests) {
        assert_eq!(e["count"], t.count);
        for (name, v) in [
            ("surrogate_mean", t.stats.surrogate_mean),
            ("surrogate_std", t.stats.surrogate_std),
            ("statistic", t.stats.statistic),
            ("p_value", t.stats.p_value),
            ("p_adjusted", t.stats.p_adjusted),
        ] {
            assert!(
                (e[name].as_f64().unwrap() - v).abs() <= 1e-12 * v.abs().max(1.0),
                "{name}: {e} vs {t:?}"
            );
        }
        assert_eq!(e["significant"], t.stats.significant);
    }
    // Single units are never tested.
    assert!(
        episodes
            .iter()
            .filter(|e| e["types"].as_array().unwrap().len() == 1)
            .all(|e| e.get("significant").is_none())
    );
    assert_eq!(
        sig["significant"],
        lib.tests.iter().filter(|t| t.stats.significant).count()
    );
}

/// A run stopped by a limit tests the levels it finished, with surrogates mined to the same
/// depth: the same tests, bit for bit, as a run asked for those levels only (issue 45).
#[test]
fn a_truncated_run_tests_the_levels_it_finished() {
    // At min count 150, level 3 has more candidates than level 2 (1,979 against 450).
    let input = fixture(A2929);
    let json = |max_level: &str, extra: &[&str]| -> Value {
        let mut args = vec![
            "mine",
            input.to_str().unwrap(),
            "--intervals",
            INTERVALS,
            "--min-count",
            "150",
            "--max-level",
            max_level,
            "-q",
            "--format",
            "json",
        ];
        args.extend_from_slice(extra);
        let out = synfire(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON document")
    };
    let plain = json("3", &[]);
    let level3 = plain["levels"][2]["candidates"].as_u64().unwrap();
    let limit = (level3 - 1).to_string();
    let mut extra = SIG.to_vec();
    extra.extend(["--max-candidates", limit.as_str()]);
    let cut = json("3", &extra);
    assert_eq!(cut["truncated"]["level"], 3, "{}", cut["truncated"]);
    let two = json("2", &SIG);
    assert!(two["significance"]["tested"].as_u64().unwrap() > 0);
    assert_eq!(cut["significance"], two["significance"]);
    assert_eq!(cut["episodes"], two["episodes"]);
}

#[test]
fn a_seed_reproduces_and_significant_only_lists_exactly_the_significant() {
    let a = run_json(&SIG);
    let b = run_json(&SIG);
    assert_eq!(
        a["episodes"], b["episodes"],
        "the same seed gives the same p-values"
    );
    let mut with_seed = SIG.to_vec();
    with_seed.extend(["--seed", "9"]);
    let c = run_json(&with_seed);
    let means = |d: &Value| -> Vec<f64> {
        d["episodes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["surrogate_mean"].as_f64())
            .collect()
    };
    assert_ne!(means(&a), means(&c), "another seed, other surrogates");
    let mut only = SIG.to_vec();
    only.push("--significant-only");
    let s = run_json(&only);
    let listed = s["episodes"].as_array().unwrap();
    let expected: Vec<&Value> = a["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["significant"] == true)
        .collect();
    assert_eq!(listed.len(), expected.len());
    assert!(listed.iter().all(|e| e["significant"] == true));
}

#[test]
fn text_output_marks_each_tested_episode() {
    let out = mine_level2(&[
        "--surrogates",
        "shift:0.5",
        "--n-surrogates",
        "9",
        "--correction",
        "fdr-bh",
        "--test-top",
        "5",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("# significance: fdr-bh, 9 surrogates (shift:0.5, seed 0), alpha 0.05"),
        "{text}"
    );
    // 9 surrogates for 5 tests: the smallest p-value 0.1 cannot pass α/m = 0.01.
    assert!(
        text.contains("# warning: 9 surrogates for 5 tests"),
        "{text}"
    );
    let marked = text
        .lines()
        .filter(|l| l.contains(" | surrogate_mean "))
        .count();
    assert_eq!(marked, 5, "{text}");
}

#[test]
fn watch_list_and_trials_are_read_and_bad_ones_named() {
    let dir = TempDir::new().unwrap();
    let base = |extra: &[&str]| {
        let mut args = vec!["--format", "json"];
        args.extend_from_slice(extra);
        mine_level2(&args)
    };
    // A watch list in the text output's form: exactly those episodes are tested.
    let doc = run_json(&[]);
    let labels = |e: &Value| -> Vec<String> {
        e["labels"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_owned())
            .collect()
    };
    let pairs: Vec<&Value> = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| labels(e).len() == 2)
        .take(3)
        .collect();
    let lines: Vec<String> = pairs
        .iter()
        .map(|e| {
            let l = labels(e);
            let iv = &e["intervals_s"][0];
            format!(
                "{}-[{:.6},{:.6}]-{} : {}",
                l[0],
                iv[0].as_f64().unwrap(),
                iv[1].as_f64().unwrap(),
                l[1],
                e["count"]
            )
        })
        .collect();
    let watch = dir.path().join("watch.txt");
    std::fs::write(&watch, format!("# watch list\n{}\n", lines.join("\n"))).unwrap();
    let out = base(&[
        "--surrogates",
        "dither:0.01",
        "--n-surrogates",
        "9",
        "--correction",
        "holm",
        "--watch",
        watch.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["significance"]["tested"], 3);
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "nosuchunit-[0.000000,0.005000]-u1\n").unwrap();
    let out = base(&[
        "--surrogates",
        "dither",
        "--correction",
        "holm",
        "--watch",
        bad.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("bad.txt line 1") && err.contains("nosuchunit"),
        "{err}"
    );
    // Trials: trial-shift needs them; a bad line is named.
    let out = base(&["--surrogates", "trial-shift:0.1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--trials"), "{err}");
    let trials = dir.path().join("trials.csv");
    std::fs::write(&trials, "0,100\n150,300\n").unwrap();
    let out = base(&[
        "--surrogates",
        "trial-shift:0.1",
        "--n-surrogates",
        "5",
        "--correction",
        "max-t",
        "--trials",
        trials.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&trials, "0,100\n50;60\n").unwrap();
    let out = base(&[
        "--surrogates",
        "trial-shift:0.1",
        "--trials",
        trials.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("line 2"), "{err}");
}

#[test]
fn bad_significance_options_name_the_option() {
    for (extra, needle) in [
        (
            vec!["--surrogates", "jitter:0.01"],
            "unknown surrogate method `jitter`",
        ),
        (
            vec!["--surrogates", "dither:-2"],
            "Δ must be a positive number",
        ),
        (vec!["--surrogates", "dither", "--alpha", "1.5"], "--alpha"),
        (
            vec!["--surrogates", "dither", "--n-surrogates", "0"],
            "--n-surrogates",
        ),
        (
            vec!["--surrogates", "dither", "--correction", "fdr"],
            "unknown correction",
        ),
        (vec!["--n-surrogates", "10"], "--surrogates"),
        (
            vec!["--surrogates", "dither", "--sample-split", "1.5"],
            "`--sample-split 1.5`: the fraction must be strictly between 0 and 1",
        ),
        (
            vec![
                "--surrogates",
                "dither",
                "--correction",
                "spectrum",
                "--sample-split",
                "0.5",
            ],
            "`--sample-split 0.5`: works with the `guided` and `max-t` corrections only, not `spectrum`",
        ),
    ] {
        let out = mine_level2(&extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} succeeded");
        assert!(err.contains(needle), "{extra:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// `--sample-split`: the JSON document carries the split and every tested episode's
/// `test_count`, equal to the library's sample-split test; the text output says how the
/// family was chosen and shows `test_count` on each tested line.
#[test]
fn sample_split_is_carried_to_json_and_text() {
    let mut extra: Vec<&str> = SIG.to_vec();
    extra.extend(["--sample-split", "0.5", "--test-top", "10"]);
    let doc = run_json(&extra);
    let sig = &doc["significance"];
    let split = &sig["sample_split"];
    assert_eq!(split["fraction"], 0.5);
    assert_eq!(split["family"], sig["tested"]);
    let (stream, lib) = library_max_t(Some(10), Some(0.5));
    let summary = lib.sample_split.as_ref().unwrap();
    assert_eq!(split["screened"], summary.screened);
    assert_eq!(split["test_events"], summary.test_events);
    assert_eq!(
        summary.selection_events + summary.test_events,
        stream.len(),
        "the parts hold every event once"
    );
    assert!(summary.screened > 10, "A2929 screens more than the family");
    assert_eq!(summary.screen_surrogates, 10, "so the family was ranked");
    assert_eq!(lib.tests.len(), 10);
    let tested: Vec<&Value> = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("p_value").is_some())
        .collect();
    assert_eq!(tested.len(), 10, "every family episode is listed");
    for e in &tested {
        let t = lib
            .tests
            .iter()
            .find(|t| {
                let types: Vec<u64> = t.episode.types().iter().map(|x| u64::from(x.0)).collect();
                let ivs: Vec<[f64; 2]> = t
                    .episode
                    .intervals()
                    .iter()
                    .map(|iv| [iv.low(), iv.high()])
                    .collect();
                let json_types: Vec<u64> = e["types"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_u64().unwrap())
                    .collect();
                let json_ivs: Vec<[f64; 2]> =
                    serde_json::from_value(e["intervals_s"].clone()).unwrap();
                types == json_types && ivs == json_ivs
            })
            .unwrap_or_else(|| panic!("{e} is not among the library's tests"));
        assert_eq!(e["test_count"], t.count);
        assert!(
            e["count"].as_u64().unwrap() >= t.count,
            "the whole recording's count is at least the test part's: {e}"
        );
        assert_eq!(e["significant"], t.stats.significant);
    }
    let out = mine_a2929("3", &extra);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# sample split at "), "{text}");
    assert_eq!(text.matches(" | test_count ").count(), 10, "{text}");
}

/// `synfire bench significance` prints one row per workload and procedure, its tested count
/// being the workload's frequent episodes of two or more nodes.
#[test]
fn bench_significance_prints_a_row_per_procedure() {
    let out = synfire([
        "bench",
        "significance",
        "--workload",
        "sym26",
        "--n-surrogates",
        "3",
        "--max-level",
        "2",
        "--correction",
        "max-t,fdr-bh",
    ]);
    let text = succeeded(out);
    let rows = table_rows(&text, "| Sym26");
    assert_eq!(rows.len(), 2, "{text}");
    // The workload's settings (`bench episodes`' Sym26) at level 2.
    let stream = synfire::synth::generate(&synfire::synth::SynthParams::sym26(1)).unwrap();
    let mut cfg = MinerConfig::new(
        Interval::parse_list("0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016").unwrap(),
        Threshold::MinCount(400),
    );
    cfg.max_level = 2;
    let frequent_pairs = mine(&stream, &cfg)
        .unwrap()
        .episodes
        .iter()
        .filter(|f| f.episode.len() == 2)
        .count();
    assert_eq!(rows[0][3], "max-t");
    assert_eq!(rows[1][3], "fdr-bh");
    assert_eq!((rows[0][4], rows[1][4]), ("cpu", "cpu"));
    assert_eq!(rows[0][5], frequent_pairs.to_string(), "{text}");
    assert_eq!(
        rows[0][5], rows[1][5],
        "both procedures test the frequent episodes"
    );
}

/// `synfire bench power` prints one row per cell, and a strongly coupled chain (3 Hz units,
/// evoke probability 0.3: about 100 excess occurrences against about 10 by chance) is found in
/// every seed while an uncoupled one (probability 0) is not.
#[test]
fn bench_power_finds_a_strong_chain_and_not_an_absent_one() {
    for (split, correction) in [(None, "max-t"), (Some("0.5"), "max-t"), (None, "guided")] {
        let mut args = vec![
            "bench",
            "power",
            "--rates-hz",
            "3",
            "--evoke",
            "0,0.3",
            "--units",
            "12",
            "--seeds",
            "2",
            "--n-surrogates",
            "39",
            "--correction",
            correction,
        ];
        if let Some(f) = split {
            args.extend(["--sample-split", f]);
        }
        let out = synfire(&args);
        let text = succeeded(out);
        let rows = table_rows(&text, &format!("| {correction} | 3 |"));
        assert_eq!(rows.len(), 2, "{text}");
        assert_eq!(
            (rows[0][3], rows[0][7]),
            ("0", "0 of 2"),
            "{split:?} {correction} {text}"
        );
        assert_eq!(
            (rows[1][3], rows[1][7]),
            ("0.3", "2 of 2"),
            "{split:?} {correction} {text}"
        );
        if split.is_some() || correction == "guided" {
            // The test part's count of the strong link stands well above its surrogates'.
            let (count, mean) = rows[1][6].split_once(" vs ").expect("count vs mean");
            let (count, mean): (f64, f64) = (count.parse().unwrap(), mean.parse().unwrap());
            assert!(count > 2.0 * mean, "{text}");
        }
    }
}

/// `synfire bench session` on a small session (30 units, 60 s, S = 19): one row whose size
/// columns are the generated session's, whose procedure is `synfire mine`'s default, and
/// whose chain column counts the planted chains found whole: both chains when they are
/// activated at 2 Hz (120 whole occurrences against none by chance), none when they are not.
#[test]
fn bench_session_counts_the_planted_chains() {
    use synfire::synth::{DenseParams, generate_dense, planted_chains};
    let run = |chain_rate: &str| {
        let out = synfire([
            "bench",
            "session",
            "--units",
            "30",
            "--seconds",
            "60",
            "--chains",
            "2",
            "--chain-rate-hz",
            chain_rate,
            "--session-seed",
            "4",
            "--n-surrogates",
            "99",
            "--surrogates",
            "dither-dead-time:0.015",
            "--device",
            "cpu",
        ]);
        succeeded(out)
    };
    let text = run("2");
    let rows = table_rows(&text, "| 30 |");
    assert_eq!(rows.len(), 1, "{text}");
    let row = &rows[0];
    // The same session, generated here: the spikes column is its length.
    let mut p = DenseParams::session(4);
    p.units = 30;
    p.duration_s = 60.0;
    p.chain_activation_hz = 2.0;
    p.chains = planted_chains(30, 2, (3, 4), &synfire::synth::dense::SESSION_WINDOWS_S).unwrap();
    let (stream, _) = generate_dense(&p).unwrap();
    assert_eq!(row[1], "30");
    assert_eq!(row[2], "60");
    assert_eq!(row[3], stream.len().to_string(), "{text}");
    assert_eq!(
        row[4],
        synfire::significance::options::DEFAULT_CORRECTION.name(),
        "{text}"
    );
    assert_eq!(row[5], "99");
    let listed: usize = row[8].parse().unwrap();
    let significant: usize = row[9].parse().unwrap();
    assert!(significant >= 2 && listed >= significant, "{text}");
    assert_eq!(row[10], "2/2", "{text}");
    let text = run("0");
    let rows = table_rows(&text, "| 30 |");
    assert_eq!(rows[0][10], "0/2", "{text}");
}
