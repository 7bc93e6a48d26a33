//! Serial episodes with inter-event delay intervals.
//!
//! # Intervals and equal times (synchrony)
//! A gap between consecutive episode events is one of
//! * `(low, high]` (half-open, the paper's form): `low < delay ≤ high`;
//! * `[low, high]` (closed): `low ≤ delay ≤ high`; `[0, x]` admits a zero delay, so an
//!   episode can hold events that are simultaneous (lag-0 synchrony);
//!
//! with the bounds in seconds, or in samples of a clock (`--sample-rate-hz`), where a delay
//! reads as its nearest whole number of samples so that a 5-sample boundary does not depend on
//! the rounding of `sample / rate` (see [`Interval::samples`]).
//!
//! An occurrence takes its events in **stream order** (strictly increasing positions in the
//! [`EventStream`](crate::event::EventStream), whose equal times are ordered by unit id). For
//! a positive delay this is the time order; a zero delay fits a gap that admits it when
//!
//! * the two events are of **different types** and the earlier node's type has the smaller
//!   id (simultaneous spikes of units 3 and 7 are an occurrence of `3-[0,x]-7`, not of
//!   `7-[0,x]-3`: one synchronous pair is counted once, under the ascending order);
//! * never between two events of the **same type** (a unit's two spikes at the same instant
//!   are a duplicate in the recording, not synchrony): a gap `A-[0,x]-A` needs a positive
//!   delay.
//!
//! Non-overlap is unchanged: the later occurrence's first event time is strictly greater than
//! the earlier one's last event time, so two occurrences never share an instant. Every counter
//! (Algorithm 1, PreElim, [`crate::episode::ends::Ends`], MTPE, the GPU kernels, the
//! incremental chains) implements exactly these rules, and `tests/episodes_oracle.rs` checks
//! them against a brute-force enumeration.
//!
//! # References
//! Problem statement of §2 in Cao et al., "Towards real-time data mining of spike train
//! datasets using GPUs" (`papers/frequent-episodes-gpu-spike-trains.txt`); lag-0 patterns as in
//! SPADE (Torre et al. 2013, Quaglio et al. 2017), where synchronous spikes share a bin.

use std::fmt;
use std::str::FromStr;

use crate::event::{Alphabet, EventType};

/// The unit an interval was given in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum IntervalUnit {
    /// Seconds.
    Seconds,
    /// Whole samples of a clock at `rate_hz` samples per second.
    Samples {
        /// Sampling rate, Hz.
        rate_hz: f64,
    },
}

/// An inter-event delay interval, `(low, high]` or `[low, high]` (module documentation).
///
/// It keeps the bounds as given (for display and reports: [`Interval::given`]) and the two
/// comparison bounds every counter uses: a delay `d ≥ 0` between an event and a later one (in
/// stream order) fits when `low() < d ≤ high()`, the delay computed as `t(later) − t(earlier)`
/// in `f64`. `low()` is negative exactly when the interval admits a zero delay.
///
/// # Invariants
/// `high() ≥ 0`, `low() < high()`, both finite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    low: f64,
    high: f64,
    given: Given,
}

/// An interval's bounds as given: in its unit, with its lower bound's kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Given {
    /// Lower bound, in `unit`.
    pub low: f64,
    /// Upper bound (inclusive), in `unit`.
    pub high: f64,
    /// True for `[low, high]` (the lower bound included), false for `(low, high]`.
    pub closed: bool,
    /// Seconds or samples.
    pub unit: IntervalUnit,
}

impl Given {
    /// The lower bound in seconds.
    #[must_use]
    pub fn low_s(&self) -> f64 {
        match self.unit {
            IntervalUnit::Seconds => self.low,
            IntervalUnit::Samples { rate_hz } => self.low / rate_hz,
        }
    }

    /// The upper bound in seconds.
    #[must_use]
    pub fn high_s(&self) -> f64 {
        match self.unit {
            IntervalUnit::Seconds => self.high,
            IntervalUnit::Samples { rate_hz } => self.high / rate_hz,
        }
    }
}

