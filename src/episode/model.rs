//! Serial episodes with inter-event delay intervals.
//!
//! # References
//! Problem statement of §2 in Cao et al., "Towards real-time data mining of spike train
//! datasets using GPUs" (`papers/frequent-episodes-gpu-spike-trains.txt`).

use std::fmt;
use std::str::FromStr;

use crate::event::{Alphabet, EventType};

/// An inter-event delay interval `(low, high]`, seconds.
///
/// A gap between consecutive episode events at `t_prev` and `t_next` fits when
/// `low < t_next - t_prev <= high`, the delay computed and compared in `f64`.
///
/// # Invariants
/// `0 <= low < high`, both finite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    low: f64,
    high: f64,
}

/// A malformed interval specification.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[must_use]
pub enum IntervalError {
    /// `low` or `high` is NaN or infinite.
    #[error("interval ({low}, {high}]: bounds must be finite")]
    NonFinite {
        /// Lower bound, seconds.
        low: f64,
        /// Upper bound, seconds.
        high: f64,
    },
    /// `low < 0`.
    #[error("interval ({low}, {high}]: the lower bound must be >= 0 s")]
    NegativeLow {
        /// Lower bound, seconds.
        low: f64,
        /// Upper bound, seconds.
        high: f64,
    },
    /// `high <= low`: the interval is empty.
    #[error("interval ({low}, {high}]: the upper bound must be greater than the lower bound")]
    Empty {
        /// Lower bound, seconds.
        low: f64,
        /// Upper bound, seconds.
        high: f64,
    },
    /// Text that is not `LOW-HIGH`.
    #[error("`{text}` is not an interval: expected `LOW-HIGH` in seconds, e.g. `0.004-0.006`")]
    Syntax {
        /// The offending text.
        text: String,
    },
    /// An empty list of intervals.
    #[error("no intervals given: pass at least one `LOW-HIGH`")]
    NoIntervals,
    /// The same interval twice in a list.
    #[error("interval ({low}, {high}] is given twice")]
    Duplicate {
        /// Lower bound, seconds.
        low: f64,
        /// Upper bound, seconds.
        high: f64,
    },
}

impl Interval {
    /// The interval `(low, high]` in seconds.
    ///
    /// # Errors
    /// [`IntervalError`] unless `0 <= low < high` and both are finite.
    pub fn new(low: f64, high: f64) -> Result<Self, IntervalError> {
        if !low.is_finite() || !high.is_finite() {
            return Err(IntervalError::NonFinite { low, high });
        }
        if low < 0.0 {
            return Err(IntervalError::NegativeLow { low, high });
        }
        if high <= low {
            return Err(IntervalError::Empty { low, high });
        }
        Ok(Self { low, high })
    }

    /// Lower (exclusive) bound, seconds.
    #[must_use]
    pub fn low(self) -> f64 {
        self.low
    }

    /// Upper (inclusive) bound, seconds.
    #[must_use]
    pub fn high(self) -> f64 {
        self.high
    }

    /// The bounds' bit patterns `(low, high)`: a hashable, totally ordered key (intervals all
    /// come from one user-given set, so equal intervals have equal bits; for non-negative
    /// finite bounds the order is the numeric one).
    #[must_use]
    pub fn bits(self) -> (u64, u64) {
        (self.low.to_bits(), self.high.to_bits())
    }

    /// True when `low < delay <= high`.
    #[inline]
    #[must_use]
    pub fn contains(self, delay: f64) -> bool {
        self.low < delay && delay <= self.high
    }

    /// The PreElim relaxation `(0, high]` (paper §5.2, episode α′ of Theorem 1).
    #[must_use]
    pub fn relaxed(self) -> Self {
        Self {
            low: 0.0,
            high: self.high,
        }
    }

    /// Parses a comma-separated list `LOW-HIGH,LOW-HIGH,...`.
    ///
    /// # Errors
    /// [`IntervalError`] for any malformed or duplicate entry, or an empty list.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, IntervalError> {
        let mut out: Vec<Self> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let iv: Self = part.parse()?;
            if out.contains(&iv) {
                return Err(IntervalError::Duplicate {
                    low: iv.low,
                    high: iv.high,
                });
            }
            out.push(iv);
        }
        if out.is_empty() {
            return Err(IntervalError::NoIntervals);
        }
        Ok(out)
    }
}

