//! Exact CPU counters of non-overlapped occurrences: the specification every other counter
//! (PreElim, GPU PTPE/MTPE) is checked against.
//!
//! Both counters read the stream through a [`TypeIndex`]: events grouped by type, so a
//! candidate touches only the events of its own types (events of other types never change an
//! episode's state machine). The per-candidate merge of those lists restores stream order.
//!
//! # Semantics (the contract every counter meets)
//! * An occurrence of `E(1) -> … -> E(N)` is a choice of events `e₁ … e_N` of those types, in
//!   stream order (increasing positions; equal times are ordered by type id), with every
//!   gap's delay `t(e_{k+1}) - t(e_k)` (computed in `f64`) in its interval: `low_k < d ≤ high_k`
//!   with the interval's comparison bounds ([`Interval::low`], [`Interval::high`]); a zero
//!   delay only in an interval that admits it and never between two events of one type
//!   ([`Interval::gap_low`]; the rules are in [`crate::episode::model`]).
//! * Two occurrences are non-overlapped when the later one's first event time is strictly
//!   greater than the earlier one's last event time.
//! * The count (support) is the maximum number of pairwise non-overlapped occurrences. It is
//!   reached by greedy earliest-end selection, which is what Algorithm 1 does.
//!
//! # References
//! Cao et al., "Towards real-time data mining of spike train datasets using GPUs"
//! (`papers/frequent-episodes-gpu-spike-trains.txt`): Algorithm 1 (serial counting with
//! per-state lists), Algorithm 3 (PreElim), Observation 1 and Theorem 1 (§5.2).

use crate::episode::model::Episode;
#[cfg(any(doc, test))]
use crate::episode::model::Interval;
use crate::event::{EventStream, EventType};

/// The event stream grouped by event type (a CSR layout).
///
/// For type `k`, `times(k)` are its event times in stream order and `positions(k)` their
/// 0-based positions in the stream (the merge key that restores stream order, ties included).
/// Shapes: `offsets [types + 1]`, `times [events]`, `positions [events]`.
#[derive(Clone, Debug)]
pub struct TypeIndex {
    offsets: Vec<usize>,
    times: Vec<f64>,
    positions: Vec<u32>,
}

impl TypeIndex {
    /// Groups `stream` by type in O(n).
    ///
    /// # Panics
    /// If the stream has more than `u32::MAX` events.
    #[must_use]
    pub fn new(stream: &EventStream) -> Self {
        let k = stream.alphabet().len();
        let mut offsets = vec![0usize; k + 1];
        for ty in stream.types() {
            offsets[ty.index() + 1] += 1;
        }
        for i in 0..k {
            offsets[i + 1] += offsets[i];
        }
        let mut cursor = offsets.clone();
        let mut times = vec![0.0; stream.len()];
        let mut positions = vec![0u32; stream.len()];
        for (pos, (t, ty)) in stream.iter().enumerate() {
            let slot = &mut cursor[ty.index()];
            times[*slot] = t;
            positions[*slot] = u32::try_from(pos).expect("more than u32::MAX events");
            *slot += 1;
        }
        Self {
            offsets,
            times,
            positions,
        }
    }

