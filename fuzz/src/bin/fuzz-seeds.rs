//! Writes the checked-in seed corpora of the fuzz targets, `fuzz/seeds/<set>/`, from the
//! repository's real fixtures and synfire's own encoders and writers:
//!
//! ```text
//! fuzz-seeds REPO_ROOT OUT_DIR      # tools/fuzz.sh seeds does this
//! ```
//!
//! * `wire`: `encode_spikes`, `encode_sensor`, `encode_end`;
//! * `openephys_json`, `openephys_raw`: `encode_json`, `encode_raw` and the Event Broadcaster
//!   example of `ingest::openephys`'s tests, in `synfire_fuzz::OpenEphysInput`'s layout;
//! * `csv`: the first 4 KiB of `fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv` (whole
//!   lines), headers of every documented kind, in `synfire_fuzz::CsvInput`'s layout;
//! * `phy`: `fixtures/spikes/phy-template/` whole, `fixtures/spikes/np-curated-120s/` cut to
//!   its first 64 spikes, and `.npy`/TSV variants (shapes `[n, 1]`, other integer widths,
//!   big-endian, format version 2, `cluster_info.tsv`, `cluster_KSLabel.tsv`), in
//!   `synfire_fuzz::PhyInput`'s layout;
//! * `openephys_binary`: `fixtures/spikes/openephys-binary-v06-derived/` (its first two
//!   electrodes, with and without `timestamps.npy`, under each option) and the real GUI 0.5
//!   recording `fixtures/spikes/openephys-binary-matlab-tools/` (its tetrode group; the
//!   `structure.oebin` cut to that entry), in `synfire_fuzz::OebinInput`'s layout;
//! * `nwb`: small NWB files (about 12 KiB, so that most bytes are HDF5 metadata) holding what
//!   the four NWB targets read: a units table written by `write_units`, and the same with
//!   `location`, `depth` and `shank` columns, `/intervals/epochs` with `tags`, a `TimeSeries`
//!   with `timestamps` and one with `starting_time`/`rate`, in the earliest file format (what
//!   h5py writes: superblock 0, symbol-table groups) and the latest one (superblock 3,
//!   version-2 object headers; `write_units`'s default is superblock 2), contiguous and
//!   chunked with shuffle+deflate, with narrow integer and float32 types. The real NWB
//!   fixtures are added to the corpus by `tools/fuzz.sh` (not copied here).
//!
//! Pipeline seeds are hand-written files (`fuzz/seeds/pipeline/`) plus `pipelines/*.toml`,
//! added by `tools/fuzz.sh`.
//!
//! This binary is built with the targets (same flags), so it defines the fuzz entry point
//! libfuzzer-sys refers to, and never calls it.

use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use synfire::event::{Alphabet, EventStream, EventType, Ordering};
use synfire::ingest::openephys::{UnitKey, encode_json, encode_raw};
use synfire::ingest::wire::{encode_end, encode_sensor, encode_spikes};
use synfire::record::SensorFrame;
use synfire_fuzz::{CsvInput, OebinInput, OpenEphysInput, PhyInput};

/// libfuzzer-sys (linked for the coverage callbacks) refers to this fuzz entry point; never
/// called.
#[unsafe(no_mangle)]
pub extern "Rust" fn rust_fuzzer_test_input(_input: &[u8]) -> i32 {
    0
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Writes one seed set: `(repository root, output folder)`.
type SeedSet = fn(&Path, &Path) -> Result<()>;

/// A CSV seed: name, ordering, time column, unit column, text.
type CsvCase<'a> = (&'a str, Ordering, Option<&'a str>, Option<&'a str>, &'a str);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, root, out] = &args[..] else {
        return Err("usage: fuzz-seeds REPO_ROOT OUT_DIR".into());
    };
    let root = PathBuf::from(root);
    let out = PathBuf::from(out);
    let sets: [(&str, SeedSet); 7] = [
        ("wire", wire),
        ("openephys_json", openephys_json),
        ("openephys_raw", openephys_raw),
        ("csv", csv),
        ("phy", phy),
        ("openephys_binary", openephys_binary),
        ("nwb", nwb),
    ];
    for (name, make) in sets {
        let dir = out.join(name);
        if dir.is_dir() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        make(&root, &dir)?;
        let n = std::fs::read_dir(&dir)?.count();
        eprintln!("fuzz-seeds: {n} seeds in {}", dir.display());
    }
    Ok(())
}