/// A malformed interval specification.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[must_use]
pub enum IntervalError {
    /// `low` or `high` is NaN or infinite.
    #[error("interval ({low}, {high}]: bounds must be finite")]
    NonFinite {
        /// Lower bound, as given.
        low: f64,
        /// Upper bound, as given.
        high: f64,
    },
    /// `low < 0`.
    #[error("interval ({low}, {high}]: the lower bound must be >= 0")]
    NegativeLow {
        /// Lower bound, as given.
        low: f64,
        /// Upper bound, as given.
        high: f64,
    },
    /// `(low, high]` with `high <= low`, or `[low, high]` with `high < low`: the interval is
    /// empty.
    #[error("interval ({low}, {high}]: the upper bound must be greater than the lower bound")]
    Empty {
        /// Lower bound, as given.
        low: f64,
        /// Upper bound, as given.
        high: f64,
    },
    /// A bound in samples that is not a whole number, or a sampling rate that is not a
    /// positive finite number.
    #[error("interval bound {value} in samples at {rate_hz} Hz: {why}")]
    Samples {
        /// The offending bound (or rate).
        value: f64,
        /// The sampling rate, Hz.
        rate_hz: f64,
        /// What is wrong.
        why: &'static str,
    },
    /// Text that is not an interval.
    #[error(
        "`{text}` is not an interval: expected `(LOW,HIGH]`, `[LOW,HIGH]` or `LOW-HIGH` \
         (meaning `(LOW,HIGH]`), e.g. `(0.004,0.006]` or `[0,0.001]`"
    )]
    Syntax {
        /// The offending text.
        text: String,
    },
    /// An empty list of intervals.
    #[error("no intervals given: pass at least one, e.g. `(0.004,0.006]`")]
    NoIntervals,
    /// The same interval twice in a list.
    #[error("interval `{text}` is given twice")]
    Duplicate {
        /// The interval, in the text output's notation.
        text: String,
    },
}

impl Interval {
    /// The half-open interval `(low, high]` in seconds.
    ///
    /// # Errors
    /// [`IntervalError`] unless `0 <= low < high` and both are finite.
    pub fn new(low: f64, high: f64) -> Result<Self, IntervalError> {
        Self::seconds(low, high, false)
    }

    /// The closed interval `[low, high]` in seconds (`low = high` allowed: `[0, 0]` is exact
    /// simultaneity). A delay `d` fits when `low ≤ d ≤ high`, i.e. `d > low⁻`, the next `f64`
    /// below `low`, so the comparison is exact.
    ///
    /// # Errors
    /// [`IntervalError`] unless `0 <= low <= high` and both are finite.
    pub fn closed(low: f64, high: f64) -> Result<Self, IntervalError> {
        Self::seconds(low, high, true)
    }

    /// `(low, high]` or, when `closed`, `[low, high]`, in seconds.
    ///
    /// # Errors
    /// As [`Interval::new`] and [`Interval::closed`].
    pub fn seconds(low: f64, high: f64, closed: bool) -> Result<Self, IntervalError> {
        check(low, high, closed)?;
        Ok(Self {
            low: if closed { low.next_down() } else { low },
            high,
            given: Given {
                low,
                high,
                closed,
                unit: IntervalUnit::Seconds,
            },
        })
    }

    /// An interval in whole samples of a clock at `rate_hz`: `(low, high]` or `[low, high]`.
    ///
    /// A delay `d` (seconds) reads as `k = round(d · rate_hz)` samples, and fits when
    /// `low < k ≤ high` (`low ≤ k` when closed). The comparison bounds are the half-sample
    /// midpoints `(low ± ½) / rate` and `(high + ½) / rate`: for spike times on the clock
    /// (`t = sample / rate` in `f64`) the computed delay of `k` samples lies within a few ulps
    /// of `k / rate`, far inside half a sample, so which side of a boundary it falls on never
    /// depends on rounding. Times off the clock (drift-corrected, say) are read to the nearest
    /// sample.
    ///
    /// # Errors
    /// [`IntervalError::Samples`] for a bound that is not a whole number or a rate that is not
    /// positive and finite; otherwise as [`Interval::seconds`].
    pub fn samples(low: f64, high: f64, closed: bool, rate_hz: f64) -> Result<Self, IntervalError> {
        if !(rate_hz.is_finite() && rate_hz > 0.0) {
            return Err(IntervalError::Samples {
                value: rate_hz,
                rate_hz,
                why: "the sampling rate must be a positive number of Hz",
            });
        }
        check(low, high, closed)?;
        for value in [low, high] {
            if value.fract() != 0.0 {
                return Err(IntervalError::Samples {
                    value,
                    rate_hz,
                    why: "bounds in samples are whole numbers",
                });
            }
        }
        let below = if closed { low - 0.5 } else { low + 0.5 };
        Ok(Self {
            low: below / rate_hz,
            high: (high + 0.5) / rate_hz,
            given: Given {
                low,
                high,
                closed,
                unit: IntervalUnit::Samples { rate_hz },
            },
        })
    }

