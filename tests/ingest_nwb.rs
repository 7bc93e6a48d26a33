//! NWB units reader/writer: the real fixtures, round trips, and every malformed-input case.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hdf5::H5Type;
use hdf5::types::VarLenUnicode;
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::ingest::nwb::{NwbUnits, read_units, write_units};
use synfire::ingest::{IngestError, read_spikes};
use tempfile::TempDir;

const FIXTURES: [&str; 2] = ["A2929-200711", "A8604-211122"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/spikes")
        .join(name)
}

fn fixture_nwb(name: &str) -> PathBuf {
    fixture(name).join(format!("{name}.nwb"))
}

/// `unit_id -> n_spikes` from a fixture's units.csv (header `unit_id,...,n_spikes`).
fn units_csv(name: &str) -> HashMap<i64, u64> {
    let text = std::fs::read_to_string(fixture(name).join("units.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[0], "unit_id");
    assert_eq!(*header.last().unwrap(), "n_spikes");
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f.last().unwrap().parse().unwrap())
        })
        .collect()
}

/// The raw units table read straight from the file with the hdf5 crate.
struct RawTable {
    ids: Vec<i64>,
    index: Vec<u64>,
    times: Vec<f64>,
}

fn raw_table(path: &Path) -> RawTable {
    let file = hdf5::File::open(path).unwrap();
    RawTable {
        ids: file.dataset("units/id").unwrap().read_raw::<i64>().unwrap(),
        index: file
            .dataset("units/spike_times_index")
            .unwrap()
            .read_raw::<u64>()
            .unwrap(),
        times: file
            .dataset("units/spike_times")
            .unwrap()
            .read_raw::<f64>()
            .unwrap(),
    }
}

/// Times of each event type, in stream order. Shape `[alphabet.len()][..]`.
fn times_by_type(stream: &EventStream) -> Vec<Vec<f64>> {
    let mut per = vec![Vec::new(); stream.alphabet().len()];
    for (t, ty) in stream.iter() {
        per[ty.index()].push(t);
    }
    per
}

fn sorted_bits(times: &[f64]) -> Vec<u64> {
    let mut bits: Vec<u64> = times.iter().map(|t| t.to_bits()).collect();
    bits.sort_unstable();
    bits
}

fn assert_sorted(stream: &EventStream) {
    assert!(
        stream.times().windows(2).all(|w| w[0] <= w[1]),
        "stream is not time-ordered"
    );
}

#[test]
fn fixtures_load_and_match_the_file_exactly() {
    for name in FIXTURES {
        let path = fixture_nwb(name);
        let stream = read_spikes(&path, Ordering::RequireSorted).unwrap();
        let units = read_units(&path, Ordering::RequireSorted).unwrap();
        assert_eq!(
            units.stream, stream,
            "{name}: read_spikes and read_units disagree"
        );
        let raw = raw_table(&path);

        // Per-unit counts = differences of the index read independently.
        let mut from_index = Vec::new();
        let mut prev = 0;
        for &end in &raw.index {
            from_index.push(end - prev);
            prev = end;
        }
        assert_eq!(units.spikes_per_unit, from_index, "{name}");
        assert_eq!(stream.counts_per_type(), from_index, "{name}");
        assert_eq!(units.unit_ids, raw.ids, "{name}");
        let labels: Vec<String> = raw.ids.iter().map(i64::to_string).collect();
        assert_eq!(stream.alphabet().labels(), &labels[..], "{name}");

        // ... and equal units.csv's n_spikes, unit by unit.
        let expected = units_csv(name);
        assert_eq!(expected.len(), units.unit_ids.len(), "{name}: unit count");
        for (id, n) in units.unit_ids.iter().zip(&units.spikes_per_unit) {
            assert_eq!(expected.get(id), Some(n), "{name}: unit {id}");
        }

        // Merged stream: sorted, complete, each unit's times exactly the file's slice.
        assert_sorted(&stream);
        assert_eq!(stream.len(), raw.times.len(), "{name}");
        let per = times_by_type(&stream);
        let mut start = 0usize;
        for (u, &end) in raw.index.iter().enumerate() {
            let end = usize::try_from(end).unwrap();
            let slice = &raw.times[start..end];
            assert_eq!(
                sorted_bits(&per[u]),
                sorted_bits(slice),
                "{name}: unit {}",
                raw.ids[u]
            );
            start = end;
        }
    }
}

