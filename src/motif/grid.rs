//! The grid of one projection-join round (see [`super::join`]): points bucketed by the cells of
//! a grid of width `w` over their first [`GRID_DIMS`] projection coordinates, each cell with
//! its forward neighbours, so that every pair at distance `<= w` lies in a cell or a cell and
//! one of its listed neighbours.
//!
//! Built on the host for both the CPU and the GPU joins, once per round and several times on
//! samples to choose the first width, so its cost counts twice per search. The usual path packs
//! each point's cell key and id into one `u64`, sorts by the cell bits with a stable parallel
//! LSD radix sort (the ids arrive ascending, so equal cells keep them ascending: the same order
//! as sorting `(cell, id)`), finds the cell boundaries in parallel, and finds each cell's
//! neighbours by merging the sorted cell keys with their shifted copy per offset (a packed key
//! plus an offset is the key plus a constant, so the shifted keys stay sorted). Keys too wide
//! to pack fall back to a comparison sort and binary searches; both give the same grid
//! (`tests::all_paths_build_the_same_grid`).

use rayon::prelude::*;

use super::projection::{PROJECTION_DIMS, Projection};

/// Coordinates the grid is built on `d` (the first, highest-energy ones).
pub const GRID_DIMS: usize = 4;

/// Pairs a grid bounds: within each cell, and between each cell and its listed forward
/// neighbours (`nb_cell[nb_start[c]]` is the cell itself).
fn pairs_of(cell_start: &[u32], nb_start: &[u32], nb_cell: &[u32]) -> u64 {
    let size = |c: usize| u64::from(cell_start[c + 1] - cell_start[c]);
    (0..nb_start.len().saturating_sub(1))
        .into_par_iter()
        .map(|c| {
            let own = size(c);
            let list = &nb_cell[nb_start[c] as usize + 1..nb_start[c + 1] as usize];
            own * own.saturating_sub(1) / 2
                + list.iter().map(|&nc| own * size(nc as usize)).sum::<u64>()
        })
        .sum()
}

/// How [`Grid::build_by`] sorts the points into cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Build {
    /// Cell and id packed in a `u64`, radix-sorted by the cell bits.
    Radix,
    /// Packed cell keys with the ids, comparison-sorted (what `Radix` falls back to).
    #[cfg(test)]
    Packed,
    /// `[i32; 4]` keys with the ids, comparison-sorted.
    Plain,
}

/// Sorts `items` by bits `lo..lo + bits`, stably (items with equal bits keep their order):
/// least-significant-digit radix sort with 11-bit digits; each pass counts digits per chunk
/// in parallel, then scatters each chunk to its own ranges in parallel.
fn radix_sort_bits(items: &mut Vec<u64>, lo: u32, bits: u32) {
    const DIGIT: u32 = 11;
    /// Each chunk's scatter target; chunks write disjoint positions.
    struct Out(*mut u64);
    // SAFETY: shared across the scatter's threads, which write disjoint positions (below).
    unsafe impl Sync for Out {}
    let n = items.len();
    if n < 2 || bits == 0 {
        return;
    }
    let chunk = n.div_ceil(4 * rayon::current_num_threads()).max(1 << 14);
    let mut buf = vec![0u64; n];
    let mut shift = lo;
    while shift < lo + bits {
        let width = DIGIT.min(lo + bits - shift);
        let mask = (1u64 << width) - 1;
        let digit = |v: u64| ((v >> shift) & mask) as usize;
        let counts: Vec<Vec<usize>> = items
            .par_chunks(chunk)
            .map(|c| {
                let mut h = vec![0usize; 1 << width];
                for &v in c {
                    h[digit(v)] += 1;
                }
                h
            })
            .collect();
        // Digit-major, then chunk order: the stable positions.
        let mut starts = vec![vec![0usize; 1 << width]; counts.len()];
        let mut total = 0usize;
        for d in 0..1usize << width {
            for (s, h) in starts.iter_mut().zip(&counts) {
                s[d] = total;
                total += h[d];
            }
        }
        let out = Out(buf.as_mut_ptr());
        let out = &out;
        items
            .par_chunks(chunk)
            .zip(starts.into_par_iter())
            .for_each(|(c, mut next)| {
                for &v in c {
                    let d = digit(v);
                    // SAFETY: chunk `k` writes digit `d`'s items to
                    // `starts[k][d]..starts[k][d] + counts[k][d]`, ranges that are disjoint
                    // across chunks and digits and lie within `0..n` (they partition it), and
                    // `buf` has `n` elements and outlives the scatter.
                    unsafe { *out.0.add(next[d]) = v };
                    next[d] += 1;
                }
            });
        std::mem::swap(items, &mut buf);
        shift += width;
    }
}

