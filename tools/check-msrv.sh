#!/usr/bin/env bash
# Checks the declared minimum supported Rust version (`rust-version` in Cargo.toml) as far as
# the installed toolchain allows:
#   1. clippy's `incompatible_msrv` lint as an error: no standard-library item stabilised after
#      our rust-version is used (clippy reads rust-version from Cargo.toml). The lint is on by
#      default (clippy::suspicious, warn), so `cargo clippy --all-targets -- -D warnings` in
#      .ci/run already denies it: CI runs this script with `--no-clippy` and saves a second
#      clippy pass over every target; run alone, the script makes the check explicit.
#   2. `cargo metadata` (every package of Cargo.lock, all platforms): no dependency declares a
#      `rust-version` above ours. Prints each offender.
#
# What this does NOT catch (be careful before lowering rust-version):
#   - Language features newer than the MSRV. clippy's lint only knows library items with a
#     `#[stable(since)]` attribute; syntax such as let-chains (stable in 1.88) or new lints,
#     cargo features and compiler behaviour are not checked. Neither is anything gated by
#     `cfg(version)`-style build scripts of dependencies.
#   - Dependencies that declare no rust-version at all (about a quarter of the tree): they may
#     need a newer compiler than ours and nothing here would notice.
#   - The real guarantee is building and testing with that toolchain (`cargo +1.88 test`),
#     which needs the 1.88 toolchain installed; rustup cannot download it offline, so CI only
#     runs the checks above with the installed stable toolchain.
#
# Needs: cargo with clippy, python3. `cargo metadata` resolves every platform's packages, so it
# downloads the few Windows-only crates once if the registry cache lacks them (no build).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--no-clippy" ]; then
  cargo clippy --release --all-targets -- -D clippy::incompatible_msrv
fi

cargo metadata --format-version 1 --locked | python3 -c '
import json, sys

def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))

meta = json.load(sys.stdin)
members = set(meta["workspace_members"])
ours = [p for p in meta["packages"] if p["id"] in members]
msrv = max(version(p["rust_version"]) for p in ours if p.get("rust_version"))
shown = ".".join(map(str, msrv))
offenders = sorted(
    (version(p["rust_version"]), p["name"], p["version"], p["rust_version"])
    for p in meta["packages"]
    if p["id"] not in members and p.get("rust_version") and version(p["rust_version"]) > msrv
)
for _, name, ver, rv in offenders:
    print(f"check-msrv: {name} {ver} declares rust-version {rv}, above ours ({shown})", file=sys.stderr)
if offenders:
    sys.exit(1)
declared = [version(p["rust_version"]) for p in meta["packages"]
            if p["id"] not in members and p.get("rust_version")]
top = ".".join(map(str, max(declared))) if declared else "none"
deps = len(meta["packages"]) - len(ours)
print(f"check-msrv: ok: rust-version {shown}; {len(declared)} of {deps} dependencies declare one, "
      f"the highest {top}", file=sys.stderr)
'
