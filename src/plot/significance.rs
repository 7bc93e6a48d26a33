//! Observed counts against surrogates, from a `synfire mine --surrogates … --format json`
//! document (`docs/significance.md`): for the top episodes by `statistic`, one row each
//! (highest on top), a bar over the surrogate mean ± 2 standard deviations with a tick at the
//! mean, and a dot at the observed count, filled in [`SIGNIFICANT`] when the episode is
//! significant (`p_adjusted ≤ α`) and hollow otherwise; its adjusted p-value is written at the
//! right.

use plotters::coord::Shift;
use plotters::prelude::{
    BLACK, ChartBuilder, Circle, Color, DrawingArea, DrawingBackend, EmptyElement, IntoFont,
    PathElement, RGBColor, Rectangle, Text, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::document::{MineDocument, notation};
use super::{
    Draw, FONT, Format, PlotError, axis, check_size, cut, decimals, draw_err, nice_ticks,
    text_width, thousands,
};

/// Colour of a significant episode's dot.
pub const SIGNIFICANT: RGBColor = RGBColor(0xD5, 0x5E, 0x00);
/// Colour of the outline of a dot of an episode that is not significant.
pub const NOT_SIGNIFICANT: RGBColor = RGBColor(0x44, 0x44, 0x44);
/// Colour of the surrogate bars.
pub const SURROGATE_BAR: RGBColor = RGBColor(0x4C, 0x72, 0xB0);
/// The default number of episodes drawn.
pub const DEFAULT_TOP: usize = 20;
/// The most rows one picture draws.
pub const MAX_TOP: usize = 200;

/// Radius of the observed-count dots, pixels.
const DOT: i32 = 6;
/// Height of a row, pixels, in the default height.
const ROW_PX: usize = 28;

/// One tested episode as drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The episode in synfire's text notation.
    pub name: String,
    /// Its count in the tested data: the recording, or with sample splitting the test part
    /// (`test_count`), the count its surrogates are compared with.
    pub count: u64,
    /// Its surrogates' mean count.
    pub surrogate_mean: f64,
    /// Its surrogates' standard deviation.
    pub surrogate_std: f64,
    /// The test statistic the rows are ranked by.
    pub statistic: f64,
    /// Its adjusted p-value.
    pub p_adjusted: f64,
    /// `p_adjusted ≤ α`.
    pub significant: bool,
}

/// The observed-against-surrogates picture, ready to render.
#[derive(Clone, Debug)]
pub struct SignificancePlot {
    title: String,
    subtitle: String,
    rows: Vec<Row>,
    width: u32,
    height: u32,
}

