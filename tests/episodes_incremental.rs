//! Incremental level-2 counting across sliding windows (`episode::incremental`) against the
//! counters it must equal: the chains' lengths against the exact counter (Algorithm 1), chains
//! updated from an earlier window against chains from scratch, and whole per-window mining
//! through `ChainCache` against offline mining of each window — on random streams with equal
//! times and events on window boundaries, and on random sequences of windows (sliding, hop
//! longer than the window, jumps back, restarts, windows whose overlap holds different events,
//! previews of open windows).

use std::sync::Arc;

use proptest::prelude::*;
use synfire::device::DeviceChoice;
use synfire::episode::incremental::{
    episode_chain, pair_chain, update_episode_chain, update_pair_chain,
};
use synfire::episode::{
    ChainCache, Episode, GpuSettings, Interval, MinerConfig, MiningResult, NoProgress, Threshold,
    TypeIndex, count_exact, count_preelim, mine, mine_with,
};
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::live::stage::Stage;
use synfire::live::stage::episodes::EpisodeStage;
use synfire::live::window::{SpikeWindower, Window};
use synfire::report::MineReport;

/// Seconds per tick: times, interval bounds and window bounds all lie on this grid, so equal
/// times, delays exactly on interval bounds and events exactly on window bounds are common.
const TICK: f64 = 0.001;

const INTERVALS: [(f64, f64); 5] = [
    (0.0, 0.003),
    (0.002, 0.005),
    (0.001, 0.002),
    (0.0, 0.001),
    (0.01, 0.05),
];

/// A sorted stream of up to `max_events` events of 1–4 types on ticks `0..span`.
fn stream_strategy(max_events: usize, span: u32) -> impl Strategy<Value = (Vec<(u32, u32)>, u32)> {
    (1u32..=4).prop_flat_map(move |k| {
        prop::collection::vec((0u32..span, 0..k), 1..max_events).prop_map(move |mut ev| {
            ev.sort_unstable();
            (ev, k)
        })
    })
}

/// The canonical stream of tick events (labels `u0`, `u1`, …, as a live window builds it).
fn build(events: &[(u32, u32)]) -> Option<EventStream> {
    let labels: Vec<String> = (0..4).map(|i| format!("u{i}")).collect();
    EventStream::from_labelled(
        events
            .iter()
            .map(|&(t, ty)| (f64::from(t) * TICK, labels[ty as usize].as_str())),
    )
    .ok()
}

/// The events of `events` in ticks `[start, end)`.
fn slice(events: &[(u32, u32)], start: u32, end: u32) -> Vec<(u32, u32)> {
    events
        .iter()
        .copied()
        .filter(|&(t, _)| t >= start && t < end)
        .collect()
}

/// Times (seconds) of type `ty` among tick events.
fn times_of(events: &[(u32, u32)], ty: u32) -> Vec<f64> {
    events
        .iter()
        .filter(|e| e.1 == ty)
        .map(|e| f64::from(e.0) * TICK)
        .collect()
}

fn config(min_count: u64, n_iv: usize, max_level: usize) -> MinerConfig {
    let intervals = INTERVALS[..n_iv]
        .iter()
        .map(|&(l, h)| Interval::new(l, h).unwrap())
        .collect();
    let mut c = MinerConfig::new(intervals, Threshold::MinCount(min_count));
    c.max_level = max_level;
    c
}

/// Mines `stream` through the cache and checks the result against offline mining.
fn mine_both(
    cache: &mut ChainCache,
    stream: &EventStream,
    config: &MinerConfig,
) -> Result<u64, TestCaseError> {
    let counter = cache.counter(stream);
    let live = mine_with(stream, config, &counter, &NoProgress).unwrap();
    let reused = counter.reused();
    counter.finish();
    let offline = mine(stream, config).unwrap();
    assert_same(&live, &offline)?;
    Ok(reused)
}

fn assert_same(live: &MiningResult, offline: &MiningResult) -> Result<(), TestCaseError> {
    prop_assert_eq!(live.min_count, offline.min_count);
    prop_assert_eq!(&live.episodes, &offline.episodes);
    prop_assert_eq!(live.levels.len(), offline.levels.len());
    for (a, b) in live.levels.iter().zip(&offline.levels) {
        prop_assert_eq!(a.candidates, b.candidates);
        prop_assert_eq!(a.eliminated_by_preelim, b.eliminated_by_preelim);
        prop_assert_eq!(a.frequent, b.frequent);
    }
    Ok(())
}

