//! Online detection: the non-overlapped occurrences of watched episodes, reported the moment
//! their last event arrives.
//!
//! A [`Detector`] runs Algorithm 1's machine (Patnaik, Sastry, Unnikrishnan, *Inferring
//! neuronal network connectivity from spike data: a temporal data mining approach*, Sci.
//! Program. 16 (2008), Algorithm 1; the counting machine of Cao et al., *Towards real-time
//! data mining of spike train datasets using GPUs*, §2 and Algorithm 1) for every watched
//! episode, fed one event at a time in arrival order. Each completed occurrence is returned
//! at once with its event times, so the occurrences a detector reports are exactly those
//! [`crate::episode::occurrences`] lists offline on the events it accepted, in the same order.
//!
//! # Arrival order and the canonical order
//! The offline machines read the canonical stream: times ascending, equal times in
//! [`crate::event::canonical_label_order`] of the unit labels. Events arrive in the order a
//! source delivers them, so a detector accepts an event when it cannot change what the events
//! already processed decided, and holds or refuses it otherwise:
//!
//! - **Equal times.** When no watched interval admits a zero delay (every `(low, high]`, and
//!   every `[low, high]` with `low > 0`), the order of events at one instant does not change
//!   any machine: an entry made at `t` can only be extended by an event after `t` (the delay
//!   must exceed a non-negative lower bound), pruning at `t` removes only entries older than
//!   `t`, and an occurrence completed at `t` clears every entry made at `t` and blocks new
//!   starts at `t`, whichever came first. Events are then processed the moment they arrive.
//!   When some watched interval admits a zero delay (lag-0 synchrony, `[0, x]`), the events of
//!   the newest instant are held until a later instant arrives (or [`Detector::flush`]) and
//!   processed in canonical order: detection then waits for the next event.
//! - **Late events.** With `lateness_s = L > 0` events are held in a reorder buffer and
//!   processed in canonical order once the newest arrival is more than `L` seconds past them
//!   (`t ≤ newest − L`; strictly, with zero-delay intervals), so deliveries up to `L` seconds
//!   out of order are exact, at the price of `L` seconds of detection latency. An event older
//!   than one already processed (or, with zero-delay intervals, as old) cannot be processed
//!   without changing the past: it is counted in [`DetectorStats::late`] and dropped.
//!
//! # Restarts
//! [`Detector::restart`] (a publisher that restarted, time that went back) flushes what is
//! held and puts every machine in its initial state, as if a new stream began: offline, each
//! session's occurrences are counted on its own.
//!
//! # Watch lists that change
//! [`Detector::set_watch`] replaces the watch list between two events. An episode in both
//! lists keeps its machine; a new one starts in the initial state at that point, so its
//! occurrences are those of the stream from there on.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::episode::count::{Listing, Machine, distinct_types};
use crate::episode::model::{Episode, EpisodeParseError, Interval};
use crate::event::{Alphabet, EventType, canonical_label_order};

/// An episode to watch, by unit labels: `labels[k]` is node `k`'s unit (shape `[N]`),
/// `intervals[k]` the gap from node `k` to node `k + 1` (shape `[N - 1]`, seconds or
/// samples as given).
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEpisode {
    /// Node labels, `N ≥ 1`.
    pub labels: Vec<String>,
    /// Gap intervals, `N − 1`.
    pub intervals: Vec<Interval>,
}

impl WatchEpisode {
    /// Parses the text notation of `synfire mine` (`u3-(4,6]ms-u5`, `u3-[0,0.2]ms-u5`, or
    /// tdminer's `u3-[0.004000,0.006000]-u5` in seconds meaning `(0.004, 0.006]`); an interval
    /// whose text equals the display of one of `known` is that interval exactly.
    ///
    /// # Errors
    /// [`EpisodeParseError`] naming what is wrong (see [`Episode::parse_labels`]).
    pub fn parse(text: &str, known: &[Interval]) -> Result<Self, EpisodeParseError> {
        let (labels, intervals) = Episode::parse_labels(text, known)?;
        Ok(Self { labels, intervals })
    }

