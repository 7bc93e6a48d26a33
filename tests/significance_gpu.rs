//! Significance with the surrogates mined and counted on the GPUs equals the CPU's, number for
//! number: the same surrogates (Philox, a pure function of seed and index), exact counts on
//! either back end, so the same statistics and p-values. Skipped without a GPU (fails without
//! one when `SYNFIRE_REQUIRE_GPU=1`).

mod common;
use std::path::{Path, PathBuf};

use synfire::device::DeviceChoice;
use synfire::episode::{GpuSettings, Interval, MinerConfig, Threshold, mine};
use synfire::event::Ordering;
use synfire::significance::{
    Correction, SignificanceConfig, phases::Tester, test_episodes, test_episodes_on,
};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The real recordings the GPU tests read.
const RECORDINGS: [&str; 2] = [
    "fixtures/spikes/A2929-200711/A2929-200711.nwb",
    "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv",
];

/// A GPU counter holding `stream` with `intervals`.
fn gpu_for(
    stream: &synfire::event::EventStream,
    intervals: &[Interval],
) -> synfire::episode::GpuCounter {
    synfire::episode::select_gpu(
        stream,
        intervals,
        DeviceChoice::Gpu,
        &GpuSettings::default(),
    )
    .unwrap()
    .expect("a GPU")
}

/// A recording, a GPU counter holding it with `intervals`, and its units busiest first.
fn on_gpu(
    rel: &str,
    intervals: &[Interval],
) -> (
    synfire::event::EventStream,
    synfire::episode::GpuCounter,
    Vec<u32>,
) {
    let stream = synfire::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
    let gpu = gpu_for(&stream, intervals);
    let counts = stream.counts_per_type();
    let mut busy: Vec<u32> = (0..counts.len() as u32).collect();
    busy.sort_by_key(|&u| std::cmp::Reverse(counts[u as usize]));
    (stream, gpu, busy)
}

#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn gpu_surrogates_give_the_cpu_p_values() {
    if !common::gpu_or_skip("gpu_surrogates_give_the_cpu_p_values") {
        return;
    }
    let stream = synfire::read_spikes(
        &fixture("fixtures/spikes/A2929-200711/A2929-200711.nwb"),
        Ordering::RequireSorted,
    )
    .unwrap();
    // A lag-0 interval among them, so the kernels' equal-time rules are exercised too.
    let mut config = MinerConfig::new(
        Interval::parse_list("[0,0.001],(0.001,0.005],0.005-0.010").unwrap(),
        Threshold::MinCount(300),
    );
    config.max_level = 3;
    let data = mine(&stream, &config).unwrap();
    for (method, correction, sample_split) in [
        ("dither:0.015", Correction::MaxT, None),
        ("isi-dither:0.015", Correction::Spectrum, None),
        ("shift:0.5", Correction::Holm, None),
        // Sample splitting: the selection part's screening surrogates and the test part's
        // surrogates, both generated on the devices from the part each counter holds.
        ("dither:0.015", Correction::MaxT, Some(0.5)),
    ] {
        let sig = SignificanceConfig {
            method: method.parse().unwrap(),
            n_surrogates: 9,
            alpha: 0.05,
            correction,
            seed: 11,
            test_top: Some(40),
            watch: None,
            trials: None,
            significant_only: false,
            sample_split,
        };
        let cpu = test_episodes(&stream, &config, &data, &sig).unwrap();
        let gpu = test_episodes_on(
            &stream,
            &config,
            &data,
            &sig,
            DeviceChoice::Gpu,
            &GpuSettings::default(),
        )
        .unwrap();
        assert!(!cpu.tests.is_empty(), "{method}");
        assert_eq!(gpu.tests, cpu.tests, "{method} {correction:?}");
        // Counted from the prefixes' ends on the device, the same again.
        let by_ends = test_episodes_on(
            &stream,
            &config,
            &data,
            &sig,
            DeviceChoice::Gpu,
            &GpuSettings {
                exact: synfire::episode::hybrid::ExactAlgorithm::Ends,
                ..GpuSettings::default()
            },
        )
        .unwrap();
        assert_eq!(by_ends.tests, cpu.tests, "{method} {correction:?} by ends");
        assert_eq!(by_ends.surrogate_max, cpu.surrogate_max, "{method} by ends");
        assert_eq!(gpu.surrogate_max, cpu.surrogate_max, "{method}");
        // A counter the caller lends (a pipeline stage's) gives the same again.
        let mut lent = gpu_for(&stream, &config.intervals);
        let again = Tester::with_gpus(&stream, &config, std::slice::from_mut(&mut lent))
            .run(&data, &sig)
            .unwrap();
        assert_eq!(again.tests, cpu.tests, "{method} on a lent counter");
    }
}

