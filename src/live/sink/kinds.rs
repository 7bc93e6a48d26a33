//! The one table of sink kinds, read by the pipeline loader. A new kind is one module of
//! `live::sink` and one row here (`docs/adding-a-stage.md`).

use super::{SinkKind, csv, jsonl, openephys_ttl, zmq_pub};

/// Every sink kind. A new kind is one module of `live::sink` and one row here.
pub static KINDS: &[SinkKind] = &[
    SinkKind::of::<jsonl::JsonlConfig>(),
    SinkKind::of::<zmq_pub::ZmqPubConfig>(),
    SinkKind::of::<openephys_ttl::TtlConfig>(),
    SinkKind::of::<csv::CsvConfig>(),
];