impl SignificancePlot {
    /// The `top` tested episodes of `doc` by `statistic` (ties in the document's order);
    /// `width` and `height` in pixels (defaults: 1100, and from the number of rows).
    ///
    /// # Errors
    /// [`PlotError::Document`] naming the document when it has no tested episode (no
    /// `surrogate_mean`, `p_adjusted`, … fields: it was not made with `--surrogates`);
    /// [`PlotError::Input`] for `top` outside 1..=[`MAX_TOP`] or a size out of range.
    pub fn from_document(
        doc: &MineDocument,
        top: usize,
        width: Option<u32>,
        height: Option<u32>,
    ) -> Result<Self, PlotError> {
        if !(1..=MAX_TOP).contains(&top) {
            return Err(PlotError::Input(format!(
                "the number of episodes to draw is 1 to {MAX_TOP}, not {top}"
            )));
        }
        let episodes = doc.episodes.as_deref().ok_or_else(|| {
            doc.error("no `episodes` array: not a `synfire mine --format json` document")
        })?;
        let mut rows: Vec<Row> = episodes
            .iter()
            .filter_map(|e| {
                e.test.as_ref().map(|t| Row {
                    name: notation(e),
                    count: t.test_count.unwrap_or(e.count),
                    surrogate_mean: t.surrogate_mean,
                    surrogate_std: t.surrogate_std,
                    statistic: t.statistic,
                    p_adjusted: t.p_adjusted,
                    significant: t.significant,
                })
            })
            .collect();
        if rows.is_empty() {
            return Err(doc.error(if doc.significance.is_some() {
                "no episode carries significance fields (`surrogate_mean`, `p_adjusted`, …): \
                 the test listed none of two or more nodes"
            } else {
                "no significance fields (`surrogate_mean`, `surrogate_std`, `p_adjusted`, \
                 `significant`): make the document with `synfire mine --surrogates METHOD \
                 --format json`"
            }));
        }
        if let Some(r) = rows.iter().find(|r| {
            !(r.surrogate_mean.is_finite()
                && r.surrogate_std.is_finite()
                && r.surrogate_std >= 0.0
                && (r.surrogate_mean + 2.0 * r.surrogate_std).is_finite())
        }) {
            return Err(doc.error(format!(
                "episode `{}`: surrogate mean {} and standard deviation {} are not finite and \
                 non-negative",
                r.name, r.surrogate_mean, r.surrogate_std
            )));
        }
        let tested = rows.len();
        let significant = rows.iter().filter(|r| r.significant).count();
        // Highest statistic first; a stable sort keeps the document's order among ties.
        rows.sort_by(|a, b| b.statistic.total_cmp(&a.statistic));
        rows.truncate(top);

        let (title, subtitle) = match &doc.significance {
            Some(s) => (
                format!(
                    "{}: observed counts{} against {} surrogates ({})",
                    doc.name(),
                    s.sample_split.as_ref().map_or(String::new(), |p| format!(
                        " from {:.1} s on (sample split)",
                        p.split_s
                    )),
                    s.n_surrogates,
                    s.method
                ),
                format!(
                    "top {} of {tested} tested episodes by statistic; {significant} significant \
                     ({} correction, α = {})",
                    rows.len(),
                    s.correction,
                    s.alpha
                ),
            ),
            None => (
                format!("{}: observed counts against surrogates", doc.name()),
                format!(
                    "top {} of {tested} tested episodes by statistic; {significant} significant",
                    rows.len()
                ),
            ),
        };
        let width = width.unwrap_or(1100);
        let height = height.unwrap_or_else(|| {
            u32::try_from(130 + 70 + (rows.len() * ROW_PX).max(160))
                .unwrap_or(super::MAX_SIDE)
                .min(super::MAX_SIDE)
        });
        check_size(width, height)?;
        // Room for the labels, the p-values, the header and a plot that shows something.
        let min_width = label_area(&rows) + 150 + 240;
        let min_height = u32::try_from(112 + 74 + (rows.len() * 12).max(80)).unwrap_or(u32::MAX);
        if width < min_width || height < min_height {
            return Err(PlotError::Input(format!(
                "a picture of {} episodes needs at least {min_width} × {min_height} pixels, \
                 not {width} × {height}",
                rows.len()
            )));
        }
        Ok(Self {
            title,
            subtitle,
            rows,
            width,
            height,
        })
    }

    /// The episodes drawn, top row first.
    #[must_use]
    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// The picture in `format`: PNG bytes or an SVG document.
    ///
    /// # Errors
    /// [`PlotError::Draw`] or [`PlotError::Png`] should the backend or encoder fail.
    pub fn render(&self, format: Format) -> Result<Vec<u8>, PlotError> {
        super::render(self, format)
    }
}

/// The width of the episodes' labels, pixels.
fn label_area(rows: &[Row]) -> u32 {
    let widest = rows
        .iter()
        .map(|r| text_width(&cut(&r.name, 48), 14))
        .max()
        .unwrap_or(0);
    widest.max(22) + 18
}

