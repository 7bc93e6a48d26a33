//! End-to-end streaming over real loopback sockets: `replay` → pipeline → results equal to
//! offline mining of the same windows, in both wire formats; malformed messages counted and
//! survived; a restarting publisher picked up again. Result latency against a sink's own write
//! times, over the archive source.

use std::path::Path;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use serde_json::Value;
use synfire::episode::{Interval, MinerConfig, SupportPer, Threshold, mine};
use synfire::event::{EventStream, Ordering};
use synfire::ingest::{openephys, wire};
use synfire::live::config::PipelineConfig;
use synfire::live::replay::{ReplayFormat, ReplayOptions, replay};
use synfire::live::sink::{LineWriter, Sink};
use synfire::live::stage::{AnyStage, Stage, StageBuilder, StageError};
use synfire::live::window::Window;
use synfire::live::{RunOptions, run};
use synfire::record::StreamKind;
use synfire::report::MineReport;

mod common;

use common::live::{collect_lines, publisher, start, wait_for_subscriber};
use common::{a2929, free_port};

const WINDOW_S: f64 = 120.0;
const HOP_S: f64 = 60.0;
const INTERVALS: [[f64; 2]; 3] = [[0.0, 0.005], [0.005, 0.010], [0.010, 0.020]];

fn live_pipeline(endpoint: &str, format: &str, extra: &str) -> PipelineConfig {
    let text = format!(
        r#"
[sources.live]
kind = "zmq"
endpoint = "{endpoint}"
format = "{format}"
overflow = "block"
receive_hwm_messages = 0
{extra}

[windows.w]
source = "live"
length_s = {WINDOW_S}
hop_s = {HOP_S}

[stages.episodes]
kind = "episodes"
window = "w"
intervals_s = {INTERVALS:?}
support = 0.2
support_per = "seconds"
max_level = 4
device = "cpu"

[sinks.null]
kind = "jsonl"
path = "{}"
"#,
        std::env::temp_dir()
            .join(format!("synfire-stream-{}.jsonl", std::process::id()))
            .display()
    );
    PipelineConfig::parse(&text, Path::new("test.toml")).expect("valid test pipeline")
}

/// The offline result of one window: `synfire mine`'s library path on the same interval.
fn offline_episodes(stream: &EventStream, start: f64, end: f64) -> Value {
    let w = stream.window(start, end).expect("events in the window");
    let ivs: Vec<Interval> = INTERVALS
        .iter()
        .map(|&[l, h]| Interval::new(l, h).unwrap())
        .collect();
    let mut config = MinerConfig::new(
        ivs,
        Threshold::from_options(None, Some(0.2), SupportPer::Seconds),
    );
    config.max_level = 4;
    let result = mine(&w, &config).unwrap();
    serde_json::to_value(MineReport::new("", &w, &config, &result).episodes).unwrap()
}

/// Windows of the archive that a live run must emit as complete (end ≤ last event).
fn complete_windows(stream: &EventStream) -> Vec<(f64, f64)> {
    let last = stream.end();
    (0..)
        .map(|k| (f64::from(k) * HOP_S, f64::from(k) * HOP_S + WINDOW_S))
        .take_while(|&(_, e)| e <= last)
        .filter(|&(s, e)| stream.window(s, e).is_ok())
        .collect()
}

fn check_against_offline(results: &[Value], stream: &EventStream) {
    let want = complete_windows(stream);
    assert!(want.len() >= 8, "the fixture spans enough windows");
    let complete: Vec<&Value> = results.iter().filter(|r| r["complete"] == true).collect();
    assert_eq!(complete.len(), want.len(), "complete windows");
    for (r, &(s, e)) in complete.iter().zip(&want) {
        assert_eq!(r["window_start_s"].as_f64(), Some(s));
        assert_eq!(r["window_end_s"].as_f64(), Some(e));
        assert_eq!(r["late"], 0);
        assert_eq!(r["dropped"], 0);
        let n = stream.window(s, e).unwrap().len();
        assert_eq!(r["events"].as_u64(), Some(n as u64), "events of [{s}, {e})");
        assert_eq!(
            r["episodes"],
            offline_episodes(stream, s, e),
            "episodes of [{s}, {e})"
        );
        assert!(
            !r["episodes"].as_array().unwrap().is_empty(),
            "a real check: frequent episodes exist in [{s}, {e})"
        );
    }
}

