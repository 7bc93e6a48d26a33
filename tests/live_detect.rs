//! The detect stage and the Open Ephys TTL sink end to end, on the real A2929 recording:
//! occurrences equal the offline occurrences of the same episodes (archive replay; a ZeroMQ
//! stream with a sequence gap and a publisher restart), one TTL request per occurrence to a
//! mock of the Network Events plugin (a `REP` socket answering as the plugin's source does),
//! and a sink that never blocks when no plugin listens.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use synfire::episode::{
    Episode, Interval, MinerConfig, SupportPer, Threshold, TypeIndex, mine, occurrences,
};
use synfire::event::{EventStream, Ordering};
use synfire::ingest::wire;
use synfire::live::config::PipelineConfig;
use synfire::live::stage::detect::OccurrenceLine;
use synfire::live::{RunOptions, run};
use synfire::report::MineReport;

mod common;

use common::live::{publisher, run_text, wait_for_subscriber};
use common::{a2929 as fixture, free_port as port};

const INTERVALS: [[f64; 2]; 3] = [[0.0, 0.005], [0.005, 0.010], [0.010, 0.020]];

/// `synfire mine --format json` of the whole recording, written to `dir/mined.json`.
fn mined(stream: &EventStream, dir: &Path) -> PathBuf {
    let ivs: Vec<Interval> = INTERVALS
        .iter()
        .map(|&[l, h]| Interval::new(l, h).unwrap())
        .collect();
    let mut config = MinerConfig::new(
        ivs,
        Threshold::from_options(None, Some(0.2), SupportPer::Seconds),
    );
    config.max_level = 3;
    let result = mine(stream, &config).unwrap();
    let path = dir.join("mined.json");
    std::fs::write(
        &path,
        serde_json::to_string(&MineReport::new("a2929", stream, &config, &result)).unwrap(),
    )
    .unwrap();
    path
}

/// The offline occurrences of the episode named by `line`'s labels and notation.
fn offline(stream: &EventStream, episode: &str) -> Vec<Vec<f64>> {
    let known: Vec<Interval> = INTERVALS
        .iter()
        .map(|&[l, h]| Interval::new(l, h).unwrap())
        .collect();
    let e = Episode::parse(episode, stream.alphabet(), &known).unwrap();
    let n = e.len();
    occurrences(&TypeIndex::new(stream), &e)
        .chunks(n)
        .map(<[f64]>::to_vec)
        .collect()
}

fn read_lines(path: &Path) -> Vec<OccurrenceLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn by_episode(lines: &[OccurrenceLine]) -> BTreeMap<String, Vec<Vec<f64>>> {
    let mut m: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    for l in lines {
        m.entry(l.episode.clone())
            .or_default()
            .push(l.times_s.clone());
    }
    m
}

/// A mock of the Network Events plugin: binds `REP` on `endpoint` and answers as
/// `NetworkEvents::handleSpecialMessages` does; returns every request received.
struct Plugin {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(Instant, String)>>,
}

impl Plugin {
    fn start(endpoint: &str) -> Self {
        let ctx = zmq::Context::new();
        let s = ctx.socket(zmq::REP).unwrap();
        s.set_rcvtimeo(20).unwrap();
        s.bind(endpoint).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let _ctx = ctx;
            let mut got = Vec::new();
            while !flag.load(AtomicOrdering::Relaxed) {
                let Ok(Ok(m)) = s.recv_string(0) else {
                    continue;
                };
                let mut line = 1;
                let mut state = 0;
                for kv in m.split_whitespace().skip(1) {
                    if let Some((k, v)) = kv.split_once('=') {
                        match k.to_ascii_lowercase().as_str() {
                            "line" => line = v.parse().unwrap_or(0),
                            "state" => state = v.parse().unwrap_or(0),
                            _ => {}
                        }
                    }
                }
                let reply = if !m.starts_with("TTL") {
                    "NotHandled".to_owned()
                } else if (1..=256).contains(&line) {
                    format!("TTLHandled: Line={line} State={state}")
                } else {
                    "InvalidChannel".to_owned()
                };
                s.send(reply.as_str(), 0).unwrap();
                got.push((Instant::now(), m));
            }
            got
        });
        Self { stop, thread }
    }

    fn stop(self) -> Vec<String> {
        self.stop_timed().into_iter().map(|(_, m)| m).collect()
    }

    /// Stops (the endpoint is unbound when this returns); every request with the instant it
    /// was answered.
    fn stop_timed(self) -> Vec<(Instant, String)> {
        self.stop.store(true, AtomicOrdering::Relaxed);
        self.thread.join().unwrap()
    }
}

