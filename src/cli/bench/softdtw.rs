//! `synfire bench softdtw`: soft-DTW cells per second, CPU (f64) against GPU (f32).

use anyhow::Result;
use clap::Args;
use std::io::Write;
use synfire::softdtw::{Measure, Options, gpu, pairwise, pairwise_gradient};

use crate::cli::args::OutputArg;

/// `synfire bench softdtw`.
#[derive(Debug, Args)]
pub struct BenchSoftDtwArgs {
    /// Series per set of the batch (all pairs: the square of this).
    #[arg(long, default_value_t = 1024)]
    batch: usize,
    /// Length of the batch's series.
    #[arg(long, default_value_t = 256)]
    length: usize,
    /// Length of the long pair (0: skip it).
    #[arg(long, default_value_t = 65_536)]
    long: usize,
    /// Smoothing γ.
    #[arg(long, default_value_t = 1.0)]
    gamma: f64,
    /// Devices to time: cpu, gpu or all.
    #[arg(long, default_value = "all")]
    device: String,
    /// Timed repetitions after one warm-up (median reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Series per set the CPU batch uses (its time scales with the square).
    #[arg(long, default_value_t = 32)]
    cpu_batch: usize,
    /// Seed of the random walks.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    #[command(flatten)]
    output: OutputArg,
}

