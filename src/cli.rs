//! Argument definitions and command handlers.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use synfire::device::DeviceChoice;
use synfire::episode::hybrid::{Calibration, ExactAlgorithm};
use synfire::episode::{
    GpuSettings, Interval, LevelStats, MinerConfig, Progress, Strategy, Threshold, mine_with,
    select_counter,
};
use synfire::event::Ordering;
use synfire::ingest;
use synfire::report::{self, MineReport};
use synfire::synth::{self, SynthParams};

/// Mines neural spike trains for frequent serial episodes.
#[derive(Debug, Parser)]
#[command(name = "synfire", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Worker threads for counting (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mine frequent serial episodes from a spike file (NWB units table or `label,time` CSV).
    Mine(MineArgs),
    /// Write a seeded synthetic spike train with embedded causal chains.
    Generate(GenerateArgs),
    /// Run a benchmark and print a table.
    Bench(BenchArgs),
    /// Measure, on a GPU, the crossover points between PTPE and MTPE per episode size and
    /// store f(N) of Eq. 3 for that GPU model (read by `mine`).
    Calibrate(crate::calibrate::CalibrateArgs),
    /// Run a pipeline file (sources → windows → stages → sinks) until its sources end or
    /// SIGINT/SIGTERM.
    Run(RunArgs),
    /// Check pipeline files and report every error at once.
    Validate(ValidateArgs),
    /// Stream an archived session live over ZeroMQ (a publisher for demos and tests).
    Replay(ReplayArgs),
    /// Find the exact top-k motifs (closest pairs of z-normalised subsequences) of a series.
    Motif(crate::motif_cli::MotifArgs),
    /// Soft-DTW values (or divergences) of all pairs of two collections of series, optionally
    /// with gradients.
    Softdtw(crate::softdtw_cli::SoftDtwArgs),
    /// Soft-DTW barycenter of a collection of series (L-BFGS).
    Barycenter(crate::softdtw_cli::BarycenterArgs),
    /// Exact similarity search (SING): build an index of series, query its k nearest.
    Search(crate::search_cli::SearchArgs),
    /// Find the shapelets (most discriminative subsequences) of labelled series, train a
    /// shapelet decision tree and report its accuracy.
    Shapelet(crate::shapelet_cli::ShapeletArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The pipeline file (TOML).
    pipeline: PathBuf,
    /// Serve Prometheus metrics on this address, e.g. `127.0.0.1:9100` (`GET /metrics`).
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Pipeline files (TOML).
    #[arg(required = true)]
    pipelines: Vec<PathBuf>,
}

#[derive(Debug, Args)]
struct ReplayArgs {
    /// The archived session: NWB (units table) or a `label,time` CSV.
    input: PathBuf,
    /// Endpoint to bind, e.g. `tcp://127.0.0.1:5557`.
    #[arg(long)]
    to: String,
    /// Real time × X (e.g. 4 = four times faster); absent: as fast as possible.
    #[arg(long)]
    speed: Option<f64>,
    /// Message format: Open Ephys Event Broadcaster (raw binary header, exact times), its JSON
    /// header (times on the `--sample-rate` clock), or synfire's wire format.
    #[arg(long, value_enum, default_value_t = ReplayFormatArg::Synfire)]
    format: ReplayFormatArg,
    /// Spikes or samples per synfire-format message.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Wait for this many subscribers before sending (0: send at once).
    #[arg(long, default_value_t = 1)]
    subscribers: usize,
    /// Sample clock of Open Ephys messages, Hz.
    #[arg(long, default_value_t = 30_000.0)]
    sample_rate: f64,
    /// Replay this NWB time series (e.g. `/acquisition/CompassDirection/rz`) as sensor frames
    /// instead of the units table (synfire format).
    #[arg(long)]
    series: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ReplayFormatArg {
    Openephys,
    OpenephysJson,
    Synfire,
}

/// Options shared by everything that mines.
#[derive(Debug, Args, Clone)]
pub struct MiningOptions {
    /// Inter-event delay intervals `(low, high]` in seconds, comma-separated, e.g.
    /// `0.004-0.006,0.009-0.011`.
    #[arg(long, value_parser = parse_intervals)]
    pub intervals: IntervalList,
    /// Minimum number of non-overlapped occurrences.
    #[arg(long, conflicts_with = "support")]
    pub min_count: Option<u64>,
    /// Support threshold: a fraction of the number of events (default 0.001), or occurrences
    /// per second with `--support-per seconds`.
    #[arg(long)]
    pub support: Option<f64>,
    /// What `--support` is relative to.
    #[arg(long, value_enum, default_value_t = SupportPer::Events, requires = "support")]
    pub support_per: SupportPer,
    /// Largest episode size N.
    #[arg(long, default_value_t = 10)]
    pub max_level: usize,
    /// Count every candidate exactly instead of PreElim first (same result, slower).
    #[arg(long)]
    pub one_pass: bool,
    /// Where to count: every GPU found, falling back to the CPU (`auto`), the CPU, or GPUs
    /// only (`gpu`: no GPU is an error).
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    pub device: DeviceArg,
    /// GPU ordinals to use, comma-separated (default: all).
    #[arg(long, value_delimiter = ',')]
    pub gpus: Option<Vec<usize>>,
    /// GPU kernel for exact counts: PTPE or MTPE per level by Eq. 3 (`hybrid`), or one of them
    /// always.
    #[arg(long, value_enum, default_value_t = ExactKernelArg::Hybrid)]
    pub exact_kernel: ExactKernelArg,
    /// Calibration file for the hybrid choice (default: the one `synfire calibrate` stored for
    /// each GPU model, if any).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
}

/// `--exact-kernel`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ExactKernelArg {
    /// PTPE or MTPE by Eq. 3 (paper Algorithm 2).
    Hybrid,
    /// One thread per episode.
    Ptpe,
    /// Threads per (episode, segment), exact merge.
    Mtpe,
}

