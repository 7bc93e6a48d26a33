//! `synfire bench episodes`: level-wise mining tables on the benchmark workloads, the CPU
//! counter and (with `--device all|gpu`) the GPU kernels side by side, or multi-GPU scaling.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use synfire::episode::hybrid::ExactAlgorithm;
use synfire::episode::{
    CountKind, Counter, CpuCounter, Episode, GpuCounter, MinerConfig, MiningResult, NoProgress,
    candidates, mine_with,
};
use synfire::event::EventStream;

use crate::cli::args::{OutputArg, Workload};

/// Options of `synfire bench episodes`.
#[derive(Debug, Args)]
pub struct EpisodesArgs {
    /// Which counters to time: the CPU counter only, or also the GPU kernels (`all`/`gpu`),
    /// side by side in one run.
    #[arg(long, value_enum, default_value_t = BenchDevice::Cpu)]
    device: BenchDevice,
    /// Workloads, comma-separated: `sym26`, `a2929` (the real fixture), `mea64` (64 channels,
    /// about 10^6 events, more than 10^5 level-3 candidates), `neuropixels` (the dense
    /// 300-unit preset) and `ibl` (the real 289-unit IBL Neuropixels raster), both at 0–5,
    /// 5–10, 10–20 ms, 0.2/s, 4 nodes.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Sym26, Workload::A2929])]
    workload: Vec<Workload>,
    /// GPU ordinals for the GPU columns (default: all).
    #[arg(long, value_delimiter = ',')]
    gpus: Option<Vec<usize>>,
    /// Timed repetitions per configuration after one warm-up run; the table shows medians.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Seed of the Sym26 stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The real session (NWB) benchmarked beside Sym26.
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    fixture: PathBuf,
    /// Only the multi-GPU scaling (two-pass, all levels, on 1, 2, 4, … GPUs and all): one line per
    /// exact algorithm and MTPE threads-per-slot setting of `--scaling-sweep`, no CPU columns.
    #[arg(long)]
    scaling: bool,
    /// MTPE threads per resident slot to sweep with `--scaling` (default: the built-in one).
    #[arg(long, value_delimiter = ',')]
    scaling_sweep: Option<Vec<u64>>,
    /// Also time mining without the successor bounds (`--no-bounds` of `mine`; slow on dense
    /// workloads), for the table's last line.
    #[arg(long)]
    without_bounds: bool,
    #[command(flatten)]
    output: OutputArg,
}

