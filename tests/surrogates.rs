//! Surrogates keep what they claim (spike counts per unit, the span, dead times, ISIs, trials),
//! are a pure function of (seed, surrogate), and destroy what they should (fine timing).

use std::path::Path;

use proptest::prelude::*;
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::significance::{SurrogateMethod, Surrogates, Trials};

fn stream_of(trains: &[Vec<f64>]) -> EventStream {
    let alphabet = Alphabet::from_labels((0..trains.len()).map(|i| format!("u{i}"))).unwrap();
    let mut times = Vec::new();
    let mut types = Vec::new();
    for (u, t) in trains.iter().enumerate() {
        times.extend(t);
        types.extend(std::iter::repeat_n(EventType(u as u32), t.len()));
    }
    EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap()
}

fn trains_of(stream: &EventStream) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::new(); stream.alphabet().len()];
    for (t, ty) in stream.iter() {
        out[ty.index()].push(t);
    }
    out
}

/// A renewal train with a dead time: gaps `dead + Exp(rate)`, seeded (xorshift).
fn refractory_train(seed: u64, rate_hz: f64, dead_s: f64, span_s: f64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut t = 0.0;
    let mut out = Vec::new();
    loop {
        t += dead_s - (1.0 - next()).ln() / rate_hz;
        if t >= span_s {
            return out;
        }
        out.push(t);
    }
}

const METHODS: [&str; 6] = [
    "dither:0.015",
    "dither-dead-time:0.015:0.002",
    "shift:0.5",
    "isi-dither:0.015:0.002",
    "joint-isi-dither:0.015:0.002",
    "trial-shift:0.2",
];

fn trials() -> Trials {
    Trials::new(
        (0..10)
            .map(|k| (k as f64 * 2.0, k as f64 * 2.0 + 1.5))
            .collect(),
    )
    .unwrap()
}

