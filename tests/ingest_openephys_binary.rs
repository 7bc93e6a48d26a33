//! Open Ephys binary recordings: counts per unit equal the source `.npy` files (read here
//! with `npyz` directly), times are the files' timestamps or samples over the rate, the
//! unit names are the live Open Ephys source's, the `sorted`/`unsorted` filter counts what
//! it leaves out, and every broken recording gives an error naming the file and the field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use synfire::event::{EventStream, Ordering};
use synfire::ingest::openephys::UnitKey;
use synfire::ingest::openephys_binary::{Layout, OpenEphysOptions, locate, read_openephys_binary};
use synfire::ingest::{IngestError, InputFormat, ReadOptions, read_spikes, read_spikes_with};
use tempfile::TempDir;

/// The real GUI 0.5.3.1 recording (open-ephys-matlab-tools sample data).
const REAL_V05: &str = "fixtures/spikes/openephys-binary-matlab-tools";
/// The same spikes in the GUI 0.6 layout (derived; fixtures/PROVENANCE.md).
const DERIVED_V06: &str = "fixtures/spikes/openephys-binary-v06-derived";
const RECORDING: &str = "Record Node 118/experiment1/recording1";

fn npy_i64(path: &Path) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap();
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    match npy.dtype().descr().as_str() {
        "'<i8'" => npy.into_vec::<i64>().unwrap(),
        "'<u2'" => npy
            .into_vec::<u16>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect(),
        other => panic!("unexpected dtype {other} in {}", path.display()),
    }
}

fn npy_f64(path: &Path) -> Vec<f64> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..])
        .unwrap()
        .into_vec::<f64>()
        .unwrap()
}

/// Spikes per unit label in a stream.
fn stream_counts(stream: &EventStream) -> BTreeMap<String, u64> {
    let labels = stream.alphabet().labels();
    stream
        .counts_per_type()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (labels[i].clone(), c))
        .collect()
}

/// `(time, label)` of every spike, sorted.
fn spikes(stream: &EventStream) -> Vec<(f64, String)> {
    let mut v: Vec<(f64, String)> = stream
        .iter()
        .map(|(t, ty)| (t, stream.alphabet().label(ty).to_owned()))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    v
}

/// The real recording's spikes, from its files: electrode name (`channels[i-1].channel_name`
/// of each group) and sorted id per spike, time = samples / 40 kHz.
fn real_v05_expected() -> Vec<(f64, String)> {
    let rec = Path::new(REAL_V05).join(RECORDING);
    let oebin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(rec.join("structure.oebin")).unwrap()).unwrap();
    let mut out = Vec::new();
    for entry in oebin["spikes"].as_array().unwrap() {
        let dir = rec
            .join("spikes")
            .join(entry["folder_name"].as_str().unwrap());
        let rate = entry["sample_rate"].as_f64().unwrap();
        let samples = npy_i64(&dir.join("spike_times.npy"));
        let clusters = npy_i64(&dir.join("spike_clusters.npy"));
        let electrodes = npy_i64(&dir.join("spike_electrode_indices.npy"));
        for ((s, c), e) in samples.iter().zip(&clusters).zip(&electrodes) {
            let name = entry["channels"][(*e - 1) as usize]["channel_name"]
                .as_str()
                .unwrap()
                .trim();
            out.push((*s as f64 / rate, format!("{name}/{c}")));
        }
    }
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    out
}

#[test]
fn real_v05_recording_counts_and_times_equal_the_files() {
    let root = Path::new(REAL_V05);
    // Every way of naming the recording finds it.
    let oebin = root.join(RECORDING).join("structure.oebin");
    for path in [
        root.to_path_buf(),
        root.join("Record Node 118"),
        root.join("Record Node 118/experiment1"),
        root.join(RECORDING),
        oebin.clone(),
    ] {
        assert_eq!(
            InputFormat::from_path(&path).unwrap(),
            InputFormat::OpenEphysBinary,
            "{}",
            path.display()
        );
        assert_eq!(locate(&path).unwrap(), oebin);
    }
    let rec = read_openephys_binary(root, &OpenEphysOptions::default()).unwrap();
    assert_eq!(rec.gui_version, "0.5.3.1");
    assert_eq!(rec.layout, Layout::V05);
    assert_eq!(rec.entries_with_timestamps, 0);
    assert_eq!(rec.dropped_spikes, 0);
    let expected = real_v05_expected();
    assert_eq!(expected.len(), 106 + 199 + 291);
    assert_eq!(spikes(&rec.stream), expected);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (_, label) in &expected {
        *counts.entry(label.clone()).or_default() += 1;
    }
    assert_eq!(stream_counts(&rec.stream), counts);
    assert_eq!(
        rec.stream.alphabet().labels(),
        ["SE  p110.0 n0/0", "ST  p110.0 n0/0", "TT  p110.0 n0/0"]
    );
    // Through read_spikes, the same stream.
    let via = read_spikes(root, Ordering::RequireSorted).unwrap();
    assert_eq!(spikes(&via), expected);
}

