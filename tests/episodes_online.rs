//! The online detector against the offline occurrences: fed a stream in any order a source
//! may deliver it (equal times in any order; with a lateness L, any order within L seconds),
//! it reports exactly the occurrences `episode::occurrences` lists on the canonical stream, per
//! episode and in order, and each as soon as the rules allow. Restarts split the stream into
//! sessions counted on their own; a watch list that changes keeps the machines of the
//! episodes it keeps.

use proptest::prelude::*;
use synfire::episode::{
    Detector, Episode, Interval, OnlineOccurrence, TypeIndex, WatchEpisode, occurrences,
};
use synfire::event::EventStream;

/// The offline occurrences of `watch[e]` in the canonical stream of `events`, one `Vec` of
/// occurrences (each its times) per episode.
fn offline(events: &[(f64, String)], watch: &[WatchEpisode]) -> Vec<Vec<Vec<f64>>> {
    let mut out = vec![Vec::new(); watch.len()];
    let Ok(stream) = EventStream::from_labelled(events.iter().map(|(t, l)| (*t, l.as_str())))
    else {
        return out;
    };
    let index = TypeIndex::new(&stream);
    for (e, w) in watch.iter().enumerate() {
        let Some(types) = w
            .labels
            .iter()
            .map(|l| stream.alphabet().get(l))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let episode = Episode::new(types, w.intervals.clone());
        let flat = occurrences(&index, &episode);
        out[e] = flat.chunks(w.labels.len()).map(<[f64]>::to_vec).collect();
    }
    out
}

fn by_episode(found: &[OnlineOccurrence], n: usize) -> Vec<Vec<Vec<f64>>> {
    let mut out = vec![Vec::new(); n];
    for o in found {
        out[o.episode].push(o.times.clone());
    }
    out
}

fn interval(lo_ms: u8, width_ms: u8, closed: bool) -> Interval {
    let lo = f64::from(lo_ms) / 1000.0;
    let hi = lo + f64::from(width_ms.max(1)) / 1000.0;
    if closed {
        Interval::closed(lo, hi).unwrap()
    } else {
        Interval::new(lo, hi).unwrap()
    }
}

/// Events on a 1 ms grid (so equal times are common) over `units` labels.
fn events_strategy(units: u8, len: usize) -> impl Strategy<Value = Vec<(f64, String)>> {
    prop::collection::vec((0u32..400, 0..units), 1..len).prop_map(|v| {
        let mut e: Vec<(f64, String)> = v
            .into_iter()
            .map(|(ms, u)| (f64::from(ms) / 1000.0, format!("u{u}")))
            .collect();
        e.sort_by(|a, b| a.0.total_cmp(&b.0));
        e
    })
}

fn watch_strategy(units: u8) -> impl Strategy<Value = Vec<WatchEpisode>> {
    let episode = (2usize..5).prop_flat_map(move |n| {
        (
            prop::collection::vec(0..units, n),
            prop::collection::vec((0u8..6, 1u8..8, prop::bool::weighted(0.3)), n - 1),
        )
            .prop_map(|(labels, gaps)| WatchEpisode {
                labels: labels.iter().map(|u| format!("u{u}")).collect(),
                intervals: gaps
                    .into_iter()
                    .map(|(lo, w, closed)| interval(lo, w, closed))
                    .collect(),
            })
    });
    prop::collection::vec(episode, 1..5)
}

/// Shuffles the events within each group of equal times (a deterministic permutation from
/// `seed`), as a source that delivers one instant's spikes electrode by electrode would.
fn shuffle_ties(events: &[(f64, String)], seed: u64) -> Vec<(f64, String)> {
    let mut out = events.to_vec();
    let mut i = 0;
    let mut state = seed | 1;
    while i < out.len() {
        let j = out[i..]
            .iter()
            .position(|e| e.0 != out[i].0)
            .map_or(out.len(), |k| i + k);
        for k in (i + 1..j).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let r = i + (state % (k - i + 1) as u64) as usize;
            out.swap(k, r);
        }
        i = j;
    }
    out
}

