//! The layout's invariants, checked on the source text (`ARCHITECTURE.md`, "Layers"):
//!
//! * no import cycle between the library's files (an import of `crate::a::b` or `super::b` is
//!   an arrow to the file that defines it);
//! * no import against the layering: a top-level module imports only modules of its own layer
//!   or below (the table [`LAYERS`]);
//! * only `src/device/` names `cudarc`; `anyhow` stays out of the library.
//!
//! Run alone with `cargo test --release --test architecture`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules of the library, lowest layer first. A module may import its own layer
/// and those before it.
const LAYERS: &[&[&str]] = &[
    &["record", "event"],
    &["device", "ingest", "synth"],
    &["episode", "series"],
    &["motif", "softdtw", "shapelet", "significance"],
    &["search", "report", "plot"],
    &["live"],
    &["python"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file under `src/`: `src/live/stage/mod.rs` → `["live", "stage"]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The source text without comments, `#[cfg(test)]` modules and string literals (a test
/// module may import whatever it tests from).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Every path that starts with `crate::` or `super::` in `code`, with `use` groups expanded.
fn paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if !code.is_char_boundary(i) {
            i += 1;
            continue;
        }
        let rest = &code[i..];
        let starts = rest.starts_with("crate::") || rest.starts_with("super::");
        let boundary = i == 0
            || !(bytes[i - 1].is_ascii_alphanumeric()
                || bytes[i - 1] == b'_'
                || bytes[i - 1] == b':');
        if starts && boundary {
            let (tree, len) = take_tree(rest);
            expand(&tree, String::new(), &mut found);
            i += len.max(1);
        } else {
            i += 1;
        }
    }
    found
}

/// A path, possibly ending in a `{…}` group; returns the text and its length.
fn take_tree(s: &str) -> (String, usize) {
    let mut depth = 0;
    for (k, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth > 0 => depth -= 1,
            c if depth == 0 && !(c.is_alphanumeric() || c == '_' || c == ':' || c == '{') => {
                return (s[..k].to_owned(), k);
            }
            _ => {}
        }
    }
    (s.to_owned(), s.len())
}

fn expand(tree: &str, prefix: String, out: &mut Vec<String>) {
    match tree.find('{') {
        None => out.push(format!("{prefix}{}", tree.trim())),
        Some(open) => {
            let head = format!("{prefix}{}", &tree[..open]);
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (k, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(inner[start..k].trim(), head.clone(), out);
                        start = k + 1;
                    }
                    _ => {}
                }
            }
            let last = inner[start..].trim();
            if !last.is_empty() {
                expand(last, head, out);
            }
        }
    }
}

/// The file that `path` (from a file of module `here`) refers to: the longest prefix of its
/// module path that is a file of the crate.
fn resolve(
    path: &str,
    here: &[String],
    files: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let mut segs: Vec<String> = Vec::new();
    for (k, seg) in path.split("::").enumerate() {
        let seg = seg.trim();
        match (k, seg) {
            (0, "crate") => {}
            (_, "super") => {
                if segs.is_empty() && k == 0 {
                    segs = here.to_vec();
                }
                segs.pop();
            }
            (_, "self") | (_, "") => {}
            (_, s) => segs.push(s.split(" as ").next().unwrap().trim().to_owned()),
        }
    }
    (0..=segs.len())
        .rev()
        .map(|n| segs[..n].to_vec())
        .find(|m| files.contains_key(m))
}

struct Graph {
    files: BTreeMap<Vec<String>, PathBuf>,
    arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
    texts: BTreeMap<Vec<String>, String>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut list = Vec::new();
    rust_files(&src, &mut list);
    let lib = src.join("lib.rs");
    // The library's files: the modules `lib.rs` declares (the binary's are apart).
    let lib_text = std::fs::read_to_string(&lib).unwrap();
    let declared: BTreeSet<String> = lib_text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_owned())
        .collect();
    let files: BTreeMap<Vec<String>, PathBuf> = list
        .into_iter()
        .filter(|f| {
            *f == lib
                || module_of(&src, f)
                    .first()
                    .is_some_and(|m| declared.contains(m))
        })
        .map(|f| {
            (
                if f == lib {
                    Vec::new()
                } else {
                    module_of(&src, &f)
                },
                f,
            )
        })
        .collect();
    let mut arrows = BTreeMap::new();
    let mut texts = BTreeMap::new();
    for (module, file) in &files {
        let text = code(&std::fs::read_to_string(file).unwrap());
        let mut to = BTreeSet::new();
        // A `super::` path in `a/b.rs` is relative to module `a`, the parent of `a::b`.
        for p in paths(&text) {
            if let Some(target) = resolve(&p, module, &files)
                && &target != module
                && !target.is_empty()
            {
                to.insert(target);
            }
        }
        // Paths relative to the module itself (`child::Item`, `use child::{…}`).
        for child in files
            .keys()
            .filter(|c| c.len() == module.len() + 1 && c.starts_with(module))
        {
            let last = child.last().unwrap();
            let named = text.match_indices(&format!("{last}::")).any(|(i, _)| {
                let before = text[..i].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            });
            if named {
                to.insert(child.clone());
            }
        }
        arrows.insert(module.clone(), to);
        texts.insert(module.clone(), text);
    }
    Graph {
        files,
        arrows,
        texts,
    }
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "lib".into()
    } else {
        m.join("::")
    }
}

