//! `synfire motif` and `synfire bench motif`.

use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::device::DeviceChoice;
use synfire::motif::{MethodChoice, MotifConfig, MotifResult, default_exclusion, find_motifs};

use crate::cli::DeviceArg;

/// `--method`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum MethodArg {
    /// The projection join, switching to the matrix profile when its bounds are weak.
    Auto,
    /// The projection join only (DCT lower bounds, grid ε-join).
    ProjectionJoin,
    /// MK only.
    Mk,
    /// The exact matrix profile only.
    MatrixProfile,
    /// Every pair (slow; the test oracle).
    BruteForce,
}

impl From<MethodArg> for MethodChoice {
    fn from(m: MethodArg) -> Self {
        match m {
            MethodArg::Auto => Self::Auto,
            MethodArg::ProjectionJoin => Self::ProjectionJoin,
            MethodArg::Mk => Self::Mk,
            MethodArg::MatrixProfile => Self::MatrixProfile,
            MethodArg::BruteForce => Self::BruteForce,
        }
    }
}

/// `--format`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum FormatArg {
    /// One JSON object.
    Json,
    /// A short table.
    Text,
}

/// `synfire motif`.
#[derive(Debug, Args)]
pub struct MotifArgs {
    /// The series: a text file (one value per line), `.npy` (f32/f64), `file.csv[:COLUMN]`, or
    /// an HDF5/NWB dataset as `file.nwb:/acquisition/...`.
    input: String,
    /// Subsequence length m, samples.
    #[arg(long)]
    m: usize,
    /// Exclusion zone = ceil(m / DENOM): pairs need j - i > exclusion.
    #[arg(long, default_value_t = 4)]
    exclusion_denom: usize,
    /// Number of non-overlapping motifs.
    #[arg(long, default_value_t = 1)]
    top_k: usize,
    /// MK reference subsequences r.
    #[arg(long, default_value_t = synfire::motif::DEFAULT_REFERENCES)]
    references: usize,
    /// Seed of the reference choice (the result does not depend on it).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Exact path.
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    method: MethodArg,
    /// Where to search.
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    device: DeviceArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
}

/// Runs `synfire motif`.
///
/// # Errors
/// Unreadable input, bad options, or a GPU failure with `--device gpu`.
pub fn motif(args: &MotifArgs) -> Result<()> {
    let x = synfire::series::read_series(&args.input)
        .with_context(|| format!("reading the series `{}`", args.input))?;
    let cfg = MotifConfig {
        m: args.m,
        exclusion: default_exclusion(args.m, args.exclusion_denom),
        top_k: args.top_k,
        references: args.references,
        seed: args.seed,
        method: args.method.into(),
    };
    if args.exclusion_denom == 0 {
        anyhow::bail!("`--exclusion-denom` must be at least 1");
    }
    let r = find_motifs(&x, &cfg, args.device.into())
        .with_context(|| format!("motif search on `{}`", args.input))?;
    match args.format {
        FormatArg::Json => println!("{}", serde_json::to_string(&r)?),
        FormatArg::Text => {
            println!(
                "n = {}, m = {}, exclusion = {}, method = {}, device = {}, {:.3} s",
                r.n,
                r.m,
                r.exclusion,
                r.method.as_str(),
                r.device,
                r.stats.seconds
            );
            for (k, m) in r.motifs.iter().enumerate() {
                println!(
                    "{:>3}  i = {:>9}  j = {:>9}  distance = {:.9}",
                    k + 1,
                    m.i,
                    m.j,
                    m.distance
                );
            }
        }
    }
    Ok(())
}

