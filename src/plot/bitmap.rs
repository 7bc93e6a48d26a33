//! The PNG backend: `plotters`' bitmap backend, with text drawn here. `plotters` 0.3.7 draws
//! `ab_glyph` text without each glyph's left side bearing, so a `1` or an `i` leaves a gap
//! after it (`1 0`, `ti me`); this backend places every glyph at its pen position (kerning
//! included) and delegates every other shape to the bitmap backend unchanged.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters::backend::{BitMapBackend, RGBPixel};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

/// An RGB bitmap in memory with correctly spaced text.
pub(crate) struct Bitmap<'a> {
    inner: BitMapBackend<'a, RGBPixel>,
    font: FontRef<'static>,
}

impl<'a> Bitmap<'a> {
    /// A backend drawing on `rgb` (shape `[height, width, 3]`), text in `font` (the bytes of
    /// a TrueType or OpenType font).
    ///
    /// # Errors
    /// A message when `rgb` is too small for the size or `font` cannot be read.
    pub(crate) fn new(
        rgb: &'a mut [u8],
        size: (u32, u32),
        font: &'static [u8],
    ) -> Result<Self, String> {
        let inner = BitMapBackend::<RGBPixel>::with_buffer_and_format(rgb, size)
            .map_err(|e| e.to_string())?;
        let font = FontRef::try_from_slice(font).map_err(|e| e.to_string())?;
        Ok(Self { inner, font })
    }
}

type Error<'a> = DrawingErrorKind<<BitMapBackend<'a, RGBPixel> as DrawingBackend>::ErrorType>;

impl<'a> DrawingBackend for Bitmap<'a> {
    type ErrorType = <BitMapBackend<'a, RGBPixel> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), Error<'a>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), Error<'a>> {
        self.inner.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> Result<(), Error<'a>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), Error<'a>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), Error<'a>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), Error<'a>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), Error<'a>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// Text on one baseline, each glyph at its pen position. The anchor's horizontal part
    /// is the start, middle or end of the advance width; its vertical part the top of the
    /// capitals, their middle, or the descender line. Rotations turn the text about `pos`.
    #[allow(clippy::cast_possible_truncation)]
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), Error<'a>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let font = self.font.as_scaled(PxScale::from(style.size() as f32));
        let mut glyphs = Vec::with_capacity(text.len());
        let mut pen = 0.0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = font.glyph_id(c);
            if let Some(p) = prev {
                pen += font.kern(p, id);
            }
            glyphs.push(id.with_scale_and_position(font.scale(), point(pen, 0.0)));
            pen += font.h_advance(id);
            prev = Some(id);
        }
        let cap = font
            .outline_glyph(font.scaled_glyph('H'))
            .map_or(font.ascent() * 0.75, |g| -g.px_bounds().min.y);
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0.0,
            HPos::Center => -pen / 2.0,
            HPos::Right => -pen,
        };
        let dy = match anchor.v_pos {
            VPos::Top => cap,
            VPos::Center => cap / 2.0,
            VPos::Bottom => font.descent(),
        };
        let transform = style.transform();
        let (w, h) = self.inner.get_size();
        let (w, h) = (i64::from(w), i64::from(h));
        let inner = &mut self.inner;
        let mut result = Ok(());
        for glyph in glyphs {
            let Some(outline) = font.outline_glyph(glyph) else {
                continue;
            };
            let bounds = outline.px_bounds();
            outline.draw(|x, y, coverage| {
                if result.is_err() || coverage <= 0.0 {
                    return;
                }
                let gx = (bounds.min.x + x as f32 + dx).round() as i32;
                let gy = (bounds.min.y + y as f32 + dy).round() as i32;
                let (tx, ty) = transform.transform(gx, gy);
                let (px, py) = (pos.0.saturating_add(tx), pos.1.saturating_add(ty));
                if (0..w).contains(&i64::from(px)) && (0..h).contains(&i64::from(py)) {
                    let c = BackendColor {
                        alpha: color.alpha * f64::from(coverage.min(1.0)),
                        rgb: color.rgb,
                    };
                    result = inner.draw_pixel((px, py), c);
                }
            });
            if result.is_err() {
                break;
            }
        }
        result
    }
}
