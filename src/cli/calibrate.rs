//! `synfire calibrate`: measures the PTPE/MTPE crossover points of one GPU per episode size N
//! (paper §7.2, Table 1) and stores `f(N)` of Eq. 3 for that GPU model, where `synfire mine`
//! finds it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use synfire::episode::calibrate::{self, Plan, Step};
use synfire::episode::hybrid::Calibration;
use synfire::episode::{Episode, GpuCounter};
use synfire::event::EventType;

use crate::cli::args::Workload;

/// Options of `synfire calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// The GPU to calibrate (its model's file is written).
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Stream the kernels are timed on: `sym26` (the paper's Table 1 workload), `mea64`,
    /// `neuropixels` (the dense preset), `a2929` (the real session of `--fixture`) or `ibl`
    /// (the real 289-unit raster).
    #[arg(long, value_enum, default_value_t = Workload::Sym26)]
    workload: Workload,
    /// The real session read with `--workload a2929`.
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    fixture: std::path::PathBuf,
    /// Largest episode size calibrated (sizes above use the fit `a / N + b`).
    #[arg(long, default_value_t = 8)]
    max_nodes: usize,
    /// Smallest number of episodes timed, as a power of two.
    #[arg(long, default_value_t = 5)]
    min_log2_episodes: u32,
    /// Largest number of episodes timed, as a power of two.
    #[arg(long, default_value_t = 18)]
    max_log2_episodes: u32,
    /// Timed repetitions per point after one warm-up; medians are used.
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Candidates timed: `real` (what the level-wise miner generates on the workload: level 1,
    /// pairs of frequent types, joins of frequent episodes; random where a level has none) or
    /// `random` (uniform types and intervals).
    #[arg(long, value_enum, default_value_t = CandidateKind::Real)]
    candidates: CandidateKind,
    /// Where to write the calibration (default: the per-model file `mine` reads).
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Which candidates `calibrate` times.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum CandidateKind {
    /// The miner's own candidates on the workload.
    Real,
    /// Uniformly random types and intervals.
    Random,
}

/// The candidates the level-wise miner generates on `stream` for each size `1..=max_nodes`
/// (index N − 1): level 1, pairs of the frequent types × intervals, then joins of the frequent
/// episodes of the level below. Empty where the level below has no frequent episode.
fn real_candidates(
    stream: &synfire::event::EventStream,
    config: &synfire::episode::MinerConfig,
    gpu: &GpuCounter,
    max_nodes: usize,
) -> Result<Vec<Vec<Episode>>> {
    use synfire::episode::candidates;
    let mut cfg = config.clone();
    cfg.max_level = max_nodes.saturating_sub(1).max(1);
    let mined = synfire::episode::mine_with(stream, &cfg, gpu, &synfire::episode::NoProgress)?;
    let at = |n: usize| -> Vec<Episode> {
        mined
            .episodes
            .iter()
            .filter(|f| f.episode.len() == n)
            .map(|f| f.episode.clone())
            .collect()
    };
    let mut out = vec![candidates::level_one(stream.alphabet().len())];
    if max_nodes >= 2 {
        let types: Vec<EventType> = at(1).iter().map(|e| e.types()[0]).collect();
        out.push(candidates::level_two(&types, &config.intervals));
    }
    for n in 3..=max_nodes {
        out.push(candidates::join(&at(n - 1)));
    }
    Ok(out)
}

/// Runs the calibration and prints a table.
///
/// # Errors
/// No usable GPU, a device failure, PTPE and MTPE disagreeing on a count, or an unwritable
/// output file.
pub fn run(args: &CalibrateArgs) -> Result<()> {
    let (_, stream) = args.workload.stream(1, &args.fixture)?;
    let config = args.workload.config();
    let devices = synfire::device::probe().context("`synfire calibrate` needs a GPU")?;
    let info = devices
        .iter()
        .find(|d| d.ordinal == args.gpu)
        .with_context(|| {
            format!(
                "`--gpu {}`: no such GPU ({} found)",
                args.gpu,
                devices.len()
            )
        })?
        .clone();
    let gpu = GpuCounter::new(&stream, &config.intervals, &[args.gpu])?;
    let max_nodes = args.max_nodes.clamp(1, synfire::device::MAX_GPU_NODES);
    let real = match args.candidates {
        CandidateKind::Real => real_candidates(&stream, &config, &gpu, max_nodes)?,
        CandidateKind::Random => Vec::new(),
    };
    let workload = format!(
        "{:?} seed 1 ({} events), {} candidates over its {} intervals",
        args.workload,
        stream.len(),
        match args.candidates {
            CandidateKind::Real => "the miner's",
            CandidateKind::Random => "random",
        },
        config.intervals.len()
    );
    println!(
        "synfire calibrate: GPU {} ({}, sm_{}{}, {} SMs) on {workload}; kernel ms (CUDA events), median of {}",
        info.ordinal,
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        info.multiprocessors,
        args.repeat.max(1)
    );
    println!(
        "{:>5} {:>10} {:>11} {:>11} {:>8}",
        "nodes", "episodes", "ptpe_ms", "mtpe_ms", "faster"
    );
    let types = u32::try_from(stream.alphabet().len()).context("too many event types")?;
    let plan = Plan {
        max_nodes,
        min_log2_episodes: args.min_log2_episodes,
        max_log2_episodes: args.max_log2_episodes,
        repeat: args.repeat.max(1),
    };
    let real_candidates = args.candidates == CandidateKind::Real;
    let calibration = calibrate::measure(
        &gpu,
        types,
        &config.intervals,
        &real,
        &plan,
        workload,
        &mut |step| match step {
            Step::Size { nodes, pool } if real_candidates => println!(
                "# N = {nodes}: {}",
                pool.map_or("no real candidates; random ones".to_owned(), |p| format!(
                    "{p} real candidates, cycled"
                ))
            ),
            Step::Size { .. } => {}
            Step::Timed {
                nodes,
                episodes,
                ptpe_ms,
                mtpe_ms,
            } => println!(
                "{nodes:>5} {episodes:>10} {ptpe_ms:>11.4} {mtpe_ms:>11.4} {:>8}",
                if ptpe_ms <= mtpe_ms { "ptpe" } else { "mtpe" }
            ),
        },
    )?;
    let fit = calibration.fit;
    println!();
    println!(
        "{:>5} {:>10} {:>10} {:>9} {:>9}",
        "nodes", "crossover", "resident", "f(N)", "fit"
    );
    for c in &calibration.crossovers {
        println!(
            "{:>5} {:>10} {:>10} {:>9.4} {:>9.4}",
            c.nodes,
            c.episodes,
            c.resident_threads,
            c.penalty,
            fit.at(c.nodes)
        );
    }
    println!("f(N) = {:.4} / N + {:.4}", fit.a, fit.b);
    let path = match &args.output {
        Some(p) => p.clone(),
        None => Calibration::default_path(&info.name, info.compute_capability)
            .context("no cache directory for the calibration; give `--output`")?,
    };
    calibration.save(&path)?;
    println!("calibration written to {}", path.display());
    Ok(())
}
