//! `synfire mine --occurrences` and `synfire count` on real recordings: every listed
//! occurrence is events of the recording whose gaps fit the episode's intervals, they are
//! non-overlapped, their number is the count, and `count` gives back `mine`'s counts.

mod common;
use common::synfire;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use synfire::event::Ordering;
use synfire::ingest::read_spikes;
use tempfile::TempDir;

const A2929: &str = "fixtures/spikes/A2929-200711/A2929-200711.nwb";
const CURATED: &str = "fixtures/spikes/np-curated-120s";

fn run_ok(args: &[&str]) -> String {
    let out = synfire(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `episode : count` lines of the text output (two or more nodes).
fn counts(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains('-'))
        .map(|l| {
            let (e, c) = l.split_once(" : ").unwrap();
            (e.to_owned(), c.parse().unwrap())
        })
        .collect()
}

#[test]
fn occurrences_are_real_fitting_non_overlapped_and_as_many_as_the_count() {
    let dir = TempDir::new().unwrap();
    let csv_path = dir.path().join("occ.csv");
    let json_path = dir.path().join("occ.json");
    // Gaps (5,10] and [0,2] ms: a closed interval admitting lag 0 too.
    let args = |occ: &Path| {
        vec![
            "mine".to_owned(),
            A2929.to_owned(),
            "--intervals".into(),
            "(0.005,0.010],[0,0.002]".into(),
            "--support".into(),
            "0.05".into(),
            "--support-per".into(),
            "seconds".into(),
            "--max-level".into(),
            "3".into(),
            "-q".into(),
            "--occurrences".into(),
            occ.display().to_string(),
        ]
    };
    let text = run_ok(
        &args(&csv_path)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    let mined = counts(&text);
    assert!(mined.len() > 20, "{}", mined.len());
    assert!(
        mined.keys().any(|e| e.matches('-').count() == 4),
        "level 3 present"
    );

    // The recording's spikes by unit, to check every listed event exists.
    let stream = read_spikes(Path::new(A2929), Ordering::RequireSorted).unwrap();
    let events: HashSet<(String, u64)> = stream
        .iter()
        .map(|(t, ty)| (stream.alphabet().label(ty).to_owned(), t.to_bits()))
        .collect();

    // Rows grouped by (episode, occurrence).
    let mut reader = csv::Reader::from_path(&csv_path).unwrap();
    assert_eq!(
        reader.headers().unwrap().iter().collect::<Vec<_>>(),
        [
            "episode_index",
            "episode",
            "occurrence",
            "node",
            "unit",
            "time_s"
        ]
    );
    let mut occ: BTreeMap<String, Vec<Vec<(String, f64)>>> = BTreeMap::new();
    for row in reader.records() {
        let row = row.unwrap();
        let (episode, m, node) = (&row[1], row[2].parse::<usize>().unwrap(), &row[3]);
        let list = occ.entry(episode.to_owned()).or_default();
        if node == "0" {
            assert_eq!(list.len(), m, "occurrences numbered in order");
            list.push(Vec::new());
        }
        let t: f64 = row[5].parse().unwrap();
        assert!(
            events.contains(&(row[4].to_owned(), t.to_bits())),
            "no spike {row:?}"
        );
        list.last_mut().unwrap().push((row[4].to_owned(), t));
    }
    assert_eq!(
        occ.keys().collect::<Vec<_>>(),
        mined.keys().collect::<Vec<_>>()
    );
    for (episode, list) in &occ {
        assert_eq!(list.len() as u64, mined[episode], "{episode}");
        // The gaps of `a-(5,10]ms-b-[0,2]ms-c`, read from the notation.
        let parts: Vec<&str> = episode.split('-').collect();
        let units: Vec<&str> = parts.iter().step_by(2).copied().collect();
        let gaps: Vec<&str> = parts.iter().skip(1).step_by(2).copied().collect();
        let mut last_end = f64::NEG_INFINITY;
        for o in list {
            assert_eq!(o.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>(), units);
            for (k, gap) in gaps.iter().enumerate() {
                let d = o[k + 1].1 - o[k].1;
                let fits = match *gap {
                    "(5,10]ms" => d > 0.005 && d <= 0.010,
                    "[0,2]ms" => {
                        // Lag 0 only from a lower unit (type id) to a higher one.
                        let id = |u: &str| stream.alphabet().get(u).unwrap().0;
                        let lag0_ok = d > 0.0 || id(units[k]) < id(units[k + 1]);
                        (0.0..=0.002).contains(&d) && lag0_ok
                    }
                    other => panic!("unexpected interval {other}"),
                };
                assert!(fits, "{episode}: gap {k} of {o:?} is {d} s");
            }
            assert!(
                o[0].1 > last_end,
                "{episode}: {o:?} overlaps the previous occurrence"
            );
            last_end = o.last().unwrap().1;
        }
    }

    // JSON: the same occurrences.
    let args_json = args(&json_path);
    run_ok(&args_json.iter().map(String::as_str).collect::<Vec<_>>());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let listed = doc["episodes"].as_array().unwrap();
    assert_eq!(listed.len(), occ.len());
    for e in listed {
        let name = e["episode"].as_str().unwrap();
        let times: Vec<Vec<f64>> = occ[name]
            .iter()
            .map(|o| o.iter().map(|(_, t)| *t).collect())
            .collect();
        let got: Vec<Vec<f64>> = serde_json::from_value(e["occurrences"].clone()).unwrap();
        assert_eq!(got, times, "{name}");
        assert_eq!(e["count"].as_u64().unwrap(), mined[name]);
    }

    // `synfire count` reads the mined lines back and gives the same counts.
    let list = dir.path().join("episodes.txt");
    std::fs::write(&list, &text).unwrap();
    let recount = run_ok(&["count", list.to_str().unwrap(), A2929]);
    assert_eq!(counts(&recount), mined);
    let all = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        all(&recount),
        all(&text),
        "single units too, in the same order"
    );
}

#[test]
fn count_reads_tdminer_notation_and_names_bad_lines() {
    let dir = TempDir::new().unwrap();
    let list = dir.path().join("eps.txt");
    // tdminer's notation of the README's first episode, and a comment.
    std::fs::write(&list, "# from tdminer\n6-[0.010000,0.020000]-6\n").unwrap();
    let out = run_ok(&["count", list.to_str().unwrap(), A2929, "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["episodes"][0]["intervals"][0], "(10,20]ms");
    let mined = run_ok(&[
        "mine",
        A2929,
        "--intervals",
        "(0.010,0.020]",
        "--max-level",
        "2",
        "-q",
    ]);
    assert_eq!(
        doc["episodes"][0]["count"].as_u64().unwrap(),
        counts(&mined)["6-(10,20]ms-6"]
    );
    std::fs::write(&list, "6-(10,20]ms-6\n6-(10,20]ms-unit9\n").unwrap();
    let out = synfire(["count", list.to_str().unwrap(), A2929]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2") && err.contains("unit9"), "{err}");
    // An occurrences file with an unknown extension is refused before any work.
    let out = synfire([
        "count",
        list.to_str().unwrap(),
        A2929,
        "--occurrences",
        "o.parquet",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(".csv"));
}

#[test]
fn mine_reads_a_curated_kilosort_folder_with_its_good_units() {
    let text = run_ok(&[
        "mine",
        CURATED,
        "--units",
        "good",
        "--sample-rate-hz",
        "30000",
        "--intervals",
        "(0,150],(150,300]",
        "--support",
        "0.5",
        "--support-per",
        "seconds",
        "--max-level",
        "2",
        "-q",
    ]);
    assert!(text.contains("event types 140,"), "{}", &text[..300]);
    assert!(text.contains("(given in samples at 30000 Hz)"));
    assert!(counts(&text).len() > 10);
    // Without the rate: a named error, exit non-zero.
    let out = synfire(["mine", CURATED, "--intervals", "(0,0.005]", "-q"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("params.py"));
}
