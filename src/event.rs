//! The event model: a spike train as a time-ordered stream of `(time, event type)` pairs.
//!
//! This module owns the in-memory representation that every reader produces and every
//! counter consumes. It does no I/O.
//!
//! # Units
//! Times are `f64` **seconds**, exactly as read from the input (NWB `spike_times`, CSV
//! text parsed by Rust's correctly rounded `f64` parser). They are never converted to `f32`:
//! on a 30 kHz clock two spikes 1 tick apart at t ≈ 100 s differ by 3.3e-5 s, below f32's
//! resolution (7.6e-6 s at 100 s is the ulp, so delays near interval edges round the wrong way).
//!
//! # References
//! Definition 1 of Cao, Patnaik, Ponce, Archuleta, Ramakrishnan, Feng, "Towards real-time
//! data mining of spike train datasets using GPUs" (`papers/frequent-episodes-gpu-spike-trains.txt`, §2).

use std::collections::HashMap;
use std::fmt;

/// Dense id of an event type (a neuron, unit or channel): `0..alphabet.len()`.
///
/// The original label (NWB unit id, CSV label) is kept in [`Alphabet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventType(pub u32);

impl EventType {
    /// The id as an index into per-type arrays.
    #[must_use]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The set of event types of a stream: dense ids and their original labels.
///
/// Ids are assigned in the order labels are first interned (for NWB: the order of
/// `/units/id`; for CSV: the order of first appearance).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Alphabet {
    labels: Vec<String>,
    index: HashMap<String, EventType>,
}

impl Alphabet {
    /// An empty alphabet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds an alphabet from labels in id order.
    ///
    /// # Errors
    /// [`EventError::DuplicateLabel`] if a label occurs twice (ids would be ambiguous).
    pub fn from_labels<I, S>(labels: I) -> Result<Self, EventError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut alphabet = Self::new();
        for label in labels {
            let label = label.into();
            if alphabet.index.contains_key(&label) {
                return Err(EventError::DuplicateLabel { label });
            }
            alphabet.intern(&label);
        }
        Ok(alphabet)
    }

    /// Returns the id of `label`, adding it if new.
    ///
    /// # Panics
    /// If more than `u32::MAX` distinct labels are interned (not reachable from the readers,
    /// which stop at the input's size).
    pub fn intern(&mut self, label: &str) -> EventType {
        if let Some(&ty) = self.index.get(label) {
            return ty;
        }
        let ty =
            EventType(u32::try_from(self.labels.len()).expect("more than u32::MAX event types"));
        self.labels.push(label.to_owned());
        self.index.insert(label.to_owned(), ty);
        ty
    }

    /// The id of `label`, if known.
    #[must_use]
    pub fn get(&self, label: &str) -> Option<EventType> {
        self.index.get(label).copied()
    }

    /// The original label of `ty`.
    ///
    /// # Panics
    /// If `ty` is not an id of this alphabet.
    #[must_use]
    pub fn label(&self, ty: EventType) -> &str {
        &self.labels[ty.index()]
    }

    /// All labels in id order.
    #[must_use]
    pub fn labels(&self) -> &[String] {
        &self.labels
    }

    /// Number of event types.
    #[must_use]
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// True when there are no event types.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
}