/// Surrogates generated on the device from the recording it holds equal the host's bit for
/// bit (every spike of every unit), for dithering (uniform, and keeping each unit's dead time)
/// and shifting, on the real recordings, for
/// surrogate indices and seeds beyond 32 bits; and counting on them gives the host's counts.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn device_surrogates_equal_the_hosts_bit_for_bit() {
    use std::sync::Arc;
    use synfire::episode::{CountKind, Counter, CpuCounter, Episode, TypeIndex};
    use synfire::significance::Surrogates;
    if !common::gpu_or_skip("device_surrogates_equal_the_hosts_bit_for_bit") {
        return;
    }
    for rel in RECORDINGS {
        let intervals = Interval::parse_list("[0,0.001],(0.001,0.005]").unwrap();
        let (stream, mut gpu, busy) = on_gpu(rel, &intervals);
        // A few pairs of the recording's busiest units to count.
        let list: Vec<Episode> = busy[..4]
            .iter()
            .flat_map(|&a| busy[..4].iter().map(move |&b| (a, b)))
            .flat_map(|(a, b)| {
                intervals.iter().map(move |&iv| {
                    Episode::new(
                        vec![synfire::event::EventType(a), synfire::event::EventType(b)],
                        vec![iv],
                    )
                })
            })
            .collect();
        for method in [
            "dither:0.015",
            "shift:2.0",
            "dither:0.0005",
            "dither-dead-time:0.015",
            "dither-dead-time:0.015:0.004",
        ] {
            for seed in [1u64, (1 << 40) + 5] {
                let sur = Arc::new(
                    Surrogates::new(&stream, method.parse().unwrap(), seed, None).unwrap(),
                );
                for s in [0u64, 7, (1 << 32) + 3] {
                    let job = sur.device_job(s).expect("a device method");
                    gpu.reload(&stream).unwrap();
                    let maker = Arc::clone(&sur);
                    gpu.load_surrogate(job, Arc::new(move || maker.generate(s).unwrap()))
                        .unwrap();
                    let host = sur.generate(s).unwrap();
                    let want = TypeIndex::new(&host).all_times().to_vec();
                    let got = gpu.device_times().unwrap();
                    assert_eq!(got.len(), want.len());
                    let differ = got
                        .iter()
                        .zip(&want)
                        .filter(|(a, b)| a.to_bits() != b.to_bits())
                        .count();
                    assert_eq!(differ, 0, "{rel} {method} seed {seed} surrogate {s}");
                    let on_gpu = gpu.count(CountKind::Exact, &list).unwrap();
                    let on_cpu = CpuCounter::new(&host)
                        .count(CountKind::Exact, &list)
                        .unwrap();
                    assert_eq!(on_gpu, on_cpu, "{rel} {method} counts");
                }
            }
        }
    }
}

