//! End-to-end tests of `synfire mine`: the binary is run on the real NWB fixtures and on small
//! CSV files, and its JSON and text output are checked against independent computations (the
//! units table read straight from the file with the hdf5 crate, the library's exact counter,
//! and a brute-force search for frequent episodes). Bad input must fail cleanly: non-zero exit,
//! no panic, and a message that names the file, the line or the option at fault.
//!
//! The JSON document is specified in `docs/mine-json.md`.

mod common;
use common::synfire;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use serde_json::Value;
use synfire::episode::{Episode, Interval, TypeIndex, count_exact, count_preelim};
use synfire::event::{EventStream, EventType, Ordering};
use synfire::ingest::read_spikes;
use tempfile::TempDir;

/// The real 15-unit fixture (98,794 spikes over about 1200 s).
const A2929: &str = "fixtures/spikes/A2929-200711/A2929-200711.nwb";
/// The real 3-unit fixture (unit ids 6, 191, 206).
const A8604: &str = "fixtures/spikes/A8604-211122/A8604-211122.nwb";
/// The intervals of the standard run, as given on the command line.
const INTERVALS: &str = "0.000-0.005,0.005-0.010,0.010-0.020";
/// The support of the standard run, occurrences per second of the span.
const SUPPORT_PER_SECOND: f64 = 0.2;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit status {:?}\nstderr:\n{}",
        out.status,
        stderr(out)
    );
}

/// The arguments of the standard run on A2929 (without `--format`).
fn standard_args(input: &Path) -> Vec<String> {
    vec![
        "mine".into(),
        input.display().to_string(),
        "--intervals".into(),
        INTERVALS.into(),
        "--support".into(),
        SUPPORT_PER_SECOND.to_string(),
        "--support-per".into(),
        "seconds".into(),
        "--max-level".into(),
        "3".into(),
        "-q".into(),
    ]
}

/// Runs `mine` with `args` plus `--format json` and parses standard output.
fn mine_json(args: &[String]) -> (Value, String) {
    let mut args = args.to_vec();
    args.extend(["--format".into(), "json".into()]);
    let out = synfire(&args);
    assert_success(&out, &format!("synfire {}", args.join(" ")));
    let text = stdout(&out);
    let doc = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    (doc, text)
}

/// The standard two-pass JSON run on A2929, computed once: (document, raw text).
fn standard() -> &'static (Value, String) {
    static DOC: OnceLock<(Value, String)> = OnceLock::new();
    DOC.get_or_init(|| mine_json(&standard_args(&fixture(A2929))))
}

/// The A2929 stream as the library reads it, computed once.
fn a2929_stream() -> &'static EventStream {
    static STREAM: OnceLock<EventStream> = OnceLock::new();
    STREAM.get_or_init(|| read_spikes(&fixture(A2929), Ordering::RequireSorted).unwrap())
}

