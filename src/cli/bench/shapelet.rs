//! `synfire bench shapelet`: shapelet trees on the UCR sets, CPU against GPU.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use synfire::device::DeviceChoice;
use synfire::shapelet::{ShapeletConfig, ShapeletTree, TrainingSet, train};

use crate::cli::args::{OutputArg, read_labelled};

/// `synfire bench shapelet`.
#[derive(Debug, Args)]
pub struct BenchShapeletArgs {
    /// Devices to time: cpu, gpu or all.
    #[arg(long, default_value = "all")]
    device: String,
    /// Timed GPU runs after one warm-up (the median is reported).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Timed CPU runs (no warm-up; the median is reported).
    #[arg(long, default_value_t = 1)]
    cpu_repeat: usize,
    /// Folder with `<Name>/<Name>_TRAIN.{ts,tsv,txt}` and `_TEST` beside it.
    #[arg(long, default_value = "fixtures/ucr")]
    datasets: PathBuf,
    /// Data sets (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "Coffee,GunPoint,ECG200,ItalyPowerDemand"
    )]
    names: Vec<String>,
    /// Shortest length (every length up to the series length, step 1, is searched).
    #[arg(long, default_value_t = 2)]
    min_length: usize,
    #[command(flatten)]
    output: OutputArg,
}

/// Published test accuracy of the shapelet transform on the default splits
/// (`../shared/DESIGN.md` §4).
fn published(name: &str) -> Option<f64> {
    match name {
        "Coffee" => Some(0.964),
        "GunPoint" => Some(1.0),
        "ECG200" => Some(0.83),
        "ItalyPowerDemand" => Some(0.948),
        _ => None,
    }
}

fn split_file(dir: &Path, name: &str, split: &str) -> Result<PathBuf> {
    for ext in ["ts", "tsv", "txt"] {
        let p = dir.join(name).join(format!("{name}_{split}.{ext}"));
        if p.exists() {
            return Ok(p);
        }
    }
    anyhow::bail!(
        "no {}/{name}/{name}_{split}.ts, .tsv or .txt",
        dir.display()
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Runs `synfire bench shapelet` and prints a table.
///
/// # Errors
/// Missing or unusable data sets, a GPU failure, or a GPU tree that differs from the CPU tree.
pub fn run(args: &BenchShapeletArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    let cpu = args.device == "all" || args.device == "cpu";
    let mut gpu = args.device == "all" || args.device == "gpu";
    anyhow::ensure!(
        cpu || gpu,
        "`--device` must be cpu, gpu or all, got `{}`",
        args.device
    );
    if args.device == "all"
        && let Err(e) = synfire::device::probe()
    {
        tracing::info!(reason = %e, "No usable GPU; timing the CPU only.");
        gpu = false;
    }
    anyhow::ensure!(
        args.repeat >= 1 && args.cpu_repeat >= 1,
        "`--repeat` and `--cpu-repeat` must be at least 1"
    );
    writeln!(
        out,
        "| data set | N | L | candidates | nodes | CPU s (median of {}) | GPU s (median of {}) | GPU kernel ms | speedup | same tree | train acc | test acc | published (shapelet transform) |",
        args.cpu_repeat, args.repeat
    )?;
    writeln!(
        out,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
    )?;
    for name in &args.names {
        let train_path = split_file(&args.datasets, name, "TRAIN")?;
        let test_path = split_file(&args.datasets, name, "TEST")?;
        let (series, labels) = read_labelled(&train_path)?;
        let set = TrainingSet::new(&series, &labels, &train_path.display().to_string())?;
        let (test_series, test_labels) = read_labelled(&test_path)?;
        let cfg = ShapeletConfig::new(args.min_length, set.length);
        let time = |device: DeviceChoice, runs: usize| -> Result<(f64, ShapeletTree, f64)> {
            let mut times = Vec::new();
            let mut last = None;
            for _ in 0..runs {
                let t = Instant::now();
                let (tree, _) = train(&set, &cfg, device)?;
                times.push(t.elapsed().as_secs_f64());
                last = Some(tree);
            }
            let tree = last.context("no run")?;
            let kernel_ms = if device == DeviceChoice::Gpu {
                kernel_ms(&set, &cfg)?
            } else {
                f64::NAN
            };
            Ok((median(times), tree, kernel_ms))
        };
        let cpu_run = if cpu {
            Some(time(DeviceChoice::Cpu, args.cpu_repeat)?)
        } else {
            None
        };
        let gpu_run = if gpu {
            train(&set, &cfg, DeviceChoice::Gpu).with_context(|| format!("{name}: GPU warm-up"))?;
            Some(time(DeviceChoice::Gpu, args.repeat)?)
        } else {
            None
        };
        let tree = gpu_run
            .as_ref()
            .or(cpu_run.as_ref())
            .map(|r| r.1.clone())
            .context("no run")?;
        let same = match (&cpu_run, &gpu_run) {
            (Some(c), Some(g)) => {
                anyhow::ensure!(c.1 == g.1, "{name}: the GPU tree differs from the CPU tree");
                "yes"
            }
            _ => "-",
        };
        let train_acc = tree.accuracy(&series, &labels, name)?;
        let test_acc = tree.accuracy(&test_series, &test_labels, name)?;
        let secs = |r: &Option<(f64, ShapeletTree, f64)>| {
            r.as_ref()
                .map_or_else(|| "-".to_owned(), |r| format!("{:.4}", r.0))
        };
        let speedup = match (&cpu_run, &gpu_run) {
            (Some(c), Some(g)) => format!("{:.0}x", c.0 / g.0),
            _ => "-".into(),
        };
        writeln!(
            out,
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {speedup} | {same} | {train_acc:.3} | {test_acc:.3} | {} |",
            set.len(),
            set.length,
            cfg.candidates(set.len(), set.length),
            tree.nodes.len(),
            secs(&cpu_run),
            secs(&gpu_run),
            gpu_run
                .as_ref()
                .map_or_else(|| "-".to_owned(), |r| format!("{:.2}", r.2)),
            published(name).map_or_else(|| "-".to_owned(), |p| format!("{p:.3}")),
        )?;
    }
    out.flush()?;
    Ok(())
}

/// Kernel milliseconds of one GPU training run (CUDA events, summed over the nodes).
fn kernel_ms(set: &TrainingSet, cfg: &ShapeletConfig) -> Result<f64> {
    let mut search = synfire::shapelet::gpu::GpuSearch::start()?;
    synfire::shapelet::train_with(set, cfg, &mut search)?;
    Ok(search.kernel_ms)
}
