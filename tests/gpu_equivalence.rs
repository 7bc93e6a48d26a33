//! Counting back ends against the specification (`count_exact` / `count_preelim` called per
//! candidate). The same test bodies run on the CPU back end everywhere and on the GPU back end
//! where a GPU exists; without one the GPU variants print why and skip, and with
//! `SYNFIRE_REQUIRE_GPU=1` a missing GPU fails them (set on the GPU host).

use std::path::PathBuf;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use synfire::episode::hybrid::ExactAlgorithm;
use synfire::episode::mtpe::Segments;
use synfire::episode::{
    CountKind, Counter, CpuCounter, Episode, GpuCounter, Interval, MinerConfig, NoProgress,
    Strategy, Threshold, TypeIndex, candidates, count_exact, count_preelim, mine_with,
};
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::synth::{SynthParams, generate};

/// Builds the counter under test for a stream and its interval table.
type MakeCounter = dyn Fn(&EventStream, &[Interval]) -> Box<dyn Counter>;

/// GPU ordinals, or `None` (printing why) when this host has none. Panics instead of skipping
/// when `SYNFIRE_REQUIRE_GPU=1`.
fn gpus_or_skip(test: &str) -> Option<Vec<usize>> {
    match synfire::device::probe() {
        Ok(devices) => Some(devices.iter().map(|d| d.ordinal).collect()),
        Err(e) => {
            assert!(
                std::env::var("SYNFIRE_REQUIRE_GPU").as_deref() != Ok("1"),
                "{test}: SYNFIRE_REQUIRE_GPU=1 but no GPU is usable: {e}"
            );
            eprintln!("{test}: skipped on the GPU: {e}");
            None
        }
    }
}

fn fixture(rel: &str) -> PathBuf {
    let in_crate = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel);
    if in_crate.exists() {
        in_crate
    } else {
        PathBuf::from(rel)
    }
}

fn intervals(spec: &str) -> Vec<Interval> {
    Interval::parse_list(spec).unwrap()
}

/// Asserts that `counter` returns the specification's exact and PreElim counts for every
/// candidate.
fn assert_counts_match(counter: &dyn Counter, stream: &EventStream, cands: &[Episode], what: &str) {
    let index = TypeIndex::new(stream);
    let exact = counter.count(CountKind::Exact, cands).unwrap();
    let pre = counter.count(CountKind::PreElim, cands).unwrap();
    for (i, e) in cands.iter().enumerate() {
        assert_eq!(
            exact[i],
            count_exact(&index, e),
            "{what}: exact count of {e:?} ({})",
            counter.name()
        );
        assert_eq!(
            pre[i],
            count_preelim(&index, e),
            "{what}: PreElim count of {e:?} ({})",
            counter.name()
        );
    }
}

/// Level 2 (all pairs x intervals) and level 3 (joins of the frequent pairs) candidates.
fn level_two_and_three(stream: &EventStream, ivs: &[Interval], min_count: u64) -> Vec<Episode> {
    let types: Vec<EventType> = (0..stream.alphabet().len() as u32).map(EventType).collect();
    let l2 = candidates::level_two(&types, ivs);
    let index = TypeIndex::new(stream);
    let frequent: Vec<Episode> = l2
        .iter()
        .filter(|e| count_exact(&index, e) >= min_count)
        .cloned()
        .collect();
    let mut all = l2;
    all.extend(candidates::join(&frequent));
    all
}

/// Random streams with repeated types, equal timestamps, long delays and dense bursts (which
/// overflow the GPU's per-state lists and must be recounted exactly).
fn random_streams() -> Vec<(EventStream, Vec<Episode>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let ivs = intervals(RANDOM_IVS);
    let mut out = Vec::new();
    for s in 0..40 {
        let k = rng.random_range(1..6u32);
        let mut events: Vec<(f64, u32)> = Vec::new();
        let mut t = 0.0;
        for _ in 0..rng.random_range(100..3000) {
            t += if rng.random_bool(0.1) {
                0.0
            } else {
                rng.random::<f64>() * 0.01
            };
            events.push(((t * 1e4).round() / 1e4, rng.random_range(0..k)));
        }
        if s % 4 == 0 {
            // A burst: 80 spikes of type 0 within 8 ms.
            let at = t / 2.0;
            events.extend((0..80).map(|j| (at + f64::from(j) * 1e-4, 0)));
        }
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        let alphabet = Alphabet::from_labels((0..k).map(|i| format!("u{i}"))).unwrap();
        let stream = EventStream::new(
            events.iter().map(|e| e.0).collect(),
            events.iter().map(|e| EventType(e.1)).collect(),
            alphabet,
            Ordering::RequireSorted,
        )
        .unwrap();
        let cands = (0..200)
            .map(|_| {
                let n = rng.random_range(1..=6usize);
                Episode::new(
                    (0..n).map(|_| EventType(rng.random_range(0..k))).collect(),
                    (1..n)
                        .map(|_| ivs[rng.random_range(0..ivs.len())])
                        .collect(),
                )
            })
            .collect();
        out.push((stream, cands));
    }
    out
}

