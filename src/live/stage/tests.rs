//! The JSON lines [`run`] writes, per stage kind and case: exactly these keys, in this order,
//! with these JSON types (consumers read the lines by key; a dropped, renamed or reordered key,
//! or an integer turned float, breaks them). Nested objects are listed by path
//! (`motifs[].i`: the keys of the first element of `motifs`). Each line also reads back into
//! [`WindowLine`] with the stage's result type, to the same fields.

use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::search::{SearchStage, SearchStageConfig};
use super::shapelet::ShapeletStage;
use super::softdtw::{SoftDtwStage, SoftDtwStageConfig};
use super::summary::SummaryStage;
use super::{AnyStage, Stage, WindowLine, run, test_window};
use crate::device::DeviceChoice;
use crate::episode::{GpuSettings, Interval, MinerConfig, Threshold};
use crate::live::stage::episodes::EpisodeStage;
use crate::live::stage::motif::MotifStage;
use crate::live::window::{Window, WindowData};
use crate::motif::MotifConfig;

/// The fields [`run`] writes before the stage's own.
const ENVELOPE: &[&str] = &[
    "stage: string",
    "window: string",
    "source: string",
    "window_index: int",
    "window_start_s: float",
    "window_end_s: float",
    "complete: bool",
    "events: int",
    "late: int",
    "dropped: int",
    "out_of_range: int",
    "duplicate: int",
    "overflow: int",
    "epoch: int",
    "run_id: string",
    "seconds: float",
];

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_u64() || n.is_i64() => "int",
        Value::Number(_) => "float",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// `path: type` of every key of `v`, depth first, in order (arrays: their first element).
