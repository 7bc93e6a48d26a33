//! Shared pieces of synfire's fuzz targets (`fuzz_targets/*.rs`): scratch files for the
//! readers that take a path, the input layouts of the structure-aware targets (each with its
//! encoder, so `fuzz-seeds` writes seeds the targets read back), the HDF5 metadata mutator of
//! the NWB targets, and the checks every target runs on what a reader accepted.
//!
//! A target fails only on a panic, an abort, a hang (`-timeout`) or running out of memory
//! (`-rss_limit_mb`), or when a reader's documented guarantee (asserted here) does not hold;
//! an `Err` from a reader is a correct answer to a malformed input.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use synfire::event::{EventStream, Ordering};
use synfire::ingest::csv::Columns;
use synfire::ingest::openephys::UnitKey;
use synfire::ingest::openephys_binary::OpenEphysOptions;
use synfire::ingest::phy::PhyOptions;

// ------------------------------------------------------------------------------------------
// Scratch files

/// This process's scratch folder: `$SYNFIRE_FUZZ_TMP/p<pid>` (`tools/fuzz.sh` points
/// `SYNFIRE_FUZZ_TMP` at a fresh folder on tmpfs and removes it afterwards), else
/// `/dev/shm/synfire-fuzz/p<pid>`, else the system temp folder.
///
/// # Panics
/// If the folder cannot be created (the harness cannot run at all).
pub fn scratch_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let base = std::env::var_os("SYNFIRE_FUZZ_TMP")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let shm = Path::new("/dev/shm");
                if shm.is_dir() {
                    shm.join("synfire-fuzz")
                } else {
                    std::env::temp_dir().join("synfire-fuzz")
                }
            });
        let dir = base.join(format!("p{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create the scratch folder {}: {e}", dir.display()));
        dir
    })
}

fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, AtomicOrdering::Relaxed)
}

/// A file or folder under [`scratch_root`], removed on drop. Every input gets a new name, so
/// a library that keeps a file open by name (HDF5 does, while any object of it lives) never
/// sees the previous input under it.
pub struct Scratch {
    /// The file or folder.
    pub path: PathBuf,
}

impl Scratch {
    /// `bytes` written to a new file named `input-<n>.<ext>`.
    ///
    /// # Panics
    /// If the file cannot be written.
    #[must_use]
    pub fn file(bytes: &[u8], ext: &str) -> Self {
        let path = scratch_root().join(format!("input-{}.{ext}", next_id()));
        std::fs::write(&path, bytes)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        Self { path }
    }

