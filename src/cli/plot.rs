//! `synfire plot raster | levels | significance`: PNG and SVG pictures to check mined
//! episodes by eye (the drawing is `synfire::plot`'s).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use synfire::episode::Episode;
use synfire::event::EventStream;
use synfire::plot::{self, Format, LevelsPlot, MineDocument, Raster, RasterOptions, Rows};

use crate::cli::args::RecordingArgs;

/// Options of `synfire plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    #[command(subcommand)]
    picture: Picture,
}

/// The pictures.
#[derive(Debug, Subcommand)]
enum Picture {
    /// A spike raster with the occurrences of chosen episodes highlighted.
    ///
    /// One row per unit and a tick per spike over a time window; each episode's occurrences
    /// (those `synfire count` counts) in its colour, each occurrence's spikes joined by a
    /// line, and a legend naming the episodes. Only the units of the chosen episodes are
    /// drawn (in the order the episodes name them), unless `--all-units` (or `--show-units`
    /// for a few more).
    Raster(Box<RasterArgs>),
    /// Candidates, removed by bounds and frequent episodes per level of a run.
    ///
    /// Bars per level from a `synfire mine --format json` document, on a log scale (with
    /// candidates eliminated by PreElim too when the run eliminated any).
    Levels(LevelsArgs),
    /// Observed counts against the surrogates of a run made with `--surrogates`.
    ///
    /// From a `synfire mine --surrogates … --format json` document: for the top episodes by
    /// statistic, a dot at the observed count (filled when significant) and the surrogate
    /// mean ± 2 standard deviations as a bar, the adjusted p-value at the right.
    Significance(PlotSignificanceArgs),
}

/// The output picture and its size, shared by every picture.
#[derive(Debug, Args)]
struct PictureArgs {
    /// The picture to write: `.png` or `.svg` (the extension chooses the format).
    #[arg(long, short, value_name = "PATH")]
    output: PathBuf,
    /// Width in pixels (320 to 8000; default: from the picture's content).
    #[arg(long)]
    width: Option<u32>,
    /// Height in pixels (320 to 8000; default: from the picture's content).
    #[arg(long)]
    height: Option<u32>,
}

impl PictureArgs {
    /// The format `--output` names, checked before any work.
    fn format(&self) -> Result<Format> {
        Format::from_path(&self.output).context("`--output`")
    }

    /// Writes the rendered picture to `--output`.
    fn write(&self, bytes: &[u8]) -> Result<()> {
        plot::write(&self.output, bytes)?;
        tracing::info!(file = %self.output.display(), "Wrote the picture.");
        Ok(())
    }
}

/// Options of `synfire plot raster`.
#[derive(Debug, Args)]
struct RasterArgs {
    #[command(flatten)]
    input: RecordingArgs,
    /// Episodes to highlight, one per line as `synfire mine` prints them (`6-(10,20]ms-2`; a
    /// trailing ` : count` is ignored; `#` lines, blank lines and single units are skipped).
    /// The first 10 are drawn, one colour each.
    #[arg(long, value_name = "FILE")]
    episodes: PathBuf,
    /// Start of the window, seconds (default: 0.1 s before the first occurrence of the
    /// episodes, or 2 s before `--end-s`).
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    start_s: Option<f64>,
    /// End of the window, seconds (default: 2 s after the start).
    #[arg(long, value_name = "E", allow_negative_numbers = true)]
    end_s: Option<f64>,
    /// Draw every unit of the input, in its order (by default only the episodes' units are
    /// drawn).
    #[arg(long, conflicts_with = "show_units")]
    all_units: bool,
    /// Draw these units too (labels, comma-separated), below the episodes' units.
    #[arg(long, value_delimiter = ',', value_name = "LABELS")]
    show_units: Option<Vec<String>>,
    #[command(flatten)]
    picture: PictureArgs,
}

/// Options of `synfire plot levels`.
#[derive(Debug, Args)]
struct LevelsArgs {
    /// A `synfire mine --format json` document.
    result: PathBuf,
    #[command(flatten)]
    picture: PictureArgs,
}

/// Options of `synfire plot significance`.
#[derive(Debug, Args)]
struct PlotSignificanceArgs {
    /// A `synfire mine --surrogates … --format json` document.
    result: PathBuf,
    /// How many episodes to draw: those of the largest statistic (1 to 200).
    #[arg(long, default_value_t = plot::significance::DEFAULT_TOP)]
    top: usize,
    #[command(flatten)]
    picture: PictureArgs,
}