#[test]
fn synfire_format_replay_equals_offline_mining_per_window() {
    let stream = synfire::ingest::read_spikes(&a2929(), Ordering::RequireSorted).unwrap();
    let endpoint = format!("tcp://127.0.0.1:{}", free_port());
    let (rx, _stop, h) = start(live_pipeline(&endpoint, "synfire", ""));
    let stats = replay(&ReplayOptions {
        input: a2929(),
        to: endpoint,
        speed: None,
        format: ReplayFormat::Synfire,
        batch: 1000,
        subscribers: 1,
        sample_rate_hz: 30_000.0,
        series: None,
    })
    .unwrap();
    assert_eq!(stats.events, stream.len() as u64);
    // The end-of-stream message ends the source; the run ends by itself.
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"], (stream.len() as u64, 0, 0));
    let results: Vec<Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    check_against_offline(&results, &stream);
    // The windows still open at the end are emitted, marked incomplete.
    assert!(results.last().unwrap()["complete"] == false);
}

#[test]
fn openephys_format_replay_equals_offline_mining_per_window() {
    let stream = synfire::ingest::read_spikes(&a2929(), Ordering::RequireSorted).unwrap();
    let endpoint = format!("tcp://127.0.0.1:{}", free_port());
    // Raw mode sends electrode indices; the table names them as the archive's units.
    let labels = stream.alphabet().labels();
    let top = labels
        .iter()
        .map(|l| l.parse::<usize>().unwrap())
        .max()
        .unwrap();
    let names: Vec<String> = (0..=top).map(|i| i.to_string()).collect();
    let names = format!("{names:?}");
    let (rx, stop, h) = start(live_pipeline(
        &endpoint,
        "openephys",
        &format!("unit_key = \"electrode\"\nraw_electrode_names = {names}"),
    ));
    replay(&ReplayOptions {
        input: a2929(),
        to: endpoint,
        speed: None,
        format: ReplayFormat::Openephys,
        batch: 1,
        subscribers: 1,
        sample_rate_hz: 30_000.0,
        series: None,
    })
    .unwrap();
    // Open Ephys has no end-of-stream: wait for every complete window, then stop as SIGTERM
    // would (windows already closed finish, open ones are discarded).
    let want = complete_windows(&stream).len();
    let results = collect_lines(&rx, want, Duration::from_secs(120));
    stop.store(true, AtomicOrdering::Relaxed);
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"], (stream.len() as u64, 0, 0));
    check_against_offline(&results, &stream);
}

#[test]
fn malformed_openephys_messages_are_counted_and_never_corrupt_other_events() {
    let endpoint = format!("tcp://127.0.0.1:{}", free_port());
    let (_ctx, p) = publisher(&endpoint);
    let (rx, stop, h) = start(live_pipeline(
        &endpoint,
        "openephys",
        "max_message_bytes = 4096",
    ));
    wait_for_subscriber();
    let spike = |t: f64| openephys::encode_raw(3, t, 30_000.0);
    let kind = 1u16.to_le_bytes().to_vec();
    let bad: Vec<Vec<Vec<u8>>> = vec![
        vec![kind.clone()],                                      // frame count
        vec![kind.clone(), b"{}".to_vec(), b"extra".to_vec()],   // frame count
        vec![kind.clone(), b"{\"electrode\": 3, oops".to_vec()], // bad JSON
        vec![9u16.to_le_bytes().to_vec(), b"{}".to_vec()],       // unknown type
        vec![kind.clone(), vec![2, 0, 0, 0]],                    // truncated binary
        vec![
            kind.clone(),
            br#"{"electrode":"3","sample_rate":30000,"sample_number":-9}"#.to_vec(),
        ], // negative time
        vec![kind.clone(), vec![b'{'; 5000]],                    // oversized
    ];
    let mut nan = spike(1.0).to_vec();
    nan[1][16..24].copy_from_slice(&f64::NAN.to_le_bytes());
    let mut good = 0u64;
    for i in 0..200 {
        let t = 1.0 + f64::from(i) * 0.75;
        let f = spike(t);
        p.send_multipart(&f, 0).unwrap();
        good += 1;
        let b = &bad[i as usize % bad.len()];
        p.send_multipart(b, 0).unwrap();
        if i % 50 == 0 {
            p.send_multipart(&nan, 0).unwrap();
        }
    }
    let bad_sent = 200 + 4;
    // Every good spike arrives: windows [0,120) closes at t ≥ 120.
    let results = collect_lines(&rx, 1, Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, AtomicOrdering::Relaxed);
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"], (good, 0, bad_sent));
    assert_eq!(
        results[0]["events"], 159,
        "spikes in [0, 120) s: t = 1 + 0.75 i < 120"
    );
}

