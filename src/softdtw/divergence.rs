//! The soft-DTW divergence `D(x, y) = sdtw(x, y) − (sdtw(x, x) + sdtw(y, y)) / 2`
//! (Blondel, Mensch & Vert 2021) and its gradient.

use super::backward::gradient_unchecked;
use super::forward::{Pair, finite};
use super::{Gradient, Options, Series, SoftDtwError, check_pair};

/// The soft-DTW divergence of `x` and `y`: 0 when `x = y`, and ≥ 0 for the squared
/// Euclidean cost (without a band; a band applies to all three terms alike).
///
/// # Units
/// As [`value`](super::value): squared units of the series.
///
/// # Errors
/// As [`value`](super::value).
///
/// # References
/// Blondel, Mensch & Vert 2021, Eq. for the normalised soft-DTW (`D_γ`).
pub fn divergence(x: &Series, y: &Series, opts: &Options) -> Result<f64, SoftDtwError> {
    check_pair(x, y, opts, &|| "x".into(), &|| "y".into())?;
    let xy = finite(Pair::new(x, y, opts).value(), || "(x, y)".into())?;
    let xx = finite(Pair::new(x, x, opts).value(), || "(x, x)".into())?;
    let yy = finite(Pair::new(y, y, opts).value(), || "(y, y)".into())?;
    Ok(combine(xy, xx, yy))
}

/// `xy − (xx + yy) / 2`.
pub(crate) fn combine(xy: f64, xx: f64, yy: f64) -> f64 {
    xy - 0.5 * (xx + yy)
}

/// The gradient of `s ↦ sdtw(s, s)` at `s`: `dx + dy` of the self-pair (both arguments move),
/// with the self value.
pub(crate) fn self_gradient(s: &Series, opts: &Options) -> (f64, Vec<f64>) {
    let g = gradient_unchecked(s, s, opts);
    let sum = g.dx.iter().zip(&g.dy).map(|(a, b)| a + b).collect();
    (g.value, sum)
}

/// The divergence and its gradients: `dx = ∂sdtw(x, y)/∂x − ½ ∇sdtw(x, x)`, and the same for
/// `y`.
///
/// # Units
/// `dx` is `N × D`, `dy` is `M × D`, time-major.
///
/// # Errors
/// As [`value`](super::value).
pub fn divergence_gradient(
    x: &Series,
    y: &Series,
    opts: &Options,
) -> Result<Gradient, SoftDtwError> {
    check_pair(x, y, opts, &|| "x".into(), &|| "y".into())?;
    let g = gradient_unchecked(x, y, opts);
    finite(g.value, || "(x, y)".into())?;
    let (xx, gx) = self_gradient(x, opts);
    finite(xx, || "(x, x)".into())?;
    let (yy, gy) = self_gradient(y, opts);
    finite(yy, || "(y, y)".into())?;
    Ok(Gradient {
        value: combine(g.value, xx, yy),
        dx: g.dx.iter().zip(&gx).map(|(a, s)| a - 0.5 * s).collect(),
        dy: g.dy.iter().zip(&gy).map(|(a, s)| a - 0.5 * s).collect(),
    })
}
