//! The significance test split into phases over ranges of surrogates
//! (`synfire::significance::phases`) gives the single-process result bit for bit, for every
//! procedure and any partition of the surrogates, with every plan and part passed through its
//! JSON form to a tester of its own (as between the processes of a cluster); malformed,
//! incomplete or foreign parts are refused with a named error.

mod common;

use std::ops::Range;

use synfire::episode::{Episode, Interval, MinerConfig, MiningResult, Threshold, mine};
use synfire::event::EventStream;
use synfire::significance::phases::{FirstPart, Plan, SecondPart, Tester, Union, finish};
use synfire::significance::{
    Correction, SignificanceConfig, SignificanceError, SignificanceResult, test_episodes,
};
use synfire::synth::dense::{DenseParams, generate_dense};

/// The shared test recording (`common::chain_recording`).
fn recording() -> EventStream {
    common::chain_recording()
}

fn config() -> MinerConfig {
    let ivs = Interval::parse_list("0-0.005,0.005-0.010").unwrap();
    let mut c = MinerConfig::new(ivs, Threshold::MinCount(12));
    c.max_level = 3;
    c
}

fn sig(correction: Correction, seed: u64) -> SignificanceConfig {
    SignificanceConfig {
        method: "dither:0.01".parse().unwrap(),
        n_surrogates: 11,
        alpha: 0.1,
        correction,
        seed,
        test_top: None,
        watch: None,
        trials: None,
        significant_only: false,
        sample_split: None,
    }
}

/// A tester of `stream` on the CPU.
fn cpu_tester<'a>(stream: &'a EventStream, cfg: &'a MinerConfig) -> Tester<'a> {
    Tester::new(
        stream,
        cfg,
        synfire::device::DeviceChoice::Cpu,
        &Default::default(),
    )
    .unwrap()
}

/// Every f64 of the result by its bits (so that `-0.0` and `0.0` differ, unlike `==`).
fn bits(r: &SignificanceResult) -> Vec<u64> {
    let mut out: Vec<u64> = r.surrogate_max.iter().map(|x| x.to_bits()).collect();
    for t in &r.tests {
        let s = &t.stats;
        out.extend(
            [
                s.surrogate_mean,
                s.surrogate_std,
                s.statistic,
                s.p_value,
                s.p_adjusted,
            ]
            .map(f64::to_bits),
        );
    }
    out
}

/// The test run in phases over `ranges`, each phase on a tester of its own and every plan and
/// part through its JSON form; the parts handed over in reverse order.
fn split_run(
    stream: &EventStream,
    cfg: &MinerConfig,
    data: &MiningResult,
    sig: &SignificanceConfig,
    ranges: &[Range<u64>],
) -> Result<SignificanceResult, SignificanceError> {
    let cpu = |s| {
        Tester::new(
            s,
            cfg,
            synfire::device::DeviceChoice::Cpu,
            &Default::default(),
        )
    };
    let home = cpu(stream)?;
    let plan_json = home.plan(data, sig)?.to_json(cfg)?;
    // Another process: its own copy of the recording.
    let copy = stream.clone();
    let worker = cpu(&copy)?;
    let plan = Plan::from_json(&plan_json, &copy, cfg)?;
    let mut first = Vec::new();
    for r in ranges {
        let part = worker.first_pass(&plan, r.clone())?.to_json(cfg)?;
        first.push(FirstPart::from_json(&part, stream, cfg)?);
    }
    first.reverse();
    let home_plan = Plan::from_json(&plan_json, stream, cfg)?;
    if home_plan.passes() == 1 {
        return finish(&home_plan, &first, None);
    }
    let union_json = home.union(&home_plan, &first)?.to_json(cfg)?;
    let union = Union::from_json(&union_json, &copy, cfg)?;
    let mut second = Vec::new();
    for part in &first {
        let json = worker.second_pass(&plan, &union, part)?.to_json()?;
        second.push(SecondPart::from_json(&json)?);
    }
    finish(&home_plan, &first, Some((&union, &second)))
}