    /// A new folder holding `files` (name, contents).
    ///
    /// # Panics
    /// If the folder or a file cannot be written.
    #[must_use]
    pub fn folder(files: &[(&str, &[u8])]) -> Self {
        let path = scratch_root().join(format!("dir-{}", next_id()));
        std::fs::create_dir(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        for (name, bytes) in files {
            let file = path.join(name);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)
                    .unwrap_or_else(|e| panic!("cannot create {}: {e}", parent.display()));
            }
            std::fs::write(&file, bytes)
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", file.display()));
        }
        Self { path }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.path.is_dir() {
            let _ = std::fs::remove_dir_all(&self.path);
        } else {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

// ------------------------------------------------------------------------------------------
// Checks on accepted inputs

/// What every reader that returns an [`EventStream`] promises (`event.rs`): times finite,
/// `>= 0` and non-decreasing, one type per time, every type in the alphabet.
///
/// # Panics
/// When the stream breaks one of them.
pub fn check_stream(stream: &EventStream) {
    let times = stream.times();
    let types = stream.types();
    assert_eq!(times.len(), types.len(), "times and types differ in length");
    assert!(
        times.iter().all(|t| t.is_finite() && *t >= 0.0),
        "a time is not finite or negative"
    );
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "times are not sorted"
    );
    let k = stream.alphabet().len();
    assert!(
        types.iter().all(|t| t.index() < k),
        "a type outside the alphabet"
    );
    let counts: u64 = stream.counts_per_type().iter().sum();
    assert_eq!(counts, times.len() as u64, "counts per type do not add up");
}

/// `(time bits, label)` of every event, sorted: the stream's content independent of type ids
/// and of the order of equal times.
#[must_use]
pub fn labelled_events(stream: &EventStream) -> Vec<(u64, String)> {
    let mut v: Vec<(u64, String)> = stream
        .iter()
        .map(|(t, ty)| (t.to_bits(), stream.alphabet().label(ty).to_owned()))
        .collect();
    v.sort();
    v
}

// ------------------------------------------------------------------------------------------
// A small deterministic generator for the mutators

/// xorshift64*, seeded by libFuzzer's mutation seed.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded by `seed`.
    #[must_use]
    pub fn new(seed: u32) -> Self {
        Self(u64::from(seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

// ------------------------------------------------------------------------------------------
// HDF5 metadata mutator (NWB targets)

/// Signatures of HDF5 metadata blocks (format spec, "Disk Format: Level 0/1"): superblock,
/// v2 object header and continuation, v1 B-tree, local heap, global heap, symbol table node,
/// v2 B-tree header/internal/leaf, fractal heap header/direct/indirect block, free-space
/// manager header/section list, extensible and fixed array blocks (chunk indexes).
pub const HDF5_SIGNATURES: &[&[u8]] = &[
    b"\x89HDF\r\n\x1a\n",
    b"OHDR",
    b"OCHK",
    b"TREE",
    b"HEAP",
    b"GCOL",
    b"SNOD",
    b"BTHD",
    b"BTIN",
    b"BTLF",
    b"FRHP",
    b"FHDB",
    b"FHIB",
    b"FSHD",
    b"FSSE",
    b"EAHD",
    b"EAIB",
    b"EASB",
    b"EADB",
    b"FAHD",
    b"FADB",
];

unsafe extern "C" {
    fn synfire_fuzz_hdf5_signatures(d: *const u8, n: usize, out: *mut usize, cap: usize) -> usize;
    fn synfire_fuzz_gcol_hang(d: *const u8, n: usize) -> std::ffi::c_int;
    fn synfire_fuzz_local_heap_cycle(d: *const u8, n: usize) -> std::ffi::c_int;
}

/// Offsets of every HDF5 metadata signature in `data` (a C scan, `src/scan.c`: not
/// instrumented, so neither slow nor a source of coverage of the harness itself).
#[must_use]
pub fn hdf5_metadata_offsets(data: &[u8]) -> Vec<usize> {
    let mut out = vec![0usize; 4096];
    // SAFETY: `data` and `out` are valid for `data.len()` and `out.len()` elements; the scan
    // reads only `data` and writes at most `out.len()` offsets.
    let n = unsafe {
        synfire_fuzz_hdf5_signatures(data.as_ptr(), data.len(), out.as_mut_ptr(), out.len())
    };
    out.truncate(n.min(out.len()));
    out
}

/// The NWB targets' mutator: half the time libFuzzer's own mutations anywhere; otherwise 1–4
/// edits (bit flips, interesting bytes, small deltas, 2/4/8-byte little-endian addresses and
/// lengths such as 0, the file size, all ones) within 128 bytes after an HDF5 metadata
/// signature (or in the first 2 KiB, where a version-0 file keeps its superblock and root
/// group), where byte flips reach the parser instead of the raw data.
pub fn hdf5_mutate(data: &mut [u8], size: usize, max_size: usize, seed: u32) -> usize {
    let mut rng = Rng::new(seed);
    if size < 16 || rng.below(2) == 0 {
        return libfuzzer_sys::fuzzer_mutate(data, size, max_size);
    }
    let offsets = hdf5_metadata_offsets(&data[..size]);
    let base = if offsets.is_empty() || rng.below(8) == 0 {
        rng.below(size.min(2048))
    } else {
        offsets[rng.below(offsets.len())]
    };
    let edits = 1 + rng.below(4);
    for _ in 0..edits {
        let at = base + rng.below(128);
        if at >= size {
            continue;
        }
        match rng.below(7) {
            0 => data[at] ^= 1 << rng.below(8),
            1 => data[at] = rng.next_u64() as u8,
            2 => data[at] = [0u8, 1, 2, 0x7f, 0x80, 0xfe, 0xff][rng.below(7)],
            3 => {
                let delta = 1 + rng.below(4) as u8;
                data[at] = if rng.below(2) == 0 {
                    data[at].wrapping_add(delta)
                } else {
                    data[at].wrapping_sub(delta)
                };
            }
            k => {
                let width = [2usize, 4, 8][k - 4];
                if at + width > size {
                    continue;
                }
                let value: u64 = match rng.below(8) {
                    0 => 0,
                    1 => u64::MAX,
                    2 => size as u64,
                    3 => (size as u64).saturating_sub(1 + rng.below(64) as u64),
                    4 => 1 << rng.below(63),
                    5 => rng.next_u64(),
                    6 => {
                        let mut old = [0u8; 8];
                        old[..width].copy_from_slice(&data[at..at + width]);
                        u64::from_le_bytes(old)
                            .wrapping_add(rng.below(17) as u64)
                            .wrapping_sub(8)
                    }
                    _ => rng.below(256) as u64,
                };
                data[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
            }
        }
    }
    size
}

/// Whether `data` holds one of two damaged HDF5 structures that HDF5 2.0.0 (the library
/// hdf5-metno-src 0.10.1 builds) never finishes reading. Both are upstream and not synfire's to
/// fix, each kept as an ignored test in `tests/fuzz_regressions.rs`, so the NWB targets skip
/// such inputs and keep looking for other bugs:
///
/// - a global heap collection (`GCOL`) that loops forever: `H5HG__cache_heap_deserialize`
///   walks the collection's objects with `p = begin + need`, and an object whose `need` is 0
///   (index 0 with size 0, or a size whose 8-byte alignment wraps `16 + size` to 0) never
///   advances (`nwb_global_heap_zero_size_object_hangs_hdf5`);
/// - a local heap (`HEAP`) whose free list returns to a block it has visited:
///   `H5HL__fl_deserialize` follows the list with no cycle check and allocates a node per step
///   until memory runs out (`nwb_local_heap_free_list_damage_exhausts_memory_in_hdf5`; the
///   `nwb_epochs` run past 10^7 inputs found it).
///
/// Assumes 8-byte lengths and addresses and base address 0 (the superblock's sizes in every
/// file h5py and hdf5-metno write). The walks are the C functions `synfire_fuzz_gcol_hang`
/// and `synfire_fuzz_local_heap_cycle` (`src/scan.c`), uninstrumented; the free-list walk is
/// Brent's cycle detection over HDF5's own steps and stops wherever HDF5 reports an error.
#[must_use]
pub fn hdf5_known_hang(data: &[u8]) -> bool {
    // SAFETY: `data` is valid for `data.len()` bytes, which is all either scan reads.
    unsafe {
        synfire_fuzz_gcol_hang(data.as_ptr(), data.len()) != 0
            || synfire_fuzz_local_heap_cycle(data.as_ptr(), data.len()) != 0
    }
}

// ------------------------------------------------------------------------------------------
// Input layouts of the structure-aware targets

/// The `csv` target's input: byte 0 = flags (bit 0: [`Ordering::SortIfNeeded`], bit 1: a time
/// column name follows, bit 2: a unit column name follows), then each name given up to its
/// `\n`, then the CSV text.
#[derive(Debug)]
pub struct CsvInput<'a> {
    /// Whether unsorted input is sorted.
    pub ordering: Ordering,
    /// The columns named.
    pub columns: Columns,
    /// The CSV text.
    pub text: &'a [u8],
}

fn split_line(b: &[u8]) -> (&[u8], &[u8]) {
    match b.iter().position(|&c| c == b'\n') {
        Some(i) => (&b[..i], &b[i + 1..]),
        None => (b, &[]),
    }
}

impl<'a> CsvInput<'a> {
    /// Splits a fuzz input.
    #[must_use]
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let (&flags, mut rest) = data.split_first()?;
        let mut name = |given: bool| -> Option<String> {
            if !given {
                return None;
            }
            let (line, after) = split_line(rest);
            rest = after;
            Some(String::from_utf8_lossy(line).into_owned())
        };
        let time = name(flags & 2 != 0);
        let unit = name(flags & 4 != 0);
        Some(Self {
            ordering: if flags & 1 != 0 {
                Ordering::SortIfNeeded
            } else {
                Ordering::RequireSorted
            },
            columns: Columns { time, unit },
            text: rest,
        })
    }

    /// The fuzz input of `text` read with these options.
    #[must_use]
    pub fn encode(
        ordering: Ordering,
        time: Option<&str>,
        unit: Option<&str>,
        text: &[u8],
    ) -> Vec<u8> {
        let mut flags = u8::from(ordering == Ordering::SortIfNeeded);
        let mut out = vec![0];
        if let Some(t) = time {
            flags |= 2;
            out.extend_from_slice(t.as_bytes());
            out.push(b'\n');
        }
        if let Some(u) = unit {
            flags |= 4;
            out.extend_from_slice(u.as_bytes());
            out.push(b'\n');
        }
        out[0] = flags;
        out.extend_from_slice(text);
        out
    }
}

/// The files a phy input can hold, by their number in the `phy` target's layout.
pub const PHY_FILES: &[&str] = &[
    "spike_times.npy",
    "spike_clusters.npy",
    "spike_templates.npy",
    "params.py",
    "cluster_group.tsv",
    "cluster_info.tsv",
    "cluster_KSLabel.tsv",
];

/// The `phy` target's input: byte 0 = options (bit 0: [`Ordering::SortIfNeeded`]; bits 1–2:
/// groups `None`, `["good"]`, `["good", "mua"]`, `[""]`; bit 3: a sample rate follows as 8
/// bytes f64 LE), then files, each `[u8 file number (mod 7, see PHY_FILES)][u32 LE length]
/// [bytes]` (a length past the end takes the rest; a repeated file replaces the earlier one).
#[derive(Debug)]
pub struct PhyInput<'a> {
    /// The reader's options.
    pub options: PhyOptions,
    /// `(file name, contents)`.
    pub files: Vec<(&'static str, &'a [u8])>,
}

impl<'a> PhyInput<'a> {
    /// Splits a fuzz input.
    #[must_use]
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let (&flags, mut rest) = data.split_first()?;
        let groups = match (flags >> 1) & 3 {
            0 => None,
            1 => Some(vec!["good".to_owned()]),
            2 => Some(vec!["good".to_owned(), "mua".to_owned()]),
            _ => Some(vec![String::new()]),
        };
        let sample_rate_hz = if flags & 8 != 0 {
            let (rate, after) = rest.split_at_checked(8)?;
            rest = after;
            Some(f64::from_le_bytes(rate.try_into().ok()?))
        } else {
            None
        };
        let mut files: Vec<(&'static str, &'a [u8])> = Vec::new();
        while let Some((&which, after)) = rest.split_first() {
            let Some((len, after)) = after.split_at_checked(4) else {
                break;
            };
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (body, after) = after.split_at(len.min(after.len()));
            let name = PHY_FILES[usize::from(which) % PHY_FILES.len()];
            files.retain(|(n, _)| *n != name);
            files.push((name, body));
            rest = after;
        }
        Some(Self {
            options: PhyOptions {
                ordering: if flags & 1 != 0 {
                    Ordering::SortIfNeeded
                } else {
                    Ordering::RequireSorted
                },
                groups,
                sample_rate_hz,
            },
            files,
        })
    }

    /// The fuzz input of these files; `groups`: 0 none, 1 `good`, 2 `good`+`mua`.
    #[must_use]
    pub fn encode(sort: bool, groups: u8, rate: Option<f64>, files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut flags = u8::from(sort) | ((groups & 3) << 1);
        if rate.is_some() {
            flags |= 8;
        }
        let mut out = vec![flags];
        if let Some(r) = rate {
            out.extend_from_slice(&r.to_le_bytes());
        }
        for (name, body) in files {
            let which = PHY_FILES
                .iter()
                .position(|n| n == name)
                .unwrap_or_else(|| panic!("{name} is not a phy file of the layout"));
            out.push(which as u8);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(body);
        }
        out
    }
}

/// The files an Open Ephys binary recording input can hold, by their number in the
/// `openephys_binary` target's layout: the `structure.oebin`, two GUI 0.6 electrode folders
/// (`spikes/a/`, `spikes/b/`) and one GUI 0.5 spike group (`spikes/g/`).
pub const OEBIN_FILES: &[&str] = &[
    "structure.oebin",
    "spikes/a/sample_numbers.npy",
    "spikes/a/timestamps.npy",
    "spikes/a/clusters.npy",
    "spikes/a/electrode_indices.npy",
    "spikes/b/sample_numbers.npy",
    "spikes/b/timestamps.npy",
    "spikes/b/clusters.npy",
    "spikes/b/electrode_indices.npy",
    "spikes/g/spike_times.npy",
    "spikes/g/spike_clusters.npy",
    "spikes/g/spike_electrode_indices.npy",
];

/// The `openephys_binary` target's input: byte 0 = options (bit 0:
/// [`Ordering::SortIfNeeded`]; bits 1–2: units `None`, `["sorted"]`, `["unsorted"]`,
/// `["good"]` (refused); bits 3–4: [`UnitKey`] `ElectrodeSortedId`, `Electrode`, `Full`,
/// `ElectrodeSortedId`), then files, each `[u8 file number (mod 12, see OEBIN_FILES)][u32 LE
/// length][bytes]` (a length past the end takes the rest; a repeated file replaces the
/// earlier one), written to a scratch recording folder.
#[derive(Debug)]
pub struct OebinInput<'a> {
    /// The reader's options.
    pub options: OpenEphysOptions,
    /// `(file path in the recording, contents)`.
    pub files: Vec<(&'static str, &'a [u8])>,
}

