//! The backward pass (Cuturi & Blondel 2017, Algorithm 2) with checkpointed rows of `R`.
//!
//! The forward pass keeps row `b·K` of `R` for every block `b` (rows `b·K + 1 ..= (b+1)·K`).
//! The backward pass walks the blocks from the last to the first, recomputes the block's rows
//! from its checkpoint, and sweeps `E` over them from the bottom row up, right to left, with
//! two rows of `E` and of the costs. With `K = N` this is the plain full-matrix algorithm.

use std::num::NonZeroUsize;

use super::forward::{Pair, finite};
use super::{FULL_MATRIX_CELLS, Gradient, Options, Series, SoftDtwError, check_pair};

/// Rows per block: `opts.checkpoint_every`, else all rows when the full matrix is small
/// enough, else `⌈√N⌉`.
pub(crate) fn block_rows(n: usize, m: usize, every: Option<NonZeroUsize>) -> usize {
    let k = match every {
        Some(k) => k.get(),
        None if (n + 1).saturating_mul(m + 1) <= FULL_MATRIX_CELLS => n,
        None => n.isqrt() + usize::from(n.isqrt() * n.isqrt() < n),
    };
    k.clamp(1, n.max(1))
}

/// The number of `f64` cells of `R` the gradient of an `n × m` pair holds at once
/// (checkpoints, the current block and the next row), for documentation and tests.
#[must_use]
pub fn stored_cells(n: usize, m: usize, every: Option<NonZeroUsize>) -> usize {
    let k = block_rows(n, m, every);
    let blocks = n.div_ceil(k);
    (blocks + k + 1) * (m + 1)
}

/// The soft-DTW value and its gradients with respect to `x` and `y`.
///
/// # Units
/// `x` is `N × D`, `y` is `M × D` (time-major); `dx` is `N × D` and `dy` is `M × D`, in
/// the series' units (the value's units per unit of a sample). Memory:
/// [`stored_cells`]`(N, M, opts.checkpoint_every)` values of `R` plus `O(M)` — at most
/// `O(√N·M)` for long pairs, the full `(N+1)(M+1)` matrix only below
/// [`FULL_MATRIX_CELLS`](super::FULL_MATRIX_CELLS).
///
/// # Errors
/// As [`value`](super::value).
///
/// # References
/// Cuturi & Blondel 2017, Algorithm 2 (the `E` matrix) and the chain rule through
/// `d(i, j) = ‖x_i − y_j‖²`.
pub fn gradient(x: &Series, y: &Series, opts: &Options) -> Result<Gradient, SoftDtwError> {
    check_pair(x, y, opts, &|| "x".into(), &|| "y".into())?;
    let g = gradient_unchecked(x, y, opts);
    finite(g.value, || "(x, y)".into())?;
    Ok(g)
}

