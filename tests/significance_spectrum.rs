//! The `spectrum` procedure's per-surrogate statistic by the exact threshold search
//! (`synfire::significance::spectrum::max_count_by_size`) against full mining: for every size
//! k = 2..=max_level, the search's largest count equals the largest count among the episodes
//! of k nodes that `mine` finds frequent (0 when none), on random streams (a 1 ms grid, so equal
//! times and delays on interval edges are common; few types, so repeated types are common), on
//! synthetic dense streams (`synfire::synth`: bursts, chains, synchronous pairs) and on dithered
//! surrogates, with interval sets that admit zero delays (`[0, x]`, `[0, 0]`, in seconds and in
//! samples), thresholds of every kind and max levels 1 to 5; and the same with the join bounds
//! taken from the counter (as a GPU counter gives them) instead of computed by the search.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use synfire::episode::bound::{JoinBounds, join_bounds_cpu};
use synfire::episode::{
    CountError, CountKind, Counter, CpuCounter, Episode, Interval, MinerConfig, NoProgress,
    Threshold, TypeIndex, mine,
};
use synfire::event::EventStream;
use synfire::significance::Surrogates;
use synfire::significance::spectrum::{max_count_at_floor, max_count_by_size, pair_candidates_at};
use synfire::synth::dense::{DenseParams, generate_dense};
use synfire::synth::sym26::Chain;

/// The largest count per size among the episodes full mining finds frequent (index = size).
fn mined_max(stream: &EventStream, config: &MinerConfig) -> (u64, Vec<u64>) {
    let r = mine(stream, config).unwrap();
    let mut max = vec![0u64; config.max_level + 1];
    for f in r.episodes.iter().filter(|f| f.episode.len() >= 2) {
        let m = &mut max[f.episode.len()];
        *m = (*m).max(f.count);
    }
    (r.min_count, max)
}

/// The CPU counter in batches of 5, exact counts only (PreElim would be a bound, not a count:
/// the search must never ask for one), offering join bounds as a GPU counter does (computed
/// by `join_bounds_cpu`, declined every other round so that the search's fallback runs too)
/// and asking for coarse threshold steps as a GPU counter does.
#[derive(Debug)]
struct SmallExactBatches(CpuCounter, TypeIndex, AtomicU64);

impl Counter for SmallExactBatches {
    fn name(&self) -> &str {
        "cpu-5"
    }
    fn events_touched(&self, episode: &Episode) -> u64 {
        self.0.events_touched(episode)
    }
    fn count(&self, kind: CountKind, episodes: &[Episode]) -> Result<Vec<u64>, CountError> {
        assert_eq!(kind, CountKind::Exact, "the search asked for a bound");
        assert!(episodes.len() <= 5, "a batch larger than preferred");
        self.0.count(kind, episodes)
    }
    fn preferred_batch(&self) -> usize {
        5
    }
    fn has_join_bounds(&self) -> bool {
        true
    }
    fn coarse_thresholds(&self) -> bool {
        true
    }
    fn join_bounds(&self, job: &JoinBounds) -> Option<Vec<u64>> {
        let n = job.prefixes[0].len();
        assert!(
            job.prefixes.iter().all(|p| p.len() == n),
            "prefixes of one size"
        );
        for &(p, q) in &job.joins {
            let alpha = &job.prefixes[p as usize];
            assert_eq!(
                alpha.types()[n - 1],
                job.pairs[q as usize].0,
                "a join's pair starts at its prefix's end"
            );
        }
        self.2
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(2)
            .then(|| join_bounds_cpu(&self.1, job))
    }
}

