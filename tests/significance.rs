//! Calibration and power of the significance procedures (`synfire::significance`).
//!
//! Calibration: on independent trains (no coordination between units: every discovery is
//! false) over many seeds, the fraction of runs with any discovery stays within a binomial
//! bound of α for the family-wise procedures, and the false-discovery proportion (here 1 for
//! any discovery) averages within a bound of α for `fdr-bh`. A check fails only when the
//! observed number of runs with a discovery is improbable (p < 0.001) for a procedure whose
//! error rate is α.
//!
//! Power: chains embedded by the dense generator, among slow and among fast units, are found
//! significant by `max-t`.

use synfire::episode::{
    CountKind, Counter, CpuCounter, Episode, Interval, MinerConfig, Threshold, mine,
};
use synfire::event::{EventStream, EventType};
use synfire::significance::{Correction, SignificanceConfig, listing, test_episodes};
use synfire::synth::dense::{DenseParams, generate_dense};
use synfire::synth::sym26::Chain;

/// P(Binomial(n, p) ≥ k).
fn binomial_upper_tail(n: u64, p: f64, k: u64) -> f64 {
    let mut total = 0.0;
    for j in k..=n {
        let mut ln = 0.0;
        for i in 0..j {
            ln += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        }
        total += (ln + j as f64 * p.ln() + (n - j) as f64 * (1.0 - p).ln()).exp();
    }
    total
}

/// Independent units, no chains, no synchronous pairs: the null. Rates log-normal as the
/// dense preset (median 2.2 Hz) or, with `fast`, as the faster units of the real IBL raster
/// (median 12 Hz); refractory 2 ms (so the trains are not Poisson).
fn null_stream(seed: u64, fast: bool) -> EventStream {
    let mut p = DenseParams::neuropixels(seed);
    p.units = 10;
    p.duration_s = 30.0;
    p.chains = Vec::new();
    p.sync_pairs = Vec::new();
    p.bursting_fraction = 0.0;
    if fast {
        p.rate_median_hz = 12.0;
        p.rate_sigma = 0.5;
    } else {
        p.rate_median_hz = 6.0;
        p.rate_sigma = 0.8;
    }
    generate_dense(&p).unwrap().0
}

fn config() -> MinerConfig {
    let ivs = Interval::parse_list("0-0.005,0.005-0.010").unwrap();
    let mut c = MinerConfig::new(ivs, Threshold::MinCount(8));
    c.max_level = 3;
    c
}

struct Calibration {
    runs: u64,
    any_discovery: u64,
    tested: usize,
}

fn calibrate(
    correction: Correction,
    method: &str,
    fast: bool,
    runs: u64,
    surrogates: usize,
    alpha: f64,
    sample_split: Option<f64>,
) -> Calibration {
    let mut out = Calibration {
        runs,
        any_discovery: 0,
        tested: 0,
    };
    for seed in 0..runs {
        let stream = null_stream(1000 + seed, fast);
        let cfg = config();
        let data = mine(&stream, &cfg).unwrap();
        let sig = SignificanceConfig {
            method: method.parse().unwrap(),
            n_surrogates: surrogates,
            alpha,
            correction,
            seed: 77 + seed,
            test_top: None,
            watch: None,
            trials: None,
            significant_only: false,
            sample_split,
        };
        let r = test_episodes(&stream, &cfg, &data, &sig).unwrap();
        if sample_split.is_some() {
            // Every tested episode is frequent in the whole recording (a count never falls
            // when events are appended), so the listing shows its test.
            let listed = listing(&data, Some(&r), false, false);
            assert_eq!(
                listed.tests.iter().flatten().count(),
                r.tests.len(),
                "seed {seed}: tested episodes missing from the recording's frequent ones"
            );
            assert!(r.tests.iter().all(|t| t.stats.test_count == Some(t.count)));
        }
        out.tested += r.tests.len();
        if r.tests.iter().any(|t| t.stats.significant) {
            out.any_discovery += 1;
        }
    }
    out
}

fn assert_calibrated(name: &str, c: &Calibration, alpha: f64) {
    let tail = binomial_upper_tail(c.runs, alpha, c.any_discovery);
    assert!(
        c.tested > c.runs as usize,
        "{name}: too few episodes tested ({}) for the check to mean anything",
        c.tested
    );
    assert!(
        tail > 0.001,
        "{name}: {} of {} null runs had a discovery at α = {alpha} (P = {tail:.2e} for a calibrated procedure)",
        c.any_discovery,
        c.runs
    );
}

