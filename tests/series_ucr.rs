//! The UCR/UEA collection readers on the real fixtures (`fixtures/ucr/`, see
//! `fixtures/PROVENANCE.md`): counts of series, lengths, channels and labels.

use std::collections::BTreeMap;
use std::path::Path;

use synfire::series::{Dataset, SeriesError, read_dataset};

fn read(rel: &str) -> Dataset {
    read_dataset(&Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

fn label_counts(d: &Dataset) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for l in d.labels.as_ref().expect("labelled") {
        *m.entry(l.clone()).or_default() += 1;
    }
    m
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|&(l, c)| (l.to_owned(), c)).collect()
}

#[test]
fn coffee_ucr2015_text() {
    let d = read("fixtures/ucr/Coffee/Coffee_TRAIN.txt");
    assert_eq!(d.len(), 28);
    assert_eq!(d.equal_length("Coffee").unwrap(), 286);
    assert!(d.series.iter().all(|s| s.dims == 1));
    assert_eq!(label_counts(&d), counts(&[("0", 14), ("1", 14)]));
    // First value of the first line: -5.1841899e-01.
    assert_eq!(d.series[0].values[0], -0.51841899);
}

#[test]
fn ecg200_ucr2018_tsv() {
    let d = read("fixtures/ucr/ECG200/ECG200_TRAIN.tsv");
    assert_eq!(d.len(), 100);
    assert_eq!(d.equal_length("ECG200").unwrap(), 96);
    assert_eq!(label_counts(&d), counts(&[("-1", 31), ("1", 69)]));
    assert_eq!(d.labels.as_ref().unwrap()[0], "-1");
    assert_eq!(d.series[0].values[..2], [0.50205548, 0.54216265]);
    assert!(
        d.series
            .iter()
            .flat_map(|s| &s.values)
            .all(|v| v.is_finite())
    );
}

#[test]
fn gunpoint_and_italy_power_demand_ts() {
    let d = read("fixtures/ucr/GunPoint/GunPoint_TRAIN.ts");
    assert_eq!(d.len(), 50);
    assert_eq!(d.equal_length("GunPoint").unwrap(), 150);
    assert_eq!(label_counts(&d), counts(&[("1", 24), ("2", 26)]));
    assert_eq!(d.series[0].values[0], -0.6478854);
    let d = read("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    assert_eq!(d.len(), 67);
    assert_eq!(d.equal_length("ItalyPowerDemand").unwrap(), 24);
    assert_eq!(label_counts(&d), counts(&[("1", 34), ("2", 33)]));
    assert_eq!(d.series[1].values[23], -0.38061813);
}

#[test]
fn missing_files_and_ragged_collections_are_named() {
    let e = read_dataset(Path::new("no/such/file.ts")).unwrap_err();
    assert!(matches!(e, SeriesError::Io { .. }));
    assert!(e.to_string().contains("no/such/file.ts"), "{e}");
    let mut d = read("fixtures/ucr/ItalyPowerDemand/ItalyPowerDemand_TRAIN.ts");
    d.series[5].values.pop();
    let e = d.equal_length("ItalyPowerDemand").unwrap_err().to_string();
    assert!(e.contains("series 5 has 23 samples"), "{e}");
}
