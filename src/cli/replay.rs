//! `synfire replay`: an archived session published live over ZeroMQ (see
//! [`synfire::live::replay`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};

/// Options of `synfire replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The archived session: NWB (units table) or a `label,time` CSV.
    input: PathBuf,
    /// Endpoint to bind, e.g. `tcp://127.0.0.1:5557`.
    #[arg(long)]
    to: String,
    /// Real time × X (e.g. 4 = four times faster); absent: as fast as possible.
    #[arg(long)]
    speed: Option<f64>,
    /// Message format: Open Ephys Event Broadcaster (raw binary header, exact times), its JSON
    /// header (times on the `--sample-rate` clock), or synfire's wire format.
    #[arg(long, value_enum, default_value_t = ReplayFormatArg::Synfire)]
    format: ReplayFormatArg,
    /// Spikes or samples per synfire-format message.
    #[arg(long, default_value_t = 4096)]
    batch: usize,
    /// Wait for this many subscribers before sending (0: send at once).
    #[arg(long, default_value_t = 1)]
    subscribers: usize,
    /// Sample clock of Open Ephys messages, Hz.
    #[arg(long, default_value_t = 30_000.0)]
    sample_rate: f64,
    /// Replay this NWB time series (e.g. `/acquisition/CompassDirection/rz`) as sensor frames
    /// instead of the units table (synfire format).
    #[arg(long)]
    series: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ReplayFormatArg {
    Openephys,
    OpenephysJson,
    Synfire,
}

/// Runs `synfire replay`.
///
/// # Errors
/// An unreadable input, an endpoint that cannot be bound, or a send failure.
pub fn run(args: &ReplayArgs) -> Result<()> {
    use synfire::live::replay::{ReplayFormat, ReplayOptions, replay};
    let stats = replay(&ReplayOptions {
        input: args.input.clone(),
        to: args.to.clone(),
        speed: args.speed,
        format: match args.format {
            ReplayFormatArg::Openephys => ReplayFormat::Openephys,
            ReplayFormatArg::OpenephysJson => ReplayFormat::OpenephysJson,
            ReplayFormatArg::Synfire => ReplayFormat::Synfire,
        },
        batch: args.batch,
        subscribers: args.subscribers,
        sample_rate_hz: args.sample_rate,
        series: args.series.clone(),
    })?;
    tracing::info!(
        events = stats.events,
        messages = stats.messages,
        seconds = stats.seconds,
        "Replay finished."
    );
    Ok(())
}
