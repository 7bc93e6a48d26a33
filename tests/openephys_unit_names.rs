//! One unit naming for both Open Ephys Event Broadcaster modes: the same spikes published as
//! JSON and as raw binary give identical unit names, and those are the names a binary
//! recording of the same electrodes gets.
//!
//! The messages come from the independent emulator `../shared/tools/openephys_publisher.py`
//! (run with a stand-in `zmq` module that records what it would send, so neither pyzmq nor a
//! socket is needed) when it is there, and always from the same layouts built here
//! (`struct.pack('<BBHHHqdH', 2, 0, 104, 0, electrode, n, n / rate, sorted_id)` and the JSON
//! object the emulator writes).

use std::path::Path;
use std::process::Command;

use synfire::ingest::openephys::{Event, Naming, UnitKey, decode, decode_with};

/// `(sample number, cluster id)` of the spikes: electrode `cid % 32`, sorted id `cid / 32 + 1`
/// in the emulator.
fn spikes() -> Vec<(i64, u32)> {
    (0..200u32)
        .map(|i| (i64::from(i) * 97 + 3, (i * 37) % 96))
        .collect()
}

fn built_here(format: &str) -> Vec<Vec<Vec<u8>>> {
    spikes()
        .into_iter()
        .map(|(n, cid)| {
            let (electrode, sorted) = (cid % 32, cid / 32 + 1);
            let body = if format == "json" {
                serde_json::to_vec_pretty(&serde_json::json!({
                    "event_type": "spike", "stream": "ProbeA-AP", "source_node": 104,
                    "electrode": format!("Electrode {}", electrode + 1), "num_channels": 1,
                    "sample_rate": 30000.0, "sample_number": n, "sorted_id": sorted,
                    "amp1": 55.0,
                }))
                .unwrap()
            } else {
                let mut b = vec![2u8, 0];
                b.extend_from_slice(&104u16.to_le_bytes());
                b.extend_from_slice(&0u16.to_le_bytes());
                b.extend_from_slice(&(electrode as u16).to_le_bytes());
                b.extend_from_slice(&n.to_le_bytes());
                b.extend_from_slice(&(n as f64 / 30000.0).to_le_bytes());
                b.extend_from_slice(&(sorted as u16).to_le_bytes());
                b.extend_from_slice(&(-40f32).to_le_bytes());
                b.extend_from_slice(&[0; 160]);
                b
            };
            vec![1u16.to_le_bytes().to_vec(), body]
        })
        .collect()
}

const STUB_ZMQ: &str = r#"
import os, time
time.sleep = lambda s: None
PUB = 1
SNDHWM = 23
_out = open(os.environ["SYNFIRE_STUB_OUT"], "w")
class _Socket:
    def setsockopt(self, *a): pass
    def bind(self, *a): pass
    def close(self, *a): _out.flush()
    def send_multipart(self, frames):
        _out.write(" ".join(f.hex() for f in frames) + "\n")
class Context:
    def socket(self, kind): return _Socket()
    def term(self): _out.close()
"#;

/// The emulator's messages for `format`, or `None` when the emulator is not there.
fn from_emulator(format: &str) -> Option<Vec<Vec<Vec<u8>>>> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/openephys_publisher.py");
    if !script.is_file() {
        eprintln!(
            "note: {} not found; the emulator's messages are not checked",
            script.display()
        );
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("zmq.py"), STUB_ZMQ).unwrap();
    let mut csv = String::from("spike_time_s,cluster_id\n");
    for (n, cid) in spikes() {
        csv.push_str(&format!("{},{cid}\n", n as f64 / 30000.0));
    }
    let csv_path = tmp.path().join("spikes.csv");
    std::fs::write(&csv_path, csv).unwrap();
    let out = tmp.path().join(format!("{format}.txt"));
    let status = Command::new("python3")
        .arg(&script)
        .arg(&csv_path)
        .args([
            "--format",
            format,
            "--speed",
            "1e12",
            "--ttl-every-s",
            "1e9",
        ])
        .env("PYTHONPATH", tmp.path())
        .env("SYNFIRE_STUB_OUT", &out)
        .status()
        .expect("python3 runs the emulator");
    assert!(status.success(), "the emulator failed ({format})");
    let text = std::fs::read_to_string(&out).unwrap();
    Some(
        text.lines()
            .map(|l| l.split(' ').map(hex).collect())
            .collect(),
    )
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn names(messages: &[Vec<Vec<u8>>], naming: &Naming) -> Vec<(String, f64)> {
    messages
        .iter()
        .filter_map(|m| match decode_with(m, naming).unwrap() {
            Event::Spike { unit, t_s } => Some((unit, t_s)),
            Event::Ttl => None,
        })
        .collect()
}

#[test]
fn json_and_raw_modes_name_every_spike_alike() {
    let mut sources = vec![("built here", built_here("json"), built_here("raw"))];
    if let (Some(json), Some(raw)) = (from_emulator("json"), from_emulator("raw")) {
        sources.push(("emulator", json, raw));
    }
    for (source, json, raw) in &sources {
        for key in [UnitKey::ElectrodeSortedId, UnitKey::Electrode] {
            let naming = Naming::from(key);
            let (j, r) = (names(json, &naming), names(raw, &naming));
            assert_eq!(j.len(), spikes().len(), "{source}");
            assert_eq!(r.len(), j.len(), "{source}");
            for ((ju, jt), (ru, rt)) in j.iter().zip(&r) {
                assert_eq!(ju, ru, "{source}, {key:?}");
                assert!((jt - rt).abs() < 1e-12, "{source}: {jt} vs {rt}");
            }
        }
        let j = names(json, &Naming::from(UnitKey::ElectrodeSortedId));
        assert_eq!(
            j[1].0, "Electrode 6/2",
            "{source}: cid 37 is electrode 5 (0-based), sorted 2"
        );
        // `full` carries the stream: raw mode needs its name, which it does not send.
        let full = Naming {
            key: UnitKey::Full,
            raw_stream: Some("ProbeA-AP".into()),
            raw_electrodes: Vec::new(),
        };
        assert_eq!(names(json, &full), names(raw, &full), "{source}");
        assert_eq!(names(json, &full)[1].0, "ProbeA-AP/Electrode 6/2");
        assert_eq!(
            names(raw, &Naming::from(UnitKey::Full))[1].0,
            "0/Electrode 6/2"
        );
    }
}

#[test]
fn raw_mode_takes_renamed_electrodes_from_the_table() {
    let raw = built_here("raw");
    let json: Vec<Vec<Vec<u8>>> = built_here("json")
        .into_iter()
        .map(|mut m| {
            let text = String::from_utf8(m[1].clone()).unwrap();
            m[1] = text.replace("\"Electrode ", "\"CA1 tt").into_bytes();
            m
        })
        .collect();
    let naming = Naming {
        key: UnitKey::ElectrodeSortedId,
        raw_stream: None,
        raw_electrodes: (1..=32).map(|e| format!("CA1 tt{e}")).collect(),
    };
    assert_eq!(names(&json, &naming), names(&raw, &naming));
    // Without the table, raw mode falls back to the Spike Detector's default names.
    assert_eq!(
        names(&raw, &Naming::default())[0].0,
        "Electrode 1/1",
        "sorted id 1, electrode index 0"
    );
    // The default key is electrode/sorted id, through `decode` too.
    assert_eq!(
        decode(&raw[0], UnitKey::default()).unwrap(),
        Event::Spike {
            unit: "Electrode 1/1".into(),
            t_s: 3.0 / 30000.0
        }
    );
}