    /// Number of event types.
    #[must_use]
    pub fn num_types(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Times of the events of type `ty`, seconds, non-decreasing.
    #[must_use]
    pub fn times(&self, ty: EventType) -> &[f64] {
        &self.times[self.offsets[ty.index()]..self.offsets[ty.index() + 1]]
    }

    /// Stream positions of the events of type `ty`, increasing.
    #[must_use]
    pub fn positions(&self, ty: EventType) -> &[u32] {
        &self.positions[self.offsets[ty.index()]..self.offsets[ty.index() + 1]]
    }

    /// CSR offsets. Shape `[types + 1]`.
    #[must_use]
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// All times, grouped by type. Shape `[events]`.
    #[must_use]
    pub fn all_times(&self) -> &[f64] {
        &self.times
    }

    /// All positions, grouped by type. Shape `[events]`.
    #[must_use]
    pub fn all_positions(&self) -> &[u32] {
        &self.positions
    }

    /// Number of events a candidate touches: the events of its distinct types.
    #[must_use]
    pub fn events_touched(&self, episode: &Episode) -> u64 {
        distinct_types(episode)
            .iter()
            .map(|&ty| self.times(ty).len() as u64)
            .sum()
    }
}

/// The longest episode the counters accept (state sets are `u64` bit masks).
pub const MAX_EPISODE_LEN: usize = 64;

/// The events of a set of types, merged back into stream order: `times[j]` and `slots[j]`,
/// where `slots[j]` indexes the type set. Built once per distinct type set and shared by every
/// candidate over that set (e.g. `A→B`, `B→A`, `A→B→A` with any intervals).
#[derive(Clone, Debug, Default)]
pub struct Merged {
    times: Vec<f64>,
    slots: Vec<u8>,
}

impl Merged {
    /// Merges the events of `types` (distinct, at most [`MAX_EPISODE_LEN`]) by stream position.
    ///
    /// # Panics
    /// If `types` has more than [`MAX_EPISODE_LEN`] entries.
    #[must_use]
    pub fn new(index: &TypeIndex, types: &[EventType]) -> Self {
        assert!(
            types.len() <= MAX_EPISODE_LEN,
            "at most {MAX_EPISODE_LEN} distinct types"
        );
        let total: usize = types.iter().map(|&t| index.times(t).len()).sum();
        let mut times = Vec::with_capacity(total);
        let mut slots = Vec::with_capacity(total);
        if let [ty] = types {
            times.extend_from_slice(index.times(*ty));
            slots.resize(total, 0);
            return Self { times, slots };
        }
        let lists: Vec<(&[f64], &[u32])> = types
            .iter()
            .map(|&ty| (index.times(ty), index.positions(ty)))
            .collect();
        let mut heads = vec![0usize; types.len()];
        for _ in 0..total {
            let mut best = 0;
            let mut best_pos = u32::MAX;
            for (slot, (_, pos)) in lists.iter().enumerate() {
                if let Some(&p) = pos.get(heads[slot])
                    && p < best_pos
                {
                    best = slot;
                    best_pos = p;
                }
            }
            times.push(lists[best].0[heads[best]]);
            slots.push(best as u8);
            heads[best] += 1;
        }
        Self { times, slots }
    }

    /// Merges sorted trains, one per slot (at most [`MAX_EPISODE_LEN`]), in time order with
    /// equal times in slot order: with the slots in ascending type order this is the order of
    /// an [`EventStream`] (equal times in type order), so
    /// [`count_exact_merged`] over it equals [`count_exact`] over a stream of these trains.
    /// Used to count an episode in a hybrid of trains without building a stream.
    ///
    /// # Panics
    /// If there are more than [`MAX_EPISODE_LEN`] trains.
    #[must_use]
    pub fn from_trains(trains: &[&[f64]]) -> Self {
        assert!(
            trains.len() <= MAX_EPISODE_LEN,
            "at most {MAX_EPISODE_LEN} distinct types"
        );
        let total: usize = trains.iter().map(|t| t.len()).sum();
        let mut times = Vec::with_capacity(total);
        let mut slots = Vec::with_capacity(total);
        let mut heads = vec![0usize; trains.len()];
        for _ in 0..total {
            let mut best = usize::MAX;
            let mut best_t = f64::INFINITY;
            for (slot, train) in trains.iter().enumerate() {
                if let Some(&t) = train.get(heads[slot])
                    && (best == usize::MAX || t < best_t)
                {
                    best = slot;
                    best_t = t;
                }
            }
            times.push(best_t);
            slots.push(best as u8);
            heads[best] += 1;
        }
        Self { times, slots }
    }

    /// Number of merged events.
    #[must_use]
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// True when no event was merged.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// Merged event times, seconds, non-decreasing. Shape `[len]`.
    #[must_use]
    pub fn times(&self) -> &[f64] {
        &self.times
    }

    /// For each merged event, its slot in the type set. Shape `[len]`.
    #[must_use]
    pub fn slots(&self) -> &[u8] {
        &self.slots
    }
}

/// The events of a set of types after a given time, merged lazily into stream order (the order
/// of [`Merged`], by stream position): for counting a stretch of a stream without merging all
/// of it. Types the index does not have read as having no events.
pub(crate) struct MergeCursor<'i> {
    lists: Vec<(&'i [f64], &'i [u32])>,
    heads: Vec<usize>,
}