#[test]
fn fixture_statistics_match_provenance() {
    let a = read_units(&fixture_nwb("A2929-200711"), Ordering::RequireSorted).unwrap();
    assert_eq!(a.stream.len(), 98_794);
    assert_eq!(a.unit_ids, (0..15).collect::<Vec<i64>>());
    assert!(a.stream.start() >= 0.0 && a.stream.end() <= 1200.0);
    let b = read_units(&fixture_nwb("A8604-211122"), Ordering::RequireSorted).unwrap();
    assert_eq!(b.unit_ids, vec![6, 191, 206]);
    assert_eq!(b.spikes_per_unit, vec![11_020, 4_690, 5_644]);
    assert_eq!(b.stream.len(), 21_354);
}

fn assert_round_trip(stream: &EventStream, dir: &TempDir, file: &str) -> NwbUnits {
    let path = dir.path().join(file);
    write_units(&path, stream).unwrap();
    let back = read_units(&path, Ordering::RequireSorted).unwrap();
    let bits = |s: &EventStream| s.times().iter().map(|t| t.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&back.stream),
        bits(stream),
        "times differ after the round trip"
    );
    assert_eq!(back.stream.counts_per_type(), stream.counts_per_type());
    assert_eq!(
        back.spikes_per_unit,
        stream.counts_per_type(),
        "spikes_per_unit differ after the round trip"
    );
    assert_eq!(back.stream.alphabet().len(), stream.alphabet().len());
    back
}

#[test]
fn fixtures_round_trip_through_write_units() {
    let dir = TempDir::new().unwrap();
    for name in FIXTURES {
        let original = read_units(&fixture_nwb(name), Ordering::RequireSorted).unwrap();
        let back = assert_round_trip(&original.stream, &dir, &format!("{name}.nwb"));
        assert_eq!(back.unit_ids, original.unit_ids);
        assert_eq!(back.stream, original.stream);
    }
}

#[test]
fn round_trip_with_ties_empty_units_and_extreme_times() {
    let dir = TempDir::new().unwrap();
    // Integer labels (kept as ids), a unit with no spikes ("9"), ties across units listed in
    // unit order (the order the merge restores), and awkward f64 values.
    let alphabet = Alphabet::from_labels(["3", "-1", "9", "7"]).unwrap();
    let times = vec![
        0.0,
        5e-324,
        1e-300,
        0.1 + 0.2,
        0.1 + 0.2,
        0.1 + 0.2,
        1.0,
        1.0,
        123_456.789_012_345_67,
        1e9,
    ];
    let types = [0, 1, 3, 0, 1, 3, 1, 3, 0, 0].map(EventType).to_vec();
    let stream = EventStream::new(times, types, alphabet, Ordering::RequireSorted).unwrap();
    let back = assert_round_trip(&stream, &dir, "ties.nwb");
    assert_eq!(back.unit_ids, vec![3, -1, 9, 7]);
    assert_eq!(back.spikes_per_unit, vec![4, 3, 0, 3]);
    assert_eq!(
        back.stream, stream,
        "ties in unit order must come back identical"
    );

    // Ties in the opposite unit order: times still bit-exact, each tie re-ordered by unit.
    let alphabet = Alphabet::from_labels(["a", "b,c", "d"]).unwrap();
    let types = [2, 1, 0, 2, 0].map(EventType).to_vec();
    let stream = EventStream::new(
        vec![0.5, 0.5, 0.5, 2.0, 2.0],
        types,
        alphabet,
        Ordering::RequireSorted,
    )
    .unwrap();
    let back = assert_round_trip(&stream, &dir, "labels.nwb");
    assert_eq!(
        back.unit_ids,
        vec![0, 1, 2],
        "non-integer labels become ids 0..k"
    );
    assert_eq!(back.stream.types(), &[0, 1, 2, 0, 2].map(EventType));
}

