//! Every pair, `O(N^2 m)`, f64: the oracle the other paths are tested against.

use rayon::prelude::*;

use super::{Method, Motif, MotifError, PairSearch, SearchStats, Subsequences, valid_pairs};

/// Brute-force closest pair (see [`PairSearch`]).
#[derive(Debug)]
pub struct BruteForce<'s> {
    subs: &'s Subsequences<'s>,
    exclusion: usize,
}

impl<'s> BruteForce<'s> {
    /// Over `subs` with exclusion zone `exclusion`.
    #[must_use]
    pub fn new(subs: &'s Subsequences<'s>, exclusion: usize) -> Self {
        Self { subs, exclusion }
    }
}

impl PairSearch for BruteForce<'_> {
    fn best_pair(
        &mut self,
        allowed: &[bool],
    ) -> Result<(Option<Motif>, Method, SearchStats), MotifError> {
        let n = self.subs.count();
        let best = (0..n)
            .into_par_iter()
            .filter(|&i| allowed[i])
            .map(|i| {
                let mut best: Option<Motif> = None;
                let first = (i + self.exclusion + 1).min(n);
                for (j, _) in allowed.iter().enumerate().skip(first).filter(|p| *p.1) {
                    let m = Motif {
                        i,
                        j,
                        distance: self.subs.distance(i, j),
                    };
                    best = Motif::best(best, Some(m));
                }
                best
            })
            .reduce(|| None, Motif::best);
        let pairs = valid_pairs(allowed, self.exclusion);
        let stats = SearchStats {
            pairs,
            distances: pairs,
            ..SearchStats::default()
        };
        Ok((best, Method::BruteForce, stats))
    }
}
