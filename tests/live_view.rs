//! The live view (`synfire run --ui`) on the real A2929 recording: the event stream a page
//! reads (snapshot, then deltas with spikes, occurrences of a watched episode and an episodes
//! stage's top episodes), a taken address refused naming it, the pipeline's results unchanged
//! and every offered update accounted for with a stalled client connected, and the page itself
//! in headless chromium driven over WebDriver (chromedriver): it loads, updates as spikes
//! arrive, shows the watched episode `6-(10,20]ms-6` highlighted and named, and reconnects
//! when the server restarts. A screenshot lands in `<target>/view-screenshot.png`.
//!
//! Its own harness (libtest-mimic): the browser test is reported as ignored when chromium or
//! chromedriver is absent, and fails instead when `SYNFIRE_REQUIRE_BROWSER=1` (CI installs
//! both with `tools/setup-browser.sh` and sets it).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::{Value, json};
use synfire::live::config::PipelineConfig;
use synfire::live::{RunOptions, RunSummary, run};

mod common;

use common::{a2929, free_port};

const WATCHED: &str = "6-(10,20]ms-6";

/// A pipeline on the recording: a detect stage watching [`WATCHED`], an episodes stage on
/// 10 s windows every 5 s, every line to `out`; paced at `speed` × real time (`None`: as fast
/// as possible).
fn pipeline(dir: &Path, speed: Option<f64>, out: &Path) -> PathBuf {
    let speed = speed.map(|s| format!("speed = {s}\n")).unwrap_or_default();
    let text = format!(
        r#"
[sources.a2929]
kind = "hdf5"
path = "{fixture}"
overflow = "block"
{speed}
[windows.w10]
source = "a2929"
length_s = 10.0
hop_s = 5.0

[stages.episodes]
kind = "episodes"
window = "w10"
intervals_s = [[0.0, 0.005], [0.005, 0.010], [0.010, 0.020]]
support = 0.2
support_per = "seconds"
max_level = 3
device = "cpu"

[stages.tested]
kind = "episodes"
window = "w10"
intervals_s = [[0.005, 0.010], [0.010, 0.020]]
support = 0.5
support_per = "seconds"
max_level = 2
device = "cpu"

[stages.tested.significance]
surrogates = "dither:0.015"
n_surrogates = 19
correction = "max-t"

[stages.stim]
kind = "detect"
source = "a2929"
episodes = ["{WATCHED}"]

[sinks.out]
kind = "jsonl"
path = "{out}"
"#,
        fixture = a2929().display(),
        out = out.display(),
    );
    let path = dir.join("view.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn check(ok: bool, what: impl std::fmt::Display) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(what.to_string().into())
    }
}

/// One plain HTTP/1.1 exchange (`Connection: close`): status and body (read by its
/// `Content-Length`, chunked, or to the end).
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let payload = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n\r\n{payload}",
        payload.len()
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let mut head = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_owned())
        })
    };
    let mut raw = Vec::new();
    if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        raw.resize(n, 0);
        let _ = r.read_exact(&mut raw);
    } else if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            line.clear();
            let _ = r.read_line(&mut line);
            let n = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            let start = raw.len();
            raw.resize(start + n, 0);
            let _ = r.read_exact(&mut raw[start..]);
            line.clear();
            let _ = r.read_line(&mut line);
        }
    } else {
        let _ = r.read_to_end(&mut raw);
    }
    (status, String::from_utf8_lossy(&raw).into_owned())
}

/// Reads server-sent events from `/events` on `addr`: `(event, data)` pairs, until `done`
/// says so or `limit` passes.
fn read_events(
    addr: SocketAddr,
    limit: Duration,
    mut done: impl FnMut(&str, &Value) -> bool,
) -> Result<(), Failed> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let start = Instant::now();
    let mut event = String::new();
    let mut line = String::new();
    while start.elapsed() < limit {
        line.clear();
        if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the event stream ended".into());
        }
        let l = line.trim_end();
        if let Some(e) = l.strip_prefix("event: ") {
            event = e.to_owned();
        } else if let Some(d) = l.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(d).map_err(|e| format!("{e}: {d}"))?;
            if done(&event, &v) {
                return Ok(());
            }
        }
    }
    Err(format!("gave up after {limit:?}").into())
}

