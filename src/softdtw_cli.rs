//! `synfire softdtw` and `synfire barycenter` (binary only): argument definitions and thin
//! handlers over [`synfire::softdtw`].

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::series::{Dataset, read_dataset};
use synfire::softdtw::report::{BarycenterReport, PairwiseReport, measure_name, series_json};
use synfire::softdtw::{
    BarycenterOptions, Init, Measure, Options, barycenter_on, gpu, pairwise, pairwise_gradient,
};

use crate::cli::DeviceArg;

/// Output formats of the soft-DTW commands.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OutFormat {
    /// One JSON document (see `docs/softdtw.md`).
    Json,
    /// Tab-separated numbers: the values matrix, or the barycenter one time step per line.
    Text,
}

/// `synfire softdtw`.
#[derive(Debug, Args)]
pub struct SoftDtwArgs {
    /// First collection (rows of the result): UCR `.ts`/`.tsv`/`.txt` or `.npy` `[B, L(, D)]`.
    a: PathBuf,
    /// Second collection (columns of the result), same formats.
    b: PathBuf,
    /// Smoothing γ > 0 (squared units of the series).
    #[arg(long, allow_hyphen_values = true)]
    gamma: f64,
    /// Sakoe-Chiba half-width in time steps of the longer series of each pair.
    #[arg(long)]
    band: Option<usize>,
    /// Also output `grad_a[i] = ∂(Σ_j values[i][j])/∂A_i` and
    /// `grad_b[j] = ∂(Σ_i values[i][j])/∂B_j`.
    #[arg(long)]
    grad: bool,
    /// Compute soft-DTW divergences `sdtw(a, b) − (sdtw(a, a) + sdtw(b, b))/2` instead of values.
    #[arg(long)]
    divergence: bool,
    /// Where to compute: `auto` (a GPU when one is usable, else the CPU), `cpu` (f64
    /// reference) or `gpu` (f32 kernels, see docs/softdtw.md).
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    device: DeviceArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Json)]
    format: OutFormat,
    /// Write the result here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

/// `--init` of `synfire barycenter`.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum InitArg {
    /// The mean when all series have one length, else the medoid.
    Auto,
    /// The arithmetic mean (equal lengths).
    Mean,
    /// The medoid under soft-DTW.
    Medoid,
}

/// `synfire barycenter`.
#[derive(Debug, Args)]
pub struct BarycenterArgs {
    /// The collection: UCR `.ts`/`.tsv`/`.txt` or `.npy` `[B, L(, D)]`.
    data: PathBuf,
    /// Smoothing γ > 0.
    #[arg(long, allow_hyphen_values = true)]
    gamma: f64,
    /// Sakoe-Chiba half-width.
    #[arg(long)]
    band: Option<usize>,
    /// At most this many L-BFGS iterations.
    #[arg(long, default_value_t = 100)]
    iterations: usize,
    /// Only the series with this class label (as the file writes it; integral labels are
    /// normalised, e.g. `1.0e+00` → `1`).
    #[arg(long)]
    label: Option<String>,
    /// Where the optimisation starts.
    #[arg(long, value_enum, default_value_t = InitArg::Auto)]
    init: InitArg,
    /// Where the objective's gradients are computed: `auto` (a GPU when one is usable, else
    /// the CPU), `cpu` (f64) or `gpu` (f32 kernels).
    #[arg(long, value_enum, default_value_t = DeviceArg::Auto)]
    device: DeviceArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = OutFormat::Json)]
    format: OutFormat,
    /// Write the result here instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

fn read(path: &Path) -> Result<Dataset> {
    // The reader's errors already name the file (and line).
    Ok(read_dataset(path)?)
}

fn writer(output: Option<&Path>) -> Result<Box<dyn Write>> {
    Ok(match output {
        Some(path) => {
            Box::new(BufWriter::new(File::create(path).with_context(|| {
                format!("creating `--output` file {}", path.display())
            })?))
        }
        None => Box::new(BufWriter::new(io::stdout().lock())),
    })
}

/// Runs `synfire softdtw`.
///
/// # Errors
/// Unreadable inputs, invalid settings, or soft-DTW errors, naming the file (`a[i]` is series
/// `i` of A).
pub fn run_softdtw(args: &SoftDtwArgs) -> Result<()> {
    let a = read(&args.a)?;
    let b = read(&args.b)?;
    let opts = Options {
        band: args.band,
        ..Options::new(args.gamma)
    };
    let measure = if args.divergence {
        Measure::Divergence
    } else {
        Measure::SoftDtw
    };
    let context = || {
        format!(
            "soft-DTW of a = {} against b = {}",
            args.a.display(),
            args.b.display()
        )
    };
    let worker = gpu::worker_for(args.device.into())?;
    let (values, grads) = match (&worker, args.grad) {
        (None, true) => {
            let g =
                pairwise_gradient(&a.series, &b.series, &opts, measure).with_context(context)?;
            (g.values, Some((g.grad_a, g.grad_b)))
        }
        (None, false) => (
            pairwise(&a.series, &b.series, &opts, measure).with_context(context)?,
            None,
        ),
        (Some(w), true) => {
            let g = gpu::pairwise_gradient(w, &a.series, &b.series, &opts, measure)
                .with_context(context)?;
            (g.values, Some((g.grad_a, g.grad_b)))
        }
        (Some(w), false) => (
            gpu::pairwise(w, &a.series, &b.series, &opts, measure).with_context(context)?,
            None,
        ),
    };
    let dims = a.series.first().or(b.series.first()).map_or(1, |s| s.dims);
    let mut out = writer(args.output.as_deref())?;
    match args.format {
        OutFormat::Json => {
            let as_json = |g: Vec<Vec<f64>>| g.iter().map(|v| series_json(dims, v)).collect();
            let report = PairwiseReport {
                gamma: args.gamma,
                band: args.band,
                measure: measure_name(measure),
                dims,
                values,
                grad_a: grads.as_ref().map(|(ga, _)| as_json(ga.clone())),
                grad_b: grads.map(|(_, gb)| as_json(gb)),
            };
            serde_json::to_writer(&mut out, &report)?;
            writeln!(out)?;
        }
        OutFormat::Text => {
            for row in &values {
                let line: Vec<String> = row.iter().map(f64::to_string).collect();
                writeln!(out, "{}", line.join("\t"))?;
            }
        }
    }
    out.flush().context("writing the result")
}