/// A grid over the first `d` coordinates of some points, with each cell's forward
/// neighbours: the work list of one join round (shared by the CPU and GPU joins).
#[derive(Clone, Debug, Default)]
pub struct Grid {
    /// Cell width (the radius of the round).
    pub width: f64,
    /// Point ids (subsequence starts) sorted by cell.
    pub order: Vec<u32>,
    /// `cell_start[c]..cell_start[c + 1]` indexes `order`; `len = cells + 1`.
    pub cell_start: Vec<u32>,
    /// `nb_start[c]..nb_start[c + 1]` indexes `nb_cell`: cell `c` itself first, then its
    /// forward neighbours.
    pub nb_start: Vec<u32>,
    /// Neighbour cell ids.
    pub nb_cell: Vec<u32>,
    /// Pairs the round will bound.
    pub pairs: u64,
}

type Key = [i32; GRID_DIMS];

/// The cell index of coordinate `v` at `width`: non-decreasing in `v`, so the smallest and
/// largest keys of a set of points are those of its smallest and largest coordinates.
fn key_coord(v: f32, width: f64) -> i32 {
    // |p| <= sqrt(m) and width >= the rounding slack, so the quotient fits an i32.
    (f64::from(v) / width).floor().clamp(-2e9, 2e9) as i32
}

/// The grid's coordinate columns of `proj`: `cols[f][i]` for `f < d`, empty beyond.
fn columns(proj: &Projection, d: usize) -> [&[f32]; GRID_DIMS] {
    let n = proj.count();
    std::array::from_fn(|f| {
        if f < d {
            &proj.coords[f * n..(f + 1) * n]
        } else {
            &[][..]
        }
    })
}

fn key_of(cols: &[&[f32]; GRID_DIMS], i: usize, d: usize, width: f64) -> Key {
    let mut k = [0i32; GRID_DIMS];
    for (f, slot) in k.iter_mut().enumerate().take(d) {
        *slot = key_coord(cols[f][i], width);
    }
    k
}

/// The forward half of the `3^d - 1` neighbour offsets (first non-zero component `+1`).
fn forward_offsets(d: usize) -> Vec<Key> {
    let mut out = Vec::new();
    let total = 3usize.pow(d as u32);
    for code in 0..total {
        let mut k = [0i32; GRID_DIMS];
        let mut c = code;
        for slot in k.iter_mut().take(d) {
            *slot = (c % 3) as i32 - 1;
            c /= 3;
        }
        if k.iter().find(|&&v| v != 0) == Some(&1) {
            out.push(k);
        }
    }
    out
}

fn add(a: &Key, b: &Key) -> Key {
    let mut k = *a;
    for (x, y) in k.iter_mut().zip(b) {
        *x = x.saturating_add(*y);
    }
    k
}

/// Cell keys packed into a `u64`: coordinate `f` minus its smallest value over the points,
/// in `bits[f]` bits, the first coordinate highest, so that packed keys order as the keys do
/// (lexicographically). Each field keeps one spare value above the largest so that a
/// neighbour one step beyond either end is recognised as absent, never wrapped.
struct Packing {
    min: [i64; GRID_DIMS],
    max: [i64; GRID_DIMS],
    shift: [u32; GRID_DIMS],
    /// Bits of a packed key.
    bits: u32,
}

impl Packing {
    /// A packing of `keyed`'s keys, or `None` when their ranges need more than 64 bits.
    fn of(keyed: &[(Key, u32)]) -> Option<Self> {
        let (min, max) = keyed
            .par_iter()
            .map(|(k, _)| (k.map(i64::from), k.map(i64::from)))
            .reduce(
                || ([i64::MAX; GRID_DIMS], [i64::MIN; GRID_DIMS]),
                |(a_lo, a_hi), (b_lo, b_hi)| {
                    (
                        std::array::from_fn(|f| a_lo[f].min(b_lo[f])),
                        std::array::from_fn(|f| a_hi[f].max(b_hi[f])),
                    )
                },
            );
        if keyed.is_empty() {
            return None;
        }
        Self::from_bounds(min, max)
    }