impl<'i> MergeCursor<'i> {
    /// The events of `types` (at most [`MAX_EPISODE_LEN`]) with time `> after` (seconds).
    pub(crate) fn new(index: &'i TypeIndex, types: &[EventType], after: f64) -> Self {
        let lists: Vec<(&[f64], &[u32])> = types
            .iter()
            .map(|&ty| {
                if ty.index() < index.num_types() {
                    (index.times(ty), index.positions(ty))
                } else {
                    (&[][..], &[][..])
                }
            })
            .collect();
        let heads = lists
            .iter()
            .map(|(times, _)| times.partition_point(|&t| t <= after))
            .collect();
        Self { lists, heads }
    }

    /// The next event: its time (seconds) and its slot in the type set.
    #[inline]
    pub(crate) fn next_event(&mut self) -> Option<(f64, u8)> {
        let mut best: Option<(usize, u32)> = None;
        for (slot, (_, pos)) in self.lists.iter().enumerate() {
            if let Some(&p) = pos.get(self.heads[slot])
                && best.is_none_or(|(_, b)| p < b)
            {
                best = Some((slot, p));
            }
        }
        let (slot, _) = best?;
        let t = self.lists[slot].0[self.heads[slot]];
        self.heads[slot] += 1;
        Some((t, slot as u8))
    }
}

/// The distinct types of `episode` in first-appearance order.
#[must_use]
pub fn distinct_types(episode: &Episode) -> Vec<EventType> {
    let mut out: Vec<EventType> = Vec::with_capacity(episode.len());
    for &ty in episode.types() {
        if !out.contains(&ty) {
            out.push(ty);
        }
    }
    out
}

/// For each slot of `set`, the bit mask of the episode's states (node indices) with that type.
/// Walking a mask from its highest bit down visits states from N to 1, as Algorithm 1 line 3
/// does, so an event never chains with itself when types repeat.
fn state_masks(episode: &Episode, set: &[EventType]) -> Vec<u64> {
    assert!(
        episode.len() <= MAX_EPISODE_LEN,
        "episodes have at most {MAX_EPISODE_LEN} nodes"
    );
    let mut masks = vec![0u64; set.len()];
    for (i, ty) in episode.types().iter().enumerate() {
        let slot = set
            .iter()
            .position(|s| s == ty)
            .expect("the set holds every episode type");
        masks[slot] |= 1 << i;
    }
    masks
}

/// What a machine remembers of each partial occurrence: its last event's time only
/// ([`Counting`], the counters' hot path), or also the chain behind it ([`Listing`], to list
/// the occurrences' event times).
pub(crate) trait Chains {
    /// One list entry: a partial occurrence ending at [`Chains::time`].
    type Entry: Copy;
    /// The entry's end time, seconds.
    fn time(entry: &Self::Entry) -> f64;
    /// A partial occurrence of one node, at `t`.
    fn start(&mut self, t: f64) -> Self::Entry;
    /// `from` extended by the event at `t`.
    fn extend(&mut self, t: f64, from: Self::Entry) -> Self::Entry;
    /// An occurrence completed by the event at `t` after `from` (`None`: a one-node episode).
    fn complete(&mut self, t: f64, from: Option<Self::Entry>);
    /// Every entry is dropped (after a completion the lists are empty).
    fn clear(&mut self);
}

/// Counting only: an entry is its end time.
#[derive(Clone, Copy, Default)]
pub(crate) struct Counting;

impl Chains for Counting {
    type Entry = f64;
    #[inline]
    fn time(entry: &f64) -> f64 {
        *entry
    }
    #[inline]
    fn start(&mut self, t: f64) -> f64 {
        t
    }
    #[inline]
    fn extend(&mut self, t: f64, _: f64) -> f64 {
        t
    }
    #[inline]
    fn complete(&mut self, _: f64, _: Option<f64>) {}
    #[inline]
    fn clear(&mut self) {}
}

/// Listing: each entry points into an arena of `(time, parent)` nodes, and every completed
/// occurrence's event times are appended to `times` (`N` per occurrence, in node order).
#[derive(Clone, Default)]
pub(crate) struct Listing {
    arena: Vec<(f64, u32)>,
    times: Vec<f64>,
}

impl Listing {
    fn push(&mut self, t: f64, parent: u32) -> (f64, u32) {
        let id = u32::try_from(self.arena.len()).expect("fewer partial occurrences than 2^32");
        self.arena.push((t, parent));
        (t, id)
    }
}

