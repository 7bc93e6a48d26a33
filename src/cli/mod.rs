//! The binary's command line: the [`Cli`] parser, the [`Command`] enum and the one dispatch,
//! [`run`]. Each command lives in its own file, shared flags in `args.rs`; command files
//! import `args` and the library, never each other.

mod args;
mod batch;
mod bench;
mod calibrate;
mod count;
mod generate;
mod mine;
mod motif;
mod pipeline;
mod plot;
mod replay;
mod search;
mod shapelet;
mod softdtw;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

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
    /// Mine frequent serial episodes from spikes (NWB units table, CSV, phy/Kilosort folder).
    Mine(Box<mine::MineArgs>),
    /// Mine every session of a sessions file on a Ray cluster (the Python package's
    /// `synfire.cluster`): one task per session on warm workers, one per GPU, retried when a
    /// worker dies; results combined and written per session.
    Batch(Box<batch::BatchArgs>),
    /// Count given episodes (one per line, as `mine` prints them) in a spike input: exact
    /// non-overlapped counts, optionally their occurrences (tdminer's `-o`).
    Count(count::CountArgs),
    /// Write a seeded synthetic spike train with embedded causal chains.
    Generate(generate::GenerateArgs),
    /// Run a benchmark and print a table.
    Bench(bench::BenchArgs),
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
    /// Draw a picture (PNG, SVG): episodes on a spike raster, counts per level, significance.
    Plot(plot::PlotArgs),
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
        Command::Batch(args) => batch::run(&args),
        Command::Count(args) => count::run(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Calibrate(args) => calibrate::run(&args),
        Command::Run(args) => pipeline::run(&args),
        Command::Validate(args) => pipeline::validate(&args),
        Command::Replay(args) => replay::run(&args),
        Command::Motif(args) => motif::run(&args),
        Command::Softdtw(args) => softdtw::run_softdtw(&args),
        Command::Barycenter(args) => softdtw::run_barycenter(&args),
        Command::Search(args) => search::run(&args),
        Command::Shapelet(args) => shapelet::run(&args),
        Command::Plot(args) => plot::run(&args),
    }
}