fn intervals() -> Vec<Interval> {
    Interval::parse_list(INTERVALS).unwrap()
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set(items: &[&'static str]) -> BTreeSet<&'static str> {
    items.iter().copied().collect()
}

/// True when two f64 read back from JSON are equal up to serde_json's best-effort parsing (it
/// may be 1 ulp off without its `float_roundtrip` feature).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 4.0 * f64::EPSILON * a.abs().max(b.abs())
}

/// One JSON episode, with its intervals as indices into the configured list.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Ep {
    types: Vec<u32>,
    intervals: Vec<usize>,
}

impl Ep {
    fn episode(&self, ivs: &[Interval]) -> Episode {
        Episode::new(
            self.types.iter().map(|&t| EventType(t)).collect(),
            self.intervals.iter().map(|&i| ivs[i]).collect(),
        )
    }
}

/// Parses the `episodes` array: (episode, labels, count). Every interval must be one of `ivs`.
fn episodes(doc: &Value, ivs: &[Interval]) -> Vec<(Ep, Vec<String>, u64)> {
    doc["episodes"]
        .as_array()
        .expect("`episodes` is an array")
        .iter()
        .map(|e| {
            let types: Vec<u32> = e["types"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| u32::try_from(u64_of(t)).unwrap())
                .collect();
            let labels: Vec<String> = e["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_owned())
                .collect();
            let intervals: Vec<usize> = e["intervals_s"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pair| {
                    let pair = pair.as_array().unwrap();
                    assert_eq!(pair.len(), 2, "an interval is [low, high]: {e}");
                    let (lo, hi) = (f64_of(&pair[0]), f64_of(&pair[1]));
                    ivs.iter()
                        .position(|iv| close(iv.low(), lo) && close(iv.high(), hi))
                        .unwrap_or_else(|| panic!("interval [{lo}, {hi}] is not configured: {e}"))
                })
                .collect();
            assert_eq!(labels.len(), types.len(), "one label per node: {e}");
            assert_eq!(intervals.len() + 1, types.len(), "N - 1 intervals: {e}");
            (Ep { types, intervals }, labels, u64_of(&e["count"]))
        })
        .collect()
}

/// `unit id -> number of distinct spike times`, straight from the NWB units table.
fn distinct_spike_times_per_unit(path: &Path) -> BTreeMap<String, u64> {
    let file = hdf5::File::open(path).unwrap();
    let ids = file.dataset("units/id").unwrap().read_raw::<i64>().unwrap();
    let index = file
        .dataset("units/spike_times_index")
        .unwrap()
        .read_raw::<u64>()
        .unwrap();
    let times = file
        .dataset("units/spike_times")
        .unwrap()
        .read_raw::<f64>()
        .unwrap();
    assert_eq!(ids.len(), index.len());
    assert_eq!(*index.last().unwrap() as usize, times.len());
    let mut start = 0usize;
    ids.iter()
        .zip(&index)
        .map(|(id, &end)| {
            let end = usize::try_from(end).unwrap();
            let mut unit = times[start..end].to_vec();
            start = end;
            unit.sort_by(f64::total_cmp);
            unit.dedup();
            (id.to_string(), unit.len() as u64)
        })
        .collect()
}

#[test]
fn json_document_has_every_documented_key_and_value() {
    let (doc, text) = standard();
    let stream = a2929_stream();

    assert_eq!(
        keys(doc),
        set(&[
            "input",
            "events",
            "span_s",
            "params",
            "levels",
            "complete",
            "truncated",
            "warnings",
            "episodes"
        ])
    );
    assert_eq!(doc["complete"], true);
    assert!(doc["truncated"].is_null());
    assert_eq!(
        doc["warnings"],
        serde_json::json!([]),
        "a real recording looks right"
    );
    // Field order of the pretty-printed document is the documented one.
    let positions: Vec<usize> = [
        "input",
        "events",
        "span_s",
        "params",
        "levels",
        "complete",
        "truncated",
        "warnings",
        "episodes",
    ]
    .iter()
    .map(|k| {
        text.find(&format!("\n  \"{k}\":"))
            .unwrap_or_else(|| panic!("no top-level `{k}`"))
    })
    .collect();
    assert!(positions.is_sorted(), "top-level order {positions:?}");
    assert!(text.ends_with("}\n"), "the document ends with a newline");

    assert_eq!(doc["input"], fixture(A2929).display().to_string());
    assert_eq!(u64_of(&doc["events"]), 98_794);
    assert_eq!(u64_of(&doc["events"]), stream.len() as u64);
    let span = f64_of(&doc["span_s"]);
    assert!(close(span, stream.span()), "{span} vs {}", stream.span());

    let params = &doc["params"];
    assert_eq!(
        keys(params),
        set(&[
            "intervals",
            "interval_notation",
            "threshold",
            "max_level",
            "strategy",
            "bounds",
            "max_candidates",
            "time_budget_s",
            "min_count",
            "event_types"
        ])
    );
    assert_eq!(params["bounds"], true);
    assert!(params["max_candidates"].is_null() && params["time_budget_s"].is_null());
    let ivs: Vec<(f64, f64)> = params["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (f64_of(&p[0]), f64_of(&p[1])))
        .collect();
    assert_eq!(ivs, vec![(0.0, 0.005), (0.005, 0.01), (0.01, 0.02)]);
    assert_eq!(keys(&params["threshold"]), set(&["kind", "value"]));
    assert_eq!(params["threshold"]["kind"], "per_second");
    assert_eq!(f64_of(&params["threshold"]["value"]), SUPPORT_PER_SECOND);
    assert_eq!(u64_of(&params["max_level"]), 3);
    assert_eq!(params["strategy"], "two_pass");
    assert_eq!(u64_of(&params["event_types"]), 15);
    let min_count = u64_of(&params["min_count"]);
    assert_eq!(min_count, (SUPPORT_PER_SECOND * span).ceil() as u64);
    assert_eq!(min_count, 240, "ceil(0.2 * 1199.9595)");

    let levels = doc["levels"].as_array().unwrap();
    assert!(!levels.is_empty() && levels.len() <= 3, "{levels:?}");
    let eps = episodes(doc, &intervals());
    for (i, l) in levels.iter().enumerate() {
        assert_eq!(
            keys(l),
            set(&[
                "level",
                "candidates",
                "removed_by_bounds",
                "eliminated_by_preelim",
                "frequent",
                "seconds"
            ])
        );
        let level = u64_of(&l["level"]);
        assert_eq!(level, i as u64 + 1, "levels are 1, 2, 3, …");
        let (cands, elim, freq) = (
            u64_of(&l["candidates"]),
            u64_of(&l["eliminated_by_preelim"]),
            u64_of(&l["frequent"]),
        );
        let removed = u64_of(&l["removed_by_bounds"]);
        assert!(removed + elim + freq <= cands, "{l}");
        let seconds = f64_of(&l["seconds"]);
        assert!(seconds.is_finite() && seconds >= 0.0, "{l}");
        let at_level = eps
            .iter()
            .filter(|e| e.0.types.len() as u64 == level)
            .count();
        assert_eq!(at_level as u64, freq, "`frequent` of level {level}");
    }
    assert_eq!(
        u64_of(&levels[0]["candidates"]),
        15,
        "one candidate per unit"
    );
    assert_eq!(u64_of(&levels[0]["eliminated_by_preelim"]), 0);
    let total: u64 = levels.iter().map(|l| u64_of(&l["frequent"])).sum();
    assert_eq!(
        total,
        eps.len() as u64,
        "the levels' `frequent` sum to the episodes"
    );
    assert_eq!(
        levels.len(),
        3,
        "this run finds episodes at every level up to 3"
    );

    for e in doc["episodes"].as_array().unwrap() {
        assert_eq!(
            keys(e),
            set(&["labels", "types", "intervals_s", "intervals", "count"])
        );
    }
}

#[test]
fn level_one_is_every_unit_with_enough_distinct_spike_times() {
    let (doc, _) = standard();
    let min_count = u64_of(&doc["params"]["min_count"]);
    let expected: BTreeMap<String, u64> = distinct_spike_times_per_unit(&fixture(A2929))
        .into_iter()
        .filter(|(_, n)| *n >= min_count)
        .collect();
    assert_eq!(
        expected.len(),
        15,
        "every A2929 unit fires more than 240 times"
    );
    let found: BTreeMap<String, u64> = episodes(doc, &intervals())
        .into_iter()
        .filter(|(e, _, _)| e.types.len() == 1)
        .map(|(_, labels, count)| (labels[0].clone(), count))
        .collect();
    assert_eq!(found, expected);
    // And the units' spike counts of the fixture's units.csv (no unit has two spikes at the
    // same time): 19,819 for the busiest unit 6, 1,282 for the quietest unit 9.
    assert_eq!(found["6"], 19_819);
    assert_eq!(found["9"], 1_282);
}

#[test]
fn every_episode_is_frequent_and_its_count_is_exact() {
    let (doc, _) = standard();
    let stream = a2929_stream();
    let index = TypeIndex::new(stream);
    let ivs = intervals();
    let min_count = u64_of(&doc["params"]["min_count"]);
    let eps = episodes(doc, &ivs);
    assert!(eps.len() > 100, "{} episodes", eps.len());
    for (ep, labels, count) in &eps {
        assert!(*count >= min_count, "{ep:?} count {count} < {min_count}");
        assert!(ep.types.len() <= 3, "beyond --max-level: {ep:?}");
        for (&ty, label) in ep.types.iter().zip(labels) {
            assert_eq!(stream.alphabet().label(EventType(ty)), label, "{ep:?}");
        }
        let episode = ep.episode(&ivs);
        assert_eq!(count_exact(&index, &episode), *count, "{labels:?} {ep:?}");
        assert!(
            count_preelim(&index, &episode) >= *count,
            "Theorem 1: {ep:?}"
        );
    }
}

#[test]
fn levels_two_and_three_are_complete() {
    // Brute force: count every 2-node episode over all types and intervals, then every
    // extension of a frequent 2-node episode by one node. A 3-node episode is never more
    // frequent than its 2-node prefix, so this finds every frequent 3-node episode.
    let (doc, _) = standard();
    let stream = a2929_stream();
    let index = TypeIndex::new(stream);
    let ivs = intervals();
    let min_count = u64_of(&doc["params"]["min_count"]);
    let k = u32::try_from(stream.alphabet().len()).unwrap();
    let reported: BTreeMap<Ep, u64> = episodes(doc, &ivs)
        .into_iter()
        .map(|(e, _, c)| (e, c))
        .collect();
    let at_level = |n: usize| -> BTreeMap<Ep, u64> {
        reported
            .iter()
            .filter(|(e, _)| e.types.len() == n)
            .map(|(e, c)| (e.clone(), *c))
            .collect()
    };

    let mut level2 = BTreeMap::new();
    for a in 0..k {
        for b in 0..k {
            for i in 0..ivs.len() {
                let ep = Ep {
                    types: vec![a, b],
                    intervals: vec![i],
                };
                let c = count_exact(&index, &ep.episode(&ivs));
                if c >= min_count {
                    level2.insert(ep, c);
                }
            }
        }
    }
    assert_eq!(level2, at_level(2), "frequent 2-node episodes");

    let mut level3 = BTreeMap::new();
    for prefix in level2.keys() {
        for c in 0..k {
            for i in 0..ivs.len() {
                let mut ep = prefix.clone();
                ep.types.push(c);
                ep.intervals.push(i);
                let n = count_exact(&index, &ep.episode(&ivs));
                if n >= min_count {
                    level3.insert(ep, n);
                }
            }
        }
    }
    assert!(!level3.is_empty());
    assert_eq!(level3, at_level(3), "frequent 3-node episodes");
}

#[test]
fn episodes_are_ordered_by_level_then_count_then_types() {
    let (doc, _) = standard();
    let ivs = intervals();
    let key = |(e, _, c): &(Ep, Vec<String>, u64)| {
        let bounds: Vec<(u64, u64)> = e
            .intervals
            .iter()
            .map(|&i| (ivs[i].low().to_bits(), ivs[i].high().to_bits()))
            .collect();
        (
            e.types.len(),
            std::cmp::Reverse(*c),
            e.types.clone(),
            bounds,
        )
    };
    let eps = episodes(doc, &ivs);
    for pair in eps.windows(2) {
        assert!(
            key(&pair[0]) < key(&pair[1]),
            "out of order or repeated: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

#[test]
fn one_pass_gives_the_same_episodes() {
    let (two_pass, _) = standard();
    let mut args = standard_args(&fixture(A2929));
    args.push("--one-pass".into());
    let (one_pass, _) = mine_json(&args);
    assert_eq!(one_pass["params"]["strategy"], "one_pass");
    assert_eq!(one_pass["episodes"], two_pass["episodes"]);
    assert_eq!(
        one_pass["params"]["min_count"],
        two_pass["params"]["min_count"]
    );
    let (l1, l2) = (
        one_pass["levels"].as_array().unwrap(),
        two_pass["levels"].as_array().unwrap(),
    );
    assert_eq!(l1.len(), l2.len());
    for (a, b) in l1.iter().zip(l2) {
        assert_eq!(a["candidates"], b["candidates"]);
        assert_eq!(a["frequent"], b["frequent"]);
        assert_eq!(
            u64_of(&a["eliminated_by_preelim"]),
            0,
            "one pass runs no PreElim"
        );
    }
    // The successor bounds remove the same candidates in both modes (before PreElim, which
    // the CPU never runs: its exact count from the prefix's ends is cheaper).
    for (a, b) in l1.iter().zip(l2) {
        assert_eq!(a["removed_by_bounds"], b["removed_by_bounds"]);
    }
    assert!(
        l2.iter().any(|l| u64_of(&l["removed_by_bounds"]) > 0),
        "the bounds remove candidates on this data"
    );
}

#[test]
fn text_format_lists_the_json_episodes_tdminer_style() {
    let (doc, _) = standard();
    let input = fixture(A2929);
    let out = synfire(standard_args(&input));
    assert_success(&out, "text format");
    let text = stdout(&out);
    let (comments, body): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('#'));
    assert!(
        text.lines()
            .take(comments.len())
            .all(|l| l.starts_with('#')),
        "comment lines come first"
    );

    let levels = doc["levels"].as_array().unwrap();
    assert_eq!(comments.len(), 3 + levels.len(), "{comments:#?}");
    assert_eq!(comments[0], format!("# synfire mine {}", input.display()));
    assert!(
        comments[1].starts_with("# events 98794, event types 15, span 1199.959 s, min count 240 "),
        "{}",
        comments[1]
    );
    assert_eq!(comments[2], "# intervals: (0,5]ms (5,10]ms (10,20]ms");
    for (line, l) in comments[3..].iter().zip(levels) {
        let prefix = format!(
            "# level {}: {} candidates, {} removed by bounds, {} eliminated by PreElim, {} \
             frequent, ",
            l["level"],
            l["candidates"],
            l["removed_by_bounds"],
            l["eliminated_by_preelim"],
            l["frequent"]
        );
        assert!(line.starts_with(&prefix), "{line:?} vs {prefix:?}");
    }

    let ivs = intervals();
    let expected: Vec<String> = episodes(doc, &ivs)
        .iter()
        .map(|(e, labels, count)| {
            let mut s = labels[0].clone();
            for (&i, label) in e.intervals.iter().zip(&labels[1..]) {
                s += &format!("-{}-{label}", ivs[i]);
            }
            format!("{s} : {count}")
        })
        .collect();
    assert_eq!(body.len(), expected.len(), "one line per episode");
    for (got, want) in body.iter().zip(&expected) {
        assert_eq!(got, want);
    }
    assert!(body.contains(&"6-(10,20]ms-6 : 5926"), "{body:?}");
}

#[test]
fn output_file_holds_the_same_document_as_stdout() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("result.json");
    let mut args = standard_args(&fixture(A2929));
    args.extend(["--format".into(), "json".into(), "--output".into()]);
    args.push(file.display().to_string());
    let out = synfire(&args);
    assert_success(&out, "--output");
    assert!(out.stdout.is_empty(), "nothing on stdout with --output");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.ends_with("}\n"));
    let mut from_file: Value = serde_json::from_str(&text).unwrap();
    let mut from_stdout = standard().0.clone();
    // Wall-clock seconds differ from run to run; everything else must be identical.
    for doc in [&mut from_file, &mut from_stdout] {
        for l in doc["levels"].as_array_mut().unwrap() {
            assert!(f64_of(&l["seconds"]) >= 0.0);
            l["seconds"] = Value::from(0.0);
        }
    }
    assert_eq!(from_file, from_stdout);
}

/// Runs `args`, expects a clean failure and returns stderr.
fn fails_cleanly(args: &[String]) -> String {
    let out = synfire(args);
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "{args:?} should fail\nstdout:\n{}",
        stdout(&out)
    );
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{args:?}: exit status {:?} (101 is a panic)\n{err}",
        out.status
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(
        out.stdout.is_empty(),
        "{args:?} wrote a result: {}",
        stdout(&out)
    );
    err
}

fn mine_args(input: &Path, rest: &[&str]) -> Vec<String> {
    let mut args = vec!["mine".to_owned(), input.display().to_string()];
    args.extend(rest.iter().map(|s| (*s).to_owned()));
    args
}

#[test]
fn missing_input_file_is_named() {
    let dir = TempDir::new().unwrap();
    for name in ["missing.nwb", "missing.csv"] {
        let path = dir.path().join(name);
        let err = fails_cleanly(&mine_args(&path, &["--intervals", "0-0.005", "-q"]));
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("No such file"), "{err}");
    }
    let path = dir.path().join("spikes.mat");
    std::fs::write(&path, "A,1\n").unwrap();
    let err = fails_cleanly(&mine_args(&path, &["--intervals", "0-0.005", "-q"]));
    assert!(
        err.contains("spikes.mat") && err.contains("`.mat`"),
        "{err}"
    );
}

#[test]
fn csv_with_a_bad_line_is_reported_by_file_and_line() {
    let dir = TempDir::new().unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "label,time\nA,0.1\n# a comment\nB,oops\nA,0.3\n",
            "line 4",
            &["`oops` is not a number"],
        ),
        ("A,0.1\nB,0.2\nB,0.3,4\n", "line 3", &["found 3"]),
        ("A,0.1\n,0.2\n", "line 2", &["label"]),
        ("A,0.1\nB,-0.2\n", "line 2", &["negative"]),
        ("A,0.5\nB,0.2\n", "line 2", &["--sort"]),
    ];
    for (i, (content, line, words)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.csv"));
        std::fs::write(&path, content).unwrap();
        let err = fails_cleanly(&mine_args(&path, &["--intervals", "0-0.5", "-q"]));
        let path_text = path.display().to_string();
        assert!(
            err.contains(&format!("{path_text}: {line}:")),
            "{content:?}: {err}"
        );
        for w in *words {
            assert!(err.contains(w), "{content:?}: `{w}` missing from {err}");
        }
    }
    // The unsorted file mines with `--sort`.
    let path = dir.path().join("bad4.csv");
    let out = synfire(mine_args(
        &path,
        &["--intervals", "0-0.5", "--min-count", "1", "--sort", "-q"],
    ));
    assert_success(&out, "--sort");
    assert!(stdout(&out).contains("\nB : 1\n"), "{}", stdout(&out));
}