/// The server-sent events a page reads: a snapshot first, then deltas with the raster's
/// spikes, the watched episode's occurrences on the units named in the recording, and the
/// episodes stage's top episodes; the page and `/state` are served too.
fn the_event_stream_carries_spikes_occurrences_and_episodes() -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let config = PipelineConfig::load(&pipeline(dir.path(), Some(20.0), &dir.path().join("o")))
        .map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let runner = std::thread::spawn(move || {
        run(
            &config,
            RunOptions {
                ui: Some(addr),
                stop: Some(flag),
                ..Default::default()
            },
        )
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(addr).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, page) = http(addr, "GET", "/", None);
    check(
        status == 200 && page.contains("synfire live view"),
        "the page",
    )?;
    let (status, state) = http(addr, "GET", "/state", None);
    let state: Value = serde_json::from_str(&state).map_err(|e| e.to_string())?;
    check(
        status == 200 && state["kind"] == "snapshot",
        format!("/state: {state}"),
    )?;
    check(http(addr, "GET", "/nothing", None).0 == 404, "404")?;

    let (mut first, mut spikes, mut occurrence, mut top) = (None::<String>, 0usize, None, None);
    let mut tested = None::<Value>;
    let mut unit_names = Vec::new();
    let result = read_events(addr, Duration::from_secs(60), |event, v| {
        first.get_or_insert_with(|| event.to_owned());
        let src = &v["sources"][0];
        if let Some(u) = src["units"].as_array() {
            unit_names = u.clone();
        }
        spikes += src["t_s"].as_array().map_or(0, Vec::len);
        if let Some(o) = src["occurrences"]
            .as_array()
            .and_then(|a| a.iter().find(|o| o["episode"] == WATCHED))
        {
            occurrence = Some(o.clone());
        }
        if let Some(t) = v["stages"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == "episodes"))
            .and_then(|s| s["window"]["top"].as_array())
            .filter(|t| !t.is_empty())
        {
            top = Some(t.clone());
        }
        if let Some(w) = v["stages"]
            .as_array()
            .and_then(|a| a.iter().find(|s| s["name"] == "tested"))
            .map(|s| &s["window"])
            .filter(|w| w["top"].as_array().is_some_and(|t| !t.is_empty()))
        {
            tested = Some(w.clone());
        }
        spikes > 100 && occurrence.is_some() && top.is_some() && tested.is_some()
    });
    stop.store(true, Ordering::Relaxed);
    let summary = runner.join().unwrap().map_err(|e| e.to_string())?;
    result?;
    check(first.as_deref() == Some("snapshot"), "a snapshot first")?;
    let o = occurrence.unwrap();
    // Both nodes are unit "6": the view found its row from the announced names.
    let units = o["units"].as_array().unwrap();
    check(
        units.len() == 2
            && units
                .iter()
                .all(|u| unit_names.get(u.as_u64().unwrap() as usize) == Some(&json!("6"))),
        format!("occurrence {o} on units {unit_names:?}"),
    )?;
    let t = o["times_s"].as_array().unwrap();
    let gap = t[1].as_f64().unwrap() - t[0].as_f64().unwrap();
    check(gap > 0.010 && gap <= 0.020, format!("gap {gap}"))?;
    check(
        top.unwrap()
            .iter()
            .all(|e| e["count"].as_u64().unwrap() >= 2),
        "top episodes with counts",
    )?;
    // The stage with significance: its summary and every listed episode's p-values (the
    // fewest surrogates reach 1/20; a p-value is never above 1 nor below 1/(S+1)).
    let tested = tested.unwrap();
    check(
        tested["significance"]["n_surrogates"] == 19
            && tested["significance"]["correction"] == "max-t",
        format!("significance summary: {}", tested["significance"]),
    )?;
    for e in tested["top"].as_array().unwrap() {
        let p = e["p_value"].as_f64().unwrap_or(f64::NAN);
        let q = e["p_adjusted"].as_f64().unwrap_or(f64::NAN);
        check(
            (0.05..=1.0).contains(&p) && (0.05..=1.0).contains(&q) && e["significant"].is_boolean(),
            format!("p-values of {e}"),
        )?;
    }
    let view = summary.view.ok_or("no view summary")?;
    check(view.clients >= 1, format!("{view:?}"))?;
    Ok(())
}

