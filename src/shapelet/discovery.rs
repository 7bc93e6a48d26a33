//! Shapelet discovery at one tree node (Algorithm 1): the candidates, their total order, the
//! canonical evaluation, and the exact selection on top of the fast paths.
//!
//! # Total order
//!
//! A candidate's key is its canonical best split ([`super::split::best_split`]); candidates
//! rank by **largest gain, then largest gap, then smallest `(series, start, length)`**
//! ([`Scored::better_than`]), `series` being the index in the training set.
//!
//! # Exact selection
//!
//! A fast path ([`Search`]: the CPU dynamic program here, the GPU in [`super::gpu`]) returns
//! for each candidate a [`FastRecord`] computed from approximate distances with error bounds.
//! With `G*` the largest safe gain of all candidates and `gap*` the largest `gap_lo` among
//! the candidates whose safe gain is `G*`, the best candidate is among those with
//!
//! * `g_safe ≥ G* − 1e-12` and `gap_hi ≥ gap*`, or
//! * `g_up ≥ G* − 1e-12`,
//!
//! because its canonical gain is at least `G*`, comes either from its safe splits (then its
//! canonical gap is at most `gap_hi` and at least `gap*`) or from a split inside a mixed
//! cluster (bounded by `g_up`). Those contenders are measured canonically ([`evaluate`]) and
//! the best in the total order wins. Running values of `G*` and `gap*` only grow, so batches
//! can be filtered as they arrive ([`Pool`]).

use rayon::prelude::*;

use super::distance::{
    StatsTable, advance_inits, centre_radius, distance_sq, dp_pair, snap_bounded,
};
use super::split::{
    Bounded, EntropyTable, FastRecord, ScanScratch, Split, best_split, bounded_scan,
};
use super::{ShapeletError, TrainingSet};

/// How a term joins a logical rule ([`super::logical`]): a node problem scores candidates
/// as a further term with it ([`Problem::with_base`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// Both must match: distance = the larger of the two.
    And,
    /// Either may match: distance = the smaller of the two.
    Or,
}

impl Op {
    /// Combines two (squared or plain: both orders agree) distances.
    #[must_use]
    pub fn combine(self, a: f64, b: f64) -> f64 {
        match self {
            Self::And => a.max(b),
            Self::Or => a.min(b),
        }
    }

    /// `"and"` or `"or"`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::And => "and",
            Self::Or => "or",
        }
    }
}

/// A candidate subsequence (pivot) `T_{series, start, length}`, 0-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Candidate {
    /// Series index in the training set.
    pub series: usize,
    /// First sample.
    pub start: usize,
    /// Samples.
    pub length: usize,
}

/// A candidate measured canonically on a node.
#[derive(Clone, Debug, PartialEq)]
pub struct Scored {
    /// The candidate.
    pub candidate: Candidate,
    /// Information gain of its best split, nats.
    pub gain: f64,
    /// Separation gap of that split.
    pub gap: f64,
    /// Its threshold θ (distance `≤ θ` goes left).
    pub threshold: f64,
    /// Series on the left.
    pub left: usize,
    /// Canonical squared distance to each of the node's series (combined with the rule so
    /// far for a logical term), shape `[n]`, in the node's order.
    pub d2: Vec<f64>,
}

impl Scored {
    /// Whether `self` ranks before `other` in the total order (module docs).
    #[must_use]
    pub fn better_than(&self, other: &Self) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        match self.gain.total_cmp(&other.gain) {
            Greater => true,
            Less => false,
            Equal => match self.gap.total_cmp(&other.gap) {
                Greater => true,
                Less => false,
                Equal => self.candidate < other.candidate,
            },
        }
    }

    /// The better of two.
    #[must_use]
    pub fn best(a: Option<Self>, b: Option<Self>) -> Option<Self> {
        match (a, b) {
            (Some(x), Some(y)) => Some(if y.better_than(&x) { y } else { x }),
            (x, None) => x,
            (None, y) => y,
        }
    }
}