/// Errors raised when an event stream is built from parts that break its invariants.
///
/// Readers wrap these with the file and line or dataset they came from.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[must_use]
pub enum EventError {
    /// A time is NaN or infinite.
    #[error("event {position} has a non-finite time ({time})")]
    NonFiniteTime {
        /// 0-based position in the input order.
        position: usize,
        /// The offending value.
        time: f64,
    },
    /// A time is negative (NWB and CSV times are seconds from the session reference).
    #[error("event {position} has a negative time ({time} s)")]
    NegativeTime {
        /// 0-based position in the input order.
        position: usize,
        /// The offending value, seconds.
        time: f64,
    },
    /// The stream is not ordered by time and sorting was not allowed.
    #[error(
        "events are not sorted by time: event {position} at {time} s comes after {previous} s \
         (pass `--sort` to sort the input)"
    )]
    Unsorted {
        /// 0-based position of the first event earlier than its predecessor.
        position: usize,
        /// Its time, seconds.
        time: f64,
        /// The predecessor's time, seconds.
        previous: f64,
    },
    /// An event type id is not in the alphabet.
    #[error("event {position} has type id {ty}, but the alphabet has only {len} types")]
    UnknownType {
        /// 0-based position in the input order.
        position: usize,
        /// The offending id.
        ty: u32,
        /// Size of the alphabet.
        len: usize,
    },
    /// Times and types have different lengths.
    #[error("{times} times but {types} event types")]
    LengthMismatch {
        /// Number of times.
        times: usize,
        /// Number of types.
        types: usize,
    },
    /// The stream has no events.
    #[error("the input has no events")]
    Empty,
    /// A label occurs twice in an alphabet.
    #[error("event type label `{label}` occurs twice")]
    DuplicateLabel {
        /// The repeated label.
        label: String,
    },
}

/// Whether a constructor may reorder events that are not sorted by time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Ordering {
    /// Unsorted input is an error ([`EventError::Unsorted`]).
    #[default]
    RequireSorted,
    /// Unsorted input is sorted by time (stable: ties are put in type order, one type's ties
    /// keep their input order).
    SortIfNeeded,
}

/// A time-ordered event stream ⟨(E₁,t₁), …, (Eₙ,tₙ)⟩ with t₁ ≤ … ≤ tₙ (paper, Definition 1).
///
/// Stored as two parallel arrays (structure of arrays, ready for device upload):
/// `times[i]` in seconds and `types[i]` a dense id into `alphabet`.
///
/// # Invariants
/// Non-empty; every time finite and ≥ 0; times non-decreasing; every type id < `alphabet.len()`.
/// Equal times are allowed (two units can fire in the same clock tick) and are kept in
/// ascending type id (a canonical order: an episode with a zero-delay gap, `[0, x]`, counts
/// simultaneous events in this order; see [`crate::episode::model`]).
#[derive(Clone, Debug, PartialEq)]
pub struct EventStream {
    times: Vec<f64>,
    types: Vec<EventType>,
    alphabet: Alphabet,
}

impl EventStream {
    /// Builds a stream from parallel arrays, checking every invariant. Equal times out of type
    /// order are reordered (by type, stably) with either [`Ordering`]: ties have no order of
    /// their own.
    ///
    /// # Errors
    /// [`EventError::LengthMismatch`], [`EventError::Empty`], [`EventError::NonFiniteTime`],
    /// [`EventError::NegativeTime`], [`EventError::UnknownType`], and
    /// [`EventError::Unsorted`] when `ordering` is [`Ordering::RequireSorted`].
    pub fn new(
        times: Vec<f64>,
        types: Vec<EventType>,
        alphabet: Alphabet,
        ordering: Ordering,
    ) -> Result<Self, EventError> {
        if times.len() != types.len() {
            return Err(EventError::LengthMismatch {
                times: times.len(),
                types: types.len(),
            });
        }
        if times.is_empty() {
            return Err(EventError::Empty);
        }
        let mut sorted = true;
        for (position, (&time, &ty)) in times.iter().zip(&types).enumerate() {
            if !time.is_finite() {
                return Err(EventError::NonFiniteTime { position, time });
            }
            if time < 0.0 {
                return Err(EventError::NegativeTime { position, time });
            }
            if ty.index() >= alphabet.len() {
                return Err(EventError::UnknownType {
                    position,
                    ty: ty.0,
                    len: alphabet.len(),
                });
            }
            if position > 0 && time < times[position - 1] && sorted {
                if ordering == Ordering::RequireSorted {
                    return Err(EventError::Unsorted {
                        position,
                        time,
                        previous: times[position - 1],
                    });
                }
                sorted = false;
            }
        }
        let ties_in_order = || {
            times
                .windows(2)
                .zip(types.windows(2))
                .all(|(t, k)| t[0] != t[1] || k[0] <= k[1])
        };
        if sorted && ties_in_order() {
            return Ok(Self {
                times,
                types,
                alphabet,
            });
        }
        let mut order: Vec<usize> = (0..times.len()).collect();
        // Stable sort by (time, type): equal times in type order, one type's equal times in
        // input order.
        order.sort_by(|&a, &b| times[a].total_cmp(&times[b]).then(types[a].cmp(&types[b])));
        let times = order.iter().map(|&i| times[i]).collect();
        let types = order.iter().map(|&i| types[i]).collect();
        Ok(Self {
            times,
            types,
            alphabet,
        })
    }