#[test]
fn max_t_controls_the_family_wise_error_on_independent_trains() {
    let alpha = 0.1;
    for (fast, method) in [(false, "dither:0.01"), (true, "isi-dither:0.01")] {
        let c = calibrate(Correction::MaxT, method, fast, 40, 19, alpha, None);
        eprintln!(
            "max-t {method} fast={fast}: {} of {} runs, {} tests",
            c.any_discovery, c.runs, c.tested
        );
        assert_calibrated(&format!("max-t {method}"), &c, alpha);
    }
}

#[test]
fn sample_split_max_t_controls_the_family_wise_error_on_independent_trains() {
    let alpha = 0.1;
    for (fast, method) in [(false, "dither:0.01"), (true, "isi-dither:0.01")] {
        let c = calibrate(Correction::MaxT, method, fast, 40, 19, alpha, Some(0.5));
        eprintln!(
            "max-t sample split {method} fast={fast}: {} of {} runs, {} tests",
            c.any_discovery, c.runs, c.tested
        );
        assert_calibrated(&format!("max-t sample split {method}"), &c, alpha);
    }
}

/// Every two-node episode among the first four units with the first interval (16): a watch
/// list fixed before seeing the data (per-episode procedures are valid for such a list, not
/// for one chosen by the recording's own counts).
fn watch_list(stream: &EventStream) -> Vec<Episode> {
    let ivs = Interval::parse_list("0-0.005").unwrap();
    let units: Vec<EventType> = (0..4)
        .map(|u| stream.alphabet().get(&format!("u{u}")).unwrap())
        .collect();
    let mut out = Vec::new();
    for &a in &units {
        for &b in &units {
            for &iv in &ivs {
                out.push(Episode::new(vec![a, b], vec![iv]));
            }
        }
    }
    out
}

#[test]
fn holm_bonferroni_and_fdr_bh_are_calibrated_on_independent_trains() {
    let alpha = 0.1;
    for correction in [Correction::Holm, Correction::Bonferroni, Correction::FdrBh] {
        let mut c = Calibration {
            runs: 40,
            any_discovery: 0,
            tested: 0,
        };
        for seed in 0..c.runs {
            let stream = null_stream(2000 + seed, seed % 2 == 0);
            let cfg = config();
            let data = mine(&stream, &cfg).unwrap();
            // ISI dithering: the trains are refractory, and uniform dithering would make
            // their self-episodes (A→A) "significant" (Stella et al. 2022).
            let sig = SignificanceConfig {
                method: "isi-dither:0.01".parse().unwrap(),
                n_surrogates: 399,
                alpha,
                correction,
                seed: 5 + seed,
                test_top: None,
                watch: Some(watch_list(&stream)),
                trials: None,
                significant_only: false,
                sample_split: None,
            };
            let r = test_episodes(&stream, &cfg, &data, &sig).unwrap();
            // Enough surrogates for the smallest p-value to pass α/m: the check can fail.
            assert!(r.warnings.is_empty(), "{:?}", r.warnings);
            assert!(1.0 / 400.0 <= alpha / r.tests.len() as f64);
            c.tested += r.tests.len();
            c.any_discovery += u64::from(r.tests.iter().any(|t| t.stats.significant));
        }
        eprintln!("{correction}: {} of {} runs", c.any_discovery, c.runs);
        // Under the complete null every discovery is false: FDR = P(any discovery), so the
        // same bound checks fdr-bh's false-discovery rate.
        assert_calibrated(correction.name(), &c, alpha);
    }
}

/// Without correction, testing every frequent episode at α finds "discoveries" in most null
/// runs: the check above can fail.
#[test]
fn no_correction_is_not_calibrated_so_the_check_can_fail() {
    let alpha = 0.1;
    let c = calibrate(Correction::None, "dither:0.01", true, 20, 39, alpha, None);
    assert!(
        binomial_upper_tail(c.runs, alpha, c.any_discovery) < 0.001,
        "{} of {} runs",
        c.any_discovery,
        c.runs
    );
}

/// The dense generator's chains among slow units and among fast units are significant with
/// `max-t` (α = 0.05, 199 surrogates); episodes of units outside the chains are not.
#[test]
fn max_t_finds_embedded_chains_among_slow_and_fast_units() {
    assert_chains_found(None, 60.0);
}