fn walks(
    rng: &mut rand_chacha::ChaCha8Rng,
    count: usize,
    len: usize,
) -> Vec<synfire::series::Series> {
    use rand::Rng;
    (0..count)
        .map(|_| {
            let mut acc = 0.0;
            synfire::series::Series::univariate(
                (0..len)
                    .map(|_| {
                        acc += rng.random_range(-0.5..0.5);
                        acc
                    })
                    .collect(),
            )
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `synfire bench softdtw`: forward and forward+backward cells per second on a batch of
/// all pairs of two sets of random walks, and forward on one long pair, on the CPU (f64,
/// rayon, a smaller batch) and the GPU (kernel time by CUDA events), side by side. Every GPU
/// value is checked against the CPU reference on a sub-block (1e-4 relative).
///
/// # Errors
/// `--device gpu` without a GPU, or a soft-DTW error.
pub fn run(args: &BenchSoftDtwArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    use rand::SeedableRng;
    use std::time::Instant;
    use synfire::device::softdtw::{PairMode, SeriesSet, SoftDtwBatch};
    anyhow::ensure!(args.repeat >= 1, "`--repeat` must be at least 1");
    anyhow::ensure!(
        args.batch >= 1 && args.length >= 1,
        "`--batch` and `--length` must be at least 1"
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let a = walks(&mut rng, args.batch, args.length);
    let b = walks(&mut rng, args.batch, args.length);
    let opts = Options::new(args.gamma);
    let want_cpu = args.device == "all" || args.device == "cpu";
    let want_gpu = args.device == "all" || args.device == "gpu";
    writeln!(
        out,
        "| workload | device | pairs | cells | seconds (median of {}) | cells/s | verified |",
        args.repeat
    )?;
    writeln!(out, "|---|---|---:|---:|---:|---:|---|")?;
    let cells = |pairs: usize, n: usize, m: usize| (pairs * n * m) as f64;
    let row = |out: &mut dyn Write,
               work: &str,
               device: &str,
               pairs: usize,
               c: f64,
               s: f64,
               ok: &str|
     -> std::io::Result<()> {
        writeln!(
            out,
            "| {work} | {device} | {pairs} | {c:.3e} | {s:.4} | {:.3e} | {ok} |",
            c / s
        )
    };
    if want_cpu {
        let k = args.cpu_batch.min(args.batch);
        let (ca, cb) = (&a[..k], &b[..k]);
        for gradient in [false, true] {
            let mut t = Vec::new();
            for _ in 0..=args.repeat {
                let s = Instant::now();
                if gradient {
                    pairwise_gradient(ca, cb, &opts, Measure::SoftDtw)?;
                } else {
                    pairwise(ca, cb, &opts, Measure::SoftDtw)?;
                }
                t.push(s.elapsed().as_secs_f64());
            }
            t.remove(0); // warm-up
            let work = if gradient {
                "forward+backward"
            } else {
                "forward"
            };
            row(
                &mut *out,
                &format!("{work} {k}x{k}, L={}", args.length),
                "cpu f64",
                k * k,
                cells(k * k, args.length, args.length),
                median(t),
                "reference",
            )?;
        }
    }
    if !want_gpu {
        out.flush()?;
        return Ok(());
    }
    let w = gpu::worker_on(synfire::device::DeviceChoice::Gpu)?
        .expect("Gpu gives a worker or an error");
    let pack = |s: &[synfire::series::Series]| SeriesSet {
        values: s
            .iter()
            .flat_map(|x| x.values.iter().map(|&v| v as f32))
            .collect(),
        offsets: (0..=s.len()).map(|i| (i * args.length) as u32).collect(),
    };
    let (sa, sb) = (pack(&a), pack(&b));
    // Reference for the check: the CPU on the first 8 x 8 pairs.
    let k = 8.min(args.batch);
    let cpu = pairwise(&a[..k], &b[..k], &opts, Measure::SoftDtw)?;
    let pairs = args.batch * args.batch;
    for gradient in [false, true] {
        let job = std::sync::Arc::new(SoftDtwBatch {
            a: sa.clone(),
            b: sb.clone(),
            dims: 1,
            mode: PairMode::AllPairs,
            gamma: args.gamma,
            band: None,
            gradient,
        });
        let mut t = Vec::new();
        let mut last = None;
        for _ in 0..=args.repeat {
            let o = w.softdtw_batch(job.clone()).wait()?;
            t.push(o.kernel_ms / 1e3);
            last = Some(o);
        }
        t.remove(0);
        let batch_out = last.expect("at least one run");
        let ok = (0..k).all(|i| {
            (0..k).all(|j| {
                let (g, c) = (batch_out.values[i * args.batch + j], cpu[i][j]);
                (g - c).abs() <= 1e-4 * c.abs().max(1.0)
            })
        });
        let work = if gradient {
            "forward+backward"
        } else {
            "forward"
        };
        row(
            &mut *out,
            &format!("{work} {0}x{0}, L={1}", args.batch, args.length),
            "gpu f32",
            pairs,
            cells(pairs, args.length, args.length),
            median(t),
            if ok { "yes (8x8 vs CPU)" } else { "NO" },
        )?;
        anyhow::ensure!(ok, "GPU values differ from the CPU reference");
    }
    if args.long > 0 {
        let x = walks(&mut rng, 1, args.long).remove(0);
        let y = walks(&mut rng, 1, args.long).remove(0);
        let mut t = Vec::new();
        let mut v = 0.0;
        for _ in 0..=args.repeat {
            let (val, ms) = gpu::value_long(&w, &x, &y, &opts)?;
            t.push(ms / 1e3);
            v = val;
        }
        t.remove(0);
        let (ok, cpu_s) = if want_cpu {
            let s = Instant::now();
            let c = synfire::softdtw::value(&x, &y, &opts)?;
            let secs = s.elapsed().as_secs_f64();
            ((v - c).abs() <= 1e-4 * c.abs().max(1.0), Some(secs))
        } else {
            (true, None)
        };
        let n = args.long;
        if let Some(s) = cpu_s {
            row(
                &mut *out,
                &format!("forward 1 pair, L={n}"),
                "cpu f64",
                1,
                cells(1, n, n),
                s,
                "reference",
            )?;
        }
        row(
            &mut *out,
            &format!("forward 1 pair, L={n}"),
            "gpu f32",
            1,
            cells(1, n, n),
            median(t),
            if cpu_s.is_none() {
                "not checked"
            } else if ok {
                "yes"
            } else {
                "NO"
            },
        )?;
        anyhow::ensure!(ok, "GPU long-pair value differs from the CPU reference");
    }
    writeln!(
        out,
        "\nGPU: {} (kernel time by CUDA events, after one warm-up run)",
        w.info().name
    )?;
    out.flush()?;
    Ok(())
}
