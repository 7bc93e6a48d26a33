//! Warnings for results that look wrong (issue 47): a recording whose span or rates are far
//! outside physiology (one spike at 10¹² s, a unit at 10⁶ Hz: usually samples read as seconds
//! or a corrupt timestamp), and a threshold above every count, so that nothing is frequent.
//! They are returned with the result ([`check`]), written into the JSON document
//! (`warnings`), the text header and the log, never as errors: a strange recording may be
//! real.

use crate::episode::MiningResult;
use crate::event::EventStream;

/// A span longer than this, seconds (a week), is taken for a unit mistake or a wrong
/// timestamp: no spike-sorted recording runs that long.
pub(crate) const MAX_PLAUSIBLE_SPAN_S: f64 = 7.0 * 24.0 * 3600.0;

/// A unit firing faster than this on average, Hz, is not one neuron: the absolute refractory
/// period (about 1 ms) allows at most 1 kHz.
pub(crate) const MAX_PLAUSIBLE_RATE_HZ: f64 = 1000.0;

/// Events beyond a gap this large a fraction of the span, and fewer than
/// [`OUTLIER_FRACTION`] of all events, are taken for stray timestamps.
pub(crate) const OUTLIER_GAP_FRACTION: f64 = 0.5;

/// See [`OUTLIER_GAP_FRACTION`].
pub(crate) const OUTLIER_FRACTION: f64 = 0.001;

/// The warnings for `stream` mined into `result` (empty when nothing looks wrong), each one
/// sentence that says what was seen and what to check.
#[must_use]
pub fn check(stream: &EventStream, result: &MiningResult) -> Vec<String> {
    let mut counts = vec![0u64; stream.alphabet().len()];
    for ty in stream.types() {
        counts[ty.index()] += 1;
    }
    let mut warnings = recording(stream, &counts);
    warnings.extend(threshold(stream, &counts, result));
    warnings
}

/// Span, stray timestamps, rates (`counts`: spikes per unit).
fn recording(stream: &EventStream, counts: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    let times = stream.times();
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return out;
    };
    let span = last - first;
    if span > MAX_PLAUSIBLE_SPAN_S {
        out.push(format!(
            "the recording spans {span:.6e} s ({:.1} days, from {first} s to {last} s): check the \
             time unit (samples read as seconds?) and the timestamps",
            span / 86_400.0
        ));
    }
    // The largest gap between consecutive events, and how many events lie on its short side.
    if times.len() >= 2 && span > 0.0 {
        let (at, gap) = times
            .windows(2)
            .enumerate()
            .map(|(i, w)| (i, w[1] - w[0]))
            .fold(
                (0, 0.0),
                |best, (i, g)| if g > best.1 { (i, g) } else { best },
            );
        let before = at + 1;
        let after = times.len() - before;
        let few = (OUTLIER_FRACTION * times.len() as f64).max(1.0);
        if gap > OUTLIER_GAP_FRACTION * span && (after as f64 <= few || before as f64 <= few) {
            let (n, side, edge) = if after <= before {
                (after, "after", times[before])
            } else {
                (before, "before", times[at])
            };
            out.push(format!(
                "{n} of {} events lie {gap:.6e} s {side} the rest (at {edge} s), {:.0}% of the \
                 span: check for a wrong timestamp; thresholds per second and rates use the \
                 whole span",
                times.len(),
                100.0 * gap / span
            ));
        }
    }
    if span > 0.0 {
        let fast: Vec<(usize, f64)> = counts
            .iter()
            .enumerate()
            .map(|(u, &c)| (u, c as f64 / span))
            .filter(|&(_, r)| r > MAX_PLAUSIBLE_RATE_HZ)
            .collect();
        if let Some(&(u, r)) = fast.iter().max_by(|a, b| a.1.total_cmp(&b.1)) {
            out.push(format!(
                "{} unit(s) fire faster than {MAX_PLAUSIBLE_RATE_HZ} Hz on average (fastest: \
                 `{}` at {r:.1} Hz), faster than a neuron can: check the times' unit and \
                 duplicated spikes",
                fast.len(),
                stream.alphabet().label(crate::event::EventType(u as u32))
            ));
        }
    }
    out
}