/// Checks the search against full mining with both counters; returns the search's work.
fn check(stream: &EventStream, config: &MinerConfig) -> Result<u64, TestCaseError> {
    let (min_count, want) = mined_max(stream, config);
    let counter = CpuCounter::new(stream);
    let got = max_count_by_size(stream, config, &counter, &NoProgress).unwrap();
    prop_assert_eq!(got.min_count, min_count);
    prop_assert_eq!(&got.max_by_size, &want, "min count {}", min_count);
    let small = SmallExactBatches(
        CpuCounter::new(stream),
        TypeIndex::new(stream),
        AtomicU64::new(0),
    );
    let again = max_count_by_size(stream, config, &small, &NoProgress).unwrap();
    // Another schedule (coarse steps) and bounds from the counter: the same maxima.
    prop_assert_eq!(again.min_count, got.min_count);
    prop_assert_eq!(&again.max_by_size, &got.max_by_size);
    // Every candidate the search counts is one mining (with its bounds) counts too.
    let mined = mine(stream, config).unwrap();
    let mining: usize = mined
        .levels
        .iter()
        .map(|l| l.candidates - l.removed_by_bounds)
        .sum();
    for counted in [got.counted, again.counted] {
        prop_assert!(
            counted <= mining as u64,
            "search {} > mining {}",
            counted,
            mining
        );
    }
    check_floors(stream, config, &mined, min_count, &want)?;
    Ok(got.counted)
}

/// The one-floor pass (`max_count_at_floor`) at several floors against mining's episodes:
/// its largest count per size among the episodes reaching the floor equals the mined one, it
/// resolves to the search's maxima whenever the floor is at or below every size's maximum (or
/// is the minimum count), never to anything else, and its pair candidates hold every pair
/// reaching the floor.
fn check_floors(
    stream: &EventStream,
    config: &MinerConfig,
    mined: &synfire::episode::MiningResult,
    min_count: u64,
    want: &[u64],
) -> Result<(), TestCaseError> {
    let counter = CpuCounter::new(stream);
    let top = config.max_level.max(1);
    let c1: Vec<u64> = counter
        .count(
            CountKind::Exact,
            &(0..stream.alphabet().len())
                .map(|t| Episode::single(synfire::event::EventType(t as u32)))
                .collect::<Vec<_>>(),
        )
        .unwrap();
    for floor in [
        0,
        min_count,
        min_count + 3,
        want[top],
        want.get(2).copied().unwrap_or(0),
        want.get(2).copied().unwrap_or(0) + 1,
    ] {
        let got = max_count_at_floor(stream, config, &counter, &NoProgress, floor).unwrap();
        let f = floor.max(min_count);
        prop_assert_eq!(got.floor, f);
        let mut best = vec![0u64; config.max_level + 1];
        for e in mined
            .episodes
            .iter()
            .filter(|e| e.episode.len() >= 2 && e.count >= f)
        {
            let b = &mut best[e.episode.len()];
            *b = (*b).max(e.count);
        }
        prop_assert_eq!(&got.best_by_size, &best, "floor {}", f);
        let resolved = got.resolved();
        if let Some(r) = &resolved {
            prop_assert_eq!(r, want, "floor {}", f);
        }
        if f == min_count || (2..=config.max_level).all(|k| want[k] >= f) {
            prop_assert!(resolved.is_some(), "floor {} at or below every maximum", f);
        }
        if config.max_level >= 2 {
            let pairs = pair_candidates_at(stream, &TypeIndex::new(stream), config, &c1, f);
            prop_assert!(
                pairs
                    .windows(2)
                    .all(|w| (w[0].0, w[0].1, w[0].2) < (w[1].0, w[1].1, w[1].2))
            );
            for e in mined
                .episodes
                .iter()
                .filter(|e| e.episode.len() == 2 && e.count >= f)
            {
                let (a, b) = (e.episode.types()[0], e.episode.types()[1]);
                let iv = config
                    .intervals
                    .iter()
                    .position(|&iv| iv == e.episode.intervals()[0])
                    .unwrap();
                prop_assert!(
                    pairs.contains(&(a, iv, b)),
                    "pair {:?} with count {} missing",
                    e.episode,
                    e.count
                );
            }
        }
    }
    Ok(())
}