#[test]
fn malformed_synfire_messages_are_counted_and_a_restarting_publisher_is_picked_up() {
    let endpoint = format!("tcp://127.0.0.1:{}", free_port());
    let (rx, _stop, h) = start(live_pipeline(
        &endpoint,
        "synfire",
        "max_message_bytes = 100000",
    ));
    let times =
        |from: u32| -> Vec<f64> { (from..from + 100).map(|i| f64::from(i) * 0.5).collect() };
    let units = vec![7u32; 100];
    // Session 1: spikes, malformed messages, then the publisher vanishes without an end.
    {
        let (_ctx, p) = publisher(&endpoint);
        wait_for_subscriber();
        p.send(wire::encode_spikes(1, 0, &times(0), &units), 0)
            .unwrap();
        let good = wire::encode_spikes(1, 100, &times(100), &units);
        let mut version = good.clone();
        version[4] = 9;
        let mut kind = good.clone();
        kind[6] = 42;
        let bad: Vec<Vec<u8>> = vec![
            good[..good.len() - 3].to_vec(),                // truncated
            b"not synfire at all".to_vec(),                 // bad magic
            version,                                        // version
            kind,                                           // unknown type
            wire::encode_spikes(1, 100, &[f64::NAN], &[1]), // NaN time
            vec![0; 200_000],                               // oversized
        ];
        for b in &bad {
            p.send(b.as_slice(), 0).unwrap();
        }
        p.send(good.as_slice(), 0).unwrap();
        p.send_multipart([b"topic".as_slice(), good.as_slice()], 0)
            .unwrap(); // frame count
        // A gap: spikes 200..300 never sent, 300..400 sent (100 counted as dropped).
        p.send(wire::encode_spikes(1, 300, &times(300), &units), 0)
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    // Session 2 on the same endpoint: times restart at 0.
    {
        let (_ctx, p) = publisher(&endpoint);
        wait_for_subscriber(); // the SUB reconnects by itself
        p.send(wire::encode_spikes(2, 0, &times(0), &units), 0)
            .unwrap();
        p.send(wire::encode_end(2, 100), 0).unwrap();
    }
    let summary = h.join().unwrap();
    assert_eq!(summary.sources["live"], (400, 100, 7));
    let results: Vec<Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    // Session 1's windows were flushed at the restart, session 2's at its end.
    let starts: Vec<f64> = results
        .iter()
        .map(|r| r["window_start_s"].as_f64().unwrap())
        .collect();
    assert!(
        starts.windows(2).any(|w| w[1] < w[0]),
        "windows restart: {starts:?}"
    );
    assert_eq!(results.last().unwrap()["events"], 100);
    assert!(results.iter().all(|r| r["late"] == 0));
}

#[test]
fn shipped_pipelines_validate_and_the_archive_replay_runs() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("pipelines");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            PipelineConfig::load(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 3);
    // Paths in the shipped files are relative to the repository root.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    let config = PipelineConfig::load(&dir.join("replay-nwb.toml")).unwrap();
    let (tx, rx) = unbounded();
    let mut config = config;
    for s in config.sinks.values_mut() {
        if let Some(j) = s.options_mut::<synfire::live::sink::jsonl::JsonlConfig>() {
            j.path = Some(
                std::env::temp_dir().join(format!("synfire-shipped-{}.jsonl", std::process::id())),
            );
        }
    }
    let summary = run(
        &config,
        RunOptions {
            tap: Some(tx),
            ..Default::default()
        },
    )
    .unwrap();
    let stream = synfire::ingest::read_spikes(&a2929(), Ordering::RequireSorted).unwrap();
    assert_eq!(summary.sources["a2929"].0, stream.len() as u64);
    let results: Vec<Value> = rx
        .try_iter()
        .map(|o| serde_json::from_str(&o.json).unwrap())
        .collect();
    let heading = results
        .iter()
        .filter(|r| r["stage"] == "heading_summary")
        .count();
    // 63,527 samples, windows of 1,200 every 600: 104 full windows, then the 2 partial
    // windows starting before the last sample, emitted at the end of the archive.
    assert_eq!(heading, 104 + 2);
    // The motif stage: every window answered, and complete windows equal brute force on the
    // same samples of the series.
    let motifs: Vec<&Value> = results
        .iter()
        .filter(|r| r["stage"] == "heading_motif")
        .collect();
    assert_eq!(motifs.len(), 104 + 2);
    let hd = synfire::series::read_series(&format!(
        "{}:/acquisition/CompassDirection/rz",
        a2929().display()
    ))
    .unwrap();
    let mut checked = 0;
    for r in motifs.iter().filter(|r| r["complete"] == true).take(3) {
        let first =
            r["motifs"][0]["start_i"].as_u64().unwrap() - r["motifs"][0]["i"].as_u64().unwrap();
        let x = &hd[first as usize..first as usize + 1200];
        let cfg = synfire::motif::MotifConfig {
            method: synfire::motif::MethodChoice::BruteForce,
            ..synfire::motif::MotifConfig::new(240)
        };
        let want = synfire::motif::find_motifs(x, &cfg, synfire::device::DeviceChoice::Cpu)
            .unwrap()
            .motifs[0];
        assert_eq!(r["motifs"][0]["i"].as_u64(), Some(want.i as u64));
        assert_eq!(r["motifs"][0]["j"].as_u64(), Some(want.j as u64));
        let d = r["motifs"][0]["distance"].as_f64().unwrap();
        assert!((d - want.distance).abs() <= 1e-9 * want.distance.max(1e-12));
        checked += 1;
    }
    assert_eq!(checked, 3);
    for r in results.iter().filter(|r| r["stage"] == "episodes") {
        let (s, e) = (
            r["window_start_s"].as_f64().unwrap(),
            r["window_end_s"].as_f64().unwrap(),
        );
        let w = stream.window(s, e).unwrap();
        assert_eq!(r["events"].as_u64(), Some(w.len() as u64));
    }
}