/// One node's discovery problem: its series, the lengths, and for a logical term the rule so
/// far.
#[derive(Clone, Debug)]
pub struct Problem<'a> {
    /// The training set.
    pub set: &'a TrainingSet,
    /// The node's series (indices into `set`), shape `[n]`.
    pub subset: &'a [usize],
    /// Candidate lengths, ascending.
    pub lengths: &'a [usize],
    /// For a logical term: the operator and the rule's canonical squared distances to the
    /// node's series (shape `[n]`).
    pub base: Option<(Op, &'a [f64])>,
    /// `k ln k` for `k <= n`.
    pub table: EntropyTable,
    /// Class totals of the node, shape `[classes]`.
    pub totals: Vec<u32>,
    /// Class of each node series, shape `[n]`.
    pub classes: Vec<usize>,
}

impl<'a> Problem<'a> {
    /// The problem of the series `subset` of `set` at `lengths`.
    #[must_use]
    pub fn new(set: &'a TrainingSet, subset: &'a [usize], lengths: &'a [usize]) -> Self {
        let classes: Vec<usize> = subset.iter().map(|&j| set.labels[j]).collect();
        let mut totals = vec![0u32; set.classes.len()];
        for &c in &classes {
            totals[c] += 1;
        }
        Self {
            set,
            subset,
            lengths,
            base: None,
            table: EntropyTable::new(subset.len()),
            totals,
            classes,
        }
    }

    /// The same node scoring candidates as a logical term `op` after a rule with canonical
    /// squared distances `base`.
    #[must_use]
    pub fn with_base(&self, op: Op, base: &'a [f64]) -> Self {
        Self {
            base: Some((op, base)),
            ..self.clone()
        }
    }

    /// Number of candidates.
    #[must_use]
    pub fn candidates(&self) -> u64 {
        let len = self.set.length;
        self.lengths
            .iter()
            .map(|&l| (len + 1).saturating_sub(l) as u64)
            .sum::<u64>()
            * self.subset.len() as u64
    }

    /// Every candidate, series-major then length then start.
    pub fn all_candidates(&self) -> impl Iterator<Item = Candidate> + '_ {
        let len = self.set.length;
        self.subset.iter().flat_map(move |&series| {
            self.lengths.iter().flat_map(move |&length| {
                (0..=len - length).map(move |start| Candidate {
                    series,
                    start,
                    length,
                })
            })
        })
    }
}

/// The canonical evaluation of `c` on `node`: canonical distances to every node series (Eqs.
/// 1–2, combined with the base for a logical term) and the best split (Eqs. 3–4); `None`
/// when all distances are equal.
///
/// # Panics
/// If `c` does not lie within its series.
#[must_use]
pub fn evaluate(node: &Problem<'_>, c: Candidate) -> Option<Scored> {
    let series = node.set.series(c.series);
    let z = super::distance::znormalize(&series[c.start..c.start + c.length]);
    let mut d2: Vec<f64> = node
        .subset
        .iter()
        .map(|&j| distance_sq(&z, node.set.series(j)))
        .collect();
    if let Some((op, base)) = node.base {
        for (d, &b) in d2.iter_mut().zip(base) {
            *d = op.combine(*d, b);
        }
    }
    let Split {
        gain,
        gap,
        threshold,
        left,
    } = best_split(&d2, &node.classes, &node.totals, &node.table)?;
    Some(Scored {
        candidate: c,
        gain,
        gap,
        threshold,
        left,
        d2,
    })
}

/// A candidate and what a fast path proved about it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Contender {
    /// The candidate.
    pub candidate: Candidate,
    /// Its bounds.
    pub record: FastRecord,
}

/// Gains within this of `G*` count as ties (a margin: equal splits give equal gains).
pub const GAIN_SLACK: f64 = 1e-12;

/// The running selection of contenders (module docs): the largest safe gain `g`, the largest
/// `gap_lo` at it, and the entries that may still be the best.
#[derive(Clone, Debug)]
pub struct Pool {
    /// `G*` so far.
    pub g: f64,
    /// `gap*` so far.
    pub gap_lo: f64,
    /// Entries that pass the rule with the values so far.
    pub entries: Vec<Contender>,
}

impl Default for Pool {
    fn default() -> Self {
        Self {
            g: f64::NEG_INFINITY,
            gap_lo: f64::NEG_INFINITY,
            entries: Vec::new(),
        }
    }
}

