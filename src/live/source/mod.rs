//! Sources: where a pipeline's records come from. Each kind lives in one file beside its
//! configuration ([`SourceConfig`]: the options of its `[sources.<name>]` section, their
//! checks, and how it opens), and [`kinds::KINDS`] is the one table the loader reads.
//!
//! Lifecycle, as for stages: the loader parses and validates the section; `run` opens every
//! source before any thread starts ([`SourceConfig::open`]: files read, sockets bound or
//! connected, so that a bad path or endpoint is a startup error), then runs each opened
//! [`Source`] on its own named thread, where it pushes [`crate::record::Record`]s onto its
//! ring and always ends with [`crate::record::Record::End`].

pub mod archive;
pub mod kinds;
pub mod zmq;

use serde::de::DeserializeOwned;

use crate::live::buffer::{Overflow, RingProducer};
use crate::live::config::section::{ConfigError, typed};
use crate::record::StreamKind;

/// What opening a source may need from the pipeline: the process's ZeroMQ context.
#[allow(missing_debug_implementations)]
pub struct OpenContext<'a> {
    /// The pipeline's ZeroMQ context (one per pipeline; sockets are created from it).
    pub zmq: &'a ::zmq::Context,
}

/// Why a source could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OpenError(pub String);

/// The options of one source kind: its `[sources.<name>]` table less `kind`. Defaults live
/// in the type.
pub trait SourceConfig: DeserializeOwned + std::fmt::Debug + Send + Sync + 'static {
    /// The kind's name, as written in `kind = "…"`.
    const KIND: &'static str;

    /// What the source produces (it may depend on the options).
    fn produces(&self) -> StreamKind;

    /// The ring between the source and its window thread: capacity in records and what a
    /// full ring does.
    fn ring(&self) -> (usize, Overflow);

    /// Phase 2 of validation: every problem found, fields relative to the section.
    fn validate(&self) -> Vec<ConfigError>;

    /// Opens the source named `name` (reads the archive, opens the socket), on the thread
    /// that builds the pipeline.
    ///
    /// # Errors
    /// [`OpenError`] naming the file or endpoint.
    fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError>;
}

/// An opened source, ready to run on its own thread.
pub trait Source: Send {
    /// Pushes records onto `ring` until the input ends or a stop is requested (the ring's
    /// stop flag), then pushes a final [`crate::record::Record::End`].
    fn run(self: Box<Self>, ring: RingProducer);
}

/// A source kind's options, type-erased for the kinds table.
trait AnySourceConfig: std::fmt::Debug + Send + Sync {
    fn produces(&self) -> StreamKind;
    fn ring(&self) -> (usize, Overflow);
    fn validate(&self) -> Vec<ConfigError>;
    fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError>;
}

impl<T: SourceConfig> AnySourceConfig for T {
    fn produces(&self) -> StreamKind {
        SourceConfig::produces(self)
    }
    fn ring(&self) -> (usize, Overflow) {
        SourceConfig::ring(self)
    }
    fn validate(&self) -> Vec<ConfigError> {
        SourceConfig::validate(self)
    }
    fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        SourceConfig::open(self, name, ctx)
    }
}

/// Parses one section's options into a kind's typed config (phase 1).
type ParseFn = fn(toml::Value, &str, &mut Vec<ConfigError>) -> Option<Box<dyn AnySourceConfig>>;

/// One row of [`kinds::KINDS`]: a source kind's name and how its section is parsed.
#[derive(Clone, Copy)]
pub struct SourceKind {
    /// The name in `kind = "…"`.
    pub name: &'static str,
    parse: ParseFn,
}

impl std::fmt::Debug for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

fn parse_as<T: SourceConfig>(
    value: toml::Value,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Box<dyn AnySourceConfig>> {
    typed::<T>(value, prefix, errors).map(|c| Box::new(c) as Box<dyn AnySourceConfig>)
}

impl SourceKind {
    /// The row of kind `T`.
    #[must_use]
    pub const fn of<T: SourceConfig>() -> Self {
        Self {
            name: T::KIND,
            parse: parse_as::<T>,
        }
    }

    /// Parses a section's options (phase 1: unknown fields and wrong types, into `errors`).
    #[must_use]
    pub fn parse(
        &'static self,
        options: toml::Value,
        prefix: &str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<SourceSpec> {
        (self.parse)(options, prefix, errors).map(|options| SourceSpec {
            kind: self,
            options,
        })
    }
}

/// A parsed source section: its kind and typed options.
#[derive(Debug)]
pub struct SourceSpec {
    /// The kind.
    pub kind: &'static SourceKind,
    options: Box<dyn AnySourceConfig>,
}

impl SourceSpec {
    /// What the source produces.
    #[must_use]
    pub fn produces(&self) -> StreamKind {
        self.options.produces()
    }

    /// Ring capacity (records) and overflow policy.
    #[must_use]
    pub fn ring(&self) -> (usize, Overflow) {
        self.options.ring()
    }

    /// Phase-2 checks, fields relative to the section.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        self.options.validate()
    }

    /// Opens the source.
    ///
    /// # Errors
    /// [`OpenError`] naming the file or endpoint.
    pub fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        self.options.open(name, ctx)
    }
}