#[test]
fn bad_options_fail_and_name_the_option() {
    let input = fixture(A2929);
    let dir = TempDir::new().unwrap();
    let unwritable = dir.path().join("no/such/dir/out.json");
    let unwritable = unwritable.display().to_string();
    let cases: [(&[&str], &[&str]); 8] = [
        (
            &["--intervals", "0.5-0.1"],
            &["--intervals", "0.5-0.1", "upper bound"],
        ),
        (
            &["--intervals", "abc"],
            &["--intervals", "`abc` is not an interval"],
        ),
        (&["--intervals", "0-0.1,0-0.1"], &["--intervals", "twice"]),
        (
            &["--intervals", "0-0.1", "--min-count", "0"],
            &["must be at least 1"],
        ),
        (
            &["--intervals", "0-0.1", "--support", "2"],
            &["--support", "(0, 1]"],
        ),
        (
            &["--intervals", "0-0.1", "--max-level", "0"],
            &["--max-level"],
        ),
        (
            &[
                "--intervals",
                "0-0.1",
                "--min-count",
                "5",
                "--support",
                "0.1",
            ],
            &["--min-count", "--support"],
        ),
        (
            &[
                "--intervals",
                "0-0.1",
                "--min-count",
                "100000",
                "-o",
                unwritable.as_str(),
            ],
            &["--output", unwritable.as_str()],
        ),
    ];
    for (rest, words) in cases {
        let mut args = mine_args(&input, rest);
        args.push("-q".into());
        let err = fails_cleanly(&args);
        for w in words {
            assert!(
                err.contains(w),
                "{rest:?}: `{w}` missing from stderr:\n{err}"
            );
        }
    }
}

