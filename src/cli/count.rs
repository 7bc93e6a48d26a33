//! `synfire count EPISODES INPUT`: the exact non-overlapped counts of given episodes in any
//! spike input (tdminer's `-o`), and optionally their occurrences.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use synfire::episode::{CountKind, Counter, CpuCounter, Episode};
use synfire::report::{self, OccurrenceFormat};

use crate::cli::args::{FormatArg, OutputArg, RecordingArgs};

/// Options of `synfire count`.
#[derive(Debug, Args)]
pub struct CountArgs {
    /// Episodes to count, one per line, as `synfire mine` prints them (`u3-(4,6]ms-u5`,
    /// `u3-[0,0.2]ms-u5`, a single unit `u3`; a trailing ` : count` is ignored) or in tdminer's notation
    /// (`u3-[0.004000,0.006000]-u5`, seconds, meaning `(0.004,0.006]`); `#` lines and blank
    /// lines are skipped.
    episodes: PathBuf,
    #[command(flatten)]
    input: RecordingArgs,
    /// Output format: `text` lines `episode : count` (as `synfire mine`), or `json`.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    format: FormatArg,
    #[command(flatten)]
    output: OutputArg,
    /// Also write each episode's non-overlapped occurrences to this file (`.csv` long table
    /// or `.json`, as `synfire mine --occurrences`).
    #[arg(long, value_name = "PATH")]
    occurrences: Option<PathBuf>,
}

/// One counted episode in the JSON output.
#[derive(Serialize)]
struct Counted {
    episode: String,
    labels: Vec<String>,
    intervals: Vec<String>,
    count: u64,
}

/// Runs `synfire count`.
///
/// # Errors
/// An unreadable input or episodes file (named, with the line at fault), an unknown unit
/// label, an unwritable output.
pub fn run(args: &CountArgs) -> Result<()> {
    let occurrences = args
        .occurrences
        .as_deref()
        .map(|p| OccurrenceFormat::from_path(p).map(|f| (p, f)))
        .transpose()
        .map_err(|e| anyhow::anyhow!("`--occurrences`: {e}"))?;
    let stream = args.input.read()?;
    let text = std::fs::read_to_string(&args.episodes)
        .with_context(|| format!("reading the episodes file {}", args.episodes.display()))?;
    let mut episodes: Vec<Episode> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split(" : ").next().unwrap_or_default().trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // A single unit (a level-1 line of `mine`) counts its spikes.
        if let Some(ty) = stream.alphabet().get(line) {
            episodes.push(Episode::new(vec![ty], Vec::new()));
            continue;
        }
        let episode = Episode::parse(line, stream.alphabet(), &[]).map_err(|e| {
            anyhow::anyhow!(
                "episodes file {} line {}: {e} (units of {}: {})",
                args.episodes.display(),
                n + 1,
                args.input.path().display(),
                preview(stream.alphabet().labels())
            )
        })?;
        episodes.push(episode);
    }
    if episodes.is_empty() {
        anyhow::bail!(
            "the episodes file {} lists no episode",
            args.episodes.display()
        );
    }
    let counts = CpuCounter::new(&stream).count(CountKind::Exact, &episodes)?;
    let alphabet = stream.alphabet();
    let mut out = args.output.writer()?;
    match args.format {
        FormatArg::Text => {
            writeln!(out, "# synfire count {}", args.input.path().display())?;
            for (e, c) in episodes.iter().zip(&counts) {
                writeln!(out, "{} : {c}", e.display(alphabet))?;
            }
        }
        FormatArg::Json => {
            let list: Vec<Counted> = episodes
                .iter()
                .zip(&counts)
                .map(|(e, &count)| Counted {
                    episode: e.display(alphabet).to_string(),
                    labels: e
                        .types()
                        .iter()
                        .map(|&t| alphabet.label(t).to_owned())
                        .collect(),
                    intervals: e.intervals().iter().map(ToString::to_string).collect(),
                    count,
                })
                .collect();
            serde_json::to_writer_pretty(
                &mut out,
                &serde_json::json!({
                    "input": args.input.path().display().to_string(),
                    "events": stream.len(),
                    "span_s": stream.span(),
                    "episodes": list,
                }),
            )?;
            writeln!(out)?;
        }
    }
    out.flush().context("writing the counts")?;
    if let Some((path, format)) = occurrences {
        let pairs: Vec<(&Episode, u64)> = episodes.iter().zip(counts).collect();
        let file = std::fs::File::create(path)
            .with_context(|| format!("creating `--occurrences` file {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        report::write_occurrences(
            &mut w,
            format,
            &args.input.path().display().to_string(),
            &stream,
            &pairs,
        )
        .and_then(|()| w.flush())
        .with_context(|| format!("writing `--occurrences` file {}", path.display()))?;
    }
    Ok(())
}

/// The first labels, for an error message.
fn preview(labels: &[String]) -> String {
    let shown: Vec<&str> = labels.iter().take(8).map(String::as_str).collect();
    if labels.len() > shown.len() {
        format!("{}, … ({} in all)", shown.join(", "), labels.len())
    } else {
        shown.join(", ")
    }
}
