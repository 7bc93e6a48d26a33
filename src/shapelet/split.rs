//! Splits of a node's series by their distances to a candidate: information gain (Eqs. 3–4),
//! the separation gap, the canonical best split, and the bounded scan the fast paths run on
//! approximate distances.
//!
//! # Gain
//!
//! With `n` series, class totals `t_c`, left counts `l_c` (`r_c = t_c − l_c`) and
//! `F(k) = k ln k` (`F(0) = 0`) read from one table ([`EntropyTable`]):
//! `H = F(n) − Σ_c F(t_c)`, `H_L = F(n_L) − Σ_c F(l_c)`, `H_R = F(n_R) − Σ_c F(r_c)` and the
//! information gain (Eq. 3, in nats) is `(H − (H_L + H_R)) / n`, sums in class order. It is a
//! function of the counts alone, computed by the same operations on every path (the GPU reads
//! the same table), so one split has one gain bit for bit; mirrored splits (sides swapped)
//! and, for two classes, label swaps give identical values.
//!
//! # Canonical best split
//!
//! Distances `d_j = sqrt(D_j)` sorted ascending (ties by series); a split lies between two
//! consecutive *distinct* distances, left = the first `k`. Its gap is
//! `S_R / n_R − S_L / n_L` with `S_L` summed ascending and `S_R` summed from the largest
//! distance down, and its threshold `θ = (d_k + d_{k+1}) / 2` (Eq. 4), or `d_k` should that
//! midpoint round up to `d_{k+1}`, so that `d ≤ θ` is exactly the left side. The best split
//! has the largest gain, then the largest gap, then the smallest `k`.

/// `F(k) = k ln k` for `k = 0..=n`: the one source of logarithms of the gain.
#[derive(Clone, Debug, PartialEq)]
pub struct EntropyTable {
    xlogx: Vec<f64>,
}

impl EntropyTable {
    /// The table for up to `n` series.
    #[must_use]
    pub fn new(n: usize) -> Self {
        Self {
            xlogx: (0..=n)
                .map(|k| {
                    if k == 0 {
                        0.0
                    } else {
                        let x = k as f64;
                        x * x.ln()
                    }
                })
                .collect(),
        }
    }

    /// The table values `F(0..=n)`, shape `[n + 1]` (uploaded to the GPU).
    #[must_use]
    pub fn values(&self) -> &[f64] {
        &self.xlogx
    }

    /// `F(size) − Σ_c F(counts_c)`, sums in class order.
    fn side(&self, size: usize, counts: impl Iterator<Item = usize>) -> f64 {
        let mut acc = 0.0;
        for c in counts {
            acc += self.xlogx[c];
        }
        self.xlogx[size] - acc
    }

    /// `F(n) − Σ_c F(t_c)` for class totals `total` (`n = Σ t_c`): `n` times the node's
    /// entropy, the first term of [`EntropyTable::gain`], computed the same way.
    #[must_use]
    pub fn total_term(&self, total: &[u32]) -> f64 {
        let n: usize = total.iter().map(|&t| t as usize).sum();
        self.side(n, total.iter().map(|&t| t as usize))
    }

    /// Information gain (Eq. 3, nats) of the split with left class counts `left` among class
    /// totals `total` (same length; `left[c] <= total[c]`).
    ///
    /// # Panics
    /// If a count exceeds the table's `n` or `left[c] > total[c]`.
    #[must_use]
    pub fn gain(&self, left: &[u32], total: &[u32]) -> f64 {
        let n: usize = total.iter().map(|&t| t as usize).sum();
        let nl: usize = left.iter().map(|&t| t as usize).sum();
        let h = self.side(n, total.iter().map(|&t| t as usize));
        let hl = self.side(nl, left.iter().map(|&c| c as usize));
        let hr = self.side(
            n - nl,
            left.iter().zip(total).map(|(&c, &t)| (t - c) as usize),
        );
        (h - (hl + hr)) / n as f64
    }
}

/// The best split of a node's series by their distances (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    /// Information gain, nats.
    pub gain: f64,
    /// Separation gap (mean right distance minus mean left distance).
    pub gap: f64,
    /// Threshold θ: distance `≤ θ` goes left.
    pub threshold: f64,
    /// Series on the left.
    pub left: usize,
}