/// `--min-count 0` is refused, but the message names the threshold's Rust debug form
/// (`bad support threshold MinCount(0): …`) rather than the option; likewise a non-positive
/// `--support` with `--support-per seconds`.
#[test]
fn threshold_errors_name_the_option() {
    let input = fixture(A2929);
    for (rest, option) in [
        (&["--min-count", "0"][..], "--min-count"),
        (
            &["--support", "0", "--support-per", "seconds"][..],
            "--support",
        ),
    ] {
        let mut args = mine_args(&input, &["--intervals", "0-0.1", "-q"]);
        args.extend(rest.iter().map(|s| (*s).to_owned()));
        let err = fails_cleanly(&args);
        assert!(
            err.contains(option),
            "{rest:?}: `{option}` missing from:\n{err}"
        );
    }
}

#[test]
fn a8604_fixture_mines() {
    let input = fixture(A8604);
    let args = mine_args(
        &input,
        &[
            "--intervals",
            INTERVALS,
            "--support",
            "0.05",
            "--support-per",
            "seconds",
            "--max-level",
            "4",
            "-q",
        ],
    );
    let (doc, _) = mine_json(&args);
    let stream = read_spikes(&input, Ordering::RequireSorted).unwrap();
    let index = TypeIndex::new(&stream);
    let ivs = intervals();
    assert_eq!(u64_of(&doc["events"]), 21_354);
    assert_eq!(u64_of(&doc["params"]["event_types"]), 3);
    let min_count = u64_of(&doc["params"]["min_count"]);
    assert_eq!(min_count, (0.05 * f64_of(&doc["span_s"])).ceil() as u64);

    let eps = episodes(&doc, &ivs);
    // Level 1: the three units, labelled by their NWB ids, typed by their position in
    // `/units/id`.
    let level1: Vec<(String, u32, u64)> = eps
        .iter()
        .filter(|(e, _, _)| e.types.len() == 1)
        .map(|(e, l, c)| (l[0].clone(), e.types[0], *c))
        .collect();
    let spikes = distinct_spike_times_per_unit(&input);
    assert_eq!(
        level1,
        vec![
            ("6".to_owned(), 0, spikes["6"]),
            ("206".to_owned(), 2, spikes["206"]),
            ("191".to_owned(), 1, spikes["191"]),
        ]
    );
    assert!(
        eps.iter().any(|(e, _, _)| e.types.len() == 4),
        "4-node episodes exist"
    );
    let levels = doc["levels"].as_array().unwrap();
    let total: u64 = levels.iter().map(|l| u64_of(&l["frequent"])).sum();
    assert_eq!(total, eps.len() as u64);
    for (ep, labels, count) in &eps {
        assert!(*count >= min_count);
        assert_eq!(count_exact(&index, &ep.episode(&ivs)), *count, "{labels:?}");
    }
}

