//! Reading a `synfire mine --format json` document (`docs/mine-json.md`) back, for the
//! pictures of its levels and of its significance test. Only the fields the pictures use are
//! read; others are ignored.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::PlotError;
use crate::episode::LevelStats;
use crate::report::{EpisodeJson, SignificanceJson};

/// The parts of a `synfire mine --format json` document the pictures read.
#[derive(Clone, Debug, Deserialize)]
pub struct MineDocument {
    /// Where the document was read from (not a field of the document).
    #[serde(skip)]
    pub path: PathBuf,
    /// The mined input's path as given to `synfire mine`.
    #[serde(default)]
    pub input: String,
    /// `params.min_count`, when present.
    #[serde(default)]
    pub params: Option<Params>,
    /// One entry per level mined (absent: `None`).
    #[serde(default)]
    pub levels: Option<Vec<LevelStats>>,
    /// False in a document written between levels while mining went on.
    #[serde(default = "yes")]
    pub complete: bool,
    /// The significance test (`--surrogates`), when the run made one.
    #[serde(default)]
    pub significance: Option<SignificanceJson>,
    /// The listed episodes (absent: `None`).
    #[serde(default)]
    pub episodes: Option<Vec<EpisodeJson>>,
}

/// The part of `params` the pictures read.
#[derive(Clone, Debug, Deserialize)]
pub struct Params {
    /// The minimum count the threshold resolved to.
    pub min_count: Option<u64>,
}

fn yes() -> bool {
    true
}

impl MineDocument {
    /// Reads and parses the document at `path`.
    ///
    /// # Errors
    /// [`PlotError::Read`] (unreadable file) or [`PlotError::Json`] (not JSON, or a field
    /// of the wrong type; the message says where), each naming the path.
    pub fn read(path: &Path) -> Result<Self, PlotError> {
        let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses `text`, a document read from `path` (named in errors).
    ///
    /// # Errors
    /// [`PlotError::Json`] naming the path.
    pub fn parse(text: &str, path: &Path) -> Result<Self, PlotError> {
        let mut doc: Self = serde_json::from_str(text).map_err(|source| PlotError::Json {
            path: path.to_owned(),
            source,
        })?;
        doc.path = path.to_owned();
        Ok(doc)
    }

    /// A short name for titles: the mined input's file name (else the document's).
    #[must_use]
    pub fn name(&self) -> String {
        let from = if self.input.is_empty() {
            self.path.as_path()
        } else {
            Path::new(&self.input)
        };
        from.file_name().map_or_else(
            || from.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    }

    /// An error about this document.
    pub(crate) fn error(&self, why: impl Into<String>) -> PlotError {
        PlotError::Document {
            path: self.path.clone(),
            why: why.into(),
        }
    }
}

/// An episode of the document in synfire's text notation, `6-(10,20]ms-2`: its labels
/// joined by its intervals (as written in the document's `intervals`).
#[must_use]
pub fn notation(e: &EpisodeJson) -> String {
    let mut out = e.labels.first().cloned().unwrap_or_default();
    for (k, label) in e.labels.iter().enumerate().skip(1) {
        let iv = e.intervals.get(k - 1).map_or("?", String::as_str);
        out.push('-');
        out.push_str(iv);
        out.push('-');
        out.push_str(label);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_needs_and_names_the_file_in_errors() {
        let path = Path::new("run.json");
        let doc = MineDocument::parse(
            r#"{"input": "a/b.nwb", "levels": [{"level": 1, "candidates": 3,
                "removed_by_bounds": 0, "eliminated_by_preelim": 0, "frequent": 2,
                "seconds": 0.1}], "episodes": [{"labels": ["6", "2"], "types": [6, 2],
                "intervals_s": [[0.01, 0.02]], "intervals": ["(10,20]ms"], "count": 5}]}"#,
            path,
        )
        .unwrap();
        assert_eq!(doc.name(), "b.nwb");
        assert!(doc.complete && doc.significance.is_none());
        let episodes = doc.episodes.unwrap();
        assert_eq!(notation(&episodes[0]), "6-(10,20]ms-2");
        assert!(episodes[0].test.is_none());
        let e = MineDocument::parse("{\"levels\": 3}", path).unwrap_err();
        assert!(e.to_string().starts_with("run.json: not a"), "{e}");
        let e = MineDocument::parse("[1, 2", path).unwrap_err();
        assert!(e.to_string().starts_with("run.json"), "{e}");
    }
}
