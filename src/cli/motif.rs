//! `synfire motif`: the exact top-k motifs of a series (CPU or GPU).

use std::io::Write;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::motif::{MethodChoice, MotifConfig, default_exclusion, find_motifs};

use crate::cli::args::{DeviceArgs, FormatArg, OutputArg};

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
    #[command(flatten)]
    device: DeviceArgs,
    /// Output format.
    ///
    /// `text`: a short table; `json`: one JSON object.
    #[arg(long, value_enum, default_value_t = FormatArg::Json)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
}

/// Runs `synfire motif`.
///
/// # Errors
/// Unreadable input, bad options, a GPU failure with `--device gpu`, or an unwritable
/// `--output`.
pub fn run(args: &MotifArgs) -> Result<()> {
    let target = args.device.single("motif")?;
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
    let r = find_motifs(&x, &cfg, target)
        .with_context(|| format!("motif search on `{}`", args.input))?;
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => writeln!(out, "{}", serde_json::to_string(&r)?)?,
        FormatArg::Text => {
            writeln!(
                out,
                "n = {}, m = {}, exclusion = {}, method = {}, device = {}, {:.3} s",
                r.n,
                r.m,
                r.exclusion,
                r.method.as_str(),
                r.device,
                r.stats.seconds
            )?;
            for (k, m) in r.motifs.iter().enumerate() {
                writeln!(
                    out,
                    "{:>3}  i = {:>9}  j = {:>9}  distance = {:.9}",
                    k + 1,
                    m.i,
                    m.j,
                    m.distance
                )?;
            }
        }
    }
    out.flush().context("writing the result")
}
