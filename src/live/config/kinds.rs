//! The one shape of a kinds table, shared by sources, stages and sinks.
//!
//! A *family* of components ([`Family`]: `live::source::Sources`, `live::stage::Stages`,
//! `live::sink::Sinks`) names the type-erased options its sections parse into
//! ([`Family::Options`], e.g. `dyn AnySourceConfig`) and what a row says besides the kind's name
//! ([`Family::Row`]: a stage's input and placement, a sink's restriction to detect stages). A
//! kind is one options type ([`KindConfig`], implemented through the family's own trait:
//! `SourceConfig`, `StageConfig`, `SinkConfig`), registered by one row
//! ([`Kind::of`]) in the family's table, one file with one row per kind
//! (`live/source/kinds.rs`, `live/stage/kinds.rs`, `live/sink/kinds.rs`). The loader looks a
//! section's `kind = "…"` up in the table ([`named`]), parses the section into the kind's
//! options ([`Kind::parse`], phase 1) and keeps them as a [`Spec`].
//!
//! A leaf beside `section.rs`: the families import it; it imports only `section`.

use std::any::Any;
use std::fmt;

use serde::de::DeserializeOwned;

use crate::live::config::section::{ConfigError, typed};

/// What every family's erased options extend: the concrete options can be had back
/// ([`Spec::options`]).
pub trait Erased: Any + fmt::Debug + Send + Sync {
    /// The options as [`Any`] (to downcast to the kind's type).
    fn as_any(&self) -> &dyn Any;
    /// The options as mutable [`Any`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any + fmt::Debug + Send + Sync> Erased for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A family of kinds (sources, stages, sinks): what its sections parse into and what its rows
/// carry.
pub trait Family: 'static {
    /// A kind's options with the type erased (e.g. `dyn AnySourceConfig`): what a parsed
    /// section holds.
    type Options: ?Sized + Erased;
    /// What a row says besides the kind's name (`()` when nothing).
    type Row: Copy + fmt::Debug + Send + Sync + 'static;
}

/// One kind's options (its `[<section>.<name>]` table less `kind` and what the loader reads
/// for every section of the family), registered in `F`'s table. Implemented through the
/// family's own trait (a blanket impl), not by each kind.
pub trait KindConfig<F: Family>: DeserializeOwned + 'static {
    /// The kind's name, as written in `kind = "…"`.
    const NAME: &'static str;
    /// The kind's row data.
    const ROW: F::Row;
    /// The options, type-erased.
    fn erase(self) -> Box<F::Options>;
}

/// Parses one section's options into a kind's erased options (phase 1).
type ParseFn<F> =
    fn(toml::Value, &str, &mut Vec<ConfigError>) -> Option<Box<<F as Family>::Options>>;

/// One row of a kinds table: a kind's name, its row data, and how its section is parsed.
pub struct Kind<F: Family> {
    /// The name in `kind = "…"`.
    pub name: &'static str,
    /// The family's row data (a stage's input and placement, …).
    pub row: F::Row,
    parse: ParseFn<F>,
}

impl<F: Family> Clone for Kind<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F: Family> Copy for Kind<F> {}

impl<F: Family> fmt::Debug for Kind<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

fn parse_as<F: Family, T: KindConfig<F>>(
    value: toml::Value,
    prefix: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<Box<F::Options>> {
    typed::<T>(value, prefix, errors).map(T::erase)
}

impl<F: Family> Kind<F> {
    /// The row of kind `T`.
    #[must_use]
    pub const fn of<T: KindConfig<F>>() -> Self {
        Self {
            name: T::NAME,
            row: T::ROW,
            parse: parse_as::<F, T>,
        }
    }

    /// Parses a section's options (phase 1: unknown fields and wrong types, into `errors`,
    /// each field as `prefix.field`).
    #[must_use]
    pub fn parse(
        &'static self,
        options: toml::Value,
        prefix: &str,
        errors: &mut Vec<ConfigError>,
    ) -> Option<Spec<F>> {
        (self.parse)(options, prefix, errors).map(|options| Spec {
            kind: self,
            options,
        })
    }
}

/// The kind named `name` (as written in `kind = "…"`) in `table`.
#[must_use]
pub fn named<F: Family>(table: &'static [Kind<F>], name: &str) -> Option<&'static Kind<F>> {
    table.iter().find(|k| k.name == name)
}

/// The names of `table`'s kinds, in table order (for "expected one of" messages).
#[must_use]
pub fn names<F: Family>(table: &[Kind<F>]) -> Vec<&'static str> {
    table.iter().map(|k| k.name).collect()
}

/// A parsed section: its kind and its typed options, type-erased.
pub struct Spec<F: Family> {
    /// The kind.
    pub kind: &'static Kind<F>,
    options: Box<F::Options>,
}

impl<F: Family> fmt::Debug for Spec<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spec")
            .field("kind", &self.kind)
            .field("options", &&*self.options)
            .finish()
    }
}

impl<F: Family> Spec<F> {
    /// The options as kind `T`'s, if the section is of that kind.
    #[must_use]
    pub fn options<T: Any>(&self) -> Option<&T> {
        (*self.options).as_any().downcast_ref()
    }

    /// The options as kind `T`'s, mutable (a test pointing a sink at a file of its own), if
    /// the section is of that kind.
    #[must_use]
    pub fn options_mut<T: Any>(&mut self) -> Option<&mut T> {
        (*self.options).as_any_mut().downcast_mut()
    }

    /// The erased options (the family's trait object).
    #[must_use]
    pub fn erased(&self) -> &F::Options {
        &self.options
    }
}
