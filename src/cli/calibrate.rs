//! `synfire calibrate`: measures the PTPE/MTPE crossover points of one GPU per episode size N
//! (paper §7.2, Table 1) and stores `f(N)` of Eq. 3 for that GPU model, where `synfire mine`
//! finds it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use synfire::episode::hybrid::{self, Calibration, Crossover, ExactAlgorithm, PenaltyFit};
use synfire::episode::{CountKind, Counter, Episode, GpuCounter};
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

/// `m` candidates taken cyclically from `pool` (repeats time the same work again).
fn cycled(pool: &[Episode], m: usize) -> Vec<Episode> {
    pool.iter().cycle().take(m).cloned().collect()
}

/// `count` candidates of `nodes` nodes with random types and intervals (seeded).
fn random_candidates(
    rng: &mut ChaCha8Rng,
    types: u32,
    intervals: &[synfire::episode::Interval],
    nodes: usize,
    count: usize,
) -> Vec<Episode> {
    (0..count)
        .map(|_| {
            Episode::new(
                (0..nodes)
                    .map(|_| EventType(rng.random_range(0..types)))
                    .collect(),
                (1..nodes)
                    .map(|_| intervals[rng.random_range(0..intervals.len())])
                    .collect(),
            )
        })
        .collect()
}

/// Median kernel milliseconds (CUDA events) of exact counts with `algorithm`, and the counts.
fn kernel_ms(
    gpu: &GpuCounter,
    algorithm: ExactAlgorithm,
    cands: &[Episode],
    repeat: usize,
) -> Result<(f64, Vec<u64>)> {
    gpu.set_exact_algorithm(algorithm);
    let counts = gpu.count(CountKind::Exact, cands)?; // warm-up
    let mut ms = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        gpu.reset_stats();
        gpu.count(CountKind::Exact, cands)?;
        ms.push(gpu.stats().kernel_ms);
    }
    ms.sort_by(f64::total_cmp);
    Ok((ms[ms.len() / 2], counts))
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
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let types = u32::try_from(stream.alphabet().len()).context("too many event types")?;
    let mut crossovers = Vec::new();
    for nodes in 1..=max_nodes {
        let pool = real.get(nodes - 1).filter(|p| !p.is_empty());
        if args.candidates == CandidateKind::Real {
            println!(
                "# N = {nodes}: {}",
                pool.map_or("no real candidates; random ones".to_owned(), |p| format!(
                    "{} real candidates, cycled",
                    p.len()
                ))
            );
        }
        let mut timings = Vec::new();
        for log2 in args.min_log2_episodes..=args.max_log2_episodes.max(args.min_log2_episodes) {
            let m = 1usize << log2;
            let cands = match pool {
                Some(p) => cycled(p, m),
                None => random_candidates(&mut rng, types, &config.intervals, nodes, m),
            };
            let (ptpe, a) = kernel_ms(&gpu, ExactAlgorithm::Ptpe, &cands, args.repeat.max(1))?;
            let (mtpe, b) = kernel_ms(&gpu, ExactAlgorithm::Mtpe, &cands, args.repeat.max(1))?;
            anyhow::ensure!(
                a == b,
                "PTPE and MTPE counts differ ({nodes} nodes, {m} episodes)"
            );
            println!(
                "{nodes:>5} {m:>10} {ptpe:>11.4} {mtpe:>11.4} {:>8}",
                if ptpe <= mtpe { "ptpe" } else { "mtpe" }
            );
            timings.push((m as u64, ptpe, mtpe));
        }
        let episodes = hybrid::crossover(&timings).expect("at least one timing");
        let resident = gpu.resident_threads(0, nodes).max(1);
        crossovers.push(Crossover {
            nodes,
            episodes,
            resident_threads: resident,
            penalty: episodes as f64 / resident as f64,
        });
    }
    let points: Vec<(usize, f64)> = crossovers.iter().map(|c| (c.nodes, c.penalty)).collect();
    let fit = PenaltyFit::fit(&points).expect("at least one size");
    println!();
    println!(
        "{:>5} {:>10} {:>10} {:>9} {:>9}",
        "nodes", "crossover", "resident", "f(N)", "fit"
    );
    for c in &crossovers {
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
    let calibration = Calibration {
        device: info.name.clone(),
        compute_capability: info.compute_capability,
        multiprocessors: info.multiprocessors,
        workload,
        crossovers,
        fit,
    };
    let path = match &args.output {
        Some(p) => p.clone(),
        None => Calibration::default_path(&info.name, info.compute_capability)
            .context("no cache directory for the calibration; give `--output`")?,
    };
    calibration.save(&path)?;
    println!("calibration written to {}", path.display());
    Ok(())
}
