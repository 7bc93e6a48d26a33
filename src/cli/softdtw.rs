//! `synfire softdtw` and `synfire barycenter`: argument definitions and thin handlers over
//! [`synfire::softdtw`].

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::series::{Dataset, read_dataset};
use synfire::softdtw::report::{BarycenterReport, PairwiseReport, measure_name, series_json};
use synfire::softdtw::{
    BarycenterOptions, Init, Measure, Options, barycenter, gpu, pairwise, pairwise_gradient,
};

use crate::cli::args::{DeviceArgs, FormatArg, OutputArg};

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
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    ///
    /// `text`: tab-separated numbers (the values matrix, or the barycenter one time step per
    /// line); `json`: one JSON document (see `docs/softdtw.md`).
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
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
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    ///
    /// `text`: tab-separated numbers (the values matrix, or the barycenter one time step per
    /// line); `json`: one JSON document (see `docs/softdtw.md`).
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
}

fn read(path: &Path) -> Result<Dataset> {
    // The reader's errors already name the file (and line).
    Ok(read_dataset(path)?)
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
    let worker = gpu::worker_on(args.device.single("softdtw")?)?;
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
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => {
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
        FormatArg::Text => {
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
    let worker = gpu::worker_on(args.device.single("barycenter")?)?;
    let b = match &worker {
        Some(w) => gpu::barycenter(w, &set, &opts),
        None => barycenter(&set, &opts),
    }
    .with_context(|| format!("barycenter of {}", args.data.display()))?;
    tracing::info!(
        series = set.len(),
        iterations = b.iterations,
        stop = ?b.stop,
        gradient_norm = b.gradient_norm,
        "Barycenter computed."
    );
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => {
            serde_json::to_writer(
                &mut out,
                &BarycenterReport::new(&b, args.gamma, args.band, set.len()),
            )?;
            writeln!(out)?;
        }
        FormatArg::Text => {
            for step in b.series.values.chunks(b.series.dims.max(1)) {
                let line: Vec<String> = step.iter().map(f64::to_string).collect();
                writeln!(out, "{}", line.join("\t"))?;
            }
        }
    }
    out.flush().context("writing the result")
}