/// The strongly connected components of more than one node (Tarjan), each sorted.
fn cycles(arrows: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    struct Tarjan<'a> {
        arrows: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<Vec<String>>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Vec<String>) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.arrows.get(v).into_iter().flatten() {
                let Some((w, _)) = self.arrows.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut scc = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    scc.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.found.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        arrows,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in arrows.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.found
}

fn show(cycles: &[Vec<Vec<String>>]) -> String {
    cycles
        .iter()
        .map(|c| c.iter().map(|m| name(m)).collect::<Vec<_>>().join(" <-> "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Between files: no cycle. A module's own file (`mod.rs`) naming its descendants is the
/// module tree (declarations and the re-exports that make the module's face), not an import
/// between peers, so those arrows are left out; every other arrow counts, including a child's
/// import of its parent's items.
#[test]
fn the_library_has_no_import_cycle_between_files() {
    let g = graph();
    assert!(g.files.len() > 50, "found only {} files", g.files.len());
    let arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = g
        .arrows
        .iter()
        .filter(|(m, _)| !m.is_empty())
        .map(|(m, to)| {
            let to = to
                .iter()
                .filter(|t| !(t.len() > m.len() && t.starts_with(m)))
                .cloned()
                .collect();
            (m.clone(), to)
        })
        .collect();
    let found = cycles(&arrows);
    assert!(
        found.is_empty(),
        "import cycles between files:\n{}",
        show(&found)
    );
}

/// Between top-level modules (`episode`, `live`, …): no cycle at all.
#[test]
fn the_library_has_no_import_cycle_between_modules() {
    let g = graph();
    let mut arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (m, to) in &g.arrows {
        let Some(top) = m.first() else { continue };
        let entry = arrows.entry(vec![top.clone()]).or_default();
        for t in to {
            if &t[0] != top {
                entry.insert(vec![t[0].clone()]);
            }
        }
    }
    assert!(arrows.len() >= 10, "found only {} modules", arrows.len());
    let found = cycles(&arrows);
    assert!(
        found.is_empty(),
        "import cycles between modules:\n{}",
        show(&found)
    );
}

#[test]
fn no_module_imports_above_its_layer() {
    let g = graph();
    let mut against = Vec::new();
    for (module, to) in &g.arrows {
        let Some(top) = module.first() else { continue };
        let here =
            layer_of(top).unwrap_or_else(|| panic!("module `{top}` is in no layer of LAYERS"));
        for t in to {
            let there = layer_of(&t[0])
                .unwrap_or_else(|| panic!("module `{}` is in no layer of LAYERS", t[0]));
            if there > here {
                against.push(format!(
                    "{} (layer {here}) imports {} (layer {there})",
                    name(module),
                    name(t)
                ));
            }
        }
    }
    assert!(
        against.is_empty(),
        "imports against the layering:\n{}",
        against.join("\n")
    );
}

#[test]
fn cudarc_stays_in_the_device_layer() {
    let g = graph();
    for (module, text) in &g.texts {
        if module.first().is_none_or(|m| m != "device") {
            assert!(!text.contains("cudarc"), "{} names cudarc", name(module));
        }
    }
}

#[test]
fn anyhow_stays_out_of_the_library() {
    let g = graph();
    for (module, text) in &g.texts {
        assert!(
            !text.contains("anyhow"),
            "{} uses anyhow (library code returns typed errors)",
            name(module)
        );
    }
}

/// The cycle finder itself finds a planted cycle and nothing in a chain.
#[test]
fn the_cycle_finder_finds_a_planted_cycle() {
    let m = |s: &str| vec![s.to_owned()];
    let mut arrows: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    arrows.insert(m("a"), [m("b")].into());
    arrows.insert(m("b"), [m("c")].into());
    arrows.insert(m("c"), BTreeSet::new());
    assert!(cycles(&arrows).is_empty());
    arrows.get_mut(&m("c")).unwrap().insert(m("a"));
    arrows.insert(m("d"), [m("a")].into());
    assert_eq!(cycles(&arrows), vec![vec![m("a"), m("b"), m("c")]]);
}
