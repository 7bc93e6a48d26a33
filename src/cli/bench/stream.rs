//! `synfire bench stream`: ingest throughput over loopback ZeroMQ in synfire's wire format,
//! and the latency from a window's closing event to its published result.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use synfire::ingest::openephys::Naming;
use synfire::ingest::wire;
use synfire::live::RunOptions;
use synfire::live::buffer::{self, Overflow};
use synfire::live::config::PipelineConfig;
use synfire::live::source::zmq::{self as zsource, WireFormat, ZmqSource};
use synfire::record::StreamKind;
use synfire::record::{EndReason, Record};
use synfire::synth::{self, SynthParams};

use crate::cli::args::OutputArg;

/// Options of `synfire bench stream`.
#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Spikes sent in the throughput run.
    #[arg(long, default_value_t = 20_000_000)]
    events: u64,
    /// Spikes per wire-format message in the throughput run.
    #[arg(long, default_value_t = 8192)]
    batch: usize,
    /// Stream of the latency run: `mea64` (64 channels, 20 Hz basal, the `mea64` chains) or
    /// `neuropixels` (the dense 300-unit preset, mined with `pipelines/live-openephys.toml`'s
    /// settings: 0–5 and 5–10 ms, 0.5/s, 4 nodes).
    #[arg(long, value_enum, default_value_t = StreamPreset::Mea64)]
    preset: StreamPreset,
    /// Seconds of data in the latency run.
    #[arg(long, default_value_t = 90.0)]
    duration_s: f64,
    /// Replay speed of the latency run (real time × this; 1 = live, one hop per second).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// Inter-event intervals of the latency run's episode stage (default: the preset's,
    /// `0.004-0.006,0.009-0.011` for `mea64`, `0.000-0.005,0.005-0.010` for `neuropixels`).
    #[arg(long)]
    intervals: Option<String>,
    /// Support of the latency run's episode stage, occurrences per second of the window
    /// (default: the preset's, 8 for `mea64`, 0.5 for `neuropixels`).
    #[arg(long)]
    support: Option<f64>,
    /// Largest episode size of the latency run (default: the preset's, 8 for `mea64`, 4 for
    /// `neuropixels`).
    #[arg(long)]
    max_level: Option<usize>,
    /// Where the latency run counts: `cpu`, `gpu` or `auto`.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Also print one row per complete window of the latency run: its latency and, per level,
    /// seconds and candidates (generated / left after the bounds / frequent).
    #[arg(long)]
    per_window: bool,
    #[command(flatten)]
    output: OutputArg,
}

