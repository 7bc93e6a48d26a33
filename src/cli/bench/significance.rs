//! `synfire bench significance`: significance testing against surrogates on the benchmark
//! workloads, one table row per (workload, procedure): episodes tested and significant,
//! seconds, surrogates per second.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use clap::Args;
use synfire::episode::mine;
use synfire::significance::{Correction, SignificanceConfig, test_episodes};

use crate::cli::args::{OutputArg, Workload};

/// Options of `synfire bench significance`.
#[derive(Debug, Args)]
pub struct SignificanceArgs {
    /// Workloads, comma-separated (as `bench episodes`: `neuropixels` and `ibl` at 0–5, 5–10,
    /// 10–20 ms, 0.2/s).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Workload::Neuropixels, Workload::Ibl])]
    workload: Vec<Workload>,
    /// Procedures, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [Correction::MaxT, Correction::Spectrum], value_parser = parse_correction)]
    correction: Vec<Correction>,
    /// Surrogate method (`--surrogates` of `mine`).
    #[arg(long, default_value = "dither:0.015")]
    surrogates: String,
    /// Number of surrogates.
    #[arg(long, default_value_t = 1000)]
    n_surrogates: usize,
    /// Largest episode size (the workloads' own is 4).
    #[arg(long)]
    max_level: Option<usize>,
    /// Seed of the synthetic workloads.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The real session (NWB) for `a2929`.
    #[arg(long, default_value = "fixtures/spikes/A2929-200711/A2929-200711.nwb")]
    fixture: PathBuf,
    #[command(flatten)]
    output: OutputArg,
}

fn parse_correction(s: &str) -> Result<Correction, String> {
    s.parse()
}

/// Runs the benchmark.
///
/// # Errors
/// Unreadable fixtures, bad options, mining or surrogate errors.
pub fn run(args: &SignificanceArgs) -> Result<()> {
    let method: synfire::significance::SurrogateMethod = args
        .surrogates
        .parse()
        .map_err(|e| anyhow::anyhow!("`--surrogates`: {e}"))?;
    let mut out = args.output.writer()?;
    writeln!(
        out,
        "synfire bench significance: {} surrogates ({}), CPU on {} threads",
        args.n_surrogates,
        args.surrogates,
        rayon::current_num_threads()
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "| workload | max level | correction | frequent (level ≥ 2) | significant | mining s | testing s | surrogates/s |"
    )?;
    writeln!(out, "|---|---:|---|---:|---:|---:|---:|---:|")?;
    for &w in &args.workload {
        let (name, stream) = w.stream(args.seed, &args.fixture)?;
        let mut config = w.config();
        if let Some(k) = args.max_level {
            config.max_level = k;
        }
        let started = Instant::now();
        let data = mine(&stream, &config)?;
        let mining_s = started.elapsed().as_secs_f64();
        for &correction in &args.correction {
            let sig = SignificanceConfig {
                method: method.clone(),
                n_surrogates: args.n_surrogates,
                alpha: 0.05,
                correction,
                seed: 0,
                test_top: None,
                watch: None,
                trials: None,
            };
            let started = Instant::now();
            let r = test_episodes(&stream, &config, &data, &sig)?;
            let testing_s = started.elapsed().as_secs_f64();
            writeln!(
                out,
                "| {name} | {} | {correction} | {} | {} | {mining_s:.3} | {testing_s:.3} | {:.2} |",
                config.max_level,
                r.tests.len(),
                r.tests.iter().filter(|t| t.stats.significant).count(),
                args.n_surrogates as f64 / testing_s
            )?;
            out.flush()?;
        }
    }
    Ok(())
}