fn openephys_binary(root: &Path, dir: &Path) -> Result<()> {
    let v06 = root.join(
        "fixtures/spikes/openephys-binary-v06-derived/Record Node 118/experiment1/recording1",
    );
    let mut oebin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v06.join("structure.oebin"))?)?;
    let spikes = oebin["spikes"]
        .as_array_mut()
        .ok_or("the v0.6 fixture's `spikes` is not a list")?;
    spikes.truncate(2);
    let mut folders = Vec::new();
    for (entry, short) in spikes.iter_mut().zip(["a/", "b/"]) {
        folders.push(
            entry["folder"]
                .as_str()
                .ok_or("a v0.6 fixture entry has no `folder`")?
                .to_owned(),
        );
        entry["folder"] = short.into();
    }
    let text = serde_json::to_vec(&oebin)?;
    let mut files: Vec<(&str, Vec<u8>)> = vec![("structure.oebin", text)];
    for (folder, short) in folders.iter().zip(["a", "b"]) {
        for name in [
            "sample_numbers.npy",
            "timestamps.npy",
            "clusters.npy",
            "electrode_indices.npy",
        ] {
            let bytes = std::fs::read(v06.join("spikes").join(folder).join(name))?;
            let target = synfire_fuzz::OEBIN_FILES
                .iter()
                .find(|f| **f == format!("spikes/{short}/{name}"))
                .ok_or("not in the layout")?;
            files.push((target, bytes));
        }
    }
    let refs = |keep: &dyn Fn(&str) -> bool| -> Vec<(&str, &[u8])> {
        files
            .iter()
            .filter(|(n, _)| keep(n))
            .map(|(n, b)| (*n, b.as_slice()))
            .collect()
    };
    let all = refs(&|_| true);
    put(dir, "v06-derived", &OebinInput::encode(false, 0, 0, &all))?;
    put(
        dir,
        "v06-derived-full-sorted",
        &OebinInput::encode(true, 1, 2, &all),
    )?;
    put(
        dir,
        "v06-derived-no-timestamps-unsorted",
        &OebinInput::encode(false, 2, 1, &refs(&|n| !n.ends_with("timestamps.npy"))),
    )?;

    let v05 = root.join(
        "fixtures/spikes/openephys-binary-matlab-tools/Record Node 118/experiment1/recording1",
    );
    let mut oebin: serde_json::Value =
        serde_json::from_slice(&std::fs::read(v05.join("structure.oebin"))?)?;
    let mut entry = oebin["spikes"][2].clone();
    entry["folder_name"] = "g/".into();
    oebin["spikes"] = serde_json::Value::Array(vec![entry]);
    oebin["continuous"] = serde_json::Value::Array(Vec::new());
    let group = v05.join("spikes/Spike_Detector-110.0/spike_group_3");
    let read = |name: &str| std::fs::read(group.join(name));
    let (times, clusters, electrodes) = (
        read("spike_times.npy")?,
        read("spike_clusters.npy")?,
        read("spike_electrode_indices.npy")?,
    );
    let text = serde_json::to_vec(&oebin)?;
    put(
        dir,
        "v05-real-tetrode",
        &OebinInput::encode(
            false,
            0,
            0,
            &[
                ("structure.oebin", &text),
                ("spikes/g/spike_times.npy", &times),
                ("spikes/g/spike_clusters.npy", &clusters),
                ("spikes/g/spike_electrode_indices.npy", &electrodes),
            ],
        ),
    )?;
    Ok(())
}