impl From<ExactKernelArg> for ExactAlgorithm {
    fn from(k: ExactKernelArg) -> Self {
        match k {
            ExactKernelArg::Hybrid => Self::Hybrid,
            ExactKernelArg::Ptpe => Self::Ptpe,
            ExactKernelArg::Mtpe => Self::Mtpe,
        }
    }
}

/// `--device`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum DeviceArg {
    /// GPUs when present, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// GPUs only.
    Gpu,
}

impl From<DeviceArg> for DeviceChoice {
    fn from(d: DeviceArg) -> Self {
        match d {
            DeviceArg::Auto => Self::Auto,
            DeviceArg::Cpu => Self::Cpu,
            DeviceArg::Gpu => Self::Gpu,
        }
    }
}

/// A parsed `--intervals` list.
#[derive(Debug, Clone)]
pub struct IntervalList(pub Vec<Interval>);

fn parse_intervals(s: &str) -> Result<IntervalList, String> {
    Interval::parse_list(s)
        .map(IntervalList)
        .map_err(|e| e.to_string())
}

/// Unit of `--support`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum SupportPer {
    /// Fraction of the number of events in the stream.
    Events,
    /// Occurrences per second of the stream's span.
    Seconds,
}

impl MiningOptions {
    /// The miner configuration these options describe.
    pub fn config(&self) -> MinerConfig {
        let per = match self.support_per {
            SupportPer::Events => synfire::episode::SupportPer::Events,
            SupportPer::Seconds => synfire::episode::SupportPer::Seconds,
        };
        let threshold = Threshold::from_options(self.min_count, self.support, per);
        let mut config = MinerConfig::new(self.intervals.0.clone(), threshold);
        config.max_level = self.max_level;
        config.strategy = if self.one_pass {
            Strategy::OnePass
        } else {
            Strategy::TwoPass
        };
        config
    }
}

#[derive(Debug, Args)]
struct MineArgs {
    /// Spike file: `.nwb`/`.h5`/`.hdf5` (NWB units table) or `.csv`/`.txt` (`label,time_s`).
    input: PathBuf,
    #[command(flatten)]
    mining: MiningOptions,
    /// Sort the input by time instead of rejecting an unsorted stream.
    #[arg(long)]
    sort: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the result here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Mine only the events at or after this time, seconds (with `--end-s`: one window of a
    /// live pipeline, built the same way: event types are the units firing in it).
    #[arg(long, requires = "end_s")]
    start_s: Option<f64>,
    /// Mine only the events before this time, seconds.
    #[arg(long, requires = "start_s")]
    end_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Format {
    Text,
    Json,
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Which synthetic workload: `sym26` (the paper's §7.1 benchmark, 26 neurons, 60 s, about
    /// 51,500 events) or `mea64` (64 channels, 700 s, about 10^6 events).
    #[arg(value_enum)]
    preset: Preset,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file; its format follows `--format`. NWB stores units by integer id, so neuron
    /// `A` is unit 0, `B` unit 1, and so on; CSV keeps the letters.
    #[arg(long, short)]
    output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FileFormat::Csv)]
    format: FileFormat,
}

/// Synthetic workloads.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Preset {
    /// The paper's Sym26 benchmark.
    Sym26,
    /// A 64-channel, 10^6-event workload.
    Mea64,
}

