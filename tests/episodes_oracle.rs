//! The exact counter against a brute-force oracle written independently of the state machine:
//! enumerate every occurrence, then pick non-overlapped ones by greedy earliest end (optimal
//! for interval scheduling). Also: PreElim bounds the exact count (Theorem 1) and equals the
//! oracle on the relaxed episode; two-pass mining equals one-pass mining.
//!
//! The oracle reads intervals as given (`(lo, hi]` or `[lo, hi]`, seconds or whole samples
//! with the delay rounded to the nearest sample) and applies the rules of equal times
//! (`synfire::episode::model`) by itself: an occurrence's events follow each other in the
//! order (time, type); a zero delay fits only a gap that admits it and only from a smaller
//! type id to a larger one.

mod common;

use proptest::prelude::*;
use synfire::episode::bound::{
    ReachPath, SuccessorTable, and_count, end_bits, pair_count_and_bits, pair_end_bits,
    pair_successor_counts, successor_bits,
};
use synfire::episode::mtpe::{Segments, count_mtpe};
use synfire::episode::{
    CountKind, Counter, CpuCounter, Ends, Episode, Interval, MinerConfig, NoProgress,
    Strategy as MineStrategy, Threshold, TypeIndex, count_by_ends, count_exact, count_preelim,
    mine_with, occurrences as listed_occurrences,
};
use synfire::event::{EventStream, EventType};

/// An interval as given: `(lo, hi, closed, rate_hz)`, seconds when `rate_hz` is 0, else whole
/// samples of that clock.
#[derive(Clone, Copy, Debug)]
struct Spec(f64, f64, bool, f64);

impl Spec {
    fn interval(self) -> Interval {
        let Spec(lo, hi, closed, rate) = self;
        if rate > 0.0 {
            Interval::samples(lo, hi, closed, rate).unwrap()
        } else {
            Interval::seconds(lo, hi, closed).unwrap()
        }
    }

    /// PreElim's relaxation: the lower bound dropped to 0, closed when the interval admits a
    /// zero delay.
    fn relaxed(self) -> Self {
        let Spec(lo, hi, closed, rate) = self;
        Spec(0.0, hi, closed && lo == 0.0, rate)
    }

    /// Whether an event of type `b` at delay `d` after one of type `a` continues an
    /// occurrence: it comes later in (time, type) order, it is not a simultaneous spike of the
    /// same type, and its delay (in samples: rounded) lies in the interval.
    fn fits(self, d: f64, a: u32, b: u32) -> bool {
        let Spec(lo, hi, closed, rate) = self;
        if d < 0.0 || (d == 0.0 && a >= b) {
            return false;
        }
        let x = if rate > 0.0 { (d * rate).round() } else { d };
        (if closed { x >= lo } else { x > lo }) && x <= hi
    }
}

/// Every occurrence as (first time, last time), by exhaustive search over event tuples.
fn occurrences(times: &[f64], types: &[u32], ep_types: &[u32], ivs: &[Spec]) -> Vec<(f64, f64)> {
    struct Search<'a> {
        times: &'a [f64],
        types: &'a [u32],
        ep_types: &'a [u32],
        ivs: &'a [Spec],
        out: Vec<(f64, f64)>,
    }
    impl Search<'_> {
        fn extend(&mut self, node: usize, prev: usize, start: f64) {
            if node == self.ep_types.len() {
                self.out.push((start, self.times[prev]));
                return;
            }
            let spec = self.ivs[node - 1];
            for j in 0..self.times.len() {
                let d = self.times[j] - self.times[prev];
                if self.types[j] == self.ep_types[node]
                    && spec.fits(d, self.types[prev], self.types[j])
                {
                    self.extend(node + 1, j, start);
                }
            }
        }
    }
    let mut search = Search {
        times,
        types,
        ep_types,
        ivs,
        out: Vec::new(),
    };
    for i in 0..times.len() {
        if types[i] == ep_types[0] {
            search.extend(1, i, times[i]);
        }
    }
    search.out
}

/// Maximum number of pairwise non-overlapped occurrences (later start > earlier end).
fn oracle(times: &[f64], types: &[u32], ep_types: &[u32], ivs: &[Spec]) -> u64 {
    let mut occ = occurrences(times, types, ep_types, ivs);
    occ.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut count = 0;
    let mut last_end = f64::NEG_INFINITY;
    for (s, e) in occ {
        if s > last_end {
            count += 1;
            last_end = e;
        }
    }
    count
}

