//! iSAX summaries and MINDIST lower bounds (Shieh & Keogh 2008; SING paper §2 and §4.3).
//!
//! * **Breakpoints** `B[0] = -inf < B[1] < … < B[255] < B[256] = +inf`, `B[s] = Φ⁻¹(s / 256)`
//!   (standard normal quantiles, so the 256 symbols of z-normalised data are equiprobable).
//!   Symbol `s` (8 bits) is the region `[B[s], B[s + 1])`. A `b`-bit prefix `p` of a symbol
//!   (cardinality `2^b`) is the region `[B[p·2^(8-b)], B[(p+1)·2^(8-b)])`: the cardinality-2^b
//!   quantiles are a subset of the cardinality-256 ones, so refining a node's cardinality
//!   (MESSI's binary splits) never leaves the breakpoint table.
//! * **iSAX word**: the 16 symbols of a series' PAA, 16 bytes per series ([`Word`]).
//! * **MINDIST**: for the query's PAA `q_j` and a region `[lo_j, hi_j]` per segment,
//!   `MINDIST² = Σ_j l_j · gap(q_j, lo_j, hi_j)²` with `gap` the distance from a value to an
//!   interval and `l_j` the segment length ([`crate::search::paa`]).
//!
//! **Lower-bound property** (tested in `tests/search.rs`): for a series `x` whose PAA `x_j`
//! lies in its region, `ED(q, x)² = Σ_j Σ_{i∈j} (q_i − x_i)² ≥ Σ_j l_j (q_j − x_j)²`
//! (Cauchy–Schwarz per segment) `≥ Σ_j l_j gap(q_j, lo_j, hi_j)²`, since `x_j ∈ [lo_j, hi_j]`
//! means `|q_j − x_j| ≥ gap`. A node's region contains the regions of every series below it,
//! so a node's MINDIST bounds all of them.
//!
//! SING (§4.3) evaluates breakpoints on the GPU with a cubic polynomial ("BreakPoly"), an
//! approximation that can move a breakpoint past the PAA value and so break the lower bound.
//! synfire keeps the exact breakpoints: per query it fills a table
//! `T[j][s] = l_j · gap(q_j, B[s], B[s + 1])²` (16 × 256 f64, 32 KiB) once, and a series'
//! bound is `Σ_j T[j][word_j]`, sixteen lookups, summed in segment order by the CPU and by
//! the GPU kernel alike (bit-identical results).

use statrs::distribution::{ContinuousCDF, Normal};

use super::paa::{SEGMENTS, Segments};

/// Bits per iSAX symbol (cardinality 256).
pub const SYMBOL_BITS: u8 = 8;
/// Symbols per segment (cardinality).
pub const CARDINALITY: usize = 1 << SYMBOL_BITS;

/// An iSAX word at full cardinality: one symbol per PAA segment (16 bytes).
pub type Word = [u8; SEGMENTS];

/// Pruning slack, relative to the squared BSF (see [`prunable`]).
pub const SLACK_RELATIVE: f64 = 1e-9;
/// Pruning slack, absolute, in squared-distance units (see [`prunable`]).
pub const SLACK_ABSOLUTE: f64 = 1e-9;

/// Whether a squared lower bound `lb_sq` proves a series (or node) cannot be among the
/// answers while the squared BSF is `bsf_sq`: `lb_sq > bsf_sq (1 + 1e-9) + 1e-9`.
///
/// The comparison is strict, so a series at exactly the BSF (a tie, which the smallest id
/// wins) is never pruned, and the slack absorbs the rounding of the PAA and of the bound
/// (both f64), many orders of magnitude larger than that rounding. Every path (CPU workers,
/// the CPU and GPU lower-bound producers, `kernels/search.cu`) uses this same rule.
#[inline]
#[must_use]
pub fn prunable(lb_sq: f64, bsf_sq: f64) -> bool {
    lb_sq > bsf_sq * (1.0 + SLACK_RELATIVE) + SLACK_ABSOLUTE
}

/// Distance from `v` to the interval `[lo, hi]` (0 inside).
#[inline]
#[must_use]
pub fn gap(v: f64, lo: f64, hi: f64) -> f64 {
    if v < lo {
        lo - v
    } else if v > hi {
        v - hi
    } else {
        0.0
    }
}

/// The breakpoint table `B[0..=256]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Breakpoints {
    b: Box<[f64; CARDINALITY + 1]>,
}