/// A cluster worker's warm GPU counters (`WarmCounters`, kept across sessions: the second
/// session of the same intervals reloads them) give the CPU's test when the surrogates are
/// split into ranges and combined (`significance::phases`), for both passes of `max-t`.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn split_phases_on_warm_gpu_counters_give_the_cpu_p_values() {
    use synfire::significance::phases::{Tester, WarmCounters, finish};
    if !common::gpu_or_skip("split_phases_on_warm_gpu_counters_give_the_cpu_p_values") {
        return;
    }
    let mut config = MinerConfig::new(
        Interval::parse_list("[0,0.001],(0.001,0.005],0.005-0.010").unwrap(),
        Threshold::MinCount(300),
    );
    config.max_level = 3;
    let mut warm = WarmCounters::new();
    for rel in [
        "fixtures/spikes/A2929-200711/A2929-200711.nwb",
        "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv",
    ] {
        let stream = synfire::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
        let data = mine(&stream, &config).unwrap();
        let sig = SignificanceConfig {
            method: "dither:0.015".parse().unwrap(),
            n_surrogates: 9,
            alpha: 0.05,
            correction: Correction::MaxT,
            seed: 11,
            test_top: None,
            watch: None,
            trials: None,
            significant_only: false,
            sample_split: None,
        };
        let cpu = test_episodes(&stream, &config, &data, &sig).unwrap();
        let gpus = warm
            .load(&stream, &config, DeviceChoice::Gpu, &GpuSettings::default())
            .unwrap();
        assert!(!gpus.is_empty(), "{rel}: no GPU counter");
        let tester = Tester::with_gpus(&stream, &config, gpus);
        let plan = tester.plan(&data, &sig).unwrap();
        let first: Vec<_> = plan
            .batches(4)
            .into_iter()
            .map(|r| tester.first_pass(&plan, r).unwrap())
            .collect();
        let union = tester.union(&plan, &first).unwrap();
        let second: Vec<_> = first
            .iter()
            .map(|p| tester.second_pass(&plan, &union, p).unwrap())
            .collect();
        let split = finish(&plan, &first, Some((&union, &second))).unwrap();
        assert_eq!(split.tests, cpu.tests, "{rel}");
        assert_eq!(split.surrogate_max, cpu.surrogate_max, "{rel}");
    }
    assert!(warm.gpu_counters() >= 1);
}

/// The warm counters (the significance engine's: the first and `more_counters`) hold one host
/// index of the recording between them, within each counter too (its CPU counts and its
/// recording), after their start and after a reload with another recording; and every
/// counter counts as the CPU and touches as many events.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn warm_gpu_counters_share_one_host_index_and_count_as_the_cpu() {
    use std::sync::Arc;
    use synfire::episode::{CountKind, Counter, CpuCounter, Episode};
    use synfire::event::EventType;
    use synfire::significance::phases::WarmCounters;
    if !common::gpu_or_skip("warm_gpu_counters_share_one_host_index_and_count_as_the_cpu") {
        return;
    }
    let intervals = Interval::parse_list("[0,0.001],(0.001,0.005],0.005-0.010").unwrap();
    let config = MinerConfig::new(intervals.clone(), Threshold::MinCount(300));
    let mut warm = WarmCounters::new();
    for rel in RECORDINGS {
        let stream = synfire::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
        let counts = stream.counts_per_type();
        let mut busy: Vec<u32> = (0..counts.len() as u32).collect();
        busy.sort_by_key(|&u| std::cmp::Reverse(counts[u as usize]));
        busy.truncate(4);
        let mut list = Vec::new();
        for &a in &busy {
            for &b in &busy {
                for iv in &intervals {
                    list.push(Episode::new(vec![EventType(a), EventType(b)], vec![*iv]));
                    list.push(Episode::new(
                        vec![EventType(a), EventType(b), EventType(busy[0])],
                        vec![*iv, intervals[1]],
                    ));
                }
            }
        }
        let cpu = CpuCounter::new(&stream);
        let want = cpu.count(CountKind::Exact, &list).unwrap();
        let gpus = warm
            .load(&stream, &config, DeviceChoice::Gpu, &GpuSettings::default())
            .unwrap();
        assert!(gpus.len() >= 2, "{rel}: {} GPU counters", gpus.len());
        let shared = Arc::clone(gpus[0].recording());
        // Each counter's recording and CPU copy, and the one here.
        assert_eq!(Arc::strong_count(&shared), 2 * gpus.len() + 1, "{rel}");
        for (i, g) in gpus.iter().enumerate() {
            assert!(Arc::ptr_eq(g.recording(), &shared), "{rel}: counter {i}");
            assert_eq!(
                g.count(CountKind::Exact, &list).unwrap(),
                want,
                "{rel}: counter {i}"
            );
            for e in &list {
                assert_eq!(g.events_touched(e), cpu.events_touched(e), "{rel}: {e:?}");
            }
        }
    }
    assert!(warm.gpu_counters() >= 2);
}