/// The same with sample splitting (the family selected on the first half, tested on the
/// second), on a recording twice as long: each half is as long as the recording above.
#[test]
fn sample_split_max_t_finds_embedded_chains_among_slow_and_fast_units() {
    assert_chains_found(Some(0.5), 120.0);
}

/// `max-t` (mined selection, or sample splitting at `sample_split`) finds the dense
/// generator's chains among slow and fast units in `duration_s` seconds, and nothing without
/// two units of one chain.
fn assert_chains_found(sample_split: Option<f64>, duration_s: f64) {
    let mut p = DenseParams::neuropixels(3);
    p.units = 24;
    p.duration_s = duration_s;
    p.rate_median_hz = 6.0;
    p.rate_sigma = 0.8;
    p.rate_range_hz = (0.5, 40.0);
    p.sync_pairs = Vec::new();
    p.bursting_fraction = 0.0;
    p.evoke_probability = 0.5;
    p.chains = Vec::new();
    // Rates are drawn before the chains: learn them, then chain the slowest units (at least
    // 1 Hz) and the fastest ones.
    let rates = generate_dense(&p).unwrap().1.rates_hz;
    let mut by_rate: Vec<usize> = (0..p.units).filter(|&u| rates[u] >= 1.0).collect();
    by_rate.sort_by(|&a, &b| rates[a].total_cmp(&rates[b]));
    let slow: Vec<usize> = by_rate[..3].to_vec();
    let fast: Vec<usize> = by_rate[by_rate.len() - 3..].to_vec();
    p.chains = vec![
        Chain {
            neurons: slow.clone(),
            delay_s: (0.006, 0.009),
        },
        Chain {
            neurons: fast.clone(),
            delay_s: (0.002, 0.004),
        },
    ];
    let (stream, truth) = generate_dense(&p).unwrap();
    let cfg = {
        let ivs = Interval::parse_list("0-0.005,0.005-0.010").unwrap();
        let mut c = MinerConfig::new(ivs, Threshold::MinCount(10));
        c.max_level = 3;
        c
    };
    let data = mine(&stream, &cfg).unwrap();
    let sig = SignificanceConfig {
        method: "dither:0.015".parse().unwrap(),
        n_surrogates: 199,
        alpha: 0.05,
        correction: Correction::MaxT,
        seed: 11,
        test_top: None,
        watch: None,
        trials: None,
        significant_only: false,
        sample_split,
    };
    let r = test_episodes(&stream, &cfg, &data, &sig).unwrap();
    let ty = |u: usize| stream.alphabet().get(&format!("u{u}")).unwrap();
    let iv = |s: &str| Interval::parse_list(s).unwrap()[0];
    let chain = |u: &[usize], ivl: &str| {
        Episode::new(u.iter().map(|&x| ty(x)).collect(), vec![iv(ivl), iv(ivl)])
    };
    let counter = CpuCounter::new(&stream);
    for (e, unit) in [
        (chain(&slow, "0.005-0.010"), slow[0]),
        (chain(&fast, "0-0.005"), fast[0]),
    ] {
        let count = counter
            .count(CountKind::Exact, std::slice::from_ref(&e))
            .unwrap()[0];
        let t = r.tests.iter().find(|t| t.episode == e);
        assert!(
            t.is_some_and(|t| t.stats.significant),
            "chain {e:?} (first unit {:.1} Hz, count {count}) not significant: {t:?}",
            truth.rates_hz[unit]
        );
    }
    // The null (independent units) is false for every episode holding two units of one chain
    // (a→b→c couples a→c too, at the summed delay, and x→a→b is "more than chance" through
    // a→b); it holds for the rest.
    let chains: Vec<Vec<EventType>> = [&slow, &fast]
        .iter()
        .map(|c| c.iter().map(|&u| ty(u)).collect())
        .collect();
    let has_link = |e: &Episode| {
        chains
            .iter()
            .any(|c| e.types().iter().filter(|t| c.contains(t)).count() >= 2)
    };
    let false_ones: Vec<_> = r
        .tests
        .iter()
        .filter(|t| t.stats.significant && !has_link(&t.episode))
        .collect();
    assert!(
        false_ones.is_empty(),
        "episodes without a chain link found significant: {false_ones:?}"
    );
    assert!(
        r.tests.iter().filter(|t| !has_link(&t.episode)).count() > 50,
        "the check covers many null episodes"
    );
}