fn train_strategy() -> impl Strategy<Value = Vec<Vec<f64>>> {
    prop::collection::vec(
        prop::collection::vec(0.0f64..20.0, 0..60).prop_map(|mut t| {
            t.sort_by(f64::total_cmp);
            t
        }),
        2..5,
    )
    .prop_filter("non-empty", |u| u.iter().any(|t| !t.is_empty()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every method keeps each unit's spike count and stays inside the recording's span; the
    /// dead-time methods keep min(d, smallest ISI) between a unit's spikes; `shift` keeps the
    /// circular ISIs; a surrogate is a pure function of (seed, surrogate number).
    #[test]
    fn surrogates_keep_counts_span_and_their_own_statistics(
        trains in train_strategy(),
        method_index in 0usize..METHODS.len(),
        seed in any::<u64>(),
        s in 0u64..1000,
    ) {
        let stream = stream_of(&trains);
        let method: SurrogateMethod = METHODS[method_index].parse().unwrap();
        let sur = Surrogates::new(&stream, method.clone(), seed, Some(trials())).unwrap();
        let out = sur.generate(s).unwrap();
        let again = sur.generate(s).unwrap();
        prop_assert_eq!(&out, &again);
        let (t0, t1) = (stream.start(), stream.end());
        let before = trains_of(&stream);
        let after = trains_of(&out);
        // Some units only: their trains exactly, the others empty.
        let keep: Vec<bool> = (0..trains.len()).map(|u| (seed >> (u % 64)) & 1 == 1).collect();
        let some = match sur.generate_units(s, &keep) {
            Ok(x) => trains_of(&x),
            Err(e) => {
                // Refused only when no kept unit has a spike.
                prop_assert!(trains.iter().zip(&keep).all(|(t, &k)| !k || t.is_empty()), "{}", e);
                vec![Vec::new(); trains.len()]
            }
        };
        for (u, train) in after.iter().enumerate() {
            let want: &[f64] = if keep[u] { train } else { &[] };
            prop_assert_eq!(some.get(u).map_or(&[][..], Vec::as_slice), want, "unit {}", u);
        }
        for (u, (a, b)) in before.iter().zip(&after).enumerate() {
            prop_assert_eq!(a.len(), b.len(), "unit {} count", u);
            // Trial shifting keeps spikes in their trials instead (checked below).
            if !matches!(method, SurrogateMethod::TrialShift { .. }) {
                for &t in b {
                    prop_assert!(t >= t0 && t <= t1, "unit {} spike {} outside [{}, {}]", u, t, t0, t1);
                }
            }
            let min_isi = a.windows(2).map(|w| w[1] - w[0]).fold(f64::INFINITY, f64::min);
            if let Some(d) = method.dead_time_s() {
                let d = d.min(min_isi);
                for w in b.windows(2) {
                    prop_assert!(w[1] - w[0] >= d - 1e-12, "unit {}: ISI {} below dead time {}", u, w[1] - w[0], d);
                }
            }
            match method {
                SurrogateMethod::Shift { delta_s } if !a.is_empty() => {
                    // The circular gaps (the last one wraps around the span) are the same
                    // multiset; every spike moved by the same offset modulo the span.
                    let circular = |x: &[f64]| {
                        let mut g: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
                        g.push(t1 - t0 - (x[x.len() - 1] - x[0]));
                        g.sort_by(f64::total_cmp);
                        g
                    };
                    for (g, h) in circular(a).iter().zip(circular(b)) {
                        prop_assert!((g - h).abs() < 1e-9, "unit {} circular gaps {:?} vs {:?}", u, circular(a), circular(b));
                    }
                    let _ = delta_s;
                }
                SurrogateMethod::IsiDither { .. } | SurrogateMethod::JointIsiDither { .. } if a.len() >= 3 => {
                    prop_assert_eq!(a[0], b[0], "first spike is the anchor");
                    prop_assert_eq!(a[a.len() - 1], b[b.len() - 1], "last spike stays");
                }
                SurrogateMethod::TrialShift { .. } => {
                    for &(x, y) in trials().as_slice() {
                        let inside = |v: &[f64]| v.iter().filter(|&&t| t >= x && t < y).count();
                        prop_assert_eq!(inside(a), inside(b), "unit {} trial [{}, {})", u, x, y);
                    }
                    // Spikes outside every trial stay where they are.
                    let outside = |v: &[f64]| -> Vec<f64> {
                        v.iter().copied().filter(|&t| !trials().as_slice().iter().any(|&(x, y)| t >= x && t < y)).collect()
                    };
                    prop_assert_eq!(outside(a), outside(b));
                }
                _ => {}
            }
            // Order-keeping dither methods: spike i of the surrogate is spike i moved by ≤ Δ.
            if matches!(method, SurrogateMethod::DitherDeadTime { .. }
                | SurrogateMethod::IsiDither { .. } | SurrogateMethod::JointIsiDither { .. }) {
                for (x, y) in a.iter().zip(b) {
                    prop_assert!((x - y).abs() <= method.delta_s() + 1e-12);
                }
            }
        }
    }
}

/// A seed gives the same surrogates whatever the thread count, and different surrogate
/// numbers differ.
#[test]
fn surrogates_do_not_depend_on_threads_and_differ_between_numbers() {
    let trains: Vec<Vec<f64>> = (0..8)
        .map(|u| refractory_train(u, 20.0, 0.003, 30.0))
        .collect();
    let stream = stream_of(&trains);
    for spec in METHODS {
        let method: SurrogateMethod = spec.parse().unwrap();
        let sur = Surrogates::new(&stream, method, 42, Some(trials())).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let a = one.install(|| sur.generate(3).unwrap());
        let b = sur.generate(3).unwrap();
        assert_eq!(a, b, "{spec}");
        assert_ne!(sur.generate(4).unwrap(), b, "{spec}");
        let other = Surrogates::new(&stream, spec.parse().unwrap(), 43, Some(trials())).unwrap();
        assert_ne!(other.generate(3).unwrap(), b, "{spec}: the seed matters");
    }
}

/// Stella et al. (2022): uniform dithering fills a refractory train's dead time; the ISI
/// methods and dead-time dithering keep it, and the ISI methods keep the ISI distribution
/// (two-sample Kolmogorov–Smirnov distance) where uniform dithering does not.
#[test]
fn isi_methods_keep_the_isi_distribution_of_refractory_trains_and_dither_does_not() {
    let trains: Vec<Vec<f64>> = (0..4)
        .map(|u| refractory_train(u + 10, 40.0, 0.004, 200.0))
        .collect();
    let stream = stream_of(&trains);
    let isis = |x: &[Vec<f64>]| -> Vec<f64> {
        let mut v: Vec<f64> = x
            .iter()
            .flat_map(|t| t.windows(2).map(|w| w[1] - w[0]))
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let ks = |a: &[f64], b: &[f64]| -> f64 {
        let (mut i, mut j, mut d) = (0usize, 0usize, 0.0f64);
        while i < a.len() && j < b.len() {
            if a[i] <= b[j] {
                i += 1;
            } else {
                j += 1;
            }
            d = d.max((i as f64 / a.len() as f64 - j as f64 / b.len() as f64).abs());
        }
        d
    };
    let data = isis(&trains);
    let short = |v: &[f64]| v.iter().filter(|&&x| x < 0.004 - 1e-12).count();
    assert_eq!(short(&data), 0);
    let mut report = Vec::new();
    for spec in [
        "dither:0.015",
        "dither-dead-time:0.015:0.004",
        "isi-dither:0.015:0.004",
        "joint-isi-dither:0.015:0.004",
    ] {
        let sur = Surrogates::new(&stream, spec.parse().unwrap(), 1, None).unwrap();
        let s = isis(&trains_of(&sur.generate(0).unwrap()));
        report.push((spec, short(&s), ks(&data, &s)));
    }
    // Uniform dithering: many ISIs inside the dead time, a large KS distance.
    assert!(report[0].1 > 500 && report[0].2 > 0.05, "{report:?}");
    for r in &report[1..] {
        assert_eq!(r.1, 0, "{report:?}");
    }
    // The ISI methods keep the distribution up to the density's smoothing (σ = 2 ms, as
    // Elephant's, blurs its sharp edge at the dead time): at most half of uniform dithering's
    // KS distance, and below 0.05.
    for r in &report[2..] {
        assert!(r.2 < 0.05 && r.2 < report[0].2 / 2.0, "{report:?}");
    }
}

/// On the real IBL raster: every method keeps each unit's count and the span.
#[test]
fn surrogates_of_the_real_raster_keep_counts_and_span() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv");
    let stream = synfire::read_spikes(&path, Ordering::SortIfNeeded).unwrap();
    let counts = stream.counts_per_type();
    for spec in &METHODS[..5] {
        let sur = Surrogates::new(&stream, spec.parse().unwrap(), 7, None).unwrap();
        let out = sur.generate(0).unwrap();
        assert_eq!(out.counts_per_type(), counts, "{spec}");
        assert!(
            out.start() >= stream.start() && out.end() <= stream.end(),
            "{spec}"
        );
        assert_ne!(out.times(), stream.times(), "{spec} moved spikes");
    }
}