#[test]
fn written_file_looks_like_nwb() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("meta.nwb");
    let alphabet = Alphabet::from_labels(["1", "2"]).unwrap();
    let stream = EventStream::new(
        vec![0.25, 0.5],
        vec![EventType(1), EventType(0)],
        alphabet,
        Ordering::RequireSorted,
    )
    .unwrap();
    write_units(&path, &stream).unwrap();
    let file = hdf5::File::open(&path).unwrap();
    let attr = |loc: &hdf5::Location, name: &str| -> String {
        loc.attr(name)
            .unwrap()
            .read_scalar::<VarLenUnicode>()
            .unwrap()
            .as_str()
            .to_owned()
    };
    assert_eq!(attr(&file, "nwb_version"), "2.4.0");
    assert_eq!(attr(&file, "neurodata_type"), "NWBFile");
    assert_eq!(attr(&file, "namespace"), "core");
    assert_eq!(attr(&file, "object_id").len(), 36);
    for ds in [
        "identifier",
        "session_description",
        "session_start_time",
        "timestamps_reference_time",
    ] {
        let v = file
            .dataset(ds)
            .unwrap()
            .read_scalar::<VarLenUnicode>()
            .unwrap();
        assert!(!v.as_str().is_empty(), "{ds}");
    }
    let created = file
        .dataset("file_create_date")
        .unwrap()
        .read_raw::<VarLenUnicode>()
        .unwrap();
    assert_eq!(created.len(), 1);
    assert!(
        created[0].as_str().contains('T'),
        "ISO 8601: {}",
        created[0].as_str()
    );
    let units = file.group("units").unwrap();
    assert_eq!(attr(&units, "neurodata_type"), "Units");
    assert_eq!(attr(&units, "namespace"), "core");
    assert!(!attr(&units, "description").is_empty());
    let colnames = units
        .attr("colnames")
        .unwrap()
        .read_raw::<VarLenUnicode>()
        .unwrap();
    assert_eq!(
        colnames.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        ["spike_times"]
    );
    let ids = units.dataset("id").unwrap();
    assert!(ids.dtype().unwrap().is::<i64>());
    assert_eq!(ids.read_raw::<i64>().unwrap(), vec![1, 2]);
    let times = units.dataset("spike_times").unwrap();
    assert!(times.dtype().unwrap().is::<f64>());
    assert_eq!(times.read_raw::<f64>().unwrap(), vec![0.5, 0.25]);
    let index = units.dataset("spike_times_index").unwrap();
    assert!(index.dtype().unwrap().is::<u64>());
    assert_eq!(index.read_raw::<u64>().unwrap(), vec![1, 2]);
    assert_eq!(attr(&index, "neurodata_type"), "VectorIndex");
    let target = index
        .attr("target")
        .unwrap()
        .read_scalar::<hdf5::ObjectReference1>()
        .unwrap();
    match file.dereference(&target).unwrap() {
        hdf5::ReferencedObject::Dataset(d) => assert_eq!(d.name(), "/units/spike_times"),
        _ => panic!("`target` does not reference a dataset"),
    }
}