/// A window of a sequence: where it lies and which version of the stream it reads.
#[derive(Clone, Debug)]
enum Step {
    /// The next sliding window (start + hop, same length).
    Slide,
    /// A window anywhere (a jump back or forward, a restart): start tick, length.
    Jump(u32, u32),
    /// The next sliding window, read from the perturbed stream (different events in the
    /// overlap with the previous window).
    Perturbed,
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => Just(Step::Slide),
        1 => (0u32..400, 1u32..300).prop_map(|(s, l)| Step::Jump(s, l)),
        1 => Just(Step::Perturbed),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A chain's length is the exact count (Algorithm 1), same-type pairs `A → A` included;
    /// its ends are strictly increasing times of `B`.
    #[test]
    fn chain_length_is_the_exact_count((events, k) in stream_strategy(60, 120)) {
        let stream = build(&events).unwrap();
        let index = TypeIndex::new(&stream);
        for a in 0..stream.alphabet().len() as u32 {
            for b in 0..stream.alphabet().len() as u32 {
                for &(low, high) in &INTERVALS {
                    let (ta, tb) = (index.times(EventType(a)), index.times(EventType(b)));
                    let chain = pair_chain(ta, tb, low, high);
                    let ep = Episode::new(vec![EventType(a), EventType(b)], vec![Interval::new(low, high).unwrap()]);
                    prop_assert_eq!(chain.len() as u64, count_exact(&index, &ep), "{:?} k={}", ep, k);
                    prop_assert!(chain.windows(2).all(|w| w[0] < w[1]));
                    prop_assert!(chain.iter().all(|e| tb.contains(e)));
                }
            }
        }
    }

    /// The chain of a window updated from the chain of an earlier window of the same stream
    /// (starting no later, ending no later; overlapping, touching or disjoint) equals the chain
    /// from scratch, for every pair, same-type pairs included.
    #[test]
    fn updated_chain_equals_chain_from_scratch(
        (events, k) in stream_strategy(80, 300),
        (s1, len1, dstart, dend) in (0u32..200, 1u32..200, 0u32..150, 0u32..150),
    ) {
        let (e1, s2) = (s1 + len1, s1 + dstart);
        let e2 = (e1 + dend).max(s2 + 1);
        let (old, new) = (slice(&events, s1, e1), slice(&events, s2, e2));
        // The earlier window's chains are complete up to its newest event (of any type).
        let Some(upto) = old.last().map(|e| f64::from(e.0) * TICK) else {
            return Ok(());
        };
        for a in 0..k {
            for b in 0..k {
                for &(low, high) in &INTERVALS {
                    let cached = pair_chain(&times_of(&old, a), &times_of(&old, b), low, high);
                    let (na, nb) = (times_of(&new, a), times_of(&new, b));
                    prop_assert_eq!(
                        update_pair_chain(&na, &nb, low, high, &cached, upto),
                        pair_chain(&na, &nb, low, high),
                        "{}->{} ({}, {}] old [{}, {}) new [{}, {})", a, b, low, high, s1, e1, s2, e2
                    );
                }
            }
        }
    }