/// `synfire bench motif`.
#[derive(Debug, Args)]
pub struct BenchMotifArgs {
    /// log2 of the random-walk length.
    #[arg(long, default_value_t = 21)]
    log2_n: u32,
    /// Subsequence length.
    #[arg(long, default_value_t = 100)]
    m: usize,
    /// Devices to time: cpu, gpu or all.
    #[arg(long, default_value = "all")]
    device: String,
    /// Timed repetitions after one warm-up (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// The ECG to time as the real input.
    #[arg(long, default_value = "fixtures/sensors/mitbih-208-ecg/ecg.npy")]
    ecg: String,
    /// MK reference subsequences r.
    #[arg(long, default_value_t = synfire::motif::DEFAULT_REFERENCES)]
    references: usize,
    /// Also run the CPU on the random walk (slow on few cores).
    #[arg(long)]
    cpu_walk: bool,
    /// Check every answer against a reference: the CPU matrix profile for n <= 2^20, else the
    /// first GPU answer (MK and the matrix profile are independent exact algorithms).
    #[arg(long)]
    verify: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `synfire bench motif` and prints a table.
///
/// # Errors
/// Unreadable ECG, a GPU failure, or a result that differs from the reference (`--verify`).
pub fn bench(args: &BenchMotifArgs) -> Result<()> {
    anyhow::ensure!(args.repeat >= 1, "`--repeat` must be at least 1");
    anyhow::ensure!(
        (8..=31).contains(&args.log2_n),
        "`--log2-n` must be between 8 and 31 (got {})",
        args.log2_n
    );
    let walk = synfire::synth::random_walk(1usize << args.log2_n, 2026);
    let ecg = synfire::series::read_series(&args.ecg)
        .with_context(|| format!("reading `{}`", args.ecg))?;
    let inputs = [
        (format!("random walk 2^{}", args.log2_n), walk),
        ("ECG MIT-BIH 208".to_owned(), ecg),
    ];
    let mut devices = Vec::new();
    if args.device == "all" || args.device == "cpu" {
        devices.push(DeviceChoice::Cpu);
    }
    if args.device == "all" || args.device == "gpu" {
        devices.push(DeviceChoice::Gpu);
    }
    println!(
        "| input | n | m | device | method | seconds (median of {}) | pairs | lower bounds | true distances | pruned | i | j | distance | verified |",
        args.repeat
    );
    println!("|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (name, x) in &inputs {
        let cfg = MotifConfig {
            references: args.references,
            ..MotifConfig::new(args.m)
        };
        let mut reference: Option<MotifResult> = None;
        for &device in &devices {
            if device == DeviceChoice::Cpu && x.len() > 1 << 20 && !args.cpu_walk {
                continue;
            }
            let configs: Vec<MethodChoice> = if device == DeviceChoice::Gpu {
                vec![
                    MethodChoice::Auto,
                    MethodChoice::ProjectionJoin,
                    MethodChoice::Mk,
                    MethodChoice::MatrixProfile,
                ]
            } else {
                vec![MethodChoice::Auto]
            };
            for method in configs {
                let c = MotifConfig {
                    method,
                    ..cfg.clone()
                };
                let mut times = Vec::new();
                let mut last = None;
                for _ in 0..=args.repeat {
                    let t = Instant::now();
                    let r = find_motifs(x, &c, device)?;
                    times.push(t.elapsed().as_secs_f64());
                    last = Some(r);
                }
                times.remove(0); // warm-up: device start, NVRTC, caches
                let r = last.expect("at least one run");
                let verified = if args.verify {
                    let want = match &reference {
                        Some(w) => w.clone(),
                        None if x.len() > 1 << 20 => {
                            reference = Some(r.clone());
                            r.clone()
                        }
                        None => {
                            let w = find_motifs(
                                x,
                                &MotifConfig {
                                    method: MethodChoice::MatrixProfile,
                                    ..cfg.clone()
                                },
                                DeviceChoice::Cpu,
                            )?;
                            reference = Some(w.clone());
                            w
                        }
                    };
                    let same = r.motifs.iter().zip(&want.motifs).all(|(a, b)| {
                        (a.i, a.j) == (b.i, b.j)
                            && (a.distance - b.distance).abs() <= 1e-6 * b.distance.max(1e-12)
                    }) && r.motifs.len() == want.motifs.len();
                    anyhow::ensure!(
                        same,
                        "{name}: {:?} differs from the reference {:?}",
                        r.motifs,
                        want.motifs
                    );
                    "yes"
                } else {
                    "-"
                };
                let s = &r.stats;
                let pruned = if s.pairs > 0 {
                    1.0 - s.distances.min(s.pairs) as f64 / s.pairs as f64
                } else {
                    0.0
                };
                let top = r.motifs.first();
                println!(
                    "| {name} | {} | {} | {} | {} (asked {:?}) | {:.3} | {} | {} | {} | {:.6} | {} | {} | {:.6} | {verified} |",
                    r.n,
                    r.m,
                    r.device,
                    r.method.as_str(),
                    method,
                    median(times),
                    s.pairs,
                    s.lower_bounds,
                    s.distances,
                    pruned,
                    top.map_or(0, |m| m.i),
                    top.map_or(0, |m| m.j),
                    top.map_or(f64::NAN, |m| m.distance),
                );
            }
        }
    }
    Ok(())
}