    /// A packing of keys within `min..=max` per coordinate, or `None` when their ranges need
    /// more than 64 bits.
    fn from_bounds(min: [i64; GRID_DIMS], max: [i64; GRID_DIMS]) -> Option<Self> {
        let mut shift = [0u32; GRID_DIMS];
        let mut used = 0u32;
        for f in (0..GRID_DIMS).rev() {
            // Values 0..=range, plus one spare.
            let range = u64::try_from(max[f] - min[f]).ok()? + 1;
            let bits = 64 - range.leading_zeros();
            shift[f] = used;
            used += bits;
        }
        (used <= 64).then_some(Self {
            min,
            max,
            shift,
            bits: used,
        })
    }

    fn field(&self, f: usize) -> u64 {
        let bits = if f == 0 { 64 } else { self.shift[f - 1] } - self.shift[f];
        if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        }
    }

    fn pack(&self, k: &Key) -> u64 {
        (0..GRID_DIMS).fold(0u64, |code, f| {
            code | (((i64::from(k[f]) - self.min[f]) as u64) << self.shift[f])
        })
    }

    /// The packed key of the cell at `o` from the cell `code`; `None` when a coordinate
    /// leaves the points' range (no point lies there).
    fn neighbour(&self, code: u64, o: &Key) -> Option<u64> {
        let mut out = 0u64;
        for (f, &step) in o.iter().enumerate() {
            let v = ((code >> self.shift[f]) & self.field(f)) as i64 + i64::from(step);
            if v < 0 || v > self.max[f] - self.min[f] {
                return None;
            }
            out |= (v as u64) << self.shift[f];
        }
        Some(out)
    }
}

/// Grid dimensions for a projection of `dims` coordinates.
pub(crate) fn grid_dims(proj: &Projection) -> usize {
    GRID_DIMS.min(proj.dims)
}

/// The coefficients the host needs of a projection computed elsewhere: the grid's.
#[must_use]
pub fn host_dims(dims: usize) -> usize {
    GRID_DIMS.min(dims)
}

impl Grid {
    /// Builds the grid of `points` at cell width `width` (a radius from
    /// [`Projection::radius`], widened by `1e-9` so two coordinates within it always fall in
    /// the same or adjacent cells).
    #[must_use]
    pub fn build(proj: &Projection, points: &[u32], width: f64) -> Self {
        Self::build_by(proj, points, width, Build::Radix)
    }

    /// [`Grid::build`] by the given path (each falls back to the next when it does not
    /// apply: radix to packed keys to plain keys).
    fn build_by(proj: &Projection, points: &[u32], width: f64, path: Build) -> Self {
        let d = grid_dims(proj);
        let width = width * (1.0 + 1e-9);
        if path == Build::Radix
            && let Some(grid) = Self::build_radix(proj, points, width, d)
        {
            return grid;
        }
        let pack = path != Build::Plain;
        let cols = columns(proj, d);
        let keyed: Vec<(Key, u32)> = points
            .par_iter()
            .map(|&p| (key_of(&cols, p as usize, d, width), p))
            .collect();
        // Cells packed into one u64 sort several times faster than `[i32; 4]` keys, in the
        // same order (the first coordinate in the highest bits), so the grid is the same.
        if let Some(packing) = Packing::of(&keyed).filter(|_| pack) {
            let mut packed: Vec<(u64, u32)> = keyed
                .par_iter()
                .map(|(k, p)| (packing.pack(k), *p))
                .collect();
            drop(keyed);
            packed.par_sort_unstable();
            return Self::from_sorted(width, packed, d, |code, o| packing.neighbour(*code, o));
        }
        let mut keyed = keyed;
        keyed.par_sort_unstable();
        Self::from_sorted(width, keyed, d, |k, o| Some(add(k, o)))
    }