/// The canonical best split of series with squared distances `d2` (shape `[n]`) and classes
/// `classes` (`< totals.len()`), or `None` when all distances are equal.
///
/// # Panics
/// If `classes` is shorter than `d2`, a class id is not below `totals.len()`, or `n`
/// exceeds the table.
#[must_use]
pub fn best_split(
    d2: &[f64],
    classes: &[usize],
    totals: &[u32],
    table: &EntropyTable,
) -> Option<Split> {
    let n = d2.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| d2[a].total_cmp(&d2[b]).then(a.cmp(&b)));
    let d: Vec<f64> = order.iter().map(|&j| d2[j].sqrt()).collect();
    let mut suffix = vec![0.0; n + 1];
    for k in (0..n).rev() {
        suffix[k] = suffix[k + 1] + d[k];
    }
    let mut left = vec![0u32; totals.len()];
    let mut sum_l = 0.0;
    let mut best: Option<Split> = None;
    for k in 1..n {
        left[classes[order[k - 1]]] += 1;
        sum_l += d[k - 1];
        if d[k - 1] >= d[k] {
            continue;
        }
        let gain = table.gain(&left, totals);
        let gap = suffix[k] / (n - k) as f64 - sum_l / k as f64;
        let better = best.is_none_or(|b| gain > b.gain || (gain == b.gain && gap > b.gap));
        if better {
            let mut threshold = (d[k - 1] + d[k]) / 2.0;
            if threshold >= d[k] {
                threshold = d[k - 1];
            }
            best = Some(Split {
                gain,
                gap,
                threshold,
                left: k,
            });
        }
    }
    best
}

/// One series in a bounded scan: approximate squared distance `a`, a bound `eps` on its
/// difference from the canonical value, the series' class and index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounded {
    /// Approximate squared distance.
    pub a: f64,
    /// `|a − D_canonical| <= eps`.
    pub eps: f64,
    /// Class id.
    pub class: u32,
    /// Series index within the node (ties in `a` are ordered by it).
    pub index: u32,
}

/// What a bounded scan proves about one candidate's canonical best split.
///
/// * `g_safe`: the largest gain of a *safe* split — one whose sides the bounds separate, so
///   the canonical distances split the series identically (same gain, bit for bit);
///   `-inf` without one.
/// * `gap_lo`, `gap_hi`: over the safe splits of gain `g_safe`, the largest gap minus and
///   plus its error bound.
/// * `g_up`: an upper bound on the gain of any other split the canonical distances may
///   allow: splits inside a *cluster* (a run of series whose bounds overlap) holding two or
///   more classes; `-inf` without such a cluster. The gain is convex in the left counts, so
///   over a cluster it is largest at a vertex: each class of the cluster wholly left or
///   wholly right (single-class clusters never beat their safe neighbours). A cluster of
///   exact (`eps = 0`) equal distances is a tie that no split divides, and is skipped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FastRecord {
    /// Best safe gain.
    pub g_safe: f64,
    /// Lower bound of the canonical gap at `g_safe`.
    pub gap_lo: f64,
    /// Upper bound of the canonical gap at `g_safe`.
    pub gap_hi: f64,
    /// Upper bound of the gain of the unsafe splits.
    pub g_up: f64,
}

impl FastRecord {
    /// A record that proves nothing (every field `-inf`).
    pub const NONE: Self = Self {
        g_safe: f64::NEG_INFINITY,
        gap_lo: f64::NEG_INFINITY,
        gap_hi: f64::NEG_INFINITY,
        g_up: f64::NEG_INFINITY,
    };
}

/// Clusters with more classes than this get `g_up = +inf` (the vertex count is `2^k − 2`).
pub const MAX_CLUSTER_CLASSES: usize = 8;

/// Bound on `|sqrt(a) − sqrt(c)|` when `|a − c| <= eps`, plus rounding of the square root.
#[must_use]
pub fn sqrt_bound(a: f64, eps: f64) -> f64 {
    let b = if a > eps {
        eps / a.sqrt()
    } else {
        (2.0 * eps).sqrt()
    };
    b + 4.0 * super::distance::EPS
}

/// Reusable buffers of [`bounded_scan`].
#[derive(Clone, Debug, Default)]
pub struct ScanScratch {
    suffix_min: Vec<f64>,
    counts: Vec<u32>,
    base: Vec<u32>,
    vertex: Vec<u32>,
    present: Vec<usize>,
}

