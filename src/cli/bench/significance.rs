//! `synfire bench significance`: significance testing against surrogates on the benchmark
//! workloads, one table row per (workload, procedure): episodes tested and significant,
//! seconds, surrogates per second.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::{Args, ValueEnum};
use synfire::device::DeviceChoice;
use synfire::episode::{GpuSettings, mine};
use synfire::significance::{Correction, SignificanceConfig, SignificanceResult, test_episodes_on};

use crate::cli::args::{
    ExactKernelArg, OutputArg, SignificantOnlyArg, SurrogateArgs, Workload, parse_correction,
};

/// Options of `synfire bench significance`: the surrogates are [`SurrogateArgs`] and
/// [`SignificantOnlyArg`] with the benchmarks' defaults (`dither:0.015`, 1,000 surrogates;
/// [`SurrogateArgs::bench_defaults`]). `--correction` (a list) and `--seed` (the workloads')
/// are this benchmark's own.
#[derive(Debug, Args)]
#[command(mut_args(SurrogateArgs::bench_defaults("1000")))]
pub struct BenchSignificanceArgs {
    /// Workloads, comma-separated (as `bench episodes`: `neuropixels` and `ibl` at 0–5, 5–10,
    /// 10–20 ms, 0.2/s).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Neuropixels, Workload::Ibl])]
    workload: Vec<Workload>,
    /// Procedures, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [Correction::MaxT, Correction::Spectrum], value_parser = parse_correction)]
    correction: Vec<Correction>,
    /// `--surrogates`, `--n-surrogates` and `--sample-split` (the `max-t` rows only).
    #[command(flatten)]
    surrogates: SurrogateArgs,
    /// Largest episode size (the workloads' own is 4).
    #[arg(long)]
    max_level: Option<usize>,
    /// Seed of the synthetic workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The real session (NWB) for `a2929`.
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    fixture: PathBuf,
    /// Where the surrogates are mined and counted: `cpu`, `gpu`, or `all` (both, the GPU's
    /// result checked equal to the CPU's).
    #[arg(long, value_enum, default_value_t = BenchDevice::Cpu)]
    device: BenchDevice,
    /// GPU kernel for exact counts (as `mine --exact-kernel`): PTPE or MTPE per batch by
    /// Eq. 3 (`hybrid`), or one of them always.
    #[arg(long, value_enum, default_value_t = ExactKernelArg::Hybrid)]
    exact_kernel: ExactKernelArg,
    /// MTPE threads per resident PTPE thread slot (the number of segments MTPE splits the
    /// stream into follows from it; default 4).
    #[arg(long)]
    mtpe_threads_per_slot: Option<u64>,
    /// `--significant-only`: `spectrum` then counts only the significant episodes in the
    /// surrogates, in a second pass.
    #[command(flatten)]
    listing: SignificantOnlyArg,
    /// With `--sample-split`: the family's size (`mine --test-top`; default 10,000).
    #[arg(long, value_name = "N", requires = "sample_split")]
    family: Option<usize>,
    #[command(flatten)]
    output: OutputArg,
}

/// `--device` of `bench significance`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BenchDevice {
    /// The CPU only.
    Cpu,
    /// The GPUs only.
    Gpu,
    /// Both, side by side.
    All,
}

/// Runs the benchmark.
///
/// # Errors
/// Unreadable fixtures, bad options, mining or surrogate errors.
pub fn run(args: &BenchSignificanceArgs) -> Result<()> {
    let (surrogates, method) = args.surrogates.bench_method()?;
    let n_surrogates = args.surrogates.n_surrogates;
    let significant_only = args.listing.significant_only;
    let mut out = args.output.writer()?;
    writeln!(
        out,
        "synfire bench significance: {} surrogates ({}), CPU on {} threads{}",
        n_surrogates,
        surrogates,
        rayon::current_num_threads(),
        if significant_only {
            ", significant episodes only"
        } else {
            ""
        }
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| workload | max level | correction | device | tested | significant | mining s | testing s | surrogates/s | candidate counts/s |"
    )?;
    writeln!(out, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|")?;
    let devices: &[DeviceChoice] = match args.device {
        BenchDevice::Cpu => &[DeviceChoice::Cpu],
        BenchDevice::Gpu => &[DeviceChoice::Gpu],
        BenchDevice::All => &[DeviceChoice::Cpu, DeviceChoice::Gpu],
    };
    for &w in &args.workload {
        let (name, stream) = w.stream(args.seed, &args.fixture)?;
        let mut config = w.config();
        if let Some(k) = args.max_level {
            config.max_level = k;
        }
        let started = Instant::now();
        let data = mine(&stream, &config)?;
        let mining_s = started.elapsed().as_secs_f64();
        for &correction in &args.correction {
            let split = args
                .surrogates
                .sample_split
                .filter(|_| correction == Correction::MaxT);
            let sig = SignificanceConfig {
                method: method.clone(),
                n_surrogates,
                alpha: 0.05,
                correction,
                seed: 0,
                test_top: split.and(args.family),
                watch: None,
                trials: None,
                significant_only,
                sample_split: split,
            };
            let mut reference: Option<SignificanceResult> = None;
            for &device in devices {
                let started = Instant::now();
                let r = test_episodes_on(
                    &stream,
                    &config,
                    &data,
                    &sig,
                    device,
                    &GpuSettings {
                        exact: args.exact_kernel.into(),
                        mtpe_threads_per_slot: args.mtpe_threads_per_slot,
                        ..GpuSettings::default()
                    },
                )?;
                let testing_s = started.elapsed().as_secs_f64();
                let device = if device == DeviceChoice::Gpu {
                    "gpu"
                } else {
                    "cpu"
                };
                if let Some(cpu) = &reference
                    && cpu.tests != r.tests
                {
                    anyhow::bail!(
                        "{name} {correction}: the {device} result differs from the CPU's"
                    );
                }
                let correction = match split {
                    Some(f) => format!("{correction}, sample split {f}"),
                    None => correction.to_string(),
                };
                writeln!(
                    out,
                    "| {name} | {} | {correction} | {device} | {} | {} | {mining_s:.3} | {testing_s:.3} | {:.2} | {:.3e} |",
                    config.max_level,
                    r.tested,
                    r.tests.iter().filter(|t| t.stats.significant).count(),
                    n_surrogates as f64 / testing_s,
                    r.candidates_counted as f64 / testing_s
                )?;
                out.flush()?;
                reference.get_or_insert(r);
            }
        }
    }
    Ok(())
}
