//! Bounded SPSC ring buffers between a source thread and its window thread (`ringbuf`).
//!
//! A source pushes [`Record`]s through a [`RingProducer`] that applies the source's
//! [`Overflow`] policy; the window thread pops them through a [`RingConsumer`]. Every record
//! a full ring refuses under [`Overflow::DropNewest`] is counted in [`SourceStats::dropped`]
//! and in the `synfire_events_dropped_total` metric: nothing accepted is lost silently.
//!
//! An idle consumer spins briefly, then parks; the producer wakes it after a push only when it
//! is parked (one fence and one load per push otherwise), so a spike reaches the window thread
//! (and the detect stages on it) within a thread wake-up, not a sleep quantum.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::Duration;

use crossbeam_utils::sync::{Parker, Unparker};

use ringbuf::traits::{Consumer as _, Observer as _, Producer as _, Split as _};
use ringbuf::{HeapCons, HeapProd, HeapRb};
use serde::{Deserialize, Serialize};

use crate::live::telemetry;
use crate::record::{EndReason, Record};

/// What a source does when its ring is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// Wait for room: nothing is lost (archives, replay).
    #[default]
    Block,
    /// Drop the record that does not fit and count it (live: never stall the socket).
    DropNewest,
}

/// Counters of one source, shared by its threads and readable while it runs.
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Events (spikes or samples) accepted onto the ring.
    pub events_in: AtomicU64,
    /// Events refused by a full ring ([`Overflow::DropNewest`]) or lost upstream (sequence
    /// gaps of the synfire wire format).
    pub dropped: AtomicU64,
    /// Malformed messages.
    pub malformed: AtomicU64,
    /// Events refused as out of range by the source's event clock
    /// ([`crate::live::window::EventClock`]; set by the window thread).
    pub out_of_range: AtomicU64,
    /// Repeats of a wire message already received (each counted once; set by the source).
    pub duplicate: AtomicU64,
}

/// Creates a ring of `capacity` records for source `source`.
///
/// # Panics
/// Never: a zero capacity is raised to 1 (configuration validation rejects it earlier).
#[must_use]
pub fn ring(
    source: &str,
    capacity: usize,
    overflow: Overflow,
    stop: Arc<AtomicBool>,
) -> (RingProducer, RingConsumer) {
    let (prod, cons) = HeapRb::<Record>::new(capacity.max(1)).split();
    let stats = Arc::new(SourceStats::default());
    let metrics = telemetry::SourceMetrics::new(source);
    let parker = Parker::new();
    let parked = Arc::new(AtomicBool::new(false));
    (
        RingProducer {
            prod,
            overflow,
            stats: stats.clone(),
            metrics: metrics.clone(),
            stop,
            unparker: parker.unparker().clone(),
            parked: parked.clone(),
        },
        RingConsumer {
            cons,
            stats,
            metrics,
            parker,
            parked,
            pops: 0,
        },
    )
}

/// The source side of a ring.
pub struct RingProducer {
    prod: HeapProd<Record>,
    overflow: Overflow,
    stats: Arc<SourceStats>,
    metrics: telemetry::SourceMetrics,
    stop: Arc<AtomicBool>,
    /// Wakes the consumer when it is parked.
    unparker: Unparker,
    parked: Arc<AtomicBool>,
}

impl std::fmt::Debug for RingProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingProducer")
            .field("overflow", &self.overflow)
            .finish_non_exhaustive()
    }
}

const WAIT: Duration = Duration::from_micros(50);
/// Longest park of an idle consumer.
const PARK: Duration = Duration::from_millis(20);

impl RingProducer {
    /// Pushes a data record by the overflow policy. Returns `false` when the record was
    /// dropped (counted) or shutdown was requested while blocking.
    pub fn push(&mut self, record: Record) -> bool {
        let events = match &record {
            Record::Spike { .. } => 1,
            Record::Samples(f) => f.samples() as u64,
            _ => 0,
        };
        let mut record = record;
        loop {
            match self.prod.try_push(record) {
                Ok(()) => {
                    // Pairs with the consumer's fence between raising `parked` and its last
                    // look at the ring: either it sees this record or this sees it parked.
                    fence(Ordering::SeqCst);
                    if self.parked.load(Ordering::Relaxed) {
                        self.unparker.unpark();
                    }
                    if events > 0 {
                        self.stats.events_in.fetch_add(events, Ordering::Relaxed);
                        self.metrics.events_in.increment(events);
                    }
                    return true;
                }
                Err(back) => {
                    let control = events == 0;
                    if self.overflow == Overflow::DropNewest && !control {
                        self.count_dropped(events, "ring_full");
                        return false;
                    }
                    if self.stop.load(Ordering::Relaxed) && !control {
                        self.count_dropped(events, "shutdown");
                        return false;
                    }
                    record = back;
                    std::thread::sleep(WAIT);
                }
            }
        }
    }

    /// Counts `n` events lost for `reason` (a ring that was full, a gap in the publisher's
    /// sequence numbers).
    pub fn count_dropped(&self, n: u64, reason: &'static str) {
        self.stats.dropped.fetch_add(n, Ordering::Relaxed);
        self.metrics.dropped(reason, n);
    }

    /// Counts `n` events that repeat a wire message already received.
    pub fn count_duplicate(&self, n: u64) {
        self.stats.duplicate.fetch_add(n, Ordering::Relaxed);
        self.metrics.duplicate.increment(n);
    }

    /// Counts one malformed message of `kind`.
    pub fn count_malformed(&self, kind: &'static str) {
        self.stats.malformed.fetch_add(1, Ordering::Relaxed);
        self.metrics.malformed(kind);
    }

