//! Lag-0 synchrony on a real recording: a duplicated unit planted in A2929 (a copy of one unit,
//! each spike moved by a few samples of a 30 kHz clock, as a split or duplicated unit of a spike
//! sorter looks) is found as a pair of lag-0 episodes `[0, 5 samples]` and reported significant
//! by `max-t` against dithered surrogates; an exact copy is counted once, under the ascending
//! unit order, and never as the same unit twice at one instant. The command line shows the
//! intervals as meant.

mod common;
use common::synfire;
use std::path::{Path, PathBuf};

use serde_json::Value;
use synfire::episode::{Episode, Interval, MinerConfig, Threshold, TypeIndex, count_exact, mine};
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::significance::{Correction, SignificanceConfig, test_episodes};

const A2929: &str = "fixtures/spikes/A2929-200711/A2929-200711.nwb";
const RATE: f64 = 30_000.0;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A2929 plus a unit `dup`: every spike of the recording's unit `source` moved by
/// `shift(i)` samples (spike `i`).
fn planted(source: &str, shift: impl Fn(usize) -> i64) -> EventStream {
    let stream = synfire::read_spikes(&fixture(A2929), Ordering::RequireSorted).unwrap();
    let labels: Vec<String> = stream
        .alphabet()
        .labels()
        .iter()
        .cloned()
        .chain(["dup".to_owned()])
        .collect();
    let alphabet = Alphabet::from_labels(labels).unwrap();
    let src = stream.alphabet().get(source).expect("the unit is in A2929");
    let dup = alphabet.get("dup").unwrap();
    let (mut times, mut types) = (stream.times().to_vec(), stream.types().to_vec());
    let copies: Vec<f64> = stream
        .iter()
        .filter(|&(_, ty)| ty == src)
        .enumerate()
        .map(|(i, (t, _))| (t + shift(i) as f64 / RATE).max(0.0))
        .collect();
    types.extend(std::iter::repeat_n(dup, copies.len()));
    times.extend(copies);
    EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap()
}

/// The unit of A2929 with the most spikes below 10,000 (a typical, not the fastest, unit).
fn typical_unit() -> String {
    let stream = synfire::read_spikes(&fixture(A2929), Ordering::RequireSorted).unwrap();
    let index = TypeIndex::new(&stream);
    (0..stream.alphabet().len() as u32)
        .map(EventType)
        .filter(|&t| index.times(t).len() < 10_000)
        .max_by_key(|&t| index.times(t).len())
        .map(|t| stream.alphabet().label(t).to_owned())
        .unwrap()
}

fn pair(stream: &EventStream, a: &str, b: &str, iv: Interval) -> Episode {
    let ty = |l: &str| stream.alphabet().get(l).unwrap();
    Episode::new(vec![ty(a), ty(b)], vec![iv])
}

#[test]
fn an_exact_copy_is_one_lag0_pair_in_unit_order() {
    let unit = typical_unit();
    let stream = planted(&unit, |_| 0);
    let index = TypeIndex::new(&stream);
    let n = index.times(stream.alphabet().get(&unit).unwrap()).len() as u64;
    let lag0 = Interval::samples(0.0, 0.0, true, RATE).unwrap();
    // Every spike of the unit and its copy coincide: `unit-[0,0]-dup` counts all of them, the
    // reverse order none (simultaneous spikes count once, ascending ids), and the half-open
    // `(0, 5 samples]` none either.
    assert_eq!(count_exact(&index, &pair(&stream, &unit, "dup", lag0)), n);
    assert_eq!(count_exact(&index, &pair(&stream, "dup", &unit, lag0)), 0);
    let open = Interval::samples(0.0, 5.0, false, RATE).unwrap();
    assert_eq!(count_exact(&index, &pair(&stream, &unit, "dup", open)), 0);
    // A unit never pairs with itself at lag 0.
    assert_eq!(count_exact(&index, &pair(&stream, "dup", "dup", lag0)), 0);
}

#[test]
fn a_jittered_duplicate_unit_is_a_significant_lag0_pair() {
    let unit = typical_unit();
    // Each copy moved by -3..=3 samples, cycling.
    let stream = planted(&unit, |i| (i % 7) as i64 - 3);
    let lag0 = Interval::samples(0.0, 5.0, true, RATE).unwrap();
    let later = Interval::samples(5.0, 150.0, false, RATE).unwrap();
    let mut config = MinerConfig::new(vec![lag0, later], Threshold::MinCount(300));
    config.max_level = 2;
    let data = mine(&stream, &config).unwrap();
    let sig = SignificanceConfig {
        method: "dither:0.015".parse().unwrap(),
        n_surrogates: 99,
        alpha: 0.05,
        correction: Correction::MaxT,
        seed: 3,
        test_top: None,
        watch: None,
        trials: None,
        significant_only: false,
        sample_split: None,
    };
    let result = test_episodes(&stream, &config, &data, &sig).unwrap();
    let find = |e: &Episode| {
        result
            .tests
            .iter()
            .find(|t| &t.episode == e)
            .unwrap_or_else(|| panic!("{e:?} was not tested"))
    };
    let forward = find(&pair(&stream, &unit, "dup", lag0));
    let backward = find(&pair(&stream, "dup", &unit, lag0));
    for t in [forward, backward] {
        assert!(
            t.stats.significant,
            "{:?}: count {} vs surrogates {} ± {}, p_adjusted {}",
            t.episode, t.count, t.stats.surrogate_mean, t.stats.surrogate_std, t.stats.p_adjusted
        );
        assert!(t.stats.surrogate_mean < t.count as f64 / 10.0);
    }
    // Between them the two orders hold about every copy (lags -3..=3 samples).
    let n = TypeIndex::new(&stream)
        .times(stream.alphabet().get(&unit).unwrap())
        .len() as u64;
    assert!(forward.count + backward.count >= n * 9 / 10);
}

#[test]
fn the_command_line_reads_intervals_in_samples_and_shows_them_as_meant() {
    let unit = typical_unit();
    let stream = planted(&unit, |i| (i % 7) as i64 - 3);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("planted.csv");
    synfire::ingest::csv::write_csv(std::fs::File::create(&csv).unwrap(), &stream).unwrap();
    let run = |format: &str| {
        let out = synfire([
            "mine",
            csv.to_str().unwrap(),
            "--sample-rate-hz",
            "30000",
            "--intervals",
            "[0,5],(5,150]",
            "--min-count",
            "300",
            "--max-level",
            "2",
            "--format",
            format,
            "-q",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run("text");
    assert!(
        text.contains("# intervals: [0,0.166667]ms (0.166667,5]ms (given in samples at 30000 Hz)"),
        "{text}"
    );
    let line = format!("{unit}-[0,0.166667]ms-dup : ");
    assert!(text.lines().any(|l| l.starts_with(&line)), "{text}");
    let doc: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(doc["params"]["sample_rate_hz"], 30000.0);
    assert_eq!(
        doc["params"]["interval_notation"],
        serde_json::json!(["[0,0.166667]ms", "(0.166667,5]ms"])
    );
    let e = doc["episodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["labels"] == serde_json::json!([unit, "dup"]) && e["intervals"][0] == "[0,0.166667]ms"
        })
        .expect("the lag-0 pair is frequent");
    assert_eq!(e["intervals_s"][0][0], 0.0);
}
