//! Counts per level of a mining run: for each level N, bars of the candidates generated, those
//! removed by the successor bounds, those eliminated by PreElim (drawn only when some level
//! has any) and the frequent episodes, on a log scale (`docs/mine-json.md`, `levels[]`). Each
//! bar carries its number when the bars are wide enough for it.

use plotters::coord::Shift;
use plotters::prelude::{
    BLACK, ChartBuilder, Color, DrawingArea, DrawingBackend, EmptyElement, IntoFont, IntoLogRange,
    RGBColor, Rectangle, Text, WHITE,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::document::MineDocument;
use super::{
    Draw, FONT, Format, PlotError, axis, check_size, cut, draw_err, text_width, thousands,
};
use crate::episode::LevelStats;

/// Colour of the candidates' bars.
pub const CANDIDATES: RGBColor = RGBColor(0x00, 0x72, 0xB2);
/// Colour of the bars of candidates removed by bounds.
pub const REMOVED_BY_BOUNDS: RGBColor = RGBColor(0xE6, 0x9F, 0x00);
/// Colour of the bars of candidates eliminated by PreElim.
pub const ELIMINATED_BY_PREELIM: RGBColor = RGBColor(0xCC, 0x79, 0xA7);
/// Colour of the frequent episodes' bars.
pub const FREQUENT: RGBColor = RGBColor(0x00, 0x9E, 0x73);

/// The bottom of the log axis: a bar of 1 still shows.
const FLOOR: f64 = 0.7;

/// One kind of bar: its name in the legend, colour and value per level.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// The legend's words, e.g. `removed by bounds`.
    pub name: &'static str,
    /// The bars' colour.
    pub colour: RGBColor,
    /// One value per level, in the order of the levels.
    pub values: Vec<u64>,
}

/// The bar chart of a run's levels, ready to render.
#[derive(Clone, Debug)]
pub struct LevelsPlot {
    title: String,
    levels: Vec<usize>,
    series: Vec<Series>,
    width: u32,
    height: u32,
}

impl LevelsPlot {
    /// The chart of `levels` (as in `synfire mine`'s JSON), captioned `title`; `width` and
    /// `height` in pixels (defaults: from the number of bars, and 560).
    ///
    /// # Errors
    /// [`PlotError::Input`] when `levels` is empty or the size is out of range.
    pub fn new(
        title: &str,
        levels: &[LevelStats],
        width: Option<u32>,
        height: Option<u32>,
    ) -> Result<Self, PlotError> {
        if levels.is_empty() {
            return Err(PlotError::Input("no level to draw".into()));
        }
        let column = |f: fn(&LevelStats) -> usize| -> Vec<u64> {
            levels.iter().map(|l| f(l) as u64).collect()
        };
        let mut series = vec![
            Series {
                name: "candidates",
                colour: CANDIDATES,
                values: column(|l| l.candidates),
            },
            Series {
                name: "removed by bounds",
                colour: REMOVED_BY_BOUNDS,
                values: column(|l| l.removed_by_bounds),
            },
        ];
        if levels.iter().any(|l| l.eliminated_by_preelim > 0) {
            series.push(Series {
                name: "eliminated by PreElim",
                colour: ELIMINATED_BY_PREELIM,
                values: column(|l| l.eliminated_by_preelim),
            });
        }
        series.push(Series {
            name: "frequent",
            colour: FREQUENT,
            values: column(|l| l.frequent),
        });
        let bars = levels.len() * series.len();
        let width = width.unwrap_or_else(|| {
            u32::try_from(220 + bars * 58 + levels.len() * 24)
                .unwrap_or(super::MAX_SIDE)
                .clamp(800, 2400)
        });
        let height = height.unwrap_or(560);
        check_size(width, height)?;
        Ok(Self {
            title: title.to_owned(),
            levels: levels.iter().map(|l| l.level).collect(),
            series,
            width,
            height,
        })
    }

    /// The chart of a `synfire mine --format json` document's `levels`.
    ///
    /// # Errors
    /// [`PlotError::Document`] naming the document when it has no `levels` or an empty
    /// one; [`PlotError::Input`] for a size out of range.
    pub fn from_document(
        doc: &MineDocument,
        width: Option<u32>,
        height: Option<u32>,
    ) -> Result<Self, PlotError> {
        let levels = match doc.levels.as_deref() {
            None => {
                return Err(
                    doc.error("no `levels` array: not a `synfire mine --format json` document")
                );
            }
            Some([]) => return Err(doc.error("`levels` is empty: the run mined no level")),
            Some(l) => l,
        };
        let min_count = doc
            .params
            .as_ref()
            .and_then(|p| p.min_count)
            .map(|m| format!(", min count {}", thousands(m)))
            .unwrap_or_default();
        let incomplete = if doc.complete {
            ""
        } else {
            " (incomplete run)"
        };
        let title = format!("{}: episodes per level{min_count}{incomplete}", doc.name());
        Self::new(&title, levels, width, height)
    }

    /// The bars drawn, in legend order.
    #[must_use]
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// The picture in `format`: PNG bytes or an SVG document.
    ///
    /// # Errors
    /// [`PlotError::Draw`] or [`PlotError::Png`] should the backend or encoder fail.
    pub fn render(&self, format: Format) -> Result<Vec<u8>, PlotError> {
        super::render(self, format)
    }
}

