//! `synfire mine`: frequent serial episodes of a spike file, as tdminer text or JSON.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use synfire::episode::{LevelStats, Progress, mine_with, select_counter};
use synfire::event::Ordering;
use synfire::ingest;
use synfire::report::{self, MineReport};

use crate::cli::args::{FormatArg, MiningArgs, OutputArg};

/// Options of `synfire mine`.
#[derive(Debug, Args)]
pub struct MineArgs {
    /// Spike file: `.nwb`/`.h5`/`.hdf5` (NWB units table) or `.csv`/`.txt` (`label,time_s`).
    input: PathBuf,
    #[command(flatten)]
    mining: MiningArgs,
    /// Sort the input by time instead of rejecting an unsorted stream.
    #[arg(long)]
    sort: bool,
    /// Output format.
    ///
    /// `text`: tdminer lines (`a3-[0.004000,0.006000]-a5 : 5111`); `json`: the document of
    /// `docs/mine-json.md`.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Mine only the events at or after this time, seconds (with `--end-s`: one window of a
    /// live pipeline, built the same way: event types are the units firing in it).
    #[arg(long, requires = "end_s")]
    start_s: Option<f64>,
    /// Mine only the events before this time, seconds.
    #[arg(long, requires = "start_s")]
    end_s: Option<f64>,
}

/// Runs `synfire mine`.
///
/// # Errors
/// Bad options, an unreadable or unsorted input (named), a GPU failure with `--device gpu`,
/// or an unwritable `--output`.
pub fn run(args: &MineArgs) -> Result<()> {
    let ordering = if args.sort {
        Ordering::SortIfNeeded
    } else {
        Ordering::RequireSorted
    };
    // Checked before any work (a `--calibration` file too, whichever device ends up
    // counting).
    let (options, config, settings) = args.mining.resolve()?;
    let mut stream = ingest::read_spikes(&args.input, ordering)?;
    if let (Some(start), Some(end)) = (args.start_s, args.end_s) {
        if !(start.is_finite() && end.is_finite() && start < end) {
            anyhow::bail!("`--start-s {start}` must be before `--end-s {end}`");
        }
        stream = stream.window(start, end).with_context(|| {
            format!("{}: no events in [{start}, {end}) s", args.input.display())
        })?;
    }
    tracing::info!(
        input = %args.input.display(),
        events = stream.len(),
        event_types = stream.alphabet().len(),
        span_s = stream.span(),
        "Loaded spike stream."
    );
    let counter = select_counter(&stream, &config.intervals, options.device, &settings)
        .context("`--device gpu`")?;
    let bar = BarProgress::new(args.quiet);
    let result = mine_with(&stream, &config, counter.as_ref(), &bar)?;
    bar.finish();
    let input = args.input.display().to_string();
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Json => report::write_json(
            &mut out,
            &MineReport::new(&input, &stream, &config, &result),
        )?,
        FormatArg::Text => report::write_text(&mut out, &input, &stream, &config, &result)?,
    }
    out.flush().context("writing the result")?;
    Ok(())
}

/// A progress bar on standard error (hidden when stderr is not a terminal or with `--quiet`).
pub struct BarProgress {
    bar: ProgressBar,
}

impl BarProgress {
    /// A bar, hidden when `quiet`.
    pub fn new(quiet: bool) -> Self {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(0)
        };
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>9} [{elapsed_precise}] {wide_bar} {pos}/{len} candidates",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Self { bar }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for BarProgress {
    fn level_started(&self, level: usize, work: u64) {
        self.bar.set_prefix(format!("level {level}"));
        self.bar.set_position(0);
        self.bar.set_length(work);
    }

    fn advanced(&self, n: u64) {
        self.bar.inc(n);
    }

    fn level_finished(&self, stats: &LevelStats) {
        tracing::debug!(
            level = stats.level,
            candidates = stats.candidates,
            eliminated = stats.eliminated_by_preelim,
            frequent = stats.frequent,
            seconds = stats.seconds,
            "Level done."
        );
    }
}
