//! Fault tests of a live pipeline over loopback ZeroMQ (issue 46): an absurd timestamp, a
//! stray spike far back or far ahead, a publisher outage while its clock runs on, repeated
//! wire messages, and a stop while windows are open. Each asserts the property: the run ends
//! within 2 s of the stop (or of SIGINT), and every spike sent is in a complete window,
//! counted (`late`, `out_of_range`, `duplicate`, `dropped`), or in a window marked incomplete
//! (with its gap when one caused it).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use serde_json::Value;
use synfire::ingest::wire;
use synfire::live::config::PipelineConfig;
use synfire::live::stage::Output;
use synfire::live::{RunOptions, RunSummary, run};

/// A free loopback TCP port.
fn port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn publisher(endpoint: &str) -> (zmq::Context, zmq::Socket) {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::PUB).unwrap();
    s.set_linger(2000).unwrap();
    s.set_sndhwm(0).unwrap();
    s.bind(endpoint).unwrap();
    (ctx, s)
}

/// PUB/SUB drops what is sent before the subscriber has connected (its reconnect back-off
/// is at most 1 s).
fn wait_for_subscriber() {
    std::thread::sleep(Duration::from_millis(1500));
}

fn pipeline(endpoint: &str, format: &str, out: &Path) -> String {
    format!(
        r#"
[sources.live]
kind = "zmq"
endpoint = "{endpoint}"
format = "{format}"
overflow = "block"
receive_hwm_messages = 0

[windows.w]
source = "live"
length_s = 1.0
hop_s = 1.0

[stages.rates]
kind = "rate"
window = "w"

[sinks.file]
kind = "jsonl"
path = "{}"
"#,
        out.display()
    )
}

fn start(
    text: &str,
) -> (
    Receiver<Output>,
    Arc<AtomicBool>,
    std::thread::JoinHandle<RunSummary>,
) {
    let config = PipelineConfig::parse(text, Path::new("test.toml")).expect("valid pipeline");
    let (tx, rx) = unbounded();
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        run(
            &config,
            RunOptions {
                tap: Some(tx),
                stop: Some(s),
                ..Default::default()
            },
        )
        .expect("pipeline runs")
    });
    (rx, stop, h)
}

/// An Open Ephys JSON spike on electrode `e` at sample `n` of a `rate` Hz stream.
fn oe(e: &str, n: i64, rate: f64) -> [Vec<u8>; 2] {
    let body = serde_json::json!({
        "event_type": "spike", "stream": "s", "source_node": 1, "electrode": e,
        "num_channels": 1, "sample_rate": rate, "sample_number": n, "sorted_id": 0,
    });
    [1u16.to_le_bytes().to_vec(), body.to_string().into_bytes()]
}

/// Lines from `rx` until one has `window_index ≥ k` (or 20 s pass).
fn lines_until(rx: &Receiver<Output>, k: u64) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut out: Vec<Value> = Vec::new();
    while Instant::now() < deadline {
        if let Ok(o) = rx.recv_timeout(Duration::from_millis(100)) {
            let v: Value = serde_json::from_str(&o.json).unwrap();
            let done = v["window_index"].as_u64().is_some_and(|i| i >= k);
            out.push(v);
            if done {
                break;
            }
        }
    }
    out
}