impl Pool {
    /// Whether a record may still hold the best candidate.
    #[must_use]
    pub fn keeps(&self, r: &FastRecord) -> bool {
        (r.g_safe >= self.g - GAIN_SLACK && r.gap_hi >= self.gap_lo)
            || r.g_up >= self.g - GAIN_SLACK
    }

    /// Adds a batch: raises `G*`/`gap*` by it, then drops what no longer passes.
    pub fn absorb(&mut self, batch: Vec<Contender>) {
        for c in &batch {
            self.raise(c.record.g_safe, c.record.gap_lo);
        }
        self.entries.extend(batch);
        let keep = |c: &Contender| self.keeps(&c.record);
        let kept: Vec<Contender> = self.entries.iter().copied().filter(keep).collect();
        self.entries = kept;
    }

    /// Raises `G*`/`gap*` by one safe gain and its `gap_lo` (also for values reported by a
    /// device without their entries).
    pub fn raise(&mut self, g_safe: f64, gap_lo: f64) {
        if g_safe > self.g {
            self.g = g_safe;
            self.gap_lo = gap_lo;
        } else if g_safe == self.g {
            self.gap_lo = self.gap_lo.max(gap_lo);
        }
    }
}

/// Contenders of one node from a fast path.
#[derive(Clone, Debug, Default)]
pub struct Contenders {
    /// The candidates to measure canonically (a superset of the possible winners).
    pub entries: Vec<Contender>,
    /// Candidates searched.
    pub candidates: u64,
}