/// The bounded scan of one candidate (see [`FastRecord`]): sorts `items` by `(a, index)` and
/// walks the splits (Eqs. 3–4 on bounded distances).
///
/// # Panics
/// If an item's class is not below `totals.len()` or `items.len()` exceeds the table.
pub fn bounded_scan(
    items: &mut [Bounded],
    totals: &[u32],
    table: &EntropyTable,
    scratch: &mut ScanScratch,
) -> FastRecord {
    let n = items.len();
    let mut rec = FastRecord::NONE;
    if n < 2 {
        return rec;
    }
    items.sort_by(|x, y| x.a.total_cmp(&y.a).then(x.index.cmp(&y.index)));
    let classes = totals.len();
    let ScanScratch {
        suffix_min,
        counts,
        base,
        vertex,
        present,
    } = scratch;
    suffix_min.clear();
    suffix_min.resize(n + 1, f64::INFINITY);
    for k in (0..n).rev() {
        suffix_min[k] = suffix_min[k + 1].min(items[k].a - items[k].eps);
    }
    let dist = |it: &Bounded| it.a.max(0.0).sqrt();
    let (mut total_d, mut total_b) = (0.0, 0.0);
    for it in items.iter() {
        total_d += dist(it);
        total_b += sqrt_bound(it.a, it.eps);
    }
    let slack = 16.0 * super::distance::EPS * (n as f64 + 1.0);
    counts.clear();
    counts.resize(classes, 0);
    base.clear();
    base.resize(classes, 0);
    let (mut pre_max, mut sum_d, mut sum_b) = (f64::NEG_INFINITY, 0.0, 0.0);
    let mut cluster_start = 0;
    // Whether the cluster so far is one exact tie.
    let mut tie = true;
    for k in 1..=n {
        let it = &items[k - 1];
        tie = tie && it.eps == 0.0 && it.a == items[cluster_start].a;
        counts[it.class as usize] += 1;
        pre_max = pre_max.max(it.a + it.eps);
        sum_d += dist(it);
        sum_b += sqrt_bound(it.a, it.eps);
        let safe = k == n || pre_max.max(0.0).sqrt() < suffix_min[k].max(0.0).sqrt();
        if !safe {
            continue;
        }
        if k - cluster_start >= 2 && !tie {
            let g = cluster_bound(counts, base, totals, table, vertex, present);
            rec.g_up = rec.g_up.max(g);
        }
        cluster_start = k;
        tie = true;
        base.copy_from_slice(counts);
        if k == n {
            break;
        }
        let gain = table.gain(counts, totals);
        let (nl, nr) = (k as f64, (n - k) as f64);
        let gap = (total_d - sum_d) / nr - sum_d / nl;
        let err = (total_b - sum_b) / nr + sum_b / nl + slack;
        if gain > rec.g_safe {
            rec.g_safe = gain;
            rec.gap_lo = gap - err;
            rec.gap_hi = gap + err;
        } else if gain == rec.g_safe {
            rec.gap_lo = rec.gap_lo.max(gap - err);
            rec.gap_hi = rec.gap_hi.max(gap + err);
        }
    }
    rec
}