impl FromStr for Interval {
    type Err = IntervalError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let syntax = || IntervalError::Syntax {
            text: text.to_owned(),
        };
        let (low, high) = text.trim().split_once('-').ok_or_else(syntax)?;
        let low: f64 = low.trim().parse().map_err(|_| syntax())?;
        let high: f64 = high.trim().parse().map_err(|_| syntax())?;
        Self::new(low, high)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{:.6},{:.6}]", self.low, self.high)
    }
}

/// A serial episode `E(1) -(low₁,high₁]-> E(2) -> … -> E(N)` (paper §2, Definition 2).
///
/// # Invariants
/// `types.len() >= 1` and `intervals.len() == types.len() - 1`. Event types may repeat.
#[derive(Clone, Debug, PartialEq)]
pub struct Episode {
    types: Vec<EventType>,
    intervals: Vec<Interval>,
}

impl Episode {
    /// A single-node episode (level 1).
    #[must_use]
    pub fn single(ty: EventType) -> Self {
        Self {
            types: vec![ty],
            intervals: Vec::new(),
        }
    }

    /// An episode from its node types and the `N - 1` intervals between them.
    ///
    /// # Panics
    /// If `types` is empty or `intervals.len() != types.len() - 1`.
    #[must_use]
    pub fn new(types: Vec<EventType>, intervals: Vec<Interval>) -> Self {
        assert!(!types.is_empty(), "an episode has at least one node");
        assert_eq!(
            intervals.len() + 1,
            types.len(),
            "an N-node episode has N - 1 intervals"
        );
        Self { types, intervals }
    }

    /// Number of nodes N (the mining level).
    #[must_use]
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Always false: an episode has at least one node.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Node event types, `E(1)..E(N)`. Shape `[N]`.
    #[must_use]
    pub fn types(&self) -> &[EventType] {
        &self.types
    }

    /// Delay intervals between consecutive nodes. Shape `[N - 1]`.
    #[must_use]
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    /// The PreElim counterpart α′ with every lower bound relaxed to 0 (paper §5.2).
    #[must_use]
    pub fn relaxed(&self) -> Self {
        Self {
            types: self.types.clone(),
            intervals: self.intervals.iter().map(|iv| iv.relaxed()).collect(),
        }
    }

    /// Renders the episode in tdminer's style, e.g. `a3-[0.004000,0.006000]-a5`.
    #[must_use]
    pub fn display<'a>(&'a self, alphabet: &'a Alphabet) -> impl fmt::Display + 'a {
        DisplayEpisode {
            episode: self,
            alphabet,
        }
    }
}

struct DisplayEpisode<'a> {
    episode: &'a Episode,
    alphabet: &'a Alphabet,
}

impl fmt::Display for DisplayEpisode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let e = self.episode;
        write!(f, "{}", self.alphabet.label(e.types[0]))?;
        for (iv, ty) in e.intervals.iter().zip(&e.types[1..]) {
            write!(f, "-{iv}-{}", self.alphabet.label(*ty))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates_intervals() {
        let list = Interval::parse_list("0.004-0.006, 0.009-0.011").unwrap();
        assert_eq!(
            list,
            vec![
                Interval::new(0.004, 0.006).unwrap(),
                Interval::new(0.009, 0.011).unwrap()
            ]
        );
        assert!(matches!(
            Interval::parse_list(""),
            Err(IntervalError::NoIntervals)
        ));
        assert!(matches!(
            "0.5".parse::<Interval>(),
            Err(IntervalError::Syntax { .. })
        ));
        assert!(matches!(
            "0.5-0.5".parse::<Interval>(),
            Err(IntervalError::Empty { .. })
        ));
        assert!(matches!(
            "nan-1".parse::<Interval>(),
            Err(IntervalError::NonFinite { .. })
        ));
        assert!(matches!(
            Interval::parse_list("0-1,0-1"),
            Err(IntervalError::Duplicate { .. })
        ));
        let iv = Interval::new(0.0, 0.01).unwrap();
        assert!(
            !iv.contains(0.0),
            "a zero delay never fits: the lower bound is exclusive"
        );
        assert!(iv.contains(0.01), "the upper bound is inclusive");
    }

    #[test]
    fn displays_like_tdminer() {
        let a = Alphabet::from_labels(["a3", "a5"]).unwrap();
        let e = Episode::new(
            vec![EventType(0), EventType(1)],
            vec![Interval::new(0.004, 0.006).unwrap()],
        );
        assert_eq!(e.display(&a).to_string(), "a3-[0.004000,0.006000]-a5");
    }
}