    /// The strict lower comparison bound, seconds: a delay `d ≥ 0` to a later event (in stream
    /// order) passes it when `d > low()`. Negative when a zero delay fits ([`Self::admits_zero`]).
    #[must_use]
    pub fn low(self) -> f64 {
        self.low
    }

    /// The inclusive upper comparison bound, seconds: `d ≤ high()`.
    #[must_use]
    pub fn high(self) -> f64 {
        self.high
    }

    /// The bounds as given (unit, closedness), for display and reports.
    #[must_use]
    pub fn given(self) -> Given {
        self.given
    }

    /// True when a zero delay fits (`[0, x]`): the interval can hold simultaneous events of
    /// different types (module documentation).
    #[must_use]
    pub fn admits_zero(self) -> bool {
        self.low < 0.0
    }

    /// The strict lower bound for a gap whose two nodes are the same type when `same_type`:
    /// `max(low, 0)` then (a unit's simultaneous spikes never form a gap), else `low()`. What
    /// the stream-order machines (Algorithm 1, PreElim, the GPU kernels) compare a delay to.
    #[must_use]
    pub fn gap_low(self, same_type: bool) -> f64 {
        if same_type && self.low < 0.0 {
            0.0
        } else {
            self.low
        }
    }

    /// The strict lower bound for code that pairs events by time alone (two pointers over two
    /// types' sorted times), where a delay can be negative or zero: with `zero_fits` (the two
    /// types differ and the earlier node's has the smaller id, so simultaneous events are in
    /// the episode's order in the stream) a zero delay passes and a negative one does not
    /// (`-0⁻`, the `f64` below zero); otherwise a zero delay fails too (`0`). For an interval
    /// that does not admit zero it is `low()`.
    #[must_use]
    pub fn low_by_time(self, zero_fits: bool) -> f64 {
        if self.low >= 0.0 {
            self.low
        } else if zero_fits {
            0.0f64.next_down()
        } else {
            0.0
        }
    }

    /// True when `low() < delay ≤ high()`: the interval's bounds alone, without the rule that
    /// two events of one type never have a zero delay ([`Interval::fits`] applies it).
    #[inline]
    #[must_use]
    pub fn contains(self, delay: f64) -> bool {
        self.low < delay && delay <= self.high
    }

    /// True when an event at `delay ≥ 0` after another, later in stream order, continues an
    /// occurrence: `gap_low(same_type) < delay ≤ high()` (so never a zero delay between two
    /// events of one type).
    #[inline]
    #[must_use]
    pub fn fits(self, delay: f64, same_type: bool) -> bool {
        self.gap_low(same_type) < delay && delay <= self.high
    }

    /// A hashable, totally ordered key of the comparison bounds (intervals all come from one
    /// user-given set; the order is the numeric one of `(low(), high())`).
    #[must_use]
    pub fn bits(self) -> (u64, u64) {
        (ordered_bits(self.low), ordered_bits(self.high))
    }

    /// The PreElim relaxation (paper §5.2, episode α′ of Theorem 1): the lower bound dropped to
    /// `(0, high]`, or to `[0, high]` when the interval admits a zero delay, so every delay
    /// that fits the interval fits its relaxation.
    #[must_use]
    pub fn relaxed(self) -> Self {
        Self {
            low: if self.admits_zero() { self.low } else { 0.0 },
            high: self.high,
            given: Given {
                low: 0.0,
                closed: self.admits_zero(),
                ..self.given
            },
        }
    }

    /// The entries of a comma-separated list of intervals (commas inside brackets belong to
    /// the interval), trimmed, empty ones dropped.
    #[must_use]
    pub fn split_list(text: &str) -> Vec<&str> {
        split_top_level(text)
    }

    /// Parses a comma-separated list of intervals in seconds, each `(LOW,HIGH]`, `[LOW,HIGH]`
    /// or `LOW-HIGH` (meaning `(LOW,HIGH]`); commas inside brackets belong to the interval.
    ///
    /// # Errors
    /// [`IntervalError`] for any malformed or duplicate entry, or an empty list.
    pub fn parse_list(text: &str) -> Result<Vec<Self>, IntervalError> {
        Self::parse_list_in(text, IntervalUnit::Seconds)
    }

