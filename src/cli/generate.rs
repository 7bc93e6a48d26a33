//! `synfire generate`: a seeded synthetic spike train written as CSV or NWB.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::ingest;
use synfire::synth::{self, SynthParams};

use crate::cli::args::SessionArgs;

/// Options of `synfire generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Which synthetic workload: `sym26` (the paper's §7.1 benchmark, 26 neurons, 60 s, about
    /// 51,500 events), `mea64` (64 channels, 530 s, about 10^6 events), `neuropixels` (300
    /// units, 120 s, log-normal rates, about 125,000 spikes; `synfire::synth::dense`) or
    /// `session` (1,000 units, 3,600 s, about 23 million spikes, six chains activated at 1 Hz;
    /// the options below change it).
    #[arg(value_enum)]
    preset: Preset,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file; its format follows `--format`. NWB stores units by integer id, so neuron
    /// `A` is unit 0, `B` unit 1, and so on; CSV keeps the letters.
    #[arg(long, short)]
    output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FileFormat::Csv)]
    format: FileFormat,
    /// The `session` preset's options.
    #[command(flatten)]
    session: SessionArgs,
}

/// Synthetic workloads.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Preset {
    /// The paper's Sym26 benchmark.
    Sym26,
    /// A 64-channel, 10^6-event workload.
    Mea64,
    /// A dense, Neuropixels-like 300-unit, 120 s workload.
    Neuropixels,
    /// A 1,000-unit, one-hour session with planted chains (`--units`, `--seconds`, … change
    /// it).
    Session,
}

impl Preset {
    /// The stream of this preset.
    ///
    /// # Errors
    /// The generator refuses its parameters (never for the built-in presets).
    pub fn stream(self, seed: u64) -> Result<synfire::event::EventStream, synth::SynthError> {
        match self {
            Self::Sym26 => synth::generate(&SynthParams::sym26(seed)),
            Self::Mea64 => synth::generate(&SynthParams::mea64(seed)),
            Self::Neuropixels => {
                synth::generate_dense(&synth::DenseParams::neuropixels(seed)).map(|(s, _)| s)
            }
            Self::Session => {
                synth::generate_dense(&synth::DenseParams::session(seed)).map(|(s, _)| s)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum FileFormat {
    Csv,
    Nwb,
}

/// Runs `synfire generate`.
///
/// # Errors
/// The generator's settings are refused, or the output file cannot be written (named).
pub fn run(args: &GenerateArgs) -> Result<()> {
    let stream = if args.preset == Preset::Session {
        let params = args
            .session
            .params(args.seed)
            .context("the session's options")?;
        synth::generate_dense(&params)
            .context("the session's options")?
            .0
    } else {
        if args.session.any_given() {
            anyhow::bail!(
                "`--units`, `--seconds`, `--rate-median-hz` and the other session options apply to the `session` preset only, not `{}`",
                args.preset
                    .to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            );
        }
        args.preset.stream(args.seed)?
    };
    write_stream(&args.output, &stream, args.format)?;
    tracing::info!(
        output = %args.output.display(),
        events = stream.len(),
        span_s = stream.span(),
        "Wrote synthetic stream."
    );
    Ok(())
}

fn write_stream(
    path: &Path,
    stream: &synfire::event::EventStream,
    format: FileFormat,
) -> Result<()> {
    match format {
        FileFormat::Nwb => ingest::nwb::write_units(path, stream)?,
        FileFormat::Csv => {
            let file =
                File::create(path).with_context(|| format!("creating {}", path.display()))?;
            let mut w = BufWriter::new(file);
            ingest::csv::write_csv(&mut w, stream)
                .with_context(|| format!("writing {}", path.display()))?;
            w.flush()
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}