#[test]
fn detect_on_an_archive_replay_equals_the_offline_occurrences_with_one_ttl_each() {
    let stream = synfire::ingest::read_spikes(&fixture(), Ordering::RequireSorted).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = mined(&stream, dir.path());
    let out = dir.path().join("occ.jsonl");
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let plugin = Plugin::start(&endpoint);
    let summary = run_text(&format!(
        r#"
[sources.a]
kind = "hdf5"
path = "{nwb}"
overflow = "block"

[stages.detect]
kind = "detect"
source = "a"
episodes_file = "{file}"
top = 6
episodes = ["6-(10,20]ms-6", "5-(0,5]ms-6"]

[sinks.lines]
kind = "jsonl"
path = "{out}"
stages = ["detect"]

[sinks.stim]
kind = "openephys_ttl"
endpoint = "{endpoint}"
stages = ["detect"]
line = 3
pulse_ms = 0
queue = 1000000
# An archive replayed as fast as it reads: detections come in bursts faster than requests
# go, so this test of one request per occurrence lets them wait (a rig keeps the default).
max_age_ms = 3600000
"#,
        nwb = fixture().display(),
        file = file.display(),
        out = out.display()
    ));
    let requests = plugin.stop();
    let lines = read_lines(&out);
    let found = by_episode(&lines);
    assert_eq!(
        found.len(),
        7,
        "6 from the file, 2 given, one of them also in the file: {:?}",
        found.keys()
    );
    let mut total = 0;
    for (episode, occ) in &found {
        let want = offline(&stream, episode);
        assert!(!want.is_empty());
        assert_eq!(occ, &want, "{episode}");
        total += want.len();
    }
    // Every line in report order, numbered.
    for (k, l) in lines.iter().enumerate() {
        assert_eq!(l.seq, k as u64);
        assert_eq!(l.stage, "detect");
    }
    let stats = summary.detectors["detect"];
    assert_eq!(stats.occurrences as usize, total);
    assert_eq!(stats.late, 0);
    // One TTL request per occurrence, all answered, on line 3; no off requests (pulse 0).
    let ttl = &summary.ttl["stim"];
    assert_eq!(ttl.ok as usize, total, "{ttl:?}");
    assert_eq!(
        (
            ttl.rejected,
            ttl.timeouts,
            ttl.send_errors,
            ttl.dropped,
            ttl.stale
        ),
        (0, 0, 0, 0, 0)
    );
    assert_eq!(requests.len(), total);
    assert!(requests.iter().all(|r| r == "TTL Line=3 State=1"));
    assert_eq!(ttl.to_reply.windows(), total);
}

