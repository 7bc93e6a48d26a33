//! The MESSI index tree (SING paper §2, "MESSI Index"; Peng et al., ICDE 2020), in SING's
//! leaf order (§4.1).
//!
//! * The **root** has up to 2^16 children, one per **root key** (the first bit of each of the
//!   16 segment symbols, [`root_key`]); a root child with no series does not exist.
//! * Every other node holds an iSAX region: a symbol prefix and a cardinality (bits) per
//!   segment. A node with more than the **leaf capacity** series splits in two on the segment
//!   whose next bit divides its series most evenly (ties: the smallest segment); a segment on
//!   which all of them share the next bit is refined in place (the node's region shrinks, no
//!   empty child is made). A node whose series all have the same full word cannot split and
//!   stays an oversized leaf.
//! * **Leaf order**: series are numbered by an in-order traversal, root children by key, left
//!   (next bit 0) before right, so every node — in particular every root subtree — covers one
//!   contiguous range of positions (`start`, `len`) of the leaf-ordered arrays (SING §4.1:
//!   active subtrees are contiguous chunks of the iSAX array).
//!
//! The build sorts series by root key (counting sort), then builds the root subtrees in
//! parallel (rayon), each one in place on its slice of the order; the result does not depend
//! on the thread count.

use rayon::prelude::*;

use super::isax::{SYMBOL_BITS, Word, root_key};
use super::paa::SEGMENTS;

/// Root children (2^w).
pub(crate) const ROOT_CHILDREN: usize = 1 << SEGMENTS;

/// "No node" in [`Tree::roots`] and in a leaf's child links.
pub const NONE: u32 = u32::MAX;

/// A node of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Node {
    /// Symbol prefix per segment (the top `bits[j]` bits of the symbols below it).
    pub prefix: Word,
    /// Cardinality bits per segment, 1..=8.
    pub bits: [u8; SEGMENTS],
    /// Left child (next bit 0 on `split`), or [`NONE`] for a leaf.
    pub left: u32,
    /// Right child (next bit 1), or [`NONE`] for a leaf.
    pub right: u32,
    /// First leaf-order position of the series below it.
    pub start: u32,
    /// Number of series below it (at least 1).
    pub len: u32,
    /// The segment an inner node splits on.
    pub split: u8,
}

impl Node {
    /// True for a leaf.
    #[must_use]
    pub fn is_leaf(&self) -> bool {
        self.left == NONE
    }

    /// The child a word follows (by its next bit on the split segment). Inner nodes only.
    #[must_use]
    pub fn child_for(&self, w: &Word) -> u32 {
        let j = usize::from(self.split);
        if (w[j] >> (SYMBOL_BITS - 1 - self.bits[j])) & 1 == 0 {
            self.left
        } else {
            self.right
        }
    }
}

