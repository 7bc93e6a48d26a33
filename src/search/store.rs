//! The on-disk index directory: written by `synfire search build`, memory-mapped on load.
//!
//! | file         | contents                                                              |
//! |--------------|-----------------------------------------------------------------------|
//! | `index.json` | header: `format`, `version`, `endianness`, `series`, `length`, `segments`, `cardinality`, `leaf_capacity`, `nodes`, `collection`, `breakpoints` (255), `bytes` per file, `checksums` of the small files |
//! | `series.f32` | z-normalised series in leaf order, `f32`, `[series, length]`          |
//! | `isax.u8`    | iSAX words in leaf order, `[series, 16]` bytes                        |
//! | `ids.u32`    | id of each leaf-order position, `u32`, `[series]`                     |
//! | `tree.bin`   | root slots (`2^16` × `u32`) then nodes (52 bytes each), little-endian |
//!
//! The three arrays are mapped read-only (`memmap2`), so loading costs no copy and the OS
//! pages the series in as queries touch them; `tree.bin` is read and fully validated
//! ([`Tree::validate`]): node links, ranges and regions are checked before any query trusts
//! them. `isax.u8`, `ids.u32` and `tree.bin` (20 bytes per series together) are checksummed
//! in the header and checked on every load; `series.f32` (1 KiB per series of 256) is only
//! size-checked. The header is written last, so a directory without `index.json` is an
//! interrupted build. A header of another `version` is refused with a message to rebuild.
//! Mapped files must not be modified while an index is loaded.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::SearchError;
use super::collection::CollectionKind;
use super::index::{BuildOptions, Data, Index, next_tag};
use super::isax::{Breakpoints, CARDINALITY};
use super::paa::{SEGMENTS, Segments};
use super::tree::{NONE, Node, ROOT_CHILDREN, Tree};

/// The `format` string of `index.json`.
pub const FORMAT: &str = "synfire-sing-index";
/// The on-disk format version this build writes and reads.
pub(crate) const VERSION: u32 = 1;

const HEADER: &str = "index.json";
const SERIES: &str = "series.f32";
const SAX: &str = "isax.u8";
const IDS: &str = "ids.u32";
const TREE: &str = "tree.bin";
const NODE_BYTES: usize = 52;

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    format: String,
    version: u32,
    endianness: String,
    series: usize,
    length: usize,
    segments: usize,
    cardinality: usize,
    leaf_capacity: usize,
    nodes: usize,
    collection: CollectionKind,
    breakpoints: Vec<f64>,
    bytes: std::collections::BTreeMap<String, u64>,
    checksums: std::collections::BTreeMap<String, String>,
}

/// A 64-bit checksum of a file's bytes (FNV-1a over little-endian 8-byte words, then the
/// tail bytes): fast enough to check the small index files on every load.
fn checksum(bytes: &[u8]) -> String {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(PRIME);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(PRIME);
    }
    format!("{h:016x}")
}

/// The files whose checksum is stored and checked (`series.f32` is only size-checked).
const CHECKED: [&str; 3] = [SAX, IDS, TREE];

fn io(path: &Path) -> impl Fn(std::io::Error) -> SearchError + '_ {
    move |source| SearchError::Io {
        path: path.to_owned(),
        source,
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), SearchError> {
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path).map_err(io(path))?);
    w.write_all(bytes).map_err(io(path))?;
    w.flush().map_err(io(path))
}

fn encode_tree(tree: &Tree) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 * ROOT_CHILDREN + NODE_BYTES * tree.nodes.len());
    for &r in &tree.roots {
        out.extend_from_slice(&r.to_le_bytes());
    }
    for n in &tree.nodes {
        out.extend_from_slice(&n.prefix);
        out.extend_from_slice(&n.bits);
        for v in [n.left, n.right, n.start, n.len] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&[n.split, 0, 0, 0]);
    }
    out
}

