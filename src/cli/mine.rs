//! `synfire mine`: frequent serial episodes of a spike file, as tdminer text or JSON.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use synfire::episode::{FrequentEpisode, LevelStats, MinerConfig, MiningResult, Progress};
use synfire::event::EventStream;
use synfire::report::{self, MineReport, OccurrenceFormat};
use synfire::significance::{
    Listing, MineJob, SignificanceResult, Trials, check_sample_split, listing,
};

use crate::cli::args::{FormatArg, InputArgs, MiningArgs, OutputArg, SignificanceArgs};

/// Options of `synfire mine`.
#[derive(Debug, Args)]
pub struct MineArgs {
    #[command(flatten)]
    input: InputArgs,
    #[command(flatten)]
    mining: MiningArgs,
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
    #[command(flatten)]
    significance: MineSignificanceArgs,
    /// Also write every listed episode's non-overlapped occurrences (the event times of each,
    /// exactly `count` of them; episodes of two or more nodes) to this file: `.csv` a long
    /// table `episode_index,episode,occurrence,node,unit,time_s`, `.json` one list per
    /// episode.
    #[arg(long, value_name = "PATH")]
    occurrences: Option<PathBuf>,
    /// Also write the listed episodes (two or more nodes), their significance and their
    /// occurrences into an NWB file: a copy of an NWB input, or for other inputs a new NWB
    /// file with the units. With `--nwb-layout events` (the default, NWB 2.10) each episode's
    /// occurrences are an `EventsTable` `/events/synfire_episode_<row>` (timestamp of the first
    /// spike, duration to the last, the units) and the processing module `synfire` holds the
    /// `episodes` table (linked to `/units`, with counts and significance); read them with
    /// pynwb >= 4: `nwbfile.events`, `nwbfile.processing["synfire"]["episodes"].to_dataframe()`.
    #[arg(long, value_name = "PATH")]
    nwb_output: Option<PathBuf>,
    /// The layout of `--nwb-output`: `events` (NWB 2.10 `EventsTable`s under `/events`, read
    /// by pynwb 4 and later) or `legacy` (the processing module `synfire` with the tables
    /// `episodes` and `occurrences` only, for readers on an older pynwb).
    #[arg(long, value_name = "LAYOUT", default_value_t = report::nwb::NwbLayout::default(),
          value_parser = clap::builder::TypedValueParser::map(
              clap::builder::PossibleValuesParser::new(report::nwb::NwbLayout::NAMES),
              |s| s.parse::<report::nwb::NwbLayout>().expect("a listed layout")))]
    nwb_layout: report::nwb::NwbLayout,
}

/// The significance test of `synfire mine`: the shared flags ([`SignificanceArgs`]) and those
/// only `mine` takes, since they name files it reads or shape its listing.
#[derive(Debug, Args)]
struct MineSignificanceArgs {
    #[command(flatten)]
    test: SignificanceArgs,
    /// Per-episode procedures: test exactly the episodes listed in FILE, one per line in the
    /// text output's form (`u3-[0.000000,0.005000]-u5`; a ` : count` tail and `#` lines are
    /// ignored).
    #[arg(
        long,
        value_name = "FILE",
        requires = "surrogates",
        conflicts_with_all = ["test_top", "sample_split"]
    )]
    watch: Option<PathBuf>,
    /// Trials for `trial-shift`: FILE with one `start_s,stop_s` per line.
    #[arg(long, value_name = "FILE", requires = "surrogates")]
    trials: Option<PathBuf>,
    /// List only closed episodes: none with a frequent one-node-longer extension (at either
    /// end) of the same count.
    #[arg(long)]
    closed: bool,
}