impl Breakpoints {
    /// The standard-normal quantiles `B[s] = Φ⁻¹(s / 256)` (statrs), made exactly symmetric
    /// (`B[256 − s] = −B[s]`, `B[128] = 0`).
    ///
    /// # Panics
    /// Never (the standard normal is a valid distribution).
    #[must_use]
    pub fn standard() -> Self {
        let normal = Normal::new(0.0, 1.0).expect("N(0, 1) is valid");
        let mut b = Box::new([0.0; CARDINALITY + 1]);
        b[0] = f64::NEG_INFINITY;
        b[CARDINALITY] = f64::INFINITY;
        for s in 1..CARDINALITY / 2 {
            let v = normal.inverse_cdf(s as f64 / CARDINALITY as f64);
            b[s] = v;
            b[CARDINALITY - s] = -v;
        }
        b[CARDINALITY / 2] = 0.0;
        Self { b }
    }

    /// Breakpoints from the 255 finite values `B[1..=255]` (as stored in an index).
    ///
    /// # Errors
    /// A message when there are not 255 values or they are not finite and strictly
    /// increasing.
    pub fn from_inner(values: &[f64]) -> Result<Self, String> {
        if values.len() != CARDINALITY - 1 {
            return Err(format!(
                "{} breakpoints, expected {}",
                values.len(),
                CARDINALITY - 1
            ));
        }
        if values.iter().any(|v| !v.is_finite()) || values.windows(2).any(|w| w[0] >= w[1]) {
            return Err("breakpoints are not finite and strictly increasing".into());
        }
        let mut b = Box::new([0.0; CARDINALITY + 1]);
        b[0] = f64::NEG_INFINITY;
        b[CARDINALITY] = f64::INFINITY;
        b[1..CARDINALITY].copy_from_slice(values);
        Ok(Self { b })
    }

    /// The 255 finite breakpoints `B[1..=255]`.
    #[must_use]
    pub fn inner(&self) -> &[f64] {
        &self.b[1..CARDINALITY]
    }

    /// `B[s]`, `s <= 256`.
    ///
    /// # Panics
    /// When `s > 256`.
    #[inline]
    #[must_use]
    pub fn at(&self, s: usize) -> f64 {
        self.b[s]
    }

    /// The 8-bit symbol of a PAA value: the `s` with `B[s] <= v < B[s + 1]`.
    #[must_use]
    pub fn symbol(&self, v: f64) -> u8 {
        // Count of finite breakpoints <= v, in 0..=255.
        self.b[1..CARDINALITY].partition_point(|&x| x <= v) as u8
    }

    /// The region `[lo, hi]` of the `bits`-bit prefix `prefix` (`1 <= bits <= 8`).
    #[inline]
    #[must_use]
    pub fn region(&self, prefix: u8, bits: u8) -> (f64, f64) {
        let shift = u32::from(SYMBOL_BITS - bits.clamp(1, SYMBOL_BITS));
        let p = usize::from(prefix);
        (self.b[p << shift], self.b[(p + 1) << shift])
    }

    /// The iSAX word of a PAA.
    #[must_use]
    pub fn word(&self, paa: &[f64; SEGMENTS]) -> Word {
        let mut w = [0; SEGMENTS];
        for (s, v) in w.iter_mut().zip(paa) {
            *s = self.symbol(*v);
        }
        w
    }
}

/// The root key of a word: the first (most significant) bit of each segment's symbol,
/// segment 0 in bit 15 (MESSI's 2^16 root children).
#[inline]
#[must_use]
pub fn root_key(w: &Word) -> u16 {
    w.iter()
        .fold(0u16, |k, &s| (k << 1) | u16::from(s >> (SYMBOL_BITS - 1)))
}

/// MINDIST² between a query PAA and a node's region (`prefix`/`bits` per segment).
#[must_use]
pub fn node_lb_sq(
    paa: &[f64; SEGMENTS],
    segments: &Segments,
    bp: &Breakpoints,
    prefix: &Word,
    bits: &[u8; SEGMENTS],
) -> f64 {
    let mut acc = 0.0;
    for j in 0..SEGMENTS {
        let (lo, hi) = bp.region(prefix[j], bits[j]);
        let g = gap(paa[j], lo, hi);
        acc += segments.weight(j) * g * g;
    }
    acc
}

/// The per-query table `T[j][s] = l_j · gap(q_j, B[s], B[s + 1])²`, row-major `[16][256]`.
#[derive(Clone, Debug)]
pub struct QueryTable {
    t: Box<[f64; SEGMENTS * CARDINALITY]>,
}

impl QueryTable {
    /// The table of a query PAA.
    #[must_use]
    pub fn new(paa: &[f64; SEGMENTS], segments: &Segments, bp: &Breakpoints) -> Self {
        let mut t = Box::new([0.0; SEGMENTS * CARDINALITY]);
        for j in 0..SEGMENTS {
            let w = segments.weight(j);
            for s in 0..CARDINALITY {
                let g = gap(paa[j], bp.at(s), bp.at(s + 1));
                t[j * CARDINALITY + s] = w * g * g;
            }
        }
        Self { t }
    }