impl Chains for Listing {
    type Entry = (f64, u32);
    fn time(entry: &(f64, u32)) -> f64 {
        entry.0
    }
    fn start(&mut self, t: f64) -> (f64, u32) {
        self.push(t, u32::MAX)
    }
    fn extend(&mut self, t: f64, from: (f64, u32)) -> (f64, u32) {
        self.push(t, from.1)
    }
    fn complete(&mut self, t: f64, from: Option<(f64, u32)>) {
        let begin = self.times.len();
        let mut node = from.map_or(u32::MAX, |e| e.1);
        while node != u32::MAX {
            let (time, parent) = self.arena[node as usize];
            self.times.push(time);
            node = parent;
        }
        self.times[begin..].reverse();
        self.times.push(t);
    }
    fn clear(&mut self) {
        self.arena.clear();
    }
}

/// A FIFO of entries with O(1) pop-front and clear, reusing one allocation.
#[derive(Clone)]
struct EntryList<E> {
    items: Vec<E>,
    head: usize,
}

impl<E> Default for EntryList<E> {
    fn default() -> Self {
        Self {
            items: Vec::new(),
            head: 0,
        }
    }
}

impl<E: Copy> EntryList<E> {
    #[inline]
    fn front(&self) -> Option<E> {
        self.items.get(self.head).copied()
    }

    /// Drops entries `e` with `t - e > high`: no later event can pair with them.
    #[inline]
    fn prune(&mut self, t: f64, high: f64, time: impl Fn(&E) -> f64) {
        while let Some(front) = self.items.get(self.head) {
            if t - time(front) > high {
                self.head += 1;
            } else {
                break;
            }
        }
        if self.head == self.items.len() {
            self.clear();
        } else if self.head >= 256 && self.head * 2 >= self.items.len() {
            self.items.drain(..self.head);
            self.head = 0;
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.items.clear();
        self.head = 0;
    }
}

/// Exact non-overlapped count of `episode` (paper Algorithm 1, with stale-entry pruning).
///
/// `s[i]` holds, in time order, the times of `E(i)` events that end a valid partial occurrence
/// of the first `i + 1` nodes begun after the last counted occurrence. Entries older than the
/// next gap's `high` can never match again (times only grow) and are pruned from the front;
/// after pruning, the front entry has the largest delay, so one comparison with `low` decides
/// whether any entry fits. Amortised O(1) per event and state.
///
/// # Units
/// Times in seconds; counts are occurrences.
///
/// # Panics
/// If the episode has more than [`MAX_EPISODE_LEN`] nodes.
#[must_use]
pub fn count_exact(index: &TypeIndex, episode: &Episode) -> u64 {
    let set = distinct_types(episode);
    count_exact_merged(&Merged::new(index, &set), &set, episode)
}

/// [`count_exact`] over events already merged for the type set `set` (which must contain every
/// type of `episode`; events of other types in `merged` are skipped).
///
/// # Panics
/// If a type of `episode` is not in `set`, or the episode has more than [`MAX_EPISODE_LEN`]
/// nodes.
#[must_use]
pub fn count_exact_merged(merged: &Merged, set: &[EventType], episode: &Episode) -> u64 {
    let mut machine = ExactMachine::new(episode, set);
    let mut count = 0u64;
    for (&t, &slot) in merged.times.iter().zip(&merged.slots) {
        count += u64::from(machine.step(t, slot));
    }
    count
}

/// The exact non-overlapped count of the two-node episode `A → B` (`A ≠ B`) with gap
/// `(low, high]`, from the two types' sorted times, in one merge-free two-pointer pass.
///
/// Equal to [`count_exact`] (Algorithm 1 specialised to N = 2): at each `B` at `t`, in time
/// order, the machine's list holds the `A`s after the last counted occurrence with
/// `t − a ≤ high`; the occurrence completes when the oldest of them has `t − a > low`. The
/// pointer finds that oldest `A` with the same floating-point comparisons. `low` is the strict
/// lower bound by time, [`Interval::low_by_time`] (`A`s after `t` have a negative delay and
/// never fit, so a zero delay fits exactly when the interval admits it and `A`'s id is below
/// `B`'s). With the relaxed interval's bound it is PreElim's count. O(|A| + |B|), no allocation: level 2 dominates the
/// mining of a sliding window, and this removes the merge there.
#[must_use]
pub fn count_pair(a: &[f64], b: &[f64], low: f64, high: f64) -> u64 {
    let mut count = 0u64;
    let mut last_end = f64::NEG_INFINITY;
    let mut i = 0usize;
    for &t in b {
        if t <= last_end {
            continue;
        }
        while i < a.len() && (t - a[i] > high || a[i] <= last_end) {
            i += 1;
        }
        if i == a.len() {
            break;
        }
        if t - a[i] > low {
            count += 1;
            last_end = t;
        }
    }
    count
}

/// The state machine of Algorithm 1 for one episode, fed one event at a time.
///
/// Its state is the per-node lists plus `last_end`, the end time of the last counted
/// occurrence (a new occurrence must start strictly after it). After a completion at `T` the
/// state is *fully determined by `T`* (empty lists, `last_end = T`): [`ExactMachine::reset`]
/// puts a machine into exactly that state, which is what MTPE's segment machines rely on
/// (`docs/adr/0001-mtpe-exact-merge.md`). `C` says what the lists remember ([`Chains`]).
#[derive(Clone)]
pub(crate) struct Machine<C: Chains> {
    masks: Vec<u64>,
    /// Each gap's strict lower bound ([`Interval::gap_low`]) and its upper bound
    /// ([`Interval::high`]), seconds.
    gaps: Vec<(f64, f64)>,
    lists: Vec<EntryList<C::Entry>>,
    last_end: f64,
    chains: C,
}

/// The counting machine.
pub(crate) type ExactMachine = Machine<Counting>;

impl<C: Chains + Default> Machine<C> {
    /// A machine for `episode` over events merged for `set`, in the initial state
    /// (`last_end = -inf`).
    ///
    /// # Panics
    /// As [`count_exact_merged`].
    pub(crate) fn new(episode: &Episode, set: &[EventType]) -> Self {
        Self {
            masks: state_masks(episode, set),
            gaps: gap_lows(episode)
                .into_iter()
                .zip(episode.intervals())
                .map(|(low, iv)| (low, iv.high()))
                .collect(),
            lists: vec![EntryList::default(); episode.len()],
            last_end: f64::NEG_INFINITY,
            chains: C::default(),
        }
    }
}

impl<C: Chains> Machine<C> {
    /// The state right after a completion at `at` (seconds): empty lists, `last_end = at`.
    pub(crate) fn reset(&mut self, at: f64) {
        self.lists.iter_mut().for_each(EntryList::clear);
        self.chains.clear();
        self.last_end = at;
    }

