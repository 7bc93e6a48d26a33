//! Every crash, hang or out-of-memory the fuzz targets (`fuzz/`, `tools/fuzz.sh`) found, as
//! the input that found it (or a minimal equivalent) and the answer a reader must give: a named
//! error, never a panic. A bug outside synfire (in a C library) is here too, `#[ignore]`d with
//! the reason, so that it is re-checked when the library is updated (`cargo test --release
//! --test fuzz_regressions -- --ignored`).

use std::path::Path;
use std::time::Duration;

use synfire::event::Ordering;
use synfire::ingest::IngestError;
use synfire::ingest::phy::{PhyOptions, read_phy};
use synfire::ingest::wire::{Malformed, decode};

/// Fuzz target `wire`, found on the first run: a sensor frame whose `count × channels × 8`
/// overflows `usize`. The decoder multiplied unchecked: with overflow checks (the fuzz build)
/// `attempt to multiply with overflow` at `src/ingest/wire.rs`; without (release), the size
/// wrapped, and when it wrapped to exactly the body's length the decoder collected
/// `count × channels` samples: a `capacity overflow` panic on the ZeroMQ source thread, from
/// one hostile message.
#[test]
fn wire_sensor_frame_whose_byte_size_overflows_is_bad_shape() {
    // As the fuzzer found it: count = channels = 0xeeeeeeee, 61 body bytes.
    let found: &[u8] = &[
        0x53, 0x59, 0x4e, 0x46, 0x01, 0x00, 0x02, 0x00, 0x0a, 0x0a, 0x01, 0x00, 0x00, 0xee, 0xee,
        0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
        0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
        0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
        0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00,
        0x53, 0x68, 0x59, 0x4e, 0x46, 0x01, 0x00, 0x00, 0x00, 0x00, 0x20, 0x00, 0x00, 0x00, 0x40,
        0x20, 0xff, 0x00,
    ];
    assert_eq!(decode(found), Err(Malformed::BadShape));

    // Minimal, and the one that panicked in release: count 2^31 × channels 2^30 × 8 bytes
    // = 2^64, which wrapped to 0, so a 16-byte body (t0, rate) matched.
    let mut wrapped = Vec::new();
    wrapped.extend_from_slice(b"SYNF");
    wrapped.extend_from_slice(&1u16.to_le_bytes()); // version
    wrapped.extend_from_slice(&2u16.to_le_bytes()); // sensor frame
    wrapped.extend_from_slice(&0u64.to_le_bytes()); // session
    wrapped.extend_from_slice(&0u64.to_le_bytes()); // first sample
    wrapped.extend_from_slice(&(1u32 << 31).to_le_bytes()); // samples
    wrapped.extend_from_slice(&(1u32 << 30).to_le_bytes()); // channels
    wrapped.extend_from_slice(&0f64.to_le_bytes()); // t0_s
    wrapped.extend_from_slice(&1f64.to_le_bytes()); // rate_hz
    assert_eq!(wrapped.len(), 48);
    assert_eq!(decode(&wrapped), Err(Malformed::BadShape));
}

