//! `synfire bench closed-loop`: the latency of a closed loop, from the publish of an
//! episode's last spike to the TTL request arriving at the Open Ephys Network Events plugin.
//!
//! A publisher plays a background of `--units` Poisson units at `--rate-hz` (real time, Open
//! Ephys Event Broadcaster messages, JSON and raw binary modes) with an episode
//! `e0 -(2,4]ms-> e1 -(3,5]ms-> e2` planted `--episode-rate-hz` times a second (its three
//! units fire only there, so every occurrence is a planted one). A pipeline (ZeroMQ source,
//! a detect stage watching that episode, an `openephys_ttl` sink) runs in this process; a
//! mock of the plugin (a `REP` socket answering `TTLHandled`, as the plugin's source does)
//! notes when each request arrives. All instants are one process's monotonic clock.
//!
//! Per occurrence: publish → detected (PUB/SUB, decoding, the ring, the window thread's
//! detector), detected → request sent (the TTL queue and thread), sent → received by the
//! mock (REQ/REP). The target (issue 21): p99 ≤ 1 ms on a 2-core machine with a 300-unit
//! background at real time.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp};
use synfire::ingest::openephys;
use synfire::live::config::PipelineConfig;
use synfire::live::{RunOptions, run};

use crate::cli::args::OutputArg;

/// Options of `synfire bench closed-loop`.
#[derive(Debug, Args)]
pub struct ClosedLoopArgs {
    /// Background units (Poisson).
    #[arg(long, default_value_t = 300)]
    units: u32,
    /// Each background unit's firing rate, Hz.
    #[arg(long, default_value_t = 5.0)]
    rate_hz: f64,
    /// Seconds of stream per mode (real time).
    #[arg(long, default_value_t = 20.0)]
    duration_s: f64,
    /// Planted occurrences per second.
    #[arg(long, default_value_t = 5.0)]
    episode_rate_hz: f64,
    /// Open Ephys Event Broadcaster modes, comma-separated: `json`, `raw`.
    #[arg(long, default_value = "json,raw")]
    modes: String,
    /// Seed of the background and the planting jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[command(flatten)]
    output: OutputArg,
}

/// The acquisition clock (Hz): every time is a whole sample, so both modes carry the same
/// times.
const RATE: f64 = 30_000.0;
const EPISODE: &str = "e0-(2,4]ms-e1-(3,5]ms-e2";

/// One spike to publish: time (s), electrode index, whether it ends a planted occurrence.
type Spike = (f64, u16, bool);

fn spikes(args: &ClosedLoopArgs) -> Result<Vec<Spike>> {
    if args.units == 0 || args.units > 60_000 {
        bail!("--units must be 1–60000, got {}", args.units);
    }
    if !(args.rate_hz > 0.0 && args.episode_rate_hz > 0.0 && args.duration_s > 0.0) {
        bail!("--rate-hz, --episode-rate-hz and --duration-s must be positive");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let sample = |t: f64| (t * RATE).round() / RATE;
    let mut out = Vec::new();
    let isi = Exp::new(args.rate_hz)?;
    for u in 0..args.units {
        let mut t = isi.sample(&mut rng);
        while t < args.duration_s {
            out.push((sample(t), u16::try_from(u + 3)?, false));
            t += isi.sample(&mut rng);
        }
    }
    let period = 1.0 / args.episode_rate_hz;
    let mut k = 0.5;
    while k * period + 0.01 < args.duration_s {
        let start = k * period + rng.random_range(0.0..0.2 * period);
        out.push((sample(start), 0, false));
        out.push((sample(start + 0.003), 1, false));
        out.push((sample(start + 0.007), 2, true));
        k += 1.0;
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(out)
}

fn free_endpoint() -> Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!("tcp://127.0.0.1:{port}"))
}

