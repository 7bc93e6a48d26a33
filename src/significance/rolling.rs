//! `guided` over the windows of a live stream (the episodes stage): each window's test part is
//! tested against a family selected on an **earlier** window's selection part, selected again
//! in the background every half window, so that a window costs only the test.
//!
//! # Why it is valid
//! [`super::guided`]'s validity conditions on the selection part `A`: the families are
//! functions of `A` (and of the screen's random numbers), and the test compares the test part
//! `B` with its surrogates. Nothing in that argument needs `A` to be the same window's first
//! part; it needs the family to be fixed before `B` is looked at. A window `k` whose test part
//! starts at `tₛ` may therefore be tested with the family selected on window `j`'s selection
//! part `A_j = [t_j, s_j)` whenever `s_j ≤ tₛ` (every window `j ≤ k` of one window definition).
//! Units are matched by label (`guided::Selection::for_stream`; an episode with a unit that
//! has no spike in window `k` is left out, which depends only on the units' spike counts,
//! which surrogates keep). The error control of each window's test is then exactly
//! [`super::guided`]'s: FWER ≤ α per window.
//!
//! # Which selection a window uses
//! Deterministic in the stream (never in how fast a thread ran), with `h` half the window's
//! span (`tₛ − t₀`):
//! - the first window, or one no selection fits, selects on its own selection part before its
//!   test (as `synfire mine` does) and keeps the selection;
//! - a window whose start is at or after the end of the newest selection part starts a
//!   selection on its own selection part on a thread of its own (every `h` seconds of stream);
//! - a window uses the newest selection whose part ends at or before its split and that was
//!   either made in the foreground or started at least `h` seconds of stream before the
//!   window's start (the background has `h` seconds of stream to finish; if it has not, the
//!   window waits for it, so results never depend on timing). Older selections are dropped.
//!
//! Once the background selections run, a window's selection part thus ends between `h` and
//! `2h` seconds of stream before its test part starts.
//!
//! # Cost
//! A window: its test part's pairs in `S` surrogates, its extensions in hybrids, the family's
//! whole-window counts; the selection (its pairs mined, screened against surrogates, the
//! extensions ranked against hybrids) runs once per `h` seconds of stream, beside the windows.
//! Everything counts on the CPU (rayon's pool): the families are at most `--test-top` per
//! level, too few for a GPU to win.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::engine::Engine;
use super::error::SignificanceError;
use super::guided::{self, Selection};
use super::testing::{Correction, SignificanceConfig, SignificanceResult};
use crate::episode::{MinerConfig, MiningResult};
use crate::event::EventStream;

/// A selection made or being made.
enum State {
    Ready(Arc<Selection>),
    Running(JoinHandle<Result<Selection, SignificanceError>>),
}

/// A selection and when (in stream time) it was started.
struct Made {
    /// The start of the window it was started at, seconds.
    started_at_s: f64,
    /// Its selection part, `[start, end)`, seconds.
    span_s: [f64; 2],
    /// Made before the window that started it was tested.
    foreground: bool,
    state: State,
}

/// `guided` significance over a live stream's windows, in order (module documentation).
#[derive(Default)]
pub struct RollingGuided {
    /// Oldest first.
    made: Vec<Made>,
}