impl Preset {
    /// The generator parameters of this preset.
    pub fn params(self, seed: u64) -> SynthParams {
        match self {
            Self::Sym26 => SynthParams::sym26(seed),
            Self::Mea64 => SynthParams::mea64(seed),
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum FileFormat {
    Csv,
    Nwb,
}

#[derive(Debug, Args)]
struct BenchArgs {
    #[command(subcommand)]
    which: BenchWhich,
}

#[derive(Debug, Subcommand)]
enum BenchWhich {
    /// Level-wise episode mining on Sym26 and the real fixture: per level, candidates, PreElim
    /// eliminations, seconds and candidate-events per second.
    Episodes(crate::bench::EpisodesArgs),
    /// Streaming: ingest throughput over loopback ZeroMQ (synfire wire format) and the latency
    /// from a window's closing spike to its published result.
    Stream(crate::bench_stream::StreamArgs),
    /// Motif discovery: seeded random walk and the ECG, CPU and GPU paths, seconds and pairs
    /// evaluated or pruned.
    Motif(crate::motif_cli::BenchMotifArgs),
    /// Soft-DTW: forward and forward+backward cells per second on all pairs of two sets of
    /// random walks, and forward on one long pair, CPU and GPU.
    Softdtw(crate::softdtw_cli::BenchSoftDtwArgs),
    /// Similarity search: seeded random walks, SING (CPU, GPU) against brute force, latency,
    /// lower bounds and real distances per query.
    Search(crate::search_cli::BenchSearchArgs),
    /// Shapelet trees on the UCR sets (all lengths, step 1): CPU and GPU seconds, test
    /// accuracy beside the published figures.
    Shapelet(crate::shapelet_cli::BenchShapeletArgs),
}

/// Runs the parsed command.
///
/// # Errors
/// Any failure, with context naming the input.
pub fn run(cli: Cli) -> Result<()> {
    if let Some(n) = cli.threads {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .context("setting the number of `--threads`")?;
    }
    match cli.command {
        Command::Mine(args) => run_mine(&args),
        Command::Generate(args) => run_generate(&args),
        Command::Calibrate(args) => crate::calibrate::run(&args),
        Command::Run(args) => run_pipeline(&args),
        Command::Validate(args) => run_validate(&args),
        Command::Replay(args) => run_replay(&args),
        Command::Motif(args) => crate::motif_cli::motif(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Motif(args),
        }) => crate::motif_cli::bench(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Softdtw(args),
        }) => crate::softdtw_cli::bench(&args),
        Command::Softdtw(args) => crate::softdtw_cli::run_softdtw(&args),
        Command::Barycenter(args) => crate::softdtw_cli::run_barycenter(&args),
        Command::Search(args) => crate::search_cli::run(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Search(args),
        }) => crate::search_cli::bench(&args),
        Command::Shapelet(args) => crate::shapelet_cli::shapelet(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Shapelet(args),
        }) => crate::shapelet_cli::bench(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Episodes(args),
        }) => crate::bench::episodes(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Stream(args),
        }) => crate::bench_stream::stream(&args),
    }
}

fn run_mine(args: &MineArgs) -> Result<()> {
    let ordering = if args.sort {
        Ordering::SortIfNeeded
    } else {
        Ordering::RequireSorted
    };
    let config = args.mining.config();
    config.validate()?;
    if let Some(path) = &args.mining.calibration {
        // Checked before any work, whichever device ends up counting.
        Calibration::load(path)?;
    }
    let mut stream = ingest::read_spikes(&args.input, ordering)?;
    if let (Some(start), Some(end)) = (args.start_s, args.end_s) {
        if !(start.is_finite() && end.is_finite() && start < end) {
            anyhow::bail!("`--start-s {start}` must be before `--end-s {end}`");
        }
        stream = stream.window(start, end).with_context(|| {
            format!("{}: no events in [{start}, {end}) s", args.input.display())
        })?;
    }
    tracing::info!(
        input = %args.input.display(),
        events = stream.len(),
        event_types = stream.alphabet().len(),
        span_s = stream.span(),
        "Loaded spike stream."
    );
    let settings = GpuSettings {
        gpus: args.mining.gpus.clone(),
        exact: args.mining.exact_kernel.into(),
        calibration: args.mining.calibration.clone(),
    };
    let counter = select_counter(
        &stream,
        &config.intervals,
        args.mining.device.into(),
        &settings,
    )
    .context("`--device gpu`")?;
    let bar = BarProgress::new(args.quiet);
    let result = mine_with(&stream, &config, counter.as_ref(), &bar)?;
    bar.finish();
    let input = args.input.display().to_string();
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => {
            Box::new(BufWriter::new(File::create(path).with_context(|| {
                format!("creating `--output` file {}", path.display())
            })?))
        }
        None => Box::new(BufWriter::new(io::stdout().lock())),
    };
    match args.format {
        Format::Json => report::write_json(
            &mut out,
            &MineReport::new(&input, &stream, &config, &result),
        )?,
        Format::Text => report::write_text(&mut out, &input, &stream, &config, &result)?,
    }
    out.flush().context("writing the result")?;
    Ok(())
}