/// The threshold search's join bounds computed on the device (`kernels/bounds.cu`, through
/// `Counter::join_bounds`) equal the host's (`join_bounds_cpu`) on the real recordings and on
/// device-generated surrogates of them: prefixes of 2 and 3 nodes over the busiest units
/// (repeated types included), intervals that admit a zero delay, every last pair.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn device_join_bounds_equal_the_hosts() {
    use std::sync::Arc;
    use synfire::episode::bound::{JoinBounds, join_bounds_cpu};
    use synfire::episode::{Counter, Episode, TypeIndex};
    use synfire::event::EventType;
    use synfire::significance::Surrogates;
    if !common::gpu_or_skip("device_join_bounds_equal_the_hosts") {
        return;
    }
    for rel in RECORDINGS {
        let intervals = Interval::parse_list("[0,0.001],(0.001,0.005],(0.005,0.01]").unwrap();
        let (stream, mut gpu, busy) = on_gpu(rel, &intervals);
        assert!(gpu.has_join_bounds());
        let job = |nodes: usize, units: usize| -> JoinBounds {
            let units = &busy[..units.min(busy.len())];
            let mut chains: Vec<(Vec<u32>, Vec<Interval>)> =
                units.iter().map(|&u| (vec![u], Vec::new())).collect();
            for _ in 1..nodes {
                let mut longer = Vec::new();
                for (t, v) in &chains {
                    for &iv in &intervals {
                        for &u in units {
                            let (mut t, mut v) = (t.clone(), v.clone());
                            t.push(u);
                            v.push(iv);
                            longer.push((t, v));
                        }
                    }
                }
                chains = longer;
            }
            let mut out = JoinBounds::default();
            for (t, v) in chains {
                out.prefixes
                    .push(Episode::new(t.into_iter().map(EventType).collect(), v));
            }
            for &a in units {
                for &iv in &intervals {
                    for &x in units {
                        out.pairs.push((EventType(a), iv, EventType(x)));
                    }
                }
            }
            for (p, alpha) in out.prefixes.iter().enumerate() {
                let last = alpha.types()[nodes - 1];
                for (q, pair) in out.pairs.iter().enumerate() {
                    if pair.0 == last {
                        out.joins.push((p as u32, q as u32));
                    }
                }
            }
            out
        };
        let jobs = [job(2, 12), job(3, 6)];
        let check =
            |gpu: &synfire::episode::GpuCounter, host: &synfire::event::EventStream, what: &str| {
                let index = TypeIndex::new(host);
                for j in &jobs {
                    let want = join_bounds_cpu(&index, j);
                    let got = gpu.join_bounds(j).expect("the GPU computes join bounds");
                    assert_eq!(got.len(), want.len());
                    let differ = got.iter().zip(&want).filter(|(a, b)| a != b).count();
                    assert_eq!(
                        differ,
                        0,
                        "{rel} {what}: {differ} of {} bounds differ",
                        want.len()
                    );
                    assert!(
                        want.iter().any(|&b| b > 0),
                        "{rel} {what}: some bound is positive"
                    );
                }
            };
        check(&gpu, &stream, "recording");
        let sur =
            Arc::new(Surrogates::new(&stream, "dither:0.015".parse().unwrap(), 3, None).unwrap());
        for s in [0u64, 11] {
            let job = sur.device_job(s).expect("a device method");
            gpu.reload(&stream).unwrap();
            let maker = Arc::clone(&sur);
            gpu.load_surrogate(job, Arc::new(move || maker.generate(s).unwrap()))
                .unwrap();
            check(&gpu, &sur.generate(s).unwrap(), &format!("surrogate {s}"));
        }
    }
}

