//! Sets `cfg(synfire_gpu)` when this machine looks like it has an NVIDIA GPU (a driver device
//! node), or when `SYNFIRE_REQUIRE_GPU=1`. Tests that need a GPU carry
//! `#[cfg_attr(not(synfire_gpu), ignore = "…")]`, so a machine without one reports them as
//! ignored rather than "ok"; with `SYNFIRE_REQUIRE_GPU=1` they run and fail without a GPU.

use std::path::Path;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(synfire_gpu)");
    println!("cargo::rerun-if-env-changed=SYNFIRE_REQUIRE_GPU");
    println!("cargo::rerun-if-changed=build.rs");
    let required = std::env::var("SYNFIRE_REQUIRE_GPU").as_deref() == Ok("1");
    let driver = Path::new("/dev/nvidiactl").exists() || Path::new("/dev/dxg").exists();
    if required || driver {
        println!("cargo::rustc-cfg=synfire_gpu");
    }
}
