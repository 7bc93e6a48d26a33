//! `synfire bench view`: whether the live view (`synfire run --ui`) slows the pipeline. The
//! same pipeline on the bundled A2929 recording (a detect stage watching `6-(10,20]ms-6`, which
//! occurs thousands of times, and an episodes stage on 10 s windows every 5 s; lines to
//! `/dev/null`) runs without the view, with the view and no browser, with one client reading
//! the event stream, and with one that connected and never reads (a stalled browser). Per
//! mode: wall seconds and the result latency (window close, or an occurrence's detection, to
//! the line written; p50 / p99 over every line, as `RunSummary::result_latency`), medians of
//! `--runs` rounds run in rotating order, and what the view took or dropped. No target: the
//! table is for reading beside the run-to-run spread of the `off` rows.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use synfire::live::config::PipelineConfig;
use synfire::live::{RunOptions, RunSummary};

use crate::cli::args::OutputArg;

/// Options of `synfire bench view`.
#[derive(Debug, Args)]
pub struct BenchViewArgs {
    /// The recording replayed (an NWB units table).
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    input: PathBuf,
    /// Replay speed (real time × this); absent: as fast as possible (the most spikes per
    /// second the view is offered).
    #[arg(long)]
    speed: Option<f64>,
    /// Rounds; each runs every mode once, in rotating order. Medians are reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    output: OutputArg,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Off,
    NoClient,
    Reading,
    Stalled,
}

impl Mode {
    const ALL: [Self; 4] = [Self::Off, Self::NoClient, Self::Reading, Self::Stalled];

    fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::NoClient => "ui, no client",
            Self::Reading => "ui, 1 client reading",
            Self::Stalled => "ui, 1 client stalled",
        }
    }
}

/// One run's figures.
#[derive(Clone, Debug, Default)]
struct Measured {
    wall_s: f64,
    episodes: (f64, f64),
    occurrences: (f64, f64),
    occurrence_lines: usize,
    spikes_taken: u64,
    raster_dropped: u64,
    lines_dropped: u64,
    resyncs: u64,
    clients: u64,
    bytes_read: u64,
}

fn pipeline(input: &Path, speed: Option<f64>) -> Result<PipelineConfig> {
    let speed = speed.map(|s| format!("speed = {s}\n")).unwrap_or_default();
    let text = format!(
        r#"
[sources.a2929]
kind = "hdf5"
path = "{input}"
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

[stages.stim]
kind = "detect"
source = "a2929"
episodes = ["6-(10,20]ms-6"]

[sinks.out]
kind = "jsonl"
path = "/dev/null"
"#,
        input = input.display()
    );
    PipelineConfig::parse(&text, Path::new("bench-view.toml")).map_err(|e| anyhow::anyhow!("{e}"))
}