/// Half-open and closed intervals in seconds (`[0, x]` admits a zero delay, `[0, 0]` only a
/// zero delay), and intervals in samples of a 1 kHz clock (the streams' 1 ms grid).
const INTERVALS: [Spec; 12] = [
    Spec(0.0, 0.003, false, 0.0),
    Spec(0.002, 0.005, false, 0.0),
    Spec(0.001, 0.002, false, 0.0),
    Spec(0.004, 0.006, false, 0.0),
    Spec(0.0, 0.001, false, 0.0),
    Spec(0.01, 0.05, false, 0.0),
    Spec(0.0, 0.002, true, 0.0),
    Spec(0.001, 0.003, true, 0.0),
    Spec(0.0, 0.0, true, 0.0),
    Spec(0.0, 1.0, true, 1000.0),
    Spec(1.0, 3.0, false, 1000.0),
    Spec(2.0, 2.0, true, 1000.0),
];

/// Streams on a 1 ms tick grid (so equal timestamps and delays on interval edges are common),
/// with a few types so repeated types in episodes are common.
fn stream_strategy(max_events: usize) -> impl Strategy<Value = (Vec<f64>, Vec<u32>, u32)> {
    (1u32..=4).prop_flat_map(move |k| {
        prop::collection::vec((0u32..80, 0..k), 1..max_events).prop_map(move |mut ev| {
            ev.sort_by_key(|e| e.0);
            let times = ev.iter().map(|e| f64::from(e.0) * 0.001).collect();
            let types = ev.iter().map(|e| e.1).collect();
            (times, types, k)
        })
    })
}

fn episode_strategy(k: u32) -> impl Strategy<Value = (Vec<u32>, Vec<usize>)> {
    (1usize..=4).prop_flat_map(move |n| {
        (
            prop::collection::vec(0..k, n),
            prop::collection::vec(0..INTERVALS.len(), n - 1),
        )
    })
}

fn build(times: &[f64], types: &[u32], k: u32) -> EventStream {
    common::stream(times, types, k)
}

