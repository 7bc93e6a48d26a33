//! Compiles `src/scan.c`, the harness's byte scans, without the coverage instrumentation the
//! Rust code gets (build scripts and C code never see RUSTFLAGS under `--target`).
fn main() {
    println!("cargo::rerun-if-changed=src/scan.c");
    cc::Build::new()
        .file("src/scan.c")
        .opt_level(2)
        .define("_GNU_SOURCE", None)
        .compile("synfire_fuzz_scan");
}