#[test]
fn detect_over_zeromq_with_a_gap_and_a_restart_equals_offline_per_session() {
    let stream = synfire::ingest::read_spikes(&fixture(), Ordering::RequireSorted).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("occ.jsonl");
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let watch = ["6-(10,20]ms-6", "6-(5,10]ms-6-(10,20]ms-6", "5-(0,5]ms-6"];
    let text = format!(
        r#"
[sources.live]
kind = "zmq"
endpoint = "{endpoint}"
format = "synfire"
overflow = "block"
receive_hwm_messages = 0

[stages.detect]
kind = "detect"
source = "live"
episodes = {watch:?}

[sinks.lines]
kind = "jsonl"
path = "{out}"
"#,
        out = out.display()
    );
    let config = PipelineConfig::parse(&text, Path::new("test.toml")).unwrap();
    let h = std::thread::spawn(move || run(&config, RunOptions::default()).unwrap());
    // Session 1: the first 200 s in batches of 500, the 4th batch lost on the way (a
    // sequence gap); session 2: the next 200 s, restarted at time 0.
    let labels: Vec<u32> = stream
        .alphabet()
        .labels()
        .iter()
        .map(|l| l.parse().unwrap())
        .collect();
    let units: Vec<u32> = stream.types().iter().map(|t| labels[t.index()]).collect();
    let times = stream.times();
    let first = times.partition_point(|&t| t < 200.0);
    let second = times.partition_point(|&t| t < 400.0);
    let (_ctx, p) = publisher(&endpoint);
    wait_for_subscriber();
    let mut session1 = Vec::new();
    for (b, start) in (0..first).step_by(500).enumerate() {
        let end = (start + 500).min(first);
        if b == 3 {
            continue;
        }
        p.send(
            wire::encode_spikes(1, start as u64, &times[start..end], &units[start..end]),
            0,
        )
        .unwrap();
        session1.extend((start..end).map(|i| (times[i], labels_of(&stream, i))));
    }
    let mut session2 = Vec::new();
    for start in (first..second).step_by(500) {
        let end = (start + 500).min(second);
        let shifted: Vec<f64> = times[start..end].iter().map(|t| t - 200.0).collect();
        p.send(
            wire::encode_spikes(2, (start - first) as u64, &shifted, &units[start..end]),
            0,
        )
        .unwrap();
        session2.extend((start..end).map(|i| (times[i] - 200.0, labels_of(&stream, i))));
    }
    p.send(wire::encode_end(2, (second - first) as u64), 0)
        .unwrap();
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"].1, 500, "the lost batch is counted");
    let s1 = EventStream::from_labelled(session1.iter().map(|(t, l)| (*t, l.as_str()))).unwrap();
    let s2 = EventStream::from_labelled(session2.iter().map(|(t, l)| (*t, l.as_str()))).unwrap();
    let found = by_episode(&read_lines(&out));
    let mut total = 0;
    for e in watch {
        let mut want = offline(&s1, e);
        want.extend(offline(&s2, e));
        assert!(want.len() > 10, "{e}");
        assert_eq!(found.get(e).cloned().unwrap_or_default(), want, "{e}");
        total += want.len();
    }
    assert_eq!(summary.detectors["detect"].occurrences as usize, total);
}

fn labels_of(stream: &EventStream, i: usize) -> String {
    stream.alphabet().label(stream.types()[i]).to_owned()
}

#[test]
fn a_ttl_sink_without_a_plugin_never_blocks_and_counts_every_occurrence() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("occ.jsonl");
    // Nothing listens on this port.
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let summary = run_text(&format!(
        r#"
[sources.a]
kind = "hdf5"
path = "{nwb}"
overflow = "block"

[stages.detect]
kind = "detect"
source = "a"
episodes = ["6-(10,20]ms-6", "6-(5,10]ms-6"]

[sinks.lines]
kind = "jsonl"
path = "{out}"
stages = ["detect"]

[sinks.stim]
kind = "openephys_ttl"
endpoint = "{endpoint}"
stages = ["detect"]
timeout_ms = 2
queue = 8
"#,
        nwb = fixture().display(),
        out = out.display()
    ));
    let lines = read_lines(&out);
    let ttl = &summary.ttl["stim"];
    assert!(lines.len() > 5000, "{}", lines.len());
    assert_eq!(ttl.ok + ttl.rejected, 0);
    assert_eq!(
        (ttl.timeouts + ttl.send_errors + ttl.dropped + ttl.stale) as usize,
        lines.len(),
        "every occurrence is accounted for: {ttl:?}"
    );
    assert!(
        ttl.dropped > 0,
        "a full queue drops rather than blocks: {ttl:?}"
    );
}