    /// Whether some gap admits a zero delay (`[0, x]`).
    #[must_use]
    pub fn has_zero_delay(&self) -> bool {
        self.intervals.iter().any(|iv| iv.admits_zero())
    }
}

impl fmt::Display for WatchEpisode {
    /// The text notation, `u3-(4,6]ms-u5`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.labels[0])?;
        for (iv, label) in self.intervals.iter().zip(&self.labels[1..]) {
            write!(f, "-{iv}-{label}")?;
        }
        Ok(())
    }
}

/// One occurrence found online.
#[derive(Clone, Debug, PartialEq)]
pub struct OnlineOccurrence {
    /// Index of the episode in the watch list ([`Detector::watch`]).
    pub episode: usize,
    /// Its events' times, node by node (shape `[N]`), seconds.
    pub times: Vec<f64>,
}

/// Counters of a detector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DetectorStats {
    /// Events of watched units accepted (processed, or held and still to be).
    pub accepted: u64,
    /// Events of watched units dropped because they arrived after a later event had been
    /// processed (module docs, "Late events").
    pub late: u64,
    /// Events of units no watched episode contains (ignored).
    pub ignored: u64,
    /// Occurrences reported.
    pub occurrences: u64,
}

/// One watched episode with its machine over the detector's local type ids.
struct Watched {
    episode: WatchEpisode,
    machine: Machine<Listing>,
}

/// An event waiting in the reorder buffer.
#[derive(Clone, Copy, Debug)]
struct Held {
    t: f64,
    ty: EventType,
}

/// Reports the non-overlapped occurrences of watched episodes as events arrive (module docs).
///
/// Units are announced by dense ids ([`Detector::announce`], as a live source numbers them);
/// events are `(time, unit id)`.
pub struct Detector {
    watched: Vec<Watched>,
    /// The watched labels in canonical order; local type id = index.
    alphabet: Alphabet,
    /// Per local type: `(episode, slot in its type set)`.
    routes: Vec<Vec<(u32, u8)>>,
    /// Announced unit names by unit id, and their local types.
    unit_names: Vec<Option<Arc<str>>>,
    unit_types: Vec<Option<EventType>>,
    lateness_s: f64,
    /// Whether equal-time events must be processed in canonical order.
    zero_delay: bool,
    held: Vec<Held>,
    newest: f64,
    /// Time of the last processed event.
    frontier: f64,
    stats: DetectorStats,
}

/// A detector that cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DetectorError {
    /// `lateness_s` is negative or not finite.
    #[error("lateness must be finite seconds ≥ 0, got {0}")]
    Lateness(f64),
    /// An episode has more nodes than a machine can hold.
    #[error("episode `{episode}` has {nodes} nodes; at most {max} can be watched")]
    TooLong {
        /// The episode.
        episode: String,
        /// Its nodes.
        nodes: usize,
        /// The limit.
        max: usize,
    },
    /// An episode's interval count does not match its nodes.
    #[error("episode with {nodes} nodes has {intervals} intervals; it needs {}", nodes.saturating_sub(1))]
    Shape {
        /// Nodes.
        nodes: usize,
        /// Intervals.
        intervals: usize,
    },
}

impl Detector {
    /// A detector of `watch` with an allowed lateness of `lateness_s` seconds (0: events are
    /// processed as they arrive; module docs).
    ///
    /// # Errors
    /// [`DetectorError`] for a negative or non-finite lateness, an episode of more than
    /// [`crate::episode::count::MAX_EPISODE_LEN`] nodes or with the wrong number of intervals.
    pub fn new(watch: Vec<WatchEpisode>, lateness_s: f64) -> Result<Self, DetectorError> {
        if !(lateness_s.is_finite() && lateness_s >= 0.0) {
            return Err(DetectorError::Lateness(lateness_s));
        }
        let mut d = Self {
            watched: Vec::new(),
            alphabet: Alphabet::new(),
            routes: Vec::new(),
            unit_names: Vec::new(),
            unit_types: Vec::new(),
            lateness_s,
            zero_delay: false,
            held: Vec::new(),
            newest: f64::NEG_INFINITY,
            frontier: f64::NEG_INFINITY,
            stats: DetectorStats::default(),
        };
        d.set_watch(watch)?;
        Ok(d)
    }