    /// Feeds the event at `t` (seconds) of slot `slot` of the type set; true when it
    /// completes an occurrence (counted, and the machine resets at `t`).
    #[inline]
    pub(crate) fn step(&mut self, t: f64, slot: u8) -> bool {
        let n = self.lists.len();
        let mut mask = self.masks[slot as usize];
        while mask != 0 {
            let i = 63 - mask.leading_zeros() as usize;
            mask &= !(1u64 << i);
            if i == 0 {
                // A new occurrence must start strictly after the last counted one ended.
                if t <= self.last_end {
                    continue;
                }
                if n == 1 {
                    self.chains.complete(t, None);
                    self.reset(t);
                    return true;
                }
                self.lists[0].prune(t, self.gaps[0].1, C::time);
                let entry = self.chains.start(t);
                self.lists[0].items.push(entry);
                continue;
            }
            let (low, high) = self.gaps[i - 1];
            let prev = &mut self.lists[i - 1];
            prev.prune(t, high, C::time);
            let Some(front) = prev.front().filter(|f| t - C::time(f) > low) else {
                continue;
            };
            if i == n - 1 {
                self.chains.complete(t, Some(front));
                self.reset(t);
                return true;
            }
            let entry = self.chains.extend(t, front);
            let next = &mut self.lists[i];
            next.prune(t, self.gaps[i].1, C::time);
            next.items.push(entry);
        }
        false
    }
}

impl Machine<Listing> {
    /// The event times of the occurrences completed since the last call, `N` per occurrence
    /// in node order (shape `[completed, N]` flattened row-major), seconds; the buffer is
    /// emptied.
    pub(crate) fn drain_completed(&mut self) -> std::vec::Drain<'_, f64> {
        self.chains.times.drain(..)
    }