/// Runs `synfire barycenter`.
///
/// # Errors
/// Unreadable input, no series (with `--label`), invalid settings, or soft-DTW errors.
pub fn run_barycenter(args: &BarycenterArgs) -> Result<()> {
    let data = read(&args.data)?;
    let set: Vec<_> = match (&args.label, &data.labels) {
        (None, _) => data.series,
        (Some(_), None) => anyhow::bail!(
            "{}: `--label` given but the file has no labels",
            args.data.display()
        ),
        (Some(want), Some(labels)) => {
            let set: Vec<_> = data
                .series
                .into_iter()
                .zip(labels)
                .filter(|(_, l)| *l == want)
                .map(|(s, _)| s)
                .collect();
            if set.is_empty() {
                let mut known: Vec<&String> = labels.iter().collect();
                known.sort();
                known.dedup();
                anyhow::bail!(
                    "{}: no series labelled `{want}` (labels: {known:?})",
                    args.data.display()
                );
            }
            set
        }
    };
    let mut opts = BarycenterOptions::new(args.gamma);
    opts.soft.band = args.band;
    opts.max_iterations = args.iterations;
    opts.init = match args.init {
        InitArg::Auto => Init::Auto,
        InitArg::Mean => Init::Mean,
        InitArg::Medoid => Init::Medoid,
    };
    let worker = gpu::worker_for(args.device.into())?;
    let b = barycenter_on(&set, &opts, worker.as_deref())
        .with_context(|| format!("barycenter of {}", args.data.display()))?;
    tracing::info!(
        series = set.len(),
        iterations = b.iterations,
        stop = ?b.stop,
        gradient_norm = b.gradient_norm,
        "Barycenter computed."
    );
    let mut out = writer(args.output.as_deref())?;
    match args.format {
        OutFormat::Json => {
            serde_json::to_writer(
                &mut out,
                &BarycenterReport::new(&b, args.gamma, args.band, set.len()),
            )?;
            writeln!(out)?;
        }
        OutFormat::Text => {
            for step in b.series.values.chunks(b.series.dims.max(1)) {
                let line: Vec<String> = step.iter().map(f64::to_string).collect();
                writeln!(out, "{}", line.join("\t"))?;
            }
        }
    }
    out.flush().context("writing the result")
}

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
pub fn bench(args: &BenchSoftDtwArgs) -> Result<()> {
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
    println!(
        "| workload | device | pairs | cells | seconds (median of {}) | cells/s | verified |",
        args.repeat
    );
    println!("|---|---|---:|---:|---:|---:|---|");
    let cells = |pairs: usize, n: usize, m: usize| (pairs * n * m) as f64;
    let row = |work: &str, device: &str, pairs: usize, c: f64, s: f64, ok: &str| {
        println!(
            "| {work} | {device} | {pairs} | {c:.3e} | {s:.4} | {:.3e} | {ok} |",
            c / s
        );
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
                &format!("{work} {k}x{k}, L={}", args.length),
                "cpu f64",
                k * k,
                cells(k * k, args.length, args.length),
                median(t),
                "reference",
            );
        }
    }
    if !want_gpu {
        return Ok(());
    }
    let w = gpu::worker_for(synfire::device::DeviceChoice::Gpu)?
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
        let mut out = None;
        for _ in 0..=args.repeat {
            let o = w.softdtw_batch(job.clone()).wait()?;
            t.push(o.kernel_ms / 1e3);
            out = Some(o);
        }
        t.remove(0);
        let out = out.expect("at least one run");
        let ok = (0..k).all(|i| {
            (0..k).all(|j| {
                let (g, c) = (out.values[i * args.batch + j], cpu[i][j]);
                (g - c).abs() <= 1e-4 * c.abs().max(1.0)
            })
        });
        let work = if gradient {
            "forward+backward"
        } else {
            "forward"
        };
        row(
            &format!("{work} {0}x{0}, L={1}", args.batch, args.length),
            "gpu f32",
            pairs,
            cells(pairs, args.length, args.length),
            median(t),
            if ok { "yes (8x8 vs CPU)" } else { "NO" },
        );
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
                &format!("forward 1 pair, L={n}"),
                "cpu f64",
                1,
                cells(1, n, n),
                s,
                "reference",
            );
        }
        row(
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
        );
        anyhow::ensure!(ok, "GPU long-pair value differs from the CPU reference");
    }
    println!(
        "\nGPU: {} (kernel time by CUDA events, after one warm-up run)",
        w.info().name
    );
    Ok(())
}