/// The mock plugin: a REP socket on `endpoint`; the instants at which `State=1` requests
/// arrived.
fn plugin(endpoint: &str, stop: Arc<AtomicBool>) -> Result<std::thread::JoinHandle<Vec<Instant>>> {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::REP)?;
    s.set_rcvtimeo(50)?;
    s.bind(endpoint)?;
    Ok(std::thread::Builder::new()
        .name("bench:plugin".into())
        .spawn(move || {
            let _ctx = ctx;
            let mut got = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let Ok(m) = s.recv_bytes(0) else { continue };
                let at = Instant::now();
                let text = String::from_utf8_lossy(&m);
                let reply = format!("TTLHandled: {}", text.trim_start_matches("TTL "));
                if s.send(reply.as_bytes(), 0).is_err() {
                    continue;
                }
                if text.contains("State=1") {
                    got.push(at);
                }
            }
            got
        })?)
}

/// One mode's measurements.
struct Run {
    planted: usize,
    detected: usize,
    ok: u64,
    lost: u64,
    source: (u64, u64, u64),
    total: Vec<f64>,
    shares: [f64; 3],
    steps_p99: [f64; 3],
}

fn run_mode(args: &ClosedLoopArgs, raw: bool, plan: &[Spike]) -> Result<Run> {
    let spikes_at = free_endpoint()?;
    let ttl_at = free_endpoint()?;
    let stop_plugin = Arc::new(AtomicBool::new(false));
    let mock = plugin(&ttl_at, stop_plugin.clone())?;
    let names: Vec<String> = (0..args.units + 3).map(|i| format!("e{i}")).collect();
    let text = format!(
        r#"
[sources.rig]
kind = "zmq"
endpoint = "{spikes_at}"
format = "openephys"
unit_key = "electrode"
raw_electrode_names = {names:?}
overflow = "drop_newest"

[stages.detect]
kind = "detect"
source = "rig"
episodes = ["{EPISODE}"]

[sinks.stim]
kind = "openephys_ttl"
endpoint = "{ttl_at}"
stages = ["detect"]
pulse_ms = 0
timeout_ms = 100
"#
    );
    let config = PipelineConfig::parse(&text, Path::new("closed-loop.toml"))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let ctx = zmq::Context::new();
    let publisher = ctx.socket(zmq::PUB)?;
    publisher.set_sndhwm(0)?;
    publisher.bind(&spikes_at)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tap_tx, tap_rx) = crossbeam_channel::unbounded();
    let pipeline = {
        let stop = stop.clone();
        std::thread::Builder::new()
            .name("bench:pipeline".into())
            .spawn(move || {
                run(
                    &config,
                    RunOptions {
                        tap: Some(tap_tx),
                        stop: Some(stop),
                        ..RunOptions::default()
                    },
                )
            })?
    };
    // The SUB socket retries its connection with a back-off of up to 1 s (slow joiner).
    std::thread::sleep(Duration::from_millis(1500));
    let mut published = Vec::new();
    let start = Instant::now() + Duration::from_millis(5);
    for &(t, electrode, last) in plan {
        let due = start + Duration::from_secs_f64(t);
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let frames = if raw {
            openephys::encode_raw(electrode, t, RATE)
        } else {
            openephys::encode_json(&format!("e{electrode}"), t, RATE)
        };
        publisher.send_multipart(frames, 0)?;
        if last {
            published.push(Instant::now());
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let summary = pipeline
        .join()
        .map_err(|_| anyhow::anyhow!("the pipeline panicked"))?
        .context("running the pipeline")?;
    stop_plugin.store(true, Ordering::Relaxed);
    let received = mock
        .join()
        .map_err(|_| anyhow::anyhow!("the mock plugin panicked"))?;
    let detected: Vec<Instant> = tap_rx
        .try_iter()
        .filter(|o| &*o.stage == "detect")
        .map(|o| o.closed_at)
        .collect();
    let ttl = summary.ttl.get("stim").cloned().unwrap_or_default();
    let source = summary.sources.get("rig").copied().unwrap_or_default();
    let n = published.len();
    if detected.len() != n || received.len() != n || ttl.to_send.seconds.len() != n {
        bail!(
            "{} mode: {n} planted occurrences, {} detected, {} TTL requests received, {} sent \
             (source: {} in, {} dropped, {} malformed)",
            if raw { "raw" } else { "json" },
            detected.len(),
            received.len(),
            ttl.to_send.seconds.len(),
            source.0,
            source.1,
            source.2
        );
    }
    let mut total = Vec::with_capacity(n);
    let mut steps: [Vec<f64>; 3] = Default::default();
    for k in 0..n {
        let pd = detected[k]
            .saturating_duration_since(published[k])
            .as_secs_f64();
        let ds = ttl.to_send.seconds[k];
        let all = received[k]
            .saturating_duration_since(published[k])
            .as_secs_f64();
        total.push(all);
        steps[0].push(pd);
        steps[1].push(ds);
        steps[2].push((all - pd - ds).max(0.0));
    }
    let sum: f64 = total.iter().sum();
    let shares = [0, 1, 2].map(|i| steps[i].iter().sum::<f64>() / sum);
    let steps_p99 = [0, 1, 2].map(|i| quantile(&steps[i], 0.99));
    Ok(Run {
        planted: n,
        detected: detected.len(),
        ok: ttl.ok,
        lost: ttl.dropped + ttl.timeouts + ttl.send_errors + ttl.rejected,
        source,
        total,
        shares,
        steps_p99,
    })
}

/// Nearest-rank quantile of `v`, seconds.
fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let rank = (q * s.len() as f64).ceil() as usize;
    s[rank.saturating_sub(1).min(s.len() - 1)]
}

