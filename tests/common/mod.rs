//! Helpers shared by the integration tests (`mod common;` in each test crate; each crate uses
//! some of them, hence `dead_code` is allowed).
#![allow(dead_code)]

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

/// True when a GPU is usable. Without one, prints why `test` skips its GPU part and returns
/// false, or fails when `SYNFIRE_REQUIRE_GPU=1` (the GPU host's runs).
pub fn gpu_or_skip(test: &str) -> bool {
    match synfire::device::probe() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                std::env::var("SYNFIRE_REQUIRE_GPU").as_deref() != Ok("1"),
                "{test}: SYNFIRE_REQUIRE_GPU=1 but no GPU is usable: {e}"
            );
            eprintln!("{test}: skipped on the GPU: {e}");
            false
        }
    }
}
