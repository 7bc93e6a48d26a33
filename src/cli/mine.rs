//! `synfire mine`: frequent serial episodes of a spike file, as tdminer text or JSON.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

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
    /// Seconds between progress lines in the log (level, done/total, rate, ETA) when standard
    /// error is not a terminal (a batch job); 0 logs after every batch.
    #[arg(long, default_value_t = 5.0)]
    progress_every_s: f64,
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
    if !(args.progress_every_s.is_finite() && args.progress_every_s >= 0.0) {
        anyhow::bail!(
            "`--progress-every-s {}` must be a number of seconds ≥ 0",
            args.progress_every_s
        );
    }
    let bar = BarProgress::new(args.quiet, Duration::from_secs_f64(args.progress_every_s));
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

/// Progress of `synfire mine`: a bar on standard error when it is a terminal (hidden with
/// `--quiet`), and log lines for a batch job: each level's candidate count before it is
/// counted, its outcome after, and, when standard error is not a terminal, a progress line
/// (done/total, rate, ETA) at most every `--progress-every-s`.
pub struct BarProgress {
    bar: ProgressBar,
    /// Log progress lines (standard error is not a terminal).
    log: bool,
    /// The least interval between two progress lines.
    every: Duration,
    /// (level, work of the level, counted so far, level start, last progress line).
    state: std::sync::Mutex<(usize, u64, u64, Instant, Instant)>,
}

impl BarProgress {
    /// A bar, hidden when `quiet`; progress lines in the log at most every `every`.
    pub fn new(quiet: bool, every: Duration) -> Self {
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
        let now = Instant::now();
        Self {
            bar,
            log: !std::io::stderr().is_terminal(),
            every,
            state: std::sync::Mutex::new((0, 0, 0, now, now)),
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for BarProgress {
    fn level_candidates(&self, level: usize, candidates: u64, two_pass: bool) {
        let how = if two_pass {
            "PreElim, then the exact count of the survivors"
        } else {
            "exact counts"
        };
        tracing::info!(
            level,
            candidates,
            "Level {level}: {candidates} candidates ({how})."
        );
    }

    fn level_started(&self, level: usize, work: u64) {
        self.bar.set_prefix(format!("level {level}"));
        self.bar.set_position(0);
        self.bar.set_length(work);
        let now = Instant::now();
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = (level, work, 0, now, now);
    }

    fn advanced(&self, n: u64) {
        self.bar.inc(n);
        if !self.log {
            return;
        }
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.2 += n;
        let now = Instant::now();
        if now.duration_since(s.4) >= self.every && s.2 <= s.1 {
            s.4 = now;
            let (level, work, done) = (s.0, s.1, s.2);
            let elapsed = now.duration_since(s.3).as_secs_f64();
            let rate = done as f64 / elapsed.max(1e-9);
            let eta_s = (work - done) as f64 / rate.max(1e-9);
            tracing::info!(
                level,
                done,
                total = work,
                rate_per_s = format!("{rate:.3e}"),
                eta_s = format!("{eta_s:.0}"),
                "Counting level {level}: {done}/{work}."
            );
        }
    }

    fn level_finished(&self, stats: &LevelStats) {
        tracing::info!(
            level = stats.level,
            candidates = stats.candidates,
            eliminated = stats.eliminated_by_preelim,
            frequent = stats.frequent,
            seconds = format!("{:.3}", stats.seconds),
            "Level {} done: {} frequent.",
            stats.level,
            stats.frequent
        );
    }
}
