//! The streaming commands as a user runs them: `validate`, `run` (with `/metrics` and a clean
//! SIGTERM shutdown), and `mine --start-s/--end-s` reproducing a window of `run`.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::live::synfire_run;
use common::{free_port, synfire};
use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn validate_reports_every_error_with_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        r#"
[sources.s]
kind = "zmq"
endpoint = "localhost"
overflow = "sometimes"

[windows.w]
source = "nope"
length_s = -1

[stages.e]
kind = "episodes"
window = "w"
intervals_s = [[0.01, 0.005]]
min_count = 3
colour = "red"

[sinks.out]
kind = "jsonl"
"#,
    )
    .unwrap();
    let out = synfire(["validate".as_ref(), path.as_os_str()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        "`sources.s.overflow`",
        "`windows.w.source`: no source named `nope`",
        "`stages.e.colour`: unknown field",
        "`stages.e.intervals_s[0]`",
    ] {
        assert!(err.contains(want), "missing {want} in\n{err}");
    }
    assert!(err.contains("bad.toml"), "{err}");
    let ok = synfire(["validate", &format!("{ROOT}/pipelines/replay-nwb.toml")]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

fn get_metrics(addr: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    Some(body)
}

#[test]
fn run_serves_metrics_and_shuts_down_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("live.toml");
    let results = dir.path().join("out.jsonl");
    std::fs::write(
        &pipeline,
        format!(
            r#"
[sources.live]
kind = "zmq"
endpoint = "tcp://127.0.0.1:{}"
format = "openephys"

[windows.w]
source = "live"
length_s = 10.0
hop_s = 5.0

[stages.episodes]
kind = "episodes"
window = "w"
intervals_s = [[0.0, 0.01]]
min_count = 2
device = "cpu"

[sinks.file]
kind = "jsonl"
path = "{}"
"#,
            free_port(),
            results.display()
        ),
    )
    .unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = synfire_run(&pipeline)
        .args(["--metrics", &addr])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        // The stages' counters can be served before the source's is registered: wait for it.
        let got = get_metrics(&addr);
        if let Some(b) = got
            .clone()
            .filter(|b| b.contains("synfire_events_in_total"))
        {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "no source counter on /metrics within 20 s; last body:\n{got:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    for name in [
        "synfire_events_in_total{source=\"live\"} 0",
        "# TYPE synfire_events_in_total counter",
    ] {
        assert!(body.contains(name), "missing {name} in\n{body}");
    }
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "no exit within 10 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?}\n{err}");
    assert!(err.contains("Shutting down"), "{err}");
    assert!(err.contains("Source totals"), "{err}");
}

#[test]
fn mine_with_start_and_end_reproduces_a_window_of_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(["run", "pipelines/replay-nwb.toml"])
        .current_dir(ROOT)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let windows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["stage"] == "episodes")
        .collect();
    assert!(windows.len() >= 18, "{} windows", windows.len());
    for w in [&windows[0], &windows[7]] {
        let (s, e) = (
            w["window_start_s"].to_string(),
            w["window_end_s"].to_string(),
        );
        let mined = synfire([
            "mine",
            &format!("{ROOT}/fixtures/spikes/A2929-200711/A2929-200711.nwb"),
            "--intervals",
            "0.000-0.005,0.005-0.010,0.010-0.020",
            "--support",
            "0.2",
            "--support-per",
            "seconds",
            "--max-level",
            "4",
            "--start-s",
            &s,
            "--end-s",
            &e,
            "--format",
            "json",
            "--quiet",
        ]);
        assert!(
            mined.status.success(),
            "{}",
            String::from_utf8_lossy(&mined.stderr)
        );
        let m: Value = serde_json::from_slice(&mined.stdout).unwrap();
        assert_eq!(m["events"], w["events"]);
        assert_eq!(m["episodes"], w["episodes"], "window [{s}, {e})");
        assert!(m["episodes"].as_array().unwrap().len() > 15);
    }
}

#[test]
#[cfg_attr(
    synfire_gpu,
    ignore = "checks the error without a GPU; this machine has one"
)]
fn a_gpu_stage_without_a_gpu_is_a_clear_startup_error() {
    if synfire::device::probe().is_ok_and(|d| !d.is_empty()) {
        eprintln!("skipped: this host has a GPU");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("gpu.toml");
    let text = std::fs::read_to_string(format!("{ROOT}/pipelines/replay-nwb.toml"))
        .unwrap()
        .replace("device = \"auto\"", "device = \"gpu\"")
        .replace(
            "path = \"../fixtures/",
            &format!("path = \"{ROOT}/fixtures/"),
        );
    std::fs::write(&pipeline, text).unwrap();
    let out = synfire(["run".as_ref(), pipeline.as_os_str()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stage `episodes`"), "{err}");
    assert!(err.contains("no CUDA driver"), "{err}");
    assert!(out.stdout.is_empty(), "no results before the error");
}

/// Relative paths in a pipeline are resolved against the pipeline file's folder, so the
/// shipped pipelines validate and run from any working directory.
#[test]
fn shipped_pipelines_run_from_any_working_directory() {
    let elsewhere = tempfile::tempdir().unwrap();
    for name in ["replay-nwb.toml", "replay-search.toml"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_synfire"))
            .args(["validate", &format!("{ROOT}/pipelines/{name}")])
            .current_dir(elsewhere.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A pipeline whose relative path does not exist next to it names the resolved path.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.toml");
    std::fs::write(
        &p,
        std::fs::read_to_string(format!("{ROOT}/pipelines/replay-nwb.toml")).unwrap(),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(["validate", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&dir.path().join("../fixtures").display().to_string()),
        "{err}"
    );
}