#[test]
fn v06_recording_prefers_timestamps_and_names_units_like_the_live_source() {
    let root = Path::new(DERIVED_V06);
    let rec = read_openephys_binary(root, &OpenEphysOptions::default()).unwrap();
    assert_eq!(rec.layout, Layout::V06);
    assert_eq!(rec.entries_with_timestamps, 3);
    let dir = root.join(RECORDING).join("spikes");
    let oebin: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join(RECORDING).join("structure.oebin")).unwrap(),
    )
    .unwrap();
    let mut expected = Vec::new();
    for entry in oebin["spikes"].as_array().unwrap() {
        let d = dir.join(entry["folder"].as_str().unwrap());
        let ts = npy_f64(&d.join("timestamps.npy"));
        let clusters = npy_i64(&d.join("clusters.npy"));
        assert_eq!(ts.len(), npy_i64(&d.join("sample_numbers.npy")).len());
        for (t, c) in ts.iter().zip(&clusters) {
            expected.push((*t, format!("{}/{c}", entry["name"].as_str().unwrap())));
        }
    }
    expected.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    assert_eq!(spikes(&rec.stream), expected);
    assert_eq!(
        rec.stream.alphabet().labels(),
        ["Electrode 1/0", "Stereotrode 1/0", "Tetrode 1/0"]
    );
    // The same spike counts as the real 0.5 recording it was derived from, per electrode.
    let real = read_openephys_binary(Path::new(REAL_V05), &OpenEphysOptions::default()).unwrap();
    let counts = |s: &EventStream| -> Vec<u64> { s.counts_per_type() };
    assert_eq!(counts(&rec.stream), counts(&real.stream));
    // The other unit keys.
    let full = read_openephys_binary(
        root,
        &OpenEphysOptions {
            unit_key: UnitKey::Full,
            ..OpenEphysOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        full.stream.alphabet().labels(),
        [
            "example_data/Electrode 1/0",
            "example_data/Stereotrode 1/0",
            "example_data/Tetrode 1/0"
        ]
    );
    let electrode = read_spikes_with(
        root,
        &ReadOptions {
            unit_key: Some(UnitKey::Electrode),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        electrode.alphabet().labels(),
        ["Electrode 1", "Stereotrode 1", "Tetrode 1"]
    );
}

// ------------------------------------------------------------------------------------------
// Recordings written here: sorted ids, filters, and broken files.

fn npy(descr: &str, n: usize, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn i64s(v: &[i64]) -> Vec<u8> {
    npy(
        "<i8",
        v.len(),
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )
}

fn u16s(v: &[u16]) -> Vec<u8> {
    npy(
        "<u2",
        v.len(),
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )
}

fn f64s(v: &[f64]) -> Vec<u8> {
    npy(
        "<f8",
        v.len(),
        &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    )
}

const OEBIN_V06: &str = r#"{"GUI version": "0.6.7", "continuous": [], "events": [],
  "spikes": [
    {"name": "Electrode 1", "stream_name": "ProbeA", "sample_rate": 30000.0,
     "source_processor_id": 104, "folder": "Spike_Sorter-104.ProbeA/Electrode 1/"},
    {"name": "Electrode 2", "stream_name": "ProbeA", "sample_rate": 30000.0,
     "source_processor_id": 104, "folder": "Spike_Sorter-104.ProbeA/Electrode 2/"}
  ]}"#;

/// A synthetic GUI 0.6 recording (written by this test, not data): two electrodes with
/// sorted ids 0–2, in `Record Node 104/experiment1/recording1`.
struct Rec {
    _tmp: TempDir,
    root: PathBuf,
    dir: PathBuf,
}

impl Rec {
    fn new() -> Self {
        let tmp = TempDir::new().unwrap();
        let root = tmp.path().to_path_buf();
        let dir = root.join("Record Node 104/experiment1/recording1");
        let rec = Self {
            _tmp: tmp,
            root,
            dir,
        };
        rec.write("structure.oebin", OEBIN_V06.as_bytes());
        rec.electrode(1, &[30, 60, 90, 120], &[0, 1, 1, 2]);
        rec.electrode(2, &[45, 75], &[0, 1]);
        rec
    }

    fn spikes_dir(&self, e: u32) -> PathBuf {
        self.dir
            .join(format!("spikes/Spike_Sorter-104.ProbeA/Electrode {e}"))
    }

    fn electrode(&self, e: u32, samples: &[i64], sorted: &[u16]) {
        let d = self.spikes_dir(e);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("sample_numbers.npy"), i64s(samples)).unwrap();
        std::fs::write(d.join("clusters.npy"), u16s(sorted)).unwrap();
        std::fs::write(
            d.join("electrode_indices.npy"),
            u16s(&vec![e as u16 - 1; samples.len()]),
        )
        .unwrap();
    }

    fn write(&self, name: &str, bytes: &[u8]) {
        let p = self.dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    fn read(&self) -> Result<synfire::ingest::openephys_binary::OpenEphysRecording, IngestError> {
        read_openephys_binary(&self.root, &OpenEphysOptions::default())
    }
}

/// The error message, which must name `file` (a path suffix) and contain every `want`.
fn fails(rec: &Rec, file: &str, want: &[&str]) {
    let err = rec.read().expect_err("a broken recording must not read");
    let msg = err.to_string();
    assert!(msg.contains(file), "error should name {file}: {msg}");
    for w in want {
        assert!(msg.contains(w), "error should say {w:?}: {msg}");
    }
}

#[test]
fn sorted_ids_name_units_and_the_filter_counts_what_it_leaves_out() {
    let rec = Rec::new();
    let all = rec.read().unwrap();
    assert_eq!(
        stream_counts(&all.stream),
        BTreeMap::from([
            ("Electrode 1/0".to_owned(), 1),
            ("Electrode 1/1".to_owned(), 2),
            ("Electrode 1/2".to_owned(), 1),
            ("Electrode 2/0".to_owned(), 1),
            ("Electrode 2/1".to_owned(), 1),
        ])
    );
    assert_eq!(all.entries_with_timestamps, 0);
    assert_eq!(all.stream.times()[0], 30.0 / 30_000.0);
    let sorted = read_openephys_binary(
        &rec.root,
        &OpenEphysOptions {
            units: Some(vec!["sorted".into()]),
            ..OpenEphysOptions::default()
        },
    )
    .unwrap();
    assert_eq!(sorted.stream.len(), 4);
    assert_eq!(sorted.dropped_spikes, 2);
    assert!(
        sorted
            .stream
            .alphabet()
            .labels()
            .iter()
            .all(|l| !l.ends_with("/0"))
    );
    let unsorted = read_spikes_with(
        &rec.root,
        &ReadOptions {
            groups: Some(vec!["unsorted".into()]),
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        unsorted.alphabet().labels(),
        ["Electrode 1/0", "Electrode 2/0"]
    );
    // `--units good` is phy's vocabulary.
    let err = read_spikes_with(
        &rec.root,
        &ReadOptions {
            groups: Some(vec!["good".into()]),
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`sorted`") && err.contains("good"), "{err}");
    // Timestamps win over samples when present.
    rec.write(
        "spikes/Spike_Sorter-104.ProbeA/Electrode 2/timestamps.npy",
        &f64s(&[10.5, 11.25]),
    );
    let synced = rec.read().unwrap();
    assert_eq!(synced.entries_with_timestamps, 1);
    assert_eq!(*synced.stream.times().last().unwrap(), 11.25);
    // `--unit-key` only for Open Ephys input, `--sample-rate` not for it.
    let err = read_spikes_with(
        Path::new("fixtures/spikes/phy-template"),
        &ReadOptions {
            unit_key: Some(UnitKey::Full),
            ..ReadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--unit-key"), "{err}");
}

#[test]
fn a_folder_of_several_recordings_lists_them() {
    let rec = Rec::new();
    let second = rec.root.join("Record Node 104/experiment1/recording2");
    std::fs::create_dir_all(&second).unwrap();
    std::fs::write(second.join("structure.oebin"), OEBIN_V06).unwrap();
    let err = rec.read().unwrap_err().to_string();
    assert!(
        err.contains("2 Open Ephys recordings")
            && err.contains("experiment1/recording1")
            && err.contains("experiment1/recording2")
            && err.contains("pass one recording folder"),
        "{err}"
    );
    // Naming one works.
    assert!(read_openephys_binary(&rec.dir, &OpenEphysOptions::default()).is_ok());
}

#[test]
fn broken_oebin_fields_are_named() {
    let cases: &[(&str, &[&str])] = &[
        ("not json", &["is not valid JSON"]),
        (r#"{"spikes": []}"#, &["`GUI version` is missing"]),
        (
            r#"{"GUI version": 6, "spikes": []}"#,
            &["`GUI version` is 6; expected a string"],
        ),
        (
            r#"{"GUI version": "six", "spikes": []}"#,
            &["`GUI version` \"six\""],
        ),
        (r#"{"GUI version": "0.6.7"}"#, &["`spikes` is missing"]),
        (
            r#"{"GUI version": "0.6.7", "spikes": {}}"#,
            &["`spikes` is an object"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": []}"#,
            &["holds no events"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": [{"name": "E", "stream_name": "S", "folder": "x/"}]}"#,
            &["`spikes[0].sample_rate` is missing"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": [{"name": "E", "stream_name": "S", "sample_rate": -1, "folder": "x/"}]}"#,
            &["`spikes[0].sample_rate` is -1"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": [{"stream_name": "S", "sample_rate": 1, "folder": "Spike_Sorter-104.ProbeA/Electrode 1/"}]}"#,
            &["`spikes[0].name` is missing"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": [{"name": "E", "stream_name": "S", "sample_rate": 1}]}"#,
            &["`spikes[0].folder` is missing"],
        ),
        (
            r#"{"GUI version": "0.6.7", "spikes": [{"name": "E", "stream_name": "S", "sample_rate": 1, "folder": "../../x/"}]}"#,
            &["`spikes[0].folder`", "not a folder under `spikes/`"],
        ),
        (
            r#"{"GUI version": "0.5.3", "spikes": [{"sample_rate": 1, "folder_name": "Spike_Sorter-104.ProbeA/Electrode 1/", "channels": []}]}"#,
            &["`spikes[0].channels` is an empty list"],
        ),
    ];
    for (text, want) in cases {
        let rec = Rec::new();
        rec.write("structure.oebin", text.as_bytes());
        fails(&rec, "structure.oebin", want);
    }
    // Two streams with the same electrode names merge under the default key: refused.
    let rec = Rec::new();
    rec.write(
        "structure.oebin",
        OEBIN_V06
            .replacen(
                "\"Electrode 2\", \"stream_name\": \"ProbeA\"",
                "\"Electrode 1\", \"stream_name\": \"ProbeB\"",
                1,
            )
            .as_bytes(),
    );
    fails(
        &rec,
        "structure.oebin",
        &["both give the unit name", "--unit-key full"],
    );
    let full = read_openephys_binary(
        &rec.root,
        &OpenEphysOptions {
            unit_key: UnitKey::Full,
            ..OpenEphysOptions::default()
        },
    )
    .unwrap();
    assert!(
        full.stream
            .alphabet()
            .labels()
            .contains(&"ProbeB/Electrode 1/0".to_owned())
    );
}

#[test]
fn broken_arrays_are_named_by_file() {
    let e1 = "spikes/Spike_Sorter-104.ProbeA/Electrode 1";
    // Missing file.
    let rec = Rec::new();
    std::fs::remove_file(rec.spikes_dir(1).join("clusters.npy")).unwrap();
    fails(
        &rec,
        "Electrode 1/clusters.npy",
        &["is missing", "spikes[0]"],
    );
    // Mismatched lengths.
    let rec = Rec::new();
    rec.write(&format!("{e1}/clusters.npy"), &u16s(&[0, 1, 1]));
    fails(
        &rec,
        "Electrode 1/clusters.npy",
        &["has 3 entries but `sample_numbers.npy` has 4"],
    );
    let rec = Rec::new();
    rec.write(&format!("{e1}/electrode_indices.npy"), &u16s(&[0]));
    fails(
        &rec,
        "Electrode 1/electrode_indices.npy",
        &["has 1 entries"],
    );
    let rec = Rec::new();
    rec.write(&format!("{e1}/timestamps.npy"), &f64s(&[1.0, 2.0]));
    fails(&rec, "Electrode 1/timestamps.npy", &["has 2 entries"]);
    // Wrong dtypes.
    let rec = Rec::new();
    rec.write(
        &format!("{e1}/sample_numbers.npy"),
        &f64s(&[1.0, 2.0, 3.0, 4.0]),
    );
    fails(
        &rec,
        "Electrode 1/sample_numbers.npy",
        &["dtype", "integers"],
    );
    let rec = Rec::new();
    rec.write(&format!("{e1}/timestamps.npy"), &i64s(&[1, 2, 3, 4]));
    fails(&rec, "Electrode 1/timestamps.npy", &["dtype", "float64"]);
    // Truncated arrays.
    let rec = Rec::new();
    let mut cut = i64s(&[30, 60, 90, 120]);
    cut.truncate(cut.len() - 5);
    rec.write(&format!("{e1}/sample_numbers.npy"), &cut);
    fails(
        &rec,
        "Electrode 1/sample_numbers.npy",
        &["cannot read the values"],
    );
    let rec = Rec::new();
    rec.write(&format!("{e1}/clusters.npy"), b"\x93NUMPY\x01\x00\x76");
    fails(
        &rec,
        "Electrode 1/clusters.npy",
        &["not a NumPy `.npy` array"],
    );
    // Bad values.
    let rec = Rec::new();
    rec.write(
        &format!("{e1}/sample_numbers.npy"),
        &i64s(&[30, -60, 90, 120]),
    );
    fails(
        &rec,
        "Electrode 1/sample_numbers.npy",
        &["entry 1 is -60 samples"],
    );
    let rec = Rec::new();
    rec.write(
        &format!("{e1}/timestamps.npy"),
        &f64s(&[0.1, f64::NAN, 0.3, 0.4]),
    );
    fails(&rec, "Electrode 1/timestamps.npy", &["entry 1 is NaN s"]);
    let rec = Rec::new();
    rec.write(
        &format!("{e1}/sample_numbers.npy"),
        &i64s(&[30, 90, 60, 120]),
    );
    fails(
        &rec,
        "Electrode 1/sample_numbers.npy",
        &["entry 2", "comes before entry 1", "--sort"],
    );
    assert!(
        read_openephys_binary(
            &rec.root,
            &OpenEphysOptions {
                ordering: Ordering::SortIfNeeded,
                ..OpenEphysOptions::default()
            }
        )
        .is_ok()
    );
}

#[test]
fn v05_electrode_indices_are_checked_against_the_group() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("recording1");
    let group = dir.join("spikes/Spike_Detector-100.0/spike_group_1");
    std::fs::create_dir_all(&group).unwrap();
    std::fs::write(
        dir.join("structure.oebin"),
        r#"{"GUI version": "0.5.3", "spikes": [{"folder_name": "Spike_Detector-100.0/spike_group_1/",
            "sample_rate": 1000, "channels": [{"channel_name": "TT1 a"}, {"channel_name": "TT1 b"}]}]}"#,
    )
    .unwrap();
    std::fs::write(group.join("spike_times.npy"), i64s(&[1, 2, 3])).unwrap();
    std::fs::write(group.join("spike_clusters.npy"), u16s(&[0, 0, 1])).unwrap();
    let read = || read_openephys_binary(&dir, &OpenEphysOptions::default());
    let err = read().unwrap_err().to_string();
    assert!(
        err.contains("spike_electrode_indices.npy") && err.contains("has 2 electrodes"),
        "{err}"
    );
    std::fs::write(group.join("spike_electrode_indices.npy"), u16s(&[1, 3, 2])).unwrap();
    let err = read().unwrap_err().to_string();
    assert!(
        err.contains("spike_electrode_indices.npy") && err.contains("entry 1 is 3"),
        "{err}"
    );
    std::fs::write(group.join("spike_electrode_indices.npy"), u16s(&[1, 2, 2])).unwrap();
    let rec = read().unwrap();
    assert_eq!(
        stream_counts(&rec.stream),
        BTreeMap::from([
            ("TT1 a/0".to_owned(), 1),
            ("TT1 b/0".to_owned(), 1),
            ("TT1 b/1".to_owned(), 1),
        ])
    );
    assert_eq!(rec.stream.times(), [0.001, 0.002, 0.003]);
}