#[test]
fn large_table_merges_in_order() {
    // 200 units x 10_000 spikes with many exact ties; checks the k-way merge at scale.
    let dir = TempDir::new().unwrap();
    let k = 200u32;
    let per_unit = 10_000u32;
    let mut times = Vec::new();
    let mut types = Vec::new();
    for u in 0..k {
        for j in 0..per_unit {
            // Quantised to a 30 kHz clock so units share ticks.
            times.push(f64::from((j * 7 + u * 13) % 3_000_000) / 30_000.0);
            types.push(EventType(u));
        }
    }
    let alphabet = Alphabet::from_labels((0..k).map(|u| u.to_string())).unwrap();
    let stream = EventStream::new(times, types, alphabet, Ordering::SortIfNeeded).unwrap();
    let start = std::time::Instant::now();
    let back = assert_round_trip(&stream, &dir, "large.nwb");
    eprintln!(
        "write+read of {} spikes: {:?}",
        stream.len(),
        start.elapsed()
    );
    assert_sorted(&back.stream);
    // Ties: lower unit index first.
    for w in back.stream.iter().collect::<Vec<_>>().windows(2) {
        if w[0].0 == w[1].0 {
            assert!(w[0].1 <= w[1].1, "tie at {} s out of unit order", w[0].0);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Malformed inputs, written with the hdf5 crate.

/// Creates `<dir>/<name>.nwb` with a `/units` group filled by `build`.
fn broken(dir: &TempDir, name: &str, build: impl FnOnce(&hdf5::Group)) -> PathBuf {
    let path = dir.path().join(format!("{name}.nwb"));
    let file = hdf5::File::create(&path).unwrap();
    let units = file.create_group("units").unwrap();
    build(&units);
    file.close().unwrap();
    path
}

fn put<T: H5Type>(g: &hdf5::Group, name: &str, data: &[T]) {
    g.new_dataset_builder()
        .with_data(data)
        .create(name)
        .unwrap();
}

/// A valid table: unit 10 has spikes [0.1, 0.2], unit 20 has [0.15, 0.3].
fn valid(g: &hdf5::Group) {
    put(g, "id", &[10i64, 20]);
    put(g, "spike_times_index", &[2u64, 4]);
    put(g, "spike_times", &[0.1f64, 0.2, 0.15, 0.3]);
}

fn err_of(path: &Path, ordering: Ordering) -> (IngestError, String) {
    let err = read_units(path, ordering).expect_err("a malformed file must be refused");
    let msg = err.to_string();
    (err, msg)
}

/// The error message names the file and every string in `needles`.
fn assert_names(msg: &str, path: &Path, needles: &[&str]) {
    assert!(
        msg.contains(&path.display().to_string()),
        "message does not name the file: {msg}"
    );
    for n in needles {
        assert!(msg.contains(n), "message does not contain {n:?}: {msg}");
    }
}

#[test]
fn the_valid_helper_file_loads() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "valid", valid);
    let u = read_units(&path, Ordering::RequireSorted).unwrap();
    assert_eq!(u.stream.times(), &[0.1, 0.15, 0.2, 0.3]);
    assert_eq!(u.stream.types(), &[0, 1, 0, 1].map(EventType));
    assert_eq!(u.unit_ids, vec![10, 20]);
    assert_eq!(
        u.stream.alphabet().labels(),
        &["10".to_owned(), "20".to_owned()]
    );
}

#[test]
fn missing_index_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "no_index", |g| {
        put(g, "id", &[10i64, 20]);
        put(g, "spike_times", &[0.1f64, 0.2]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::MissingDataset { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times_index`", "missing"]);
}

#[test]
fn missing_ids_times_and_units_group_are_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "no_ids", |g| {
        put(g, "spike_times_index", &[2u64]);
        put(g, "spike_times", &[0.1f64, 0.2]);
    });
    assert_names(
        &err_of(&path, Ordering::RequireSorted).1,
        &path,
        &["`/units/id`"],
    );
    let path = broken(&dir, "no_times", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[2u64]);
    });
    assert_names(
        &err_of(&path, Ordering::RequireSorted).1,
        &path,
        &["`/units/spike_times`"],
    );
    let path = dir.path().join("no_units.nwb");
    hdf5::File::create(&path)
        .unwrap()
        .create_group("acquisition")
        .unwrap();
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::MissingDataset { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units`"]);
}

#[test]
fn index_longer_than_ids_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "long_index", |g| {
        put(g, "id", &[10i64, 20]);
        put(g, "spike_times_index", &[1u64, 2, 3]);
        put(g, "spike_times", &[0.1f64, 0.2, 0.3]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(
        matches!(
            err,
            IngestError::IndexLengthMismatch {
                index_len: 3,
                ids_len: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_names(
        &msg,
        &path,
        &[
            "`/units/spike_times_index`",
            "`/units/id`",
            "3 entries",
            "has 2",
        ],
    );
}

#[test]
fn non_monotonic_index_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "non_monotonic", |g| {
        put(g, "id", &[0i64, 1, 2, 3]);
        put(g, "spike_times_index", &[1u64, 40, 40, 12]);
        put(g, "spike_times", &[0.5f64; 12]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(
        matches!(err, IngestError::NonMonotonicIndex { position: 3, .. }),
        "{err:?}"
    );
    assert_eq!(
        msg,
        format!(
            "{}: dataset `/units/spike_times_index`: entry 3 (12) is smaller than entry 2 (40); \
             the index must be non-decreasing cumulative end offsets",
            path.display()
        )
    );
}

#[test]
fn last_index_not_matching_spike_times_length_is_refused() {
    let dir = TempDir::new().unwrap();
    for (name, times) in [
        ("short_index", vec![0.1f64; 5]),
        ("long_index_end", vec![0.1f64; 3]),
    ] {
        let path = broken(&dir, name, |g| {
            put(g, "id", &[1i64, 2]);
            put(g, "spike_times_index", &[2u64, 4]);
            put(g, "spike_times", &times);
        });
        let (err, msg) = err_of(&path, Ordering::RequireSorted);
        assert!(
            matches!(err, IngestError::IndexEndMismatch { last: 4, .. }),
            "{err:?}"
        );
        assert_names(
            &msg,
            &path,
            &[
                "`/units/spike_times_index`",
                "`/units/spike_times`",
                &format!("has {} elements", times.len()),
            ],
        );
    }
}

#[test]
fn nan_and_infinite_times_are_refused_naming_unit_and_spike() {
    let dir = TempDir::new().unwrap();
    for (name, bad) in [("nan", f64::NAN), ("inf", f64::INFINITY)] {
        let path = broken(&dir, name, |g| {
            put(g, "id", &[10i64, 20]);
            put(g, "spike_times_index", &[2u64, 4]);
            put(g, "spike_times", &[0.1f64, 0.2, 0.3, bad]);
        });
        let (err, msg) = err_of(&path, Ordering::SortIfNeeded);
        assert!(matches!(err, IngestError::BadValue { .. }), "{err:?}");
        assert_names(
            &msg,
            &path,
            &[
                "`/units/spike_times`",
                "unit 20",
                "spike 1",
                "element 3",
                "non-finite",
            ],
        );
    }
}

#[test]
fn negative_time_is_refused_naming_unit_and_spike() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "negative", |g| {
        put(g, "id", &[10i64, 20]);
        put(g, "spike_times_index", &[2u64, 4]);
        put(g, "spike_times", &[-0.5f64, 0.2, 0.3, 0.4]);
    });
    let (err, msg) = err_of(&path, Ordering::SortIfNeeded);
    assert!(matches!(err, IngestError::BadValue { .. }), "{err:?}");
    assert_names(
        &msg,
        &path,
        &[
            "`/units/spike_times`",
            "unit 10",
            "spike 0",
            "negative",
            "-0.5",
        ],
    );
}

#[test]
fn unsorted_unit_is_refused_or_sorted() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "unsorted", |g| {
        put(g, "id", &[5i64, 6]);
        put(g, "spike_times_index", &[2u64, 5]);
        put(g, "spike_times", &[0.1f64, 0.3, 0.5, 0.2, 0.9]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(
        matches!(
            err,
            IngestError::UnsortedUnit {
                unit_id: 6,
                unit_position: 1,
                spike: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert_names(
        &msg,
        &path,
        &["`/units/spike_times`", "unit 6", "spike 1", "--sort"],
    );

    let u = read_units(&path, Ordering::SortIfNeeded).unwrap();
    assert_eq!(u.stream.times(), &[0.1, 0.2, 0.3, 0.5, 0.9]);
    assert_eq!(u.stream.types(), &[0, 1, 0, 1, 1].map(EventType));
    assert_eq!(u.spikes_per_unit, vec![2, 3]);
    // read_spikes passes the ordering through.
    assert!(read_spikes(&path, Ordering::RequireSorted).is_err());
    assert_eq!(
        read_spikes(&path, Ordering::SortIfNeeded).unwrap(),
        u.stream
    );
}

fn index_of_width<T: H5Type + Copy>(dir: &TempDir, name: &str, index: [T; 3]) -> PathBuf {
    broken(dir, name, |g| {
        put(g, "id", &[1i64, 2, 3]);
        put(g, "spike_times_index", &index);
        put(g, "spike_times", &[0.1f64, 0.2, 0.05, 0.3]);
    })
}

#[test]
fn every_integer_index_width_loads() {
    let dir = TempDir::new().unwrap();
    let paths = [
        index_of_width(&dir, "u8", [2u8, 2, 4]),
        index_of_width(&dir, "u16", [2u16, 2, 4]),
        index_of_width(&dir, "u32", [2u32, 2, 4]),
        index_of_width(&dir, "u64", [2u64, 2, 4]),
        index_of_width(&dir, "i8", [2i8, 2, 4]),
        index_of_width(&dir, "i32", [2i32, 2, 4]),
        index_of_width(&dir, "i64", [2i64, 2, 4]),
    ];
    for path in &paths {
        let u = read_units(path, Ordering::RequireSorted)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(u.spikes_per_unit, vec![2, 0, 2], "{}", path.display());
        assert_eq!(u.stream.times(), &[0.05, 0.1, 0.2, 0.3]);
        assert_eq!(u.stream.types(), &[2, 0, 0, 2].map(EventType));
        assert_eq!(
            u.stream.alphabet().labels(),
            &["1", "2", "3"].map(String::from),
            "unit 2 kept"
        );
    }
}

#[test]
fn negative_signed_index_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = index_of_width(&dir, "neg", [2i32, -1, 4]);
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::BadValue { .. }), "{err:?}");
    assert_names(
        &msg,
        &path,
        &["`/units/spike_times_index`", "entry 1", "negative (-1)"],
    );
}

#[test]
fn unsigned_and_narrow_ids_load() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "u16_ids", |g| {
        put(g, "id", &[7u16, 65_535]);
        put(g, "spike_times_index", &[1u8, 2]);
        put(g, "spike_times", &[1.5f64, 0.5]);
    });
    let u = read_units(&path, Ordering::RequireSorted).unwrap();
    assert_eq!(u.unit_ids, vec![7, 65_535]);
    assert_eq!(
        u.stream.alphabet().labels(),
        &["7", "65535"].map(String::from)
    );
    assert_eq!(u.stream.types(), &[1, 0].map(EventType));
}

#[test]
fn id_out_of_int64_range_is_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "huge_id", |g| {
        put(g, "id", &[1u64, u64::MAX]);
        put(g, "spike_times_index", &[1u64, 2]);
        put(g, "spike_times", &[0.5f64, 1.5]);
    });
    let (_, msg) = err_of(&path, Ordering::RequireSorted);
    assert_names(
        &msg,
        &path,
        &["`/units/id`", "entry 1", &u64::MAX.to_string()],
    );
}

#[test]
fn duplicate_ids_are_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "dup", |g| {
        put(g, "id", &[4i64, 5, 4]);
        put(g, "spike_times_index", &[1u64, 2, 3]);
        put(g, "spike_times", &[0.1f64, 0.2, 0.3]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(
        matches!(
            err,
            IngestError::DuplicateUnitId {
                id: 4,
                first: 0,
                second: 2,
                ..
            }
        ),
        "{err:?}"
    );
    assert_names(&msg, &path, &["`/units/id`", "unit id 4"]);
}

#[test]
fn float32_times_are_widened_exactly() {
    let dir = TempDir::new().unwrap();
    let t32 = [0.1f32, 0.2, 16_777_217.0, 1e-40];
    let path = broken(&dir, "f32", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[4u64]);
        put(g, "spike_times", &[t32[3], t32[0], t32[1], t32[2]]);
    });
    let u = read_units(&path, Ordering::RequireSorted).unwrap();
    let expected: Vec<u64> = [t32[3], t32[0], t32[1], t32[2]]
        .iter()
        .map(|&t| f64::from(t).to_bits())
        .collect();
    let got: Vec<u64> = u.stream.times().iter().map(|t| t.to_bits()).collect();
    assert_eq!(got, expected);
}

#[test]
fn string_typed_datasets_are_refused() {
    let dir = TempDir::new().unwrap();
    let s = |x: &str| x.parse::<VarLenUnicode>().unwrap();
    let path = broken(&dir, "str_times", |g| {
        put(g, "id", &[1i64, 2]);
        put(g, "spike_times_index", &[1u64, 2]);
        put(g, "spike_times", &[s("0.1"), s("0.2")]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::BadDtype { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times`", "unicode", "float64"]);

    let path = broken(&dir, "str_index", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[s("1")]);
        put(g, "spike_times", &[0.1f64]);
    });
    let (_, msg) = err_of(&path, Ordering::RequireSorted);
    assert_names(&msg, &path, &["`/units/spike_times_index`", "integer"]);

    let path = broken(&dir, "float_ids", |g| {
        put(g, "id", &[1.0f64]);
        put(g, "spike_times_index", &[1u64]);
        put(g, "spike_times", &[0.1f64]);
    });
    let (_, msg) = err_of(&path, Ordering::RequireSorted);
    assert_names(&msg, &path, &["`/units/id`", "float64", "integer"]);
}

#[test]
fn wrong_shapes_and_kinds_are_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "two_d", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[2u64]);
        let ds = g
            .new_dataset::<f64>()
            .shape((2, 1))
            .create("spike_times")
            .unwrap();
        ds.write_raw(&[0.1f64, 0.2][..]).unwrap();
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::BadShape { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times`", "[2, 1]", "1-D"]);

    let path = broken(&dir, "scalar_ids", |g| {
        g.new_dataset::<i64>().create("id").unwrap();
        put(g, "spike_times_index", &[1u64]);
        put(g, "spike_times", &[0.1f64]);
    });
    assert_names(
        &err_of(&path, Ordering::RequireSorted).1,
        &path,
        &["`/units/id`", "1-D"],
    );

    let path = broken(&dir, "group_times", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[1u64]);
        g.create_group("spike_times").unwrap();
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::Hdf5 { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times`"]);
}

#[test]
fn empty_tables_are_refused() {
    let dir = TempDir::new().unwrap();
    let path = broken(&dir, "no_units", |g| {
        put::<i64>(g, "id", &[]);
        put::<u64>(g, "spike_times_index", &[]);
        put::<f64>(g, "spike_times", &[]);
    });
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::NoEvents { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times`", "no events"]);

    let path = broken(&dir, "silent_units", |g| {
        put(g, "id", &[1i64, 2]);
        put(g, "spike_times_index", &[0u64, 0]);
        put::<f64>(g, "spike_times", &[]);
    });
    let (err, _) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::NoEvents { .. }), "{err:?}");
}

#[test]
fn hostile_huge_shape_is_refused_without_allocating() {
    // A few-KB file declaring 2^61 spike times (chunked, never written): reading must fail
    // cleanly (the buffer would need 2^64 bytes), not panic or abort.
    let dir = TempDir::new().unwrap();
    let huge = 1usize << 61;
    let path = broken(&dir, "huge", |g| {
        put(g, "id", &[1i64]);
        put(g, "spike_times_index", &[huge as u64]);
        g.new_dataset::<f64>()
            .chunk(1024)
            .shape(huge)
            .create("spike_times")
            .unwrap();
    });
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::BadValue { .. }), "{err:?}");
    assert_names(&msg, &path, &["`/units/spike_times`", "cannot allocate"]);
}

#[test]
fn non_hdf5_and_absent_files_are_refused() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("text.nwb");
    std::fs::write(&path, "label,time\nA,0.5\n").unwrap();
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::NotHdf5 { .. }), "{err:?}");
    assert_names(&msg, &path, &["HDF5"]);

    let path = dir.path().join("empty.h5");
    std::fs::write(&path, b"").unwrap();
    assert_names(&err_of(&path, Ordering::RequireSorted).1, &path, &["HDF5"]);

    let path = dir.path().join("absent.nwb");
    let (err, msg) = err_of(&path, Ordering::RequireSorted);
    assert!(matches!(err, IngestError::Io { .. }), "{err:?}");
    assert_names(&msg, &path, &[]);
    let err = read_spikes(&path, Ordering::RequireSorted).unwrap_err();
    assert!(err.to_string().contains("absent.nwb"), "{err}");
}

