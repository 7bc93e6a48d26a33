#!/usr/bin/env bash
# On a GPU host (the `device` tool): runs test binaries and release binaries built on the
# build machine and carried in `gpu-carry/` (stripped, xz-compressed; see the loop at the end
# of this comment), with SYNFIRE_REQUIRE_GPU=1 and --include-ignored so every GPU test runs and
# a missing GPU fails them. Then times `synfire bench episodes` of two binaries side by side
# (`synfire-before`, `synfire-after`), when both are carried.
#
# Build machine, to fill gpu-carry/ (ignored by git):
#   cargo test --release --no-run --message-format=json | python3 -c '…executables…'
#   strip + xz each test binary into gpu-carry/tests/, and target/release/synfire into
#   gpu-carry/synfire.xz (test binaries find it at the absolute path they were built with).
set -uo pipefail
carry=${1:-gpu-carry}
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for f in "$carry"/*.xz "$carry"/tests/*.xz; do [ -e "$f" ] && xz -dkf "$f"; done
chmod +x "$carry"/synfire* "$carry"/tests/* 2>/dev/null
# The test binaries were built in the checkout `bin-path.txt` names (CARGO_MANIFEST_DIR and
# CARGO_BIN_EXE_synfire are absolute): make that path this checkout, so fixtures and the
# binary are where they look.
bin_path=$(cat "$carry/bin-path.txt")
root=${bin_path%/target/release/synfire}
if [ ! -e "$root" ]; then mkdir -p "$(dirname "$root")" && ln -s "$PWD" "$root"; fi
mkdir -p target/release && cp "$carry/synfire" target/release/synfire
status=0
export SYNFIRE_REQUIRE_GPU=1
for t in "$carry"/tests/*; do
    case "$t" in *.xz) continue ;; esac
    name=$(basename "$t")
    if "$t" --include-ignored --test-threads 4 >"$out/$name.log" 2>&1; then
        echo "PASS $name: $(grep -E '^test result' "$out/$name.log" | tail -1)"
    else
        status=1
        echo "FAIL $name:"; grep -E "^test .*FAILED|panicked|^test result" "$out/$name.log" | head -20
    fi
done
if [ -z "${SKIP_BENCH:-}" ] && [ -x "$carry/synfire-before" ] && [ -x "$carry/synfire" ]; then
    for round in 1 2; do
        for v in before after; do
            bin="$carry/synfire-$v"; [ "$v" = after ] && bin="$carry/synfire"; "$bin" bench episodes --device all --workload mea64,a2929,sym26 --repeat 3 \
                >"$out/bench-episodes-$v-$round.txt" 2>"$out/bench-episodes-$v-$round.err"
            echo "bench episodes $v round $round: rc=$?"
        done
    done
fi
exit $status