/// What [`Slow`] saw: per real window (index, its close, processing start and end), in order;
/// the indices of the previews it was given.
#[derive(Debug, Default)]
struct SlowLog {
    windows: Vec<(u64, Instant, Instant, Instant)>,
    previews: Vec<u64>,
}

/// A test-only spike stage that takes `delay` per window (its own sleep) and logs what it saw.
#[derive(Clone, Debug)]
struct Slow {
    delay: Duration,
    log: Arc<Mutex<SlowLog>>,
}

#[derive(serde::Serialize)]
struct Nothing {}

impl Stage for Slow {
    type Result = Nothing;

    fn input(&self) -> StreamKind {
        StreamKind::Spikes
    }

    fn process(&mut self, w: &Window) -> Result<Nothing, StageError> {
        let start = Instant::now();
        std::thread::sleep(self.delay);
        let end = Instant::now();
        self.log
            .lock()
            .unwrap()
            .windows
            .push((w.index, w.closed_at, start, end));
        Ok(Nothing {})
    }

    fn wants_previews(&self) -> bool {
        true
    }

    fn preview(&mut self, w: &Window) {
        self.log.lock().unwrap().previews.push(w.index);
    }
}

impl StageBuilder for Slow {
    fn build(&self) -> Result<Box<dyn AnyStage>, StageError> {
        Ok(Box::new(self.clone()))
    }
}

/// A sink's writer that stamps its own write time on every line: (window index, the line's
/// `seconds`, the instant its write finished).
/// One written line: window index, the line's `seconds`, the write instant, `complete`.
type Written = (u64, f64, Instant, bool);

struct Probe(Arc<Mutex<Vec<Written>>>);

impl LineWriter for Probe {
    fn write_line(&mut self, _stage: &str, json: &str) -> std::io::Result<()> {
        let v: Value = serde_json::from_str(json).map_err(std::io::Error::other)?;
        let (Some(index), Some(seconds)) = (v["window_index"].as_u64(), v["seconds"].as_f64())
        else {
            return Err(std::io::Error::other(format!("not a window line: {json}")));
        };
        let complete = v["complete"].as_bool().unwrap_or(false);
        self.0
            .lock()
            .unwrap()
            .push((index, seconds, Instant::now(), complete));
        Ok(())
    }
}

