//! Helpers of the live-pipeline tests (`tests/live_faults.rs`, `tests/streaming.rs`,
//! `tests/cli_stream.rs`, `tests/live_detect.rs`, `tests/live_view.rs`): ZeroMQ publishers on
//! loopback, pipelines run on a thread or as a `synfire run` process, their results and logs
//! read back, signals, and the resident set of a process.

use std::path::Path;
use std::process::{Child, Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use serde_json::Value;
use synfire::live::config::PipelineConfig;
use synfire::live::stage::Output;
use synfire::live::{RunOptions, RunSummary, run};

/// A ZeroMQ PUB socket bound at `endpoint`, with its context (keep both alive while
/// publishing). Its send queue is unlimited (nothing is dropped on this side) and it lingers
/// 5 s at close, so what was sent reaches a connected subscriber.
pub fn publisher(endpoint: &str) -> (zmq::Context, zmq::Socket) {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::PUB).unwrap();
    s.set_linger(5000).unwrap();
    s.set_sndhwm(0).unwrap();
    s.bind(endpoint).unwrap();
    (ctx, s)
}

/// PUB/SUB drops what is sent before a subscriber has connected (the slow joiner). The
/// pipeline's SUB retries its connection with a back-off of at most 1 s, so wait longer.
pub fn wait_for_subscriber() {
    std::thread::sleep(Duration::from_millis(1500));
}

/// A running pipeline: every result as the sinks wrote it, the stop flag, the run's thread.
pub type Running = (Receiver<Output>, Arc<AtomicBool>, JoinHandle<RunSummary>);

/// Runs `config` on a thread, its results tapped.
///
/// # Panics
/// On the thread, when the pipeline fails to start.
pub fn start(config: PipelineConfig) -> Running {
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

/// [`start`] on the pipeline file text `text`.
///
/// # Panics
/// When `text` is not a valid pipeline.
pub fn start_text(text: &str) -> Running {
    start(PipelineConfig::parse(text, Path::new("test.toml")).expect("valid pipeline"))
}

/// Runs the pipeline file text `text` to its end (an archive) without a tap.
///
/// # Panics
/// When `text` is not a valid pipeline or the pipeline fails to start.
pub fn run_text(text: &str) -> RunSummary {
    let config = PipelineConfig::parse(text, Path::new("test.toml")).expect("valid pipeline");
    run(&config, RunOptions::default()).expect("pipeline runs")
}

/// Result lines from `rx`, parsed, until one has `window_index ≥ k` or `limit` passes.
pub fn lines_until_window(rx: &Receiver<Output>, k: u64, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
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

/// The first `n` result lines from `rx`, parsed (fewer when `limit` passes first).
pub fn collect_lines(rx: &Receiver<Output>, n: usize, limit: Duration) -> Vec<Value> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        if let Ok(o) = rx.recv_timeout(Duration::from_millis(200)) {
            out.push(serde_json::from_str(&o.json).unwrap());
        }
    }
    out
}

/// Stops the run and joins it, asserting it ended within 2 s.
///
/// # Panics
/// When the run is still going 2 s after the stop.
pub fn stop_within_2s(stop: &AtomicBool, h: JoinHandle<RunSummary>) -> RunSummary {
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

/// `synfire run <pipeline>` as a command, logging at the default level without colours;
/// the caller sets its standard streams and spawns it.
pub fn synfire_run(pipeline: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_synfire"));
    c.arg("run")
        .arg(pipeline)
        .env_remove("SYNFIRE_LOG")
        .env("NO_COLOR", "1");
    c
}

/// Sends SIGINT to process `pid`.
///
/// # Panics
/// When `kill` fails.
pub fn sigint(pid: u32) {
    assert!(
        Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .unwrap()
            .success(),
        "kill -INT {pid}"
    );
}

/// Waits for `child` to exit, at most `limit` (then kills it and returns `None`); its status
/// and how long it took.
pub fn wait_exit(child: &mut Child, limit: Duration) -> Option<(ExitStatus, Duration)> {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some((s, t.elapsed()));
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The value of `key=` in the first log line containing `message` (and, when given, `label`,
/// e.g. `sink=out` or `source=live`).
///
/// # Panics
/// When there is no such line or key.
pub fn logged(stderr: &str, message: &str, label: Option<&str>, key: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.contains(message) && label.is_none_or(|s| l.contains(&format!("{s} "))))
        .unwrap_or_else(|| panic!("no log line `{message}` ({label:?}) in\n{stderr}"));
    let at = line
        .find(&format!(" {key}="))
        .unwrap_or_else(|| panic!("no `{key}=` in {line}"))
        + key.len()
        + 2;
    line[at..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The resident set of process `pid`, bytes (Linux `/proc`; `None` once it has exited).
pub fn rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}