/// The largest gain over the proper vertices of the cluster between the left counts `base`
/// (before it) and `counts` (after it): `-inf` for a single-class cluster, `+inf` for one of
/// more than [`MAX_CLUSTER_CLASSES`] classes.
fn cluster_bound(
    counts: &[u32],
    base: &[u32],
    totals: &[u32],
    table: &EntropyTable,
    vertex: &mut Vec<u32>,
    present: &mut Vec<usize>,
) -> f64 {
    present.clear();
    present.extend((0..counts.len()).filter(|&c| counts[c] > base[c]));
    if present.len() < 2 {
        return f64::NEG_INFINITY;
    }
    if present.len() > MAX_CLUSTER_CLASSES {
        return f64::INFINITY;
    }
    let mut best = f64::NEG_INFINITY;
    for mask in 1..(1u32 << present.len()) - 1 {
        vertex.clear();
        vertex.extend_from_slice(base);
        for (bit, &c) in present.iter().enumerate() {
            if mask & (1 << bit) != 0 {
                vertex[c] = counts[c];
            }
        }
        best = best.max(table.gain(vertex, totals));
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entropy(counts: &[u32]) -> f64 {
        let n: u32 = counts.iter().sum();
        if n == 0 {
            return 0.0;
        }
        -counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| {
                let p = f64::from(c) / f64::from(n);
                p * p.ln()
            })
            .sum::<f64>()
    }

    #[test]
    fn gain_is_eq3() {
        let t = EntropyTable::new(20);
        for (left, total) in [
            (vec![3u32, 1], vec![5u32, 6]),
            (vec![5, 0], vec![5, 6]),
            (vec![2, 2, 1], vec![4, 6, 7]),
        ] {
            let n: u32 = total.iter().sum();
            let nl: u32 = left.iter().sum();
            let right: Vec<u32> = total.iter().zip(&left).map(|(t, l)| t - l).collect();
            let want = entropy(&total)
                - f64::from(nl) / f64::from(n) * entropy(&left)
                - f64::from(n - nl) / f64::from(n) * entropy(&right);
            assert!((t.gain(&left, &total) - want).abs() < 1e-12);
        }
        // Mirror images and two-class label swaps are bit-identical.
        assert_eq!(
            t.gain(&[3, 1], &[5, 6]).to_bits(),
            t.gain(&[2, 5], &[5, 6]).to_bits()
        );
        assert_eq!(
            t.gain(&[4, 1], &[6, 6]).to_bits(),
            t.gain(&[1, 4], &[6, 6]).to_bits()
        );
        assert!((t.gain(&[5, 0], &[5, 6]) - entropy(&[5, 6])).abs() < 1e-15);
    }

    #[test]
    fn best_split_prefers_gain_then_gap_and_skips_ties() {
        let t = EntropyTable::new(6);
        // Sorted distances 0, 1, 1, 2, 4, 9 (as squares), classes 0 0 1 | 1 1 1.
        let d2 = [0.0, 1.0, 1.0, 4.0, 16.0, 81.0];
        let classes = [0, 0, 1, 1, 1, 1];
        let s = best_split(&d2, &classes, &[2, 4], &t).unwrap();
        // Splits: k=1, k=3 (0,1,1 | 2 ...), k=4, k=5; k=2 would split the tie. k=3 leaves
        // a pure right side and has the largest gain.
        assert_eq!(s.left, 3);
        assert_eq!(s.threshold, 1.5);
        assert_eq!(s.gain, t.gain(&[2, 1], &[2, 4]));
        // Perfect split exists with classes 0 0 | 1 1 1 1 when the tie is broken: move the tie.
        let d2 = [0.0, 1.0, 2.25, 4.0, 16.0, 81.0];
        let s = best_split(&d2, &classes, &[2, 4], &t).unwrap();
        assert_eq!((s.left, s.threshold), (2, 1.25));
        assert_eq!(s.gain, t.gain(&[2, 0], &[2, 4]));
        let gap = (1.5 + 2.0 + 4.0 + 9.0) / 4.0 - 0.5;
        assert_eq!(s.gap, gap);
        assert!(best_split(&[1.0; 4], &[0, 1, 0, 1], &[2, 2], &t).is_none());
    }

    #[test]
    fn threshold_never_rounds_onto_the_right_side() {
        let t = EntropyTable::new(2);
        let a = 1.0f64;
        let b = f64::from_bits(a.to_bits() + 1);
        let s = best_split(&[a * a, b * b], &[0, 1], &[1, 1], &t).unwrap();
        assert!(a.sqrt() <= s.threshold && s.threshold < (b * b).sqrt());
    }

    #[test]
    fn bounded_scan_with_exact_distances_equals_the_canonical_split() {
        let t = EntropyTable::new(6);
        let d2 = [0.0, 1.0, 2.25, 4.0, 16.0, 81.0];
        let classes = [0u32, 0, 1, 1, 1, 1];
        let mut items: Vec<Bounded> = (0..6)
            .map(|j| Bounded {
                a: d2[j],
                eps: 0.0,
                class: classes[j],
                index: j as u32,
            })
            .collect();
        let r = bounded_scan(&mut items, &[2, 4], &t, &mut ScanScratch::default());
        let s = best_split(
            &d2,
            &classes.map(|c| c as usize),
            &[2, 4],
            &EntropyTable::new(6),
        )
        .unwrap();
        assert_eq!(r.g_safe, s.gain);
        assert!(r.gap_lo <= s.gap && s.gap <= r.gap_hi && r.gap_hi - r.gap_lo < 1e-12);
        assert_eq!(r.g_up, f64::NEG_INFINITY);
    }

    #[test]
    fn overlapping_bounds_form_clusters() {
        let t = EntropyTable::new(4);
        // Items 1 and 2 overlap and differ in class: their order is unknown.
        let mut items = vec![
            Bounded {
                a: 0.0,
                eps: 0.0,
                class: 0,
                index: 0,
            },
            Bounded {
                a: 1.0,
                eps: 0.1,
                class: 1,
                index: 1,
            },
            Bounded {
                a: 1.05,
                eps: 0.1,
                class: 0,
                index: 2,
            },
            Bounded {
                a: 4.0,
                eps: 0.0,
                class: 1,
                index: 3,
            },
        ];
        let r = bounded_scan(&mut items, &[2, 2], &t, &mut ScanScratch::default());
        // Safe splits: after item 0 (1 vs 1,2,3) and after item 2; the cluster {1, 2} allows
        // the perfect split {0, 2 | 1, 3}.
        assert_eq!(r.g_safe, t.gain(&[1, 0], &[2, 2]));
        assert_eq!(r.g_up, t.gain(&[2, 0], &[2, 2]));
        assert!(r.g_up > r.g_safe);
    }
}
