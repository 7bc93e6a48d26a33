//! Helpers shared by the CLI integration tests.

use std::ffi::OsStr;
use std::process::{Command, Output};

/// Runs the binary with `args`, logging at the default level and without colours.
pub fn synfire<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_synfire"))
        .args(args)
        .env_remove("SYNFIRE_LOG")
        .env("NO_COLOR", "1")
        .output()
        .expect("the synfire binary runs")
}