/// Runs the benchmark and prints its table.
///
/// # Errors
/// Bad options, sockets that cannot be bound, a pipeline that fails, or an occurrence that
/// was not detected or not signalled (the table would be of something else).
pub fn run_bench(args: &ClosedLoopArgs) -> Result<()> {
    let plan = spikes(args)?;
    let mut out = args.output.line_writer()?;
    let background = f64::from(args.units) * args.rate_hz;
    writeln!(
        out,
        "# synfire bench closed-loop: {} units at {} Hz (≈{background:.0} spikes/s) + `{EPISODE}` \
         {} times/s, {} s real time per mode, {} host cores",
        args.units,
        args.rate_hz,
        args.episode_rate_hz,
        args.duration_s,
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    )?;
    writeln!(
        out,
        "| mode | spikes in | dropped | occurrences | TTL ok | TTL lost | p50 ms | p99 ms | max ms | publish→detected | detected→sent | sent→received | p99 of each step, ms |"
    )?;
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )?;
    for mode in args.modes.split(',').map(str::trim) {
        let raw = match mode {
            "json" => false,
            "raw" => true,
            other => bail!("--modes: unknown mode `{other}`; expected json, raw"),
        };
        let r = run_mode(args, raw, &plan)?;
        debug_assert_eq!(r.planted, r.detected);
        let ms = |s: f64| s * 1e3;
        writeln!(
            out,
            "| {mode} | {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.0}% | {:.0}% | {:.0}% | {:.3} / {:.3} / {:.3} |",
            r.source.0,
            r.source.1,
            r.planted,
            r.ok,
            r.lost,
            ms(quantile(&r.total, 0.5)),
            ms(quantile(&r.total, 0.99)),
            ms(r.total.iter().copied().fold(0.0, f64::max)),
            100.0 * r.shares[0],
            100.0 * r.shares[1],
            100.0 * r.shares[2],
            ms(r.steps_p99[0]),
            ms(r.steps_p99[1]),
            ms(r.steps_p99[2]),
        )?;
    }
    writeln!(
        out,
        "\nTarget (issue 21): p99 ≤ 1 ms with a 300-unit background at real time on 2 cores."
    )?;
    Ok(())
}