impl<'a> OebinInput<'a> {
    /// Splits a fuzz input.
    #[must_use]
    pub fn parse(data: &'a [u8]) -> Option<Self> {
        let (&flags, mut rest) = data.split_first()?;
        let units = match (flags >> 1) & 3 {
            0 => None,
            1 => Some(vec!["sorted".to_owned()]),
            2 => Some(vec!["unsorted".to_owned()]),
            _ => Some(vec!["good".to_owned()]),
        };
        let unit_key = match (flags >> 3) & 3 {
            1 => UnitKey::Electrode,
            2 => UnitKey::Full,
            _ => UnitKey::ElectrodeSortedId,
        };
        let mut files: Vec<(&'static str, &'a [u8])> = Vec::new();
        while let Some((&which, after)) = rest.split_first() {
            let Some((len, after)) = after.split_at_checked(4) else {
                break;
            };
            let len = u32::from_le_bytes(len.try_into().ok()?) as usize;
            let (body, after) = after.split_at(len.min(after.len()));
            let name = OEBIN_FILES[usize::from(which) % OEBIN_FILES.len()];
            files.retain(|(n, _)| *n != name);
            files.push((name, body));
            rest = after;
        }
        Some(Self {
            options: OpenEphysOptions {
                ordering: if flags & 1 != 0 {
                    Ordering::SortIfNeeded
                } else {
                    Ordering::RequireSorted
                },
                units,
                unit_key,
            },
            files,
        })
    }