    /// Drops the chain nodes no partial occurrence reaches any more, once the arena holds
    /// more than `4 · live + 1024` nodes (so a machine fed a stream without end, whose
    /// occurrences rarely complete, keeps memory proportional to its partial occurrences;
    /// amortised O(1) per event). Entries keep their times and chains.
    pub(crate) fn compact(&mut self) {
        // The common case, checked before counting the live entries: a small arena.
        if self.chains.arena.len() <= 1024 {
            return;
        }
        let live: usize = self.lists.iter().map(|l| l.items.len() - l.head).sum();
        let arena = &mut self.chains.arena;
        if arena.len() <= 4 * live + 1024 {
            return;
        }
        let mut keep = vec![false; arena.len()];
        for list in &self.lists {
            for &(_, mut node) in &list.items[list.head..] {
                while node != u32::MAX && !keep[node as usize] {
                    keep[node as usize] = true;
                    node = arena[node as usize].1;
                }
            }
        }
        // Parents precede their children in the arena, so one pass in index order remaps.
        let mut new_id = vec![u32::MAX; arena.len()];
        let mut kept = Vec::with_capacity(live);
        for (id, &(t, parent)) in arena.iter().enumerate() {
            if keep[id] {
                new_id[id] = u32::try_from(kept.len()).expect("fewer nodes than 2^32");
                let parent = if parent == u32::MAX {
                    u32::MAX
                } else {
                    new_id[parent as usize]
                };
                kept.push((t, parent));
            }
        }
        *arena = kept;
        for list in &mut self.lists {
            let head = list.head;
            for entry in &mut list.items[head..] {
                entry.1 = new_id[entry.1 as usize];
            }
        }
    }
}

/// The event times of `episode`'s non-overlapped occurrences, the ones Algorithm 1 counts
/// (greedy earliest end): shape `[count, N]` flattened row-major (occurrence `k`'s times,
/// node by node, at `k·N .. (k+1)·N`), seconds. Their number is [`count_exact`]'s count;
/// each occurrence's gaps fit its intervals, and each starts after the previous one ends.
///
/// # Panics
/// As [`count_exact`].
#[must_use]
pub fn occurrences(index: &TypeIndex, episode: &Episode) -> Vec<f64> {
    let set = distinct_types(episode);
    let merged = Merged::new(index, &set);
    let mut machine: Machine<Listing> = Machine::new(episode, &set);
    for (&t, &slot) in merged.times.iter().zip(&merged.slots) {
        machine.step(t, slot);
    }
    machine.chains.times
}

/// Each gap's strict lower bound for the stream-order machines: [`Interval::gap_low`] with the
/// gap's two node types. Shape `[N - 1]`.
pub(crate) fn gap_lows(episode: &Episode) -> Vec<f64> {
    let types = episode.types();
    episode
        .intervals()
        .iter()
        .enumerate()
        .map(|(k, iv)| iv.gap_low(types[k] == types[k + 1]))
        .collect()
}

/// PreElim: the exact non-overlapped count of the relaxed episode α′ whose gaps are
/// `(0, high]`, or `[0, high]` where the gap admits a zero delay (paper Algorithm 3,
/// [`Interval::relaxed`]). By Theorem 1 it bounds [`count_exact`] from above.
///
/// Observation 1 reduces each state list to its latest entry, because with a zero lower bound
/// the latest entry has the smallest delay. With equal timestamps the latest entry can have
/// delay 0, which fits only a gap that admits zero; for the others each state keeps its latest
/// time and the latest time strictly before it, which restores Observation 1 exactly.
/// O(1) memory per state.
///
/// # Panics
/// If the episode has more than [`MAX_EPISODE_LEN`] nodes.
#[must_use]
pub fn count_preelim(index: &TypeIndex, episode: &Episode) -> u64 {
    let set = distinct_types(episode);
    count_preelim_merged(&Merged::new(index, &set), &set, episode)
}