#[test]
fn truncated_real_file_is_refused_not_panicking() {
    let dir = TempDir::new().unwrap();
    let bytes = std::fs::read(fixture_nwb("A8604-211122")).unwrap();
    for cut in [16, 512, 4096, bytes.len() / 2, bytes.len() - 1] {
        let path = dir.path().join(format!("cut{cut}.nwb"));
        std::fs::write(&path, &bytes[..cut]).unwrap();
        match read_units(&path, Ordering::RequireSorted) {
            Err(e) => assert!(e.to_string().contains(&path.display().to_string()), "{e}"),
            // HDF5 may tolerate a cut in unused trailing space; then the data must be intact.
            Ok(u) => assert_eq!(u.stream.len(), 21_354),
        }
    }
}

#[test]
fn reads_an_nwb_time_series_and_names_a_missing_one() {
    use synfire::ingest::nwb::{SeriesTime, read_timeseries};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/spikes/A2929-200711/A2929-200711.nwb");
    let ts = read_timeseries(&path, "/acquisition/CompassDirection/rz").unwrap();
    assert_eq!((ts.samples(), ts.channels), (63_527, 1));
    let SeriesTime::Timestamps(t) = &ts.time else {
        panic!("the fixture's series has timestamps");
    };
    assert_eq!(t[0], 670.6407);
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    assert!(
        ts.values
            .iter()
            .all(|v| (0.0..=std::f64::consts::TAU).contains(v))
    );
    assert!((ts.rate_hz() - 120.0).abs() < 0.1, "{}", ts.rate_hz());
    let err = read_timeseries(&path, "/acquisition/Nope")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/acquisition/Nope") && err.contains("no such group"),
        "{err}"
    );
    let err = read_timeseries(&path, "/units").unwrap_err().to_string();
    assert!(err.contains("/units/data"), "{err}");
}