/// The result latency a sink records is the wall-clock time from the window's close to the
/// sink's own write of its line: it includes the time the window waited for the stage (a stage
/// slower than the hop makes windows queue), not only the stage's processing; previews, which
/// the stage also sees, are never measured.
#[test]
fn result_latency_runs_from_the_window_close_to_the_sinks_own_write() {
    // The archive at 2000 x real time: a 20 s hop closes a window every 10 ms of wall time,
    // while the stage takes 25 ms per window, so windows queue. The first window closes
    // ~150 ms after the start; the stage, idle until then, is offered previews of it.
    let delay = Duration::from_millis(25);
    let text = format!(
        r#"
[sources.a2929]
kind = "hdf5"
path = "{}"
speed = 2000.0
overflow = "block"

[windows.w]
source = "a2929"
length_s = 300.0
hop_s = 20.0

[stages.slow]
kind = "rate"
window = "w"

[sinks.file]
kind = "jsonl"
path = "{}"
"#,
        a2929().display(),
        std::env::temp_dir()
            .join(format!("synfire-latency-{}.jsonl", std::process::id()))
            .display()
    );
    let mut config = PipelineConfig::parse(&text, Path::new("test.toml")).expect("valid pipeline");
    let log = Arc::new(Mutex::new(SlowLog::default()));
    config.stages.get_mut("slow").expect("the stage").builder = Box::new(Slow {
        delay,
        log: log.clone(),
    });
    let written = Arc::new(Mutex::new(Vec::new()));
    let probe = Sink::custom(
        "probe",
        Some(vec!["slow".to_owned()]),
        Box::new(Probe(written.clone())),
    );
    let summary = run(
        &config,
        RunOptions {
            sinks: vec![probe],
            ..Default::default()
        },
    )
    .expect("pipeline runs");

    let log = log.lock().unwrap();
    let written = written.lock().unwrap();
    let measured = &summary.result_latency["slow"]["probe"].seconds;
    assert!(
        !log.previews.is_empty(),
        "the stage saw previews of the first window"
    );
    assert!(log.windows.len() >= 40, "{} windows", log.windows.len());
    // One line per real window (a preview is none); one latency per complete window (those
    // left open when the archive ends close at once and are counted, not measured).
    assert_eq!(written.len(), log.windows.len());
    let complete: Vec<bool> = written.iter().map(|w| w.3).collect();
    let n_complete = complete.iter().filter(|&&c| c).count();
    assert!(
        n_complete >= 40 && n_complete < written.len(),
        "{n_complete} complete windows of {}",
        written.len()
    );
    assert_eq!(measured.len(), n_complete);
    assert_eq!(
        summary.result_latency["slow"]["probe"].incomplete,
        written.len() - n_complete
    );
    assert_eq!(summary.sinks["probe"], written.len() as u64);
    assert_eq!(summary.result_latency["slow"]["file"].windows(), n_complete);

    // The sink measures right after its writer returns: at or after the writer's own stamp,
    // and within `tolerance` of it.
    let tolerance = 0.020;
    let mut waited_max = 0.0_f64;
    let mut measured_iter = measured.iter();
    for (i, (&(index, seconds, written_at, complete), &(k, closed, start, end))) in
        written.iter().zip(&log.windows).enumerate()
    {
        assert_eq!(index, k, "line {i} is window {k}'s");
        if !complete {
            continue;
        }
        let own = written_at.duration_since(closed).as_secs_f64();
        let latency = *measured_iter.next().expect("a latency per complete window");
        assert!(
            latency >= own && latency <= own + tolerance,
            "window {k}: latency {latency} s, the sink's own write − close {own} s"
        );
        let processing = end.duration_since(start).as_secs_f64();
        assert!(processing >= delay.as_secs_f64());
        assert!(
            latency >= processing && latency >= seconds,
            "window {k}: latency {latency} s, processing {processing} s, line's seconds {seconds}"
        );
        waited_max = waited_max.max(start.duration_since(closed).as_secs_f64());
    }
    // Windows did wait for the stage, longer than the tolerance: a latency measured from the
    // stage's start, or without the queueing, would fail the check above.
    assert!(
        waited_max > 3.0 * tolerance,
        "windows waited at most {waited_max} s before the stage took them"
    );
    let l = &summary.result_latency["slow"]["probe"];
    assert_eq!(
        l.max(),
        measured.iter().copied().reduce(f64::max),
        "the summary's max is of the same measurements"
    );
    assert!(l.p50() <= l.p99() && l.p99() <= l.max());
}

/// A sink made in code cannot take the name of another sink of the run (the summary and the
/// metrics are keyed by sink name).
#[test]
fn a_sink_made_in_code_needs_a_name_of_its_own() {
    let text = format!(
        r#"
[sources.a2929]
kind = "hdf5"
path = "{}"

[windows.w]
source = "a2929"
length_s = 60.0
hop_s = 60.0

[stages.rates]
kind = "rate"
window = "w"

[sinks.out]
kind = "jsonl"
path = "{}"
"#,
        a2929().display(),
        std::env::temp_dir()
            .join(format!("synfire-clash-{}.jsonl", std::process::id()))
            .display()
    );
    let config = PipelineConfig::parse(&text, Path::new("test.toml")).expect("valid pipeline");
    let clash = Sink::custom("out", None, Box::new(Probe(Arc::default())));
    let e = run(
        &config,
        RunOptions {
            sinks: vec![clash],
            ..Default::default()
        },
    )
    .expect_err("two sinks named `out`");
    assert!(e.to_string().contains("sink `out`"), "{e}");
}