/// [`count_preelim`] over events already merged for the type set `set`.
///
/// # Panics
/// As [`count_exact_merged`].
#[must_use]
pub fn count_preelim_merged(merged: &Merged, set: &[EventType], episode: &Episode) -> u64 {
    let masks = state_masks(episode, set);
    let n = episode.len();
    let highs: Vec<f64> = episode.intervals().iter().map(|iv| iv.high()).collect();
    // The relaxed gap admits a zero delay exactly where the gap does (between two types).
    let types = episode.types();
    let zero_fits: Vec<bool> = episode
        .intervals()
        .iter()
        .enumerate()
        .map(|(k, iv)| iv.admits_zero() && types[k] != types[k + 1])
        .collect();
    let mut last = vec![f64::NEG_INFINITY; n];
    let mut before = vec![f64::NEG_INFINITY; n];
    let mut count = 0u64;
    let mut last_end = f64::NEG_INFINITY;
    for (&t, &slot) in merged.times.iter().zip(&merged.slots) {
        let mut mask = masks[slot as usize];
        while mask != 0 {
            let i = 63 - mask.leading_zeros() as usize;
            mask &= !(1u64 << i);
            if i == 0 {
                if t <= last_end {
                    continue;
                }
                if n == 1 {
                    count += 1;
                    last_end = t;
                    break;
                }
                record(&mut last[0], &mut before[0], t);
                continue;
            }
            // The latest entry, or the latest strictly before t where a zero delay never fits.
            let prev = if zero_fits[i - 1] || last[i - 1] < t {
                last[i - 1]
            } else {
                before[i - 1]
            };
            if t - prev > highs[i - 1] {
                continue;
            }
            if i == n - 1 {
                count += 1;
                last_end = t;
                last.fill(f64::NEG_INFINITY);
                before.fill(f64::NEG_INFINITY);
                break;
            }
            record(&mut last[i], &mut before[i], t);
        }
    }
    count
}

fn record(last: &mut f64, before: &mut f64, t: f64) {
    if t > *last {
        *before = *last;
        *last = t;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::event::{Alphabet, Ordering};

    /// The paper's example stream (1) in §2.
    pub(crate) fn paper_stream() -> EventStream {
        let alphabet = Alphabet::from_labels(["A", "B", "C"]).unwrap();
        let events = [
            ("A", 1.0),
            ("A", 2.0),
            ("B", 5.0),
            ("B", 8.0),
            ("A", 10.0),
            ("A", 13.0),
            ("C", 15.0),
            ("B", 18.0),
            ("C", 20.0),
        ];
        let times = events.iter().map(|e| e.1).collect();
        let types = events.iter().map(|e| alphabet.get(e.0).unwrap()).collect();
        EventStream::new(times, types, alphabet, Ordering::RequireSorted).unwrap()
    }

    fn iv(lo: f64, hi: f64) -> Interval {
        Interval::new(lo, hi).unwrap()
    }

    #[test]
    fn paper_example_counts() {
        let s = paper_stream();
        let idx = TypeIndex::new(&s);
        let (a, b, c) = (EventType(0), EventType(1), EventType(2));
        // "there are at most two non-overlapped occurrences of the episode A -> B" (no
        // effective constraint: every delay in the stream is below 100).
        assert_eq!(
            count_exact(&idx, &Episode::new(vec![a, b], vec![iv(0.0, 100.0)])),
            2
        );
        // "exactly one occurrence of A -(5,10]-> B -(10,15]-> C", namely (A,2),(B,8),(C,20).
        let abc = Episode::new(vec![a, b, c], vec![iv(5.0, 10.0), iv(10.0, 15.0)]);
        assert_eq!(count_exact(&idx, &abc), 1);
        assert!(count_preelim(&idx, &abc) >= 1);
        assert_eq!(count_exact(&idx, &Episode::single(a)), 4);
    }

    #[test]
    fn equal_timestamps_do_not_chain_or_overlap() {
        let alphabet = Alphabet::from_labels(["A", "B"]).unwrap();
        let (a, b) = (EventType(0), EventType(1));
        // A@1, B@1, A@1, B@2 : A->B (0,1]: the only delays that fit are 1 (A@1 -> B@2).
        let s = EventStream::new(
            vec![1.0, 1.0, 1.0, 2.0],
            vec![a, b, a, b],
            alphabet,
            Ordering::RequireSorted,
        )
        .unwrap();
        let idx = TypeIndex::new(&s);
        let ab = Episode::new(vec![a, b], vec![iv(0.0, 1.0)]);
        assert_eq!(count_exact(&idx, &ab), 1);
        assert_eq!(count_preelim(&idx, &ab), 1);
        // B->A with (0,1]: no A after a B. A->A: no two A at distinct times.
        assert_eq!(
            count_exact(&idx, &Episode::new(vec![a, a], vec![iv(0.0, 1.0)])),
            0
        );
        assert_eq!(
            count_preelim(&idx, &Episode::new(vec![a, a], vec![iv(0.0, 1.0)])),
            0
        );
        // Single node: two A at the same time overlap, so they count once.
        assert_eq!(count_exact(&idx, &Episode::single(a)), 1);
    }
}
