//! `synfire shapelet`: shapelet discovery and a shapelet decision tree of labelled series
//! (CPU or GPU), its accuracy and optionally the saved model.

use std::path::PathBuf;

use std::io::Write;

use anyhow::{Context, Result};
use clap::Args;
use synfire::shapelet::report::Report;
use synfire::shapelet::{ShapeletConfig, TrainingSet, train};

use crate::cli::args::{DeviceArgs, FormatArg, OutputArg, read_labelled};

/// `synfire shapelet`.
#[derive(Debug, Args)]
pub struct ShapeletArgs {
    /// Labelled training series: UCR `.ts` (aeon/sktime), `.tsv` (UCR 2018) or `.txt` (UCR
    /// 2015: whitespace-separated, label first). All of one length, no missing values.
    train: PathBuf,
    /// Labelled test series (same formats) to report the accuracy on.
    #[arg(long)]
    test: Option<PathBuf>,
    /// Shortest candidate length, samples (at least 2).
    #[arg(long)]
    min_length: usize,
    /// Longest candidate length, samples (at most the series length).
    #[arg(long)]
    max_length: usize,
    /// Length step.
    #[arg(long, default_value_t = 1)]
    step: usize,
    /// Logical shapelets: a node's rule may join several shapelets by AND/OR while the gain
    /// improves.
    #[arg(long)]
    logical: bool,
    /// With `--logical`: shapelets per rule at most.
    #[arg(long, default_value_t = 3, requires = "logical")]
    max_terms: usize,
    /// Depth limit of the tree (root = 0; default: grow until pure or no gain).
    #[arg(long)]
    max_depth: Option<usize>,
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    ///
    /// `text`: a short table; `json`: one JSON object.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
    /// Write the trained model (JSON) here, for `synfire run` (`kind = "shapelet"`).
    #[arg(long)]
    save_model: Option<PathBuf>,
}

impl ShapeletArgs {
    fn config(&self) -> ShapeletConfig {
        ShapeletConfig {
            min_length: self.min_length,
            max_length: self.max_length,
            step: self.step,
            max_terms: if self.logical { self.max_terms } else { 1 },
            max_depth: self.max_depth,
        }
    }
}

/// Runs `synfire shapelet`.
///
/// # Errors
/// Unreadable or unusable input (named), bad options, a GPU failure with `--device gpu`, or
/// an unwritable `--output`.
pub fn run(args: &ShapeletArgs) -> Result<()> {
    let target = args.device.single("shapelet")?;
    let name = args.train.display().to_string();
    let (series, labels) = read_labelled(&args.train)?;
    let set = TrainingSet::new(&series, &labels, &name)?;
    let test = args.test.as_deref().map(read_labelled).transpose()?;
    let cfg = args.config();
    let (tree, stats) =
        train(&set, &cfg, target).with_context(|| format!("shapelet discovery on `{name}`"))?;
    let train_accuracy = tree.accuracy(&series, &labels, &name)?;
    let test_accuracy = match (&test, &args.test) {
        (Some((s, l)), Some(p)) => Some(tree.accuracy(s, l, &p.display().to_string())?),
        _ => None,
    };
    if let Some(path) = &args.save_model {
        tree.save(path)?;
    }
    let report = Report::new(&tree, stats, set.len(), train_accuracy, test_accuracy);
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => writeln!(out, "{}", serde_json::to_string(&report)?)?,
        FormatArg::Text => write_text(&mut out, &name, &set, &report)?,
    }
    out.flush().context("writing the result")
}

fn write_text(
    out: &mut dyn Write,
    name: &str,
    set: &TrainingSet,
    r: &Report,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{name}: {} series of length {}, {} classes; lengths {}..={} step {}; device {}; {} nodes; {:.3} s",
        set.len(),
        set.length,
        set.classes.len(),
        r.min_length,
        r.max_length,
        r.step,
        r.device,
        r.stats.nodes,
        r.stats.seconds
    )?;
    writeln!(
        out,
        " node depth  series  start length   threshold        gain         gap  terms"
    )?;
    for s in &r.shapelets {
        let terms: Vec<String> = s
            .terms
            .iter()
            .map(|t| {
                format!(
                    "{} ({}, {}, {})",
                    t.op.as_str(),
                    t.series,
                    t.start,
                    t.length
                )
            })
            .collect();
        writeln!(
            out,
            "{:>5} {:>5} {:>7} {:>6} {:>6} {:>11.6} {:>11.6} {:>11.6}  {}",
            s.node,
            s.depth,
            s.series,
            s.start,
            s.length,
            s.threshold,
            s.gain,
            s.gap,
            terms.join(" ")
        )?;
    }
    match r.test_accuracy {
        Some(t) => writeln!(
            out,
            "train accuracy {:.4}, test accuracy {t:.4}",
            r.train_accuracy
        )?,
        None => writeln!(out, "train accuracy {:.4}", r.train_accuracy)?,
    }
    Ok(())
}