fn partitions(n: u64) -> Vec<Vec<Range<u64>>> {
    let by = |size: u64| -> Vec<Range<u64>> {
        (0..n.div_ceil(size))
            .map(|k| k * size..((k + 1) * size).min(n))
            .collect()
    };
    vec![by(1), by(3), by(n), vec![0..2, 2..2, 2..9, 9..n]]
}

#[test]
fn every_procedure_split_any_way_equals_the_single_process_run_bit_for_bit() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    let frequent = data
        .episodes
        .iter()
        .filter(|f| f.episode.len() >= 2)
        .count();
    assert!(frequent > 30, "only {frequent} episodes to test");
    let mut cases: Vec<SignificanceConfig> = [
        Correction::MaxT,
        Correction::Spectrum,
        Correction::FdrBh,
        Correction::Holm,
        Correction::Bonferroni,
        Correction::None,
    ]
    .into_iter()
    .map(|c| sig(c, 7))
    .collect();
    // A watch list (counted in the recording by the plan) and a top-N selection.
    let mut watch = sig(Correction::FdrBh, 3);
    watch.watch = Some(
        data.episodes
            .iter()
            .filter(|f| f.episode.len() == 3)
            .take(4)
            .map(|f| f.episode.clone())
            .collect::<Vec<Episode>>(),
    );
    cases.push(watch);
    let mut top = sig(Correction::Holm, 5);
    top.test_top = Some(6);
    cases.push(top);
    for s in &cases {
        let whole = test_episodes(&stream, &cfg, &data, s).unwrap();
        assert!(!whole.tests.is_empty(), "{}: no tests", s.correction);
        for ranges in partitions(s.n_surrogates as u64) {
            let split = split_run(&stream, &cfg, &data, s, &ranges).unwrap();
            assert_eq!(split, whole, "{} split as {ranges:?}", s.correction);
            assert_eq!(bits(&split), bits(&whole), "{} bits", s.correction);
        }
    }
}

#[test]
fn another_seed_changes_the_result_so_the_equality_can_fail() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    let whole = test_episodes(&stream, &cfg, &data, &sig(Correction::MaxT, 7)).unwrap();
    let other = split_run(
        &stream,
        &cfg,
        &data,
        &sig(Correction::MaxT, 8),
        &[0..5, 5..11],
    )
    .unwrap();
    assert_ne!(bits(&other), bits(&whole));
}