    /// The chain of any episode (up to four nodes, repeated types included) has the exact
    /// count's length, and updated from the chain of an earlier window of the same stream it
    /// equals the chain from scratch; for the relaxed episode, the length is PreElim's count.
    #[test]
    fn episode_chains_equal_the_exact_counter(
        (events, k) in stream_strategy(80, 300),
        shapes in prop::collection::vec((prop::collection::vec(0u32..4, 1..=4), prop::collection::vec(0..INTERVALS.len(), 3)), 4),
        (s1, len1, dstart, dend) in (0u32..200, 1u32..200, 0u32..150, 0u32..150),
    ) {
        let (e1, s2) = (s1 + len1, s1 + dstart);
        let e2 = (e1 + dend).max(s2 + 1);
        let whole = build(&events).unwrap();
        let (old, new) = (slice(&events, s1, e1), slice(&events, s2, e2));
        // One alphabet for every slice: the whole stream's (types keep their ids).
        // (`None` for no events: a stream is never empty.)
        let index_of = |ev: &[(u32, u32)]| {
            EventStream::new(
                ev.iter().map(|e| f64::from(e.0) * TICK).collect(),
                ev.iter().map(|e| EventType(e.1)).collect(),
                Alphabet::from_labels((0..4).map(|i| format!("u{i}"))).unwrap(),
                Ordering::RequireSorted,
            ).ok().map(|s| TypeIndex::new(&s))
        };
        let (old_index, new_index) = (index_of(&old), index_of(&new));
        let whole_index = index_of(&events).unwrap();
        prop_assert_eq!(whole_index.all_times().len(), whole.len());
        for (types, ivs) in &shapes {
            let ep = Episode::new(
                types.iter().map(|&t| EventType(t % k)).collect(),
                ivs[..types.len() - 1].iter().map(|&i| Interval::new(INTERVALS[i].0, INTERVALS[i].1).unwrap()).collect(),
            );
            let relaxed = Episode::new(
                ep.types().to_vec(),
                ep.intervals().iter().map(|iv| Interval::new(0.0, iv.high()).unwrap()).collect(),
            );
            let chain = episode_chain(&whole_index, &ep);
            prop_assert_eq!(chain.len() as u64, count_exact(&whole_index, &ep), "{:?}", ep);
            prop_assert!(chain.windows(2).all(|w| w[0] < w[1]));
            prop_assert_eq!(episode_chain(&whole_index, &relaxed).len() as u64, count_preelim(&whole_index, &ep), "PreElim {:?}", ep);
            let cached = old_index.as_ref().map(|i| episode_chain(i, &ep)).unwrap_or_default();
            if let Some(new_index) = &new_index {
                prop_assert_eq!(
                    update_episode_chain(new_index, &ep, &cached),
                    episode_chain(new_index, &ep),
                    "{:?} old [{}, {}) new [{}, {})", ep, s1, e1, s2, e2
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Mining a random sequence of windows through one `ChainCache` gives, for every window,
    /// exactly offline mining's result: sliding windows (hop shorter, equal or longer than the
    /// window), jumps, empty windows (skipped, as the windower skips them), and windows of a
    /// perturbed stream whose overlap with the previous window differs.
    #[test]
    fn incremental_mining_equals_offline_on_any_window_sequence(
        (events, _k) in stream_strategy(120, 400),
        extra in prop::collection::vec((0u32..400, 0u32..4), 0..6),
        dropped in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        (start, length, hop) in (0u32..50, 1u32..250, 1u32..300),
        steps in prop::collection::vec(step_strategy(), 1..12),
        (min_count, n_iv, max_level) in (1u64..4, 1usize..=INTERVALS.len(), 2usize..5),
    ) {
        // The perturbed stream: some events removed, some added.
        let mut perturbed = events.clone();
        for i in &dropped {
            if !perturbed.is_empty() {
                perturbed.remove(i.index(perturbed.len()));
            }
        }
        perturbed.extend(extra);
        perturbed.sort_unstable();
        let config = config(min_count, n_iv, max_level);
        let mut cache = ChainCache::new();
        let (mut s, mut len) = (start, length);
        for step in steps {
            let source = match step {
                Step::Slide => { s += hop; &events }
                Step::Jump(js, jl) => { s = js; len = jl; &events }
                Step::Perturbed => { s += hop; &perturbed }
            };
            let Some(stream) = build(&slice(source, s, s + len)) else {
                continue; // an empty window is never emitted
            };
            mine_both(&mut cache, &stream, &config)?;
        }
    }

    /// The episode stage fed by a windower with previews (random arrival order within the
    /// allowed lateness, so a preview may miss events its window later holds) returns, for every
    /// emitted window, offline mining's episodes.
    #[test]
    fn stage_with_previews_equals_offline(
        (events, _k) in stream_strategy(150, 600),
        jitter in prop::collection::vec(0u32..20, 150),
        (length, hop, lateness) in (20u32..300, 5u32..100, 0u32..20),
        min_count in 1u64..3,
    ) {
        let config = config(min_count, 3, 4);
        let mut stage = EpisodeStage::new(config.clone(), DeviceChoice::Cpu, GpuSettings::default()).unwrap();
        prop_assert!(stage.wants_previews());
        let mut windower = SpikeWindower::new(
            "w",
            "s",
            f64::from(length) * TICK,
            f64::from(hop) * TICK,
            f64::from(lateness) * TICK,
        )
        .with_previews(true);
        let names: Arc<[Arc<str>]> = (0..4).map(|i| Arc::from(format!("u{i}"))).collect();
        // Arrival order: each event delayed by up to 20 ticks of data time.
        let mut arrivals: Vec<(u32, u32, u32)> = events
            .iter()
            .zip(&jitter)
            .map(|(&(t, ty), &j)| (t + j, t, ty))
            .collect();
        arrivals.sort_unstable();
        let mut out: Vec<Window> = Vec::new();
        for &(_, t, ty) in &arrivals {
            windower.push(f64::from(t) * TICK, ty, &names, 0, &mut out);
        }
        windower.flush(&names, 0, &mut out);
        let mut accepted = Vec::new();
        for w in &out {
            if w.preview {
                stage.preview(w);
                continue;
            }
            let got = stage.process(w).unwrap();
            accepted.push(w.index);
            let synfire::live::window::WindowData::Spikes { times, units, .. } = &w.data else {
                unreachable!("spike windows");
            };
            let window_events: Vec<(f64, String)> = times
                .iter()
                .zip(units)
                .map(|(&t, &u)| (t, format!("u{u}")))
                .collect();
            let stream = EventStream::from_labelled(window_events.iter().map(|(t, l)| (*t, l.as_str()))).unwrap();
            let offline = mine(&stream, &config).unwrap();
            let want = MineReport::new("", &stream, &config, &offline).episodes;
            prop_assert_eq!(&got.episodes, &want, "window {}", w.index);
            prop_assert_eq!(got.min_count, offline.min_count);
        }
        prop_assert!(accepted.windows(2).all(|p| p[0] < p[1]));
    }
}

/// The windower's previews: off by default; on, one per hop while the first window of a
/// stream is open, each holding exactly the events received so far in that window's interval;
/// none while consecutive windows close; again after a restart (a flush).
#[test]
fn previews_show_open_windows_only_when_no_previous_window_serves() {
    let names: Arc<[Arc<str>]> = vec![Arc::from("a")].into();
    let events: Vec<f64> = (0..400).map(|i| f64::from(i) * 0.05).collect(); // 0 .. 19.95 s
    let run = |previews: bool| {
        let mut w = SpikeWindower::new("w", "s", 5.0, 1.0, 0.0).with_previews(previews);
        let mut out = Vec::new();
        for &t in &events {
            w.push(t, 0, &names, 0, &mut out);
        }
        // A publisher restart: open windows are flushed and the stream starts again at 0.
        w.flush(&names, 0, &mut out);
        for &t in &events[..200] {
            w.push(t, 0, &names, 0, &mut out);
        }
        out
    };
    let plain = run(false);
    assert!(plain.iter().all(|w| !w.preview));
    let with = run(true);
    let closed: Vec<(u64, usize, bool)> = with
        .iter()
        .filter(|w| !w.preview)
        .map(|w| (w.index, w.events(), w.complete))
        .collect();
    let plain_closed: Vec<(u64, usize, bool)> = plain
        .iter()
        .map(|w| (w.index, w.events(), w.complete))
        .collect();
    assert_eq!(closed, plain_closed, "previews change no emitted window");
    // Window 0 = [0, 5) while open: at watermarks 0, 1, 2, 3 and 4 s, with 1, 21, 41, 61, 81
    // events (those before the watermark, and the one at it); none while windows 1, 2, …
    // close one per hop; the same again after the restart.
    let previews: Vec<(usize, u64, usize)> = with
        .iter()
        .enumerate()
        .filter(|(_, w)| w.preview)
        .map(|(i, w)| (i, w.index, w.events()))
        .collect();
    let sizes: Vec<(u64, usize)> = previews.iter().map(|p| (p.1, p.2)).collect();
    let once = [(0, 1), (0, 21), (0, 41), (0, 61), (0, 81)];
    assert_eq!(sizes, [once, once].concat());
    let restart = with.iter().position(|w| !w.complete && !w.preview).unwrap();
    assert!(previews[..5].iter().all(|p| p.0 < restart));
    assert!(previews[5..].iter().all(|p| p.0 > restart));
    for w in with.iter().filter(|w| w.preview) {
        let synfire::live::window::WindowData::Spikes { times, .. } = &w.data else {
            panic!("spike window");
        };
        assert!(times.iter().all(|&t| t >= w.start_s && t < w.end_s));
        assert!(!w.complete);
    }
}

/// Sliding windows over a synthetic recording with embedded chains (the `sym26` benchmark):
/// after the first window every level-2 candidate reuses its chain, longer candidates reuse
/// theirs, and every window's result equals offline mining. The reuse is checked without the
/// successor bounds (with them, a pair removed in one window and counted in the next has no
/// chain to reuse); the results are checked with and without them.
#[test]
fn sliding_windows_reuse_every_chain_and_equal_offline() {
    let stream = synfire::synth::generate(&synfire::synth::SynthParams::sym26(3)).unwrap();
    let intervals = vec![
        Interval::new(0.004, 0.006).unwrap(),
        Interval::new(0.009, 0.011).unwrap(),
    ];
    let mut config = MinerConfig::new(intervals, Threshold::PerSecond(6.0));
    config.max_level = 5;
    config.bounds = false;
    let mut bounded = config.clone();
    bounded.bounds = true;
    let mut cache = ChainCache::new();
    let mut bounded_cache = ChainCache::new();
    let mut windows = 0;
    let mut longer_reused = 0;
    for k in 0..30 {
        let (s, e) = (f64::from(k) * 1.0, f64::from(k) * 1.0 + 20.0);
        let w = stream.window(s, e).unwrap();
        let counter = cache.counter(&w);
        let live = mine_with(&w, &config, &counter, &NoProgress).unwrap();
        let level2 = live.levels.get(1).map_or(0, |l| l.candidates) as u64;
        if k > 0 {
            assert!(
                counter.reused() >= level2,
                "window {k}: every pair reuses its chain"
            );
            longer_reused += counter.reused() - level2;
        }
        counter.finish();
        let offline = mine(&w, &config).unwrap();
        assert_eq!(live.episodes, offline.episodes, "window [{s}, {e})");
        let counter = bounded_cache.counter(&w);
        let with_bounds = mine_with(&w, &bounded, &counter, &NoProgress).unwrap();
        counter.finish();
        assert_eq!(
            with_bounds.episodes, offline.episodes,
            "bounds, window [{s}, {e})"
        );
        assert!(live.episodes.iter().any(|f| f.episode.len() >= 3));
        windows += 1;
    }
    assert_eq!(windows, 30);
    assert!(longer_reused > 0, "longer candidates reuse their chains");
}

/// Windows whose events are not what the cache saw (the same interval rebuilt from another
/// recording, labels renamed, a unit silenced) are counted from scratch, never from stale
/// chains.
#[test]
fn a_different_stream_on_the_same_interval_is_not_reused() {
    let a = synfire::synth::generate(&synfire::synth::SynthParams::sym26(1)).unwrap();
    let b = synfire::synth::generate(&synfire::synth::SynthParams::sym26(2)).unwrap();
    let mut config = MinerConfig::new(
        vec![Interval::new(0.004, 0.006).unwrap()],
        Threshold::PerSecond(2.0),
    );
    config.max_level = 4;
    let mut cache = ChainCache::new();
    let silenced = {
        let w = a.window(1.0, 21.0).unwrap();
        let keep: Vec<(f64, &str)> = w
            .iter()
            .filter(|&(_, ty)| w.alphabet().label(ty) != "A")
            .map(|(t, ty)| (t, w.alphabet().label(ty)))
            .collect();
        EventStream::from_labelled(keep).unwrap()
    };
    let renamed = {
        let w = a.window(2.0, 22.0).unwrap();
        let events: Vec<(f64, String)> = w
            .iter()
            .map(|(t, ty)| (t, format!("x{}", w.alphabet().label(ty))))
            .collect();
        EventStream::from_labelled(events.iter().map(|(t, l)| (*t, l.as_str()))).unwrap()
    };
    let sequence = [
        a.window(0.0, 20.0).unwrap(),
        b.window(1.0, 21.0).unwrap(),
        a.window(1.0, 21.0).unwrap(),
        silenced,
        renamed,
        a.window(3.0, 23.0).unwrap(),
        a.window(3.0, 23.0).unwrap(),
    ];
    let mut reuse = Vec::new();
    for w in &sequence {
        let counter = cache.counter(w);
        let live = mine_with(w, &config, &counter, &NoProgress).unwrap();
        reuse.push(counter.reused());
        counter.finish();
        assert_eq!(live.episodes, mine(w, &config).unwrap().episodes);
    }
    assert_eq!(reuse[0], 0, "first window");
    assert_eq!(reuse[1], 0, "another recording");
    assert_eq!(reuse[2], 0, "back to the first recording after another");
    assert!(reuse[3] > 0, "the units that kept their events reuse");
    assert_eq!(reuse[4], 0, "renamed units");
    assert_eq!(reuse[5], 0, "after renamed units");
    assert!(reuse[6] > 0, "the same window again");
}

/// A counter dropped without `finish` (a failed window) leaves the cache empty: the next
/// window is counted from scratch.
#[test]
fn dropped_counter_leaves_an_empty_cache() {
    let s = EventStream::new(
        vec![0.0, 0.004, 0.01],
        vec![EventType(0), EventType(1), EventType(0)],
        Alphabet::from_labels(["a", "b"]).unwrap(),
        Ordering::RequireSorted,
    )
    .unwrap();
    let config = config(1, 2, 3);
    let mut cache = ChainCache::new();
    let c = cache.counter(&s);
    mine_with(&s, &config, &c, &NoProgress).unwrap();
    c.finish();
    let c = cache.counter(&s);
    drop(c);
    let c = cache.counter(&s);
    let r = mine_with(&s, &config, &c, &NoProgress).unwrap();
    assert_eq!(c.reused(), 0);
    assert_eq!(r.episodes, mine(&s, &config).unwrap().episodes);
}