/// Runs `synfire plot`.
///
/// # Errors
/// An output path that is neither `.png` nor `.svg`, an unreadable or malformed input (the
/// error names the file and what is wrong), an unwritable output.
pub fn run(args: &PlotArgs) -> Result<()> {
    match &args.picture {
        Picture::Raster(a) => raster(a),
        Picture::Levels(a) => levels(a),
        Picture::Significance(a) => significance(a),
    }
}

fn raster(args: &RasterArgs) -> Result<()> {
    let format = args.picture.format()?;
    for (flag, v) in [("--start-s", args.start_s), ("--end-s", args.end_s)] {
        if v.is_some_and(|v| !v.is_finite()) {
            anyhow::bail!("`{flag}` must be a finite number of seconds");
        }
    }
    if let (Some(s), Some(e)) = (args.start_s, args.end_s)
        && s >= e
    {
        anyhow::bail!("`--start-s` ({s}) must be before `--end-s` ({e})");
    }
    let stream = args.input.read()?;
    let mut episodes = read_episodes(&args.episodes, &stream, args.input.path())?;
    if episodes.len() > plot::raster::MAX_EPISODES {
        tracing::warn!(
            file = %args.episodes.display(),
            listed = episodes.len(),
            drawn = plot::raster::MAX_EPISODES,
            "The episodes file lists more episodes than a raster has colours; the first ones are drawn."
        );
        episodes.truncate(plot::raster::MAX_EPISODES);
    }
    let rows = if args.all_units {
        Rows::All
    } else {
        Rows::Episodes {
            extra: args.show_units.clone().unwrap_or_default(),
        }
    };
    let title = args.input.path().file_name().map_or_else(
        || args.input.path().display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let options = RasterOptions {
        start_s: args.start_s,
        end_s: args.end_s,
        rows,
        title,
        width: args.picture.width,
        height: args.picture.height,
    };
    let raster = Raster::new(&stream, &episodes, &options)
        .with_context(|| format!("plotting {}", args.input.path().display()))?;
    let (start, end) = raster.window();
    for h in raster.highlights() {
        tracing::info!(
            episode = %h.name,
            in_window = h.in_window(),
            count = h.count,
            start_s = start,
            end_s = end,
            "Highlighted the occurrences in the window."
        );
    }
    args.picture.write(&raster.render(format)?)
}

/// The episodes of an episodes file: `synfire mine`'s text lines, single units skipped.
fn read_episodes(path: &Path, stream: &EventStream, input: &Path) -> Result<Vec<Episode>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the episodes file {}", path.display()))?;
    let alphabet = stream.alphabet();
    let mut episodes = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split(" : ").next().unwrap_or_default().trim();
        if line.is_empty() || line.starts_with('#') || alphabet.get(line).is_some() {
            continue;
        }
        let episode = Episode::parse(line, alphabet, &[]).map_err(|e| {
            anyhow::anyhow!(
                "episodes file {} line {}: {e} (units of {}: {})",
                path.display(),
                n + 1,
                input.display(),
                preview(alphabet.labels())
            )
        })?;
        episodes.push(episode);
    }
    if episodes.is_empty() {
        anyhow::bail!(
            "the episodes file {} lists no episode of two or more units",
            path.display()
        );
    }
    Ok(episodes)
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

fn levels(args: &LevelsArgs) -> Result<()> {
    let format = args.picture.format()?;
    let doc = MineDocument::read(&args.result)?;
    let picture = LevelsPlot::from_document(&doc, args.picture.width, args.picture.height)?;
    args.picture.write(&picture.render(format)?)
}

fn significance(args: &PlotSignificanceArgs) -> Result<()> {
    let format = args.picture.format()?;
    let max = plot::significance::MAX_TOP;
    if !(1..=max).contains(&args.top) {
        anyhow::bail!("`--top` is 1 to {max}, not {}", args.top);
    }
    let doc = MineDocument::read(&args.result)?;
    let picture = plot::SignificancePlot::from_document(
        &doc,
        args.top,
        args.picture.width,
        args.picture.height,
    )?;
    args.picture.write(&picture.render(format)?)
}