/// `--device` of the benchmark.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq)]
pub enum BenchDevice {
    /// CPU counter only.
    Cpu,
    /// CPU and GPU side by side.
    All,
    /// Same as `all` (the CPU reference is always measured, for the speedups).
    Gpu,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn timed(
    stream: &EventStream,
    config: &MinerConfig,
    counter: &CpuCounter,
) -> Result<(MiningResult, f64)> {
    let t = Instant::now();
    let r = mine_with(stream, config, counter, &NoProgress)?;
    Ok((r, t.elapsed().as_secs_f64()))
}

/// Runs the benchmark and prints one table per workload.
///
/// # Errors
/// If the fixture cannot be read, mining fails, `--device gpu|all` finds no usable GPU, or
/// `--output` cannot be written.
pub fn run(args: &EpisodesArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    let repeat = args.repeat.max(1);
    writeln!(
        out,
        "synfire bench episodes: CPU counter on {} threads; median of {repeat} runs after 1 warm-up",
        rayon::current_num_threads()
    )?;
    for workload in &args.workload {
        let (name, stream) = workload.stream(args.seed, &args.fixture)?;
        let config = workload.config();
        if args.scaling {
            scaling_table(&mut *out, &stream, &config, repeat, args)?;
            continue;
        }
        cpu_table(
            &mut *out,
            &name,
            &stream,
            &config,
            repeat,
            args.without_bounds,
        )?;
        if args.device != BenchDevice::Cpu {
            gpu_table(&mut *out, &stream, &config, repeat, args.gpus.as_deref())?;
        }
    }
    out.flush()?;
    Ok(())
}

fn cpu_table(
    out: &mut dyn Write,
    name: &str,
    stream: &EventStream,
    config: &MinerConfig,
    repeat: usize,
    without_bounds: bool,
) -> Result<()> {
    let counter = CpuCounter::new(stream);
    let mut unbounded = config.clone();
    unbounded.bounds = false;
    // Warm-up, with the peak resident memory of each level.
    let peaks = PeakMemory::default();
    let reference = mine_with(stream, config, &counter, &peaks)?;
    let peaks = peaks.into_levels();
    let mut per_level: Vec<Vec<f64>> = vec![Vec::new(); reference.levels.len()];
    let mut totals = Vec::new();
    let mut unbounded_totals = Vec::new();
    for _ in 0..repeat {
        let (r, total) = timed(stream, config, &counter)?;
        anyhow::ensure!(r.episodes == reference.episodes, "non-deterministic result");
        for (acc, l) in per_level.iter_mut().zip(&r.levels) {
            acc.push(l.seconds);
        }
        totals.push(total);
        if without_bounds {
            let (u, t) = timed(stream, &unbounded, &counter)?;
            anyhow::ensure!(
                u.episodes == reference.episodes,
                "mining with and without bounds differ"
            );
            unbounded_totals.push(t);
        }
    }
    let ivs: Vec<String> = config.intervals.iter().map(ToString::to_string).collect();
    writeln!(out)?;
    writeln!(
        out,
        "{name}: {} events, {} types, span {:.1} s, intervals {}, threshold: {} (= {} occurrences), max level {}",
        stream.len(),
        stream.alphabet().len(),
        stream.span(),
        ivs.join(" "),
        config.threshold,
        reference.min_count,
        config.max_level
    )?;
    writeln!(
        out,
        "{:>5} {:>11} {:>11} {:>12} {:>9} {:>10} {:>14} {:>13}",
        "level",
        "candidates",
        "by_bounds",
        "by_preelim",
        "frequent",
        "seconds",
        "cand-events/s",
        "peak_heap_MiB"
    )?;
    for ((l, secs), peak) in reference.levels.iter().zip(per_level).zip(&peaks) {
        let s = median(secs);
        writeln!(
            out,
            "{:>5} {:>11} {:>11} {:>12} {:>9} {:>10.4} {:>14.3e} {:>13.1}",
            l.level,
            l.candidates,
            l.removed_by_bounds,
            l.eliminated_by_preelim,
            l.frequent,
            s,
            l.candidate_events as f64 / s.max(1e-12),
            *peak as f64 / 1_048_576.0
        )?;
    }
    let without = if without_bounds {
        format!(", without bounds {:.4} s", median(unbounded_totals))
    } else {
        String::new()
    };
    writeln!(
        out,
        "CPU total: {:.4} s{without}, {} frequent episodes",
        median(totals),
        reference.episodes.len()
    )?;
    Ok(())
}

/// The peak heap of each level: the binary's counting allocator ([`super::heap`]), its
/// high-water mark reset when a level starts (everything live then, the stream and the
/// previous level's episodes included, counts towards the level's peak).
#[derive(Default)]
struct PeakMemory {
    levels: std::sync::Mutex<Vec<usize>>,
}

impl PeakMemory {
    fn into_levels(self) -> Vec<usize> {
        self.levels
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl synfire::episode::Progress for PeakMemory {
    fn level_started(&self, _level: usize, _work: u64) {
        super::heap::HEAP.reset_peak();
    }

    fn level_finished(&self, _stats: &synfire::episode::LevelStats) {
        self.levels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(super::heap::HEAP.peak());
    }
}

/// The candidates of every level of the reference run (level 1 .. last counted level).
fn level_candidates(
    stream: &EventStream,
    config: &MinerConfig,
    result: &MiningResult,
) -> Vec<Vec<Episode>> {
    let mut levels = vec![candidates::level_one(stream.alphabet().len())];
    for l in &result.levels[1..] {
        let prev: Vec<Episode> = result
            .episodes
            .iter()
            .filter(|f| f.episode.len() == l.level - 1)
            .map(|f| f.episode.clone())
            .collect();
        levels.push(if l.level == 2 {
            let types: Vec<_> = prev.iter().map(|e| e.types()[0]).collect();
            candidates::level_two(&types, &config.intervals)
        } else {
            candidates::join(&prev)
        });
    }
    levels
}

fn time_median(repeat: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    f()?; // warm-up
    let mut v = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let t = Instant::now();
        f()?;
        v.push(t.elapsed().as_secs_f64());
    }
    Ok(median(v))
}

/// Per level, side by side in one run: CPU exact and two-pass; GPU PreElim, PTPE, MTPE, the
/// hybrid choice (and which kernel it picked) and two-pass = PreElim + hybrid on the survivors
/// (wall time of the counter calls: candidate upload, kernels, readback); the two-pass kernel
/// time from CUDA events; speedups. Every GPU count is checked against the CPU first.
/// `--scaling`: two-pass counting of every level (candidates and survivors from the CPU
/// reference mining) on the first 1, 2, 4, … GPUs and on all, per exact algorithm and MTPE
/// threads-per-slot setting, side by side; every GPU count is checked against the CPU first.
fn scaling_table(
    out: &mut dyn Write,
    stream: &EventStream,
    config: &MinerConfig,
    repeat: usize,
    args: &EpisodesArgs,
) -> Result<()> {
    let cpu = CpuCounter::new(stream);
    let reference = mine_with(stream, config, &cpu, &NoProgress)?;
    let found = synfire::device::probe().map_err(|e| anyhow::anyhow!("`--scaling`: {e}"))?;
    let ordinals: Vec<usize> = args
        .gpus
        .clone()
        .unwrap_or_else(|| found.iter().map(|d| d.ordinal).collect());
    anyhow::ensure!(ordinals.len() > 1, "`--scaling` needs at least two GPUs");
    let passes: Vec<(Vec<Episode>, Vec<Episode>, Vec<u64>)> =
        level_candidates(stream, config, &reference)
            .into_iter()
            .map(|cands| -> Result<_> {
                let pre = cpu.count(CountKind::PreElim, &cands)?;
                let survivors: Vec<Episode> = cands
                    .iter()
                    .zip(&pre)
                    .filter(|(_, c)| **c >= reference.min_count)
                    .map(|(e, _)| e.clone())
                    .collect();
                let exact = cpu.count(CountKind::Exact, &survivors)?;
                Ok((cands, survivors, exact))
            })
            .collect::<Result<_>>()?;
    // 1, 2, 4, … GPUs, and all of them.
    let mut sizes: Vec<usize> = std::iter::successors(Some(1usize), |n| Some(n * 2))
        .take_while(|&n| n < ordinals.len())
        .collect();
    sizes.push(ordinals.len());
    let counters: Vec<GpuCounter> = sizes
        .iter()
        .map(|&n| GpuCounter::new(stream, &config.intervals, &ordinals[..n]))
        .collect::<Result<_, _>>()?;
    writeln!(
        out,
        "multi-GPU scaling, two-pass, all levels ({} levels), on {} GPUs; median of {repeat}",
        passes.len(),
        sizes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    let mut header = format!("{:>8} {:>6}", "exact", "mtpe_k");
    for &n in &sizes {
        header += &format!(" {:>10}", format!("{n} GPU s"));
    }
    for &n in &sizes[1..] {
        header += &format!(" {:>9}", format!("{n}:1"));
    }
    writeln!(out, "{header}")?;
    let sweep = args
        .scaling_sweep
        .clone()
        .unwrap_or_else(|| vec![synfire::episode::gpu::MTPE_THREADS_PER_SLOT]);
    for algorithm in [
        ExactAlgorithm::Hybrid,
        ExactAlgorithm::Ptpe,
        ExactAlgorithm::Mtpe,
    ] {
        for &k in &sweep {
            let mut times = vec![0.0f64; counters.len()];
            for (slot, c) in counters.iter().enumerate() {
                c.set_exact_algorithm(algorithm);
                c.set_mtpe_threads_per_slot(k);
                for (cands, survivors, exact) in &passes {
                    anyhow::ensure!(
                        &c.count(CountKind::Exact, survivors)? == exact,
                        "GPU {algorithm:?} (k = {k}) != CPU"
                    );
                    times[slot] += time_median(repeat, || {
                        c.count(CountKind::PreElim, cands)?;
                        c.count(CountKind::Exact, survivors)?;
                        Ok(())
                    })?;
                }
            }
            let mut line = format!("{:>8} {k:>6}", format!("{algorithm:?}").to_lowercase());
            for t in &times {
                line += &format!(" {t:>10.4}");
            }
            for t in &times[1..] {
                line += &format!(" {:>8.2}x", times[0] / t);
            }
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// Largest level for which `gpu_table` times every kernel on every candidate.
const KERNEL_TABLE_MAX_CANDIDATES: usize = 2_000_000;

fn gpu_table(
    out: &mut dyn Write,
    stream: &EventStream,
    config: &MinerConfig,
    repeat: usize,
    gpus: Option<&[usize]>,
) -> Result<()> {
    let cpu = CpuCounter::new(stream);
    let reference = mine_with(stream, config, &cpu, &NoProgress)?;
    let found = synfire::device::probe().map_err(|e| anyhow::anyhow!("`--device all`: {e}"))?;
    let ordinals: Vec<usize> = gpus.map_or_else(
        || found.iter().map(|d| d.ordinal).collect(),
        <[usize]>::to_vec,
    );
    let setup = Instant::now();
    let gpu = GpuCounter::new(stream, &config.intervals, &ordinals)?;
    let setup_s = setup.elapsed().as_secs_f64();
    // End to end: the miner with its bounds on the CPU and the survivors counted on the GPU,
    // against the CPU miner, side by side; the episodes must be identical.
    let mut cpu_totals = Vec::new();
    let mut gpu_totals = Vec::new();
    let mut gpu_levels: Vec<Vec<f64>> = vec![Vec::new(); reference.levels.len()];
    mine_with(stream, config, &gpu, &NoProgress)?; // warm-up
    for _ in 0..repeat {
        let (c, t) = timed(stream, config, &cpu)?;
        anyhow::ensure!(
            c.episodes == reference.episodes,
            "non-deterministic CPU result"
        );
        cpu_totals.push(t);
        let started = Instant::now();
        let g = mine_with(stream, config, &gpu, &NoProgress)?;
        gpu_totals.push(started.elapsed().as_secs_f64());
        anyhow::ensure!(
            g.episodes == reference.episodes,
            "mining on the GPU differs from the CPU"
        );
        for (acc, l) in gpu_levels.iter_mut().zip(&g.levels) {
            acc.push(l.seconds);
        }
    }
    let (cpu_total, gpu_total) = (median(cpu_totals), median(gpu_totals));
    let per_level: Vec<String> = gpu_levels
        .into_iter()
        .map(|v| format!("{:.4}", median(v)))
        .collect();
    writeln!(
        out,
        "GPU mining (bounds on the CPU, survivors counted on the GPU, identical episodes): {gpu_total:.4} s (levels {}), CPU {cpu_total:.4} s, speedup {:.1}x; GPU counter setup {setup_s:.3} s",
        per_level.join(" "),
        cpu_total / gpu_total
    )?;
    let largest = reference
        .levels
        .iter()
        .map(|l| l.candidates)
        .max()
        .unwrap_or(0);
    if largest > KERNEL_TABLE_MAX_CANDIDATES {
        writeln!(
            out,
            "(no per-kernel table: a level has {largest} candidates, above {KERNEL_TABLE_MAX_CANDIDATES}, and the table counts every candidate with every kernel and on the CPU)"
        )?;
        return Ok(());
    }
    let devices: Vec<String> = gpu
        .devices()
        .iter()
        .map(|d| format!("{}:{}", d.ordinal, d.name))
        .collect();
    writeln!(
        out,
        "GPU: {} worker(s) [{}], device memory in use after upload: {} MiB",
        devices.len(),
        devices.join(", "),
        gpu.device_memory_used()
            .iter()
            .map(|b| (b >> 20).to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    )?;
    writeln!(
        out,
        "{:>5} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>9} {:>9}",
        "level",
        "cands",
        "elim",
        "cpu_exact",
        "cpu_2pass",
        "gpu_pre",
        "gpu_ptpe",
        "gpu_mtpe",
        "gpu_ends",
        "gpu_hybrid",
        "pick",
        "gpu_2pass",
        "kern_2p",
        "x_2pass",
        "x_hybrid"
    )?;
    let (mut tot_cpu, mut tot_gpu) = (0.0, 0.0);
    let mut passes: Vec<(Vec<Episode>, Vec<Episode>)> = Vec::new();
    for cands in level_candidates(stream, config, &reference) {
        let level = cands[0].len();
        let min_count = reference.min_count;
        // Correctness first: a GPU figure counts only when it equals the CPU reference.
        let cpu_exact = cpu.count(CountKind::Exact, &cands)?;
        let cpu_pre = cpu.count(CountKind::PreElim, &cands)?;
        for algorithm in [
            ExactAlgorithm::Ptpe,
            ExactAlgorithm::Mtpe,
            ExactAlgorithm::Ends,
            ExactAlgorithm::Hybrid,
        ] {
            gpu.set_exact_algorithm(algorithm);
            anyhow::ensure!(
                gpu.count(CountKind::Exact, &cands)? == cpu_exact,
                "level {level}: GPU {algorithm:?} != CPU"
            );
        }
        anyhow::ensure!(
            gpu.count(CountKind::PreElim, &cands)? == cpu_pre,
            "level {level}: GPU PreElim != CPU"
        );
        let survivors: Vec<Episode> = cands
            .iter()
            .zip(&cpu_pre)
            .filter(|(_, c)| **c >= min_count)
            .map(|(e, _)| e.clone())
            .collect();
        let t_cpu_exact = time_median(repeat, || {
            cpu.count(CountKind::Exact, &cands)
                .map(drop)
                .map_err(Into::into)
        })?;
        let t_cpu_2p = time_median(repeat, || {
            cpu.count(CountKind::PreElim, &cands)?;
            cpu.count(CountKind::Exact, &survivors)?;
            Ok(())
        })?;
        let t_gpu_pre = time_median(repeat, || {
            gpu.count(CountKind::PreElim, &cands)
                .map(drop)
                .map_err(Into::into)
        })?;
        let mut t_exact = Vec::new();
        // Hybrid last: its stats tell which mapping it picked.
        for algorithm in [
            ExactAlgorithm::Ptpe,
            ExactAlgorithm::Mtpe,
            ExactAlgorithm::Ends,
            ExactAlgorithm::Hybrid,
        ] {
            gpu.set_exact_algorithm(algorithm);
            gpu.reset_stats();
            t_exact.push(time_median(repeat, || {
                gpu.count(CountKind::Exact, &cands)
                    .map(drop)
                    .map_err(Into::into)
            })?);
        }
        let hybrid_pick = if gpu.stats().mtpe_candidates == 0 {
            "ptpe"
        } else if gpu.stats().ptpe_candidates == 0 {
            "mtpe"
        } else {
            "mixed"
        };
        let (t_gpu_ptpe, t_gpu_mtpe, t_gpu_ends, t_gpu_hybrid) =
            (t_exact[0], t_exact[1], t_exact[2], t_exact[3]);
        gpu.reset_stats();
        let t_gpu_2p = time_median(repeat, || {
            gpu.count(CountKind::PreElim, &cands)?;
            gpu.count(CountKind::Exact, &survivors)?;
            Ok(())
        })?;
        let kern_2p = gpu.stats().kernel_ms / 1e3 / (repeat + 1) as f64;
        tot_cpu += t_cpu_2p;
        tot_gpu += t_gpu_2p;
        passes.push((cands.clone(), survivors.clone()));
        writeln!(
            out,
            "{:>5} {:>9} {:>9} {:>10.5} {:>10.5} {:>10.5} {:>10.5} {:>10.5} {:>10.5} {:>10.5} {:>6} {:>10.5} {:>10.5} {:>8.1}x {:>8.1}x",
            level,
            cands.len(),
            cands.len() - survivors.len(),
            t_cpu_exact,
            t_cpu_2p,
            t_gpu_pre,
            t_gpu_ptpe,
            t_gpu_mtpe,
            t_gpu_ends,
            t_gpu_hybrid,
            hybrid_pick,
            t_gpu_2p,
            kern_2p,
            t_cpu_2p / t_gpu_2p,
            t_cpu_exact / t_gpu_hybrid
        )?;
    }
    let st = gpu.stats();
    writeln!(
        out,
        "two-pass counting, all levels: CPU {tot_cpu:.4} s, GPU {tot_gpu:.4} s, speedup {:.1}x; PTPE overflow recounts in the last level's runs: {}",
        tot_cpu / tot_gpu,
        st.overflow_recounts
    )?;
    if ordinals.len() > 1 {
        // Multi-GPU scaling, side by side: the same two-pass work on the first GPU alone.
        let single = GpuCounter::new(stream, &config.intervals, &ordinals[..1])?;
        let two_pass = |c: &GpuCounter| -> Result<f64> {
            let mut total = 0.0;
            for (cands, survivors) in &passes {
                total += time_median(repeat, || {
                    c.count(CountKind::PreElim, cands)?;
                    c.count(CountKind::Exact, survivors)?;
                    Ok(())
                })?;
            }
            Ok(total)
        };
        let (t1, tn) = (two_pass(&single)?, two_pass(&gpu)?);
        writeln!(
            out,
            "multi-GPU two-pass counting, all levels: 1 GPU {t1:.4} s, {} GPUs {tn:.4} s, scaling {:.2}x",
            ordinals.len(),
            t1 / tn
        )?;
    }
    let t = Instant::now();
    let mined = mine_with(stream, config, &gpu, &NoProgress)?;
    anyhow::ensure!(
        mined.episodes == reference.episodes,
        "GPU mining result differs from the CPU's"
    );
    writeln!(
        out,
        "end-to-end mining on the GPU counter: {:.4} s (identical episodes to the CPU)",
        t.elapsed().as_secs_f64()
    )?;
    Ok(())
}
