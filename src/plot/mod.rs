//! Pictures a physiologist checks a pattern with, drawn with `plotters` as PNG or SVG:
//!
//! * [`raster::Raster`]: a spike raster over a time window (one row per unit, a tick per
//!   spike) with the non-overlapped occurrences of chosen episodes highlighted, one colour per
//!   episode, each occurrence's spikes joined by a line;
//! * [`levels::LevelsPlot`]: the candidates, those removed by bounds (and by PreElim, when
//!   any) and the frequent episodes per level of a `synfire mine --format json` document, on
//!   a log scale;
//! * [`significance::SignificancePlot`]: the observed counts of the top episodes of a document
//!   made with `--surrogates` against their surrogate mean ± 2 standard deviations.
//!
//! Each picture is built from data first (every check happens there, so drawing has nothing
//! left to refuse) and then rendered to bytes by [`Format`]; [`write()`] puts them in a file.
//! Text is drawn with DejaVu Sans, embedded in the binary (no system font is read).
//!
//! This module sits in layer 4 beside `report`: it imports `episode`, `event`, `report` and
//! lower layers, reads documents but never mines, and never writes anywhere but the path it
//! is given.

mod bitmap;
pub mod document;
pub mod levels;
pub mod raster;
pub mod significance;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::backend::SVGBackend;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{
    AsRangedCoord, KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter,
};
use plotters::prelude::{DrawingArea, DrawingBackend, IntoDrawingArea, RGBColor};
use plotters::style::FontStyle;

pub use document::MineDocument;
pub use levels::LevelsPlot;
pub use raster::{Raster, RasterOptions, Rows};
pub use significance::SignificancePlot;

/// A picture that could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The output path's extension names no format this module writes.
    #[error("{}: a picture is written as `.png` or `.svg` (the file's extension chooses)", .path.display())]
    Format {
        /// The output path.
        path: PathBuf,
    },
    /// A file could not be read.
    #[error("reading {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the JSON document expected.
    #[error("{}: not a `synfire mine --format json` document: {source}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where and why parsing failed.
        source: serde_json::Error,
    },
    /// A document lacks what the picture needs.
    #[error("{}: {why}", .path.display())]
    Document {
        /// The document.
        path: PathBuf,
        /// What is missing or wrong.
        why: String,
    },
    /// Data or options the picture cannot be drawn from (an empty window, an unknown unit,
    /// too many episodes, a size out of range), said in words.
    #[error("{0}")]
    Input(String),
    /// The drawing backend failed (a bug or an exhausted resource).
    #[error("drawing the picture: {0}")]
    Draw(String),
    /// The PNG encoder failed.
    #[error("encoding the PNG: {0}")]
    Png(String),
    /// The embedded font could not be read (a broken build).
    #[error("the embedded font (DejaVu Sans) could not be loaded")]
    Font,
    /// The picture could not be written.
    #[error("writing {}: {source}", .path.display())]
    Write {
        /// The output path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The file format of a picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An RGB PNG (8 bits per channel).
    Png,
    /// An SVG document: every tick, line, bar and dot an element, every label a `<text>`
    /// (font family `sans-serif`).
    Svg,
}

impl Format {
    /// The format a path's extension names: `.png` or `.svg` (any case).
    ///
    /// # Errors
    /// [`PlotError::Format`] naming the path for any other extension, or none.
    pub fn from_path(path: &Path) -> Result<Self, PlotError> {
        match path
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .as_deref()
        {
            Some("png") => Ok(Self::Png),
            Some("svg") => Ok(Self::Svg),
            _ => Err(PlotError::Format {
                path: path.to_owned(),
            }),
        }
    }
}

/// The smallest width and height of a picture, pixels.
pub const MIN_SIDE: u32 = 320;
/// The largest width and height of a picture, pixels (a PNG of 8000 × 8000 is 192 MB in
/// memory while it is drawn).
pub const MAX_SIDE: u32 = 8000;