    /// The watch list, in the order occurrences name it ([`OnlineOccurrence::episode`]).
    pub fn watch(&self) -> impl ExactSizeIterator<Item = &WatchEpisode> {
        self.watched.iter().map(|w| &w.episode)
    }

    /// The counters so far.
    #[must_use]
    pub fn stats(&self) -> DetectorStats {
        self.stats
    }

    /// Replaces the watch list between two events (module docs): episodes already watched
    /// keep their machines and partial occurrences, new ones start afresh. Held events stay
    /// held and are processed by the new list.
    ///
    /// # Errors
    /// As [`Detector::new`]; the old list is kept then.
    pub fn set_watch(&mut self, watch: Vec<WatchEpisode>) -> Result<(), DetectorError> {
        for w in &watch {
            if w.intervals.len() + 1 != w.labels.len() {
                return Err(DetectorError::Shape {
                    nodes: w.labels.len(),
                    intervals: w.intervals.len(),
                });
            }
            if w.labels.len() > crate::episode::count::MAX_EPISODE_LEN {
                return Err(DetectorError::TooLong {
                    episode: w.to_string(),
                    nodes: w.labels.len(),
                    max: crate::episode::count::MAX_EPISODE_LEN,
                });
            }
        }
        let mut labels: Vec<&str> = watch
            .iter()
            .flat_map(|w| w.labels.iter().map(String::as_str))
            .collect();
        labels.sort_by(|a, b| canonical_label_order(a, b));
        labels.dedup();
        let alphabet = Alphabet::from_labels(labels).expect("labels are deduplicated");
        let old: HashMap<String, Machine<Listing>> = std::mem::take(&mut self.watched)
            .into_iter()
            .map(|w| (w.episode.to_string(), w.machine))
            .collect();
        let mut routes = vec![Vec::new(); alphabet.len()];
        let mut watched = Vec::with_capacity(watch.len());
        for (e, w) in watch.into_iter().enumerate() {
            let types: Vec<EventType> = w
                .labels
                .iter()
                .map(|l| alphabet.get(l).expect("every label is in the alphabet"))
                .collect();
            let episode = Episode::new(types, w.intervals.clone());
            let set = distinct_types(&episode);
            for (slot, ty) in set.iter().enumerate() {
                routes[ty.index()].push((
                    u32::try_from(e).expect("fewer than 2^32 episodes"),
                    u8::try_from(slot).expect("at most 64 types"),
                ));
            }
            // An episode watched before keeps its machine: its slots are its types in order
            // of first appearance, which do not depend on the alphabet, and its lists hold
            // times and chains only.
            let machine = old
                .get(&w.to_string())
                .cloned()
                .unwrap_or_else(|| Machine::new(&episode, &set));
            watched.push(Watched {
                episode: w,
                machine,
            });
        }
        self.zero_delay = watched.iter().any(|w| w.episode.has_zero_delay());
        // Held events keep their local types by label.
        let old_alphabet = std::mem::replace(&mut self.alphabet, alphabet);
        self.held
            .retain_mut(|h| match self.alphabet.get(old_alphabet.label(h.ty)) {
                Some(ty) => {
                    h.ty = ty;
                    true
                }
                None => false,
            });
        self.watched = watched;
        self.routes = routes;
        self.unit_types = self
            .unit_names
            .iter()
            .map(|n| n.as_deref().and_then(|n| self.alphabet.get(n)))
            .collect();
        Ok(())
    }

    /// Names unit `id` (a live source's dense id); a later announcement of the same id renames
    /// it.
    pub fn announce(&mut self, id: u32, name: Arc<str>) {
        let i = id as usize;
        if self.unit_names.len() <= i {
            self.unit_names.resize(i + 1, None);
            self.unit_types.resize(i + 1, None);
        }
        self.unit_types[i] = self.alphabet.get(&name);
        self.unit_names[i] = Some(name);
    }