/// The error message of a split run that must fail.
fn refused(r: Result<SignificanceResult, SignificanceError>) -> String {
    match r {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn incomplete_overlapping_foreign_or_corrupt_parts_are_refused() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    let s = sig(Correction::MaxT, 7);
    let t = cpu_tester(&stream, &cfg);
    let plan = t.plan(&data, &s).unwrap();
    let a = t.first_pass(&plan, 0..5).unwrap();
    let b = t.first_pass(&plan, 5..11).unwrap();
    let overlap = t.first_pass(&plan, 4..11).unwrap();
    let e = t.union(&plan, std::slice::from_ref(&a)).unwrap_err();
    assert!(e.to_string().contains("end at surrogate 5"), "{e}");
    let e = t.union(&plan, &[a.clone(), overlap]).unwrap_err();
    assert!(e.to_string().contains("exactly once"), "{e}");
    let e = t.first_pass(&plan, 3..12).unwrap_err();
    assert!(e.to_string().contains("outside the plan's 0..11"), "{e}");
    // A part of another test (another seed) is refused, not mixed in.
    let other_plan = t.plan(&data, &sig(Correction::MaxT, 8)).unwrap();
    let foreign = t.first_pass(&other_plan, 5..11).unwrap();
    let e = t.union(&plan, &[a.clone(), foreign]).unwrap_err();
    assert!(e.to_string().contains("another"), "{e}");
    // max-t cannot finish without its second pass.
    let e = finish(&plan, &[a.clone(), b.clone()], None).unwrap_err();
    assert!(e.to_string().contains("second pass"), "{e}");
    // A plan for another recording.
    let mut shorter = DenseParams::neuropixels(6);
    shorter.units = 20;
    shorter.duration_s = 10.0;
    shorter.chains = Vec::new();
    shorter.sync_pairs = Vec::new();
    let elsewhere = generate_dense(&shorter).unwrap().0;
    let t2 = cpu_tester(&elsewhere, &cfg);
    let e = t2.first_pass(&plan, 0..5).unwrap_err();
    assert!(e.to_string().contains("another recording"), "{e}");
    // Corrupt JSON: named errors, never a panic.
    let good = a.to_json(&cfg).unwrap();
    for bad in [
        String::new(),
        "{}".to_owned(),
        good.replace("\"version\":1", "\"version\":9"),
        good[..good.len() / 2].to_owned(),
    ] {
        let e = FirstPart::from_json(&bad, &stream, &cfg).unwrap_err();
        assert!(e.to_string().contains("part"), "{e}");
    }
    let plan_json = plan.to_json(&cfg).unwrap();
    let e = Plan::from_json(
        &plan_json.replace("\"n_surrogates\":11", "\"n_surrogates\":0"),
        &stream,
        &cfg,
    )
    .unwrap_err();
    assert!(e.to_string().contains("at least 1"), "{e}");
    // An episode naming a unit the recording does not have.
    let wire: serde_json::Value = serde_json::from_str(&plan_json).unwrap();
    let mut bad = wire.clone();
    bad["tested"][0][0][0][0] = serde_json::json!(999);
    let e = Plan::from_json(&bad.to_string(), &stream, &cfg).unwrap_err();
    assert!(e.to_string().contains("names unit 999"), "{e}");
    let mut bad = wire;
    bad["tested"][0][0][1] = serde_json::json!([]);
    let e = Plan::from_json(&bad.to_string(), &stream, &cfg).unwrap_err();
    assert!(e.to_string().contains("gaps"), "{e}");
    assert!(!refused(finish(&plan, &[b], None)).is_empty());
}

#[test]
fn batches_cover_the_surrogates_once() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    let t = cpu_tester(&stream, &cfg);
    let plan = t.plan(&data, &sig(Correction::MaxT, 1)).unwrap();
    assert_eq!(plan.batches(4), vec![0..4, 4..8, 8..11]);
    assert_eq!(plan.batches(0).len(), 11);
    assert_eq!(plan.batches(100), vec![0..11]);
    assert_eq!(plan.passes(), 2);
    // A sample-split test has no phases: its plan is refused, saying what to leave out, and
    // the whole test runs in one call, the same twice.
    let split = SignificanceConfig {
        sample_split: Some(0.5),
        ..sig(Correction::MaxT, 1)
    };
    let why = t.plan(&data, &split).unwrap_err().to_string();
    assert!(why.contains("leave out `surrogate_batch`"), "{why}");
    let once = t.run(&data, &split).unwrap();
    assert!(once.sample_split.is_some());
    assert_eq!(bits(&once), bits(&t.run(&data, &split).unwrap()));
}