fn run_pipeline(args: &RunArgs) -> Result<()> {
    let config = synfire::pipeline::config::PipelineConfig::load(&args.pipeline)?;
    let summary = synfire::pipeline::run(
        &config,
        synfire::pipeline::RunOptions {
            metrics: args.metrics,
            handle_signals: true,
            ..Default::default()
        },
    )?;
    let results: u64 = summary.sinks.values().sum();
    tracing::info!(results, "Pipeline finished.");
    Ok(())
}

fn run_validate(args: &ValidateArgs) -> Result<()> {
    let mut failed = 0;
    for p in &args.pipelines {
        match synfire::pipeline::config::PipelineConfig::load(p) {
            Ok(c) => println!(
                "{}: ok ({} sources, {} windows, {} stages, {} sinks)",
                p.display(),
                c.sources.len(),
                c.windows.len(),
                c.stages.len(),
                c.sinks.len()
            ),
            Err(e) => {
                failed += 1;
                eprintln!("{e}");
            }
        }
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} pipeline files have errors",
            args.pipelines.len()
        );
    }
    Ok(())
}

fn run_replay(args: &ReplayArgs) -> Result<()> {
    use synfire::replay::{ReplayFormat, ReplayOptions, replay};
    let stats = replay(&ReplayOptions {
        input: args.input.clone(),
        to: args.to.clone(),
        speed: args.speed,
        format: match args.format {
            ReplayFormatArg::Openephys => ReplayFormat::Openephys,
            ReplayFormatArg::OpenephysJson => ReplayFormat::OpenephysJson,
            ReplayFormatArg::Synfire => ReplayFormat::Synfire,
        },
        batch: args.batch,
        subscribers: args.subscribers,
        sample_rate_hz: args.sample_rate,
        series: args.series.clone(),
    })?;
    tracing::info!(
        events = stats.events,
        messages = stats.messages,
        seconds = stats.seconds,
        "Replay finished."
    );
    Ok(())
}

fn run_generate(args: &GenerateArgs) -> Result<()> {
    let params = args.preset.params(args.seed);
    let stream = synth::generate(&params)?;
    write_stream(&args.output, &stream, args.format)?;
    tracing::info!(
        output = %args.output.display(),
        events = stream.len(),
        span_s = stream.span(),
        "Wrote synthetic stream."
    );
    Ok(())
}

fn write_stream(
    path: &Path,
    stream: &synfire::event::EventStream,
    format: FileFormat,
) -> Result<()> {
    match format {
        FileFormat::Nwb => ingest::nwb::write_units(path, stream)?,
        FileFormat::Csv => {
            let file =
                File::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut w = BufWriter::new(file);
            ingest::csv::write_csv(&mut w, stream)
                .with_context(|| format!("writing {}", path.display()))?;
            w.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

/// A progress bar on standard error (hidden when stderr is not a terminal or with `--quiet`).
pub struct BarProgress {
    bar: ProgressBar,
}

impl BarProgress {
    /// A bar, hidden when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>9} [{elapsed_precise}] {wide_bar} {pos}/{len} candidates",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Self { bar }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for BarProgress {
    fn level_started(&self, level: usize, work: u64) {
        self.bar.set_prefix(format!("level {level}"));
        self.bar.set_position(0);
        self.bar.set_length(work);
    }

    fn advanced(&self, n: u64) {
        self.bar.inc(n);
    }

    fn level_finished(&self, stats: &LevelStats) {
        tracing::debug!(
            level = stats.level,
            candidates = stats.candidates,
            eliminated = stats.eliminated_by_preelim,
            frequent = stats.frequent,
            seconds = stats.seconds,
            "Level done."
        );
    }
}
