//! `synfire bench …`: benchmarks that print tables.

pub mod episodes;
pub mod stream;
