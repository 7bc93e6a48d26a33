//! The lower-bounding projection of the projection join (see [`super::join`], "The bound"
//! and "Rounding"): the first [`PROJECTION_DIMS`] orthonormal DCT-II coefficients of every
//! z-normalised subsequence, stored as f32 with a proven error bound.

use rayon::prelude::*;

use super::Subsequences;

/// DCT coefficients per subsequence `K` (fewer when `m <= K`).
pub const PROJECTION_DIMS: usize = 16;

/// The first `K` DCT-II coefficients of every z-normalised subsequence.
#[derive(Clone, Debug)]
pub struct Projection {
    /// Coefficients per subsequence `K` (what the bounds use, and the rounding slack of
    /// [`Projection::radius`]).
    pub dims: usize,
    /// Coefficients held in `coords` per subsequence: `K`, or only the grid's first ones
    /// where the device keeps the rest ([`Projection::from_leading_coords`]).
    pub stored: usize,
    /// Coordinates, dimension-major: `coords[f * N + i]` for `f < stored` (0 for invalid
    /// subsequences).
    pub coords: Vec<f32>,
    /// Bound on `|coords - exact|` per coordinate.
    pub coord_error: f64,
}

/// The orthonormal DCT-II vectors `f = 1..=k` of length `m`, row-major `[k][m]`.
#[must_use]
pub fn dct_basis(m: usize, k: usize) -> Vec<f64> {
    let scale = (2.0 / m as f64).sqrt();
    (1..=k)
        .flat_map(|f| {
            (0..m).map(move |t| {
                scale * (std::f64::consts::PI * (t as f64 + 0.5) * f as f64 / m as f64).cos()
            })
        })
        .collect()
}

/// `K` for subsequences of length `m`: at most [`PROJECTION_DIMS`], at most `m - 1`.
#[must_use]
pub fn projection_dims(m: usize) -> usize {
    PROJECTION_DIMS.min(m.saturating_sub(1)).max(1)
}

impl Projection {
    /// Projects every valid subsequence (in parallel; `N K m` multiply-adds).
    #[must_use]
    pub fn new(subs: &Subsequences<'_>) -> Self {
        let (m, n) = (subs.m, subs.count());
        let dims = projection_dims(m);
        let basis = dct_basis(m, dims);
        let mut rows = vec![0f32; n * dims];
        rows.par_chunks_mut(dims).enumerate().for_each(|(i, out)| {
            if !subs.valid[i] || subs.inv_std[i] == 0.0 {
                return;
            }
            let (mu, s) = (subs.mean[i], subs.inv_std[i]);
            let w = &subs.x[i..i + m];
            for (f, o) in out.iter_mut().enumerate() {
                let c = &basis[f * m..(f + 1) * m];
                let acc: f64 = w.iter().zip(c).map(|(v, c)| (v - mu) * c).sum();
                *o = (acc * s) as f32;
            }
        });
        Self::from_rows(&rows, n, dims, m)
    }

    /// From point-major rows `[N][K]` (as [`Projection::new`] or a device computed them).
    #[must_use]
    pub fn from_rows(rows: &[f32], n: usize, dims: usize, m: usize) -> Self {
        let mut coords = vec![0f32; n * dims];
        for (i, r) in rows.chunks(dims).enumerate() {
            for (f, &v) in r.iter().enumerate() {
                coords[f * n + i] = v;
            }
        }
        Self::from_coords(coords, dims, m)
    }

    /// From dimension-major coordinates `[K][N]`.
    #[must_use]
    pub fn from_coords(coords: Vec<f32>, dims: usize, m: usize) -> Self {
        Self::from_leading_coords(coords, dims, dims, m)
    }

    /// From the first `stored` of `dims` coefficients, dimension-major `[stored][N]`: enough
    /// to build grids (their first [`GRID_DIMS`](super::grid::GRID_DIMS) coordinates) when the device holds all `dims`
    /// and computes the bounds. `stored` is clamped to `1..=dims`.
    #[must_use]
    pub fn from_leading_coords(coords: Vec<f32>, stored: usize, dims: usize, m: usize) -> Self {
        Self {
            dims,
            stored: stored.clamp(1, dims.max(1)),
            coords,
            coord_error: (m as f64).sqrt() * f64::from(f32::EPSILON),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.coords.len() / self.stored.max(1)
    }

    /// Coordinate `f` of subsequence `i`.
    #[inline]
    #[must_use]
    pub fn at(&self, f: usize, i: usize) -> f32 {
        self.coords[f * self.count() + i]
    }

    /// The radius the f32 bounds are compared against so that no pair at distance `<= limit`
    /// is ever pruned: `limit (1 + 1e-5) + 8 sqrt(K) coord_error`.
    #[must_use]
    pub fn radius(&self, limit: f64) -> f64 {
        limit * (1.0 + 1e-5) + 8.0 * (self.dims as f64).sqrt() * self.coord_error
    }

    /// `radius(limit)^2` as the f32 the kernels compare against (rounded up).
    #[must_use]
    pub fn radius2_f32(&self, limit: f64) -> f32 {
        let r = self.radius(limit);
        let r2 = r * r * (1.0 + 1e-6);
        if r2 >= f64::from(f32::MAX) {
            f32::INFINITY
        } else {
            r2 as f32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dct_basis_is_orthonormal_and_orthogonal_to_constants() {
        for m in [2usize, 7, 100, 257] {
            let k = projection_dims(m);
            let b = dct_basis(m, k);
            for f in 0..k {
                let row = &b[f * m..(f + 1) * m];
                assert!(row.iter().sum::<f64>().abs() < 1e-9, "m {m} f {f}");
                for g in 0..k {
                    let dot: f64 = row
                        .iter()
                        .zip(&b[g * m..(g + 1) * m])
                        .map(|(a, b)| a * b)
                        .sum();
                    let want = if f == g { 1.0 } else { 0.0 };
                    assert!((dot - want).abs() < 1e-12, "m {m} f {f} g {g}: {dot}");
                }
            }
        }
    }

    #[test]
    fn projected_distance_lower_bounds_the_true_one() {
        let x = crate::synth::random_walk(3000, 5);
        let subs = Subsequences::new(&x, 40);
        let p = Projection::new(&subs);
        for (i, j) in [(0usize, 500usize), (10, 11), (7, 2900), (1234, 1240)] {
            let lb2: f64 = (0..p.dims)
                .map(|f| f64::from(p.at(f, i) - p.at(f, j)).powi(2))
                .sum();
            let d = subs.distance(i, j);
            assert!(
                lb2.sqrt() <= p.radius(d),
                "({i}, {j}): {} > {d}",
                lb2.sqrt()
            );
        }
    }
}