/// The colours of the highlighted episodes, in order (the first episode takes the first).
/// Chosen to stay apart from each other and from the grey of plain spikes, and readable on
/// white; Okabe–Ito's first, then darker Tableau hues.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(0x00, 0x72, 0xB2), // blue
    RGBColor(0xD5, 0x5E, 0x00), // vermillion
    RGBColor(0x00, 0x9E, 0x73), // bluish green
    RGBColor(0xCC, 0x79, 0xA7), // reddish purple
    RGBColor(0xE6, 0x9F, 0x00), // orange
    RGBColor(0x56, 0xB4, 0xE9), // sky blue
    RGBColor(0x8C, 0x56, 0x4B), // brown
    RGBColor(0x7F, 0x3C, 0x8D), // purple
    RGBColor(0x99, 0x99, 0x00), // olive
    RGBColor(0xE7, 0x29, 0x8A), // magenta
];

/// The font family every label is drawn in (DejaVu Sans, registered under this name).
pub(crate) const FONT: &str = "sans-serif";

/// Registers the embedded font once per process.
fn fonts() -> Result<(), PlotError> {
    static DONE: OnceLock<bool> = OnceLock::new();
    let ok = *DONE.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

/// A picture drawn on any `plotters` backend.
pub(crate) trait Draw {
    /// The picture's size, pixels `(width, height)`.
    fn size(&self) -> (u32, u32);

    /// Draws the whole picture on `root` (its size is [`Draw::size`]).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), PlotError>;
}

/// A backend error in words.
pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Checks a requested size: each side within [`MIN_SIDE`]..=[`MAX_SIDE`].
pub(crate) fn check_size(width: u32, height: u32) -> Result<(), PlotError> {
    for (name, v) in [("width", width), ("height", height)] {
        if !(MIN_SIDE..=MAX_SIDE).contains(&v) {
            return Err(PlotError::Input(format!(
                "a picture's {name} is {MIN_SIDE} to {MAX_SIDE} pixels, not {v}"
            )));
        }
    }
    Ok(())
}

/// Renders `picture` in `format`: the bytes of a PNG file or of an SVG document.
pub(crate) fn render(picture: &impl Draw, format: Format) -> Result<Vec<u8>, PlotError> {
    let (w, h) = picture.size();
    check_size(w, h)?;
    fonts()?;
    match format {
        Format::Svg => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
                picture.draw(&root)?;
                root.present().map_err(draw_err)?;
            }
            Ok(text.into_bytes())
        }
        Format::Png => {
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let backend = bitmap::Bitmap::new(&mut rgb, (w, h), dejavu::sans::regular())
                    .map_err(PlotError::Draw)?;
                let root = backend.into_drawing_area();
                picture.draw(&root)?;
                root.present().map_err(draw_err)?;
            }
            encode_png(&rgb, w, h)
        }
    }
}

/// `rgb` (shape `[height, width, 3]`, row-major) as a PNG file: 8-bit RGB, not interlaced,
/// every row unfiltered, one zlib stream in one `IDAT` chunk (PNG 1.2, ISO/IEC 15948).
fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, PlotError> {
    use std::io::Write;
    let png_err = |e: std::io::Error| PlotError::Png(e.to_string());
    let row = width as usize * 3;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    for line in rgb.chunks_exact(row) {
        z.write_all(&[0]).map_err(png_err)?;
        z.write_all(line).map_err(png_err)?;
    }
    let idat = z.finish().map_err(png_err)?;
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // Bit depth 8, colour type 2 (RGB), deflate, adaptive filtering, no interlace.
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    let mut out = Vec::with_capacity(idat.len() + 64);
    out.extend_from_slice(b"\x89PNG\r\n\x1a\n");
    for (kind, data) in [
        (b"IHDR", &ihdr[..]),
        (b"IDAT", &idat[..]),
        (b"IEND", &[][..]),
    ] {
        let len = u32::try_from(data.len())
            .map_err(|_| PlotError::Png("an image over 4 GiB compressed".into()))?;
        out.extend_from_slice(&len.to_be_bytes());
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        out.extend_from_slice(&crc.sum().to_be_bytes());
    }
    Ok(out)
}