    /// [`Interval::parse_list`] with the bounds in `unit` (whole samples for
    /// [`IntervalUnit::Samples`]).
    ///
    /// # Errors
    /// As [`Interval::parse_list`], and [`IntervalError::Samples`].
    pub fn parse_list_in(text: &str, unit: IntervalUnit) -> Result<Vec<Self>, IntervalError> {
        let mut out: Vec<Self> = Vec::new();
        for part in split_top_level(text) {
            let iv = Self::parse_in(part, unit)?;
            if out.contains(&iv) {
                return Err(IntervalError::Duplicate {
                    text: iv.to_string(),
                });
            }
            out.push(iv);
        }
        if out.is_empty() {
            return Err(IntervalError::NoIntervals);
        }
        Ok(out)
    }

    /// Parses one interval (`(LOW,HIGH]`, `[LOW,HIGH]` or `LOW-HIGH`) with bounds in `unit`.
    ///
    /// # Errors
    /// As [`Interval::parse_list_in`].
    pub fn parse_in(text: &str, unit: IntervalUnit) -> Result<Self, IntervalError> {
        let (low, high, closed) = parse_bounds(text)?;
        match unit {
            IntervalUnit::Seconds => Self::seconds(low, high, closed),
            IntervalUnit::Samples { rate_hz } => Self::samples(low, high, closed, rate_hz),
        }
    }
}

fn check(low: f64, high: f64, closed: bool) -> Result<(), IntervalError> {
    if !low.is_finite() || !high.is_finite() {
        return Err(IntervalError::NonFinite { low, high });
    }
    if low < 0.0 {
        return Err(IntervalError::NegativeLow { low, high });
    }
    if high < low || (high == low && !closed) {
        return Err(IntervalError::Empty { low, high });
    }
    Ok(())
}

/// `x`'s bits mapped so that their unsigned order is the numeric order of `x`.
fn ordered_bits(x: f64) -> u64 {
    let b = x.to_bits();
    if x.is_sign_negative() {
        !b
    } else {
        b | (1 << 63)
    }
}

/// The comma-separated parts of `text` outside brackets, trimmed, empty ones dropped.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' if depth <= 0 => {
                parts.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.retain(|p| !p.is_empty());
    parts
}

/// `(low, high, closed)` of `(LOW,HIGH]`, `[LOW,HIGH]` or `LOW-HIGH`.
fn parse_bounds(text: &str) -> Result<(f64, f64, bool), IntervalError> {
    let syntax = || IntervalError::Syntax {
        text: text.to_owned(),
    };
    let t = text.trim();
    let number = |s: &str| s.trim().parse::<f64>().map_err(|_| syntax());
    if let Some(rest) = t.strip_prefix('(').or_else(|| t.strip_prefix('[')) {
        let closed = t.starts_with('[');
        let inner = rest.strip_suffix(']').ok_or_else(syntax)?;
        let (low, high) = inner.split_once(',').ok_or_else(syntax)?;
        return Ok((number(low)?, number(high)?, closed));
    }
    let (low, high) = t.split_once('-').ok_or_else(syntax)?;
    Ok((number(low)?, number(high)?, false))
}

impl FromStr for Interval {
    type Err = IntervalError;

    /// One interval in seconds (as [`Interval::parse_in`]).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse_in(text, IntervalUnit::Seconds)
    }
}