/// A port already bound: the run is refused before it starts, the error naming the address;
/// a file's `[pipeline] ui` that is no address is a validation error naming the field.
fn a_taken_address_is_refused_naming_it() -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let config = PipelineConfig::load(&pipeline(dir.path(), None, &dir.path().join("o")))
        .map_err(|e| e.to_string())?;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let err = run(
        &config,
        RunOptions {
            ui: Some(addr),
            ..Default::default()
        },
    )
    .err()
    .ok_or("the run started on a taken address")?;
    check(
        err.to_string().contains(&addr.to_string()),
        format!("error without the address: {err}"),
    )?;
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(dir.path().join("view.toml")).unwrap();
    std::fs::write(
        &bad,
        format!("[pipeline]\nui = \"localhost\"\nui_span_s = 0\n{text}"),
    )
    .unwrap();
    let err = PipelineConfig::load(&bad)
        .err()
        .ok_or("accepted")?
        .to_string();
    check(
        err.contains("`pipeline.ui`") && err.contains("`pipeline.ui_span_s`"),
        err,
    )
}

/// The lines of a run without the fields that differ between runs (stage seconds, wall
/// clocks), in order per stage.
fn stable_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("seconds");
            o.remove("detected_unix_s");
            // Each run has its own id.
            o.remove("run_id");
            if let Some(levels) = o.get_mut("levels").and_then(Value::as_array_mut) {
                for l in levels {
                    l.as_object_mut().unwrap().remove("seconds");
                }
            }
            v
        })
        .collect()
}

fn per_stage(lines: &[Value]) -> std::collections::BTreeMap<String, Vec<Value>> {
    let mut m = std::collections::BTreeMap::<String, Vec<Value>>::new();
    for l in lines {
        m.entry(l["stage"].as_str().unwrap().to_owned())
            .or_default()
            .push(l.clone());
    }
    m
}

/// As fast as possible, with the view on and two clients (one reading, one stalled that
/// never reads): the results equal those of a run without the view, and every update the
/// pipeline offered the view was taken or counted as dropped (spikes: the source's events;
/// lines: those the sink wrote).
fn a_stalled_client_changes_no_result() -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let plain_out = dir.path().join("plain.jsonl");
    let plain =
        PipelineConfig::load(&pipeline(dir.path(), None, &plain_out)).map_err(|e| e.to_string())?;
    let base: RunSummary = run(&plain, RunOptions::default()).map_err(|e| e.to_string())?;

    let view_out = dir.path().join("view.jsonl");
    let config =
        PipelineConfig::load(&pipeline(dir.path(), None, &view_out)).map_err(|e| e.to_string())?;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    // The clients connect as soon as the port answers, while the run goes on.
    let connector = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut stalled = None;
        while Instant::now() < deadline {
            if let Ok(mut s) = TcpStream::connect(addr) {
                let _ = write!(s, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n");
                stalled = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let reading = std::thread::spawn(move || {
            let _ = read_events(addr, Duration::from_secs(60), |event, _| event == "end");
        });
        (stalled, reading)
    });
    let with_view = run(
        &config,
        RunOptions {
            ui: Some(addr),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let (stalled, reading) = connector.join().unwrap();
    drop(stalled);
    let _ = reading.join();

    let a = per_stage(&stable_lines(&plain_out));
    let b = per_stage(&stable_lines(&view_out));
    check(
        a.keys().eq(b.keys()),
        format!("{:?} != {:?}", a.keys(), b.keys()),
    )?;
    for (stage, lines) in &a {
        check(
            lines == &b[stage],
            format!("stage `{stage}`: the lines differ with the view on"),
        )?;
    }
    check(a["stim"].len() > 1000, "thousands of occurrences")?;
    let view = with_view.view.ok_or("no view summary")?;
    let events_in = with_view.sources["a2929"].0;
    check(events_in == base.sources["a2929"].0, "the same events")?;
    // Every spike offered once: taken by the view or dropped (a full queue).
    check(
        view.spikes_received + view.raster_dropped >= events_in
            && view.spikes_received <= events_in,
        format!("{view:?} for {events_in} events"),
    )?;
    check(
        view.lines_received + view.lines_dropped == with_view.sinks["out"],
        format!("{view:?} for {} lines", with_view.sinks["out"]),
    )?;
    eprintln!(
        "  view: {} of {events_in} spikes taken, {} raster updates dropped; {} of {} lines taken; \
         {} clients, {} resyncs",
        view.spikes_received,
        view.raster_dropped,
        view.lines_received,
        with_view.sinks["out"],
        view.clients,
        view.resyncs
    );
    Ok(())
}

// ---- the browser --------------------------------------------------------------------------

fn find(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        // Named: that binary or none.
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in names {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn browser() -> Result<(PathBuf, PathBuf), String> {
    let chromium = find(
        "SYNFIRE_CHROMIUM",
        &["chromium", "chromium-browser", "google-chrome"],
    );
    let driver = find("SYNFIRE_CHROMEDRIVER", &["chromedriver"]);
    match (chromium, driver) {
        (Some(c), Some(d)) => Ok((c, d)),
        (c, d) => Err(format!(
            "no {} (install with tools/setup-browser.sh)",
            [
                c.is_none().then_some("chromium"),
                d.is_none().then_some("chromedriver")
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" nor ")
        )),
    }
}

/// Kills and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A WebDriver session on a chromedriver of our own.
struct Driver {
    addr: SocketAddr,
    session: String,
    _driver: Reaped,
}

impl Driver {
    fn start(chromium: &Path, chromedriver: &Path, profile: &Path) -> Result<Self, Failed> {
        let port = free_port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", chromedriver.display()))?;
        let driver = Reaped(child);
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if TcpStream::connect(addr).is_ok() {
                let (_, body) = http(addr, "GET", "/status", None);
                if serde_json::from_str::<Value>(&body).is_ok_and(|v| v["value"]["ready"] == true) {
                    break;
                }
            }
            if Instant::now() > deadline {
                return Err("chromedriver did not become ready".into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--no-first-run", "--disable-dev-shm-usage",
                    format!("--user-data-dir={}", profile.display()),
                    "--window-size=1500,1000",
                ],
            },
        }}});
        let (status, body) = http(addr, "POST", "/session", Some(&caps));
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        let session = v["value"]["sessionId"]
            .as_str()
            .ok_or_else(|| format!("no session ({status}): {body}"))?
            .to_owned();
        Ok(Self {
            addr,
            session,
            _driver: driver,
        })
    }

    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Failed> {
        let (status, text) = http(
            self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            body.as_ref(),
        );
        let v: Value = serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))?;
        if status != 200 {
            return Err(format!("WebDriver {method} {path}: {status} {}", v["value"]).into());
        }
        Ok(v["value"].clone())
    }

    fn goto(&self, url: &str) -> Result<(), Failed> {
        self.command("POST", "/url", Some(json!({ "url": url })))
            .map(drop)
    }

    fn eval(&self, script: &str) -> Result<Value, Failed> {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({ "script": script, "args": [] })),
        )
    }

    fn screenshot(&self) -> Result<Vec<u8>, Failed> {
        let v = self.command("GET", "/screenshot", None)?;
        base64(v.as_str().ok_or("no screenshot")?).ok_or_else(|| "bad base64".into())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = http(
            self.addr,
            "DELETE",
            &format!("/session/{}", self.session),
            None,
        );
    }
}

