//! `synfire generate`: a seeded synthetic spike train written as CSV or NWB.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use synfire::ingest;
use synfire::synth::{self, SynthParams};

/// Options of `synfire generate`.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Which synthetic workload: `sym26` (the paper's §7.1 benchmark, 26 neurons, 60 s, about
    /// 51,500 events) or `mea64` (64 channels, 700 s, about 10^6 events).
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
}

/// Synthetic workloads.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Preset {
    /// The paper's Sym26 benchmark.
    Sym26,
    /// A 64-channel, 10^6-event workload.
    Mea64,
}

impl Preset {
    /// The generator parameters of this preset.
    pub fn params(self, seed: u64) -> SynthParams {
        match self {
            Self::Sym26 => SynthParams::sym26(seed),
            Self::Mea64 => SynthParams::mea64(seed),
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
    let params = args.preset.params(args.seed);
    let stream = synth::generate(&params)?;
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