fn put(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    std::fs::write(dir.join(name), bytes)?;
    Ok(())
}

// ------------------------------------------------------------------------------------------

fn wire(_root: &Path, dir: &Path) -> Result<()> {
    put(
        dir,
        "spikes-2",
        &encode_spikes(9, 100, &[0.5, 1.25], &[3, 7]),
    )?;
    put(dir, "spikes-0", &encode_spikes(1, 0, &[], &[]))?;
    let times: Vec<f64> = (0..16).map(|i| f64::from(i) * 0.001_25).collect();
    let units: Vec<u32> = (0..16).map(|i| i % 5).collect();
    put(
        dir,
        "spikes-16",
        &encode_spikes(0xfeed, 1 << 40, &times, &units),
    )?;
    let frame = |channels: usize, values: Vec<f64>| SensorFrame {
        first_sample: 5,
        t0_s: 2.0,
        rate_hz: 250.0,
        channels,
        values,
    };
    put(
        dir,
        "sensor-1ch",
        &encode_sensor(1, &frame(1, vec![1.0, -2.0, 3.5])),
    )?;
    put(
        dir,
        "sensor-2ch-nan",
        &encode_sensor(2, &frame(2, vec![1.0, f64::NAN, 3.0, 4.0])),
    )?;
    put(dir, "end", &encode_end(7, 42))?;
    Ok(())
}

const BROADCASTER_EXAMPLE: &[u8] = br#"{"event_type":"spike","stream":"example_data","source_node":104,"electrode":"SE0","num_channels":1,"sample_rate":30000.0,"sample_number":45000,"sorted_id":2,"amp1":-55.1}"#;