/// `--unit-label` and `--epochs`: labels from the units table's `location` (checked against
/// the fixture's units.csv), spikes inside the epochs of epochs.csv only.
#[test]
fn unit_labels_and_epochs_come_from_the_file_tables() {
    use synfire::ingest::{ReadOptions, read_spikes_with};
    let path = fixture_nwb("A2929-200711");
    let text = std::fs::read_to_string(fixture("A2929-200711").join("units.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let loc = header.iter().position(|h| *h == "location").unwrap();
    let expected: Vec<String> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{}:{}", f[loc], f[0])
        })
        .collect();
    let all = read_spikes(&path, Ordering::RequireSorted).unwrap();
    let labelled = read_spikes_with(
        &path,
        &ReadOptions {
            unit_label: Some("location".into()),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(labelled.alphabet().labels(), &expected[..]);
    assert_eq!(labelled.times(), all.times());

    // Epochs: epochs.csv holds `start_s,stop_s,tag` rows (sleep then wake), the numbers
    // written as `np.float64(600.0)` by whoever exported it.
    let number = |f: &str| -> f64 {
        f.trim_start_matches("np.float64(")
            .trim_end_matches(')')
            .parse()
            .unwrap()
    };
    let epochs = std::fs::read_to_string(fixture("A2929-200711").join("epochs.csv")).unwrap();
    let wake: Vec<(f64, f64)> = epochs
        .lines()
        .skip(1)
        .filter(|l| l.contains("wake"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (number(f[0]), number(f[1]))
        })
        .collect();
    assert_eq!(wake.len(), 1);
    let inside = read_spikes_with(
        &path,
        &ReadOptions {
            epochs: Some(vec!["wake".into()]),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let expected: Vec<f64> = all
        .times()
        .iter()
        .copied()
        .filter(|&t| t >= wake[0].0 && t < wake[0].1)
        .collect();
    assert_eq!(inside.times(), &expected[..]);
    assert_eq!(inside.alphabet().len(), 15, "every unit kept");

    // Errors name the table and what is there.
    let err = |o: ReadOptions| read_spikes_with(&path, &o).unwrap_err().to_string();
    let m = err(ReadOptions {
        epochs: Some(vec!["rem".into()]),
        ..ReadOptions::default()
    });
    assert!(
        m.contains("/intervals/epochs") && m.contains("sleep, wake"),
        "{m}"
    );
    let m = err(ReadOptions {
        epochs: Some(vec!["*".into()]),
        epochs_table: Some("trials".into()),
        ..ReadOptions::default()
    });
    assert!(m.contains("trials") && m.contains("sleep_ripples"), "{m}");
    let m = err(ReadOptions {
        unit_label: Some("depth".into()),
        ..ReadOptions::default()
    });
    assert!(m.contains("/units/depth") && m.contains("location"), "{m}");
    // A CSV has no tables.
    let m = read_spikes_with(
        Path::new("fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"),
        &ReadOptions {
            epochs: Some(vec!["wake".into()]),
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(m.contains("--epochs"), "{m}");
}