/// A version-1 `.npy` file of `<i8` values with the header dictionary `dict` (the shape as
/// written, whatever it says) and `values` after it.
fn npy(dict: &str, values: &[i64]) -> Vec<u8> {
    let mut header = dict.to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&u16::try_from(header.len()).unwrap().to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Fuzz target `phy` (found by reading npyz after the target ran clean for 10^6 inputs; the
/// target's dictionary holds the shape below): a `.npy` header whose dimensions multiply past
/// `u64`. npyz computes the element count and strides unchecked while parsing the header, so
/// `read_phy` panicked (`attempt to multiply with overflow` in `NpyHeader::from_parts`) in any
/// build with overflow checks (debug builds, the fuzz build) before synfire's own shape check;
/// a release build wrapped the count silently. Now a named error before npyz sees the file,
/// for every spelling npyz reads (a repeated key, Python integer forms, a product that
/// overflows before a zero dimension).
#[test]
fn phy_npy_shape_whose_element_count_overflows_is_refused() {
    let shapes = [
        "{'descr': '<i8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
        "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0), }",
        "{'descr': '<i8', 'fortran_order': True, 'shape': [0x1_0000_0000, 0o40000000000], }",
        "{'shape': (1,), 'descr': '<i8', 'fortran_order': False, \"shape\": (3, 6148914691236517206), }",
    ];
    for dict in shapes {
        let dir = phy_folder(&npy(dict, &[10]));
        let options = PhyOptions {
            ordering: Ordering::RequireSorted,
            ..PhyOptions::default()
        };
        match read_phy(dir.path(), &options) {
            Err(e @ IngestError::BadFile { .. }) => {
                let m = e.to_string();
                assert!(
                    m.contains("spike_times.npy")
                        && m.contains("more elements than fit in 64 bits"),
                    "{dict}: {m}"
                );
            }
            other => panic!("{dict}: expected BadFile, got {other:?}"),
        }
    }
}

/// A phy folder holding `spike_times.npy` = `times` and a one-spike `spike_clusters.npy` and
/// `params.py`.
fn phy_folder(times: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("spike_times.npy"), times).unwrap();
    std::fs::write(
        dir.path().join("spike_clusters.npy"),
        npy(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
            &[3],
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("params.py"), "sample_rate = 30000.\n").unwrap();
    dir
}

/// Fuzz target `phy` (timeouts, 2 in 10^6 inputs): a `.npy` header of deeply nested brackets.
/// npyz parses headers with py_literal, a PEG grammar that backtracks exponentially in the
/// nesting depth (the time doubles per level; 16 levels take 2 s, the input found here
/// hours), so `read_phy` hung on a 165-byte file. Now a named error before npyz parses it: a
/// phy array's header is a flat dictionary.
#[test]
fn phy_npy_header_of_nested_brackets_is_refused_at_once() {
    // As the fuzzer found it (the whole `spike_times.npy`).
    let found: &[u8] =
        b"\x93NUMPY\x01\x00v\x00{'descr':    [[[[[[[[[[[[[[[[[[[[[[[[ (((((((((((.((((((\x5c\
        \x5c\x5c\x5c\x5cU\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5cr': '<u4', 'fo'\x5c\x5c\x5c\
        \x0d\x0a\x5c\x5c\x5c\x5c\x5ct\x5c\x5c\x5c'L\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\
        \x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x5c\x00\x00\x00\x00\x00\x00\x1c\x01\x00}\
        \x00\x00\x00\x007\x01\x00\x00\x00\x00\x04\x00der': Fa\x04";
    let crafted = npy(&format!("{{'descr': {}", "{".repeat(100)), &[]);
    for times in [found.to_vec(), crafted] {
        let dir = phy_folder(&times);
        let path = dir.path().to_path_buf();
        let result = within(Duration::from_secs(10), move || {
            read_phy(&path, &PhyOptions::default()).map_err(|e| e.to_string())
        })
        .expect("read_phy returns within 10 s");
        let m = result.expect_err("a header of nested brackets is refused");
        assert!(
            m.contains("spike_times.npy") && m.contains("brackets in its header"),
            "{m}"
        );
    }
}

/// Runs `f` on a thread of its own and waits at most `limit` for it; `None` if it is still
/// running (a thread cannot be stopped: it keeps spinning until the test process exits).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("fuzz-regression".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .expect("spawn the reader's thread");
    rx.recv_timeout(limit).ok()
}

/// Fuzz targets `nwb_unit_column` and `nwb_epochs` (timeouts; the real fixture with 10 bytes
/// changed reproduces them): an HDF5 global heap collection (`GCOL`, where variable-length
/// strings live) whose first object has index 0 (free space) and size 0. HDF5 2.0.0 (built by
/// hdf5-metno-src 0.10.1) loops forever in `H5HG__cache_heap_deserialize`, which advances by
/// the object's size; any read of a string column (`unit_column`, `epochs`' `tags`) never
/// returns. The loop is in the C library, not in synfire's reader, so this stays ignored until
/// a fixed HDF5 is built; the fuzz targets skip such inputs (`synfire_fuzz::hdf5_known_hang`)
/// to keep looking for other bugs.
#[test]
#[ignore = "upstream HDF5 2.0.0 bug: H5HG__cache_heap_deserialize loops on a zero-size global \
            heap object; run with --ignored after updating hdf5-metno-src"]
fn nwb_global_heap_zero_size_object_hangs_hdf5() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/spikes/A8604-211122/A8604-211122.nwb");
    let mut bytes = std::fs::read(&fixture).unwrap();
    let gcol = bytes
        .windows(4)
        .position(|w| w == b"GCOL")
        .expect("the fixture has a global heap");
    let object = gcol + 16; // after magic, version, reserved, collection size
    bytes[object..object + 2].copy_from_slice(&0u16.to_le_bytes()); // heap object index 0
    bytes[object + 8..object + 16].copy_from_slice(&0u64.to_le_bytes()); // object size 0
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zero-size-gcol-object.nwb");
    std::fs::write(&path, &bytes).unwrap();

    let returned = within(Duration::from_secs(30), move || {
        synfire::ingest::nwb::epochs(&path, "epochs", &["wake".to_owned()])
            .map_err(|e| e.to_string())
    });
    assert!(
        returned.is_some(),
        "epochs() on a global heap with a zero-size object did not return within 30 s"
    );
}