    /// Event times, seconds, non-decreasing. Shape: `[len()]`.
    #[must_use]
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// Event types, parallel to [`times`](Self::times). Shape: `[len()]`.
    #[must_use]
    pub fn types(&self) -> &[EventType] {
        &self.types
    }

    /// The event types and their labels.
    #[must_use]
    pub fn alphabet(&self) -> &Alphabet {
        &self.alphabet
    }

    /// Number of events (≥ 1).
    #[must_use]
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Always false: a stream holds at least one event. Present for API symmetry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Time of the first event, seconds.
    #[must_use]
    pub fn start(&self) -> f64 {
        self.times[0]
    }

    /// Time of the last event, seconds.
    #[must_use]
    pub fn end(&self) -> f64 {
        self.times[self.times.len() - 1]
    }

    /// Span `end - start`, seconds (0 for a single event).
    #[must_use]
    pub fn span(&self) -> f64 {
        self.end() - self.start()
    }

    /// Number of events of each type. Shape: `[alphabet().len()]`.
    #[must_use]
    pub fn counts_per_type(&self) -> Vec<u64> {
        let mut counts = vec![0u64; self.alphabet.len()];
        for ty in &self.types {
            counts[ty.index()] += 1;
        }
        counts
    }

    /// Iterates over `(time, type)` pairs in stream order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (f64, EventType)> + '_ {
        self.times.iter().copied().zip(self.types.iter().copied())
    }

    /// Builds the **canonical stream** of labelled events: the alphabet is the distinct labels
    /// in canonical order ([`canonical_label_order`]) and events are sorted by time, then by
    /// type. Sliding windows of a live stream and `synfire mine --start-s/--end-s` both build
    /// their streams this way, so they mine identical streams from identical events.
    ///
    /// # Errors
    /// As [`EventStream::new`]: no events, a NaN, infinite or negative time.
    pub fn from_labelled<'a>(
        events: impl IntoIterator<Item = (f64, &'a str)>,
    ) -> Result<Self, EventError> {
        // Intern the labels in arrival order, then rank the distinct ones canonically: the
        // (costly) canonical comparison runs on the distinct labels only, not on every event.
        let mut ids: HashMap<&str, u32> = HashMap::new();
        let mut labels: Vec<&str> = Vec::new();
        let mut typed: Vec<(f64, EventType)> = events
            .into_iter()
            .map(|(t, l)| {
                let id = *ids.entry(l).or_insert_with(|| {
                    labels.push(l);
                    (labels.len() - 1) as u32
                });
                (t, EventType(id))
            })
            .collect();
        let mut order: Vec<u32> = (0..labels.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            canonical_label_order(labels[a as usize], labels[b as usize])
        });
        let mut rank = vec![0u32; labels.len()];
        for (r, &o) in order.iter().enumerate() {
            rank[o as usize] = r as u32;
        }
        for e in &mut typed {
            e.1 = EventType(rank[e.1.index()]);
        }
        typed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.0.cmp(&b.1.0)));
        let alphabet = Alphabet::from_labels(order.iter().map(|&o| labels[o as usize]))?;
        let (times, types) = typed.into_iter().unzip();
        Self::new(times, types, alphabet, Ordering::RequireSorted)
    }

    /// The canonical stream ([`from_labelled`](Self::from_labelled)) of the events in the
    /// half-open interval `[start_s, end_s)`, seconds.
    ///
    /// # Errors
    /// [`EventError::Empty`] when no event falls in the interval.
    pub fn window(&self, start_s: f64, end_s: f64) -> Result<Self, EventError> {
        let from = self.times.partition_point(|&t| t < start_s);
        let to = self.times.partition_point(|&t| t < end_s).max(from);
        Self::from_labelled((from..to).map(|i| (self.times[i], self.alphabet.label(self.types[i]))))
    }
}