#[test]
fn paper_example_stream_mines_as_in_section_2() {
    // Example (1) of §2: "at most two non-overlapped occurrences of A → B" and "exactly one
    // occurrence of A -(5,10]-> B -(10,15]-> C", namely (A,2), (B,8), (C,20).
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("paper.csv");
    std::fs::write(&path, "A,1\nA,2\nB,5\nB,8\nA,10\nA,13\nC,15\nB,18\nC,20\n").unwrap();
    let found = |intervals: &str| -> Vec<String> {
        let out = synfire(mine_args(
            &path,
            &["--intervals", intervals, "--min-count", "1", "-q"],
        ));
        assert_success(&out, intervals);
        stdout(&out)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    let unconstrained = found("0-100");
    for line in ["A : 4", "B : 3", "C : 2", "A-(0,100000]ms-B : 2"] {
        assert!(
            unconstrained.iter().any(|l| l == line),
            "{line} in {unconstrained:#?}"
        );
    }
    let constrained = found("5-10,10-15");
    assert!(
        constrained
            .iter()
            .any(|l| l == "A-(5000,10000]ms-B-(10000,15000]ms-C : 1"),
        "{constrained:#?}"
    );
}

/// A bad `--calibration` file is named before any work; `calibrate` without a GPU says so.
#[test]
fn bad_calibration_file_and_calibrate_without_gpu_fail_clearly() {
    let dir = TempDir::new().unwrap();
    let input = fixture("fixtures/spikes/A2929-200711/A2929-200711.nwb");
    let bad = dir.path().join("cal.json");
    std::fs::write(&bad, "{\"device\": 3}").unwrap();
    let missing = dir.path().join("none.json");
    for (path, words) in [
        (&bad, "is not a synfire calibration"),
        (&missing, "No such file"),
    ] {
        let err = fails_cleanly(&mine_args(
            &input,
            &[
                "--intervals",
                "0-0.005",
                "-q",
                "--calibration",
                &path.display().to_string(),
            ],
        ));
        assert!(
            err.contains(&path.display().to_string()) && err.contains(words),
            "{err}"
        );
        assert!(
            !err.contains("Loaded spike stream"),
            "read before checking: {err}"
        );
    }
    if synfire::device::probe().is_err() {
        let err = fails_cleanly(&["calibrate".to_owned()]);
        assert!(err.contains("needs a GPU"), "{err}");
    }
}

/// The README's first command is the main job, and every episode line its section "What the
/// main job does" quotes (`` `A-[low,high]-B : count` ``) is a line of that command's output,
/// so the README's figures cannot drift from what synfire prints.
#[test]
fn readme_figures_come_from_the_main_job() {
    let readme = std::fs::read_to_string(fixture("README.md")).unwrap();
    let command = readme
        .lines()
        .find(|l| l.contains("cargo run --release -- mine "))
        .expect("the README's first command runs `synfire mine`");
    let args: Vec<String> = command
        .split(" -- ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|a| {
            if a.starts_with("fixtures/") {
                fixture(a).display().to_string()
            } else {
                a.to_owned()
            }
        })
        .chain(["-q".to_owned()])
        .collect();
    let out = synfire(&args);
    assert_success(&out, "the README's main job");
    let printed: BTreeSet<String> = stdout(&out).lines().map(|l| l.trim().to_owned()).collect();
    let section = readme
        .split("## What the main job does")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has a section \"What the main job does\"");
    let quoted: Vec<&str> = section
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|q| q.contains("]ms-") && q.contains(" : "))
        .collect();
    assert!(
        quoted.len() >= 2,
        "the README quotes episode lines: {quoted:?}"
    );
    for q in quoted {
        assert!(
            printed.contains(q),
            "README quotes `{q}`, which the main job does not print"
        );
    }
}