/// Stops the run and joins it, asserting it ended within 2 s.
fn stop_within_2s(stop: &AtomicBool, h: std::thread::JoinHandle<RunSummary>) -> RunSummary {
    let t = Instant::now();
    stop.store(true, Ordering::Relaxed);
    while !h.is_finished() {
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the run did not end within 2 s of the stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    h.join().unwrap()
}

const RATE: f64 = 30_000.0;
/// Samples per 10 ms: spikes at t = k / 100 s.
const STEP: i64 = 300;

#[test]
fn absurd_times_strays_an_outage_and_repeats_are_all_accounted_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.jsonl");
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let (_ctx, p) = publisher(&endpoint);
    let (rx, stop, h) = start(&pipeline(&endpoint, "openephys", &file));
    wait_for_subscriber();
    let mut sent = 0u64;
    let mut repeats = 0u64;
    let mut send = |f: &[Vec<u8>; 2]| {
        p.send_multipart(f, 0).unwrap();
        sent += 1;
    };
    // 0..30 s, silence while the clock runs on (the publisher was down), then 45.5..50 s:
    // 100 spikes a second on two electrodes.
    let ks: Vec<i64> = (0..3000).chain(4550..5000).collect();
    for &k in &ks {
        let f = oe(if k % 2 == 0 { "A" } else { "B" }, k * STEP, RATE);
        send(&f);
        if k % 500 == 7 {
            // The same wire message twice more.
            send(&f);
            send(&f);
            repeats += 2;
        }
        match k {
            // An absurd timestamp: sample 9e18 at 0.1 Hz (9e19 s).
            1000 => send(&oe("A", 9_000_000_000_000_000_000, 0.1)),
            // A stray far back (1.005 s, while the stream is at 20 s).
            2000 => send(&oe("B", 301 * 100 + 50, RATE)),
            // A stray far ahead (10^6 s).
            2500 => send(&oe("A", 1_000_000 * 30_000, RATE)),
            _ => {}
        }
    }
    // Window [48, 49) closes at the first spike at or after 49 s.
    let mut lines = lines_until(&rx, 48);
    std::thread::sleep(Duration::from_millis(200));
    let summary = stop_within_2s(&stop, h);
    lines.extend(
        rx.try_iter()
            .map(|o| serde_json::from_str(&o.json).unwrap()),
    );

    let (events_in, dropped, malformed) = summary.sources["live"];
    let refused = summary.refused["live"];
    assert_eq!((dropped, malformed), (0, 0));
    assert_eq!(refused.duplicate, repeats, "each repeat counted once");
    assert_eq!(events_in, sent - repeats);
    assert_eq!(
        refused.out_of_range, 2,
        "the absurd time and the stray ahead"
    );
    assert_eq!(summary.late["w"], 1, "the stray back is late");
    // No spurious windows (near 10^6 s or anywhere else), each emitted once.
    let ks: Vec<u64> = lines
        .iter()
        .map(|l| l["window_index"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = (0..30).chain(45..50).collect();
    assert_eq!(ks, want);
    let gap = serde_json::json!({"kind": "jump", "start_s": 29.99, "end_s": 45.5});
    for l in &lines {
        let k = l["window_index"].as_u64().unwrap();
        assert_eq!(l["run_id"].as_str(), Some(summary.run_id.as_str()));
        assert_eq!(l["epoch"], 0);
        match k {
            29 | 45 => {
                assert_eq!(l["complete"], false, "window {k} is across the gap");
                assert_eq!(l["gap"], gap);
                assert_eq!(l["events"], if k == 29 { 100 } else { 50 });
            }
            49 => {
                assert_eq!(l["complete"], false, "open at the stop");
                assert!(l.get("gap").is_none());
            }
            _ => {
                assert_eq!(l["complete"], true, "window {k}");
                assert_eq!(l["events"], 100, "window {k} holds its whole second");
                assert!(l.get("gap").is_none());
            }
        }
    }
    // Nothing lost without a count: tumbling windows hold each accepted spike once.
    let inside: u64 = lines.iter().map(|l| l["events"].as_u64().unwrap()).sum();
    assert_eq!(
        inside + summary.late["w"] + refused.out_of_range + refused.duplicate + dropped,
        sent
    );
    // The file's lines carry the run id too.
    let text = std::fs::read_to_string(&file).unwrap();
    assert_eq!(text.lines().count(), lines.len());
    assert!(text.contains(&format!("\"run_id\":\"{}\"", summary.run_id)));
}

#[test]
fn a_restart_confirmed_by_several_spikes_starts_a_new_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let (_ctx, p) = publisher(&endpoint);
    let (rx, stop, h) = start(&pipeline(
        &endpoint,
        "openephys",
        &dir.path().join("o.jsonl"),
    ));
    wait_for_subscriber();
    // 0..15.5 s, then the publisher's clock starts again: 0..3 s.
    let mut sent = 0u64;
    for k in (0..1550).chain(0..300) {
        p.send_multipart(oe("A", k * STEP, RATE), 0).unwrap();
        sent += 1;
    }
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline
        && !lines
            .iter()
            .any(|l: &Value| l["epoch"] == 1 && l["window_index"] == 1)
    {
        if let Ok(o) = rx.recv_timeout(Duration::from_millis(100)) {
            lines.push(serde_json::from_str(&o.json).unwrap());
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let summary = stop_within_2s(&stop, h);
    lines.extend(
        rx.try_iter()
            .map(|o| serde_json::from_str(&o.json).unwrap()),
    );
    let old: Vec<&Value> = lines.iter().filter(|l| l["epoch"] == 0).collect();
    let new: Vec<&Value> = lines.iter().filter(|l| l["epoch"] == 1).collect();
    assert_eq!(old.len(), 16, "windows 0..=15 of the first epoch");
    // [15, 16) was cut off by the restart: incomplete, with the restart as its gap.
    let cut = old.last().unwrap();
    assert_eq!(cut["complete"], false);
    assert_eq!(cut["gap"]["kind"], "restart");
    assert_eq!(cut["gap"]["start_s"], 15.49);
    assert_eq!(cut["gap"]["end_s"], 0.0);
    assert!(
        old[..15]
            .iter()
            .all(|l| l["complete"] == true && l["events"] == 100)
    );
    let ks: Vec<u64> = new
        .iter()
        .map(|l| l["window_index"].as_u64().unwrap())
        .collect();
    assert_eq!(ks, vec![0, 1, 2]);
    assert!(
        new[..2]
            .iter()
            .all(|l| l["complete"] == true && l["events"] == 100)
    );
    assert_eq!(summary.late["w"], 0);
    let inside: u64 = lines.iter().map(|l| l["events"].as_u64().unwrap()).sum();
    assert_eq!(inside, sent);
}

#[test]
fn a_repeated_synfire_message_is_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let (_ctx, p) = publisher(&endpoint);
    let (rx, _stop, h) = start(&pipeline(&endpoint, "synfire", &dir.path().join("o.jsonl")));
    wait_for_subscriber();
    let times =
        |from: u32| -> Vec<f64> { (from..from + 100).map(|i| f64::from(i) * 0.01).collect() };
    let units = vec![3u32; 100];
    let first = wire::encode_spikes(9, 0, &times(0), &units);
    for _ in 0..3 {
        p.send(first.as_slice(), 0).unwrap();
    }
    // A message overlapping the first by half: 50 repeats, 50 new spikes.
    p.send(wire::encode_spikes(9, 50, &times(50), &units).as_slice(), 0)
        .unwrap();
    p.send(wire::encode_end(9, 150), 0).unwrap();
    let t = Instant::now();
    while !h.is_finished() {
        assert!(t.elapsed() < Duration::from_secs(20), "the run did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"], (150, 0, 0));
    assert_eq!(summary.refused["live"].duplicate, 250);
    let lines: Vec<Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    let inside: u64 = lines.iter().map(|l| l["events"].as_u64().unwrap()).sum();
    assert_eq!(inside, 150);
    assert!(lines.iter().all(|l| l["duplicate"].as_u64().is_some()));
}

#[test]
fn sigint_ends_a_run_fed_an_absurd_timestamp_within_2_s() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("live.toml");
    let out = dir.path().join("out.jsonl");
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    std::fs::write(&toml, pipeline(&endpoint, "openephys", &out)).unwrap();
    let (_ctx, p) = publisher(&endpoint);
    let mut child = Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(["run".as_ref(), toml.as_os_str()])
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_subscriber();
    for k in 0..250 {
        p.send_multipart(oe("A", k * STEP, RATE), 0).unwrap();
        if k == 100 {
            p.send_multipart(oe("A", 9_000_000_000_000_000_000, 0.1), 0)
                .unwrap();
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(2) {
            let _ = child.kill();
            panic!("no exit within 2 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}\n{err}");
    assert!(err.contains("out_of_range=1"), "{err}");
    // Windows [0, 1) and [1, 2) closed; [2, 2.5) was open at the signal: emitted incomplete.
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(u64, bool, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["window_index"].as_u64().unwrap(),
                l["complete"].as_bool().unwrap(),
                l["events"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, vec![(0, true, 100), (1, true, 100), (2, false, 50)]);
    assert!(
        lines
            .iter()
            .all(|l| l["out_of_range"] == 1 || l["window_index"] == 0)
    );
}

#[test]
fn sigint_while_a_stage_computes_ends_the_run_within_2_s_and_counts_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("live.toml");
    let out = dir.path().join("out.jsonl");
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    // A stage that takes far longer than the shutdown allows: every window is mined again
    // on each of 20,000 surrogates.
    let text = format!(
        r#"{}
[stages.slow]
kind = "episodes"
window = "w"
intervals_s = [[0.0, 0.02]]
min_count = 2
device = "cpu"

[stages.slow.significance]
surrogates = "dither:0.015"
n_surrogates = 20000
"#,
        pipeline(&endpoint, "openephys", &out)
    );
    std::fs::write(&toml, text).unwrap();
    let (_ctx, p) = publisher(&endpoint);
    let mut child = Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(["run".as_ref(), toml.as_os_str()])
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_subscriber();
    for k in 0..250 {
        p.send_multipart(oe(if k % 2 == 0 { "A" } else { "B" }, k * STEP, RATE), 0)
            .unwrap();
    }
    // Windows [0, 1) and [1, 2) closed: the slow stage is on the first.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&out).map_or(0, |t| t.lines().count()) < 2 {
        assert!(Instant::now() < deadline, "no rate lines");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(2) {
            let _ = child.kill();
            panic!("no exit within 2 s of SIGINT while a stage computes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}\n{err}");
    // The windows the slow stage did not finish are counted as dropped, not lost silently.
    assert!(err.contains("did not finish by the deadline"), "{err}");
    let text = std::fs::read_to_string(&out).unwrap();
    let rates: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["stage"] == "rates")
        .collect();
    // [0, 1), [1, 2), and [2, 2.5) emitted incomplete at the signal.
    assert_eq!(rates.len(), 3, "{text}");
    assert_eq!(rates[2]["complete"], false);
}

#[test]
fn a_short_publisher_outage_marks_the_windows_across_it() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("tcp://127.0.0.1:{}", port());
    let (rx, stop, h) = start(&pipeline(
        &endpoint,
        "openephys",
        &dir.path().join("o.jsonl"),
    ));
    let mut sent = 0u64;
    // 0..5 s; the publisher goes down (its clock runs on: 3.5 s, less than `gap_s`); 8.5..12 s.
    for ks in [0..500, 850..1200] {
        let (ctx, p) = publisher(&endpoint);
        wait_for_subscriber();
        for k in ks {
            p.send_multipart(oe("A", k * STEP, RATE), 0).unwrap();
            sent += 1;
        }
        drop(p);
        drop(ctx);
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut lines = lines_until(&rx, 10);
    std::thread::sleep(Duration::from_millis(200));
    let summary = stop_within_2s(&stop, h);
    lines.extend(
        rx.try_iter()
            .map(|o| serde_json::from_str(&o.json).unwrap()),
    );
    let gap = serde_json::json!({"kind": "disconnected", "start_s": 4.99, "end_s": 8.5});
    let got: Vec<(u64, bool)> = lines
        .iter()
        .map(|l| (l["window_index"].as_u64().unwrap(), l["complete"] == true))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, true),
            (1, true),
            (2, true),
            (3, true),
            (4, false),
            (8, false),
            (9, true),
            (10, true),
            (11, false)
        ]
    );
    for l in &lines {
        let k = l["window_index"].as_u64().unwrap();
        if k == 4 || k == 8 {
            assert_eq!(l["gap"], gap, "window {k}");
        } else {
            assert!(l.get("gap").is_none(), "window {k}");
        }
    }
    let inside: u64 = lines.iter().map(|l| l["events"].as_u64().unwrap()).sum();
    assert_eq!(inside + summary.late["w"], sent);
}

#[test]
fn an_archive_with_an_absurd_timestamp_replays_at_real_time_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("spikes.csv");
    // 2 s at 100 spikes a second, then one spike at 9e19 s (as `synfire mine` reads it).
    let mut text = String::new();
    for k in 0..200 {
        text.push_str(&format!(
            "{},{}\n",
            if k % 2 == 0 { "a" } else { "b" },
            f64::from(k) / 100.0
        ));
    }
    text.push_str("a,90000000000000000000\n");
    std::fs::write(&csv, text).unwrap();
    let out = dir.path().join("o.jsonl");
    let config = format!(
        r#"
[sources.file]
kind = "hdf5"
path = "{}"
speed = 20.0

[windows.w]
source = "file"
length_s = 1.0
hop_s = 1.0

[stages.rates]
kind = "rate"
window = "w"

[sinks.file]
kind = "jsonl"
path = "{}"
"#,
        csv.display(),
        out.display()
    );
    let (rx, _stop, h) = start(&config);
    let t = Instant::now();
    while !h.is_finished() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the replay did not end: the absurd time was waited for"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let summary = h.join().unwrap();
    assert_eq!(summary.refused["file"].out_of_range, 1);
    let lines: Vec<Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    let got: Vec<(u64, u64)> = lines
        .iter()
        .map(|l| {
            (
                l["window_index"].as_u64().unwrap(),
                l["events"].as_u64().unwrap(),
            )
        })
        .collect();
    // Window [1, 2) is incomplete (the input ended before its end), but whole.
    assert_eq!(got, vec![(0, 100), (1, 100)]);
    assert_eq!(lines[0]["complete"], true);
}