/// Half-open intervals and closed ones: `[0, x]` and `[0, 0]` admit simultaneous events (the
/// streams have many equal times), `[0.002, 0.004]` includes its lower bound.
const RANDOM_IVS: &str =
    "0-0.002,0.001-0.004,0.003-0.01,0.01-0.5,0-0.05,[0,0.001],[0,0],[0.002,0.004]";

fn body_random(make: &MakeCounter) {
    let ivs = intervals(RANDOM_IVS);
    for (i, (stream, cands)) in random_streams().iter().enumerate() {
        assert_counts_match(
            make(stream, &ivs).as_ref(),
            stream,
            cands,
            &format!("random stream {i}"),
        );
    }
}

fn body_sym26(make: &MakeCounter) {
    let stream = generate(&SynthParams::sym26(1)).unwrap();
    let ivs = intervals("0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016");
    let cands = level_two_and_three(&stream, &ivs, 400);
    assert!(cands.len() > 2_704, "{} candidates", cands.len());
    assert_counts_match(make(&stream, &ivs).as_ref(), &stream, &cands, "Sym26");
}

fn body_fixtures(make: &MakeCounter) {
    let ivs = intervals("[0,0.0005],(0.0005,0.005],0.005-0.010,0.010-0.020");
    for (rel, min_count) in [
        ("fixtures/spikes/A2929-200711/A2929-200711.nwb", 240),
        ("fixtures/spikes/A8604-211122/A8604-211122.nwb", 50),
    ] {
        let stream = synfire::ingest::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
        let cands = level_two_and_three(&stream, &ivs, min_count);
        assert_counts_match(make(&stream, &ivs).as_ref(), &stream, &cands, rel);
    }
}

/// Mining with the counter gives the CPU reference's episodes, one- and two-pass.
fn body_mining(make: &MakeCounter) {
    let stream = generate(&SynthParams::sym26(5)).unwrap();
    let ivs = intervals("0.001-0.003,0.004-0.006,0.009-0.011,0.014-0.016");
    let mut config = MinerConfig::new(ivs.clone(), Threshold::MinCount(350));
    let reference = mine_with(&stream, &config, &CpuCounter::new(&stream), &NoProgress).unwrap();
    let counter = make(&stream, &ivs);
    for strategy in [Strategy::TwoPass, Strategy::OnePass] {
        config.strategy = strategy;
        let got = mine_with(&stream, &config, counter.as_ref(), &NoProgress).unwrap();
        assert_eq!(
            got.episodes,
            reference.episodes,
            "{strategy:?} on {}",
            counter.name()
        );
    }
}

fn cpu(stream: &EventStream, _: &[Interval]) -> Box<dyn Counter> {
    Box::new(CpuCounter::new(stream))
}

/// One GPU counter per stream, with the exact kernel forced (or the hybrid default) and, for
/// MTPE, `segments` segments of equal event counts (0: the automatic choice).
fn gpu_counter(
    gpus: &[usize],
    algorithm: ExactAlgorithm,
    segments: usize,
) -> impl Fn(&EventStream, &[Interval]) -> Box<dyn Counter> + use<> {
    let gpus = gpus.to_vec();
    move |s, ivs| {
        let c = GpuCounter::new(s, ivs, &gpus).unwrap();
        c.set_exact_algorithm(algorithm);
        if segments > 0 {
            c.set_mtpe_segments(Some(&Segments::by_events(s.times(), segments)));
        }
        Box::new(c)
    }
}

