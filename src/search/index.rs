//! The assembled index: the MESSI tree, and in leaf order the iSAX array (16 bytes per
//! series), the z-normalised series (`f32`, `[count, len]`) and each series' id.
//!
//! Keeping the series themselves in leaf order (not only the iSAX array, as SING does) makes
//! a leaf's real distances read one contiguous block, and lets the on-disk index be mapped
//! as it is ([`super::store`]).

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::SearchError;
use super::collection::{Collection, CollectionKind, MAX_SERIES};
use super::isax::{Breakpoints, Word};
use super::paa::Segments;
use super::tree::Tree;

/// Index build options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// Most series a leaf holds before it splits (MESSI's leaf capacity; default 1024).
    pub leaf_capacity: usize,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            leaf_capacity: 1024,
        }
    }
}

/// An array owned in memory or mapped from an index file.
pub(crate) enum Data<T: bytemuck::Pod> {
    Owned(Vec<T>),
    Mapped(memmap2::Mmap),
}

impl<T: bytemuck::Pod> Data<T> {
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            Self::Owned(v) => v,
            Self::Mapped(m) => bytemuck::cast_slice(&m[..]),
        }
    }
}

impl<T: bytemuck::Pod> std::fmt::Debug for Data<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Owned(v) => write!(f, "Owned({} items)", v.len()),
            Self::Mapped(m) => write!(f, "Mapped({} bytes)", m.len()),
        }
    }
}

/// A unique tag per index instance (the GPU keeps the iSAX array of one tag).
pub(crate) fn next_tag() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    (u64::from(std::process::id()) << 32) ^ NEXT.fetch_add(1, Ordering::Relaxed)
}

/// What batches need of an index, computed once per index (multi-threaded) and kept.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchPaa {
    /// PAA values, `[count * 16]` `f32` in leaf order ([`super::batch::paa_f32`]).
    pub paa: Vec<f32>,
    /// The largest PAA norm of a series ([`super::batch::paa_f32`]'s second value).
    pub paa_norm: f64,
    /// The largest Euclidean norm of a series (rounded up by a relative 1e-9).
    pub row_norm: f64,
}

/// An index's PAA array for batched GPU queries (`[count * 16]` f32 in leaf order, and the
/// largest series norm), computed by `super::batch::index_paa` at the first use and kept
/// (64 bytes per series).
#[derive(Default)]
pub struct PaaCache(pub(crate) std::sync::OnceLock<BatchPaa>);

impl std::fmt::Debug for PaaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PaaCache")
            .field("computed", &self.0.get().is_some())
            .finish()
    }
}

/// A SING/MESSI index over a collection of z-normalised series of one length.
#[derive(Debug)]
pub struct Index {
    pub(crate) len: usize,
    pub(crate) count: usize,
    pub(crate) options: BuildOptions,
    pub(crate) segments: Segments,
    pub(crate) breakpoints: Breakpoints,
    pub(crate) kind: CollectionKind,
    pub(crate) tree: Tree,
    pub(crate) sax: Data<Word>,
    pub(crate) ids: Data<u32>,
    pub(crate) series: Data<f32>,
    pub(crate) tag: u64,
    /// The PAA array of batched GPU queries, computed once ([`super::batch::index_paa`]).
    pub(crate) batch_paa: PaaCache,
}

impl Index {
    /// Builds the index of a collection (multi-threaded: iSAX words, root subtrees and the
    /// leaf-order gather run on rayon).
    ///
    /// # Errors
    /// [`SearchError::Input`] for a leaf capacity of 0.
    pub fn build(c: &Collection, options: BuildOptions) -> Result<Self, SearchError> {
        let ids = c.ids();
        Self::build_with(
            c.count(),
            c.len(),
            c.kind().clone(),
            options,
            |i| ids[i],
            |i, row| {
                row.copy_from_slice(c.row(i));
            },
        )
    }