impl Draw for LevelsPlot {
    fn size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError> {
        root.fill(&WHITE).map_err(draw_err)?;
        let (header, body) = root.split_vertically(76);
        let max = self
            .series
            .iter()
            .flat_map(|s| s.values.iter().copied())
            .max()
            .unwrap_or(1)
            .max(1);
        // Room above the tallest bar for its number.
        #[allow(clippy::cast_precision_loss)]
        let top = (max as f64 * 4.0).max(10.0);
        let mut decades = Vec::new();
        let mut d = 1.0;
        while d <= top {
            decades.push(d);
            d *= 10.0;
        }
        let n = self.levels.len();
        #[allow(clippy::cast_precision_loss)]
        let x_max = n as f64 + 0.5;
        #[allow(clippy::cast_precision_loss)]
        let x_keys: Vec<f64> = (1..=n).map(|i| i as f64).collect();
        let levels = &self.levels;
        let x_label = |x: &f64| {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let i = x.round().max(1.0) as usize - 1;
            levels.get(i).map(ToString::to_string).unwrap_or_default()
        };
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let y_label = |y: &f64| thousands(y.round().max(0.0) as u64);
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .margin_right(24)
            .x_label_area_size(50)
            .y_label_area_size(text_width(&thousands(max.saturating_mul(10)), 14) + 44)
            .build_cartesian_2d(
                axis(0.5..x_max, x_keys),
                axis((FLOOR..top).log_scale(), decades),
            )
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .bold_line_style(RGBColor(0xE4, 0xE4, 0xE4))
            .x_desc("level (episode size N)")
            .y_desc("episodes (log scale)")
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()
            .map_err(draw_err)?;

        let k = self.series.len();
        #[allow(clippy::cast_precision_loss)]
        let bar = 0.8 / k as f64;
        // Bar width in pixels, to decide whether numbers fit above the bars.
        let bar_px = chart.backend_coord(&(1.0 + bar, 1.0)).0 - chart.backend_coord(&(1.0, 1.0)).0;
        let widest = self
            .series
            .iter()
            .flat_map(|s| s.values.iter())
            .map(|&v| text_width(&thousands(v), 12))
            .max()
            .unwrap_or(0);
        let numbers = i64::from(widest) <= i64::from(bar_px) + 6;
        let number_style = (FONT, 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        for (j, s) in self.series.iter().enumerate() {
            #[allow(clippy::cast_precision_loss)]
            let offset = -0.4 + j as f64 * bar;
            let bars = s
                .values
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v > 0)
                .map(|(i, &v)| {
                    #[allow(clippy::cast_precision_loss)]
                    let x0 = (i + 1) as f64 + offset;
                    #[allow(clippy::cast_precision_loss)]
                    let v = v as f64;
                    Rectangle::new([(x0, FLOOR), (x0 + bar * 0.92, v)], s.colour.filled())
                });
            chart.draw_series(bars).map_err(draw_err)?;
            if numbers {
                let texts = s.values.iter().enumerate().map(|(i, &v)| {
                    #[allow(clippy::cast_precision_loss)]
                    let x = (i + 1) as f64 + offset + bar * 0.46;
                    #[allow(clippy::cast_precision_loss)]
                    let y = (v as f64).max(FLOOR);
                    EmptyElement::at((x, y))
                        + Text::new(thousands(v), (0, -3), number_style.clone())
                });
                chart.draw_series(texts).map_err(draw_err)?;
            }
        }

        // Caption and legend above the axes.
        let centre = i32::try_from(self.width / 2).unwrap_or(0);
        header
            .draw(&Text::new(
                cut(&self.title, 120),
                (centre, 22),
                (FONT, 20)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Center)),
            ))
            .map_err(draw_err)?;
        let plot_left = chart.plotting_area().get_pixel_range().0.start - root.get_base_pixel().0;
        let legend_style = (FONT, 15)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Center));
        let mut x = plot_left.max(8);
        let y = 58;
        for s in &self.series {
            header
                .draw(&Rectangle::new(
                    [(x, y - 7), (x + 18, y + 7)],
                    s.colour.filled(),
                ))
                .map_err(draw_err)?;
            header
                .draw(&Text::new(s.name, (x + 26, y), legend_style.clone()))
                .map_err(draw_err)?;
            x += 26 + i32::try_from(text_width(s.name, 15)).unwrap_or(0) + 34;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(
        level: usize,
        candidates: usize,
        removed: usize,
        pre: usize,
        frequent: usize,
    ) -> LevelStats {
        LevelStats {
            level,
            candidates,
            removed_by_bounds: removed,
            eliminated_by_preelim: pre,
            frequent,
            seconds: 0.0,
            candidate_events: 0,
        }
    }

    #[test]
    fn series_and_errors() {
        let p = LevelsPlot::new(
            "t",
            &[level(1, 15, 0, 0, 15), level(2, 225, 159, 0, 56)],
            None,
            None,
        )
        .unwrap();
        let names: Vec<&str> = p.series().iter().map(|s| s.name).collect();
        assert_eq!(names, ["candidates", "removed by bounds", "frequent"]);
        assert_eq!(p.series()[2].values, [15, 56]);
        let p = LevelsPlot::new("t", &[level(1, 15, 0, 3, 12)], None, None).unwrap();
        assert_eq!(p.series().len(), 4);
        assert!(LevelsPlot::new("t", &[], None, None).is_err());
        let svg = String::from_utf8(p.render(Format::Svg).unwrap()).unwrap();
        assert!(svg.contains("eliminated by PreElim"));
    }
}