    /// The usual path (see the module documentation): `None` when the points are not
    /// ascending or their cells need more than 32 bits packed.
    fn build_radix(proj: &Projection, points: &[u32], width: f64, d: usize) -> Option<Self> {
        if points.is_empty() || !points.par_windows(2).all(|w| w[0] < w[1]) {
            return None;
        }
        let cols = columns(proj, d);
        let t0 = std::time::Instant::now();
        // Coordinate bounds; a NaN (which `min`/`max` would skip while its key is 0) sends the
        // build to the keyed path, which handles any key.
        let (lo, hi, nan) = points
            .par_iter()
            .fold(
                || {
                    (
                        [f32::INFINITY; GRID_DIMS],
                        [f32::NEG_INFINITY; GRID_DIMS],
                        false,
                    )
                },
                |(mut lo, mut hi, mut nan), &p| {
                    for f in 0..d {
                        let v = cols[f][p as usize];
                        lo[f] = lo[f].min(v);
                        hi[f] = hi[f].max(v);
                        nan |= v.is_nan();
                    }
                    (lo, hi, nan)
                },
            )
            .reduce(
                || {
                    (
                        [f32::INFINITY; GRID_DIMS],
                        [f32::NEG_INFINITY; GRID_DIMS],
                        false,
                    )
                },
                |(a, b, x), (c, e, y)| {
                    (
                        std::array::from_fn(|f| a[f].min(c[f])),
                        std::array::from_fn(|f| b[f].max(e[f])),
                        x || y,
                    )
                },
            );
        if nan {
            return None;
        }
        let mut min = [0i64; GRID_DIMS];
        let mut max = [0i64; GRID_DIMS];
        for f in 0..d {
            min[f] = i64::from(key_coord(lo[f], width));
            max[f] = i64::from(key_coord(hi[f], width));
        }
        let packing = Packing::from_bounds(min, max).filter(|p| p.bits <= 32)?;
        let mut items: Vec<u64> = points
            .par_iter()
            .map(|&p| (packing.pack(&key_of(&cols, p as usize, d, width)) << 32) | u64::from(p))
            .collect();
        let keyed_ms = t0.elapsed().as_secs_f64() * 1e3;
        radix_sort_bits(&mut items, 32, packing.bits);
        let sorted_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut cell_start: Vec<u32> = (0..items.len())
            .into_par_iter()
            .filter(|&k| k == 0 || items[k] >> 32 != items[k - 1] >> 32)
            .map(|k| k as u32)
            .collect();
        let keys: Vec<u64> = cell_start
            .par_iter()
            .map(|&s| items[s as usize] >> 32)
            .collect();
        cell_start.push(items.len() as u32);
        // Per forward offset, each cell's neighbour there (u32::MAX: none): the shifted keys
        // increase with the cell, so one forward merge over the sorted keys finds them all.
        let offsets = forward_offsets(d);
        let found: Vec<Vec<u32>> = offsets
            .par_iter()
            .map(|o| {
                let mut out = vec![u32::MAX; keys.len()];
                let mut j = 0usize;
                for (c, &k) in keys.iter().enumerate() {
                    let Some(want) = packing.neighbour(k, o) else {
                        continue;
                    };
                    while j < keys.len() && keys[j] < want {
                        j += 1;
                    }
                    if j < keys.len() && keys[j] == want {
                        out[c] = j as u32;
                    }
                }
                out
            })
            .collect();
        let mut nb_start = Vec::with_capacity(keys.len() + 1);
        let mut nb_cell = Vec::with_capacity(keys.len() * 4);
        for c in 0..keys.len() {
            nb_start.push(nb_cell.len() as u32);
            nb_cell.push(c as u32);
            nb_cell.extend(found.iter().map(|f| f[c]).filter(|&nc| nc != u32::MAX));
        }
        nb_start.push(nb_cell.len() as u32);
        let pairs = pairs_of(&cell_start, &nb_start, &nb_cell);
        let order = items.par_iter().map(|&v| v as u32).collect();
        tracing::trace!(
            points = points.len(),
            keyed_ms,
            sorted_ms,
            total_ms = t0.elapsed().as_secs_f64() * 1e3,
            "grid build (radix)"
        );
        Some(Self {
            width,
            order,
            cell_start,
            nb_start,
            nb_cell,
            pairs,
        })
    }