/// [`gradient`] of a validated pair; the value may be `+∞` on overflow (then the gradients
/// are meaningless and the caller reports [`SoftDtwError::Overflow`]).
pub(crate) fn gradient_unchecked(x: &Series, y: &Series, opts: &Options) -> Gradient {
    let p = Pair::new(x, y, opts);
    let (n, m, w) = (p.n, p.m, p.m + 1);
    let k = block_rows(n, m, opts.checkpoint_every);
    let blocks = n.div_ceil(k);

    // Forward: checkpoints at rows 0, K, 2K, … (the last block is computed in the backward
    // pass directly from its checkpoint).
    let mut checkpoints = vec![f64::INFINITY; blocks * w];
    checkpoints[..w].copy_from_slice(&p.first_row());
    {
        let mut prev = p.first_row();
        let mut cur = vec![f64::INFINITY; w];
        let (mut prev_cols, mut cur_cols) = ((0, 0), (1, 0));
        for i in 1..(blocks - 1) * k + 1 {
            cur_cols = p.row(i, &prev, &mut cur, cur_cols);
            std::mem::swap(&mut prev, &mut cur);
            std::mem::swap(&mut prev_cols, &mut cur_cols);
            if i % k == 0 {
                checkpoints[(i / k) * w..(i / k + 1) * w].copy_from_slice(&prev);
            }
        }
    }

    let mut block = vec![f64::INFINITY; k * w];
    let mut block_cols = vec![(1usize, 0usize); k];
    // Row i + 1 of R when i is the last row of a block (the first row of the block after).
    let mut next_row = vec![f64::INFINITY; w];
    // E and the costs of rows i + 1 (`*_next`) and i (`*_cur`); index j = 1..=M.
    let mut e_next = vec![0.0; w + 1];
    let mut e_cur = vec![0.0; w + 1];
    let mut d_next = vec![0.0; w + 1];
    let mut d_cur = vec![0.0; w + 1];
    let mut dx = vec![0.0; x.values.len()];
    let mut dy = vec![0.0; y.values.len()];
    let mut value = f64::INFINITY;
    let inv_gamma = 1.0 / p.gamma;
    let dims = p.dims;

    for b in (0..blocks).rev() {
        let start = b * k + 1;
        let end = ((b + 1) * k).min(n);
        // Recompute rows start..=end into `block`.
        for i in start..=end {
            let s = i - start;
            let (done, rest) = block.split_at_mut(s * w);
            let prev: &[f64] = if s == 0 {
                &checkpoints[b * w..(b + 1) * w]
            } else {
                &done[(s - 1) * w..]
            };
            block_cols[s] = p.row(i, prev, &mut rest[..w], block_cols[s]);
        }
        if b == blocks - 1 {
            value = block[(end - start) * w + m];
        }
        // Sweep E over the block, bottom row first.
        for i in (start..=end).rev() {
            let s = i - start;
            let r_i = &block[s * w..(s + 1) * w];
            let r_next: &[f64] = if i == end {
                &next_row
            } else {
                &block[(s + 1) * w..(s + 2) * w]
            };
            let has_next = i < n;
            let (lo, hi) = block_cols[s];
            if lo > hi {
                std::mem::swap(&mut e_next, &mut e_cur);
                std::mem::swap(&mut d_next, &mut d_cur);
                continue;
            }
            let xi = p.xi(i);
            let ys = p.y[(lo - 1) * dims..hi * dims].chunks_exact(dims);
            for (d, yj) in d_cur[lo..=hi].iter_mut().zip(ys) {
                *d = super::forward::cost(xi, yj);
            }
            let dxi = &mut dx[(i - 1) * dims..i * dims];
            for j in (lo..=hi).rev() {
                let r = r_i[j];
                if !r.is_finite() {
                    e_cur[j] = 0.0;
                    continue;
                }
                // Reads below are guarded by finiteness of R at the neighbour, which implies
                // the neighbour is in its row's columns and its E and cost were written.
                let mut e = if i == n && j == m { 1.0 } else { 0.0 };
                if has_next {
                    let rn = r_next[j];
                    if rn.is_finite() {
                        e += e_next[j] * ((rn - r - d_next[j]) * inv_gamma).exp();
                    }
                    if j < m {
                        let rd = r_next[j + 1];
                        if rd.is_finite() {
                            e += e_next[j + 1] * ((rd - r - d_next[j + 1]) * inv_gamma).exp();
                        }
                    }
                }
                if j < m {
                    let rr = r_i[j + 1];
                    if rr.is_finite() {
                        e += e_cur[j + 1] * ((rr - r - d_cur[j + 1]) * inv_gamma).exp();
                    }
                }
                e_cur[j] = e;
                if e != 0.0 {
                    let yj = p.yj(j);
                    let dyj = &mut dy[(j - 1) * dims..j * dims];
                    for c in 0..dims {
                        let g = 2.0 * e * (xi[c] - yj[c]);
                        dxi[c] += g;
                        dyj[c] -= g;
                    }
                }
            }
            std::mem::swap(&mut e_next, &mut e_cur);
            std::mem::swap(&mut d_next, &mut d_cur);
        }
        next_row.copy_from_slice(&block[..w]);
    }
    Gradient { value, dx, dy }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(seed: u64, len: usize, dims: usize) -> Series {
        // A small deterministic generator (no RNG needed for these checks).
        let mut s = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let values = (0..len * dims)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect();
        Series { dims, values }
    }

    #[test]
    fn block_sizes() {
        assert_eq!(block_rows(100, 100, None), 100);
        assert_eq!(block_rows(65_536, 65_536, None), 256);
        assert_eq!(block_rows(65_537, 10_000, None), 257);
        assert_eq!(block_rows(5, 5, NonZeroUsize::new(9)), 5);
        // √N·M scale, never N·M, for long pairs.
        let n = 65_536;
        assert!(stored_cells(n, n, None) <= 2 * 258 * (n + 1));
    }

    #[test]
    fn checkpointed_equals_full_and_value() {
        for &(n, m, dims, band) in &[(17, 13, 1, None), (9, 30, 2, Some(9)), (25, 25, 3, Some(2))] {
            let (x, y) = (series(n as u64, n, dims), series(m as u64 + 99, m, dims));
            let full = gradient(
                &x,
                &y,
                &Options {
                    band,
                    ..Options::new(0.3)
                },
            )
            .unwrap();
            let v = super::super::value(
                &x,
                &y,
                &Options {
                    band,
                    ..Options::new(0.3)
                },
            )
            .unwrap();
            assert_eq!(full.value, v);
            for k in 1..=n {
                let opts = Options {
                    band,
                    checkpoint_every: NonZeroUsize::new(k),
                    ..Options::new(0.3)
                };
                let g = gradient(&x, &y, &opts).unwrap();
                // Same recurrence, same order: identical bits.
                assert_eq!(g, full, "n={n} m={m} k={k}");
            }
        }
    }
}
