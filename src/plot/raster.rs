//! The spike raster: one row per unit, a grey tick per spike over a time window, and the
//! non-overlapped occurrences of chosen episodes on top, each episode in its colour of
//! [`PALETTE`]: a coloured tick on each spike of an occurrence and a line
//! joining them node by node. A legend below the axes names each episode in synfire's text
//! notation (`6-(10,20]ms-2 — 10 of its 2,638 occurrences in this window`).
//!
//! The occurrences are those [`crate::episode::occurrences`] lists (the ones Algorithm 1
//! counts, greedy earliest end), so the picture shows exactly what `synfire mine` and
//! `synfire count` counted.

use plotters::coord::Shift;
use plotters::prelude::{
    BLACK, ChartBuilder, Color, DrawingArea, DrawingBackend, EmptyElement, IntoFont, PathElement,
    RGBColor, Rectangle, Text, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{
    Draw, FONT, Format, PALETTE, PlotError, axis, check_size, cut, decimals, draw_err, nice_ticks,
};
use crate::episode::count::MAX_EPISODE_LEN;
use crate::episode::{Episode, TypeIndex, occurrences};
use crate::event::{EventStream, EventType};

/// The window's length when only one end (or neither) is given, seconds.
pub const DEFAULT_WINDOW_S: f64 = 2.0;
/// How long before the first occurrence a default window starts, seconds.
pub const DEFAULT_LEAD_S: f64 = 0.1;
/// The most episodes one raster highlights (one colour of [`PALETTE`]
/// each).
pub const MAX_EPISODES: usize = PALETTE.len();
/// The default width of a raster, pixels.
pub const DEFAULT_WIDTH: u32 = 1200;

/// Grey of the spikes that belong to no highlighted occurrence.
pub const SPIKE_GREY: RGBColor = RGBColor(0x9A, 0x9A, 0x9A);

/// Which units get a row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rows {
    /// The units the episodes name, in the order they first name them (a chain reads top
    /// down), then the units labelled in `extra` that are not among them.
    Episodes {
        /// More unit labels to draw.
        extra: Vec<String>,
    },
    /// Every unit of the recording, in its order (units without spikes included).
    All,
}

/// What a raster shows and how large it is.
#[derive(Clone, Debug)]
pub struct RasterOptions {
    /// Start of the window, seconds. Default: [`DEFAULT_LEAD_S`] before the earliest
    /// occurrence of any episode (the recording's first spike when none occurs), or
    /// [`DEFAULT_WINDOW_S`] before `end_s` when only that is given.
    pub start_s: Option<f64>,
    /// End of the window, seconds. Default: [`DEFAULT_WINDOW_S`] after the start.
    pub end_s: Option<f64>,
    /// The units drawn.
    pub rows: Rows,
    /// The caption's first words (e.g. the input's file name).
    pub title: String,
    /// Width, pixels (default [`DEFAULT_WIDTH`]).
    pub width: Option<u32>,
    /// Height, pixels (default: from the number of rows and episodes).
    pub height: Option<u32>,
}

/// One highlighted episode.
#[derive(Clone, Debug)]
pub struct Highlight {
    /// The episode in synfire's text notation, e.g. `6-(10,20]ms-2`.
    pub name: String,
    /// Its number of nodes N.
    pub nodes: usize,
    /// Its non-overlapped occurrences in the whole recording.
    pub count: usize,
    /// The spike times of its occurrences that lie wholly in the window (first spike at or
    /// after the start, last at or before the end): shape `[k, N]` flattened row-major,
    /// seconds.
    pub times: Vec<f64>,
    /// The row of each node. Shape `[N]`.
    rows: Vec<usize>,
}

impl Highlight {
    /// The number of its occurrences in the window.
    #[must_use]
    pub fn in_window(&self) -> usize {
        self.times.len() / self.nodes
    }
}

/// A spike raster ready to render.
#[derive(Clone, Debug)]
pub struct Raster {
    title: String,
    start_s: f64,
    end_s: f64,
    labels: Vec<String>,
    /// Per row, the spike times in the window, seconds, ascending.
    spikes: Vec<Vec<f64>>,
    highlights: Vec<Highlight>,
    width: u32,
    height: u32,
}