/// A fast path: the candidates that may be a node's best.
pub trait Search {
    /// The contenders of `node` (module docs).
    ///
    /// # Errors
    /// Device errors of GPU paths.
    fn contenders(&mut self, node: &Problem<'_>) -> Result<Contenders, ShapeletError>;

    /// `"cpu"` or the GPU's name.
    fn device(&self) -> String {
        "cpu".into()
    }
}

/// The outcome of one discovery.
#[derive(Clone, Debug)]
pub struct Discovery {
    /// The shapelet and its split, or `None` when no candidate splits the node.
    pub best: Option<Scored>,
    /// Candidates searched.
    pub candidates: u64,
    /// Candidates measured canonically.
    pub reevaluated: usize,
}

/// Discovers the shapelet of `node` with `search`: contenders from the fast path, each
/// measured canonically, the best in the total order.
///
/// # Errors
/// The search's errors.
pub fn discover(node: &Problem<'_>, search: &mut dyn Search) -> Result<Discovery, ShapeletError> {
    let c = search.contenders(node)?;
    let best = c
        .entries
        .par_iter()
        .filter_map(|e| evaluate(node, e.candidate))
        .reduce_with(|a, b| if b.better_than(&a) { b } else { a });
    Ok(Discovery {
        best,
        candidates: c.candidates,
        reevaluated: c.entries.len(),
    })
}

/// The CPU fast path: the dynamic program of Eqs. 6–7 per (candidate series, target series),
/// rayon over candidate series, the bounded scan per candidate.
#[derive(Clone, Debug)]
pub struct CpuSearch {
    /// Memory for the per-window statistics; lengths are processed in chunks that fit.
    pub table_bytes: usize,
}

impl Default for CpuSearch {
    fn default() -> Self {
        Self {
            table_bytes: 512 << 20,
        }
    }
}

impl Search for CpuSearch {
    fn contenders(&mut self, node: &Problem<'_>) -> Result<Contenders, ShapeletError> {
        let len = node.set.length;
        let n = node.subset.len();
        let series: Vec<&[f64]> = node.subset.iter().map(|&j| node.set.series(j)).collect();
        let per_length = StatsTable::bytes(n, 1, len).max(1);
        let chunk = (self.table_bytes / per_length).max(1);
        let mut pool = Pool::default();
        for lengths in node.lengths.chunks(chunk) {
            let table = StatsTable::new(&series, len, lengths);
            let pools: Vec<Pool> = (0..n)
                .into_par_iter()
                .map(|k| cpu_task(node, &series, &table, k))
                .collect();
            for p in pools {
                pool.absorb(p.entries);
            }
        }
        Ok(Contenders {
            entries: pool.entries,
            candidates: node.candidates(),
        })
    }
}

/// The records of the candidates of node series `k` at the lengths of `table`.
fn cpu_task(node: &Problem<'_>, series: &[&[f64]], table: &StatsTable, k: usize) -> Pool {
    let len = table.series_length;
    let n = series.len();
    let a = series[k];
    let mut row0 = vec![vec![0.0; len]; n];
    let mut col0 = vec![vec![0.0; len]; n];
    // Bounds on the canonical squared distance of start s to node series jj at [s n + jj].
    let mut bounds = vec![(0.0, 0.0); len * n];
    let (mut prev, mut cur) = (Vec::new(), Vec::new());
    let mut items = Vec::with_capacity(n);
    let mut scratch = ScanScratch::default();
    let mut pool = Pool::default();
    let mut done = 0;
    for (lidx, &l) in table.lengths.iter().enumerate() {
        let m = len + 1 - l;
        for (jj, b) in series.iter().enumerate() {
            advance_inits(a, b, (done, l), m, &mut row0[jj], &mut col0[jj]);
            dp_pair(
                a,
                b,
                table,
                lidx,
                (k, jj),
                (&row0[jj], &col0[jj]),
                (&mut prev, &mut cur),
                |s, lo, hi| bounds[s * n + jj] = (lo, hi),
            );
        }
        done = l;
        let batch: Vec<Contender> = (0..m)
            .map(|s| {
                items.clear();
                items.extend((0..n).map(|jj| {
                    let (mut a, eps) = if jj == k {
                        // A window's own series is at distance exactly 0 on every path.
                        (0.0, 0.0)
                    } else {
                        let (lo, hi) = bounds[s * n + jj];
                        let (a, eps) = centre_radius(lo, hi);
                        snap_bounded(a, eps)
                    };
                    if let Some((op, base)) = node.base {
                        a = op.combine(a, base[jj]);
                    }
                    Bounded {
                        a,
                        eps,
                        class: node.classes[jj] as u32,
                        index: jj as u32,
                    }
                }));
                Contender {
                    candidate: Candidate {
                        series: node.subset[k],
                        start: s,
                        length: l,
                    },
                    record: bounded_scan(&mut items, &node.totals, &node.table, &mut scratch),
                }
            })
            .collect();
        pool.absorb(batch);
    }
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scored(gain: f64, gap: f64, series: usize) -> Scored {
        Scored {
            candidate: Candidate {
                series,
                start: 0,
                length: 3,
            },
            gain,
            gap,
            threshold: 0.0,
            left: 1,
            d2: Vec::new(),
        }
    }

    #[test]
    fn total_order() {
        assert!(scored(0.5, 0.1, 3).better_than(&scored(0.4, 0.9, 0)));
        assert!(scored(0.5, 0.2, 3).better_than(&scored(0.5, 0.1, 0)));
        assert!(scored(0.5, 0.2, 0).better_than(&scored(0.5, 0.2, 3)));
        assert!(!scored(0.5, 0.2, 3).better_than(&scored(0.5, 0.2, 3)));
    }

    #[test]
    fn pool_keeps_what_may_win() {
        let rec = |g_safe, gap_lo, gap_hi, g_up| FastRecord {
            g_safe,
            gap_lo,
            gap_hi,
            g_up,
        };
        let c = |series, record| Contender {
            candidate: Candidate {
                series,
                start: 0,
                length: 2,
            },
            record,
        };
        let mut p = Pool::default();
        p.absorb(vec![
            c(0, rec(0.5, 0.30, 0.32, f64::NEG_INFINITY)),
            c(1, rec(0.5, 0.20, 0.305, f64::NEG_INFINITY)),
            c(2, rec(0.5, 0.10, 0.29, f64::NEG_INFINITY)),
            c(3, rec(0.4, 0.90, 0.95, 0.6)),
            c(4, rec(0.4, 0.90, 0.95, 0.3)),
        ]);
        let kept: Vec<usize> = p.entries.iter().map(|e| e.candidate.series).collect();
        assert_eq!(kept, [0, 1, 3]);
        p.absorb(vec![c(5, rec(0.7, 0.0, 0.1, f64::NEG_INFINITY))]);
        let kept: Vec<usize> = p.entries.iter().map(|e| e.candidate.series).collect();
        assert_eq!(kept, [5]);
    }
}