    /// Builds an index of `count` series of length `len` produced by `fill(i, row)`, which
    /// writes series `i` (already z-normalised, e.g. by
    /// [`super::collection::znormalize_into`]) into `row`; `id(i)` is its id. `fill` is called
    /// twice per series (once for the iSAX words, once to place the series at its leaf-order
    /// position), so a generator never needs the collection twice in memory: peak memory is
    /// one copy of the series plus 20 bytes per series.
    ///
    /// # Errors
    /// [`SearchError::Input`] for `count = 0`, `len = 0`, more than 2^32 − 1 series, a leaf
    /// capacity of 0, or a `fill` that writes a non-finite value or is not deterministic.
    pub fn build_with(
        count: usize,
        len: usize,
        kind: CollectionKind,
        options: BuildOptions,
        id: impl Fn(usize) -> u32 + Sync,
        fill: impl Fn(usize, &mut [f32]) + Sync,
    ) -> Result<Self, SearchError> {
        if count == 0 || len == 0 {
            return Err(SearchError::input(
                "collection",
                format!("{count} series of length {len}: nothing to index"),
            ));
        }
        if count > MAX_SERIES {
            return Err(SearchError::input(
                "collection",
                format!("{count} series, at most {MAX_SERIES}"),
            ));
        }
        if options.leaf_capacity == 0 {
            return Err(SearchError::input(
                "`--leaf-capacity`",
                "must be at least 1",
            ));
        }
        let segments = Segments::new(len);
        let breakpoints = Breakpoints::standard();
        let words: Vec<Option<Word>> = (0..count)
            .into_par_iter()
            .map_init(
                || vec![0.0f32; len],
                |row, i| {
                    fill(i, row);
                    row.iter()
                        .all(|v| v.is_finite())
                        .then(|| breakpoints.word(&segments.paa(row)))
                },
            )
            .collect();
        if let Some(bad) = words.iter().position(Option::is_none) {
            return Err(SearchError::input(
                "collection",
                format!("series {bad} holds a non-finite value"),
            ));
        }
        let words: Vec<Word> = words.into_iter().flatten().collect();
        let (tree, order) = Tree::build(&words, options.leaf_capacity);
        let sax: Vec<Word> = order.par_iter().map(|&i| words[i as usize]).collect();
        drop(words);
        let ids: Vec<u32> = order.par_iter().map(|&i| id(i as usize)).collect();
        let mut series = vec![0.0f32; count * len];
        let consistent = series
            .par_chunks_mut(len)
            .zip(order.par_iter())
            .zip(sax.par_iter())
            .all(|((row, &i), w)| {
                fill(i as usize, row);
                breakpoints.word(&segments.paa(row)) == *w
            });
        if !consistent {
            return Err(SearchError::input(
                "collection",
                "the series source wrote different values on its second pass",
            ));
        }
        Ok(Self {
            len,
            count,
            options,
            segments,
            breakpoints,
            kind,
            tree,
            sax: Data::Owned(sax),
            ids: Data::Owned(ids),
            series: Data::Owned(series),
            tag: next_tag(),
            batch_paa: PaaCache::default(),
        })
    }

    /// Series length, samples.
    #[must_use]
    pub fn series_len(&self) -> usize {
        self.len
    }

    /// Number of series.
    #[must_use]
    pub fn count(&self) -> usize {
        self.count
    }

    /// The build options.
    #[must_use]
    pub fn options(&self) -> BuildOptions {
        self.options
    }

    /// What the collection was made from.
    #[must_use]
    pub fn kind(&self) -> &CollectionKind {
        &self.kind
    }

    /// The tree.
    #[must_use]
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The PAA segments of the series length.
    #[must_use]
    pub fn segments(&self) -> &Segments {
        &self.segments
    }

    /// The breakpoints the words were computed with.
    #[must_use]
    pub fn breakpoints(&self) -> &Breakpoints {
        &self.breakpoints
    }

    /// The leaf-ordered iSAX array, shape `[count]` of 16-byte words.
    #[must_use]
    pub fn sax(&self) -> &[Word] {
        self.sax.as_slice()
    }

    /// The id of each leaf-order position, shape `[count]`.
    #[must_use]
    pub fn ids(&self) -> &[u32] {
        self.ids.as_slice()
    }

    /// The leaf-ordered series, shape `[count, len]`.
    #[must_use]
    pub fn series(&self) -> &[f32] {
        self.series.as_slice()
    }

    /// The z-normalised series at leaf-order position `pos`, shape `[len]`.
    ///
    /// # Panics
    /// When `pos >= count()`.
    #[must_use]
    pub fn row(&self, pos: usize) -> &[f32] {
        &self.series()[pos * self.len..(pos + 1) * self.len]
    }

    /// The rows in id order with their ids (`[count, len]`, `[count]`), e.g. to rebuild.
    #[must_use]
    pub fn rows_by_id(&self) -> (Vec<f32>, Vec<u32>) {
        let mut perm: Vec<u32> = (0..self.count as u32).collect();
        let ids = self.ids();
        perm.par_sort_unstable_by_key(|&p| ids[p as usize]);
        let mut rows = vec![0.0f32; self.count * self.len];
        rows.par_chunks_mut(self.len)
            .zip(perm.par_iter())
            .for_each(|(r, &p)| r.copy_from_slice(self.row(p as usize)));
        let sorted = perm.iter().map(|&p| ids[p as usize]).collect();
        (rows, sorted)
    }

    /// Bytes the iSAX array takes (what the GPU holds).
    #[must_use]
    pub fn sax_bytes(&self) -> usize {
        self.count * std::mem::size_of::<Word>()
    }

    pub(crate) fn tag(&self) -> u64 {
        self.tag
    }
}
