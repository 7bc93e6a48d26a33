//! The naive `O(N² L⁴)` oracle (Algorithm 1 as written, Ye & Keogh 2009): every candidate,
//! every series, every window, each distance by the direct formula of Eq. 2, then the
//! canonical best split. The fast paths must pick exactly its shapelet. For tests and
//! checks only.

use rayon::prelude::*;

use super::discovery::{Problem, Scored, evaluate};

/// The best candidate of `node` in the total order, or `None` when no candidate splits it.
#[must_use]
pub fn best_shapelet(node: &Problem<'_>) -> Option<Scored> {
    let all: Vec<_> = node.all_candidates().collect();
    all.into_par_iter()
        .filter_map(|c| evaluate(node, c))
        .reduce_with(|a, b| if b.better_than(&a) { b } else { a })
}