    /// The grid of points sorted by cell key; `neighbour(key, offset)` is the key of the cell
    /// at `offset` from `key` (`None`: no point can be there).
    fn from_sorted<K: Ord + Copy + Send + Sync>(
        width: f64,
        keyed: Vec<(K, u32)>,
        d: usize,
        neighbour: impl Fn(&K, &Key) -> Option<K> + Sync,
    ) -> Self {
        let mut cell_start = Vec::new();
        let mut keys: Vec<K> = Vec::new();
        for (pos, (k, _)) in keyed.iter().enumerate() {
            if keys.last() != Some(k) {
                keys.push(*k);
                cell_start.push(pos as u32);
            }
        }
        cell_start.push(keyed.len() as u32);
        let offsets = forward_offsets(d);
        let lists: Vec<(u32, u32)> = keys
            .par_iter()
            .enumerate()
            .flat_map_iter(|(c, k)| {
                let (keys, offsets, neighbour) = (&keys, &offsets, &neighbour);
                std::iter::once((c as u32, c as u32)).chain(offsets.iter().filter_map(move |o| {
                    let want = neighbour(k, o)?;
                    keys.binary_search(&want)
                        .ok()
                        .map(|nc| (c as u32, nc as u32))
                }))
            })
            .collect();
        let mut nb_start = Vec::with_capacity(keys.len() + 1);
        let mut nb_cell = Vec::with_capacity(lists.len());
        for (e, &(c, nc)) in lists.iter().enumerate() {
            if c == nc {
                nb_start.push(e as u32);
            }
            nb_cell.push(nc);
        }
        nb_start.push(nb_cell.len() as u32);
        let pairs = pairs_of(&cell_start, &nb_start, &nb_cell);
        Self {
            width,
            order: keyed.into_iter().map(|(_, p)| p).collect(),
            cell_start,
            nb_start,
            nb_cell,
            pairs,
        }
    }

    /// Cells in the grid.
    #[must_use]
    pub fn cells(&self) -> usize {
        self.cell_start.len().saturating_sub(1)
    }