fn decode_tree(bytes: &[u8], nodes: usize) -> Result<Tree, String> {
    let need = NODE_BYTES
        .checked_mul(nodes)
        .and_then(|b| b.checked_add(4 * ROOT_CHILDREN));
    if need != Some(bytes.len()) {
        return Err(format!(
            "{TREE} has {} bytes, not the size of the header's {nodes} nodes",
            bytes.len()
        ));
    }
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    let roots: Vec<u32> = (0..ROOT_CHILDREN).map(|k| u32_at(bytes, 4 * k)).collect();
    let nodes = bytes[4 * ROOT_CHILDREN..]
        .chunks_exact(NODE_BYTES)
        .map(|b| {
            let mut prefix = [0u8; SEGMENTS];
            let mut bits = [0u8; SEGMENTS];
            prefix.copy_from_slice(&b[..16]);
            bits.copy_from_slice(&b[16..32]);
            Node {
                prefix,
                bits,
                left: u32_at(b, 32),
                right: u32_at(b, 36),
                start: u32_at(b, 40),
                len: u32_at(b, 44),
                split: b[48],
            }
        })
        .collect();
    let keys = (0..ROOT_CHILDREN)
        .filter(|&k| roots[k] != NONE)
        .map(|k| k as u16)
        .collect();
    Ok(Tree { roots, keys, nodes })
}