fn run(detector: &mut Detector, events: &[(f64, String)]) -> Vec<OnlineOccurrence> {
    let mut out = Vec::new();
    for (t, l) in events {
        detector.push_label(*t, l, &mut out);
    }
    detector.flush(&mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Equal times in any arrival order, lateness 0: the offline occurrences exactly, none
    /// late.
    #[test]
    fn online_equals_offline_whatever_the_order_of_equal_times(
        events in events_strategy(5, 120),
        watch in watch_strategy(5),
        seed in any::<u64>(),
    ) {
        let arrived = shuffle_ties(&events, seed);
        let mut d = Detector::new(watch.clone(), 0.0).unwrap();
        let found = run(&mut d, &arrived);
        prop_assert_eq!(d.stats().late, 0);
        prop_assert_eq!(by_episode(&found, watch.len()), offline(&events, &watch));
    }

    /// Deliveries out of order by at most L: with lateness L, exact; each occurrence reported
    /// no later than L after its last event arrived... and never before it.
    #[test]
    fn lateness_makes_bounded_disorder_exact(
        events in events_strategy(4, 100),
        watch in watch_strategy(4),
        jitter in prop::collection::vec(0u32..=5, 100),
        lateness_ms in 5u32..10,
    ) {
        // Each event delayed by up to 5 ms of "network"; arrival sorted by delivery time.
        let mut arrived: Vec<(f64, usize)> = events
            .iter()
            .enumerate()
            .map(|(i, e)| (e.0 + f64::from(jitter[i % jitter.len()]) / 1000.0, i))
            .collect();
        arrived.sort_by(|a, b| a.0.total_cmp(&b.0));
        let arrived: Vec<(f64, String)> = arrived.iter().map(|&(_, i)| events[i].clone()).collect();
        let mut d = Detector::new(watch.clone(), f64::from(lateness_ms) / 1000.0).unwrap();
        let found = run(&mut d, &arrived);
        prop_assert_eq!(d.stats().late, 0);
        prop_assert_eq!(by_episode(&found, watch.len()), offline(&events, &watch));
    }

    /// Restarts: each session on its own.
    #[test]
    fn restarts_split_the_stream_into_sessions(
        a in events_strategy(4, 60),
        b in events_strategy(4, 60),
        watch in watch_strategy(4),
    ) {
        let mut d = Detector::new(watch.clone(), 0.0).unwrap();
        let mut found = run(&mut d, &a);
        d.restart(&mut found);
        let second = run(&mut d, &b);
        let mut want = offline(&a, &watch);
        for (w, extra) in want.iter_mut().zip(offline(&b, &watch)) {
            w.extend(extra);
        }
        found.extend(second);
        prop_assert_eq!(by_episode(&found, watch.len()), want);
    }

    /// A watch list replaced mid-stream: kept episodes as if never replaced, new ones as if
    /// the stream began at the switch.
    #[test]
    fn a_new_watch_list_keeps_the_machines_of_kept_episodes(
        events in events_strategy(4, 120),
        first in watch_strategy(4),
        second in watch_strategy(4),
        at in 0usize..120,
    ) {
        let at = at.min(events.len());
        // The switch between two instants, so the new episodes' stream is a canonical suffix.
        let at = events[at..].iter().position(|e| at == 0 || e.0 != events[at - 1].0).map_or(events.len(), |k| at + k);
        let mut both = first.clone();
        for w in &second {
            if !both.contains(w) {
                both.push(w.clone());
            }
        }
        let mut d = Detector::new(first.clone(), 0.0).unwrap();
        let mut found = Vec::new();
        for (t, l) in &events[..at] {
            d.push_label(*t, l, &mut found);
        }
        // Events held for ordering belong to the old list's stream.
        d.flush(&mut found);
        d.set_watch(second.clone()).unwrap();
        let before: Vec<(String, Vec<f64>)> = found.iter().map(|o| (first[o.episode].to_string(), o.times.clone())).collect();
        let mut after = Vec::new();
        for (t, l) in &events[at..] {
            d.push_label(*t, l, &mut after);
        }
        d.flush(&mut after);
        let whole = offline(&events, &second);
        let tail = offline(&events[at..], &second);
        for (e, w) in second.iter().enumerate() {
            let name = w.to_string();
            let got: Vec<Vec<f64>> = after.iter().filter(|o| o.episode == e).map(|o| o.times.clone()).collect();
            if first.iter().any(|f| f.to_string() == name) {
                // The whole stream's occurrences, those before the switch already reported.
                let earlier: Vec<Vec<f64>> = before.iter().filter(|(n, _)| *n == name).map(|(_, t)| t.clone()).collect();
                let mut all = earlier.clone();
                all.extend(got);
                prop_assert_eq!(&all, &whole[e], "kept {}", name);
            } else {
                prop_assert_eq!(&got, &tail[e], "new {}", name);
            }
        }
    }
}

/// An event older than one processed is late: counted, dropped, and nothing else changes.
#[test]
fn late_events_are_counted_and_dropped() {
    let watch = vec![WatchEpisode::parse("a-(0,10]ms-b", &[]).unwrap()];
    let mut d = Detector::new(watch, 0.0).unwrap();
    let mut out = Vec::new();
    d.push_label(0.100, "a", &mut out);
    d.push_label(0.105, "b", &mut out);
    assert_eq!(out.len(), 1, "reported at the arrival of its last spike");
    assert_eq!(out[0].times, [0.100, 0.105]);
    d.push_label(0.101, "a", &mut out);
    assert_eq!(d.stats().late, 1);
    d.push_label(0.2, "zz", &mut out);
    assert_eq!(d.stats().ignored, 1);
    assert_eq!(out.len(), 1);
}

/// With a zero-delay gap, an instant's events wait for the next instant, and then chain in
/// canonical label order whatever their arrival order.
#[test]
fn zero_delay_gaps_wait_for_the_next_instant() {
    let watch = vec![WatchEpisode::parse("a-[0,1]ms-b", &[]).unwrap()];
    let mut d = Detector::new(watch, 0.0).unwrap();
    let mut out = Vec::new();
    d.push_label(0.5, "b", &mut out);
    d.push_label(0.5, "a", &mut out);
    assert!(out.is_empty(), "held until a later instant");
    d.push_label(0.6, "c", &mut out);
    assert!(out.is_empty(), "c is not watched: it releases nothing");
    d.push_label(0.6, "a", &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].times, [0.5, 0.5]);
}

/// A stream without end whose episode never completes keeps bounded memory (the chain arena
/// is compacted) and still reports the next occurrence correctly.
#[test]
fn long_streams_without_completions_stay_exact() {
    let watch = vec![WatchEpisode::parse("a-(0,1]ms-a-(0,1]ms-b", &[]).unwrap()];
    let mut d = Detector::new(watch, 0.0).unwrap();
    let mut out = Vec::new();
    for k in 0..200_000u32 {
        d.push_label(f64::from(k) * 0.01, "a", &mut out);
    }
    assert!(out.is_empty());
    let t = 2000.0;
    d.push_label(t, "a", &mut out);
    d.push_label(t + 0.0005, "a", &mut out);
    d.push_label(t + 0.0009, "b", &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].times, [t, t + 0.0005, t + 0.0009]);
}