/// The tree: root children by key and all nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// Node index of each root child, [`NONE`] when absent; shape `[2^16]`.
    pub roots: Vec<u32>,
    /// Keys of the existing root children, ascending (= leaf order).
    pub keys: Vec<u16>,
    /// All nodes.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// Builds the tree of `words` (one per series) with leaf capacity `capacity` (≥ 1) and
    /// returns it with the leaf order: `order[position] = series number`.
    ///
    /// # Panics
    /// When there are 2^32 or more series (callers check [`super::collection::MAX_SERIES`]).
    #[must_use]
    pub fn build(words: &[Word], capacity: usize) -> (Self, Vec<u32>) {
        assert!(u32::try_from(words.len()).is_ok(), "too many series");
        let capacity = capacity.max(1);
        // Counting sort by root key: the positions of each root subtree.
        let keys: Vec<u16> = words.par_iter().map(root_key).collect();
        let mut counts = vec![0u32; ROOT_CHILDREN + 1];
        for &k in &keys {
            counts[usize::from(k) + 1] += 1;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let starts = counts.clone();
        let mut fill = counts;
        let mut order = vec![0u32; words.len()];
        for (i, &k) in keys.iter().enumerate() {
            let slot = &mut fill[usize::from(k)];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
        // Disjoint slices of the order, one per existing root child.
        let mut groups: Vec<(u16, u32, &mut [u32])> = Vec::new();
        let mut rest: &mut [u32] = &mut order;
        for key in 0..ROOT_CHILDREN {
            let n = (starts[key + 1] - starts[key]) as usize;
            if n == 0 {
                continue;
            }
            let (head, tail) = rest.split_at_mut(n);
            groups.push((key as u16, starts[key], head));
            rest = tail;
        }
        let subtrees: Vec<(u16, Vec<Node>)> = groups
            .into_par_iter()
            .map(|(key, base, slice)| (key, build_subtree(words, slice, base, key, capacity)))
            .collect();
        let mut tree = Tree {
            roots: vec![NONE; ROOT_CHILDREN],
            keys: Vec::with_capacity(subtrees.len()),
            nodes: Vec::with_capacity(subtrees.iter().map(|(_, n)| n.len()).sum()),
        };
        for (key, nodes) in subtrees {
            let offset = tree.nodes.len() as u32;
            tree.roots[usize::from(key)] = offset;
            tree.keys.push(key);
            tree.nodes.extend(nodes.into_iter().map(|mut n| {
                if !n.is_leaf() {
                    n.left += offset;
                    n.right += offset;
                }
                n
            }));
        }
        (tree, order)
    }

    /// The leaves below node `node`, left to right.
    #[must_use]
    pub fn leaves_under(&self, node: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut stack = vec![node];
        while let Some(n) = stack.pop() {
            let nd = &self.nodes[n as usize];
            if nd.is_leaf() {
                out.push(n);
            } else {
                stack.push(nd.right);
                stack.push(nd.left);
            }
        }
        out
    }

    /// Checks the structure (for a tree read from disk): every root and child link in range,
    /// children inside their parent's range and splitting it, leaves tiling `0..count` in
    /// leaf order, cardinalities in `1..=8`.
    ///
    /// # Errors
    /// A message naming the first defect.
    pub fn validate(&self, count: u32) -> Result<(), String> {
        if self.roots.len() != ROOT_CHILDREN {
            return Err(format!(
                "{} root slots, expected {ROOT_CHILDREN}",
                self.roots.len()
            ));
        }
        let n_nodes = self.nodes.len() as u64;
        let mut next = 0u64; // next expected leaf-order position
        let mut seen = 0u64;
        for (key, &r) in self.roots.iter().enumerate() {
            if r == NONE {
                continue;
            }
            if u64::from(r) >= n_nodes {
                return Err(format!("root child {key} points to node {r} of {n_nodes}"));
            }
            let mut stack = vec![r];
            while let Some(n) = stack.pop() {
                seen += 1;
                if seen > n_nodes {
                    return Err("the node links form a cycle".into());
                }
                let nd = &self.nodes[n as usize];
                let bad_region = nd
                    .bits
                    .iter()
                    .zip(&nd.prefix)
                    .any(|(&b, &p)| b == 0 || b > SYMBOL_BITS || u32::from(p) >> b != 0);
                if bad_region || nd.len == 0 {
                    return Err(format!("node {n} has an invalid region or no series"));
                }
                if nd.is_leaf() {
                    if u64::from(nd.start) != next {
                        return Err(format!("leaf {n} starts at {}, expected {next}", nd.start));
                    }
                    next += u64::from(nd.len);
                    continue;
                }
                let (l, rr) = (nd.left, nd.right);
                if u64::from(l) >= n_nodes
                    || u64::from(rr) >= n_nodes
                    || usize::from(nd.split) >= SEGMENTS
                {
                    return Err(format!("node {n} has a child or split out of range"));
                }
                let (a, b) = (&self.nodes[l as usize], &self.nodes[rr as usize]);
                if a.start != nd.start
                    || u64::from(b.start) != u64::from(a.start) + u64::from(a.len)
                    || u64::from(a.len) + u64::from(b.len) != u64::from(nd.len)
                    || nd.bits[usize::from(nd.split)] >= SYMBOL_BITS
                {
                    return Err(format!("node {n}'s children do not split its range"));
                }
                stack.push(rr);
                stack.push(l);
            }
        }
        if next != u64::from(count) {
            return Err(format!(
                "the leaves cover {next} positions, the index holds {count}"
            ));
        }
        if seen != n_nodes {
            return Err(format!(
                "{} of {n_nodes} nodes are unreachable",
                n_nodes - seen
            ));
        }
        let keys: Vec<u16> = (0..ROOT_CHILDREN)
            .filter(|&k| self.roots[k] != NONE)
            .map(|k| k as u16)
            .collect();
        if keys != self.keys {
            return Err("the root key list does not match the root slots".into());
        }
        Ok(())
    }
}

/// Builds the subtree of root child `key` over `slice` (series numbers; permuted in place into
/// leaf order), whose first position is `base`. Node indices are local to the subtree.
fn build_subtree(words: &[Word], slice: &mut [u32], base: u32, key: u16, cap: usize) -> Vec<Node> {
    let prefix: Word = std::array::from_fn(|j| ((key >> (SEGMENTS - 1 - j)) & 1) as u8);
    let mut nodes = Vec::new();
    split(&mut nodes, words, slice, base, prefix, [1; SEGMENTS], cap);
    nodes
}

fn split(
    nodes: &mut Vec<Node>,
    words: &[Word],
    slice: &mut [u32],
    start: u32,
    mut prefix: Word,
    mut bits: [u8; SEGMENTS],
    cap: usize,
) -> u32 {
    let me = nodes.len();
    let len = slice.len();
    nodes.push(Node {
        prefix,
        bits,
        left: NONE,
        right: NONE,
        start,
        len: len as u32,
        split: 0,
    });
    if len <= cap {
        return me as u32;
    }
    let seg = loop {
        let mut ones = [0usize; SEGMENTS];
        for &i in slice.iter() {
            let w = &words[i as usize];
            for j in 0..SEGMENTS {
                if bits[j] < SYMBOL_BITS {
                    ones[j] += usize::from((w[j] >> (SYMBOL_BITS - 1 - bits[j])) & 1);
                }
            }
        }
        let best = (0..SEGMENTS)
            .filter(|&j| bits[j] < SYMBOL_BITS && ones[j] > 0 && ones[j] < len)
            .min_by_key(|&j| (2 * ones[j]).abs_diff(len));
        if let Some(j) = best {
            break Some(j);
        }
        // Every refinable segment is shared by all series: refine them in place.
        let first = &words[slice[0] as usize];
        let mut refined = false;
        for j in 0..SEGMENTS {
            if bits[j] < SYMBOL_BITS {
                let bit = (first[j] >> (SYMBOL_BITS - 1 - bits[j])) & 1;
                prefix[j] = (prefix[j] << 1) | bit;
                bits[j] += 1;
                refined = true;
            }
        }
        nodes[me].prefix = prefix;
        nodes[me].bits = bits;
        if !refined {
            break None; // identical full words: an oversized leaf
        }
    };
    let Some(j) = seg else {
        return me as u32;
    };
    let shift = SYMBOL_BITS - 1 - bits[j];
    let bit_of = |i: u32| (words[i as usize][j] >> shift) & 1;
    // In-place partition: next bit 0 first.
    let mut zeros = 0;
    for k in 0..len {
        if bit_of(slice[k]) == 0 {
            slice.swap(k, zeros);
            zeros += 1;
        }
    }
    let (l, r) = slice.split_at_mut(zeros);
    let mut lp = prefix;
    let mut lb = bits;
    lp[j] <<= 1;
    lb[j] += 1;
    let mut rp = lp;
    rp[j] |= 1;
    let left = split(nodes, words, l, start, lp, lb, cap);
    let right = split(nodes, words, r, start + zeros as u32, rp, lb, cap);
    let n = &mut nodes[me];
    n.left = left;
    n.right = right;
    n.split = j as u8;
    me as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn words(n: usize, seed: u64) -> Vec<Word> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| std::array::from_fn(|j| if j < 3 { rng.random() } else { 128 }))
            .collect()
    }

    #[test]
    fn leaves_tile_the_order_and_regions_contain_their_series() {
        let w = words(5000, 1);
        let (tree, order) = Tree::build(&w, 50);
        tree.validate(5000).unwrap();
        let mut sorted = order.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..5000).collect::<Vec<u32>>());
        for node in &tree.nodes {
            assert!(!node.is_leaf() || node.len <= 50 || node.bits == [8; 16]);
            for p in node.start..node.start + node.len {
                let word = &w[order[p as usize] as usize];
                for ((s, b), p) in word.iter().zip(&node.bits).zip(&node.prefix) {
                    assert_eq!(s >> (8 - b), *p);
                }
            }
        }
        // Identical words cannot split: one oversized leaf.
        let same = vec![[7u8; 16]; 100];
        let (t, _) = Tree::build(&same, 10);
        assert_eq!(t.nodes.len(), 1);
        t.validate(100).unwrap();
    }

    #[test]
    fn validate_rejects_broken_trees() {
        let (mut t, _) = Tree::build(&words(300, 2), 10);
        assert!(t.validate(301).is_err());
        let inner = t.nodes.iter().position(|n| !n.is_leaf()).unwrap();
        let good = t.clone();
        t.nodes[inner].left = 1_000_000;
        assert!(t.validate(300).is_err());
        // A prefix wider than its cardinality would index past the breakpoints.
        let mut t = good;
        let leaf = t.nodes.iter().position(|n| n.bits[0] < 8).unwrap();
        t.nodes[leaf].prefix[0] = 0xff;
        assert!(t.validate(300).unwrap_err().contains("invalid region"));
    }
}