    /// The source's counters.
    #[must_use]
    pub fn stats(&self) -> &Arc<SourceStats> {
        &self.stats
    }

    /// Whether shutdown was requested.
    #[must_use]
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// The window-thread side of a ring.
pub struct RingConsumer {
    cons: HeapCons<Record>,
    stats: Arc<SourceStats>,
    metrics: telemetry::SourceMetrics,
    parker: Parker,
    parked: Arc<AtomicBool>,
    /// Records popped (for the fill gauge's readings).
    pops: u64,
}

impl std::fmt::Debug for RingConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingConsumer").finish_non_exhaustive()
    }
}

impl RingConsumer {
    /// The next record, waiting for one. A producer that vanished without its
    /// [`Record::End`] (a panic) reads as `End(Failed)`.
    pub fn pop(&mut self) -> Record {
        let mut idle = 0u32;
        loop {
            if let Some(r) = self.cons.try_pop() {
                // The fill gauge reads the ring as the consumer finds it: on the first pop
                // and every `FILL_EVERY` after (a backlog shows while it drains), and when
                // idle (empty).
                self.pops = self.pops.wrapping_add(1);
                if self.pops % FILL_EVERY == 1 {
                    self.set_fill();
                }
                return r;
            }
            if !self.cons.write_is_held() {
                return self
                    .cons
                    .try_pop()
                    .unwrap_or(Record::End(EndReason::Failed));
            }
            idle += 1;
            if idle.is_multiple_of(64) {
                self.set_fill();
            }
            if idle < 64 {
                std::hint::spin_loop();
            } else {
                self.parked.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if self.cons.is_empty() && self.cons.write_is_held() {
                    // Woken by the producer's next push; the timeout notices a producer
                    // that vanished and refreshes the fill gauge.
                    self.parker.park_timeout(PARK);
                }
                self.parked.store(false, Ordering::Relaxed);
            }
        }
    }

    /// The source's counters.
    #[must_use]
    pub fn stats(&self) -> &Arc<SourceStats> {
        &self.stats
    }

    /// The source's counters with their metrics, for the window thread's own accounting.
    #[must_use]
    pub fn counters(&self) -> SourceCounters {
        SourceCounters {
            stats: self.stats.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// Sets [`telemetry::names::RING_FILL`] to the share of the ring occupied now.
    fn set_fill(&self) {
        self.metrics
            .ring_fill
            .set(self.cons.occupied_len() as f64 / self.cons.capacity().get() as f64);
    }
}

/// A source's counters and their metrics, as the window thread counts into them.
#[derive(Clone)]
pub struct SourceCounters {
    stats: Arc<SourceStats>,
    metrics: telemetry::SourceMetrics,
}

impl std::fmt::Debug for SourceCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceCounters")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl SourceCounters {
    /// Counts `n` events lost on the window thread's side for `reason` (`shutdown`: a stage
    /// did not take or finish their window by the shutdown deadline).
    pub fn count_dropped(&self, n: u64, reason: &'static str) {
        self.stats.dropped.fetch_add(n, Ordering::Relaxed);
        self.metrics.dropped(reason, n);
    }

    /// Sets [`SourceStats::out_of_range`] to the event clock's total `total`, adding what is
    /// new to [`telemetry::names::EVENTS_OUT_OF_RANGE`].
    pub fn set_out_of_range(&self, total: u64) {
        let before = self.stats.out_of_range.swap(total, Ordering::Relaxed);
        if total > before {
            self.metrics.out_of_range.increment(total - before);
        }
    }
}

/// Records popped between two readings of the fill gauge.
const FILL_EVERY: u64 = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn spike(t: f64) -> Record {
        Record::Spike { unit: 0, t_s: t }
    }

    #[test]
    fn drop_newest_counts_exactly_what_a_full_ring_refuses() {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut p, mut c) = ring("t", 8, Overflow::DropNewest, stop);
        let accepted = (0..20).filter(|&i| p.push(spike(f64::from(i)))).count();
        assert_eq!(accepted, 8);
        assert_eq!(p.stats().dropped.load(Ordering::Relaxed), 12);
        assert_eq!(p.stats().events_in.load(Ordering::Relaxed), 8);
        drop(p);
        let mut times = Vec::new();
        while let Record::Spike { t_s, .. } = c.pop() {
            times.push(t_s);
        }
        assert_eq!(times, (0..8).map(f64::from).collect::<Vec<_>>());
    }

    #[test]
    fn block_loses_nothing_under_a_slow_consumer() {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut p, mut c) = ring("t", 4, Overflow::Block, stop);
        let n = 10_000u32;
        let producer = std::thread::spawn(move || {
            for i in 0..n {
                assert!(p.push(spike(f64::from(i))));
            }
            p.push(Record::End(EndReason::Finished));
            p.stats().dropped.load(Ordering::Relaxed)
        });
        let mut next = 0u32;
        loop {
            match c.pop() {
                Record::Spike { t_s, .. } => {
                    assert_eq!(t_s, f64::from(next));
                    next += 1;
                }
                Record::End(EndReason::Finished) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(next, n);
        assert_eq!(producer.join().unwrap(), 0);
    }

    #[test]
    fn a_vanished_producer_reads_as_failed() {
        let stop = Arc::new(AtomicBool::new(false));
        let (p, mut c) = ring("t", 4, Overflow::Block, stop);
        drop(p);
        assert!(matches!(c.pop(), Record::End(EndReason::Failed)));
    }
}