/// A p-value in few characters: `0.050`, `1.0e-4`.
fn p_text(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

impl Draw for SignificancePlot {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    #[allow(clippy::too_many_lines)]
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        root.fill(&WHITE).map_err(draw_err)?;
        let (header, body) = root.split_vertically(112);
        let n = self.rows.len();
        #[allow(clippy::cast_precision_loss)]
        let top = n as f64 - 0.5;
        #[allow(clippy::cast_precision_loss)]
        let y_of = |r: usize| (n - 1 - r) as f64;
        let (lo, hi) = self.rows.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
            #[allow(clippy::cast_precision_loss)]
            let c = r.count as f64;
            (
                lo.min(c).min(r.surrogate_mean - 2.0 * r.surrogate_std),
                hi.max(c).max(r.surrogate_mean + 2.0 * r.surrogate_std),
            )
        });
        let pad = ((hi - lo) * 0.06).max(1.0);
        let (lo, hi) = ((lo - pad).max(0.0), hi + pad);
        let (x_ticks, step) = nice_ticks(lo, hi, 8);
        let digits = decimals(step);
        let names: Vec<String> = self.rows.iter().map(|r| cut(&r.name, 48)).collect();
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .margin_right(150)
            .x_label_area_size(50)
            .y_label_area_size(label_area(&self.rows))
            .build_cartesian_2d(
                axis(lo..hi, x_ticks),
                axis(-0.5..top, (0..n).map(y_of).collect()),
            )
            .map_err(draw_err)?;
        let y_label = |y: &f64| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let r = (top - 0.5 - y).round().max(0.0) as usize;
            names.get(r).cloned().unwrap_or_default()
        };
        let x_label = |x: &f64| {
            if digits == 0 {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                let v = x.round().max(0.0) as u64;
                thousands(v)
            } else {
                format!("{x:.digits$}")
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .x_desc("non-overlapped count")
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(draw_err)?;

        for (r, row) in self.rows.iter().enumerate() {
            let y = y_of(r);
            let (a, b) = (
                row.surrogate_mean - 2.0 * row.surrogate_std,
                row.surrogate_mean + 2.0 * row.surrogate_std,
            );
            let bar = SURROGATE_BAR.stroke_width(3);
            chart
                .draw_series(std::iter::once(PathElement::new(vec![(a, y), (b, y)], bar)))
                .map_err(draw_err)?;
            chart
                .draw_series([a, b].map(|x| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, -6), (0, 6)], SURROGATE_BAR.stroke_width(2))
                }))
                .map_err(draw_err)?;
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((row.surrogate_mean, y))
                        + Rectangle::new([(-1, -8), (1, 8)], SURROGATE_BAR.filled()),
                ))
                .map_err(draw_err)?;
            #[allow(clippy::cast_precision_loss)]
            let c = row.count as f64;
            let dot = if row.significant {
                Circle::new((c, y), DOT, SIGNIFICANT.filled())
            } else {
                Circle::new((c, y), DOT, NOT_SIGNIFICANT.stroke_width(2))
            };
            chart.draw_series(std::iter::once(dot)).map_err(draw_err)?;
        }

        // p-values to the right of the plot.
        let base = root.get_base_pixel();
        let (xs, _) = chart.plotting_area().get_pixel_range();
        let right = xs.end - base.0 + 10;
        let p_style = (FONT, 14)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (r, row) in self.rows.iter().enumerate() {
            let y = chart.backend_coord(&(lo, y_of(r))).1 - base.1;
            let mark = if row.significant { " *" } else { "" };
            root.draw(&Text::new(
                format!("p_adj {}{mark}", p_text(row.p_adjusted)),
                (right, y),
                p_style.clone(),
            ))
            .map_err(draw_err)?;
        }

        // Caption, subtitle and legend above the axes.
        let centre = i32::try_from(self.width / 2).unwrap_or(0);
        let centred = |size: u32| {
            (FONT, size)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Center))
        };
        header
            .draw(&Text::new(cut(&self.title, 110), (centre, 20), centred(20)))
            .map_err(draw_err)?;
        header
            .draw(&Text::new(
                cut(&self.subtitle, 140),
                (centre, 46),
                centred(15),
            ))
            .map_err(draw_err)?;
        let legend_style = (FONT, 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let plot_left = xs.start - base.0;
        let mut x = plot_left.max(8);
        let y = 84;
        let entries = [
            "observed count, significant",
            "observed count, not significant",
            "surrogate mean ± 2 SD",
        ];
        for (k, text) in entries.iter().enumerate() {
            match k {
                0 => header.draw(&Circle::new((x + 9, y), DOT, SIGNIFICANT.filled())),
                1 => header.draw(&Circle::new(
                    (x + 9, y),
                    DOT,
                    NOT_SIGNIFICANT.stroke_width(2),
                )),
                _ => header
                    .draw(&PathElement::new(
                        vec![(x, y), (x + 18, y)],
                        SURROGATE_BAR.stroke_width(3),
                    ))
                    .and_then(|()| {
                        header.draw(&Rectangle::new(
                            [(x + 8, y - 8), (x + 10, y + 8)],
                            SURROGATE_BAR.filled(),
                        ))
                    }),
            }
            .map_err(draw_err)?;
            header
                .draw(&Text::new(*text, (x + 26, y), legend_style.clone()))
                .map_err(draw_err)?;
            x += 26 + i32::try_from(text_width(text, 15)).unwrap_or(0) + 34;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const DOC: &str = r#"{"input": "x.nwb", "significance": {"method": "dither:0.015",
        "n_surrogates": 19, "alpha": 0.05, "correction": "max-t", "seed": 0, "tested": 2,
        "significant": 1, "warnings": []}, "episodes": [
        {"labels": ["6"], "types": [6], "intervals_s": [], "intervals": [], "count": 100},
        {"labels": ["6", "2"], "types": [6, 2], "intervals_s": [[0.01, 0.02]],
         "intervals": ["(10,20]ms"], "count": 50, "surrogate_mean": 30.0,
         "surrogate_std": 4.0, "statistic": 5.0, "p_value": 0.05, "p_adjusted": 0.05,
         "significant": true},
        {"labels": ["2", "6"], "types": [2, 6], "intervals_s": [[0.01, 0.02]],
         "intervals": ["(10,20]ms"], "count": 31, "surrogate_mean": 30.0,
         "surrogate_std": 2.0, "statistic": 0.5, "p_value": 0.5, "p_adjusted": 0.9,
         "significant": false}]}"#;

    #[test]
    fn rows_by_statistic_and_errors() {
        let doc = MineDocument::parse(DOC, Path::new("d.json")).unwrap();
        let p = SignificancePlot::from_document(&doc, 20, None, None).unwrap();
        let names: Vec<&str> = p.rows().iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["6-(10,20]ms-2", "2-(10,20]ms-6"]);
        let p1 = SignificancePlot::from_document(&doc, 1, None, None).unwrap();
        assert_eq!(p1.rows().len(), 1);
        assert!(SignificancePlot::from_document(&doc, 0, None, None).is_err());
        let svg = String::from_utf8(p.render(Format::Svg).unwrap()).unwrap();
        assert!(svg.contains("6-(10,20]ms-2") && svg.contains("p_adj 0.050 *"));

        let plain = MineDocument::parse(
            r#"{"episodes": [{"labels": ["6", "2"], "types": [6, 2],
                "intervals_s": [[0.01, 0.02]], "intervals": ["(10,20]ms"], "count": 50}]}"#,
            Path::new("plain.json"),
        )
        .unwrap();
        let e = SignificancePlot::from_document(&plain, 20, None, None).unwrap_err();
        assert!(
            e.to_string().starts_with("plain.json: ") && e.to_string().contains("--surrogates"),
            "{e}"
        );
    }

    /// With sample splitting the dot is the test part's count (`test_count`), the count the
    /// surrogates describe, not the whole recording's.
    #[test]
    fn a_sample_split_draws_the_test_part_s_count() {
        let split = DOC
            .replace(
                r#""warnings": []}"#,
                r#""warnings": [], "sample_split": {"fraction": 0.5, "split_s": 600.0,
                "selection_events": 10, "test_events": 12, "screened": 2,
                "screen_surrogates": 0, "family": 2}}"#,
            )
            .replace(
                r#""significant": true}"#,
                r#""significant": true, "test_count": 27}"#,
            );
        let doc = MineDocument::parse(&split, Path::new("s.json")).unwrap();
        let p = SignificancePlot::from_document(&doc, 20, None, None).unwrap();
        assert_eq!(p.rows()[0].count, 27);
        assert_eq!(p.rows()[1].count, 31, "no test_count: the document's count");
        assert!(
            p.title.contains("from 600.0 s on (sample split)"),
            "{}",
            p.title
        );
    }
}