impl std::fmt::Debug for RollingGuided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RollingGuided")
            .field(
                "selections",
                &self.made.iter().map(|m| m.span_s).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl RollingGuided {
    /// No selection yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The guided test of one window `stream` (its events, seconds) mined with `config` into
    /// `data` (only its minimum count and its listed episodes are read: one level is
    /// enough), with a family selected on this or an earlier window (module documentation).
    /// Windows must come in the order of their start.
    ///
    /// # Errors
    /// [`SignificanceError::Config`] for a procedure other than `guided` and for what
    /// [`super::guided`] refuses (a fraction outside (0, 1), a watch list, `trial-shift`, an
    /// empty part); surrogate and counting errors, the selection's included (a selection that
    /// failed in the background is reported by the window that needs it); a panic of the
    /// selection's thread as [`SignificanceError::Config`] naming it.
    pub fn test(
        &mut self,
        stream: &EventStream,
        config: &MinerConfig,
        data: &MiningResult,
        sig: &SignificanceConfig,
    ) -> Result<SignificanceResult, SignificanceError> {
        if sig.correction != Correction::Guided {
            return Err(SignificanceError::Config(format!(
                "a rolling test is `guided`'s; `{}` tests each window on its own",
                sig.correction
            )));
        }
        let (sel, test_part, split_s, m_a) = guided::split(stream, data.min_count, sig)?;
        let start = stream.start();
        let half = split_s - start;
        let engine = Engine::lent(std::iter::empty());
        let usable = self.made.iter().rposition(|m| {
            m.span_s[1] <= split_s && (m.foreground || m.started_at_s + half <= start)
        });
        let selection = match usable {
            Some(i) => {
                self.made.drain(..i);
                let m = self.made.remove(0);
                let ready = match m.state {
                    State::Ready(s) => s,
                    State::Running(handle) => {
                        let joined = handle.join().map_err(|_| {
                            SignificanceError::Config(
                                "the guided selection's thread panicked (see the log)".into(),
                            )
                        });
                        Arc::new(joined.and_then(|r| r)?)
                    }
                };
                self.made.insert(
                    0,
                    Made {
                        state: State::Ready(Arc::clone(&ready)),
                        ..m
                    },
                );
                ready
            }
            None => {
                let s = Arc::new(guided::select(
                    &engine,
                    &sel,
                    [start, split_s],
                    config,
                    m_a,
                    sig,
                )?);
                self.made.clear();
                self.made.push(Made {
                    started_at_s: start,
                    span_s: [start, split_s],
                    foreground: true,
                    state: State::Ready(Arc::clone(&s)),
                });
                s
            }
        };
        if self.made.last().is_none_or(|m| start >= m.span_s[1]) {
            let (config, sig) = (config.clone(), sig.clone());
            let handle = std::thread::Builder::new()
                .name("guided-selection".into())
                .spawn(move || {
                    let engine = Engine::lent(std::iter::empty());
                    guided::select(&engine, &sel, [start, split_s], &config, m_a, &sig)
                })
                .map_err(|e| {
                    SignificanceError::Config(format!(
                        "could not start the guided selection's thread: {e}"
                    ))
                })?;
            self.made.push(Made {
                started_at_s: start,
                span_s: [start, split_s],
                foreground: false,
                state: State::Running(handle),
            });
        }
        let selection = selection.for_stream(stream);
        guided::test(&engine, stream, &test_part, split_s, &selection, data, sig)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::episode::Episode;
    use crate::episode::count::TypeIndex;
    use crate::episode::{CountKind, Counter, CpuCounter, Interval, Threshold, mine};
    use crate::significance::sample_split::parts;
    use crate::significance::testing::key;
    use crate::synth::dense::{DenseParams, generate_dense};
    use crate::synth::sym26::Chain;

    /// 24 units at a 6 Hz median rate for 150 s, a three-unit chain (delays 2–4 ms) and a
    /// two-unit link, activated 2 times a second.
    fn recording() -> EventStream {
        let mut p = DenseParams::neuropixels(7);
        p.units = 24;
        p.duration_s = 150.0;
        p.rate_median_hz = 6.0;
        p.rate_sigma = 0.8;
        p.rate_range_hz = (0.5, 40.0);
        p.sync_pairs = Vec::new();
        p.bursting_fraction = 0.0;
        p.evoke_probability = 0.9;
        p.chain_activation_hz = 2.0;
        p.chains = vec![
            Chain {
                neurons: vec![3, 11, 19],
                delay_s: (0.002, 0.004),
            },
            Chain {
                neurons: vec![6, 14],
                delay_s: (0.002, 0.004),
            },
        ];
        generate_dense(&p).expect("the generator takes these").0
    }

    /// The window `[start, end)` as the live stage builds it: its own alphabet, by label.
    fn window(x: &EventStream, start: f64, end: f64) -> EventStream {
        let labelled = x
            .iter()
            .filter(|&(t, _)| t >= start && t < end)
            .map(|(t, ty)| (t, x.alphabet().label(ty)));
        EventStream::from_labelled(labelled).expect("a window with spikes")
    }

    fn config() -> MinerConfig {
        let ivs = Interval::parse_list("0-0.005,0.005-0.010").expect("intervals");
        let mut c = MinerConfig::new(ivs, Threshold::MinCount(8));
        c.max_level = 3;
        c
    }

    fn sig() -> SignificanceConfig {
        SignificanceConfig {
            method: "dither-dead-time:0.015".parse().expect("a method"),
            n_surrogates: 99,
            alpha: 0.05,
            correction: Correction::Guided,
            seed: 5,
            test_top: Some(20),
            watch: None,
            trials: None,
            significant_only: false,
            sample_split: None,
        }
    }

    fn one_level(c: &MinerConfig) -> MinerConfig {
        MinerConfig {
            max_level: 1,
            ..c.clone()
        }
    }

    /// Each window is tested exactly as `guided::test` with the selection the rule names
    /// (the window's own in the foreground for the first; then the newest one started at
    /// least half a window of stream earlier, made on an earlier window's selection part),
    /// the counts are exact, and a second pass over the same windows gives the same results
    /// (nothing depends on how fast the background ran).
    #[test]
    fn windows_are_tested_against_the_selection_the_rule_names_with_exact_counts() {
        let x = recording();
        let (cfg, sig) = (config(), sig());
        let starts: Vec<f64> = (0..10).map(|k| f64::from(k) * 10.0).collect();
        let windows: Vec<EventStream> = starts.iter().map(|&s| window(&x, s, s + 60.0)).collect();
        let mut rolling = RollingGuided::new();
        let mut again = RollingGuided::new();
        // The selections the oracle keeps: (window start, selection part, selection).
        let mut oracle: Vec<(f64, [f64; 2], bool, Selection)> = Vec::new();
        let engine = Engine::lent(std::iter::empty());
        let mut later_selections = 0;
        for w in &windows {
            let data = mine(w, &one_level(&cfg)).expect("one level");
            let got = rolling.test(w, &cfg, &data, &sig).expect("a window's test");
            let second = again.test(w, &cfg, &data, &sig).expect("a window's test");
            assert_eq!(
                got.tests, second.tests,
                "the same windows, the same results"
            );

            // The oracle: the rule of the module documentation, computed in the foreground.
            let (sel, test_part, split_s, m_a) = guided::split(w, data.min_count, &sig).unwrap();
            let (start, half) = (w.start(), split_s - w.start());
            let pick = oracle
                .iter()
                .rposition(|(at, span, fg, _)| span[1] <= split_s && (*fg || at + half <= start));
            let chosen = match pick {
                Some(i) => {
                    oracle.drain(..i);
                    oracle[0].3.clone()
                }
                None => {
                    let s =
                        guided::select(&engine, &sel, [start, split_s], &cfg, m_a, &sig).unwrap();
                    oracle.clear();
                    oracle.push((start, [start, split_s], true, s.clone()));
                    s
                }
            };
            if oracle.last().is_none_or(|(_, span, _, _)| start >= span[1]) {
                let s = guided::select(&engine, &sel, [start, split_s], &cfg, m_a, &sig).unwrap();
                oracle.push((start, [start, split_s], false, s));
            }
            assert!(chosen.span_s[1] <= split_s, "selected before the test part");
            if chosen.span_s[0] != start {
                later_selections += 1;
                let on = got.sample_split.as_ref().and_then(|s| s.selected_on_s);
                assert_eq!(on, Some(chosen.span_s), "the selection part is reported");
            }
            let want = guided::test(
                &engine,
                w,
                &test_part,
                split_s,
                &chosen.for_stream(w),
                &data,
                &sig,
            )
            .unwrap();
            assert_eq!(got.tests, want.tests);
            assert!(!got.tests.is_empty(), "a family is tested in every window");

            // Exact counts: in the window, and in its test part.
            let tested: Vec<Episode> = got.tests.iter().map(|t| t.episode.clone()).collect();
            let whole = CpuCounter::new(w).count(CountKind::Exact, &tested).unwrap();
            let listed: HashMap<_, _> = got
                .extra_episodes
                .iter()
                .map(|f| (key(&f.episode), f.count))
                .collect();
            assert_eq!(listed.len(), tested.len(), "every tested episode is listed");
            for (e, c) in tested.iter().zip(&whole) {
                assert_eq!(listed.get(&key(e)), Some(c), "{e:?}");
            }
            let (_, b, _) = parts(w, 0.5).unwrap();
            let in_b = CpuCounter::new(&b)
                .count(CountKind::Exact, &tested)
                .unwrap();
            for (t, c) in got.tests.iter().zip(&in_b) {
                assert_eq!(t.stats.test_count, Some(*c), "{:?}", t.episode);
            }
        }
        assert!(
            later_selections >= 3,
            "later windows use earlier windows' selections ({later_selections})"
        );
    }

    /// A selection moved to a window where one of its units is silent leaves out every
    /// episode holding that unit, keeps the others (by label), and keeps parents before
    /// their extensions.
    #[test]
    fn a_selection_leaves_out_episodes_of_units_silent_in_the_window() {
        let x = recording();
        let (cfg, sig) = (config(), sig());
        let w = window(&x, 0.0, 60.0);
        let data = mine(&w, &one_level(&cfg)).unwrap();
        let (sel, _, split_s, m_a) = guided::split(&w, data.min_count, &sig).unwrap();
        let engine = Engine::lent(std::iter::empty());
        let s = guided::select(&engine, &sel, [w.start(), split_s], &cfg, m_a, &sig).unwrap();
        let label = |e: &Episode, a: &crate::event::Alphabet| -> Vec<String> {
            e.types().iter().map(|&t| a.label(t).to_owned()).collect()
        };
        // The most used unit of the family falls silent.
        let mut uses: HashMap<String, usize> = HashMap::new();
        for e in &s.f2 {
            for l in label(e, &s.alphabet) {
                *uses.entry(l).or_default() += 1;
            }
        }
        let silent = uses
            .into_iter()
            .max_by_key(|(l, n)| (*n, l.clone()))
            .expect("pairs are selected")
            .0;
        let later = EventStream::from_labelled(
            x.iter()
                .filter(|&(t, ty)| (60.0..120.0).contains(&t) && x.alphabet().label(ty) != silent)
                .map(|(t, ty)| (t, x.alphabet().label(ty))),
        )
        .unwrap();
        let moved = s.for_stream(&later);
        let kept = |e: &Episode| !label(e, &s.alphabet).contains(&silent);
        let want: Vec<Vec<String>> =
            s.f2.iter()
                .filter(|e| kept(e))
                .map(|e| label(e, &s.alphabet))
                .collect();
        let got: Vec<Vec<String>> = moved
            .f2
            .iter()
            .map(|e| label(e, later.alphabet()))
            .collect();
        assert_eq!(got, want);
        assert!(got.len() < s.f2.len());
        for (fam, moved_fam) in s.families.iter().zip(&moved.families) {
            let want: Vec<Vec<String>> = fam
                .iter()
                .filter(|h| kept(&h.episode))
                .map(|h| label(&h.episode, &s.alphabet))
                .collect();
            let got: Vec<Vec<String>> = moved_fam
                .iter()
                .map(|h| label(&h.episode, later.alphabet()))
                .collect();
            assert_eq!(got, want);
        }
        // Every moved episode's units are the window's.
        let index = TypeIndex::new(&later);
        for e in &moved.f2 {
            assert!(e.types().iter().all(|t| t.index() < index.num_types()));
        }
    }
}
