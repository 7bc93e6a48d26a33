//! The Sakoe-Chiba band for series of unequal lengths (definition in the module docs of
//! [`crate::softdtw`]): which columns of each row of `R` are computed, and whether the end cell
//! can be reached.

/// The cells of an `N × M` alignment inside a Sakoe-Chiba band of half-width `W`:
/// `(i, j)` (1-based) is inside iff `|i·M − j·N| ≤ W·min(N, M)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    n: usize,
    m: usize,
    /// `W·min(N, M)`, or `None` for no band.
    slack: Option<i128>,
}

impl Band {
    /// The band of half-width `w` (`None`: every cell) for lengths `n` and `m`.
    #[must_use]
    pub fn new(n: usize, m: usize, w: Option<usize>) -> Self {
        // `W ≥ max(N, M)` admits every cell (|i·M − j·N| ≤ N·M), so clamping keeps the
        // arithmetic below far from overflow without changing the band.
        let slack = w.map(|w| w.min(n.max(m)) as i128 * n.min(m) as i128);
        Self { n, m, slack }
    }

    /// The columns `[lo, hi]` (1-based, inclusive) of row `i` (1-based) inside the band and
    /// the matrix; `lo > hi` when the row has none. Without a band: `[1, M]`.
    #[must_use]
    pub fn range(&self, i: usize) -> (usize, usize) {
        let Some(s) = self.slack else {
            return (1, self.m);
        };
        let (n, m, i) = (self.n as i128, self.m as i128, i as i128);
        // j·N ≥ i·M − s  and  j·N ≤ i·M + s.
        let lo = -((s - i * m).div_euclid(n)); // ⌈(i·M − s)/N⌉
        let hi = (i * m + s).div_euclid(n); // ⌊(i·M + s)/N⌋
        let lo = lo.max(1) as usize;
        let hi = hi.min(m).max(0) as usize;
        (lo, hi)
    }

    /// Whether a warping path inside the band reaches `(N, M)` from `(1, 1)`.
    ///
    /// # Errors
    /// The narrowest half-width that does reach it, when this one does not.
    pub fn check(&self) -> Result<(), usize> {
        if self.reachable() {
            return Ok(());
        }
        // Reachability is monotone in W and W = max(N, M) admits every cell.
        let (mut lo, mut hi) = (0, self.n.max(self.m));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if Self::new(self.n, self.m, Some(mid)).reachable() {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Err(lo)
    }

    fn reachable(&self) -> bool {
        if self.n == 0 || self.m == 0 {
            return false;
        }
        // Reachable columns of the previous row: a path enters row i at a column in
        // [rlo, rhi + 1] (a vertical or diagonal step) and then moves right.
        let (lo, hi) = self.range(1);
        if lo != 1 || hi < 1 {
            return false;
        }
        let (mut rlo, mut rhi) = (1, hi);
        for i in 2..=self.n {
            let (lo, hi) = self.range(i);
            let enter = rlo.max(lo);
            if enter > hi.min(rhi + 1) {
                return false;
            }
            (rlo, rhi) = (enter, hi);
        }
        rhi == self.m
    }

    /// Number of cells inside the band (the work of one pass).
    #[must_use]
    pub fn cells(&self) -> u128 {
        (1..=self.n)
            .map(|i| {
                let (lo, hi) = self.range(i);
                hi.saturating_sub(lo).saturating_add(usize::from(hi >= lo)) as u128
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, cell by cell.
    fn inside(n: usize, m: usize, w: usize, i: usize, j: usize) -> bool {
        (i as i128 * m as i128 - j as i128 * n as i128).abs() <= (w * n.min(m)) as i128
    }

    #[test]
    fn ranges_match_the_definition() {
        for n in 1..12 {
            for m in 1..12 {
                for w in 0..6 {
                    let b = Band::new(n, m, Some(w));
                    for i in 1..=n {
                        let (lo, hi) = b.range(i);
                        for j in 1..=m {
                            assert_eq!(
                                (lo..=hi).contains(&j),
                                inside(n, m, w, i, j),
                                "n={n} m={m} w={w} i={i} j={j}"
                            );
                        }
                    }
                    assert!(b.range(n).1 == m, "end cell inside");
                }
            }
        }
    }

    #[test]
    fn equal_lengths_are_the_usual_band_and_reachable() {
        let b = Band::new(10, 10, Some(2));
        assert_eq!(b.range(1), (1, 3));
        assert_eq!(b.range(5), (3, 7));
        assert_eq!(b.check(), Ok(()));
        assert_eq!(Band::new(10, 10, Some(0)).check(), Ok(()));
        assert_eq!(Band::new(10, 10, Some(0)).cells(), 10);
        assert_eq!(Band::new(10, 7, None).cells(), 70);
        assert_eq!(Band::new(10, 7, Some(10)).cells(), 70);
    }

    #[test]
    fn unequal_lengths_need_a_wide_enough_band() {
        // N = 3, M = 10: the stretched diagonal; (1, 1) is |10 − 3| = 7 ≤ 3W away.
        assert_eq!(Band::new(3, 10, Some(2)).check(), Err(3));
        assert_eq!(Band::new(3, 10, Some(3)).check(), Ok(()));
        assert_eq!(Band::new(10, 3, Some(0)).check(), Err(3));
        // Reachability agrees with a brute-force search over the cells.
        for n in 1..9 {
            for m in 1..9 {
                for w in 0..9 {
                    let mut reach = vec![vec![false; m + 1]; n + 1];
                    reach[0][0] = true;
                    for i in 1..=n {
                        for j in 1..=m {
                            reach[i][j] = inside(n, m, w, i, j)
                                && (reach[i - 1][j - 1] || reach[i - 1][j] || reach[i][j - 1]);
                        }
                    }
                    assert_eq!(
                        Band::new(n, m, Some(w)).check().is_ok(),
                        reach[n][m],
                        "n={n} m={m} w={w}"
                    );
                }
            }
        }
    }
}