/// The canonical order of event-type labels: labels that parse as integers first, by value,
/// then the others by their bytes (so NWB unit ids sort numerically: `2` before `10`).
#[must_use]
pub fn canonical_label_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(x), Ok(y)) => x.cmp(&y).then_with(|| a.cmp(b)),
        (Ok(_), Err(_)) => std::cmp::Ordering::Less,
        (Err(_), Ok(_)) => std::cmp::Ordering::Greater,
        (Err(_), Err(_)) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_streams_do_not_depend_on_arrival_order() {
        let a =
            EventStream::from_labelled([(1.0, "10"), (0.5, "2"), (1.0, "x"), (1.0, "2")]).unwrap();
        let b =
            EventStream::from_labelled([(1.0, "2"), (1.0, "x"), (0.5, "2"), (1.0, "10")]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.alphabet().labels(), ["2", "10", "x"]);
        assert_eq!(a.times(), [0.5, 1.0, 1.0, 1.0]);
        let w = a.window(0.6, 1.0);
        assert!(matches!(w, Err(EventError::Empty)));
        assert_eq!(a.window(0.5, 1.0000001).unwrap(), a);
    }

    fn abc() -> Alphabet {
        Alphabet::from_labels(["A", "B", "C"]).unwrap()
    }

    #[test]
    fn rejects_each_broken_invariant() {
        let t = |v: Vec<u32>| v.into_iter().map(EventType).collect::<Vec<_>>();
        let ord = Ordering::RequireSorted;
        assert_eq!(
            EventStream::new(vec![], vec![], abc(), ord).unwrap_err(),
            EventError::Empty
        );
        assert!(matches!(
            EventStream::new(vec![0.0, f64::NAN], t(vec![0, 1]), abc(), ord),
            Err(EventError::NonFiniteTime { position: 1, .. })
        ));
        assert!(matches!(
            EventStream::new(vec![-1.0], t(vec![0]), abc(), ord),
            Err(EventError::NegativeTime { position: 0, .. })
        ));
        assert!(matches!(
            EventStream::new(vec![1.0, 0.5], t(vec![0, 1]), abc(), ord),
            Err(EventError::Unsorted { position: 1, .. })
        ));
        assert!(matches!(
            EventStream::new(vec![1.0], t(vec![3]), abc(), ord),
            Err(EventError::UnknownType { ty: 3, .. })
        ));
        assert!(matches!(
            EventStream::new(vec![1.0], t(vec![0, 1]), abc(), ord),
            Err(EventError::LengthMismatch { .. })
        ));
        assert!(Alphabet::from_labels(["a", "a"]).is_err());
    }

    #[test]
    fn sorts_stably_when_allowed_and_puts_ties_in_type_order() {
        let types = [2, 0, 1, 0].into_iter().map(EventType).collect();
        let s = EventStream::new(
            vec![3.0, 1.0, 3.0, 0.5],
            types,
            abc(),
            Ordering::SortIfNeeded,
        )
        .unwrap();
        assert_eq!(s.times(), &[0.5, 1.0, 3.0, 3.0]);
        assert_eq!(
            s.types(),
            &[EventType(0), EventType(0), EventType(1), EventType(2)]
        );
        // Sorted input with ties out of type order is accepted and its ties reordered.
        let ties = EventStream::new(
            vec![1.0, 1.0, 1.0, 2.0],
            [2, 0, 2, 1].into_iter().map(EventType).collect(),
            abc(),
            Ordering::RequireSorted,
        )
        .unwrap();
        assert_eq!(
            ties.types(),
            &[EventType(0), EventType(2), EventType(2), EventType(1)]
        );
        assert_eq!(s.span(), 2.5);
        assert_eq!(s.counts_per_type(), vec![2, 1, 1]);
    }
}
