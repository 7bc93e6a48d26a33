//! Logical shapelets (Mueen, Keogh & Young 2011; `papers/shapelets-gpu.txt` §II and §IV):
//! a rule `T_1 ⊕ T_2 ⊕ …` whose distance to a series combines the terms' distances, `AND` by
//! the maximum and `OR` by the minimum, applied left to right.
//!
//! A node's rule grows greedily: given the rule so far with canonical distances `d_L*` to the
//! node's series, every candidate `T` is scored with the distances `max(d(T), d_L*)` (AND) and
//! `min(d(T), d_L*)` (OR) — the paper's steps 2.a.1–2.a.3 — and the best of both extends the
//! rule when its information gain is strictly larger (by more than 1e-12) than the rule's.
//! At most [`super::ShapeletConfig::max_terms`] terms.

use super::ShapeletError;
use super::discovery::{Op, Problem, Scored, Search, discover};

/// Gains must improve by more than this to add a term.
pub const GAIN_IMPROVEMENT: f64 = 1e-12;

/// The terms a rule gained and the work it took.
#[derive(Clone, Debug, Default)]
pub struct Extension {
    /// The added `(op, term)` pairs, each scored with the combined distances of the rule up
    /// to it (the last one scores the whole rule).
    pub terms: Vec<(Op, Scored)>,
    /// Discoveries run.
    pub discoveries: usize,
    /// Candidates searched.
    pub candidates: u64,
    /// Candidates measured canonically.
    pub reevaluated: usize,
}

/// Grows the rule that starts with `first` (scored on `node`) by up to `max_terms − 1`
/// terms.
///
/// # Errors
/// The search's errors.
pub fn extend(
    node: &Problem<'_>,
    first: &Scored,
    max_terms: usize,
    search: &mut dyn Search,
) -> Result<Extension, ShapeletError> {
    let mut out = Extension::default();
    while out.terms.len() + 1 < max_terms {
        let current = out.terms.last().map_or(first, |(_, s)| s);
        let mut ext: Option<(Op, Scored)> = None;
        for op in [Op::And, Op::Or] {
            let p = node.with_base(op, &current.d2);
            let found = discover(&p, search)?;
            out.discoveries += 1;
            out.candidates += found.candidates;
            out.reevaluated += found.reevaluated;
            if let Some(s) = found.best
                && ext.as_ref().is_none_or(|(_, e)| s.better_than(e))
            {
                ext = Some((op, s));
            }
        }
        match ext {
            Some((op, s)) if s.gain > current.gain + GAIN_IMPROVEMENT => out.terms.push((op, s)),
            _ => break,
        }
    }
    Ok(out)
}