/// For a batch job (standard error not a terminal), the log names each level's candidate count
/// before counting it (equal to the document's `levels[].candidates`) and its outcome after,
/// and carries progress lines (done ≤ total) at the `--progress-every-s` pace.
#[test]
fn the_log_names_each_level_before_counting_and_reports_progress() {
    let mut args = standard_args(&fixture(A2929));
    args.extend(["--progress-every-s".into(), "0".into()]);
    args.extend(["--format".into(), "json".into()]);
    let out = synfire(&args);
    assert_success(&out, "mine --progress-every-s 0");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let log = stderr(&out);
    for level in doc["levels"].as_array().unwrap() {
        let (k, n) = (u64_of(&level["level"]), u64_of(&level["candidates"]));
        let announced = format!("Level {k}: {n} candidates");
        let survived = n - u64_of(&level["removed_by_bounds"]);
        let done = format!(
            "Level {k} done: {survived} of {n} candidates survived the bounds, {} frequent.",
            u64_of(&level["frequent"])
        );
        let (a, d) = (log.find(&announced), log.find(&done));
        assert!(
            a.is_some() && d.is_some() && a < d,
            "{announced} / {done} in:\n{log}"
        );
    }
    let progress: Vec<(u64, u64)> = log
        .lines()
        .filter_map(|l| {
            let rest = l.split("Counting level ").nth(1)?;
            let fraction = rest.split(": ").nth(1)?.split('.').next()?;
            let (done, total) = fraction.split_once('/')?;
            Some((done.parse().ok()?, total.parse().ok()?))
        })
        .collect();
    assert!(!progress.is_empty(), "no progress lines in:\n{log}");
    assert!(
        progress.iter().all(|(d, t)| d <= t && *t > 0),
        "{progress:?}"
    );
    let input = fixture(A2929).display().to_string();
    let bad = synfire([
        "mine",
        &input,
        "--intervals",
        "0-0.005",
        "--progress-every-s=-1",
    ]);
    assert!(!bad.status.success());
    assert!(
        stderr(&bad).contains("--progress-every-s"),
        "{}",
        stderr(&bad)
    );
}

/// The standard run to 4 levels with `extra` flags, as JSON.
fn a2929_to_level_4(extra: &[&str]) -> Value {
    let mut args = standard_args(&fixture(A2929));
    let at = args.iter().position(|a| a == "--max-level").unwrap();
    args[at + 1] = "4".into();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    mine_json(&args).0
}

