//! The vocabulary of a pipeline file, shared by every component's configuration: errors that
//! name a dotted field ([`ConfigError`], [`ConfigErrors`]) and typed deserialisation of one
//! section that collects every unknown field ([`typed`]).
//!
//! A leaf module: the configurations of sources, stages and sinks import it, and the loader
//! (`live::config`) imports them.

use std::fmt;
use std::path::PathBuf;

use serde::de::DeserializeOwned;

/// One configuration error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted field, e.g. `sources.mea.ring_capacity` (empty for file-level errors). A
    /// component's own checks name fields relative to its section (`ring_capacity`); the
    /// loader prefixes the section.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// An error of `field`.
    #[must_use]
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error with `prefix.` before its field (a whole-section error gets `prefix`).
    #[must_use]
    pub fn within(mut self, prefix: &str) -> Self {
        self.field = if self.field.is_empty() {
            prefix.to_owned()
        } else {
            format!("{prefix}.{}", self.field)
        };
        self
    }
}

/// Every error of a pipeline file.
#[derive(Debug, thiserror::Error)]
pub struct ConfigErrors {
    /// The file.
    pub file: PathBuf,
    /// The errors, in file order by section.
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.errors.len();
        write!(
            f,
            "{}: {n} error{}",
            self.file.display(),
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            if e.field.is_empty() {
                write!(f, "\n  {}: {}", self.file.display(), e.message)?;
            } else {
                write!(
                    f,
                    "\n  {}: `{}`: {}",
                    self.file.display(),
                    e.field,
                    e.message
                )?;
            }
        }
        Ok(())
    }
}

/// Deserialises `value` as `T`, collecting every unknown field (as `prefix.field`) and the
/// first type error into `errors`; `None` when `T` could not be built.
pub fn typed<T: DeserializeOwned>(
    value: toml::Value,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<T> {
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let de = serde_path_to_error::Deserializer::new(value, &mut track);
    // serde_ignored writes a field inside an `Option` as `?`; the file has no such level.
    let result = serde_ignored::deserialize(de, |path| {
        unknown.push(path.to_string().replace(".?", ""));
    });
    for u in unknown {
        errors.push(ConfigError::new(format!("{prefix}.{u}"), "unknown field"));
    }
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let path = track.path().to_string();
            let field = if path.is_empty() || path == "." {
                prefix.to_owned()
            } else {
                format!("{prefix}.{path}")
            };
            errors.push(ConfigError::new(field, e.to_string()));
            None
        }
    }
}

/// Connect or bind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketMode {
    /// `connect` to a peer that binds.
    Connect,
    /// `bind` and let peers connect.
    Bind,
}