    /// Feeds the spike of unit `unit` at `t_s` seconds (finite); occurrences it completes,
    /// and those of held events it releases, are appended to `out` in stream order. A unit
    /// never announced, or in no watched episode, is ignored.
    pub fn push(&mut self, t_s: f64, unit: u32, out: &mut Vec<OnlineOccurrence>) {
        let Some(ty) = self.unit_types.get(unit as usize).copied().flatten() else {
            self.stats.ignored += 1;
            return;
        };
        self.push_type(t_s, ty, out);
    }

    /// [`Detector::push`] by label (tests, offline replays).
    pub fn push_label(&mut self, t_s: f64, label: &str, out: &mut Vec<OnlineOccurrence>) {
        match self.alphabet.get(label) {
            Some(ty) => self.push_type(t_s, ty, out),
            None => self.stats.ignored += 1,
        }
    }

    fn push_type(&mut self, t: f64, ty: EventType, out: &mut Vec<OnlineOccurrence>) {
        if t < self.frontier || (t == self.frontier && self.zero_delay) || !t.is_finite() {
            self.stats.late += 1;
            return;
        }
        self.stats.accepted += 1;
        if self.lateness_s == 0.0 && !self.zero_delay {
            self.newest = self.newest.max(t);
            self.process(t, ty, out);
            return;
        }
        self.held.push(Held { t, ty });
        if t > self.newest {
            self.newest = t;
            self.release(false, out);
        }
    }

    /// Processes every held event (end of input): what [`Detector::push`] held back for
    /// ordering is decided now, in canonical order.
    pub fn flush(&mut self, out: &mut Vec<OnlineOccurrence>) {
        self.release(true, out);
    }

    /// Flushes, then puts every machine in its initial state and forgets the stream's times
    /// (a new session: module docs, "Restarts").
    pub fn restart(&mut self, out: &mut Vec<OnlineOccurrence>) {
        self.flush(out);
        for w in &mut self.watched {
            w.machine.reset(f64::NEG_INFINITY);
        }
        self.newest = f64::NEG_INFINITY;
        self.frontier = f64::NEG_INFINITY;
    }

    /// Processes the held events that are due (all of them with `all`), in canonical order.
    fn release(&mut self, all: bool, out: &mut Vec<OnlineOccurrence>) {
        if self.held.is_empty() {
            return;
        }
        let cut = self.newest - self.lateness_s;
        let due = |t: f64, zero: bool| all || t < cut || (!zero && t == cut);
        if !self.held.iter().any(|h| due(h.t, self.zero_delay)) {
            return;
        }
        // Canonical order: time, then label order (= local type id order).
        self.held
            .sort_by(|a, b| a.t.total_cmp(&b.t).then(a.ty.cmp(&b.ty)));
        let n = self
            .held
            .iter()
            .position(|h| !due(h.t, self.zero_delay))
            .unwrap_or(self.held.len());
        let ready: Vec<Held> = self.held.drain(..n).collect();
        for h in ready {
            self.process(h.t, h.ty, out);
        }
    }

    fn process(&mut self, t: f64, ty: EventType, out: &mut Vec<OnlineOccurrence>) {
        self.frontier = t;
        for &(e, slot) in &self.routes[ty.index()] {
            let w = &mut self.watched[e as usize];
            if w.machine.step(t, slot) {
                let times: Vec<f64> = w.machine.drain_completed().collect();
                self.stats.occurrences += 1;
                out.push(OnlineOccurrence {
                    episode: e as usize,
                    times,
                });
            } else {
                w.machine.compact();
            }
        }
    }
}

impl fmt::Debug for Detector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Detector")
            .field(
                "watch",
                &self
                    .watched
                    .iter()
                    .map(|w| w.episode.to_string())
                    .collect::<Vec<_>>(),
            )
            .field("lateness_s", &self.lateness_s)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