/// The levels and episodes a truncated document reports equal the unbounded run's first
/// levels exactly (counts, candidates, episodes in order).
fn assert_prefix_of(truncated: &Value, full: &Value, levels: usize) {
    let (lt, lf) = (
        truncated["levels"].as_array().unwrap(),
        full["levels"].as_array().unwrap(),
    );
    assert_eq!(lt.len(), levels, "{lt:?}");
    for (a, b) in lt.iter().zip(lf) {
        for key in ["level", "candidates", "removed_by_bounds", "frequent"] {
            assert_eq!(a[key], b[key], "{key} of {a} vs {b}");
        }
    }
    let want: Vec<&Value> = full["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["types"].as_array().unwrap().len() <= levels)
        .collect();
    let got: Vec<&Value> = truncated["episodes"].as_array().unwrap().iter().collect();
    assert_eq!(got, want);
}

/// `--max-candidates` stops before the first level with more candidates, reports exactly the
/// finished levels (identical to an unbounded run's), says why in JSON and text, and
/// suggests the smallest min count at which that level fits, which it then does.
#[test]
fn max_candidates_stops_cleanly_with_the_finished_levels_and_a_threshold_that_fits() {
    let full = a2929_to_level_4(&[]);
    let levels = full["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 4, "{levels:?}");
    let level3 = u64_of(&levels[2]["candidates"]);
    let limit = level3 - 1;
    let cut = a2929_to_level_4(&["--max-candidates", &limit.to_string()]);
    assert_eq!(cut["complete"], true);
    let t = &cut["truncated"];
    assert_eq!(u64_of(&t["level"]), 3, "{t}");
    assert_eq!(t["reason"]["kind"], "max_candidates");
    assert_eq!(u64_of(&t["reason"]["limit"]), limit);
    assert_eq!(u64_of(&t["candidates"]), level3);
    assert_prefix_of(&cut, &full, 2);
    // The suggestion is the smallest min count that fits: at it, level 3 fits; one below, not.
    let suggested = u64_of(&t["suggested_min_count"]);
    assert!(suggested > u64_of(&full["params"]["min_count"]), "{t}");
    let at = |min_count: u64| {
        let mut args = standard_args(&fixture(A2929));
        let s = args.iter().position(|a| a == "--support").unwrap();
        args.drain(s..s + 4);
        args.extend(["--min-count".into(), min_count.to_string()]);
        let doc = mine_json(&args).0;
        doc["levels"]
            .as_array()
            .unwrap()
            .get(2)
            .map_or(0, |l| u64_of(&l["candidates"]))
    };
    assert!(at(suggested) <= limit, "level 3 at the suggestion");
    assert!(
        at(suggested - 1) > limit,
        "level 3 one below the suggestion"
    );
    // Text says it too.
    let mut args = standard_args(&fixture(A2929));
    args.extend(["--max-candidates".into(), limit.to_string()]);
    let out = synfire(&args);
    assert_success(&out, "mine --max-candidates");
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.starts_with("# truncated: stopped before level 3")
                && l.contains(&format!("`--min-count {suggested}`"))),
        "{text}"
    );
    assert!(
        stderr(&out).contains("Mining was truncated"),
        "{}",
        stderr(&out)
    );
}

/// A time budget used up before mining starts stops at level 1 with nothing reported, and
/// says so; bad limits are errors naming the flag.
#[test]
fn time_budget_and_bad_limits() {
    let cut = a2929_to_level_4(&["--time-budget-s", "1e-9"]);
    let t = &cut["truncated"];
    assert_eq!(t["reason"]["kind"], "time_budget", "{t}");
    assert_eq!(u64_of(&t["level"]), 1);
    assert!(cut["levels"].as_array().unwrap().is_empty());
    assert!(cut["episodes"].as_array().unwrap().is_empty());
    for (flag, value) in [
        ("--time-budget-s", "0"),
        ("--time-budget-s", "nan"),
        ("--max-candidates", "0"),
    ] {
        let mut args = standard_args(&fixture(A2929));
        args.extend([flag.into(), value.into()]);
        let out = synfire(&args);
        assert!(!out.status.success(), "{flag} {value} was accepted");
        assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
    }
}

/// The memory budget (issue 45): a budget below what the process holds stops before level 1,
/// saying so; a budget a little above it stops a later level, and the finished levels equal
/// the unbounded run's exactly, with a threshold that would fit. Bad budgets are errors naming
/// the flag.
#[test]
fn a_memory_budget_stops_a_level_and_keeps_the_finished_ones() {
    let run = |min_count: &str, budget: &str| -> Value {
        let mut args = standard_args(&fixture(A2929));
        let s = args.iter().position(|a| a == "--support").unwrap();
        args.drain(s..s + 4);
        let at = args.iter().position(|a| a == "--max-level").unwrap();
        args[at + 1] = "5".into();
        args.extend(
            ["--min-count", min_count, "--memory-budget", budget]
                .iter()
                .map(|s| (*s).to_owned()),
        );
        mine_json(&args).0
    };
    // One byte: the process is past it before level 1, which is not started.
    let none = run("5", "1");
    let t = &none["truncated"];
    assert_eq!(t["reason"]["kind"], "memory_budget", "{t}");
    assert_eq!(u64_of(&t["level"]), 1);
    assert_eq!(u64_of(&t["done"]), 0);
    assert!(none["episodes"].as_array().unwrap().is_empty());
    let resident = u64_of(&t["reason"]["resident_bytes"]);
    assert!(resident > 1 << 20, "{t}");
    // The unbounded run holds about 70,000 five-node episodes at the end (tens of MiB): a
    // budget of what the process held before level 1 plus 24 MiB stops a later level.
    let full = run("5", "off");
    assert!(full["truncated"].is_null(), "{}", full["truncated"]);
    let budget = resident + (24 << 20);
    let cut = run("5", &budget.to_string());
    let t = &cut["truncated"];
    assert_eq!(t["reason"]["kind"], "memory_budget", "{t}");
    assert_eq!(u64_of(&t["reason"]["budget_bytes"]), budget);
    let level = u64_of(&t["level"]) as usize;
    assert!((2..=5).contains(&level), "{t}");
    // It stopped because the level would have passed the budget.
    assert!(
        u64_of(&t["reason"]["resident_bytes"]) + u64_of(&t["reason"]["needed_bytes"]) > budget,
        "{t}"
    );
    assert_prefix_of(&cut, &full, level - 1);
    assert_eq!(cut["levels"].as_array().unwrap().len(), level - 1);
    // The suggested threshold is above the run's.
    assert!(u64_of(&t["suggested_min_count"]) > 5, "{t}");
    for value in ["0", "8X", "-1G"] {
        let mut args = standard_args(&fixture(A2929));
        args.push(format!("--memory-budget={value}"));
        let out = synfire(&args);
        assert!(
            !out.status.success(),
            "--memory-budget {value} was accepted"
        );
        assert!(
            stderr(&out).contains("--memory-budget"),
            "{value}: {}",
            stderr(&out)
        );
    }
}