/// One `--per-window` row from a window's JSON result.
fn window_row(v: &serde_json::Value, latency_s: Option<f64>) -> String {
    let levels: Vec<String> = v["levels"]
        .as_array()
        .map(|levels| {
            levels
                .iter()
                .map(|l| {
                    let candidates = l["candidates"].as_u64().unwrap_or(0);
                    let removed = l["removed_by_bounds"].as_u64().unwrap_or(0);
                    format!(
                        "{}: {:.4} s {}/{}/{}",
                        l["level"],
                        l["seconds"].as_f64().unwrap_or(f64::NAN),
                        candidates,
                        candidates.saturating_sub(removed),
                        l["frequent"]
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "| {:.1} | {:.1} | {:.4} | {} |",
        v["window_start_s"].as_f64().unwrap_or(f64::NAN),
        latency_s.map_or(f64::NAN, |l| l * 1e3),
        v["seconds"].as_f64().unwrap_or(f64::NAN),
        levels.join("; ")
    )
}

/// `--preset` of `synfire bench stream`.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum StreamPreset {
    /// 64 channels, 20 Hz basal.
    Mea64,
    /// The dense 300-unit preset.
    Neuropixels,
}

fn free_endpoint() -> Result<String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    Ok(format!("tcp://127.0.0.1:{port}"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// Publishes pre-encoded messages on an XPUB socket after one subscription arrives.
fn publish(
    endpoint: String,
    messages: Vec<Vec<u8>>,
    speed_gaps: Option<Vec<Duration>>,
) -> Result<std::thread::JoinHandle<Result<()>>> {
    let ctx = zmq::Context::new();
    let s = ctx.socket(zmq::XPUB)?;
    s.set_sndhwm(0)?;
    s.set_linger(30_000)?;
    s.bind(&endpoint)?;
    std::thread::Builder::new()
        .name("bench:publisher".into())
        .spawn(move || {
            let _ctx = ctx;
            s.set_rcvtimeo(30_000)?;
            let sub = s.recv_bytes(0).context("no subscriber within 30 s")?;
            if sub.first() != Some(&1) {
                bail!("unexpected subscription message");
            }
            let start = Instant::now();
            for (i, m) in messages.iter().enumerate() {
                if let Some(due) = speed_gaps.as_ref().map(|g| g[i]) {
                    let now = start.elapsed();
                    if due > now {
                        std::thread::sleep(due - now);
                    }
                }
                s.send(m.as_slice(), 0)?;
            }
            Ok(())
        })
        .context("starting the publisher")
}

/// Runs the benchmark and prints its table.
///
/// # Errors
/// Socket or pipeline failures.
pub fn run(args: &StreamArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    writeln!(
        out,
        "# synfire bench stream ({} host cores)",
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    )?;
    // 1. Ingest throughput: publisher → SUB socket → decode → SPSC ring → consumer.
    let endpoint = free_endpoint()?;
    let session = 1;
    let n = args.events;
    let batch = args.batch.max(1) as u64;
    let mut messages = Vec::new();
    let mut first = 0u64;
    while first < n {
        let end = (first + batch).min(n);
        let times: Vec<f64> = (first..end).map(|i| i as f64 / 1280.0).collect();
        let units: Vec<u32> = (first..end).map(|i| (i % 64) as u32).collect();
        messages.push(wire::encode_spikes(session, first, &times, &units));
        first = end;
    }
    messages.push(wire::encode_end(session, n));
    let stop = Arc::new(AtomicBool::new(false));
    let (prod, mut cons) = buffer::ring("bench", 1 << 20, Overflow::DropNewest, stop);
    let cfg = ZmqSource {
        name: "bench".into(),
        endpoint: endpoint.clone(),
        bind: false,
        format: WireFormat::Synfire,
        content: StreamKind::Spikes,
        naming: Naming::default(),
        max_message_bytes: 64 << 20,
        receive_hwm: 0,
        max_units: zsource::DEFAULT_MAX_UNITS,
        stop_on_end: true,
    };
    let ctx = zmq::Context::new();
    let socket = zsource::open(&cfg, &ctx)?;
    let publisher = publish(endpoint, messages, None)?;
    let source = std::thread::Builder::new()
        .name("synfire:src-bench".into())
        .spawn(move || zsource::run(&cfg, &socket, prod))?;
    let mut spikes = 0u64;
    let mut started: Option<Instant> = None;
    loop {
        match cons.pop() {
            Record::Spike { .. } => {
                if started.is_none() {
                    started = Some(Instant::now());
                }
                spikes += 1;
            }
            Record::End(reason) => {
                if reason != EndReason::Finished {
                    bail!("the source ended with {reason:?}");
                }
                break;
            }
            _ => {}
        }
    }
    let seconds = started.map_or(0.0, |s| s.elapsed().as_secs_f64());
    publisher
        .join()
        .map_err(|_| anyhow::anyhow!("publisher panicked"))??;
    source
        .join()
        .map_err(|_| anyhow::anyhow!("source panicked"))?;
    let dropped = cons
        .stats()
        .dropped
        .load(std::sync::atomic::Ordering::Relaxed);
    writeln!(out)?;
    writeln!(
        out,
        "## ingest: loopback ZMQ, synfire wire format, {} spikes/message",
        args.batch
    )?;
    writeln!(out, "| spikes | received | dropped | seconds | spikes/s |")?;
    writeln!(out, "|---:|---:|---:|---:|---:|")?;
    writeln!(
        out,
        "| {n} | {spikes} | {dropped} | {seconds:.3} | {:.3e} |",
        spikes as f64 / seconds
    )?;

    // 2. Window-to-result latency through the whole pipeline.
    let (stream, default_ivs, default_support, default_level) = match args.preset {
        StreamPreset::Mea64 => {
            let mut params = SynthParams::mea64(1);
            params.duration_s = args.duration_s;
            (synth::generate(&params)?, "0.004-0.006,0.009-0.011", 8.0, 8)
        }
        StreamPreset::Neuropixels => {
            let mut params = synth::dense::DenseParams::neuropixels(1);
            params.duration_s = args.duration_s;
            (
                synth::dense::generate_dense(&params)?.0,
                "0.000-0.005,0.005-0.010",
                0.5,
                4,
            )
        }
    };
    let intervals = args.intervals.as_deref().unwrap_or(default_ivs);
    let support = args.support.unwrap_or(default_support);
    let max_level = args.max_level.unwrap_or(default_level);
    let units = stream.alphabet().len();
    let endpoint = free_endpoint()?;
    let ivs: Vec<String> = synfire::episode::Interval::parse_list(intervals)
        .map_err(|e| anyhow::anyhow!("`--intervals`: {e}"))?
        .into_iter()
        .map(|iv| match synfire::episode::IntervalSpec::of(iv) {
            synfire::episode::IntervalSpec::Text(t) => t,
            synfire::episode::IntervalSpec::Pair([lo, hi]) => format!("({lo},{hi}]"),
        })
        .collect();
    let jsonl =
        std::env::temp_dir().join(format!("synfire-bench-stream-{}.jsonl", std::process::id()));
    let config = PipelineConfig::parse(
        &format!(
            r#"
[sources.live]
kind = "zmq"
endpoint = "{endpoint}"
format = "synfire"
overflow = "drop_newest"

[windows.w60]
source = "live"
length_s = 60.0
hop_s = 1.0

[stages.episodes]
kind = "episodes"
window = "w60"
intervals_s = {ivs:?}
support = {}
support_per = "seconds"
max_level = {max_level}
device = "{}"

[sinks.file]
kind = "jsonl"
path = "{}"
"#,
            support,
            args.device,
            jsonl.display()
        ),
        std::path::Path::new("bench-stream.toml"),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Messages of at most 10 ms of data each, paced at real time × speed.
    let (times, types) = (stream.times(), stream.types());
    let mut messages = Vec::new();
    let mut due = Vec::new();
    let mut i = 0;
    while i < times.len() {
        let mut j = i + 1;
        while j < times.len() && times[j] < times[i] + 0.01 {
            j += 1;
        }
        let units: Vec<u32> = types[i..j].iter().map(|t| t.0).collect();
        messages.push(wire::encode_spikes(2, i as u64, &times[i..j], &units));
        due.push(Duration::from_secs_f64(times[j - 1] / args.speed));
        i = j;
    }
    messages.push(wire::encode_end(2, times.len() as u64));
    due.push(*due.last().unwrap_or(&Duration::ZERO));
    let (tx, rx) = crossbeam_channel::unbounded();
    let publisher = publish(endpoint, messages, Some(due))?;
    let summary = synfire::live::run(
        &config,
        RunOptions {
            tap: Some(tx),
            ..Default::default()
        },
    )?;
    publisher
        .join()
        .map_err(|_| anyhow::anyhow!("publisher panicked"))??;
    let mut latency = Vec::new();
    let mut stage_s = Vec::new();
    let mut episodes = 0;
    let mut rows = Vec::new();
    for o in rx.try_iter() {
        let v: serde_json::Value = serde_json::from_str(&o.json)?;
        if v["complete"] == true && v["window_start_s"].as_f64().unwrap_or(0.0) >= 0.0 {
            let window_latency = o
                .published_at
                .map(|p| p.duration_since(o.closed_at).as_secs_f64());
            if let Some(l) = window_latency {
                latency.push(l);
            }
            if args.per_window {
                rows.push(window_row(&v, window_latency));
            }
            stage_s.push(v["seconds"].as_f64().unwrap_or(f64::NAN));
            episodes = v["episodes"].as_array().map_or(0, Vec::len);
        }
    }
    let _ = std::fs::remove_file(&jsonl);
    latency.sort_by(f64::total_cmp);
    stage_s.sort_by(f64::total_cmp);
    let (events_in, dropped, _) = summary.sources["live"];
    writeln!(out)?;
    writeln!(
        out,
        "## latency: {units} units ({:?}), {:.0} spikes/s, 60 s windows, 1 s hops, replay ×{}, episodes on `{}` (intervals {intervals}, support {support}/s, up to {max_level} nodes)",
        args.preset,
        stream.len() as f64 / stream.span(),
        args.speed,
        args.device,
    )?;
    writeln!(
        out,
        "| windows | spikes in | dropped | stage p50 s | latency p50 ms | p99 ms | max ms | episodes (last window) |"
    )?;
    writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    writeln!(
        out,
        "| {} | {events_in} | {dropped} | {:.4} | {:.1} | {:.1} | {:.1} | {episodes} |",
        latency.len(),
        percentile(&stage_s, 0.5),
        percentile(&latency, 0.5) * 1e3,
        percentile(&latency, 0.99) * 1e3,
        latency.last().copied().unwrap_or(f64::NAN) * 1e3
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "Latency: from the window thread taking the closing spike off the ring to the sink having written the result (stage + queues + sink)."
    )?;
    if args.per_window {
        writeln!(out)?;
        writeln!(
            out,
            "## per window (level: seconds, candidates generated/after bounds/frequent)"
        )?;
        writeln!(out, "| window start s | latency ms | stage s | levels |")?;
        writeln!(out, "|---:|---:|---:|---|")?;
        for row in rows {
            writeln!(out, "{row}")?;
        }
    }
    out.flush()?;
    Ok(())
}