/// A threshold above every count (`counts`: spikes per unit).
fn threshold(stream: &EventStream, counts: &[u64], result: &MiningResult) -> Vec<String> {
    let mut out = Vec::new();
    if result.truncated.is_some() || stream.is_empty() {
        return out;
    }
    let m = result.min_count;
    let Some(level1) = result.levels.first() else {
        return out;
    };
    if level1.frequent == 0 {
        let (u, most) = counts
            .iter()
            .enumerate()
            .max_by_key(|&(_, c)| *c)
            .map_or((0, 0), |(u, &c)| (u, c));
        out.push(format!(
            "nothing is frequent: the minimum count {m} is above every unit's spike count (the \
             largest: {most}, unit `{}`), over a span of {:.6} s: check the threshold \
             (`--support` with `--support-per seconds` is per second of that span) and the span",
            stream.alphabet().label(crate::event::EventType(u as u32)),
            stream.span()
        ));
    } else if result.episodes.iter().all(|e| e.episode.len() < 2) && result.levels.len() >= 2 {
        out.push(format!(
            "no episode of two or more units reaches the minimum count {m} ({} units do): the \
             threshold may be above every pair's count; check it against the units' rates and \
             the intervals",
            level1.frequent
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::episode::{Interval, MinerConfig, Threshold, mine};
    use crate::event::{Alphabet, EventStream, EventType, Ordering};

    fn stream(pairs: &[(f64, u32)]) -> EventStream {
        let (times, types): (Vec<f64>, Vec<EventType>) =
            pairs.iter().map(|&(t, u)| (t, EventType(u))).unzip();
        let alphabet = Alphabet::from_labels(["a", "b"]).unwrap();
        EventStream::new(times, types, alphabet, Ordering::RequireSorted).unwrap()
    }

    fn mined(s: &EventStream, min_count: u64) -> MiningResult {
        let mut c = MinerConfig::new(
            vec![Interval::new(0.0, 0.01).unwrap()],
            Threshold::MinCount(min_count),
        );
        c.max_level = 2;
        mine(s, &c).unwrap()
    }

    /// A regular pair of units, 1 s apart, for `n` seconds.
    fn regular(n: usize) -> Vec<(f64, u32)> {
        (0..n)
            .flat_map(|i| [(i as f64, 0), (i as f64 + 0.005, 1)])
            .collect()
    }

    #[test]
    fn a_plausible_recording_has_no_warning() {
        let s = stream(&regular(100));
        assert_eq!(check(&s, &mined(&s, 10)), Vec::<String>::new());
    }

    #[test]
    fn a_stray_timestamp_is_named_with_the_span() {
        let mut p = regular(2000);
        p.push((1e12, 0));
        let s = stream(&p);
        let w = check(&s, &mined(&s, 10));
        assert!(w.iter().any(|w| w.contains("days")), "{w:?}");
        assert!(
            w.iter()
                .any(|w| w.starts_with("1 of 4001 events lie") && w.contains("after")),
            "{w:?}"
        );
    }

    #[test]
    fn a_unit_faster_than_a_neuron_is_named() {
        let p: Vec<(f64, u32)> = (0..5000).map(|i| (i as f64 * 1e-4, 1)).collect();
        let mut p = p;
        p.push((0.25, 0));
        p.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let s = stream(&p);
        let w = check(&s, &mined(&s, 1));
        assert!(w.iter().any(|w| w.contains("fire faster")), "{w:?}");
    }

    #[test]
    fn a_threshold_above_every_count_says_so() {
        let s = stream(&regular(100));
        let w = check(&s, &mined(&s, 1_000));
        assert!(
            w.iter()
                .any(|w| w.starts_with("nothing is frequent") && w.contains("largest: 100")),
            "{w:?}"
        );
        // Units frequent, no pair: the pair 0 → 1 occurs 100 times, so a minimum of 100 keeps
        // it and 101 keeps neither unit; units 200 times and pairs far apart keep no pair.
        let p: Vec<(f64, u32)> = (0..200)
            .flat_map(|i| [(i as f64, 0), (i as f64 + 0.5, 1)])
            .collect();
        let s = stream(&p);
        let w = check(&s, &mined(&s, 100));
        assert!(
            w.iter().any(|w| w.starts_with("no episode of two or more")),
            "{w:?}"
        );
    }
}