/// `spectrum` keeping only the significant episodes (a search pass, then the significant
/// episodes counted in device-generated surrogates) gives the CPU's tests on the GPU, with
/// either exact kernel.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn spectrum_significant_only_gives_the_cpu_tests() {
    if !common::gpu_or_skip("spectrum_significant_only_gives_the_cpu_tests") {
        return;
    }
    // Where this test has significant and non-significant episodes.
    let stream = common::chain_recording();
    let mut config = MinerConfig::new(
        Interval::parse_list("0-0.005,0.005-0.010").unwrap(),
        Threshold::MinCount(12),
    );
    config.max_level = 3;
    let data = mine(&stream, &config).unwrap();
    let sig = SignificanceConfig {
        method: "dither:0.01".parse().unwrap(),
        n_surrogates: 39,
        alpha: 0.5,
        correction: Correction::Spectrum,
        seed: 7,
        test_top: None,
        watch: None,
        trials: None,
        significant_only: true,
        sample_split: None,
    };
    let cpu = test_episodes(&stream, &config, &data, &sig).unwrap();
    assert!(
        !cpu.tests.is_empty() && cpu.tests.len() < cpu.tested,
        "{} of {}",
        cpu.tests.len(),
        cpu.tested
    );
    for exact in [
        synfire::episode::hybrid::ExactAlgorithm::Hybrid,
        synfire::episode::hybrid::ExactAlgorithm::Ends,
    ] {
        let gpu = test_episodes_on(
            &stream,
            &config,
            &data,
            &sig,
            DeviceChoice::Gpu,
            &GpuSettings {
                exact,
                ..GpuSettings::default()
            },
        )
        .unwrap();
        assert_eq!(gpu.tests, cpu.tests, "{exact:?}");
        assert_eq!(gpu.tested, cpu.tested, "{exact:?}");
    }
}

/// The `spectrum` search's one-floor pass on the device (`synfire::device::episodes::floor`, many
/// surrogates in one batch) equals its host reference (`max_count_at_floor`) size for size
/// and surrogate for surrogate: on dithered surrogates of the dense preset (four levels), of
/// the real IBL raster and of the real A2929 session with a lag-0 interval, at floors from the
/// minimum count (every frequent episode) up to the largest pair count; and where the pass
/// resolves, it gives the round-by-round search's maxima.
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn device_floor_pass_equals_the_hosts() {
    use synfire::episode::{CountKind, Counter, CpuCounter, NoProgress};
    use synfire::significance::Surrogates;
    use synfire::significance::gpu::{floor_job, floor_pass};
    use synfire::significance::spectrum::{max_count_at_floor, max_count_by_size};
    if !common::gpu_or_skip("device_floor_pass_equals_the_hosts") {
        return;
    }
    let dense =
        synfire::synth::dense::generate_dense(&synfire::synth::dense::DenseParams::neuropixels(1))
            .unwrap()
            .0;
    let read = |rel: &str| synfire::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
    let cases = [
        (
            dense,
            "0-0.005,0.005-0.010,0.010-0.020",
            Threshold::PerSecond(0.2),
            4,
        ),
        (
            read(RECORDINGS[1]),
            "0-0.005,0.005-0.010,0.010-0.020",
            Threshold::PerSecond(0.2),
            4,
        ),
        (
            read(RECORDINGS[0]),
            "[0,0.001],(0.001,0.005],0.005-0.010",
            Threshold::MinCount(150),
            4,
        ),
    ];
    for (stream, intervals, threshold, max_level) in cases {
        let mut config = MinerConfig::new(Interval::parse_list(intervals).unwrap(), threshold);
        config.max_level = max_level;
        let gpu = gpu_for(&stream, &config.intervals);
        let surrogates =
            Surrogates::new(&stream, "dither:0.015".parse().unwrap(), 3, None).unwrap();
        let xs: Vec<_> = (0..5).map(|s| surrogates.generate(s).unwrap()).collect();
        let counters: Vec<CpuCounter> = xs.iter().map(CpuCounter::new).collect();
        let singles = synfire::episode::candidates::level_one(stream.alphabet().len());
        let c1s: Vec<Vec<u64>> = counters
            .iter()
            .map(|c| c.count(CountKind::Exact, &singles).unwrap())
            .collect();
        let exact = max_count_by_size(&xs[0], &config, &counters[0], &NoProgress).unwrap();
        let m = exact.min_count;
        let deepest = exact.max_by_size[max_level];
        let mut floors = vec![m, deepest * 9 / 10, deepest, exact.max_by_size[2] + 1];
        floors.iter_mut().for_each(|f| *f = (*f).max(m));
        floors.dedup();
        for floor in floors {
            let batch: Vec<_> = xs
                .iter()
                .zip(&counters)
                .zip(&c1s)
                .map(|((x, c), c1)| (x, c.index(), &c1[..]))
                .collect();
            let job = floor_job(&config, floor, &batch).expect("one recording's surrogates");
            let got = floor_pass(&gpu, std::sync::Arc::new(job), 0).unwrap();
            for (i, (x, c)) in xs.iter().zip(&counters).enumerate() {
                let want = max_count_at_floor(x, &config, c, &NoProgress, floor).unwrap();
                assert_eq!(
                    got.best[i], want.best_by_size,
                    "{intervals} floor {floor} surrogate {i}"
                );
                if i == 0
                    && let Some(r) = want.resolved()
                {
                    assert_eq!(r, exact.max_by_size, "{intervals} floor {floor}");
                }
            }
        }
    }
}