fn free_addr() -> Result<SocketAddr> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Connects to `/events` on `addr` as soon as it answers (until `stop`); reads and discards
/// everything when `read`, else never reads. Returns the bytes read.
fn client(addr: SocketAddr, read: bool, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut stream = loop {
            if stop.load(Ordering::Relaxed) {
                return 0;
            }
            if let Ok(s) = TcpStream::connect(addr) {
                break s;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        let _ = write!(stream, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
        let mut total = 0;
        let mut buf = vec![0u8; 1 << 16];
        while !stop.load(Ordering::Relaxed) {
            if !read {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => total += n as u64,
                Err(_) => {}
            }
        }
        total
    })
}

fn quantiles(summary: &RunSummary, stage: &str) -> (f64, f64, usize) {
    summary
        .result_latency
        .get(stage)
        .and_then(|m| m.get("out"))
        .map_or((f64::NAN, f64::NAN, 0), |l| {
            (
                l.p50().unwrap_or(f64::NAN),
                l.p99().unwrap_or(f64::NAN),
                l.windows(),
            )
        })
}

fn run_once(config: &PipelineConfig, mode: Mode) -> Result<Measured> {
    let addr = free_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let reader = match mode {
        Mode::Reading => Some(client(addr, true, stop.clone())),
        Mode::Stalled => Some(client(addr, false, stop.clone())),
        _ => None,
    };
    let started = Instant::now();
    let summary = synfire::live::run(
        config,
        RunOptions {
            ui: (mode != Mode::Off).then_some(addr),
            ..Default::default()
        },
    );
    let wall_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let bytes_read = reader.map_or(0, |r| r.join().unwrap_or(0));
    let summary = summary.context("running the pipeline")?;
    let (e50, e99, _) = quantiles(&summary, "episodes");
    let (o50, o99, n) = quantiles(&summary, "stim");
    let view = summary.view.clone().unwrap_or_default();
    Ok(Measured {
        wall_s,
        episodes: (e50, e99),
        occurrences: (o50, o99),
        occurrence_lines: n,
        spikes_taken: view.spikes_received,
        raster_dropped: view.raster_dropped,
        lines_dropped: view.lines_dropped,
        resyncs: view.resyncs,
        clients: view.clients,
        bytes_read,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `synfire bench view`.
///
/// # Errors
/// An unreadable recording, a pipeline that fails to start, `--runs 0`.
pub fn run(args: &BenchViewArgs) -> Result<()> {
    if args.runs == 0 {
        bail!("`--runs` must be at least 1");
    }
    let config = pipeline(&args.input, args.speed)?;
    let mut out = args.output.line_writer()?;
    let mut all: Vec<Vec<Measured>> = vec![Vec::new(); Mode::ALL.len()];
    for round in 0..args.runs {
        for k in 0..Mode::ALL.len() {
            let i = (k + round) % Mode::ALL.len();
            let m = run_once(&config, Mode::ALL[i])?;
            all[i].push(m);
        }
        eprintln!("bench view: round {} of {} done", round + 1, args.runs);
    }
    writeln!(
        out,
        "# synfire bench view: {} ({}), {} rounds, medians; latency = window close (detect: \
         detection) to line written, p50 / p99 over every line of the run",
        args.input.display(),
        args.speed.map_or_else(
            || "as fast as possible".to_owned(),
            |s| format!("speed {s}")
        ),
        args.runs
    )?;
    writeln!(
        out,
        "{:<22} {:>8} {:>20} {:>22} {:>12} {:>14} {:>9} {:>8} {:>8} {:>12}",
        "mode",
        "wall s",
        "episodes p50/p99 ms",
        "occurrences p50/p99 ms",
        "occ. lines",
        "spikes taken",
        "dropped",
        "resyncs",
        "clients",
        "client bytes"
    )?;
    for (i, mode) in Mode::ALL.iter().enumerate() {
        let runs = &all[i];
        let med = |f: &dyn Fn(&Measured) -> f64| median(runs.iter().map(f).collect());
        let wall = med(&|m| m.wall_s);
        let wall_min = runs.iter().map(|m| m.wall_s).fold(f64::INFINITY, f64::min);
        let wall_max = runs.iter().map(|m| m.wall_s).fold(0.0, f64::max);
        let last = runs.last().cloned().unwrap_or_default();
        writeln!(
            out,
            "{:<22} {:>8} {:>20} {:>22} {:>12} {:>14} {:>9} {:>8} {:>8} {:>12}",
            mode.name(),
            format!("{wall:.2}"),
            format!(
                "{:.1} / {:.1}",
                med(&|m| m.episodes.0) * 1e3,
                med(&|m| m.episodes.1) * 1e3
            ),
            format!(
                "{:.3} / {:.3}",
                med(&|m| m.occurrences.0) * 1e3,
                med(&|m| m.occurrences.1) * 1e3
            ),
            last.occurrence_lines,
            last.spikes_taken,
            last.raster_dropped + last.lines_dropped,
            last.resyncs,
            last.clients,
            last.bytes_read
        )?;
        writeln!(
            out,
            "{:<22} wall range {wall_min:.2}–{wall_max:.2} s over {} runs",
            "",
            runs.len()
        )?;
    }
    Ok(())
}