/// Intervals as `(low, high, closed, rate_hz)`: seconds when `rate_hz` is 0, else whole
/// samples of that clock. Half-open, closed, lag-0 (`[0, x]`, `[0, 0]`) and sample intervals.
const INTERVALS: [(f64, f64, bool, f64); 10] = [
    (0.0, 0.003, false, 0.0),
    (0.002, 0.005, false, 0.0),
    (0.001, 0.002, false, 0.0),
    (0.0, 0.001, false, 0.0),
    (0.01, 0.05, false, 0.0),
    (0.0, 0.002, true, 0.0),
    (0.001, 0.003, true, 0.0),
    (0.0, 0.0, true, 0.0),
    (0.0, 1.0, true, 1000.0),
    (1.0, 3.0, false, 1000.0),
];

fn interval(i: usize) -> Interval {
    let (lo, hi, closed, rate) = INTERVALS[i];
    if rate > 0.0 {
        Interval::samples(lo, hi, closed, rate).unwrap()
    } else {
        Interval::seconds(lo, hi, closed).unwrap()
    }
}

fn build(times: &[f64], types: &[u32], k: u32) -> EventStream {
    common::stream(times, types, k)
}

/// Streams on a 1 ms grid with 1 to 5 types.
fn stream_strategy(max_events: usize) -> impl Strategy<Value = (Vec<f64>, Vec<u32>, u32)> {
    (1u32..=5).prop_flat_map(move |k| {
        prop::collection::vec((0u32..120, 0..k), 1..max_events).prop_map(move |mut ev| {
            ev.sort_by_key(|e| (e.0, e.1));
            let times = ev.iter().map(|e| f64::from(e.0) * 0.001).collect();
            let types = ev.iter().map(|e| e.1).collect();
            (times, types, k)
        })
    })
}