fn episode(ep_types: &[u32], ivs: &[usize]) -> Episode {
    Episode::new(
        ep_types.iter().map(|&t| EventType(t)).collect(),
        ivs.iter().map(|&i| INTERVALS[i].interval()).collect(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn exact_counter_equals_oracle_and_preelim_bounds_it(
        ((times, types, k), episodes) in stream_strategy(32).prop_flat_map(|(times, types, k)| {
            (Just((times, types, k)), prop::collection::vec(episode_strategy(k), 4))
        }),
    ) {
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        for (ep_types, ivs) in episodes {
            let ep = episode(&ep_types, &ivs);
            let iv_values: Vec<Spec> = ivs.iter().map(|&i| INTERVALS[i]).collect();
            let relaxed: Vec<Spec> = iv_values.iter().map(|s| s.relaxed()).collect();
            let exact = count_exact(&index, &ep);
            let pre = count_preelim(&index, &ep);
            prop_assert_eq!(exact, oracle(&times, &types, &ep_types, &iv_values), "exact {:?}", ep);
            prop_assert_eq!(count_by_ends(&index, &ep), exact, "ends {:?}", ep);
            prop_assert!(pre >= exact, "PreElim {} < exact {} for {:?}", pre, exact, ep);
            prop_assert_eq!(pre, oracle(&times, &types, &ep_types, &relaxed), "PreElim {:?}", ep);
            // The listed occurrences: as many as the count, each a real chain of the
            // stream's events whose gaps fit, each after the previous one ended.
            let n = ep_types.len();
            let occ = listed_occurrences(&index, &ep);
            prop_assert_eq!(occ.len() as u64, exact * n as u64, "listed {:?}", ep);
            for (m, o) in occ.chunks(n).enumerate() {
                for (j, &t) in o.iter().enumerate() {
                    prop_assert!(
                        times.iter().zip(&types).any(|(&x, &y)| x == t && y == ep_types[j]),
                        "no event of type {} at {} for {:?}", ep_types[j], t, ep
                    );
                }
                for j in 1..n {
                    prop_assert!(
                        iv_values[j - 1].fits(o[j] - o[j - 1], ep_types[j - 1], ep_types[j]),
                        "gap {} of {:?} in {:?}", j, o, ep
                    );
                }
                if m > 0 {
                    prop_assert!(o[0] > occ[m * n - 1], "{:?} overlaps the previous one", o);
                }
            }
        }
    }

    /// The CPU counter's merge-free pair path (level 2) equals the exact and PreElim
    /// machines on streams with equal times, dense bursts and every interval, zero low included.
    #[test]
    fn cpu_counter_pairs_equal_the_machines(
        (times, types, k) in stream_strategy(48),
        pairs in prop::collection::vec((0u32..4, 0u32..4, 0..INTERVALS.len()), 1..24),
    ) {
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        let eps: Vec<Episode> = pairs
            .iter()
            .map(|&(a, b, iv)| episode(&[a % k, b % k], &[iv]))
            .collect();
        let counter = CpuCounter::new(&stream);
        let exact = counter.count(CountKind::Exact, &eps).unwrap();
        let pre = counter.count(CountKind::PreElim, &eps).unwrap();
        for (i, ep) in eps.iter().enumerate() {
            prop_assert_eq!(exact[i], count_exact(&index, ep), "exact {:?}", ep);
            prop_assert_eq!(pre[i], count_preelim(&index, ep), "PreElim {:?}", ep);
        }
    }

    /// A list closed under prefixes in report order (shuffled, every length mixed, as a
    /// significance test's tested episodes): the CPU counter reorders it depth-first so that
    /// each listed prefix's ends serve all its extensions, and every count equals the exact
    /// machine's, in the caller's order.
    #[test]
    fn cpu_counter_counts_a_prefix_closed_list_in_any_order(
        ((times, types, k), episodes, seed) in stream_strategy(48).prop_flat_map(|(times, types, k)| {
            (Just((times, types, k)), prop::collection::vec(episode_strategy(k), 1..8), any::<u64>())
        }),
    ) {
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        let mut list: Vec<Episode> = Vec::new();
        for (ep_types, ivs) in &episodes {
            for n in 1..=ep_types.len() {
                list.push(episode(&ep_types[..n], &ivs[..n - 1]));
            }
        }
        // A seeded shuffle (Fisher–Yates on a xorshift).
        let mut state = seed | 1;
        for i in (1..list.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            list.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let counts = CpuCounter::new(&stream).count(CountKind::Exact, &list).unwrap();
        for (ep, c) in list.iter().zip(counts) {
            prop_assert_eq!(c, count_exact(&index, ep), "{:?}", ep);
        }
    }

    /// MTPE (segments, free machines, catch-up merge) equals the exact counter for any
    /// segmentation: boundaries on the tick grid (so on event times), segments shorter than an
    /// occurrence, bursts of one type that complete near every boundary.
    #[test]
    fn mtpe_equals_exact_for_any_segmentation(
        ((times, types, k), episodes, cuts) in stream_strategy(48).prop_flat_map(|(times, types, k)| {
            (
                Just((times, types, k)),
                prop::collection::vec(episode_strategy(k), 4),
                prop::collection::btree_set(0u32..80, 0..12),
            )
        }),
    ) {
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        let interior: Vec<f64> = cuts.iter().map(|&c| f64::from(c) * 0.001).collect();
        let segments = Segments::from_interior(&interior).unwrap();
        for (ep_types, ivs) in episodes {
            let ep = episode(&ep_types, &ivs);
            let outcome = count_mtpe(&index, &ep, &segments);
            prop_assert_eq!(outcome.count, count_exact(&index, &ep), "{:?} over {:?}", ep, interior);
        }
    }

    /// The successor bound (`episode::bound`) is never below the exact count of the
    /// candidate it bounds, on streams with repeated types, bursts and equal times.
    #[test]
    fn successor_bound_is_at_least_the_exact_count(
        ((times, types, k), episodes) in stream_strategy(48).prop_flat_map(|(times, types, k)| {
            (Just((times, types, k)), prop::collection::vec(episode_strategy(k), 6))
        }),
    ) {
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        // The packed table (one forward scan per first type) holds each last pair's
        // successor bits exactly.
        let mut pairs: Vec<(EventType, Interval, EventType)> = Vec::new();
        for (ep_types, ivs) in episodes.iter().filter(|(t, _)| t.len() >= 2) {
            let ep = episode(ep_types, ivs);
            let n = ep.len();
            let pair = (ep.types()[n - 2], ep.intervals()[n - 2], ep.types()[n - 1]);
            if !pairs.iter().any(|p| p.0 == pair.0 && p.1.bits() == pair.1.bits() && p.2 == pair.2) {
                pairs.push(pair);
            }
        }
        let table = SuccessorTable::build(&stream, &index, &pairs);
        prop_assert_eq!(table.len(), pairs.len());
        for &(a, iv, x) in &pairs {
            let slot = table.slot(a, iv, x).expect("every pair has a slot");
            prop_assert_eq!(table.bits(slot), &successor_bits(&index, a, iv, x)[..], "table {:?}", (a, iv, x));
        }
        for (ep_types, ivs) in episodes.into_iter().filter(|(t, _)| t.len() >= 2) {
            let ep = episode(&ep_types, &ivs);
            let n = ep.len();
            let prefix = Episode::new(ep.types()[..n - 1].to_vec(), ep.intervals()[..n - 2].to_vec());
            let (last, x, iv) = (ep.types()[n - 2], ep.types()[n - 1], ep.intervals()[n - 2]);
            let mut bits = Vec::new();
            let prefix_ends = Ends::of(&index, &prefix);
            end_bits(&prefix_ends, index.times(last).len(), &mut bits);
            // The bound path's ends (reachability only) are the same events, for the prefix
            // and the whole episode, from a fresh path and from one shared with the prefix.
            let mut path = ReachPath::default();
            prop_assert_eq!(path.ends(&index, &prefix), prefix_ends.indices(), "reach {:?}", prefix);
            let whole = Ends::of(&index, &ep);
            prop_assert_eq!(path.ends(&index, &ep), whole.indices(), "reach {:?}", ep);
            // As bit sets (a pair's written straight from its two types), along the same path.
            for (e, ends) in [(&prefix, &prefix_ends), (&ep, &whole)] {
                let (mut got, mut want) = (Vec::new(), Vec::new());
                path.end_bits(&index, e, &mut got);
                end_bits(ends, index.times(e.types()[e.len() - 1]).len(), &mut want);
                prop_assert_eq!(got, want, "end bits {:?}", e);
            }
            let succ = successor_bits(&index, last, iv, x);
            let bound = and_count(&bits, &succ);
            let exact = count_exact(&index, &ep);
            prop_assert!(bound >= exact, "bound {} < exact {} for {:?}", bound, exact, ep);
            // Level 2's bound, by a scan of the stream: the size of the same successor set.
            let pair = pair_successor_counts(&stream, &index, &[last], &[iv]);
            let scanned = u64::from(pair[x.index()]);
            let ones: u64 = succ.iter().map(|w| u64::from(w.count_ones())).sum();
            prop_assert_eq!(scanned, ones, "pair bound of {:?}", (last, iv, x));
            if n == 2 {
                prop_assert!(scanned >= exact, "pair bound {} < exact {} for {:?}", scanned, exact, ep);
            }
        }
    }

    /// A pair's end bits and successor bits equal their definitions when one type has far
    /// more events than the other (built by binary search from the sparse side) and when
    /// not (one merge), on a 1 ms grid with ties and delays on the interval edges.
    #[test]
    fn pair_bit_sets_equal_their_definitions_sparse_or_not(
        sparse in prop::collection::vec(0u32..80, 1..6),
        dense in prop::collection::vec(0u32..80, 1..120),
        swap in any::<bool>(),
        iv in 0..INTERVALS.len(),
    ) {
        let mut events: Vec<(u32, u32)> = sparse.iter().map(|&t| (t, 0)).chain(dense.iter().map(|&t| (t, 1))).collect();
        events.sort_unstable();
        let times: Vec<f64> = events.iter().map(|e| f64::from(e.0) * 0.001).collect();
        let types: Vec<u32> = events.iter().map(|e| e.1).collect();
        let stream = build(&times, &types, 2);
        let index = TypeIndex::new(&stream);
        let spec = INTERVALS[iv];
        let iv = spec.interval();
        let (a, x) = if swap { (EventType(1), EventType(0)) } else { (EventType(0), EventType(1)) };
        let (from, to) = (index.times(a), index.times(x));
        let low = iv.low_by_time(a < x);
        let fits = |e: f64, y: f64| y - e > low && y - e <= iv.high();
        let mut ends = Vec::new();
        pair_end_bits(&index, a, iv, x, &mut ends);
        let succ = successor_bits(&index, a, iv, x);
        for (j, &y) in to.iter().enumerate() {
            let want = from.iter().any(|&e| fits(e, y));
            prop_assert_eq!(ends[j / 64] >> (j % 64) & 1 == 1, want, "end {} of {:?}", j, (a, iv, x));
        }
        for (i, &e) in from.iter().enumerate() {
            let want = to.iter().any(|&y| fits(e, y));
            prop_assert_eq!(succ[i / 64] >> (i % 64) & 1 == 1, want, "successor {} of {:?}", i, (a, iv, x));
        }
        // And the ends are those of the pair's occurrences.
        let pair = Episode::new(vec![a, x], vec![iv]);
        let mut want = Vec::new();
        end_bits(&Ends::of(&index, &pair), to.len(), &mut want);
        prop_assert_eq!(&ends, &want);
        // One pass gives the same two bit sets and the pair's exact count.
        let scan = pair_count_and_bits(&index, a, iv, x);
        prop_assert_eq!(&scan.ends, &ends);
        prop_assert_eq!(&scan.succ, &succ);
        prop_assert_eq!(scan.count, count_exact(&index, &pair), "count of {:?}", (a, iv, x));
        let named: Vec<u32> = if swap { vec![1, 0] } else { vec![0, 1] };
        prop_assert_eq!(scan.count, oracle(&times, &types, &named, &[spec]));
    }

    #[test]
    fn two_pass_mining_equals_one_pass(
        (times, types, k) in stream_strategy(60),
        min_count in 1u64..4,
        chosen in prop::sample::subsequence((0..INTERVALS.len()).collect::<Vec<usize>>(), 1..=6),
    ) {
        let stream = build(&times, &types, k);
        let counter = CpuCounter::new(&stream);
        let intervals = chosen.iter().map(|&i| INTERVALS[i].interval()).collect();
        let mut config = MinerConfig::new(intervals, Threshold::MinCount(min_count));
        config.max_level = 5;
        config.strategy = MineStrategy::OnePass;
        let one = mine_with(&stream, &config, &counter, &NoProgress).unwrap();
        config.strategy = MineStrategy::TwoPass;
        let two = mine_with(&stream, &config, &counter, &NoProgress).unwrap();
        prop_assert_eq!(&one.episodes, &two.episodes);
        for (a, b) in one.levels.iter().zip(&two.levels) {
            prop_assert_eq!(a.candidates, b.candidates);
            prop_assert_eq!(a.frequent, b.frequent);
        }
        // Every reported episode really is frequent, with its exact count.
        for f in &two.episodes {
            prop_assert!(f.count >= two.min_count);
            prop_assert_eq!(counter.count(CountKind::Exact, std::slice::from_ref(&f.episode)).unwrap()[0], f.count);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Mining with the successor bounds returns exactly what mining without them returns,
    /// and the CPU counter's batch path (ends shared by a prefix) equals the exact machine.
    #[test]
    fn mining_with_bounds_equals_mining_without(
        (times, types, k) in stream_strategy(80),
        min_count in 1u64..5,
        chosen in prop::sample::subsequence((0..INTERVALS.len()).collect::<Vec<usize>>(), 1..=6),
    ) {
        let stream = build(&times, &types, k);
        let counter = CpuCounter::new(&stream);
        let intervals = chosen.iter().map(|&i| INTERVALS[i].interval()).collect();
        let mut config = MinerConfig::new(intervals, Threshold::MinCount(min_count));
        config.max_level = 5;
        config.bounds = false;
        let without = mine_with(&stream, &config, &counter, &NoProgress).unwrap();
        config.bounds = true;
        let with = mine_with(&stream, &config, &counter, &NoProgress).unwrap();
        prop_assert_eq!(&with.episodes, &without.episodes);
        prop_assert_eq!(with.levels.len(), without.levels.len());
        for (a, b) in with.levels.iter().zip(&without.levels) {
            prop_assert_eq!(a.candidates, b.candidates);
            prop_assert_eq!(a.frequent, b.frequent);
            prop_assert_eq!(b.removed_by_bounds, 0);
        }
        let index = counter.index();
        let all: Vec<Episode> = with.episodes.iter().map(|f| f.episode.clone()).collect();
        let counts = counter.count(CountKind::Exact, &all).unwrap();
        for (e, c) in all.iter().zip(counts) {
            prop_assert_eq!(c, count_exact(index, e), "{:?}", e);
        }
    }
}

/// Dense random streams (many types, bursts, equal times): mining with bounds finds exactly
/// the episodes that an exhaustive enumeration of every episode up to 3 nodes finds frequent
/// with the exact machine (itself checked against the brute-force oracle above), with the
/// same counts; and the bounds remove candidates there (they are exercised, not idle).
#[test]
fn mining_with_bounds_equals_exhaustive_enumeration_on_dense_streams() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(17);
    let mut removed = 0;
    for round in 0..12 {
        let k = rng.random_range(4..9u32);
        let n = rng.random_range(300..900);
        let mut t = 0.0;
        let (mut times, mut types) = (Vec::new(), Vec::new());
        for _ in 0..n {
            t += match rng.random_range(0..4) {
                0 => 0.0,
                1 => f64::from(rng.random_range(1..4u32)) * 0.001,
                _ => rng.random::<f64>() * 0.006,
            };
            times.push(t);
            types.push(rng.random_range(0..k));
        }
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        let ivs: Vec<usize> = if round % 2 == 0 {
            vec![0, 1, 3]
        } else {
            vec![2, 5]
        };
        let intervals: Vec<Interval> = ivs.iter().map(|&i| INTERVALS[i].interval()).collect();
        let min_count = rng.random_range(3..12u64);
        let mut config = MinerConfig::new(intervals, Threshold::MinCount(min_count));
        config.max_level = 3;
        let mined = mine_with(&stream, &config, &CpuCounter::new(&stream), &NoProgress).unwrap();
        removed += mined
            .levels
            .iter()
            .map(|l| l.removed_by_bounds)
            .sum::<usize>();
        let mut want: Vec<(Episode, u64)> = Vec::new();
        for a in 0..k {
            want.push((episode(&[a], &[]), 0));
            for b in 0..k {
                for &i in &ivs {
                    want.push((episode(&[a, b], &[i]), 0));
                    for c in 0..k {
                        for &j in &ivs {
                            want.push((episode(&[a, b, c], &[i, j]), 0));
                        }
                    }
                }
            }
        }
        for (e, c) in &mut want {
            *c = count_exact(&index, e);
        }
        want.retain(|(_, c)| *c >= min_count);
        let mut got: Vec<String> = mined
            .episodes
            .iter()
            .map(|f| format!("{:?} {}", f.episode, f.count))
            .collect();
        let mut want: Vec<String> = want.iter().map(|(e, c)| format!("{e:?} {c}")).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "round {round}");
    }
    assert!(
        removed > 0,
        "the bounds removed no candidate on these streams"
    );
}

/// A rare type followed by frequent ones (few occurrence ends among many events of the next
/// type), with bursts and equal times: the count from the ends equals the exact machine.
#[test]
fn sparse_ends_over_a_dense_type_count_exactly() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(23);
    let mut sparse_cases = 0;
    for _ in 0..300 {
        let n = rng.random_range(200..2000);
        let (mut t, mut times, mut types) = (0.0, Vec::new(), Vec::new());
        for _ in 0..n {
            t += match rng.random_range(0..5) {
                0 => 0.0,
                1 => 0.001,
                _ => rng.random::<f64>() * 0.004,
            };
            times.push(t);
            // Type 0 rare, 1 and 2 frequent.
            types.push(match rng.random_range(0..100) {
                0..=1 => 0,
                2..=60 => 1,
                _ => 2,
            });
        }
        let stream = build(&times, &types, 3);
        let index = TypeIndex::new(&stream);
        for _ in 0..4 {
            let len = rng.random_range(2..=4);
            let mut ep_types: Vec<u32> = vec![0];
            ep_types.extend((1..len).map(|_| rng.random_range(0..3)));
            let ivs: Vec<usize> = (1..len)
                .map(|_| rng.random_range(0..INTERVALS.len()))
                .collect();
            let ep = episode(&ep_types, &ivs);
            let prefix = Episode::new(ep.types()[..1].to_vec(), vec![]);
            let ends = Ends::of(&index, &prefix);
            if ends.len() * 16 < index.times(ep.types()[1]).len() {
                sparse_cases += 1;
            }
            assert_eq!(
                count_by_ends(&index, &ep),
                count_exact(&index, &ep),
                "{ep:?}"
            );
        }
    }
    assert!(
        sparse_cases > 100,
        "the sparse path ran {sparse_cases} times"
    );
}

/// Long random streams with real-valued times: the counters agree with the oracle where
/// occurrences are sparse enough to enumerate.
#[test]
fn exact_equals_oracle_on_poisson_like_streams() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
    for _ in 0..200 {
        let n = rng.random_range(50..400);
        let k = rng.random_range(1..6u32);
        let mut t = 0.0;
        let mut times = Vec::new();
        let mut types = Vec::new();
        for _ in 0..n {
            t += rng.random::<f64>() * 0.004;
            times.push(t);
            types.push(rng.random_range(0..k));
        }
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        for _ in 0..5 {
            let len = rng.random_range(1..=3);
            let ep_types: Vec<u32> = (0..len).map(|_| rng.random_range(0..k)).collect();
            let ivs: Vec<usize> = (1..len)
                .map(|_| rng.random_range(0..INTERVALS.len()))
                .collect();
            let ep = episode(&ep_types, &ivs);
            let iv_values: Vec<Spec> = ivs.iter().map(|&i| INTERVALS[i]).collect();
            assert_eq!(
                count_exact(&index, &ep),
                oracle(&times, &types, &ep_types, &iv_values),
                "{ep:?}"
            );
            assert!(count_preelim(&index, &ep) >= count_exact(&index, &ep));
        }
    }
}

/// MTPE equals the exact counter on long bursty streams with real-valued times, for segment
/// counts from 1 to 256, and the merge's catch-up path (including catch-ups that never meet the
/// free machine) is exercised, not just the fast path.
#[test]
fn mtpe_equals_exact_on_bursty_streams_and_exercises_catch_ups() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(29);
    let (mut catch_ups, mut unjoined) = (0u64, 0u64);
    for _ in 0..150 {
        let n = rng.random_range(100..1500);
        let k = rng.random_range(1..4u32);
        let mut t = 0.0;
        let mut times = Vec::new();
        let mut types = Vec::new();
        for _ in 0..n {
            // Bursts (sub-ms gaps) between quiet stretches.
            t += if rng.random_bool(0.8) {
                rng.random::<f64>() * 0.0015
            } else {
                rng.random::<f64>() * 0.05
            };
            times.push(t);
            types.push(rng.random_range(0..k));
        }
        let stream = build(&times, &types, k);
        let index = TypeIndex::new(&stream);
        for _ in 0..6 {
            let len = rng.random_range(1..=5);
            let ep_types: Vec<u32> = (0..len).map(|_| rng.random_range(0..k)).collect();
            let ivs: Vec<usize> = (1..len)
                .map(|_| rng.random_range(0..INTERVALS.len()))
                .collect();
            let ep = episode(&ep_types, &ivs);
            let exact = count_exact(&index, &ep);
            for r in [1, 2, 7, 64, 256] {
                let segments = Segments::by_events(&times, r);
                let outcome = count_mtpe(&index, &ep, &segments);
                assert_eq!(outcome.count, exact, "{ep:?} with {r} segments");
                // The GPU's segmented PreElim: the same scheme on the relaxed episode.
                assert_eq!(
                    count_mtpe(&index, &ep.relaxed(), &segments).count,
                    count_preelim(&index, &ep),
                    "PreElim of {ep:?} with {r} segments"
                );
                catch_ups += outcome.catch_ups;
                unjoined += outcome.unjoined;
            }
        }
    }
    assert!(catch_ups > 100, "catch-ups exercised: {catch_ups}");
    assert!(unjoined > 10, "unjoined catch-ups exercised: {unjoined}");
}