fn base64(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' | b'\n' | b'\r' => continue,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `synfire run PIPELINE --ui ADDR`, its output discarded.
fn synfire_run(pipeline: &Path, addr: SocketAddr) -> Result<Reaped, Failed> {
    let child = common::live::synfire_run(pipeline)
        .arg("--ui")
        .arg(addr.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting synfire: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(addr).is_err() {
        if Instant::now() > deadline {
            return Err("synfire --ui did not start serving".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(Reaped(child))
}

const READ_PAGE: &str = r##"
const q = s => document.querySelector(s);
const occ = [...document.querySelectorAll("svg .occurrence")];
return {
  status: q("#status").dataset.state,
  run: q("#meta").textContent,
  received: +q("#spikes-received").textContent,
  drawn: +q("#spikes-drawn").textContent,
  occurrences: +q("#occurrences-received").textContent,
  highlighted: occ.map(g => g.dataset.episode),
  named: [...document.querySelectorAll("svg .occurrence text")].map(t => t.textContent),
  circles: document.querySelectorAll("svg .occurrence circle").length,
  episodes: [...document.querySelectorAll("table.episodes tr.episode-row")].map(r => r.dataset.episode),
  detect: [...document.querySelectorAll("table.detect tr.detect-row")].map(r => r.dataset.episode),
  tested_columns: [...document.querySelectorAll('table.episodes[data-stage="tested"] th')].map(h => h.textContent),
  tested_p: [...document.querySelectorAll('table.episodes[data-stage="tested"] tr.episode-row td:nth-child(5)')].map(td => td.textContent),
};
"##;

/// Polls `read` until `ok` holds (or `limit` passes); the last reading.
fn wait_for(d: &Driver, limit: Duration, ok: impl Fn(&Value) -> bool) -> Result<Value, Failed> {
    let start = Instant::now();
    loop {
        let v = d.eval(READ_PAGE)?;
        if ok(&v) {
            return Ok(v);
        }
        if start.elapsed() > limit {
            return Err(format!("the page never got there: {v}").into());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn the_page_shows_the_raster_and_the_watched_episode(
    chromium: &Path,
    chromedriver: &Path,
) -> Result<(), Failed> {
    let dir = tempfile::tempdir().unwrap();
    let toml = pipeline(dir.path(), Some(4.0), &dir.path().join("out.jsonl"));
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let server = synfire_run(&toml, addr)?;
    let profile = tempfile::tempdir().unwrap();
    let d = Driver::start(chromium, chromedriver, profile.path())?;
    d.goto(&format!("http://{addr}/"))?;

    // Loads and goes live; spikes arrive and are drawn.
    let first = wait_for(&d, Duration::from_secs(30), |v| {
        v["status"] == "live" && v["drawn"].as_u64().unwrap_or(0) > 0
    })?;
    std::thread::sleep(Duration::from_secs(1));
    let second = d.eval(READ_PAGE)?;
    check(
        second["received"].as_u64() > first["received"].as_u64(),
        format!("no new spikes in 1 s: {first} then {second}"),
    )?;
    // The watched episode: occurrences drawn over their spikes and named, counted in the
    // detect table; the episodes stage's top episodes listed.
    let shown = wait_for(&d, Duration::from_secs(40), |v| {
        let has = |k: &str| {
            v[k].as_array()
                .is_some_and(|a| a.iter().any(|e| e == WATCHED))
        };
        has("highlighted")
            && has("named")
            && has("detect")
            && v["episodes"].as_array().is_some_and(|a| !a.is_empty())
            && v["tested_p"].as_array().is_some_and(|a| !a.is_empty())
    })?;
    // The stage with significance shows p-values (raw, adjusted) beside the counts.
    check(
        shown["tested_columns"]
            .as_array()
            .is_some_and(|c| c.iter().any(|h| h == "p") && c.iter().any(|h| h == "p adj.")),
        format!("p-value columns: {}", shown["tested_columns"]),
    )?;
    check(
        shown["circles"].as_u64().unwrap_or(0) >= 2,
        "each occurrence's spikes circled",
    )?;
    let png = d.screenshot()?;
    let shot = std::env::var_os("SYNFIRE_SCREENSHOT").map_or_else(
        || Path::new(env!("CARGO_TARGET_TMPDIR")).join("../view-screenshot.png"),
        PathBuf::from,
    );
    std::fs::write(&shot, &png).map_err(|e| format!("{}: {e}", shot.display()))?;
    eprintln!(
        "  screenshot: {} ({} bytes); page: {shown}",
        shot.display(),
        png.len()
    );
    check(png.starts_with(b"\x89PNG"), "a PNG")?;

    // The server goes: the page says it is reconnecting; a new run on the same address: live
    // again, with the new run's data.
    drop(server);
    wait_for(&d, Duration::from_secs(10), |v| {
        v["status"] == "reconnecting" || v["status"] == "finished"
    })?;
    let _server = synfire_run(&toml, addr)?;
    let again = wait_for(&d, Duration::from_secs(30), |v| {
        v["status"] == "live" && v["run"] != shown["run"] && v["drawn"].as_u64().unwrap_or(0) > 0
    })?;
    eprintln!("  after the restart: {again}");
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let require = std::env::var("SYNFIRE_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    let found = browser();
    let browser_trial = match found {
        Ok((chromium, driver)) => Trial::test(
            "the_page_shows_the_raster_and_the_watched_episode",
            move || the_page_shows_the_raster_and_the_watched_episode(&chromium, &driver),
        ),
        Err(why) if require => Trial::test(
            "the_page_shows_the_raster_and_the_watched_episode",
            move || Err(format!("SYNFIRE_REQUIRE_BROWSER=1 but {why}").into()),
        ),
        Err(why) => {
            eprintln!("live_view: browser test ignored: {why}");
            Trial::test(
                "the_page_shows_the_raster_and_the_watched_episode",
                move || Err(why.into()),
            )
            .with_ignored_flag(true)
        }
    };
    let trials = vec![
        Trial::test(
            "the_event_stream_carries_spikes_occurrences_and_episodes",
            the_event_stream_carries_spikes_occurrences_and_episodes,
        ),
        Trial::test(
            "a_taken_address_is_refused_naming_it",
            a_taken_address_is_refused_naming_it,
        ),
        Trial::test(
            "a_stalled_client_changes_no_result",
            a_stalled_client_changes_no_result,
        ),
        browser_trial,
    ];
    libtest_mimic::run(&args, trials).exit();
}