impl Index {
    /// Writes the index into directory `dir` (created if needed; index files already there
    /// are replaced). The header goes last.
    ///
    /// # Errors
    /// [`SearchError::Io`] naming the file that could not be written.
    pub fn save(&self, dir: &Path) -> Result<(), SearchError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let _ = std::fs::remove_file(dir.join(HEADER));
        let tree = encode_tree(&self.tree);
        let files: [(&str, &[u8]); 4] = [
            (SERIES, bytemuck::cast_slice(self.series())),
            (SAX, bytemuck::cast_slice(self.sax())),
            (IDS, bytemuck::cast_slice(self.ids())),
            (TREE, &tree),
        ];
        let mut bytes = std::collections::BTreeMap::new();
        let mut checksums = std::collections::BTreeMap::new();
        for (name, data) in files {
            write_file(&dir.join(name), data)?;
            bytes.insert(name.to_owned(), data.len() as u64);
            if CHECKED.contains(&name) {
                checksums.insert(name.to_owned(), checksum(data));
            }
        }
        let header = Header {
            format: FORMAT.into(),
            version: VERSION,
            endianness: "little".into(),
            series: self.count,
            length: self.len,
            segments: SEGMENTS,
            cardinality: CARDINALITY,
            leaf_capacity: self.options.leaf_capacity,
            nodes: self.tree.nodes.len(),
            collection: self.kind.clone(),
            breakpoints: self.breakpoints.inner().to_vec(),
            bytes,
            checksums,
        };
        let text = serde_json::to_string_pretty(&header).map_err(|e| SearchError::Io {
            path: dir.join(HEADER),
            source: std::io::Error::other(e),
        })?;
        write_file(&dir.join(HEADER), text.as_bytes())
    }

    /// Loads an index directory written by [`Index::save`], mapping its arrays.
    ///
    /// # Errors
    /// [`SearchError::Corrupt`] for a missing header, another format, wrong sizes or an
    /// invalid tree; [`SearchError::Version`] for another format version;
    /// [`SearchError::Io`] for unreadable files.
    pub fn load(dir: &Path) -> Result<Self, SearchError> {
        let corrupt = |message: String| SearchError::Corrupt {
            dir: dir.to_owned(),
            message,
        };
        if !cfg!(target_endian = "little") {
            return Err(corrupt(
                "index files are little-endian; this host is not".into(),
            ));
        }
        let header_path = dir.join(HEADER);
        let mut text = String::new();
        File::open(&header_path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|e| {
                corrupt(format!(
                    "cannot read {HEADER} ({e}); build one with `synfire search build`"
                ))
            })?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| corrupt(format!("{HEADER} is not JSON: {e}")))?;
        if value.get("format").and_then(serde_json::Value::as_str) != Some(FORMAT) {
            return Err(corrupt(format!(
                "{HEADER} is not a synfire SING index header"
            )));
        }
        let version = value.get("version").cloned().unwrap_or_default();
        if version.as_u64() != Some(u64::from(VERSION)) {
            return Err(SearchError::Version {
                dir: dir.to_owned(),
                found: version.to_string(),
                expected: VERSION,
            });
        }
        let h: Header =
            serde_json::from_value(value).map_err(|e| corrupt(format!("{HEADER}: {e}")))?;
        if h.endianness != "little" || h.segments != SEGMENTS || h.cardinality != CARDINALITY {
            return Err(corrupt(format!(
                "{HEADER}: unsupported layout (endianness {}, {} segments, cardinality {})",
                h.endianness, h.segments, h.cardinality
            )));
        }
        if h.series == 0 || h.length == 0 || h.series > super::collection::MAX_SERIES {
            return Err(corrupt(format!(
                "{HEADER}: {} series of length {}",
                h.series, h.length
            )));
        }
        let breakpoints = Breakpoints::from_inner(&h.breakpoints)
            .map_err(|e| corrupt(format!("{HEADER}: {e}")))?;
        let expect = |name: &str, per: usize, unit: usize| -> Result<u64, SearchError> {
            h.series
                .checked_mul(per)
                .and_then(|v| v.checked_mul(unit))
                .map(|v| v as u64)
                .ok_or_else(|| corrupt(format!("{name}: size overflows")))
        };
        let series = map(dir, SERIES, expect(SERIES, h.length, 4)?)?;
        let sax = map(dir, SAX, expect(SAX, SEGMENTS, 1)?)?;
        let ids = map(dir, IDS, expect(IDS, 1, 4)?)?;
        let tree_path = dir.join(TREE);
        let tree_bytes = std::fs::read(&tree_path).map_err(io(&tree_path))?;
        for (name, data) in [(SAX, &sax[..]), (IDS, &ids[..]), (TREE, &tree_bytes[..])] {
            let found = checksum(data);
            if h.checksums.get(name) != Some(&found) {
                return Err(corrupt(format!(
                    "{name} does not match its checksum in {HEADER} (the file was changed or damaged)"
                )));
            }
        }
        let tree = decode_tree(&tree_bytes, h.nodes).map_err(corrupt)?;
        tree.validate(h.series as u32)
            .map_err(|e| corrupt(format!("{TREE}: {e}")))?;
        Ok(Self {
            len: h.length,
            count: h.series,
            options: BuildOptions {
                leaf_capacity: h.leaf_capacity.max(1),
            },
            segments: Segments::new(h.length),
            breakpoints,
            kind: h.collection,
            tree,
            sax: Data::Mapped(sax),
            ids: Data::Mapped(ids),
            series: Data::Mapped(series),
            tag: next_tag(),
            batch_paa: super::index::PaaCache::default(),
        })
    }
}

/// Maps `dir/name` read-only after checking its size.
fn map(dir: &Path, name: &str, bytes: u64) -> Result<memmap2::Mmap, SearchError> {
    let path: PathBuf = dir.join(name);
    let file = File::open(&path).map_err(io(&path))?;
    let len = file.metadata().map_err(io(&path))?.len();
    if len != bytes {
        return Err(SearchError::Corrupt {
            dir: dir.to_owned(),
            message: format!("{name} has {len} bytes, the header needs {bytes}"),
        });
    }
    // SAFETY: the map is read-only and private to this index; the store's contract (module
    // doc) is that index files are not modified while loaded. Its size was checked above and
    // the kernel aligns it to a page, so the typed views (`bytemuck::cast_slice`) are valid.
    unsafe { memmap2::Mmap::map(&file) }.map_err(io(&path))
}