/// A tester with a cancel flag gives the unsplit result while the flag is clear, and once it
/// is set stops every procedure's pass with `Cancelled` (Ctrl-C in Python sets it; the
/// Python test `test_ctrl_c_stops_the_significance_test` checks the work stops).
#[test]
fn a_cancelled_tester_stops_before_the_next_surrogate() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use synfire::device::DeviceChoice;
    use synfire::episode::GpuSettings;

    let stream = recording();
    let config = config();
    let data = mine(&stream, &config).unwrap();
    for correction in [
        Correction::MaxT,
        Correction::Spectrum,
        Correction::Bonferroni,
    ] {
        let sig = sig(correction, 7);
        let flag = Arc::new(AtomicBool::new(false));
        let tester = Tester::new(&stream, &config, DeviceChoice::Cpu, &GpuSettings::default())
            .unwrap()
            .cancel_on(flag.clone());
        let plan = tester.plan(&data, &sig).unwrap();
        // Clear: the same as the unsplit test.
        let whole = tester.run(&data, &sig).unwrap();
        assert_eq!(
            bits(&whole),
            bits(&test_episodes(&stream, &config, &data, &sig).unwrap())
        );
        // Set: nothing counted, a named error.
        flag.store(true, Ordering::SeqCst);
        match tester.first_pass(&plan, 0..plan.n_surrogates() as u64) {
            Err(SignificanceError::Cancelled) => {}
            other => panic!("{correction:?}: {other:?}"),
        }
        assert_eq!(
            SignificanceError::Cancelled.to_string(),
            "the significance test was cancelled"
        );
    }
}

/// With `significant_only` every procedure returns exactly the significant tests of the full
/// run (bit for bit, split any way), still reports how many were tested, and `spectrum` counts
/// far fewer candidates: its second pass counts only the significant episodes.
#[test]
fn significant_only_returns_the_full_runs_significant_tests_bit_for_bit() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    for correction in [Correction::Spectrum, Correction::MaxT, Correction::None] {
        let mut full = sig(correction, 7);
        full.n_surrogates = 39;
        if correction == Correction::Spectrum {
            // Raw counts of a slow chain: few signatures beat every surrogate.
            full.alpha = 0.5;
        }
        let whole = test_episodes(&stream, &cfg, &data, &full).unwrap();
        let significant = whole.tests.iter().filter(|t| t.stats.significant).count();
        assert!(
            significant > 0 && significant < whole.tests.len(),
            "{correction}: {significant} of {} significant, the test would be vacuous",
            whole.tests.len()
        );
        let mut only = full.clone();
        only.significant_only = true;
        let mut want = whole.clone();
        want.tests.retain(|t| t.stats.significant);
        let whole_range: Vec<Range<u64>> = std::iter::once(0..39).collect();
        for ranges in [whole_range, vec![0..1, 1..20, 20..39]] {
            let mut got = split_run(&stream, &cfg, &data, &only, &ranges).unwrap();
            assert_eq!(got.tested, whole.tested, "{correction}");
            assert_eq!(bits(&got), bits(&want), "{correction} split as {ranges:?}");
            if correction == Correction::Spectrum {
                assert!(
                    got.candidates_counted < whole.candidates_counted,
                    "{} against {}",
                    got.candidates_counted,
                    whole.candidates_counted
                );
            }
            got.candidates_counted = want.candidates_counted;
            assert_eq!(got, want, "{correction} split as {ranges:?}");
        }
    }
}

/// A two-pass `spectrum` plan refuses to finish without its second pass, and a one-pass plan
/// has no union.
#[test]
fn passes_are_checked_for_spectrum() {
    let stream = recording();
    let cfg = config();
    let data = mine(&stream, &cfg).unwrap();
    let t = cpu_tester(&stream, &cfg);
    let one = t.plan(&data, &sig(Correction::Spectrum, 7)).unwrap();
    assert_eq!(one.passes(), 1);
    let a = t.first_pass(&one, 0..11).unwrap();
    let e = t.union(&one, std::slice::from_ref(&a)).unwrap_err();
    assert!(e.to_string().contains("one pass"), "{e}");
    let mut s = sig(Correction::Spectrum, 7);
    s.significant_only = true;
    let two = t.plan(&data, &s).unwrap();
    assert_eq!(two.passes(), 2);
    let b = t.first_pass(&two, 0..11).unwrap();
    let e = finish(&two, std::slice::from_ref(&b), None).unwrap_err();
    assert!(e.to_string().contains("second pass"), "{e}");
    // A first-pass part of the one-pass plan does not fit the two-pass plan.
    let e = t.union(&two, std::slice::from_ref(&a)).unwrap_err();
    assert!(e.to_string().contains("another"), "{e}");
}