#[test]
fn no_stale_pulse_fires_when_the_plugin_goes_down_and_comes_back() {
    use synfire::live::ttl::{TtlConfig, TtlSink};
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let max_age = Duration::from_millis(5);
    let cfg = TtlConfig {
        endpoint: endpoint.clone(),
        stages: vec!["detect".into()],
        line: Some(2),
        pulse_ms: Some(0.0),
        timeout_ms: Some(20.0),
        queue: Some(64),
        max_age_ms: Some(5.0),
    };
    assert!(cfg.validate().is_empty());
    let ctx = zmq::Context::new();
    let plugin = Plugin::start(&endpoint);
    let sink = TtlSink::spawn("stim", &cfg, &ctx).unwrap();
    let tx = sink.sender.clone();
    let mut arrivals = Vec::new();
    let mut request = |arrived: Instant| {
        arrivals.push(arrived);
        tx.request(arrived);
    };
    // Up: 20 occurrences, 3 ms apart.
    for _ in 0..20 {
        request(Instant::now());
        std::thread::sleep(Duration::from_millis(3));
    }
    std::thread::sleep(Duration::from_millis(50));
    let before = plugin.stop_timed();
    // Down for about 0.4 s: 100 occurrences, and 10 that arrived 20 ms ago (a backlog).
    for i in 0..110 {
        if i < 100 {
            request(Instant::now());
        } else {
            request(
                Instant::now()
                    .checked_sub(Duration::from_millis(20))
                    .unwrap(),
            );
        }
        std::thread::sleep(Duration::from_millis(if i < 100 { 4 } else { 0 }));
    }
    // Back up: nothing detected while it was down may reach it.
    let plugin = Plugin::start(&endpoint);
    let back = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let resumed = Instant::now();
    for _ in 0..20 {
        request(Instant::now());
        std::thread::sleep(Duration::from_millis(3));
    }
    std::thread::sleep(Duration::from_millis(100));
    let after = plugin.stop_timed();
    drop(tx);
    let t = Instant::now();
    let s = sink.join();
    assert!(t.elapsed() < Duration::from_secs(1), "shutdown is bounded");
    // No backlog on return: the plugin got nothing between coming back and new occurrences.
    assert!(
        after.iter().all(|(at, _)| *at >= resumed),
        "stale pulses fired after the plugin came back ({back:?}): {after:?}"
    );
    // Every pulse the plugin got left within max_age of some occurrence's arrival (plus the
    // loopback hop).
    for (at, m) in before.iter().chain(&after) {
        assert_eq!(m, "TTL Line=2 State=1");
        assert!(
            arrivals
                .iter()
                .any(|a| *a <= *at && at.duration_since(*a) <= max_age + Duration::from_millis(5)),
            "a pulse {at:?} older than max_age"
        );
    }
    assert!(
        s.to_send.max().unwrap() <= max_age.as_secs_f64() + 0.002,
        "{s:?}"
    );
    // Counts add up: every occurrence has one outcome; what the plugin got is what was ok.
    assert_eq!(s.requested(), arrivals.len() as u64, "{s:?}");
    assert_eq!(s.ok, (before.len() + after.len()) as u64, "{s:?}");
    assert_eq!(s.to_reply.windows() as u64, s.ok);
    assert!(s.stale >= 10, "the backlog is stale: {s:?}");
    assert!(
        s.stale + s.send_errors + s.timeouts + s.dropped >= 110,
        "nothing detected while it was down fired: {s:?}"
    );
    // Pulses resumed once it was back.
    assert!(after.len() >= 5, "{s:?}");
    assert!(before.len() >= 10, "{s:?}");
}