/// This process's peak resident memory (`VmHWM` of `/proc/self/status`), bytes; 0 where there
/// is no such file.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Fuzz targets `nwb_unit_column` and `nwb_epochs` (out-of-memory at libFuzzer's 2 GiB
/// limit, and in CI at 5 GiB on 2026-11-25; the real fixture with 4 bytes changed reproduces
/// them): a variable-length string whose on-disk length (a `u32` before its global heap
/// reference) says 4 GB. HDF5 2.0.0's `H5T__conv_vlen` allocates and zero-fills a conversion
/// buffer of that length (two of them for two such strings) before it reads the heap object
/// and finds it too short, so a 442 KB file made `unit_column` touch ~4 GB before its error.
/// The reader now checks every stored length against the file's size before HDF5 converts
/// (`check_string_lengths` in `src/ingest/nwb/tables.rs`): a named error, no allocation.
#[test]
fn nwb_string_with_a_4_gb_length_is_refused_before_hdf5_allocates_it() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/spikes/A8604-211122/A8604-211122.nwb");
    let offset = {
        let file = hdf5::File::open(&fixture).unwrap();
        let ds = file.dataset("units/location").unwrap();
        ds.offset()
            .expect("`/units/location` is contiguous in the fixture")
    };
    let mut bytes = std::fs::read(&fixture).unwrap();
    let at = usize::try_from(offset).unwrap();
    // Element 0: the length (u32) of a variable-length string, then its global heap reference.
    bytes[at..at + 4].copy_from_slice(&0xF000_0000u32.to_le_bytes());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vlen-length-4gb.nwb");
    std::fs::write(&path, &bytes).unwrap();

    let result = synfire::ingest::nwb::unit_column(&path, "location");
    let message = result
        .expect_err("a 4 GB string in a 442 KB file")
        .to_string();
    assert!(
        message.contains("string 0 has a stored length of 4026531840 bytes"),
        "{message}"
    );
    let peak = peak_rss_bytes();
    assert!(
        peak < 1 << 30,
        "reading three strings of a 442 KB file peaked at {} MB of memory",
        peak >> 20
    );
}

/// Fuzz target `phy` (a crash in 10^7 inputs, 2026-11-26): a cluster TSV whose `cluster_id`
/// is its third column and which has no group column. The fallback for a two-column
/// `cluster_group.tsv` computed the other column `1 - id_col` eagerly (`bool::then_some`),
/// an overflow (a panic with overflow checks, as in the fuzz build and `cargo test` without
/// `--release`) for `id_col = 2`. Now the other column is computed only for two columns.
#[test]
fn phy_cluster_tsv_with_its_id_in_a_later_column_reads() {
    let dir = phy_folder(&npy(
        "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
        &[30],
    ));
    // cluster_info.tsv: `cluster_id` third, no `group` column: no groups from it.
    std::fs::write(
        dir.path().join("cluster_info.tsv"),
        "Amplitude\tKSLabel\tcluster_id\n20.5\tgood\t3\n",
    )
    .unwrap();
    // A two-column cluster_group.tsv with the id second and an unnamed value column.
    std::fs::write(
        dir.path().join("cluster_group.tsv"),
        "label\tcluster_id\nmua\t3\n",
    )
    .unwrap();
    let read = read_phy(dir.path(), &PhyOptions::default()).expect("reads");
    // cluster_group.tsv names cluster 3 `mua` (its second column is the id, the first the
    // value); cluster_info.tsv adds nothing.
    assert_eq!(read.clusters.len(), 1);
    assert_eq!(
        (read.clusters[0].id, read.clusters[0].group.as_str()),
        (3, "mua")
    );
    assert_eq!(read.stream.len(), 1);
}