/// Runs `synfire mine`.
///
/// # Errors
/// Bad options, an unreadable or unsorted input (named), a GPU failure with `--device gpu`,
/// or an unwritable `--output`.
pub fn run(args: &MineArgs) -> Result<()> {
    // Checked before any work (a `--calibration` file too, whichever device ends up
    // counting).
    let (options, config, settings) = args.mining.resolve()?;
    let sig_options = args.significance.test.options()?;
    let occurrences = args
        .occurrences
        .as_deref()
        .map(|p| OccurrenceFormat::from_path(p).map(|f| (p, f)))
        .transpose()
        .map_err(|e| anyhow::anyhow!("`--occurrences`: {e}"))?;
    if let Some(f) = args.significance.test.surrogates.sample_split
        && let Some(e) = check_sample_split(
            f,
            Some(args.significance.test.correction),
            sig_options.as_ref().map(|o| &o.surrogates),
        )
        .into_iter()
        .next()
    {
        anyhow::bail!("`--sample-split {f}`: {e}");
    }
    let mut stream = args.input.read(args.mining.sample_rate_hz)?;
    if let (Some(start), Some(end)) = (args.start_s, args.end_s) {
        if !(start.is_finite() && end.is_finite() && start < end) {
            anyhow::bail!("`--start-s {start}` must be before `--end-s {end}`");
        }
        stream = stream.window(start, end).with_context(|| {
            format!(
                "{}: no events in [{start}, {end}) s",
                args.input.input.display()
            )
        })?;
    }
    tracing::info!(
        input = %args.input.input.display(),
        events = stream.len(),
        event_types = stream.alphabet().len(),
        span_s = stream.span(),
        "Loaded spike stream."
    );
    // The test as the library runs it, with the `--trials` and `--watch` files read (before
    // any mining, so a bad file fails at once).
    let test = sig_options
        .as_ref()
        .map(|o| -> Result<_> {
            let trials = args
                .significance
                .trials
                .as_deref()
                .map(read_trials)
                .transpose()?;
            let watch = args
                .significance
                .watch
                .as_deref()
                .map(|p| read_watch(p, &stream, &config.intervals))
                .transpose()?;
            Ok(o.test(watch, trials))
        })
        .transpose()?;
    // The counter is chosen here (`guided` will mine to two nodes only: its longer episodes
    // come from its own search, `synfire::significance::guided`).
    let job = MineJob::resolved(&stream, options.device, config, settings, test)
        .context("`--device gpu`")?;
    let config = job.config();
    if !(args.progress_every_s.is_finite() && args.progress_every_s >= 0.0) {
        anyhow::bail!(
            "`--progress-every-s {}` must be a number of seconds ≥ 0",
            args.progress_every_s
        );
    }
    let bar = BarProgress::new(args.quiet, Duration::from_secs_f64(args.progress_every_s))
        .with_bounds(config.bounds);
    let input = args.input.input.display().to_string();
    let min_count = config.threshold.min_count(stream.len(), stream.span())?;
    let doc = Document {
        input: &input,
        stream: &stream,
        config,
        format: args.format,
    };
    let result = match args.output.output.as_deref().filter(|p| rewritable(p)) {
        Some(path) => {
            let partial = LevelByLevel {
                bar: &bar,
                doc: &doc,
                path,
                sofar: std::sync::Mutex::new(MiningResult {
                    min_count,
                    levels: Vec::new(),
                    episodes: Vec::new(),
                    truncated: None,
                }),
                failed: std::sync::Mutex::new(None),
            };
            // Written before any work, so an unwritable `--output` fails at once.
            partial.write_sofar()?;
            let mut result = job.mine(&partial)?;
            if let Some(e) = partial
                .failed
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
            {
                return Err(e);
            }
            bar.finish();
            test_and_list(
                &args.significance,
                &job,
                &mut result,
                |result, sig, list| {
                    doc.replace_final(path, result, sig, list)?;
                    write_occurrences(occurrences, &doc, result, list)?;
                    write_nwb(args, &doc, result, sig, list)
                },
            )?;
            result
        }
        None => {
            let mut result = job.mine(&bar)?;
            bar.finish();
            test_and_list(
                &args.significance,
                &job,
                &mut result,
                |result, sig, list| {
                    let mut out = args.output.writer()?;
                    doc.write_final(&mut out, result, sig, list)?;
                    out.flush().context("writing the result")?;
                    write_occurrences(occurrences, &doc, result, list)?;
                    write_nwb(args, &doc, result, sig, list)
                },
            )?;
            result
        }
    };
    for w in synfire::episode::sanity::check(&stream, &result) {
        tracing::warn!("{w}.");
    }
    if let Some(t) = &result.truncated {
        tracing::warn!(
            level = t.level,
            suggested_min_count = t.suggested_min_count,
            "Mining was truncated: {t}. The levels before {} are complete and written.",
            t.level
        );
    }
    Ok(())
}

/// `--nwb-output`: the listed episodes, their tests and occurrences into an NWB file.
fn write_nwb(
    args: &MineArgs,
    doc: &Document<'_>,
    result: &MiningResult,
    sig: Option<&SignificanceResult>,
    list: &Listing<'_>,
) -> Result<()> {
    let Some(out) = args.nwb_output.as_deref() else {
        return Ok(());
    };
    let input = args.input.input.as_path();
    let input_nwb = (synfire::ingest::InputFormat::from_path(input).ok()
        == Some(synfire::ingest::InputFormat::Nwb))
    .then_some(input);
    report::nwb::write_results(
        out,
        input_nwb,
        doc.stream,
        result,
        sig,
        list,
        args.nwb_layout,
    )
    .with_context(|| format!("`--nwb-output` {}", out.display()))?;
    tracing::info!(file = %out.display(), "Wrote the results into the NWB file.");
    Ok(())
}