    /// The fuzz input of these files; `units`: 0 all, 1 `sorted`, 2 `unsorted`; `key`: 0
    /// electrode and sorted id, 1 electrode, 2 full.
    ///
    /// # Panics
    /// When a file is not one of [`OEBIN_FILES`].
    #[must_use]
    pub fn encode(sort: bool, units: u8, key: u8, files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = vec![u8::from(sort) | ((units & 3) << 1) | ((key & 3) << 3)];
        for (name, body) in files {
            let which = OEBIN_FILES
                .iter()
                .position(|n| n == name)
                .unwrap_or_else(|| panic!("{name} is not a file of the Open Ephys layout"));
            out.push(which as u8);
            out.extend_from_slice(&(body.len() as u32).to_le_bytes());
            out.extend_from_slice(body);
        }
        out
    }
}

/// The Open Ephys targets' input: byte 0 = control, the rest = frame 1 (the body).
/// Control bits 0–1: [`UnitKey`] (`Full`, `Electrode`, `ElectrodeSortedId`, `Full`); bits
/// 2–3: frame 0 = spike (`0`, `1`), TTL (`2`), or a 1-byte frame (`3`); bits 4–5: frames
/// `[kind, body]` (`0`, `1`), `[kind]` (`2`), `[kind, body, empty]` (`3`).
#[derive(Debug)]
pub struct OpenEphysInput {
    /// The unit naming.
    pub key: UnitKey,
    /// The message's frames.
    pub frames: Vec<Vec<u8>>,
}

