//! `synfire bench motif`: the exact motif paths timed on a seeded random walk and the ECG.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use synfire::device::DeviceChoice;
use synfire::motif::{MethodChoice, MotifConfig, MotifResult, find_motifs};

use crate::cli::args::OutputArg;
use crate::cli::motif::MethodArg;

/// `synfire bench motif`.
#[derive(Debug, Args)]
pub struct BenchMotifArgs {
    /// log2 of the random-walk length.
    #[arg(long, default_value_t = 21)]
    log2_n: u32,
    /// The random-walk length in samples (instead of `--log2-n`; e.g. 100000000).
    #[arg(long)]
    n: Option<usize>,
    /// The GPU paths to time, comma-separated (the CPU runs `auto`).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "auto,projection-join,mk,matrix-profile"
    )]
    methods: Vec<MethodArg>,
    /// Skip the ECG (time the walk only).
    #[arg(long)]
    no_ecg: bool,
    /// Subsequence length.
    #[arg(long, default_value_t = 100)]
    m: usize,
    /// Devices to time: cpu, gpu or all.
    #[arg(long, default_value = "all")]
    device: String,
    /// Timed repetitions after one warm-up (the median is reported); 0: one timed run after a
    /// warm-up on the input's first max(4,096, 4m) samples (for inputs too long to search
    /// twice).
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
    #[command(flatten)]
    output: OutputArg,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `synfire bench motif` and prints a table.
///
/// # Errors
/// Unreadable ECG, a GPU failure, or a result that differs from the reference (`--verify`).
pub fn run(args: &BenchMotifArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    anyhow::ensure!(
        (8..=31).contains(&args.log2_n),
        "`--log2-n` must be between 8 and 31 (got {})",
        args.log2_n
    );
    anyhow::ensure!(
        args.n
            .is_none_or(|n| (256..=u32::MAX as usize).contains(&n)),
        "`--n` must be between 256 and 2^32 - 1 (got {:?})",
        args.n
    );
    anyhow::ensure!(!args.methods.is_empty(), "`--methods` is empty");
    let (walk_n, walk_name) = match args.n {
        Some(n) => (n, format!("random walk {n}")),
        None => (
            1usize << args.log2_n,
            format!("random walk 2^{}", args.log2_n),
        ),
    };
    let generated = Instant::now();
    let walk = synfire::synth::random_walk(walk_n, 2026);
    tracing::info!(
        n = walk_n,
        seconds = generated.elapsed().as_secs_f64(),
        "Random walk generated."
    );
    let mut inputs = vec![(walk_name, walk)];
    if !args.no_ecg {
        let ecg = synfire::series::read_series(&args.ecg)
            .with_context(|| format!("reading `{}`", args.ecg))?;
        inputs.push(("ECG MIT-BIH 208".to_owned(), ecg));
    }
    let mut devices = Vec::new();
    if args.device == "all" || args.device == "cpu" {
        devices.push(DeviceChoice::Cpu);
    }
    if args.device == "all" || args.device == "gpu" {
        devices.push(DeviceChoice::Gpu);
    }
    writeln!(
        out,
        "| input | n | m | device | method | seconds (median of {}) | pairs | lower bounds | true distances | pruned | i | j | distance | verified |",
        args.repeat.max(1)
    )?;
    writeln!(
        out,
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    )?;
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
                args.methods.iter().map(|&m| m.into()).collect()
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
                if args.repeat == 0 {
                    // Warm-up (device start, NVRTC) on a prefix, then one timed run.
                    find_motifs(&x[..x.len().min(4096.max(4 * args.m))], &c, device)?;
                }
                let runs = if args.repeat == 0 { 1 } else { args.repeat + 1 };
                for _ in 0..runs {
                    let t = Instant::now();
                    let r = find_motifs(x, &c, device)?;
                    times.push(t.elapsed().as_secs_f64());
                    last = Some(r);
                }
                if args.repeat > 0 {
                    times.remove(0); // warm-up: device start, NVRTC, caches
                }
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
                writeln!(
                    out,
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
                )?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