/// `guided`'s extensions counted in hybrids on the GPU (their added units' surrogate trains
/// made on the device, each hypothesis counted there from its parent's ends or earliest
/// ends) give the CPU's tests number for number: counts, sums over the hybrids, p-values and
/// decisions, at every level, on the real recordings, for the methods the device makes
/// (`dither`, `dither-dead-time`, `shift`) and one it does not (`isi-dither`, made on the
/// host either way).
#[test]
#[cfg_attr(
    not(synfire_gpu),
    ignore = "needs a GPU: none on this machine (SYNFIRE_REQUIRE_GPU=1 runs it)"
)]
fn guided_hybrids_on_the_gpu_give_the_cpu_tests() {
    if !common::gpu_or_skip("guided_hybrids_on_the_gpu_give_the_cpu_tests") {
        return;
    }
    let mut extensions = 0usize;
    for rel in RECORDINGS {
        let stream = synfire::read_spikes(&fixture(rel), Ordering::RequireSorted).unwrap();
        let mut config = MinerConfig::new(
            Interval::parse_list("[0,0.001],(0.001,0.005],0.005-0.010").unwrap(),
            Threshold::MinCount(20),
        );
        config.max_level = 4;
        for method in [
            "dither-dead-time:0.015",
            "dither:0.015",
            "shift:0.5",
            "isi-dither:0.015",
        ] {
            let sig = SignificanceConfig {
                method: method.parse().unwrap(),
                n_surrogates: 20,
                alpha: 0.05,
                correction: Correction::Guided,
                seed: 5,
                test_top: Some(30),
                watch: None,
                trials: None,
                significant_only: false,
                sample_split: None,
            };
            let data = mine(&stream, &sig.mining_config(&config)).unwrap();
            let cpu = test_episodes(&stream, &config, &data, &sig).unwrap();
            let gpu = test_episodes_on(
                &stream,
                &config,
                &data,
                &sig,
                DeviceChoice::Gpu,
                &GpuSettings::default(),
            )
            .unwrap();
            assert_eq!(gpu.tests, cpu.tests, "{rel} {method}");
            assert_eq!(gpu.sample_split, cpu.sample_split, "{rel} {method}");
            extensions += cpu.tests.iter().filter(|t| t.episode.len() >= 3).count();
        }
    }
    assert!(extensions > 0, "no extension was tested");
}