impl Raster {
    /// The raster of `stream` with the occurrences of `episodes` (at most
    /// [`MAX_EPISODES`], each of two nodes or more) highlighted.
    ///
    /// # Errors
    /// [`PlotError::Input`] when there is no episode or more than [`MAX_EPISODES`], an
    /// episode of one node, of more than 64 nodes or with a type the stream lacks, a unit
    /// of `Rows::Episodes::extra` the recording lacks, a window that is not finite or whose
    /// start is not before its end, or a size out of range.
    pub fn new(
        stream: &EventStream,
        episodes: &[Episode],
        options: &RasterOptions,
    ) -> Result<Self, PlotError> {
        let alphabet = stream.alphabet();
        if episodes.is_empty() {
            return Err(PlotError::Input("no episode to highlight".into()));
        }
        if episodes.len() > MAX_EPISODES {
            return Err(PlotError::Input(format!(
                "{} episodes to highlight; a raster shows at most {MAX_EPISODES} (one colour each)",
                episodes.len()
            )));
        }
        if u32::try_from(stream.len()).is_err() {
            return Err(PlotError::Input(format!(
                "{} events: more than a raster's index holds",
                stream.len()
            )));
        }
        for e in episodes {
            if let Some(ty) = e.types().iter().find(|t| t.index() >= alphabet.len()) {
                return Err(PlotError::Input(format!(
                    "an episode names event type {ty}, which the recording lacks"
                )));
            }
            let name = e.display(alphabet).to_string();
            if e.len() < 2 {
                return Err(PlotError::Input(format!(
                    "`{name}` is one unit; a raster highlights episodes of two or more"
                )));
            }
            if e.len() > MAX_EPISODE_LEN {
                return Err(PlotError::Input(format!(
                    "`{}` has {} nodes; episodes have at most {MAX_EPISODE_LEN}",
                    cut(&name, 60),
                    e.len()
                )));
            }
        }

        // Rows: the episodes' units in order of first mention, then the extra ones; or all.
        let mut types: Vec<EventType> = Vec::new();
        match &options.rows {
            Rows::All => types
                .extend((0..alphabet.len()).filter_map(|i| u32::try_from(i).ok().map(EventType))),
            Rows::Episodes { extra } => {
                for &ty in episodes.iter().flat_map(Episode::types) {
                    if !types.contains(&ty) {
                        types.push(ty);
                    }
                }
                for label in extra {
                    let ty = alphabet.get(label).ok_or_else(|| {
                        PlotError::Input(format!(
                            "unit `{label}` is not in the recording (units: {})",
                            preview(alphabet.labels())
                        ))
                    })?;
                    if !types.contains(&ty) {
                        types.push(ty);
                    }
                }
            }
        }
        let row_of = |ty: EventType| types.iter().position(|&t| t == ty).unwrap_or(0);

        // Occurrences over the whole recording; the window is chosen from them.
        let index = TypeIndex::new(stream);
        let found: Vec<Vec<f64>> = episodes.iter().map(|e| occurrences(&index, e)).collect();
        let first_occurrence = episodes
            .iter()
            .zip(&found)
            .filter_map(|(_, times)| times.first().copied())
            .reduce(f64::min);
        let (start_s, end_s) = window(options, first_occurrence, stream)?;

        let spikes = types
            .iter()
            .map(|&ty| {
                let t = index.times(ty);
                let a = t.partition_point(|&x| x < start_s);
                let b = t.partition_point(|&x| x <= end_s);
                t[a..b].to_vec()
            })
            .collect();
        let highlights = episodes
            .iter()
            .zip(found)
            .map(|(e, all)| {
                let n = e.len();
                let times: Vec<f64> = all
                    .chunks_exact(n)
                    .filter(|occ| occ[0] >= start_s && occ[n - 1] <= end_s)
                    .flatten()
                    .copied()
                    .collect();
                Highlight {
                    name: e.display(alphabet).to_string(),
                    nodes: n,
                    count: all.len() / n,
                    times,
                    rows: e.types().iter().map(|&t| row_of(t)).collect(),
                }
            })
            .collect::<Vec<_>>();
        let labels: Vec<String> = types
            .iter()
            .map(|&t| alphabet.label(t).to_owned())
            .collect();

        let width = options.width.unwrap_or(DEFAULT_WIDTH);
        let height = options
            .height
            .unwrap_or_else(|| default_height(labels.len(), highlights.len()));
        check_size(width, height)?;
        // Room for the axes' labels, the legend and a plot that shows something.
        let min_width = label_area(&labels) + 320;
        let min_height = 110 + legend_height(highlights.len()) + (2 * labels.len()).max(100);
        let min_height = u32::try_from(min_height).unwrap_or(u32::MAX);
        if width < min_width || height < min_height {
            return Err(PlotError::Input(format!(
                "a raster of {} rows and {} episodes needs at least {min_width} × {min_height} \
                 pixels, not {width} × {height}",
                labels.len(),
                highlights.len()
            )));
        }
        Ok(Self {
            title: options.title.clone(),
            start_s,
            end_s,
            labels,
            spikes,
            highlights,
            width,
            height,
        })
    }