fn walk(v: &Value, path: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                out.push(format!("{p}: {}", kind(x)));
                walk(x, &p, out);
            }
        }
        Value::Array(a) => {
            if let Some(first) = a.first() {
                walk(first, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

/// The keys of each line `run` writes for `windows`, in order, and the line read back.
pub(super) fn lines<S>(
    stage: &mut S,
    windows: Vec<Window>,
) -> Vec<(Vec<String>, WindowLine<S::Result>)>
where
    S: Stage + 'static,
    S::Result: DeserializeOwned + Serialize,
{
    let (wtx, wrx) = crossbeam_channel::unbounded();
    let (otx, orx) = crossbeam_channel::unbounded();
    for w in windows {
        wtx.send(Arc::new(w)).unwrap();
    }
    drop(wtx);
    run(
        &Arc::from("st"),
        stage as &mut dyn AnyStage,
        &wrx,
        None,
        &otx,
    );
    drop(otx);
    orx.iter()
        .map(|o| {
            let v: Value = serde_json::from_str(&o.json).unwrap();
            let mut keys = Vec::new();
            walk(&v, "", &mut keys);
            let line: WindowLine<S::Result> = serde_json::from_str(&o.json).unwrap();
            // Exactly one of a result and an error, and the result reads back to what it
            // wrote.
            assert_ne!(line.result.is_some(), line.error.is_some(), "{}", o.json);
            if let Some(r) = &line.result {
                let mut written = v.as_object().unwrap().clone();
                written.retain(|k, _| !ENVELOPE.iter().any(|e| e.split(':').next() == Some(k)));
                assert_eq!(serde_json::to_value(r).unwrap(), Value::Object(written));
            }
            (keys, line)
        })
        .collect()
}

/// Asserts `got` is the envelope followed by `fields`.
#[track_caller]
pub(super) fn assert_keys<R>(case: &str, got: &(Vec<String>, WindowLine<R>), fields: &[&str]) {
    let want: Vec<&str> = ENVELOPE.iter().chain(fields).copied().collect();
    assert_eq!(got.0, want, "{case}: the keys of the line changed");
}

pub(super) fn spike_window() -> Window {
    // Units a, b: b follows a by 5 ms, 12 times.
    let mut times = Vec::new();
    let mut units = Vec::new();
    for k in 0..12 {
        let t = f64::from(k) * 0.1;
        times.extend([t, t + 0.005]);
        units.extend([0u32, 1]);
    }
    Window {
        data: WindowData::Spikes {
            times,
            units,
            names: Arc::from(vec![Arc::from("a"), Arc::from("b")]),
        },
        ..test_window(Vec::new(), 1, 0)
    }
}

fn walk_window(n: usize, seed: u64, start_sample: u64) -> Window {
    test_window(crate::synth::random_walk(n, seed), 1, start_sample)
}

#[test]
fn episodes_lines_keep_their_keys() {
    let mut config = MinerConfig::new(
        vec![Interval::new(0.004, 0.006).unwrap()],
        Threshold::MinCount(5),
    );
    config.max_level = 2;
    let mut stage = EpisodeStage::new(config, DeviceChoice::Cpu, GpuSettings::default()).unwrap();
    let got = lines(&mut stage, vec![spike_window(), walk_window(10, 1, 0)]);
    assert_keys(
        "episodes",
        &got[0],
        &[
            "device: string",
            "min_count: int",
            "event_types: int",
            "levels: array",
            "levels[].level: int",
            "levels[].candidates: int",
            "levels[].removed_by_bounds: int",
            "levels[].eliminated_by_preelim: int",
            "levels[].frequent: int",
            "levels[].seconds: float",
            "episodes: array",
            "episodes[].labels: array",
            "episodes[].types: array",
            "episodes[].intervals_s: array",
            "episodes[].intervals: array",
            "episodes[].count: int",
        ],
    );
    // A stage error: the envelope and `error`.
    assert_keys("episodes, error", &got[1], &["error: string"]);
    // A window stopped by a limit says so (and only then has `truncated`).
    let mut limited = MinerConfig::new(
        vec![Interval::new(0.004, 0.006).unwrap()],
        Threshold::MinCount(5),
    );
    limited.max_level = 2;
    limited.max_candidates = Some(2);
    let mut stage = EpisodeStage::new(limited, DeviceChoice::Cpu, GpuSettings::default()).unwrap();
    let cut = lines(&mut stage, vec![spike_window()]);
    let truncated = cut[0].1.result.as_ref().and_then(|r| r.truncated.clone());
    assert!(
        truncated
            .is_some_and(|t| t.level == 2
                && t.reason == crate::episode::StopReason::MaxCandidates { limit: 2 }),
        "{:?}",
        cut[0].0
    );
    assert!(cut[0].0.iter().any(|k| k.starts_with("truncated")));
    assert!(!got[0].0.iter().any(|k| k.starts_with("truncated")));
    assert!(got[1].1.error.as_ref().unwrap().contains("spikes"));
    let first = &got[0].1;
    assert_eq!((first.stage.as_str(), first.window.as_str()), ("st", "w"));
    assert_eq!(first.events, 24);
    assert_eq!(first.result.as_ref().unwrap().episodes.len(), 3);
}

/// With a significance test, each window's line carries the summary and every tested
/// episode's statistics, exactly those of `test_episodes` on the window's stream.
#[test]
fn episodes_windows_carry_their_significance() {
    use crate::significance::{Correction, SignificanceConfig, test_episodes};
    let mut config = MinerConfig::new(
        vec![Interval::new(0.004, 0.006).unwrap()],
        Threshold::MinCount(5),
    );
    config.max_level = 2;
    let sig = SignificanceConfig {
        method: "dither:0.015".parse().unwrap(),
        n_surrogates: 19,
        alpha: 0.05,
        correction: Correction::MaxT,
        seed: 4,
        test_top: None,
        watch: None,
        trials: None,
        significant_only: false,
        sample_split: None,
    };
    let mut stage = EpisodeStage::new(config.clone(), DeviceChoice::Cpu, GpuSettings::default())
        .unwrap()
        .with_significance(sig.clone());
    let got = lines(&mut stage, vec![spike_window()]);
    let keys = &got[0].0;
    for k in [
        "significance: object",
        "significance.n_surrogates: int",
        "significance.tested: int",
    ] {
        assert!(keys.iter().any(|x| x == k), "{k} in {keys:?}");
    }
    let result = got[0].1.result.as_ref().unwrap();
    let window = super::episodes::tests_window_stream(&spike_window());
    let mined = crate::episode::mine(&window, &config).unwrap();
    let want = test_episodes(&window, &config, &mined, &sig).unwrap();
    let summary = result.significance.as_ref().unwrap();
    assert_eq!(summary.tested, want.tests.len());
    let tested: Vec<_> = result
        .episodes
        .iter()
        .filter_map(|e| e.test.as_ref())
        .collect();
    assert_eq!(tested.len(), want.tests.len());
    for (got, want) in tested.iter().zip(&want.tests) {
        assert_eq!(**got, want.stats);
    }
    // a -> b at 5 ms, 12 times, against dithered copies: the one significant pair.
    let ab = result
        .episodes
        .iter()
        .find(|e| e.labels == ["a", "b"])
        .unwrap();
    assert!(ab.test.as_ref().unwrap().significant, "{ab:?}");
    // `significant_only` keeps only those.
    let mut only = EpisodeStage::new(config.clone(), DeviceChoice::Cpu, GpuSettings::default())
        .unwrap()
        .with_significance(SignificanceConfig {
            significant_only: true,
            ..sig.clone()
        });
    let kept = lines(&mut only, vec![spike_window()]);
    let episodes = &kept[0].1.result.as_ref().unwrap().episodes;
    assert!(!episodes.is_empty());
    assert!(
        episodes
            .iter()
            .all(|e| e.test.as_ref().is_some_and(|t| t.significant))
    );
    // Sample splitting: the window's summary carries the split, equal to the library's.
    let split = SignificanceConfig {
        sample_split: Some(0.5),
        ..sig
    };
    let mut halves = EpisodeStage::new(config.clone(), DeviceChoice::Cpu, GpuSettings::default())
        .unwrap()
        .with_significance(split.clone());
    let got = lines(&mut halves, vec![spike_window()]);
    let summary = got[0]
        .1
        .result
        .as_ref()
        .unwrap()
        .significance
        .clone()
        .unwrap();
    let want = test_episodes(&window, &config, &mined, &split).unwrap();
    assert_eq!(summary.sample_split, want.sample_split);
    assert!(summary.sample_split.is_some());
    assert_eq!(summary.tested, want.tests.len());
}

/// With `guided` (the default), a window is mined to one node and lists its units and the
/// tested family; later windows are tested against a family selected on an earlier window
/// (`significance::rolling`), as a `RollingGuided` fed the same windows says.
#[test]
fn guided_windows_are_tested_against_an_earlier_selection() {
    use crate::significance::rolling::RollingGuided;
    use crate::significance::{Correction, SignificanceConfig};
    use crate::synth::dense::{DenseParams, generate_dense};
    use crate::synth::sym26::Chain;
    let mut p = DenseParams::neuropixels(3);
    p.units = 16;
    p.duration_s = 80.0;
    p.rate_median_hz = 6.0;
    p.rate_range_hz = (1.0, 30.0);
    p.bursting_fraction = 0.0;
    p.sync_pairs = Vec::new();
    p.evoke_probability = 0.9;
    p.chain_activation_hz = 2.0;
    p.chains = vec![Chain {
        neurons: vec![2, 7, 12],
        delay_s: (0.002, 0.004),
    }];
    let x = generate_dense(&p).unwrap().0;
    let names: Arc<[Arc<str>]> = x
        .alphabet()
        .labels()
        .iter()
        .map(|l| Arc::from(l.as_str()))
        .collect();
    let window = |index: u64, start: f64| {
        let (times, units): (Vec<f64>, Vec<u32>) = x
            .iter()
            .filter(|&(t, _)| t >= start && t < start + 40.0)
            .map(|(t, ty)| (t, ty.0))
            .unzip();
        Window {
            index,
            start_s: start,
            end_s: start + 40.0,
            data: WindowData::Spikes {
                times,
                units,
                names: Arc::clone(&names),
            },
            ..test_window(Vec::new(), 1, 0)
        }
    };
    let windows: Vec<Window> = [0.0, 10.0, 20.0, 30.0, 40.0]
        .iter()
        .enumerate()
        .map(|(k, &s)| window(k as u64, s))
        .collect();
    let mut config = MinerConfig::new(
        Interval::parse_list("0-0.005,0.005-0.010").unwrap(),
        Threshold::MinCount(5),
    );
    config.max_level = 3;
    let sig = SignificanceConfig {
        method: "dither-dead-time:0.015".parse().unwrap(),
        n_surrogates: 49,
        alpha: 0.05,
        correction: Correction::Guided,
        seed: 4,
        test_top: Some(10),
        watch: None,
        trials: None,
        significant_only: false,
        sample_split: None,
    };
    let mut stage = EpisodeStage::new(config.clone(), DeviceChoice::Cpu, GpuSettings::default())
        .unwrap()
        .with_significance(sig.clone());
    let got = lines(&mut stage, windows.clone());
    let mut oracle = RollingGuided::new();
    let one = MinerConfig {
        max_level: 1,
        ..config.clone()
    };
    let mut later = 0;
    for (w, (_, line)) in windows.iter().zip(&got) {
        let result = line.result.as_ref().expect("a result");
        let stream = super::episodes::tests_window_stream(w);
        let data = crate::episode::mine(&stream, &one).unwrap();
        let want = oracle.test(&stream, &config, &data, &sig).unwrap();
        assert_eq!(
            result.levels.iter().map(|l| l.level).collect::<Vec<_>>(),
            [1],
            "a guided window is mined to one node"
        );
        let summary = result.significance.as_ref().unwrap();
        assert_eq!(summary.tested, want.tests.len());
        assert_eq!(summary.sample_split, want.sample_split);
        later += usize::from(
            summary
                .sample_split
                .as_ref()
                .unwrap()
                .selected_on_s
                .is_some(),
        );
        // Units, then every tested episode with its test.
        let tested: Vec<_> = result
            .episodes
            .iter()
            .filter(|e| e.test.is_some())
            .collect();
        assert_eq!(tested.len(), want.tests.len());
        assert_eq!(
            result.episodes.len(),
            stream.alphabet().len() + want.tests.len()
        );
        assert!(want.tests.iter().all(|t| t.episode.len() >= 2));
    }
    assert!(
        later >= 2,
        "later windows use an earlier selection ({later})"
    );
    // The chain's first link is found in every window.
    assert!(got.iter().all(|(_, line)| {
        line.result
            .as_ref()
            .unwrap()
            .episodes
            .iter()
            .any(|e| e.labels == ["u2", "u7"] && e.test.as_ref().is_some_and(|t| t.significant))
    }));
}

#[test]
fn summary_lines_keep_their_keys() {
    let mut nan = test_window(vec![f64::NAN, 1.0, f64::NAN, 2.0], 2, 7);
    nan.index = 1;
    let got = lines(
        &mut SummaryStage,
        vec![test_window(vec![1.0, 2.0, 3.0, 4.0], 2, 0), nan],
    );
    assert_keys(
        "summary",
        &got[0],
        &[
            "start_sample: int",
            "rate_hz: float",
            "channels: array",
            "channels[].count: int",
            "channels[].missing: int",
            "channels[].mean: float",
            "channels[].std: float",
            "channels[].min: float",
            "channels[].max: float",
        ],
    );
    assert_keys(
        "summary, a channel all NaN",
        &got[1],
        &[
            "start_sample: int",
            "rate_hz: float",
            "channels: array",
            "channels[].count: int",
            "channels[].missing: int",
        ],
    );
}

#[test]
fn motif_lines_keep_their_keys() {
    let mut stage = MotifStage::new(MotifConfig::new(8), 0, DeviceChoice::Cpu);
    let got = lines(
        &mut stage,
        vec![walk_window(100, 3, 1000), walk_window(5, 3, 0)],
    );
    assert_keys(
        "motif",
        &got[0],
        &[
            "channel: int",
            "m: int",
            "exclusion: int",
            "method: string",
            "device: string",
            "motifs: array",
            "motifs[].i: int",
            "motifs[].j: int",
            "motifs[].start_i: int",
            "motifs[].start_j: int",
            "motifs[].distance: float",
        ],
    );
    assert_keys(
        "motif, too short",
        &got[1],
        &[
            "channel: int",
            "m: int",
            "exclusion: int",
            "motifs: array",
            "reason: string",
        ],
    );
}

fn search_config(m: Option<usize>) -> SearchStageConfig {
    SearchStageConfig {
        channel: 0,
        m,
        k: 2,
        device: DeviceChoice::Cpu,
        leaf_capacity: 8,
        capacity: 1000,
        query_stride: None,
    }
}

#[test]
fn search_lines_keep_their_keys() {
    let mut whole = SearchStage::new(search_config(None));
    let mut nan = walk_window(50, 3, 100);
    if let WindowData::Samples { values, .. } = &mut nan.data {
        values[4] = f64::NAN;
    }
    let got = lines(
        &mut whole,
        vec![walk_window(50, 1, 0), walk_window(50, 2, 50), nan],
    );
    let neighbors = [
        "neighbors: array",
        "neighbors[].window_index: int",
        "neighbors[].start_sample: int",
        "neighbors[].start_s: float",
        "neighbors[].distance: float",
    ];
    let head = ["channel: int", "k: int", "device: string", "mode: string"];
    let want: Vec<&str> = head
        .iter()
        .chain(&neighbors)
        .chain(&["indexed: int"])
        .copied()
        .collect();
    assert_keys("search windows", &got[1], &want);
    assert_keys(
        "search windows, NaN",
        &got[2],
        &[
            "channel: int",
            "k: int",
            "device: string",
            "mode: string",
            "reason: string",
            "indexed: int",
        ],
    );

    let mut subs = SearchStage::new(search_config(Some(10)));
    let mut nan = walk_window(100, 5, 100);
    if let WindowData::Samples { values, .. } = &mut nan.data {
        values[95] = f64::NAN;
    }
    let got = lines(
        &mut subs,
        vec![walk_window(100, 4, 0), walk_window(5, 4, 1000), nan],
    );
    assert_keys(
        "search subsequences",
        &got[0],
        &[
            "channel: int",
            "k: int",
            "device: string",
            "mode: string",
            "m: int",
            "query_start_sample: int",
            "neighbors: array",
            "neighbors[].start_sample: int",
            "neighbors[].start_s: float",
            "neighbors[].distance: float",
            "indexed: int",
        ],
    );
    let reason = [
        "channel: int",
        "k: int",
        "device: string",
        "mode: string",
        "m: int",
        "reason: string",
        "indexed: int",
    ];
    assert_keys("search subsequences, short", &got[1], &reason);
    assert_keys("search subsequences, NaN query", &got[2], &reason);
}

#[test]
fn shapelet_lines_keep_their_keys() {
    use crate::shapelet::discovery::CpuSearch;
    use crate::shapelet::{ShapeletConfig, TrainingSet, train_with};
    let series: Vec<Vec<f64>> = (0..6)
        .map(|i| {
            (0..20)
                .map(|t| {
                    let bump = if i % 2 == 0 && (5..9).contains(&t) {
                        3.0
                    } else {
                        0.0
                    };
                    ((i * 31 + t * 7) % 11) as f64 * 0.01 + bump
                })
                .collect()
        })
        .collect();
    let labels: Vec<String> = (0..6)
        .map(|i| if i % 2 == 0 { "peak" } else { "flat" }.to_owned())
        .collect();
    let set = TrainingSet::new(&series, &labels, "t").unwrap();
    let (tree, _) =
        train_with(&set, &ShapeletConfig::new(3, 6), &mut CpuSearch::default()).unwrap();
    let mut stage = ShapeletStage::new(tree, 0).unwrap();
    let mut gap = series[0].clone();
    gap[2] = f64::NAN;
    let got = lines(
        &mut stage,
        vec![
            test_window(series[0].clone(), 1, 0),
            test_window(gap, 1, 20),
        ],
    );
    assert_keys(
        "shapelet",
        &got[0],
        &[
            "channel: int",
            "samples: int",
            "start_sample: int",
            "label: string",
            "class: int",
            "leaf: int",
        ],
    );
    assert_keys(
        "shapelet, NaN",
        &got[1],
        &[
            "channel: int",
            "samples: int",
            "start_sample: int",
            "label: null",
            "reason: string",
        ],
    );
}

#[test]
fn softdtw_lines_keep_their_keys() {
    let cfg = SoftDtwStageConfig {
        templates: "fixtures/ucr/GunPoint/GunPoint_TRAIN.ts".into(),
        gamma: 0.1,
        band: None,
        channel: 0,
        znormalize: true,
        divergence: false,
        device: DeviceChoice::Cpu,
    };
    let mut stage = SoftDtwStage::new(&cfg).unwrap();
    let mut nan = walk_window(150, 2, 0);
    if let WindowData::Samples { values, .. } = &mut nan.data {
        values[3] = f64::NAN;
    }
    let got = lines(&mut stage, vec![walk_window(150, 1, 0), nan]);
    assert_keys(
        "softdtw",
        &got[0],
        &[
            "channel: int",
            "measure: string",
            "device: string",
            "nearest: object",
            "nearest.template: int",
            "nearest.value: float",
            "nearest.label: string",
            "values: array",
        ],
    );
    assert_keys(
        "softdtw, NaN",
        &got[1],
        &[
            "channel: int",
            "measure: string",
            "values: array",
            "reason: string",
        ],
    );
}

/// Previews wait in a latest-only slot apart from the real windows: however many previews a
/// stage is offered, it sees at most the newest one, never one older than a real window it
/// has processed, and a waiting real window is always taken first.
#[test]
fn previews_never_queue_ahead_of_a_real_window() {
    use std::sync::Mutex;

    #[derive(serde::Serialize)]
    struct Nothing {}
    struct Recorder(Arc<Mutex<Vec<(bool, u64)>>>);
    impl Stage for Recorder {
        type Result = Nothing;
        fn input(&self) -> crate::record::StreamKind {
            crate::record::StreamKind::Sensor
        }
        fn process(&mut self, w: &Window) -> Result<Nothing, super::StageError> {
            self.0.lock().unwrap().push((false, w.index));
            Ok(Nothing {})
        }
        fn wants_previews(&self) -> bool {
            true
        }
        fn preview(&mut self, w: &Window) {
            self.0.lock().unwrap().push((true, w.index));
        }
    }
    let window = |index: u64, preview: bool| {
        let mut w = test_window(vec![1.0], 1, 0);
        w.index = index;
        w.preview = preview;
        Arc::new(w)
    };

    // A real window already waiting is processed before any preview; older previews are stale.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (wtx, wrx) = crossbeam_channel::bounded(4);
    let (ptx, prx) = super::preview_slot();
    let (otx, orx) = crossbeam_channel::unbounded();
    for k in 0..10 {
        ptx.offer(window(k, true));
    }
    wtx.send(window(10, false)).unwrap();
    drop(wtx);
    let mut stage = Recorder(seen.clone());
    run(&Arc::from("st"), &mut stage, &wrx, Some(&prx), &otx);
    assert_eq!(*seen.lock().unwrap(), [(false, 10)]);
    assert_eq!(orx.try_iter().count(), 1);

    // Previews offered while no real window waits: at most the newest is seen, then the real
    // window, whatever the threads' timing.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (wtx, wrx) = crossbeam_channel::bounded(4);
    let (ptx, prx) = super::preview_slot();
    let (otx, orx) = crossbeam_channel::unbounded();
    for k in 0..10 {
        ptx.offer(window(k, true));
    }
    let mut stage = Recorder(seen.clone());
    let worker = std::thread::spawn(move || {
        run(&Arc::from("st"), &mut stage, &wrx, Some(&prx), &otx);
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    wtx.send(window(10, false)).unwrap();
    drop((wtx, ptx));
    worker.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert!(
        seen == [(true, 9), (false, 10)] || seen == [(false, 10)],
        "{seen:?}"
    );
    assert_eq!(orx.try_iter().count(), 1);
}