/// `--occurrences`: the listed episodes' (two or more nodes) occurrences into `to`.
fn write_occurrences(
    to: Option<(&Path, OccurrenceFormat)>,
    doc: &Document<'_>,
    result: &MiningResult,
    list: &Listing<'_>,
) -> Result<()> {
    let Some((path, format)) = to else {
        return Ok(());
    };
    let episodes: Vec<(&synfire::episode::Episode, u64)> = result
        .episodes
        .iter()
        .zip(&list.keep)
        .filter(|(f, keep)| **keep && f.episode.len() >= 2)
        .map(|(f, _)| (&f.episode, f.count))
        .collect();
    let file = std::fs::File::create(path)
        .with_context(|| format!("creating `--occurrences` file {}", path.display()))?;
    let mut out = std::io::BufWriter::new(file);
    report::write_occurrences(&mut out, format, doc.input, doc.stream, &episodes)
        .and_then(|()| out.flush())
        .with_context(|| format!("writing `--occurrences` file {}", path.display()))?;
    tracing::info!(
        episodes = episodes.len(),
        file = %path.display(),
        "Wrote the occurrences."
    );
    Ok(())
}

/// Tests `result`'s significance as the job asks (if it does: [`MineJob::test`], which logs
/// what it does and its outcome and lists the tested episodes in `result`), lists what `args`
/// keep, and hands both to `write`.
fn test_and_list(
    args: &MineSignificanceArgs,
    job: &MineJob<'_>,
    result: &mut MiningResult,
    write: impl FnOnce(&MiningResult, Option<&SignificanceResult>, &Listing<'_>) -> Result<()>,
) -> Result<()> {
    let sig = job.test(result)?;
    let list = listing(
        result,
        sig.as_ref(),
        args.test.listing.significant_only,
        args.closed,
    );
    write(result, sig.as_ref(), &list)
}

/// `--trials FILE`: one `start_s,stop_s` per line (`#` lines and blank lines skipped).
fn read_trials(path: &Path) -> Result<Trials> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading `--trials` file {}", path.display()))?;
    let mut trials = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let parsed = line.split_once(',').and_then(|(a, b)| {
            Some((a.trim().parse::<f64>().ok()?, b.trim().parse::<f64>().ok()?))
        });
        match parsed {
            Some(t) => trials.push(t),
            None => anyhow::bail!(
                "`--trials` file {} line {}: expected `start_s,stop_s`, got `{line}`",
                path.display(),
                n + 1
            ),
        }
    }
    Trials::new(trials).with_context(|| format!("`--trials` file {}", path.display()))
}

/// `--watch FILE`: episodes in the text output's form (or tdminer's), one per line; `known`
/// are the mining's intervals (an interval shown as one of them is that one exactly).
fn read_watch(
    path: &Path,
    stream: &EventStream,
    known: &[synfire::episode::Interval],
) -> Result<Vec<synfire::episode::Episode>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading `--watch` file {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split(" : ").next().unwrap_or_default().trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let episode =
            synfire::episode::Episode::parse(line, stream.alphabet(), known).map_err(|e| {
                anyhow::anyhow!(
                    "`--watch` file {} line {}: {e} (expected e.g. `u3-(0,5]ms-u5`)",
                    path.display(),
                    n + 1
                )
            })?;
        out.push(episode);
    }
    if out.is_empty() {
        anyhow::bail!("`--watch` file {} lists no episode", path.display());
    }
    Ok(out)
}

/// A path `--output` can be replaced at (a regular file or a new one), so the result can be
/// written level by level through a temporary file and a rename.
fn rewritable(path: &Path) -> bool {
    std::fs::metadata(path).map_or(true, |m| m.is_file())
}

/// What the written result needs besides the mining result.
struct Document<'a> {
    input: &'a str,
    stream: &'a EventStream,
    config: &'a MinerConfig,
    format: FormatArg,
}

