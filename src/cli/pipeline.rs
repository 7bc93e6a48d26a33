//! `synfire run` and `synfire validate`: pipeline files (sources → windows → stages → sinks).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::cli::args::OutputArg;

/// Options of `synfire run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The pipeline file (TOML).
    pipeline: PathBuf,
    /// Serve Prometheus metrics on this address, e.g. `127.0.0.1:9100` (`GET /metrics`).
    #[arg(long)]
    metrics: Option<std::net::SocketAddr>,
    /// Serve the live view on this address, e.g. `127.0.0.1:8080` (a browser page: rasters
    /// with occurrences, top episodes, drops, latency; overrides `[pipeline] ui`). Loopback
    /// unless you name another interface; docs/live-view.md.
    #[arg(long, value_name = "ADDR")]
    ui: Option<std::net::SocketAddr>,
    /// Seconds of each raster in the live view (default 10; overrides `[pipeline] ui_span_s`).
    #[arg(long, value_name = "SECONDS")]
    ui_span_s: Option<f64>,
}

/// Options of `synfire validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Pipeline files (TOML).
    #[arg(required = true)]
    pipelines: Vec<PathBuf>,
    #[command(flatten)]
    output: OutputArg,
}

/// Runs `synfire run`: the pipeline until its sources end or SIGINT/SIGTERM.
///
/// # Errors
/// An invalid pipeline file, a component that fails to start or run, or a sink whose
/// writes failed (`on_error = "stop"`: [`synfire::live::LiveError::SinkFailed`], naming it
/// and the results lost).
pub fn run(args: &RunArgs) -> Result<()> {
    let config = synfire::live::config::PipelineConfig::load(&args.pipeline)?;
    let summary = synfire::live::run(
        &config,
        synfire::live::RunOptions {
            metrics: args.metrics,
            ui: args.ui,
            ui_span_s: args.ui_span_s,
            handle_signals: true,
            ..Default::default()
        },
    )?;
    let results: u64 = summary.sinks.values().sum();
    let lost: u64 = summary.sinks_lost.values().sum();
    tracing::info!(results, lost, "Pipeline finished.");
    summary.check()?;
    Ok(())
}

/// Runs `synfire validate`: one line per valid file, every error of the others.
///
/// # Errors
/// At least one file has errors, or `--output` cannot be written.
pub fn validate(args: &ValidateArgs) -> Result<()> {
    let mut out = args.output.line_writer()?;
    let mut failed = 0;
    for p in &args.pipelines {
        match synfire::live::config::PipelineConfig::load(p) {
            Ok(c) => writeln!(
                out,
                "{}: ok ({} sources, {} windows, {} stages, {} sinks)",
                p.display(),
                c.sources.len(),
                c.windows.len(),
                c.stages.len(),
                c.sinks.len()
            )?,
            Err(e) => {
                failed += 1;
                eprintln!("{e}");
            }
        }
    }
    out.flush().context("writing the result")?;
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} pipeline files have errors",
            args.pipelines.len()
        );
    }
    Ok(())
}