/// `x` in milliseconds with at most 6 decimals, trailing zeros dropped (`4`, `0.166667`).
fn ms(seconds: f64) -> String {
    let s = format!("{:.6}", seconds * 1000.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

impl fmt::Display for Interval {
    /// The text output's notation, in milliseconds: `(4,6]ms` or `[0,0.166667]ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.given;
        let open = if g.closed { '[' } else { '(' };
        write!(f, "{open}{},{}]ms", ms(g.low_s()), ms(g.high_s()))
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

    /// Renders the episode in the text output's notation, e.g. `a3-(4,6]ms-a5` or, with a
    /// lag-0 gap, `a3-[0,0.2]ms-a5` (intervals in milliseconds, brackets as meant).
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

/// A malformed episode in the text output's notation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{text}`: {why}")]
pub struct EpisodeParseError {
    /// The offending text.
    pub text: String,
    /// What is wrong.
    pub why: String,
}

impl Episode {
    /// Parses an episode written as the text output writes it, `u3-(4,6]ms-u5` or
    /// `u3-[0,0.2]ms-u5`, or in tdminer's style `u3-[0.004000,0.006000]-u5` (seconds, meaning
    /// `(0.004, 0.006]`), with labels of `alphabet`. An interval whose text equals the display
    /// of one of `known` (the mining's intervals) is that interval exactly (so an interval in
    /// samples reads back as itself); any other is read from its numbers.
    ///
    /// # Errors
    /// [`EpisodeParseError`] naming what is wrong: an unknown label, a malformed interval, a
    /// single node.
    pub fn parse(
        text: &str,
        alphabet: &Alphabet,
        known: &[Interval],
    ) -> Result<Self, EpisodeParseError> {
        let (labels, intervals) = Self::parse_labels(text, known)?;
        let types = labels
            .iter()
            .map(|label| {
                alphabet.get(label).ok_or_else(|| EpisodeParseError {
                    text: text.to_owned(),
                    why: format!("unit `{label}` is not in the recording"),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::new(types, intervals))
    }

    /// [`Episode::parse`] without a recording: the node labels as written (shape `[N]`) and
    /// the gaps' intervals (shape `[N - 1]`), for episodes watched before their units are
    /// known (the live detector, [`crate::episode::online`]).
    ///
    /// # Errors
    /// [`EpisodeParseError`]: a malformed interval, an empty label, a single node.
    pub fn parse_labels(
        text: &str,
        known: &[Interval],
    ) -> Result<(Vec<String>, Vec<Interval>), EpisodeParseError> {
        let bad = |why: String| EpisodeParseError {
            text: text.to_owned(),
            why,
        };
        let ty = |label: &str| {
            if label.is_empty() {
                Err(bad("an empty unit label".into()))
            } else {
                Ok(label.to_owned())
            }
        };
        let mut types = Vec::new();
        let mut intervals = Vec::new();
        let mut rest = text.trim();
        loop {
            // The next `-(` or `-[` opens an interval; what precedes it is a label.
            let open = rest
                .match_indices('-')
                .map(|(i, _)| i)
                .find(|&i| matches!(rest.as_bytes().get(i + 1), Some(b'(' | b'[')));
            let Some(open) = open else {
                types.push(ty(rest)?);
                break;
            };
            types.push(ty(&rest[..open])?);
            let after = &rest[open + 1..];
            let close = after
                .find(']')
                .ok_or_else(|| bad("an interval without its closing `]`".into()))?;
            let body = &after[..=close];
            let tail = &after[close + 1..];
            let (in_ms, tail) = match tail.strip_prefix("ms") {
                Some(t) => (true, t),
                None => (false, tail),
            };
            let shown = &after[..close + 1 + if in_ms { 2 } else { 0 }];
            let iv = if let Some(iv) = known.iter().find(|k| k.to_string() == shown) {
                *iv
            } else {
                let (low, high, closed) = parse_bounds(body).map_err(|e| bad(e.to_string()))?;
                let made = if in_ms {
                    Interval::seconds(low / 1000.0, high / 1000.0, closed)
                } else {
                    // tdminer's `[low,high]` means `(low, high]`, in seconds.
                    Interval::new(low, high)
                };
                made.map_err(|e| bad(e.to_string()))?
            };
            intervals.push(iv);
            rest = tail
                .strip_prefix('-')
                .ok_or_else(|| bad("an interval not followed by `-` and a unit".into()))?;
        }
        if types.len() < 2 {
            return Err(bad("an episode of one unit".into()));
        }
        Ok((types, intervals))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_validates_intervals() {
        let list = Interval::parse_list("0.004-0.006, (0.009,0.011], [0,0.001]").unwrap();
        assert_eq!(
            list,
            vec![
                Interval::new(0.004, 0.006).unwrap(),
                Interval::new(0.009, 0.011).unwrap(),
                Interval::closed(0.0, 0.001).unwrap(),
            ]
        );
        assert!(matches!(
            Interval::parse_list(""),
            Err(IntervalError::NoIntervals)
        ));
        for bad in ["0.5", "(0.1,0.2)", "[0.1,0.2", "(a,1]"] {
            assert!(
                matches!(bad.parse::<Interval>(), Err(IntervalError::Syntax { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            "0.5-0.5".parse::<Interval>(),
            Err(IntervalError::Empty { .. })
        ));
        assert!(
            "[0.5,0.5]".parse::<Interval>().is_ok(),
            "closed [x,x] is one delay"
        );
        assert!(matches!(
            "nan-1".parse::<Interval>(),
            Err(IntervalError::NonFinite { .. })
        ));
        assert!(matches!(
            Interval::parse_list("0-1,(0,1]"),
            Err(IntervalError::Duplicate { .. })
        ));
        let open = Interval::new(0.0, 0.01).unwrap();
        assert!(!open.admits_zero() && !open.contains(0.0));
        assert!(open.contains(0.01), "the upper bound is inclusive");
        let closed = Interval::closed(0.0, 0.01).unwrap();
        assert!(closed.admits_zero() && closed.contains(0.0));
        assert_eq!(
            closed.gap_low(true),
            0.0,
            "never zero between one unit's spikes"
        );
        let c5 = Interval::closed(0.005, 0.01).unwrap();
        assert!(c5.contains(0.005) && !c5.contains(0.005f64.next_down()));
        assert!(!Interval::new(0.005, 0.01).unwrap().contains(0.005));
    }

    #[test]
    fn sample_intervals_read_delays_to_the_nearest_sample() {
        let rate = 30_000.0;
        let iv = Interval::samples(0.0, 150.0, true, rate).unwrap();
        assert!(iv.admits_zero());
        // Spike times on the clock, far into a recording: 150 samples fit, 151 do not,
        // whatever the rounding of `sample / rate`.
        for start in [0u64, 7, 30_000 * 3_600 + 13, 30_000 * 86_400 + 29_999] {
            let t = |s: u64| s as f64 / rate;
            assert!(iv.contains(t(start + 150) - t(start)), "{start}");
            assert!(!iv.contains(t(start + 151) - t(start)), "{start}");
        }
        let open = Interval::samples(5.0, 10.0, false, rate).unwrap();
        assert!(!open.contains(5.0 / rate) && open.contains(6.0 / rate));
        assert!(matches!(
            Interval::samples(0.5, 2.0, false, rate),
            Err(IntervalError::Samples { .. })
        ));
        assert!(matches!(
            Interval::samples(0.0, 2.0, false, 0.0),
            Err(IntervalError::Samples { .. })
        ));
        assert_eq!(iv.to_string(), "[0,5]ms");
        let list = Interval::parse_list_in("[0,5],(5,10]", IntervalUnit::Samples { rate_hz: rate })
            .unwrap();
        assert_eq!(list[1], Interval::samples(5.0, 10.0, false, rate).unwrap());
    }

    #[test]
    fn relaxation_keeps_every_fitting_delay() {
        for iv in [
            Interval::new(0.004, 0.006).unwrap(),
            Interval::closed(0.0, 0.001).unwrap(),
            Interval::closed(0.003, 0.004).unwrap(),
            Interval::samples(0.0, 3.0, true, 30_000.0).unwrap(),
        ] {
            let r = iv.relaxed();
            for k in 0..300 {
                let d = k as f64 * 2e-5;
                assert!(!iv.contains(d) || r.contains(d), "{iv} {d}");
            }
        }
    }

    #[test]
    fn displays_as_meant_and_parses_back() {
        let a = Alphabet::from_labels(["a3", "a5"]).unwrap();
        let e = Episode::new(
            vec![EventType(0), EventType(1)],
            vec![Interval::new(0.004, 0.006).unwrap()],
        );
        assert_eq!(e.display(&a).to_string(), "a3-(4,6]ms-a5");
        let z = Episode::new(
            vec![EventType(1), EventType(0), EventType(1)],
            vec![
                Interval::closed(0.0, 0.0002).unwrap(),
                Interval::new(0.004, 0.006).unwrap(),
            ],
        );
        let text = z.display(&a).to_string();
        assert_eq!(text, "a5-[0,0.2]ms-a3-(4,6]ms-a5");
        assert_eq!(Episode::parse(&text, &a, &[]).unwrap(), z);
        // tdminer's style reads as (low, high] in seconds.
        assert_eq!(
            Episode::parse("a3-[0.004000,0.006000]-a5", &a, &[]).unwrap(),
            e
        );
        // An interval in samples reads back as itself through the known list.
        let s = Interval::samples(0.0, 5.0, true, 30_000.0).unwrap();
        let es = Episode::new(vec![EventType(0), EventType(1)], vec![s]);
        let shown = es.display(&a).to_string();
        assert_eq!(Episode::parse(&shown, &a, &[s]).unwrap(), es);
        for bad in [
            "a3",
            "a3-(4,6]ms-zz",
            "a3-(4,6ms-a5",
            "a3-(6,4]ms-a5",
            "a3-(4,6]msa5",
        ] {
            assert!(Episode::parse(bad, &a, &[]).is_err(), "{bad}");
        }
    }
}