    /// The points' coordinates in grid order, point-major, zero-padded to
    /// [`PROJECTION_DIMS`] (zeros add nothing to a bound).
    #[must_use]
    pub fn gather(&self, proj: &Projection) -> Vec<[f32; PROJECTION_DIMS]> {
        let n = proj.count();
        self.order
            .par_iter()
            .map(|&i| {
                let mut row = [0f32; PROJECTION_DIMS];
                for (f, v) in row.iter_mut().enumerate().take(proj.stored) {
                    *v = proj.coords[f * n + i as usize];
                }
                row
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::motif::Subsequences;

    #[test]
    fn grid_neighbours_cover_every_close_pair() {
        let x = crate::synth::random_walk(2000, 9);
        let subs = Subsequences::new(&x, 30);
        let p = Projection::new(&subs);
        let points: Vec<u32> = (0..subs.count() as u32).collect();
        let w = 1.5;
        let g = Grid::build(&p, &points, p.radius(w));
        let mut cell_of = vec![0u32; subs.count()];
        for c in 0..g.cells() {
            for pos in g.cell_start[c]..g.cell_start[c + 1] {
                cell_of[g.order[pos as usize] as usize] = c as u32;
            }
        }
        let listed = |a: u32, b: u32| {
            let l =
                &g.nb_cell[g.nb_start[a as usize] as usize..g.nb_start[a as usize + 1] as usize];
            l.contains(&b)
        };
        let mut close = 0;
        for i in (0..subs.count()).step_by(7) {
            for j in (i + 8..subs.count()).step_by(3) {
                if subs.distance(i, j) <= w {
                    close += 1;
                    let (a, b) = (cell_of[i], cell_of[j]);
                    assert!(listed(a, b) || listed(b, a), "pair ({i}, {j}) not covered");
                }
            }
        }
        assert!(close > 0, "the test needs some close pairs");
    }

    /// The radix path and packed cell keys give the same grid as `[i32; 4]` keys (order,
    /// cells, neighbour lists, pairs), at widths from a few cells to thousands, on a walk and
    /// a series with a long flat stretch and a jump (a wide key range in one coordinate), for
    /// ascending points (the radix path) and shuffled ones (its fallback).
    #[test]
    fn all_paths_build_the_same_grid() {
        let mut jumpy = crate::synth::random_walk(3000, 4);
        for (t, v) in jumpy.iter_mut().enumerate() {
            if (1000..1400).contains(&t) {
                *v = 0.0;
            } else if t >= 1400 {
                *v += 1e4;
            }
        }
        for x in [crate::synth::random_walk(3000, 11), jumpy] {
            let subs = Subsequences::new(&x, 40);
            let p = Projection::new(&subs);
            let points: Vec<u32> = (0..subs.count() as u32).step_by(2).collect();
            for w in [0.01, 0.2, 1.0, 3.0, 20.0] {
                let r = p.radius(w);
                let keyed: Vec<(Key, u32)> = points
                    .iter()
                    .map(|&i| {
                        let cols = columns(&p, grid_dims(&p));
                        (
                            key_of(&cols, i as usize, grid_dims(&p), r * (1.0 + 1e-9)),
                            i,
                        )
                    })
                    .collect();
                assert!(Packing::of(&keyed).is_some(), "width {w} should pack");
                let plain = Grid::build_by(&p, &points, r, Build::Plain);
                let mut shuffled = points.clone();
                shuffled.reverse();
                for (name, g) in [
                    ("radix", Grid::build_by(&p, &points, r, Build::Radix)),
                    ("packed", Grid::build_by(&p, &points, r, Build::Packed)),
                    (
                        "radix, shuffled",
                        Grid::build_by(&p, &shuffled, r, Build::Radix),
                    ),
                ] {
                    assert_eq!(g.order, plain.order, "{name}, width {w}");
                    assert_eq!(g.cell_start, plain.cell_start, "{name}, width {w}");
                    assert_eq!(g.nb_start, plain.nb_start, "{name}, width {w}");
                    assert_eq!(g.nb_cell, plain.nb_cell, "{name}, width {w}");
                    assert_eq!(g.pairs, plain.pairs, "{name}, width {w}");
                }
                assert!(plain.cells() > 1, "width {w}");
                // `pairs` against a count over the point pairs themselves.
                let mut cell_of = std::collections::HashMap::new();
                for c in 0..plain.cells() {
                    for pos in plain.cell_start[c]..plain.cell_start[c + 1] {
                        cell_of.insert(plain.order[pos as usize], c);
                    }
                }
                let listed = |a: usize, b: usize| {
                    plain.nb_cell[plain.nb_start[a] as usize..plain.nb_start[a + 1] as usize]
                        .contains(&(b as u32))
                };
                let mut want = 0u64;
                for (k, &a) in points.iter().enumerate() {
                    for &b in &points[k + 1..] {
                        let (ca, cb) = (cell_of[&a], cell_of[&b]);
                        want += u64::from(listed(ca, cb) || (ca != cb && listed(cb, ca)));
                    }
                }
                assert_eq!(plain.pairs, want, "width {w}");
            }
        }
    }

    /// Keys spanning more than 64 bits in all do not pack (the plain keys are used).
    #[test]
    fn wide_key_ranges_do_not_pack() {
        let keyed = vec![
            ([i32::MIN / 2, 0, 0, 0], 0u32),
            ([i32::MAX / 2, 1 << 30, -(1 << 30), 7], 1),
        ];
        assert!(Packing::of(&keyed).is_none());
        let narrow = vec![([-3, 0, 0, 0], 0u32), ([5, 2, -1, 7], 1)];
        let p = Packing::of(&narrow).expect("narrow keys pack");
        assert!(p.pack(&narrow[0].0) < p.pack(&narrow[1].0));
        assert_eq!(p.neighbour(p.pack(&narrow[0].0), &[-1, 0, 0, 0]), None);
        assert_eq!(
            p.neighbour(p.pack(&narrow[0].0), &[1, 1, 0, 0]),
            Some(p.pack(&[-2, 1, 0, 0]))
        );
    }

    proptest::proptest! {
        /// The radix sort orders by the chosen bits and keeps the input order among equal
        /// ones: it equals a stable comparison sort on those bits.
        #[test]
        fn radix_sort_is_a_stable_sort_on_the_bits(
            items in proptest::collection::vec(proptest::prelude::any::<u64>(), 0..40_000),
            lo in 0u32..40,
            bits in 0u32..25,
        ) {
            let bits = bits.min(64 - lo);
            let mask = if bits == 0 { 0 } else { (u64::MAX >> (64 - bits)) << lo };
            let mut want = items.clone();
            want.sort_by_key(|v| v & mask);
            let mut got = items;
            radix_sort_bits(&mut got, lo, bits);
            proptest::prop_assert_eq!(got, want);
        }
    }
}