/// `--output` is rewritten after every level: a run killed in a later level leaves a whole
/// document with its finished levels (marked incomplete), identical to the full run's.
#[test]
fn a_killed_run_leaves_its_finished_levels_in_the_output_file() {
    use std::time::{Duration, Instant};
    let dir = TempDir::new().unwrap();
    let input = dir.path().join("np.csv");
    let out = synfire(["generate", "neuropixels", "-o", input.to_str().unwrap()]);
    assert_success(&out, "generate neuropixels");
    let args = |output: &Path| -> Vec<String> {
        [
            "mine",
            input.to_str().unwrap(),
            "--intervals",
            INTERVALS,
            "--support",
            "0.2",
            "--support-per",
            "seconds",
            "--max-level",
            "4",
            "--format",
            "json",
            "-q",
            "-o",
            output.to_str().unwrap(),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    // Without the bounds level 3 takes long enough to kill the run in it.
    let partial = dir.path().join("partial.json");
    let mut slow = args(&partial);
    slow.push("--no-bounds".into());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(&slow)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let doc = loop {
        let text = std::fs::read_to_string(&partial).unwrap_or_default();
        if let Ok(doc) = serde_json::from_str::<Value>(&text)
            && doc["levels"].as_array().is_some_and(|l| l.len() == 2)
        {
            break doc;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no document with 2 levels after 120 s: {text}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it could be killed in level 3"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    // What the killed run left is still that document (written whole, never half).
    let left: Value = serde_json::from_str(&std::fs::read_to_string(&partial).unwrap()).unwrap();
    assert_eq!(left, doc);
    assert_eq!(left["complete"], false);
    let whole = dir.path().join("whole.json");
    assert_success(&synfire(args(&whole)), "the full run");
    let full: Value = serde_json::from_str(&std::fs::read_to_string(&whole).unwrap()).unwrap();
    assert_eq!(full["complete"], true);
    assert_eq!(u64_of(&full["levels"][2]["level"]), 3);
    let mut left = left;
    // The bounds change what was removed, not what was found.
    for l in left["levels"].as_array_mut().unwrap() {
        l["removed_by_bounds"] = Value::Null;
    }
    let mut full = full;
    for l in full["levels"].as_array_mut().unwrap() {
        l["removed_by_bounds"] = Value::Null;
    }
    assert_prefix_of(&left, &full, 2);
}

/// The `[default: …]` of every flag `synfire COMMAND --help` lists, by flag name (without the
/// dashes).
fn help_defaults(command: &str) -> BTreeMap<String, String> {
    let out = synfire([command, "--help"]);
    assert!(out.status.success(), "synfire {command} --help failed");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut defaults = BTreeMap::new();
    let mut flag: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        // A flag's line (`-o, --output <OUTPUT>`, `--max-level <MAX_LEVEL>`: its long name),
        // not a possible value's (`- events: ...`).
        if trimmed.starts_with('-')
            && let Some(long) = trimmed
                .split(|c: char| c.is_whitespace() || c == ',' || c == '=')
                .filter(|w| !w.is_empty())
                .take(2)
                .find_map(|w| w.strip_prefix("--"))
        {
            flag = Some(long.to_owned());
        }
        if let (Some(f), Some(at)) = (&flag, line.find("[default: ")) {
            let rest = &line[at + "[default: ".len()..];
            let value = rest.split(']').next().unwrap_or(rest);
            defaults.insert(f.clone(), value.to_owned());
        }
    }
    defaults
}

/// The flags' defaults are the library's (issue 44): `--max-level`, `--support-per`,
/// `--device`, `--exact-kernel` are [`MiningOptions`]' serde defaults (what a pipeline and
/// Python get for an absent key), and `--n-surrogates`, `--alpha`, `--correction`, `--seed`
/// the constants of `synfire::significance::options` that Python's `significance=` takes through
/// `synfire._synfire.defaults()`; `synfire batch` shows the same ones.
#[test]
fn the_flags_defaults_are_the_library_s() {
    use synfire::episode::MiningOptions;
    use synfire::episode::options::DEFAULT_MAX_LEVEL;
    use synfire::significance::options::{
        DEFAULT_ALPHA, DEFAULT_CORRECTION, DEFAULT_N_SURROGATES, DEFAULT_SEED,
    };
    let library: MiningOptions = serde_json::from_str("{}").unwrap();
    let name = |v: Value| v.as_str().unwrap().to_owned();
    let want = [
        ("max-level", library.max_level.to_string()),
        (
            "support-per",
            name(serde_json::to_value(library.support_per).unwrap()),
        ),
        ("device", format!("{:?}", library.device).to_lowercase()),
        (
            "exact-kernel",
            name(serde_json::to_value(library.exact_kernel).unwrap()),
        ),
        ("n-surrogates", DEFAULT_N_SURROGATES.to_string()),
        ("alpha", DEFAULT_ALPHA.to_string()),
        ("correction", DEFAULT_CORRECTION.to_string()),
        ("seed", DEFAULT_SEED.to_string()),
    ];
    assert_eq!(library.max_level, DEFAULT_MAX_LEVEL);
    assert!(library.bounds && !library.one_pass);
    for command in ["mine", "batch"] {
        let shown = help_defaults(command);
        for (flag, value) in &want {
            assert_eq!(
                shown.get(*flag),
                Some(value),
                "`synfire {command} --{flag}`'s default ({shown:?})"
            );
        }
    }
}