    /// The window drawn, seconds `(start, end)`.
    #[must_use]
    pub fn window(&self) -> (f64, f64) {
        (self.start_s, self.end_s)
    }

    /// The labels of the rows, top row first.
    #[must_use]
    pub fn rows(&self) -> &[String] {
        &self.labels
    }

    /// The highlighted episodes, in the order given (colour `k` of
    /// [`PALETTE`] for episode `k`).
    #[must_use]
    pub fn highlights(&self) -> &[Highlight] {
        &self.highlights
    }

    /// The picture in `format`: PNG bytes or an SVG document.
    ///
    /// # Errors
    /// [`PlotError::Draw`] or [`PlotError::Png`] should the backend or encoder fail.
    pub fn render(&self, format: Format) -> Result<Vec<u8>, PlotError> {
        super::render(self, format)
    }
}

/// The window `(start, end)` from the options, checked.
fn window(
    options: &RasterOptions,
    first_occurrence: Option<f64>,
    stream: &EventStream,
) -> Result<(f64, f64), PlotError> {
    let (start, end) = match (options.start_s, options.end_s) {
        (Some(s), Some(e)) => (s, e),
        (Some(s), None) => (s, s + DEFAULT_WINDOW_S),
        (None, Some(e)) => (e - DEFAULT_WINDOW_S, e),
        (None, None) => {
            let first = if stream.is_empty() {
                0.0
            } else {
                stream.start()
            };
            let s = first_occurrence.map_or(first, |t| (t - DEFAULT_LEAD_S).max(first));
            (s, s + DEFAULT_WINDOW_S)
        }
    };
    if !(start.is_finite() && end.is_finite()) {
        return Err(PlotError::Input(format!(
            "the window {start} s to {end} s is not finite"
        )));
    }
    if start >= end {
        return Err(PlotError::Input(format!(
            "the window's start ({start} s) is not before its end ({end} s)"
        )));
    }
    Ok((start, end))
}

/// Height for `rows` rows and `legend` legend lines: caption, rows of up to 28 px (at least
/// 240 px of plot), axis, legend.
fn default_height(rows: usize, legend: usize) -> u32 {
    let row_px = (900 / rows.max(1)).clamp(6, 28);
    let plot = (rows * row_px).max(240);
    let total = 50 + plot + 60 + legend_height(legend);
    u32::try_from(total)
        .unwrap_or(super::MAX_SIDE)
        .clamp(super::MIN_SIDE + 80, super::MAX_SIDE)
}

/// The width of the rows' labels and the axis title, pixels.
fn label_area(labels: &[String]) -> u32 {
    let widest = labels
        .iter()
        .map(|l| super::text_width(&cut(l, 24), 14))
        .max()
        .unwrap_or(0);
    widest.max(18) + 46
}

/// Legend lines, pixels.
const LEGEND_LINE: usize = 24;