/// The same damage in a chunked, unfiltered string column (h5py writes one for a resizable
/// column): `epochs` reads the table intact, and with the third tag's stored length set to
/// 4 GB refuses it by name, without the allocation.
#[test]
fn nwb_chunked_string_with_a_4_gb_length_is_refused_before_hdf5_allocates_it() {
    use hdf5::types::VarLenUnicode;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chunked-tags.nwb");
    {
        let file = hdf5::File::create(&path).unwrap();
        let epochs = file
            .create_group("intervals")
            .and_then(|g| g.create_group("epochs"))
            .unwrap();
        let write_f64 = |name: &str, v: &[f64]| {
            epochs
                .new_dataset_builder()
                .with_data(v)
                .create(name)
                .unwrap();
        };
        write_f64("start_time", &[0.0, 10.0, 20.0, 30.0, 40.0]);
        write_f64("stop_time", &[5.0, 15.0, 25.0, 35.0, 45.0]);
        let tags: Vec<VarLenUnicode> = ["wake", "sleep", "wake", "sleep", "wake"]
            .iter()
            .map(|t| t.parse().unwrap())
            .collect();
        epochs
            .new_dataset_builder()
            .chunk(2)
            .with_data(&tags)
            .create("tags")
            .unwrap();
        epochs
            .new_dataset_builder()
            .with_data(&[1u64, 2, 3, 4, 5])
            .create("tags_index")
            .unwrap();
    }
    let wake = ["wake".to_owned()];
    let intact = synfire::ingest::nwb::epochs(&path, "epochs", &wake).unwrap();
    assert_eq!(intact, vec![(0.0, 5.0), (20.0, 25.0), (40.0, 45.0)]);

    // The second chunk (elements 2 and 3): its first descriptor is element 2's.
    let addr = {
        let file = hdf5::File::open(&path).unwrap();
        let tags = file.dataset("intervals/epochs/tags").unwrap();
        assert!(tags.is_chunked() && tags.filters().is_empty());
        let mut second = None;
        tags.chunks_visit(|c| {
            if c.offset == [2] {
                second = Some(c.addr);
            }
            0
        })
        .unwrap();
        second.expect("a chunk at element 2")
    };
    let mut bytes = std::fs::read(&path).unwrap();
    let at = usize::try_from(addr).unwrap();
    bytes[at..at + 4].copy_from_slice(&0xF000_0000u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let message = synfire::ingest::nwb::epochs(&path, "epochs", &wake)
        .expect_err("a 4 GB tag in a small file")
        .to_string();
    assert!(
        message.contains("string 2 has a stored length of 4026531840 bytes"),
        "{message}"
    );
    let peak = peak_rss_bytes();
    assert!(peak < 1 << 30, "peaked at {} MB of memory", peak >> 20);
}

/// Fuzz target `nwb_epochs` (out-of-memory in the run that took it past 10^7 inputs,
/// 2026-11-26; the real fixture with one byte changed, found by reducing the fuzzer's input):
/// byte 18,176, the first byte of the `intervals` group's local heap free-list entry after the
/// name `epochs`, changed from 0x01 to 0x10. Listing the group's links then makes HDF5
/// allocate without bound (24 GB before the kernel stopped it here); h5py's HDF5 1.14 does the
/// same ("memory allocation failed for chunk" under a 3 GB limit). The allocation is in the C
/// library's local heap and B-tree code, reached by any read below `/intervals`, not in
/// synfire's reader, so this stays ignored until a fixed HDF5 is built. The test runs the
/// command line under a 2 GB address-space limit, so running it is safe: there HDF5's
/// allocation fails, the link looks absent, and the reader reports the table missing, which
/// fails the test; a fixed HDF5 finds `/intervals/epochs`.
#[test]
#[ignore = "upstream HDF5 2.0.0 (and 1.14): a damaged local heap free list makes link \
            iteration allocate without bound; run with --ignored after updating hdf5-metno-src"]
fn nwb_local_heap_free_list_damage_exhausts_memory_in_hdf5() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/spikes/A8604-211122/A8604-211122.nwb");
    let mut bytes = std::fs::read(&fixture).unwrap();
    assert_eq!(
        &bytes[18_168..18_174],
        b"epochs",
        "the fixture's layout changed"
    );
    assert_eq!(bytes[18_176], 0x01);
    bytes[18_176] = 0x10;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("local-heap-free-list.nwb");
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("ulimit -v 2000000; exec \"$0\" mine \"$1\" --intervals 0-0.005 --epochs wake")
        .arg(env!("CARGO_BIN_EXE_synfire"))
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Under the limit HDF5's allocation fails, the link looks absent and the reader says the
    // table is missing: the bug. A fixed library finds `/intervals/epochs`.
    assert!(
        !stderr.contains("no such TimeIntervals table"),
        "exit {:?}: {}",
        out.status.code(),
        &stderr[stderr.len().saturating_sub(2000)..]
    );
}
