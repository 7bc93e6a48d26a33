//! The one table of source kinds, read by the pipeline loader. A new kind is one module of
//! `live::source` and one row here (`docs/adding-a-stage.md`).

use super::{SourceKind, archive, zmq};

/// Every source kind. A new kind is one module of `live::source` and one row here.
pub static KINDS: &[SourceKind] = &[
    SourceKind::of::<archive::Hdf5SourceConfig>(),
    SourceKind::of::<zmq::ZmqSourceConfig>(),
];