fn legend_height(entries: usize) -> usize {
    16 + LEGEND_LINE * entries
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

impl Draw for Raster {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    #[allow(clippy::too_many_lines)]
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        root.fill(&WHITE).map_err(draw_err)?;
        let legend_px = u32::try_from(legend_height(self.highlights.len())).unwrap_or(0);
        let (upper, lower) = root.split_vertically(self.height.saturating_sub(legend_px));
        let n = self.labels.len();
        #[allow(clippy::cast_precision_loss)]
        let top = n as f64 - 0.5;
        // Row r is drawn at y = n - 1 - r: the first row on top.
        #[allow(clippy::cast_precision_loss)]
        let y_of = |r: usize| (n - 1 - r) as f64;
        let stride = n.div_ceil(60).max(1);
        let key_rows: Vec<f64> = (0..n).step_by(stride).map(y_of).collect();
        let (x_ticks, step) = nice_ticks(self.start_s, self.end_s, 10);
        let digits = decimals(step);

        let caption = format!(
            "{}: spikes from {:.*} s to {:.*} s",
            self.title,
            digits + 1,
            self.start_s,
            digits + 1,
            self.end_s
        );
        let mut chart = ChartBuilder::on(&upper)
            .caption(cut(&caption, 140), (FONT, 20))
            .margin(12)
            .margin_right(24)
            .x_label_area_size(46)
            .y_label_area_size(label_area(&self.labels))
            .build_cartesian_2d(
                axis(self.start_s..self.end_s, x_ticks),
                axis(-0.5..top, key_rows),
            )
            .map_err(draw_err)?;
        let labels = &self.labels;
        let y_label = |y: &f64| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let r = (top - 0.5 - y).round().max(0.0) as usize;
            labels.get(r).map(|l| cut(l, 24)).unwrap_or_default()
        };
        let x_label = |x: &f64| format!("{x:.digits$}");
        chart
            .configure_mesh()
            .disable_y_mesh()
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .x_desc("time (s)")
            .y_desc("unit")
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(draw_err)?;

        // Half the height of a tick, pixels: a third of a row, 2 to 10 px.
        let (y0, y1) = (
            chart.backend_coord(&(self.start_s, 0.0)).1,
            chart.backend_coord(&(self.start_s, 1.0)).1,
        );
        let row_px = (y0 - y1).abs();
        let half = (row_px / 3).clamp(2, 10);

        for (r, times) in self.spikes.iter().enumerate() {
            let y = y_of(r);
            chart
                .draw_series(times.iter().map(|&t| {
                    EmptyElement::at((t, y))
                        + PathElement::new(vec![(0, -half), (0, half)], SPIKE_GREY.stroke_width(1))
                }))
                .map_err(draw_err)?;
        }
        for (k, h) in self.highlights.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let rows = &h.rows;
            chart
                .draw_series(h.times.chunks_exact(h.nodes).map(|occ| {
                    let points: Vec<(f64, f64)> =
                        occ.iter().zip(rows).map(|(&t, &r)| (t, y_of(r))).collect();
                    PathElement::new(points, colour.stroke_width(2))
                }))
                .map_err(draw_err)?;
            let tall = half + 3;
            chart
                .draw_series(h.times.chunks_exact(h.nodes).flat_map(|occ| {
                    occ.iter().zip(rows).map(move |(&t, &r)| {
                        EmptyElement::at((t, y_of(r)))
                            + Rectangle::new([(-1, -tall), (2, tall)], colour.filled())
                    })
                }))
                .map_err(draw_err)?;
        }

        // The legend, below the axes and aligned with the plot's left edge.
        let plot_left = chart.plotting_area().get_pixel_range().0.start - root.get_base_pixel().0;
        let x0 = plot_left.max(8);
        let style = (FONT, 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let line = i32::try_from(LEGEND_LINE).unwrap_or(24);
        for (k, h) in self.highlights.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let y = 8 + line * i32::try_from(k).unwrap_or(0) + line / 2;
            lower
                .draw(&Rectangle::new(
                    [(x0, y - 5), (x0 + 28, y + 5)],
                    colour.filled(),
                ))
                .map_err(draw_err)?;
            let text = format!(
                "{} — {} of its {} occurrences in this window",
                cut(&h.name, 90),
                h.in_window(),
                super::thousands(h.count as u64),
            );
            lower
                .draw(&Text::new(text, (x0 + 38, y), style.clone()))
                .map_err(draw_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::Interval;

    fn stream() -> EventStream {
        // a at 1, 2, 3; b 15 ms after each; c alone.
        let mut times = Vec::new();
        let mut labels = Vec::new();
        for t in [1.0, 2.0, 3.0] {
            times.extend([t, t + 0.015]);
            labels.extend(["a", "b"]);
        }
        times.push(2.5);
        labels.push("c");
        EventStream::from_labelled(times.into_iter().zip(labels)).unwrap()
    }

    fn options() -> RasterOptions {
        RasterOptions {
            start_s: None,
            end_s: None,
            rows: Rows::Episodes { extra: Vec::new() },
            title: "test".into(),
            width: None,
            height: None,
        }
    }

    #[test]
    fn window_rows_and_occurrences() {
        let s = stream();
        let a = s.alphabet().get("a").unwrap();
        let b = s.alphabet().get("b").unwrap();
        let e = Episode::new(vec![b, a], vec![Interval::new(0.5, 1.5).unwrap()]);
        let r = Raster::new(&s, std::slice::from_ref(&e), &options()).unwrap();
        assert_eq!(r.rows(), ["b", "a"]);
        // First occurrence b@1.015 → a@2: the window would start 0.1 s before it, but not
        // before the recording's first spike (1 s).
        let (start, end) = r.window();
        assert!(
            (start - 1.0).abs() < 1e-12 && (end - 3.0).abs() < 1e-12,
            "{start} {end}"
        );
        assert_eq!(r.highlights()[0].count, 2);
        assert_eq!(r.highlights()[0].in_window(), 2);

        let mut o = options();
        o.rows = Rows::Episodes {
            extra: vec!["c".into()],
        };
        o.start_s = Some(2.2);
        let r = Raster::new(&s, std::slice::from_ref(&e), &o).unwrap();
        assert_eq!(r.rows(), ["b", "a", "c"]);
        assert_eq!(r.highlights()[0].in_window(), 0);
        o.rows = Rows::All;
        assert_eq!(
            Raster::new(&s, std::slice::from_ref(&e), &o)
                .unwrap()
                .rows()
                .len(),
            3
        );

        for bad in [
            RasterOptions {
                end_s: Some(2.0),
                start_s: Some(2.0),
                ..options()
            },
            RasterOptions {
                start_s: Some(f64::NAN),
                ..options()
            },
            RasterOptions {
                rows: Rows::Episodes {
                    extra: vec!["zz".into()],
                },
                ..options()
            },
            RasterOptions {
                width: Some(10),
                ..options()
            },
        ] {
            assert!(Raster::new(&s, std::slice::from_ref(&e), &bad).is_err());
        }
        assert!(Raster::new(&s, &[], &options()).is_err());
        assert!(Raster::new(&s, &[Episode::single(a)], &options()).is_err());
        assert!(Raster::new(&s, &vec![e; MAX_EPISODES + 1], &options()).is_err());
    }

    #[test]
    fn renders_both_formats() {
        let s = stream();
        let a = s.alphabet().get("a").unwrap();
        let b = s.alphabet().get("b").unwrap();
        let e = Episode::new(vec![a, b], vec![Interval::new(0.01, 0.02).unwrap()]);
        let mut o = options();
        o.start_s = Some(0.5);
        o.end_s = Some(3.5);
        let r = Raster::new(&s, &[e], &o).unwrap();
        assert_eq!(r.highlights()[0].in_window(), 3);
        let svg = String::from_utf8(r.render(Format::Svg).unwrap()).unwrap();
        let blue = "stroke=\"#0072B2\"";
        let joins = svg
            .lines()
            .filter(|l| l.contains("<polyline") && l.contains(blue));
        assert_eq!(joins.count(), 3, "one line per occurrence");
        assert!(svg.contains("a-(10,20]ms-b"));
        let png = r.render(Format::Png).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
}