impl Document<'_> {
    /// Writes `result` in the chosen format; `complete` is false for a result written
    /// between levels.
    fn write(&self, out: &mut dyn Write, result: &MiningResult, complete: bool) -> Result<()> {
        match self.format {
            FormatArg::Json => {
                let mut report = MineReport::new(self.input, self.stream, self.config, result);
                report.complete = complete;
                report::write_json(out, &report)?;
            }
            FormatArg::Text => {
                if !complete {
                    writeln!(
                        out,
                        "# incomplete: written after level {} while mining went on",
                        result.levels.len()
                    )?;
                }
                report::write_text(out, self.input, self.stream, self.config, result)?;
            }
        }
        Ok(())
    }

    /// Writes the final document: `result` with its significance test and listing.
    fn write_final(
        &self,
        out: &mut dyn Write,
        result: &MiningResult,
        sig: Option<&SignificanceResult>,
        list: &Listing<'_>,
    ) -> Result<()> {
        match self.format {
            FormatArg::Json => {
                let report = MineReport::new(self.input, self.stream, self.config, result)
                    .annotated(sig, list);
                report::write_json(out, &report)?;
            }
            FormatArg::Text => {
                report::write_text_annotated(
                    out,
                    self.input,
                    self.stream,
                    self.config,
                    result,
                    sig,
                    list,
                )?;
            }
        }
        Ok(())
    }

    /// [`Self::replace`] with the final document ([`Self::write_final`]).
    fn replace_final(
        &self,
        path: &Path,
        result: &MiningResult,
        sig: Option<&SignificanceResult>,
        list: &Listing<'_>,
    ) -> Result<()> {
        self.replace_with(path, |out| self.write_final(out, result, sig, list))
    }

    /// Replaces `path` with `result`: written to `PATH.partial` first, then renamed, so the
    /// file always holds a whole document.
    fn replace(&self, path: &Path, result: &MiningResult, complete: bool) -> Result<()> {
        self.replace_with(path, |out| self.write(out, result, complete))
    }

    fn replace_with(
        &self,
        path: &Path,
        write: impl FnOnce(&mut dyn Write) -> Result<()>,
    ) -> Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        let file = std::fs::File::create(&tmp)
            .with_context(|| format!("creating `--output` file {}", tmp.display()))?;
        let mut out = std::io::BufWriter::new(file);
        write(&mut out)?;
        out.flush()
            .with_context(|| format!("writing `--output` file {}", tmp.display()))?;
        drop(out);
        std::fs::rename(&tmp, path).with_context(|| {
            format!(
                "renaming {} to the `--output` file {}",
                tmp.display(),
                path.display()
            )
        })
    }
}

/// [`BarProgress`] plus the `--output` file rewritten after every level, so a killed run
/// leaves its finished levels (marked incomplete).
struct LevelByLevel<'a> {
    bar: &'a BarProgress,
    doc: &'a Document<'a>,
    path: &'a Path,
    sofar: std::sync::Mutex<MiningResult>,
    /// The first write that failed (reported when mining returns).
    failed: std::sync::Mutex<Option<anyhow::Error>>,
}

impl LevelByLevel<'_> {
    fn write_sofar(&self) -> Result<()> {
        let sofar = self.sofar.lock().unwrap_or_else(PoisonError::into_inner);
        self.doc.replace(self.path, &sofar, false)
    }
}

impl Progress for LevelByLevel<'_> {
    fn level_candidates(&self, level: usize, candidates: u64, two_pass: bool) {
        self.bar.level_candidates(level, candidates, two_pass);
    }

    fn level_started(&self, level: usize, work: u64) {
        self.bar.level_started(level, work);
    }

    fn advanced(&self, n: u64) {
        self.bar.advanced(n);
    }

    fn level_finished(&self, stats: &LevelStats) {
        self.bar.level_finished(stats);
    }

    fn level_result(&self, stats: &LevelStats, episodes: &[FrequentEpisode]) {
        {
            let mut sofar = self.sofar.lock().unwrap_or_else(PoisonError::into_inner);
            sofar.levels.push(stats.clone());
            sofar.episodes.extend_from_slice(episodes);
        }
        if let Err(e) = self.write_sofar() {
            let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
            failed.get_or_insert(e);
        }
    }
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
    /// Whether the miner removes candidates by bounds first (for the log's wording).
    bounds: bool,
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
            bounds: true,
        }
    }

    /// Says whether the miner applies its bounds (`--no-bounds` turns them off).
    #[must_use]
    pub fn with_bounds(mut self, bounds: bool) -> Self {
        self.bounds = bounds;
        self
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for BarProgress {
    fn level_candidates(&self, level: usize, candidates: u64, two_pass: bool) {
        let how = match (level > 1 && self.bounds, two_pass) {
            (true, true) => "bounds, then PreElim and the exact count of the survivors",
            (true, false) => "bounds, then the exact count of the survivors",
            (false, true) => "PreElim, then the exact count of the survivors",
            (false, false) => "exact counts",
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
            removed_by_bounds = stats.removed_by_bounds,
            counted = stats.candidates - stats.removed_by_bounds,
            eliminated_by_preelim = stats.eliminated_by_preelim,
            frequent = stats.frequent,
            seconds = format!("{:.3}", stats.seconds),
            "Level {} done: {} of {} candidates survived the bounds, {} frequent.",
            stats.level,
            stats.candidates - stats.removed_by_bounds,
            stats.candidates,
            stats.frequent
        );
    }
}