#[test]
fn a_watch_list_refreshed_from_an_episodes_stage_reports_valid_occurrences() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("occ.jsonl");
    let summary = run_text(&format!(
        r#"
[sources.a]
kind = "hdf5"
path = "{nwb}"
overflow = "block"

[windows.w]
source = "a"
length_s = 60.0
hop_s = 60.0

[stages.episodes]
kind = "episodes"
window = "w"
intervals_s = {INTERVALS:?}
support = 0.2
support_per = "seconds"
max_level = 3
device = "cpu"

[stages.detect]
kind = "detect"
source = "a"
from_stage = "episodes"
top = 3

[sinks.lines]
kind = "jsonl"
path = "{out}"
stages = ["detect"]
"#,
        nwb = fixture().display(),
        out = out.display()
    ));
    let lines = read_lines(&out);
    assert!(!lines.is_empty());
    assert_eq!(
        summary.detectors["detect"].occurrences as usize,
        lines.len()
    );
    // Each occurrence fits its episode's gaps, and one episode's occurrences do not overlap.
    let mut last_end: BTreeMap<String, f64> = BTreeMap::new();
    for l in &lines {
        let w = synfire::episode::WatchEpisode::parse(&l.episode, &[]).unwrap();
        assert_eq!(l.times_s.len(), w.labels.len());
        for (k, iv) in w.intervals.iter().enumerate() {
            let d = l.times_s[k + 1] - l.times_s[k];
            assert!(iv.contains(d) && d > 0.0, "{} {:?}", l.episode, l.times_s);
        }
        let prev = last_end.insert(l.episode.clone(), *l.times_s.last().unwrap());
        if let Some(p) = prev {
            assert!(l.times_s[0] > p, "{} overlaps", l.episode);
        }
    }
}

#[test]
fn detect_and_ttl_sections_are_checked() {
    let errors = |text: &str| -> Vec<String> {
        PipelineConfig::parse(text, Path::new("t.toml"))
            .unwrap_err()
            .errors
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    };
    let base = format!(
        "[sources.a]\nkind = \"hdf5\"\npath = \"{}\"\n",
        fixture().display()
    );
    let e = errors(&format!(
        "{base}[stages.d]\nkind = \"detect\"\nepisodes = [\"6-(10,20]ms\"]\nlateness_s = -1\n[sinks.s]\nkind = \"jsonl\"\n"
    ));
    assert!(
        e.iter().any(|m| m.starts_with("stages.d.source: missing")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{base}[stages.d]\nkind = \"detect\"\nsource = \"a\"\nepisodes = [\"6-(10,20]ms\", \"6-(1,2]ms-7\"]\nlateness_s = -1\n[sinks.s]\nkind = \"openephys_ttl\"\nendpoint = \"localhost\"\nstages = [\"d\"]\nline = 300\nmax_age_ms = 0\n"
    ));
    for want in [
        "stages.d.episodes[0]",
        "stages.d.lateness_s",
        "sinks.s.endpoint",
        "sinks.s.line",
        "sinks.s.max_age_ms",
    ] {
        assert!(e.iter().any(|m| m.starts_with(want)), "{want} in {e:?}");
    }
    let e = errors(&format!(
        "{base}[stages.d]\nkind = \"detect\"\nsource = \"a\"\nfrom_stage = \"nope\"\n[sinks.s]\nkind = \"openephys_ttl\"\nendpoint = \"tcp://127.0.0.1:5556\"\nstages = [\"d\", \"x\"]\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("stages.d.from_stage: no stage of kind `episodes`")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("sinks.s.stages: no stage named `x`")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{base}[stages.d]\nkind = \"detect\"\nsource = \"a\"\nepisodes_file = \"/nonexistent.json\"\n[sinks.s]\nkind = \"jsonl\"\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("stages.d.episodes_file: /nonexistent.json: cannot read")),
        "{e:?}"
    );
}