/// Writes a rendered picture to `path` (created or truncated).
///
/// # Errors
/// [`PlotError::Write`] naming the path.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    std::fs::write(path, bytes).map_err(|source| PlotError::Write {
        path: path.to_owned(),
        source,
    })
}

/// Ticks at a round step (1, 2 or 5 × 10ᵏ) in `[lo, hi]`, about `target` of them, and the
/// step.
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let span = hi - lo;
    #[allow(clippy::cast_precision_loss)]
    let raw = span / target.max(1) as f64;
    if !(raw.is_finite() && raw > 0.0) {
        return (vec![lo], 1.0);
    }
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil();
    let mut ticks = Vec::new();
    let mut k = 0.0;
    while ticks.len() < 4 * target.max(1) {
        let t = (first + k) * step;
        if t > hi + step * 1e-9 {
            break;
        }
        ticks.push(t);
        k += 1.0;
    }
    (ticks, step)
}

/// An axis of `f64` values with its ticks given: `inner` maps values to pixels (linear or
/// log), the ticks are exactly `keys` (the pictures format their labels themselves).
pub(crate) struct Axis<R> {
    inner: R,
    keys: Vec<f64>,
}

/// The axis of `range` ticked at `keys`.
pub(crate) fn axis<A: AsRangedCoord<Value = f64>>(
    range: A,
    keys: Vec<f64>,
) -> Axis<A::CoordDescType> {
    Axis {
        inner: range.into(),
        keys,
    }
}

impl<R: Ranged<ValueType = f64>> Ranged for Axis<R> {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.keys.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

impl<R> ValueFormatter<f64> for Axis<R> {
    fn format(value: &f64) -> String {
        value.to_string()
    }
}

/// Decimals that tell apart ticks about `step` apart (0 for steps of 1 or more).
pub(crate) fn decimals(step: f64) -> usize {
    if !(step.is_finite() && step > 0.0) || step >= 1.0 {
        return 0;
    }
    // A small positive number of digits: the cast cannot truncate.
    let d = (-step.log10()).ceil().max(0.0) as usize;
    d.min(9)
}

/// A count as text with thin groups of thousands: `12345` → `12,345`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (k, c) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` cut to at most `max` characters (an ellipsis marks the cut).
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut s: String = text.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// An approximate width of `text` in pixels at font size `size` (DejaVu Sans averages about
/// 0.6 em per character), for sizing label areas before drawing.
pub(crate) fn text_width(text: &str, size: u32) -> u32 {
    let chars = u32::try_from(text.chars().count()).unwrap_or(u32::MAX);
    chars.saturating_mul(size).saturating_mul(3) / 5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_come_from_extensions() {
        assert_eq!(Format::from_path(Path::new("a.png")).unwrap(), Format::Png);
        assert_eq!(
            Format::from_path(Path::new("a/B.SVG")).unwrap(),
            Format::Svg
        );
        for bad in ["a.jpg", "a", "png"] {
            let e = Format::from_path(Path::new(bad)).unwrap_err().to_string();
            assert!(e.starts_with(bad) && e.contains(".png"), "{e}");
        }
    }

    #[test]
    fn helpers() {
        assert_eq!(decimals(2.0), 0);
        assert_eq!(decimals(0.2), 1);
        assert_eq!(decimals(0.05), 2);
        assert_eq!(decimals(f64::NAN), 0);
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abc", 4), "abc");
        assert!(check_size(100, 400).is_err() && check_size(400, 400).is_ok());
    }

    #[test]
    fn ticks_are_round() {
        let (t, step) = nice_ticks(12.3, 14.3, 10);
        assert!((step - 0.2).abs() < 1e-12);
        assert!((t[0] - 12.4).abs() < 1e-9 && *t.last().unwrap() <= 14.3 + 1e-9);
        let (t, step) = nice_ticks(0.0, 1.0, 10);
        assert!((step - 0.1).abs() < 1e-12 && t.len() == 11);
    }
}
