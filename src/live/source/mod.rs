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
use crate::live::config::kinds::{Erased, Family, Kind, KindConfig, Spec};
use crate::live::config::section::ConfigError;
use crate::live::window::ClockRules;
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

    /// The rules of the source's event clock (jumps, restarts;
    /// [`crate::live::window::EventClock`]). Default: the range check only.
    fn clock(&self) -> ClockRules {
        ClockRules::default()
    }

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

/// The source family of the kinds table ([`kinds::KINDS`]).
#[derive(Debug)]
pub struct Sources;

impl Family for Sources {
    type Options = dyn AnySourceConfig;
    type Row = ();
}

impl<T: SourceConfig> KindConfig<Sources> for T {
    const NAME: &'static str = T::KIND;
    const ROW: () = ();
    fn erase(self) -> Box<dyn AnySourceConfig> {
        Box::new(self)
    }
}

/// A source kind's options with the type erased, as a [`SourceSpec`] holds them (every
/// [`SourceConfig`] is one).
pub trait AnySourceConfig: Erased {
    /// [`SourceConfig::produces`].
    fn produces(&self) -> StreamKind;
    /// [`SourceConfig::ring`].
    fn ring(&self) -> (usize, Overflow);
    /// [`SourceConfig::validate`].
    fn validate(&self) -> Vec<ConfigError>;
    /// [`SourceConfig::clock`].
    fn clock(&self) -> ClockRules;
    /// [`SourceConfig::open`].
    ///
    /// # Errors
    /// [`OpenError`] naming the file or endpoint.
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
    fn clock(&self) -> ClockRules {
        SourceConfig::clock(self)
    }
    fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        SourceConfig::open(self, name, ctx)
    }
}

/// One row of [`kinds::KINDS`]: a source kind's name and how its section is parsed.
pub type SourceKind = Kind<Sources>;

/// A parsed source section: its kind and typed options.
pub type SourceSpec = Spec<Sources>;

impl SourceSpec {
    /// What the source produces.
    #[must_use]
    pub fn produces(&self) -> StreamKind {
        self.erased().produces()
    }

    /// Ring capacity (records) and overflow policy.
    #[must_use]
    pub fn ring(&self) -> (usize, Overflow) {
        self.erased().ring()
    }

    /// Phase-2 checks, fields relative to the section.
    #[must_use]
    pub fn validate(&self) -> Vec<ConfigError> {
        self.erased().validate()
    }

    /// The rules of the source's event clock.
    #[must_use]
    pub fn clock(&self) -> ClockRules {
        self.erased().clock()
    }

    /// Opens the source.
    ///
    /// # Errors
    /// [`OpenError`] naming the file or endpoint.
    pub fn open(&self, name: &str, ctx: &OpenContext<'_>) -> Result<Box<dyn Source>, OpenError> {
        self.erased().open(name, ctx)
    }
}