/// Every kind of threshold: a count, a fraction of the events, a rate per second.
fn threshold_strategy() -> impl Strategy<Value = Threshold> {
    prop_oneof![
        (1u64..8).prop_map(Threshold::MinCount),
        (0.005f64..0.2).prop_map(Threshold::FractionOfEvents),
        (5.0f64..60.0).prop_map(Threshold::PerSecond),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Random streams: the search's largest count per size equals full mining's, for every
    /// size up to max_level (1 to 5), with interval sets that admit zero delays and every kind
    /// of threshold.
    #[test]
    fn search_equals_full_mining_on_random_streams(
        (times, types, k) in stream_strategy(140),
        threshold in threshold_strategy(),
        chosen in prop::sample::subsequence((0..INTERVALS.len()).collect::<Vec<usize>>(), 1..=4),
        max_level in 1usize..=5,
    ) {
        let stream = build(&times, &types, k);
        let mut config = MinerConfig::new(chosen.iter().map(|&i| interval(i)).collect(), threshold);
        config.max_level = max_level;
        check(&stream, &config)?;
    }
}

/// Dense random streams with bursts and synchronous spikes, as tests/episodes_oracle.rs makes
/// them, with lag-0 intervals.
fn dense_stream(seed: u64) -> EventStream {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let k = rng.random_range(3..9u32);
    let n = rng.random_range(300..1500);
    let mut t = 0.0;
    let mut ev: Vec<(f64, u32)> = Vec::with_capacity(n);
    for _ in 0..n {
        t += match rng.random_range(0..4) {
            0 => 0.0,
            1 => f64::from(rng.random_range(1..4u32)) * 0.001,
            _ => rng.random::<f64>() * 0.006,
        };
        ev.push((t, rng.random_range(0..k)));
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (times, types): (Vec<f64>, Vec<u32>) = ev.into_iter().unzip();
    build(&times, &types, k)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Dense random streams (bursts, equal times, many occurrences per episode).
    #[test]
    fn search_equals_full_mining_on_dense_random_streams(
        seed in 0u64..1_000_000,
        min_count in 2u64..40,
        chosen in prop::sample::subsequence((0..INTERVALS.len()).collect::<Vec<usize>>(), 1..=3),
        max_level in 2usize..=4,
    ) {
        let stream = dense_stream(seed);
        let mut config =
            MinerConfig::new(chosen.iter().map(|&i| interval(i)).collect(), Threshold::MinCount(min_count));
        config.max_level = max_level;
        check(&stream, &config)?;
    }
}

/// A small version of the Neuropixels-like preset: `units` units for `duration_s` seconds,
/// with a chain and a synchronous pair when asked.
fn synthetic(seed: u64, units: usize, duration_s: f64, structure: bool) -> EventStream {
    let mut p = DenseParams::neuropixels(seed);
    p.units = units;
    p.duration_s = duration_s;
    p.rate_median_hz = 6.0;
    p.sync_pairs = if structure { vec![(0, 1)] } else { Vec::new() };
    p.chains = if structure {
        vec![Chain {
            neurons: vec![2, 3, 4, 5],
            delay_s: (0.003, 0.004),
        }]
    } else {
        Vec::new()
    };
    generate_dense(&p).unwrap().0
}

/// Interval sets of the synthetic checks: the workloads' own, one with lag 0 (`[0, 2 ms]`),
/// one in samples of a 30 kHz clock with `[0, 5]` samples.
fn synthetic_intervals(which: usize) -> Vec<Interval> {
    match which {
        0 => Interval::parse_list("0-0.005,0.005-0.010,0.010-0.020").unwrap(),
        1 => vec![
            Interval::closed(0.0, 0.002).unwrap(),
            Interval::new(0.002, 0.008).unwrap(),
        ],
        _ => vec![
            Interval::samples(0.0, 5.0, true, 30_000.0).unwrap(),
            Interval::samples(5.0, 150.0, false, 30_000.0).unwrap(),
        ],
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Synthetic dense streams (`synfire::synth`: log-normal rates, refractory and bursting
    /// units, an embedded chain and a synchronous pair), to four nodes.
    #[test]
    fn search_equals_full_mining_on_synthetic_streams(
        seed in 0u64..10_000,
        units in 6usize..16,
        structure in any::<bool>(),
        which in 0usize..3,
        min_count in 3u64..30,
        max_level in 2usize..=4,
    ) {
        let stream = synthetic(seed, units, 20.0, structure);
        let mut config = MinerConfig::new(synthetic_intervals(which), Threshold::MinCount(min_count));
        config.max_level = max_level;
        check(&stream, &config)?;
    }
}

/// Dithered surrogates, what the significance test runs the search on: equal to mining each,
/// and with the workloads' intervals (maxima far above the minimum count) the search counts
/// under a quarter of what mining counts.
#[test]
fn search_equals_full_mining_on_surrogates_and_counts_less() {
    let recording = synthetic(5, 20, 30.0, true);
    for (which, min_count) in [(0usize, 12u64), (1, 8), (2, 8)] {
        let mut config =
            MinerConfig::new(synthetic_intervals(which), Threshold::MinCount(min_count));
        config.max_level = 4;
        let surrogates =
            Surrogates::new(&recording, "dither:0.01".parse().unwrap(), 3, None).unwrap();
        for s in 0..4 {
            let x = surrogates.generate(s).unwrap();
            let searched = check(&x, &config).unwrap();
            let mined = mine(&x, &config).unwrap();
            let mining: usize = mined
                .levels
                .iter()
                .map(|l| l.candidates - l.removed_by_bounds)
                .sum();
            if which == 0 {
                assert!(
                    4 * searched < mining as u64,
                    "surrogate {s}: the search counted {searched}, mining {mining}"
                );
            }
        }
    }
}

/// A cancelled search stops with `MineError::Cancelled`.
#[test]
fn a_cancelled_search_stops() {
    struct Cancelled;
    impl synfire::episode::Progress for Cancelled {
        fn cancelled(&self) -> bool {
            true
        }
    }
    let stream = synthetic(1, 10, 10.0, true);
    let mut config = MinerConfig::new(synthetic_intervals(0), Threshold::MinCount(5));
    config.max_level = 3;
    let r = max_count_by_size(&stream, &config, &CpuCounter::new(&stream), &Cancelled);
    assert!(
        matches!(r, Err(synfire::episode::MineError::Cancelled)),
        "{r:?}"
    );
}