fn openephys_json(_root: &Path, dir: &Path) -> Result<()> {
    let keys = [
        (UnitKey::Full, "full"),
        (UnitKey::Electrode, "electrode"),
        (UnitKey::ElectrodeSortedId, "electrode-sorted"),
    ];
    for (key, name) in keys {
        put(
            dir,
            &format!("broadcaster-{name}"),
            &OpenEphysInput::encode(key, BROADCASTER_EXAMPLE),
        )?;
        let [_, body] = encode_json("SE3", 1.5, 30_000.0);
        put(
            dir,
            &format!("replay-{name}"),
            &OpenEphysInput::encode(key, &body),
        )?;
    }
    let minimal = br#"{"electrode":7,"sample_rate":20000,"sample_number":1,"sorted_id":null}"#;
    put(
        dir,
        "minimal",
        &OpenEphysInput::encode(UnitKey::Full, minimal),
    )?;
    // Control 0b1000: frame 0 is a TTL.
    let mut ttl = OpenEphysInput::encode(UnitKey::Full, br#"{"event_type":"ttl","line":1}"#);
    ttl[0] |= 0b1000;
    put(dir, "ttl", &ttl)?;
    Ok(())
}

fn openephys_raw(_root: &Path, dir: &Path) -> Result<()> {
    let keys = [
        (UnitKey::Full, "full"),
        (UnitKey::Electrode, "electrode"),
        (UnitKey::ElectrodeSortedId, "electrode-sorted"),
    ];
    for (key, name) in keys {
        let [_, body] = encode_raw(17, 1_234.567_890_123_4, 30_000.0);
        put(
            dir,
            &format!("raw-{name}"),
            &OpenEphysInput::encode(key, &body),
        )?;
    }
    // A header with thresholds and a 40-sample waveform after it (ignored by the decoder).
    let [_, mut body] = encode_raw(3, 0.25, 30_000.0);
    for i in 0..40u16 {
        body.extend_from_slice(&(f32::from(i) * -1.5).to_le_bytes());
    }
    put(
        dir,
        "raw-waveform",
        &OpenEphysInput::encode(UnitKey::Full, &body),
    )?;
    Ok(())
}

// ------------------------------------------------------------------------------------------

fn csv(root: &Path, dir: &Path) -> Result<()> {
    let ibl = std::fs::read(root.join("fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"))?;
    let cut = ibl[..4096.min(ibl.len())]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(&ibl[..0], |i| &ibl[..=i]);
    put(
        dir,
        "ibl-head",
        &CsvInput::encode(Ordering::RequireSorted, None, None, cut),
    )?;
    put(
        dir,
        "ibl-head-named",
        &CsvInput::encode(Ordering::RequireSorted, Some("time_s"), Some("label"), cut),
    )?;
    let cases: [CsvCase<'_>; 9] = [
        (
            "tdminer",
            Ordering::RequireSorted,
            None,
            None,
            "A,0.0105\nB,0.0121\nA,0.5\n",
        ),
        (
            "tdminer-header-comments",
            Ordering::RequireSorted,
            None,
            None,
            "# exported\n\nlabel,t\nA,0.0105\n  B , 0.0121 \n\n# end\n",
        ),
        (
            "named-columns",
            Ordering::RequireSorted,
            None,
            None,
            "spike_time_s,cluster_id,amp\n0.001,4,12.5\n0.002,7,3\n0.0025,4,1e-3\n",
        ),
        (
            "given-columns",
            Ordering::RequireSorted,
            Some("when"),
            Some("who"),
            "who,x,when\nu1,0,1.5\nu2,1,2.25\n",
        ),
        (
            "unsorted-sort",
            Ordering::SortIfNeeded,
            None,
            None,
            "b,2\na,1\na,2\nc,0\n",
        ),
        (
            "unsorted-require",
            Ordering::RequireSorted,
            None,
            None,
            "b,2\na,1\n",
        ),
        (
            "crlf",
            Ordering::RequireSorted,
            None,
            None,
            "unit,time\r\n1,0.5\r\n2,0.75\r\n",
        ),
        (
            "numbers",
            Ordering::SortIfNeeded,
            None,
            None,
            "x,1e300\ny,0\nz,-0\nx,5e-324\n",
        ),
        (
            "time-first",
            Ordering::RequireSorted,
            None,
            None,
            "timestamps,electrode\n0.1,E1\n0.2,E2\n",
        ),
    ];
    for (name, ordering, time, unit, text) in cases {
        put(
            dir,
            name,
            &CsvInput::encode(ordering, time, unit, text.as_bytes()),
        )?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------

/// A `.npy` file by hand: `descr` such as `<i8`, `shape` such as `(3,)`, `data` already in
/// that dtype's bytes; `version` 1 or 2 (2: a 4-byte header length).
fn npy(descr: &str, shape: &str, data: &[u8], version: u8) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let prefix = if version == 1 { 10 } else { 12 };
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn read_npy_i64(path: &Path) -> Result<Vec<i64>> {
    let bytes = std::fs::read(path)?;
    let npy = npyz::NpyFile::new(&bytes[..])?;
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(format!("{}: not a plain dtype", path.display()).into());
    };
    Ok(match (ts.type_char(), ts.size_field()) {
        (npyz::TypeChar::Int, 4) => npy.into_vec::<i32>()?.into_iter().map(i64::from).collect(),
        (npyz::TypeChar::Int, 8) => npy.into_vec::<i64>()?,
        (npyz::TypeChar::Uint, 4) => npy.into_vec::<u32>()?.into_iter().map(i64::from).collect(),
        (npyz::TypeChar::Uint, 8) => npy
            .into_vec::<u64>()?
            .into_iter()
            .map(|v| v as i64)
            .collect(),
        other => return Err(format!("{}: dtype {other:?}", path.display()).into()),
    })
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn phy(root: &Path, dir: &Path) -> Result<()> {
    let template = root.join("fixtures/spikes/phy-template");
    let read = |name: &str| std::fs::read(template.join(name));
    let (times, clusters, templates, params, groups) = (
        read("spike_times.npy")?,
        read("spike_clusters.npy")?,
        read("spike_templates.npy")?,
        read("params.py")?,
        read("cluster_group.tsv")?,
    );
    let whole: [(&str, &[u8]); 4] = [
        ("spike_times.npy", &times),
        ("spike_clusters.npy", &clusters),
        ("params.py", &params),
        ("cluster_group.tsv", &groups),
    ];
    put(dir, "template", &PhyInput::encode(false, 0, None, &whole))?;
    put(
        dir,
        "template-good",
        &PhyInput::encode(false, 1, None, &whole),
    )?;
    put(
        dir,
        "template-kilosort-raw",
        &PhyInput::encode(
            false,
            0,
            None,
            &[
                ("spike_times.npy", &times),
                ("spike_templates.npy", &templates),
                ("params.py", &params),
            ],
        ),
    )?;

    // The curated Neuropixels folder, cut to its first 64 spikes (same dtypes).
    let np = root.join("fixtures/spikes/np-curated-120s");
    let t = read_npy_i64(&np.join("spike_times.npy"))?;
    let c = read_npy_i64(&np.join("spike_clusters.npy"))?;
    let n = 64.min(t.len());
    let (t, c) = (&t[..n], &c[..n]);
    let shape = format!("({n},)");
    let t_u64 = npy("<u8", &shape, &le(t, |v| (v as u64).to_le_bytes()), 1);
    let c_i32 = npy("<i4", &shape, &le(c, |v| (v as i32).to_le_bytes()), 1);
    let np_groups = std::fs::read(np.join("cluster_group.tsv"))?;
    put(
        dir,
        "np-curated-64",
        &PhyInput::encode(
            false,
            2,
            Some(30_000.0),
            &[
                ("spike_times.npy", &t_u64),
                ("spike_clusters.npy", &c_i32),
                ("cluster_group.tsv", &np_groups),
            ],
        ),
    )?;

    // Layout variants of a 6-spike folder.
    let ts: [i64; 6] = [10, 25, 25, 40, 41, 90];
    let cs: [i64; 6] = [1, 2, 1, 3, 2, 1];
    let params = b"sample_rate = 30000.\nn_channels_dat = 4\n";
    let info = b"cluster_id\tAmplitude\tKSLabel\tgroup\n1\t20.5\tgood\tgood\n2\t3.1\tmua\t\n3\t1.0\tgood\tnoise\n";
    let kslabel = b"cluster_id\tKSLabel\n1\tgood\n2\tmua\n3\tmua\n";
    let variants: [(&str, Vec<u8>, Vec<u8>); 5] = [
        (
            "column-n1-i8",
            npy("<i8", "(6, 1)", &le(&ts, i64::to_le_bytes), 1),
            npy("<i8", "(6, 1)", &le(&cs, i64::to_le_bytes), 1),
        ),
        (
            "big-endian-v2",
            npy("<i8", "(6,)", &le(&ts, i64::to_le_bytes), 2),
            npy(">i4", "(6,)", &le(&cs, |v| (v as i32).to_be_bytes()), 2),
        ),
        (
            "narrow-u2-u1",
            npy("<u2", "(6,)", &le(&ts, |v| (v as u16).to_le_bytes()), 1),
            npy("|u1", "(6,)", &le(&cs, |v| [v as u8]), 1),
        ),
        (
            "row-1n-i2",
            npy("<i2", "(1, 6)", &le(&ts, |v| (v as i16).to_le_bytes()), 1),
            npy("<i2", "(1, 6)", &le(&cs, |v| (v as i16).to_le_bytes()), 1),
        ),
        (
            "float-times",
            npy("<f8", "(6,)", &le(&ts, |v| (v as f64).to_le_bytes()), 1),
            npy("<i8", "(6,)", &le(&cs, i64::to_le_bytes), 1),
        ),
    ];
    for (name, t, c) in &variants {
        put(
            dir,
            name,
            &PhyInput::encode(
                true,
                1,
                None,
                &[
                    ("spike_times.npy", t),
                    ("spike_clusters.npy", c),
                    ("params.py", params),
                    ("cluster_info.tsv", info),
                    ("cluster_KSLabel.tsv", kslabel),
                ],
            ),
        )?;
    }
    Ok(())
}

// ------------------------------------------------------------------------------------------

/// How a small NWB seed is laid out.
#[derive(Clone, Copy)]
struct NwbLayout {
    latest: bool,
    chunked: bool,
    narrow: bool,
}

fn small_stream() -> Result<EventStream> {
    let labels = ["6", "191", "206"];
    let alphabet = Alphabet::from_labels(labels.iter().map(|s| (*s).to_owned()))?;
    let times = vec![0.03, 0.1, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5];
    let types = [0u32, 1, 2, 0, 1, 0, 2, 0, 1, 2].map(EventType).to_vec();
    Ok(EventStream::new(
        times,
        types,
        alphabet,
        Ordering::RequireSorted,
    )?)
}

fn vlu(s: &str) -> Result<VarLenUnicode> {
    Ok(s.parse::<VarLenUnicode>()?)
}

fn str_attr(loc: &hdf5::Location, name: &str, value: &str) -> Result<()> {
    loc.new_attr::<VarLenUnicode>()
        .create(name)?
        .write_scalar(&vlu(value)?)?;
    Ok(())
}

/// A 1-D dataset, chunked (4 elements) with shuffle and deflate when `chunked`.
fn column<T: hdf5::H5Type>(
    g: &hdf5::Group,
    name: &str,
    data: &[T],
    chunked: bool,
) -> Result<hdf5::Dataset> {
    let builder = g.new_dataset_builder();
    let ds = if chunked && !data.is_empty() {
        builder
            .chunk(4.min(data.len()))
            .shuffle()
            .deflate(4)
            .with_data(data)
            .create(name)?
    } else {
        builder.with_data(data).create(name)?
    };
    Ok(ds)
}

/// The units table, its columns, epochs and two time series, written from scratch.
fn write_nwb(path: &Path, layout: NwbLayout) -> Result<()> {
    // The earliest format is what h5py/pynwb write (the fixtures: superblock 0, symbol-table
    // groups, version-1 object headers); the latest has version-2 headers and link messages.
    let file = if layout.latest {
        hdf5::File::with_options()
            .with_fapl(|p| p.libver_latest())
            .create(path)?
    } else {
        hdf5::File::with_options()
            .with_fapl(|p| p.libver_earliest())
            .create(path)?
    };
    str_attr(&file, "nwb_version", "2.4.0")?;
    str_attr(&file, "neurodata_type", "NWBFile")?;
    let c = layout.chunked;

    let units = file.create_group("units")?;
    str_attr(&units, "neurodata_type", "Units")?;
    let grouped = [0.03, 0.25, 0.75, 1.5, 0.1, 0.5, 2.0, 0.1, 1.0, 2.5];
    if layout.narrow {
        column(&units, "id", &[6u8, 191, 206], c)?;
        column(&units, "spike_times_index", &[4u32, 7, 10], c)?;
        let t32: Vec<f32> = grouped.iter().map(|&t| t as f32).collect();
        column(&units, "spike_times", &t32, c)?;
        column(&units, "shank", &[0i16, 1, 1], c)?;
    } else {
        column(&units, "id", &[6i64, 191, 206], c)?;
        column(&units, "spike_times_index", &[4u64, 7, 10], c)?;
        column(&units, "spike_times", &grouped, c)?;
        column(&units, "shank", &[0i32, 1, 1], c)?;
    }
    let locations = [vlu("adn")?, vlu("")?, vlu("PoSub")?];
    column(&units, "location", &locations, c)?;
    column(&units, "depth", &[120.5f64, 80.0, -3.25], c)?;

    let epochs = file.create_group("intervals")?.create_group("epochs")?;
    str_attr(&epochs, "neurodata_type", "TimeIntervals")?;
    column(&epochs, "start_time", &[0.0f64, 1.0, 2.0], c)?;
    column(&epochs, "stop_time", &[1.0f64, 2.0, 2.75], c)?;
    let tags = [vlu("sleep")?, vlu("wake")?, vlu("wake")?, vlu("rem")?];
    column(&epochs, "tags", &tags, c)?;
    if layout.narrow {
        column(&epochs, "tags_index", &[1i32, 2, 4], c)?;
    } else {
        column(&epochs, "tags_index", &[1u64, 2, 4], c)?;
    }

    let acquisition = file.create_group("acquisition")?;
    let rz = acquisition
        .create_group("CompassDirection")?
        .create_group("rz")?;
    str_attr(&rz, "neurodata_type", "SpatialSeries")?;
    let samples: Vec<f64> = (0..12).map(|i| f64::from(i) * 0.5).collect();
    let stamps: Vec<f64> = (0..12).map(|i| 670.6407 + f64::from(i) / 120.0).collect();
    if layout.narrow {
        let s32: Vec<f32> = samples.iter().map(|&v| v as f32).collect();
        column(&rz, "data", &s32, c)?;
    } else {
        column(&rz, "data", &samples, c)?;
    }
    column(&rz, "timestamps", &stamps, c)?;

    let regular = acquisition.create_group("regular")?;
    str_attr(&regular, "neurodata_type", "TimeSeries")?;
    let values: Vec<i16> = (0..16).map(|i| i * 3 - 20).collect();
    let data = regular.new_dataset::<i16>().shape([8, 2]).create("data")?;
    data.write_raw(&values)?;
    let start = regular.new_dataset::<f64>().create("starting_time")?;
    start.write_scalar(&0.5f64)?;
    start
        .new_attr::<f64>()
        .create("rate")?
        .write_scalar(&250.0f64)?;
    file.flush()?;
    Ok(())
}

fn nwb(_root: &Path, dir: &Path) -> Result<()> {
    synfire::ingest::nwb::write_units(&dir.join("write-units.nwb"), &small_stream()?)?;
    let layouts = [
        (
            "earliest-contiguous.nwb",
            NwbLayout {
                latest: false,
                chunked: false,
                narrow: false,
            },
        ),
        (
            "earliest-chunked-deflate.nwb",
            NwbLayout {
                latest: false,
                chunked: true,
                narrow: false,
            },
        ),
        (
            "latest-contiguous.nwb",
            NwbLayout {
                latest: true,
                chunked: false,
                narrow: false,
            },
        ),
        (
            "latest-chunked-narrow.nwb",
            NwbLayout {
                latest: true,
                chunked: true,
                narrow: true,
            },
        ),
    ];
    for (name, layout) in layouts {
        write_nwb(&dir.join(name), layout)?;
    }
    // Each written file must read back: a seed the readers refuse seeds nothing.
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        synfire::ingest::nwb::read_units(&path, Ordering::RequireSorted)
            .map_err(|e| format!("seed {}: {e}", path.display()))?;
        if path.file_name().is_some_and(|n| n != "write-units.nwb") {
            synfire::ingest::nwb::unit_column(&path, "location")?;
            synfire::ingest::nwb::epochs(&path, "epochs", &["wake".to_owned()])?;
            synfire::ingest::nwb::read_timeseries(&path, "/acquisition/CompassDirection/rz")?;
            synfire::ingest::nwb::read_timeseries(&path, "/acquisition/regular")?;
        }
    }
    Ok(())
}