impl OpenEphysInput {
    /// Splits a fuzz input.
    #[must_use]
    pub fn parse(data: &[u8]) -> Option<Self> {
        let (&ctrl, body) = data.split_first()?;
        let key = match ctrl & 3 {
            1 => UnitKey::Electrode,
            2 => UnitKey::ElectrodeSortedId,
            _ => UnitKey::Full,
        };
        let kind = match (ctrl >> 2) & 3 {
            0 | 1 => 1u16.to_le_bytes().to_vec(),
            2 => 0u16.to_le_bytes().to_vec(),
            _ => vec![1],
        };
        let frames = match (ctrl >> 4) & 3 {
            0 | 1 => vec![kind, body.to_vec()],
            2 => vec![kind],
            _ => vec![kind, body.to_vec(), Vec::new()],
        };
        Some(Self { key, frames })
    }

    /// The fuzz input of a spike message's body with `key`.
    #[must_use]
    pub fn encode(key: UnitKey, body: &[u8]) -> Vec<u8> {
        let ctrl = match key {
            UnitKey::Full => 0,
            UnitKey::Electrode => 1,
            UnitKey::ElectrodeSortedId => 2,
        };
        let mut out = vec![ctrl];
        out.extend_from_slice(body);
        out
    }
}

// ------------------------------------------------------------------------------------------
// Debugging seeds

/// Prints `what()` to stderr when `SYNFIRE_FUZZ_DEBUG` is set (e.g. to see why a seed is
/// refused: `SYNFIRE_FUZZ_DEBUG=1 target seeds/x/*`); free otherwise.
pub fn debug(what: impl FnOnce() -> String) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("SYNFIRE_FUZZ_DEBUG").is_some()) {
        eprintln!("synfire-fuzz: {}", what());
    }
}

/// `Ok` or the error's message, for [`debug`].
pub fn outcome<T, E: std::fmt::Display>(r: &Result<T, E>) -> String {
    match r {
        Ok(_) => "ok".to_owned(),
        Err(e) => format!("error: {e}"),
    }
}