    /// MINDIST² of a series' word: `Σ_j T[j][w_j]`, summed in segment order from 0.0 (the
    /// order `kernels/search.cu` uses).
    #[inline]
    #[must_use]
    pub fn lb_sq(&self, w: &Word) -> f64 {
        let mut acc = 0.0;
        for (j, &s) in w.iter().enumerate() {
            acc += self.t[j * CARDINALITY + usize::from(s)];
        }
        acc
    }

    /// The table, shape `[16 * 256]`.
    #[must_use]
    pub fn as_slice(&self) -> &[f64] {
        &self.t[..]
    }
}

/// MINDIST² of the 2^16 root children by key: each root child has 1 bit per segment, so its
/// bound is `hi[key >> 8] + lo[key & 255]`, two lookups (segments 0–7 and 8–15).
#[derive(Clone, Debug)]
pub struct RootBounds {
    hi: [f64; 256],
    lo: [f64; 256],
}

impl RootBounds {
    /// The tables of a query PAA.
    #[must_use]
    pub fn new(paa: &[f64; SEGMENTS], segments: &Segments, bp: &Breakpoints) -> Self {
        let term = |j: usize, bit: u8| {
            let (lo, hi) = bp.region(bit, 1);
            let g = gap(paa[j], lo, hi);
            segments.weight(j) * g * g
        };
        let half = |first: usize| {
            let mut out = [0.0; 256];
            for (byte, o) in out.iter_mut().enumerate() {
                let mut acc = 0.0;
                for b in 0..8 {
                    let bit = ((byte >> (7 - b)) & 1) as u8;
                    acc += term(first + b, bit);
                }
                *o = acc;
            }
            out
        };
        Self {
            hi: half(0),
            lo: half(8),
        }
    }

    /// MINDIST² of root child `key`.
    #[inline]
    #[must_use]
    pub fn lb_sq(&self, key: u16) -> f64 {
        self.hi[usize::from(key >> 8)] + self.lo[usize::from(key & 0xff)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn breakpoints_are_normal_quantiles() {
        let b = Breakpoints::standard();
        assert_eq!(b.at(128), 0.0);
        assert!((b.at(64) - (-0.674_489_750_196_081_7)).abs() < 1e-12);
        assert!((b.at(192) - 0.674_489_750_196_081_7).abs() < 1e-12);
        assert!(b.inner().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(Breakpoints::from_inner(b.inner()).unwrap(), b);
        assert!(Breakpoints::from_inner(&b.inner()[1..]).is_err());
    }

    #[test]
    fn symbols_and_regions_agree() {
        let b = Breakpoints::standard();
        for v in [-10.0, -1.0, -1e-300, 0.0, 1e-9, 0.5, 3.0, 100.0] {
            let s = b.symbol(v);
            let (lo, hi) = b.region(s, 8);
            assert!(lo <= v && v <= hi, "{v} not in symbol {s}");
            for bits in 1..=8u8 {
                let (lo, hi) = b.region(s >> (8 - bits), bits);
                assert!(lo <= v && v <= hi);
            }
        }
        assert_eq!(b.symbol(f64::NEG_INFINITY), 0);
        assert_eq!(b.symbol(0.0), 128);
        assert_eq!(root_key(&[255; 16]), u16::MAX);
        assert_eq!(
            root_key(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]),
            0x8001
        );
    }

    #[test]
    fn table_root_and_node_bounds_agree() {
        let b = Breakpoints::standard();
        let segs = Segments::new(100);
        let paa: [f64; 16] = std::array::from_fn(|j| (j as f64 - 7.5) / 3.0);
        let t = QueryTable::new(&paa, &segs, &b);
        let roots = RootBounds::new(&paa, &segs, &b);
        let w: Word = std::array::from_fn(|j| (j * 37 % 256) as u8);
        let full = node_lb_sq(&paa, &segs, &b, &w, &[8; 16]);
        assert!((t.lb_sq(&w) - full).abs() <= 1e-12 * (1.0 + full));
        let key = root_key(&w);
        let prefix: Word = std::array::from_fn(|j| w[j] >> 7);
        let node = node_lb_sq(&paa, &segs, &b, &prefix, &[1; 16]);
        assert!((roots.lb_sq(key) - node).abs() <= 1e-12 * (1.0 + node));
        assert!(node <= full + 1e-12);
        assert!(!prunable(1.0, 1.0));
        assert!(prunable(1.0 + 1e-6, 1.0));
    }
}