/// The same body on the CPU, on one GPU with the hybrid choice, PTPE forced, the ends-based
/// count forced, MTPE forced
/// (automatic segments, and 64 short segments so that occurrences cross boundaries and the
/// merge's catch-ups run), and on every GPU twice (the split across device threads changes
/// nothing).
macro_rules! cpu_and_gpu {
    ($name:ident, $body:ident) => {
        mod $name {
            use super::*;

            #[test]
            fn cpu() {
                $body(&super::cpu);
            }

            #[test]
            #[cfg_attr(
                not(synfire_gpu),
                ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
            )]
            fn gpu_hybrid() {
                let Some(gpus) = gpus_or_skip(concat!(stringify!($name), "::gpu_hybrid")) else {
                    return;
                };
                $body(&gpu_counter(&gpus[..1], ExactAlgorithm::Hybrid, 0));
            }

            #[test]
            #[cfg_attr(
                not(synfire_gpu),
                ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
            )]
            fn gpu_ptpe() {
                let Some(gpus) = gpus_or_skip(concat!(stringify!($name), "::gpu_ptpe")) else {
                    return;
                };
                $body(&gpu_counter(&gpus[..1], ExactAlgorithm::Ptpe, 0));
            }

            #[test]
            #[cfg_attr(
                not(synfire_gpu),
                ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
            )]
            fn gpu_mtpe() {
                let Some(gpus) = gpus_or_skip(concat!(stringify!($name), "::gpu_mtpe")) else {
                    return;
                };
                $body(&gpu_counter(&gpus[..1], ExactAlgorithm::Mtpe, 0));
                $body(&gpu_counter(&gpus[..1], ExactAlgorithm::Mtpe, 64));
            }

            #[test]
            #[cfg_attr(
                not(synfire_gpu),
                ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
            )]
            fn gpu_ends() {
                let Some(gpus) = gpus_or_skip(concat!(stringify!($name), "::gpu_ends")) else {
                    return;
                };
                $body(&gpu_counter(&gpus[..1], ExactAlgorithm::Ends, 0));
            }

            #[test]
            #[cfg_attr(
                not(synfire_gpu),
                ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
            )]
            fn multi_gpu() {
                let Some(gpus) = gpus_or_skip(concat!(stringify!($name), "::multi_gpu")) else {
                    return;
                };
                let many: Vec<usize> = gpus.iter().chain(&gpus).copied().collect();
                $body(&gpu_counter(&many, ExactAlgorithm::Hybrid, 0));
                $body(&gpu_counter(&many, ExactAlgorithm::Mtpe, 0));
                $body(&gpu_counter(&many, ExactAlgorithm::Ends, 0));
            }
        }
    };
}

cpu_and_gpu!(random_streams, body_random);
cpu_and_gpu!(sym26, body_sym26);
cpu_and_gpu!(real_fixtures, body_fixtures);
cpu_and_gpu!(mining, body_mining);

/// The bursts in the random streams really overflow the GPU lists (so the recount path is
/// exercised), and the recount keeps the counts exact (checked by `random_streams_gpu`).
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn bursts_overflow_gpu_lists_and_are_recounted() {
    let Some(gpus) = gpus_or_skip("bursts_overflow_gpu_lists_and_are_recounted") else {
        return;
    };
    let ivs = intervals(RANDOM_IVS);
    let mut overflows = 0;
    for (stream, cands) in random_streams() {
        for algorithm in [ExactAlgorithm::Ptpe, ExactAlgorithm::Mtpe] {
            let counter = GpuCounter::new(&stream, &ivs, &gpus[..1]).unwrap();
            counter.set_exact_algorithm(algorithm);
            counter.count(CountKind::Exact, &cands).unwrap();
            overflows += counter.stats().overflow_recounts;
            assert!(!counter.has_failed());
        }
    }
    assert!(
        overflows > 0,
        "no candidate overflowed: the recount path went untested"
    );
}

/// Without a GPU, `--device auto` counts on the CPU and `--device gpu` is a clear error.
#[test]
fn device_selection_without_gpu_falls_back_or_fails_clearly() {
    if synfire::device::probe().is_ok() {
        eprintln!(
            "device_selection_without_gpu_falls_back_or_fails_clearly: a GPU is present; skipped"
        );
        return;
    }
    let stream = generate(&SynthParams::sym26(1)).unwrap();
    let ivs = intervals("0.004-0.006");
    let auto = synfire::episode::select_counter(
        &stream,
        &ivs,
        synfire::device::DeviceChoice::Auto,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(auto.name(), "cpu");
    let err = synfire::episode::select_counter(
        &stream,
        &ivs,
        synfire::device::DeviceChoice::Gpu,
        &Default::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no CUDA driver"), "{err}");
}
