//! The binary's command line: the [`Cli`] parser, the [`Command`] enum and the one dispatch,
//! [`run`]. Each command lives in its own file, shared flags in `args.rs`; command files
//! import `args` and the library, never each other.

mod args;
mod bench;
mod calibrate;
mod generate;
mod mine;
mod motif;
mod pipeline;
mod replay;
mod search;
mod shapelet;
mod softdtw;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

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

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Mine frequent serial episodes from a spike file (NWB units table or `label,time` CSV).
    Mine(mine::MineArgs),
    /// Write a seeded synthetic spike train with embedded causal chains.
    Generate(generate::GenerateArgs),
    /// Run a benchmark and print a table.
    Bench(BenchArgs),
    /// Measure, on a GPU, the crossover points between PTPE and MTPE per episode size and
    /// store f(N) of Eq. 3 for that GPU model (read by `mine`).
    Calibrate(calibrate::CalibrateArgs),
    /// Run a pipeline file (sources → windows → stages → sinks) until its sources end or
    /// SIGINT/SIGTERM.
    Run(pipeline::RunArgs),
    /// Check pipeline files and report every error at once.
    Validate(pipeline::ValidateArgs),
    /// Stream an archived session live over ZeroMQ (a publisher for demos and tests).
    Replay(replay::ReplayArgs),
    /// Find the exact top-k motifs (closest pairs of z-normalised subsequences) of a series.
    Motif(motif::MotifArgs),
    /// Soft-DTW values (or divergences) of all pairs of two collections of series, optionally
    /// with gradients.
    Softdtw(softdtw::SoftDtwArgs),
    /// Soft-DTW barycenter of a collection of series (L-BFGS).
    Barycenter(softdtw::BarycenterArgs),
    /// Exact similarity search (SING): build an index of series, query its k nearest.
    Search(search::SearchArgs),
    /// Find the shapelets (most discriminative subsequences) of labelled series, train a
    /// shapelet decision tree and report its accuracy.
    Shapelet(shapelet::ShapeletArgs),
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
    Episodes(bench::episodes::EpisodesArgs),
    /// Streaming: ingest throughput over loopback ZeroMQ (synfire wire format) and the latency
    /// from a window's closing spike to its published result.
    Stream(bench::stream::StreamArgs),
    /// Motif discovery: seeded random walk and the ECG, CPU and GPU paths, seconds and pairs
    /// evaluated or pruned.
    Motif(motif::BenchMotifArgs),
    /// Soft-DTW: forward and forward+backward cells per second on all pairs of two sets of
    /// random walks, and forward on one long pair, CPU and GPU.
    Softdtw(softdtw::BenchSoftDtwArgs),
    /// Similarity search: seeded random walks, SING (CPU, GPU) against brute force, latency,
    /// lower bounds and real distances per query.
    Search(search::BenchSearchArgs),
    /// Shapelet trees on the UCR sets (all lengths, step 1): CPU and GPU seconds, test
    /// accuracy beside the published figures.
    Shapelet(shapelet::BenchShapeletArgs),
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
        Command::Mine(args) => mine::run(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Run(args) => pipeline::run(&args),
        Command::Validate(args) => pipeline::validate(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Motif(args) => motif::motif(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Motif(args),
        }) => motif::bench(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Softdtw(args),
        }) => softdtw::bench(&args),
        Command::Softdtw(args) => softdtw::run_softdtw(&args),
        Command::Barycenter(args) => softdtw::run_barycenter(&args),
        Command::Search(args) => search::run(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Search(args),
        }) => search::bench(&args),
        Command::Shapelet(args) => shapelet::shapelet(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Shapelet(args),
        }) => shapelet::bench(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Episodes(args),
        }) => bench::episodes::episodes(&args),
        Command::Bench(BenchArgs {
            which: BenchWhich::Stream(args),
        }) => bench::stream::stream(&args),
    }
}
