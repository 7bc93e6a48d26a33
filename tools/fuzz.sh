#!/usr/bin/env bash
# Fuzzes every reader and decoder of synfire with libFuzzer on STABLE Rust (fuzz/README.md).
#
#   tools/fuzz.sh TARGET|all [N]   build, then run each target for N inputs (default 10^7)
#                                  on all cores; prints per target the inputs run, the
#                                  seconds, inputs/s and the crashes; exits 1 on any crash,
#                                  timeout or out-of-memory
#   tools/fuzz.sh all 20000        the brief run for CI: about 2.5 minutes on 2 cores once built
#                                  (the first build of the instrumented crate: ~12 minutes)
#   tools/fuzz.sh build            only build; prints where the binaries are
#   tools/fuzz.sh seeds            rewrite fuzz/seeds/ from the fixtures (fuzz-seeds)
#   tools/fuzz.sh min TARGET FILE  minimise a crashing input (written next to FILE, `.min`)
#   tools/fuzz.sh list             the targets
#
# Targets: wire openephys_json openephys_raw csv phy openephys_binary nwb_units nwb_unit_column
# nwb_epochs nwb_timeseries pipeline.
#
# Needs: the stable Rust toolchain that builds synfire, a C++ compiler (libFuzzer is compiled
# by libfuzzer-sys's build script; g++ works), CMake >= 3.26 for the static HDF5 build
# (tools/setup.sh), and network only for the first build (crates.io). No nightly, no
# cargo-fuzz: the coverage instrumentation is rustc's SanitizerCoverage pass, enabled by the
# RUSTFLAGS below (what `cargo fuzz build --sanitizer none` passes).
#
# Environment:
#   SYNFIRE_FUZZ_JOBS=N      parallel fuzzing processes (default: all cores, `nproc`)
#   SYNFIRE_FUZZ_BIN_DIR=D   run the binaries in D (copied from a build elsewhere) and build
#                            nothing; they need only libstdc++ and glibc
#   SYNFIRE_FUZZ_OFFLINE=1   build with `cargo --offline`
#   SYNFIRE_FUZZ_TARGET_DIR  the build's target dir (default fuzz/target; CARGO_TARGET_DIR is
#                            ignored so that the main build's dir is never used)
#   SYNFIRE_FUZZ_TIMEOUT_S   seconds one input may take before it counts as a hang (10; NWB
#                            targets 30)
#   SYNFIRE_FUZZ_MAX_TIME_S=S stop each target after S seconds even below N inputs (libFuzzer's
#                            -max_total_time; the count printed is what ran): long runs split
#                            over several sessions of a host with a time limit per command
#   SYNFIRE_FUZZ_RSS_MB      peak memory of one process before it counts as out-of-memory
#                            (2048; NWB targets 5120: HDF5 allocates and zero-fills the on-disk
#                            length of a variable-length string, up to 4 GiB, before checking
#                            it; synfire refuses such lengths first where the storage is plain,
#                            but compact and compressed columns reach HDF5 unchecked; see
#                            fuzz/README.md, "Known upstream bugs")
#   SYNFIRE_FUZZ_PROFILE=P   the cargo profile of the instrumented build: `release` (default)
#                            or `ci` (fuzz/Cargo.toml: opt-level 1, no debug lines; CI's brief
#                            runs, a much shorter build)
#   CARGO_TARGET_DIR         the build folder (default fuzz/target)
#
# Output: the growing corpora in fuzz/corpus/TARGET/ (started from fuzz/seeds/ and the real
# fixtures), crashing inputs in fuzz/artifacts/TARGET/ (crash-*, timeout-*, oom-*), libFuzzer's
# log in fuzz/logs/TARGET.log. Reproduce one input: `BIN/TARGET FILE` (from the repository
# root; SYNFIRE_FUZZ_DEBUG=1 prints what the reader returned).
#
# Counts: libFuzzer's fork mode (-fork=JOBS) runs short child processes and counts the inputs
# of those that finished; the number printed is that count (at least N when no child
# crashed; the inputs of the children still running at the end, and of a crashing child, are
# not in it).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
FUZZ="$ROOT/fuzz"
TARGETS=(wire openephys_json openephys_raw csv phy openephys_binary nwb_units nwb_unit_column
  nwb_epochs nwb_timeseries pipeline)
JOBS=${SYNFIRE_FUZZ_JOBS:-$(nproc)}
PROFILE=${SYNFIRE_FUZZ_PROFILE:-release}
HOST=$(rustc -vV 2>/dev/null | sed -n 's/^host: //p' || true)
HOST=${HOST:-x86_64-unknown-linux-gnu}
# The instrumented build never shares the main build's target dir (other RUSTFLAGS would
# rebuild everything both ways): fuzz/target, or SYNFIRE_FUZZ_TARGET_DIR; CARGO_TARGET_DIR is
# ignored.
export CARGO_TARGET_DIR=${SYNFIRE_FUZZ_TARGET_DIR:-$FUZZ/target}

usage() {
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

bin_dir() {
  if [ -n "${SYNFIRE_FUZZ_BIN_DIR:-}" ]; then
    echo "$SYNFIRE_FUZZ_BIN_DIR"
  else
    echo "$CARGO_TARGET_DIR/$HOST/$PROFILE"
  fi
}

build() {
  if [ -n "${SYNFIRE_FUZZ_BIN_DIR:-}" ]; then
    echo "fuzz: using the binaries in $SYNFIRE_FUZZ_BIN_DIR (no build)" >&2
    return
  fi
  # cargo-fuzz's flags for `--sanitizer none` (stable): SanitizerCoverage with 8-bit counters,
  # PC tables and comparison tracing; `--cfg fuzzing`; debug assertions and overflow checks,
  # so an arithmetic overflow is a crash rather than a wrapped length. `--target` keeps the
  # flags off build scripts and proc macros.
  local flags="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4"
  flags+=" -Cllvm-args=-sanitizer-coverage-inline-8bit-counters"
  flags+=" -Cllvm-args=-sanitizer-coverage-pc-table"
  flags+=" -Cllvm-args=-sanitizer-coverage-trace-compares"
  flags+=" --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
  local offline=()
  [ "${SYNFIRE_FUZZ_OFFLINE:-0}" = 1 ] && offline=(--offline)
  echo "fuzz: building the targets (cargo build --profile $PROFILE --target $HOST, $CARGO_TARGET_DIR)" >&2
  (cd "$FUZZ" && RUSTFLAGS="$flags" cargo build "${offline[@]}" --profile "$PROFILE" --target "$HOST" \
    --bins --quiet)
  echo "fuzz: binaries in $(bin_dir) (copy them with fuzz/ and fixtures/ to run elsewhere" \
    "with SYNFIRE_FUZZ_BIN_DIR)" >&2
}

# The seed sets and real fixtures a target's corpus starts from.
seed_sources() {
  case "$1" in
    nwb_timeseries)
      echo "$FUZZ/seeds/nwb" "$ROOT/fixtures/spikes/A8604-211122/A8604-211122.nwb" \
        "$ROOT/fixtures/spikes/A2929-200711/A2929-200711.nwb" ;;
    nwb_*) echo "$FUZZ/seeds/nwb" "$ROOT/fixtures/spikes/A8604-211122/A8604-211122.nwb" ;;
    pipeline) echo "$FUZZ/seeds/pipeline" "$ROOT"/pipelines/*.toml ;;
    *) echo "$FUZZ/seeds/$1" ;;
  esac
}

# Largest input, bytes: the real NWB files are 442 KB and (A2929, time series only) 7.2 MB.
max_len() {
  case "$1" in
    nwb_timeseries) echo 8000000 ;;
    nwb_*) echo 600000 ;;
    phy | openephys_binary) echo 65536 ;;
    csv | pipeline) echo 16384 ;;
    *) echo 4096 ;;
  esac
}

timeout_of() {
  case "$1" in
    nwb_*) echo "${SYNFIRE_FUZZ_TIMEOUT_S:-30}" ;;
    *) echo "${SYNFIRE_FUZZ_TIMEOUT_S:-10}" ;;
  esac
}

rss_of() {
  case "$1" in
    nwb_*) echo "${SYNFIRE_FUZZ_RSS_MB:-5120}" ;;
    *) echo "${SYNFIRE_FUZZ_RSS_MB:-2048}" ;;
  esac
}

dict_of() {
  case "$1" in
    nwb_*) echo "$FUZZ/dicts/nwb.dict" ;;
    openephys_json) echo "$FUZZ/dicts/openephys_json.dict" ;;
    csv | phy | pipeline | openephys_binary) echo "$FUZZ/dicts/$1.dict" ;;
    *) echo "" ;;
  esac
}

artifacts_of() {
  find "$FUZZ/artifacts/$1" -maxdepth 1 -type f \
    \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) \
    -printf '%f\n' 2>/dev/null | sort
}

SUMMARY=()
FAILED=0

run_target() {
  local t=$1 n=$2
  local bin
  bin="$(bin_dir)/$t"
  [ -x "$bin" ] || { echo "fuzz: no binary $bin" >&2; exit 1; }
  local corpus="$FUZZ/corpus/$t" art="$FUZZ/artifacts/$t" log="$FUZZ/logs/$t.log"
  mkdir -p "$corpus" "$art" "$FUZZ/logs"
  local src
  for src in $(seed_sources "$t"); do
    if [ -d "$src" ]; then
      cp -n "$src"/* "$corpus"/ 2>/dev/null || true
    else
      cp -n "$src" "$corpus/seed-$(basename "$src")"
    fi
  done
  local before
  before=$(artifacts_of "$t")
  local scratch
  scratch=$(mktemp -d "$( [ -d /dev/shm ] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/synfire-fuzz-$t.XXXXXX")
  local args=(-fork="$JOBS" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -runs="$n"
    -timeout="$(timeout_of "$t")" -rss_limit_mb="$(rss_of "$t")" -max_len="$(max_len "$t")"
    -artifact_prefix="$art/")
  local dict
  dict=$(dict_of "$t")
  [ -n "$dict" ] && args+=(-dict="$dict")
  [ -n "${SYNFIRE_FUZZ_MAX_TIME_S:-}" ] && args+=(-max_total_time="$SYNFIRE_FUZZ_MAX_TIME_S")
  echo "fuzz: $t: $n inputs on $JOBS processes (log: ${log#"$ROOT"/})" >&2
  local start end rc=0
  start=$(date +%s.%N)
  # From the repository root: the pipeline seeds name fixtures by relative paths.
  (cd "$ROOT" && SYNFIRE_FUZZ_TMP="$scratch" "$bin" "${args[@]}" "$corpus" >"$log" 2>&1) || rc=$?
  end=$(date +%s.%N)
  rm -rf "$scratch"
  local stats runs=0 ooms=0 timeouts=0 crashes=0 cov="?"
  stats=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -n1 || true)
  if [ -n "$stats" ]; then
    runs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$stats")
    cov=$(sed -E 's/.* cov: ([0-9]+) .*/\1/' <<<"$stats")
    IFS=/ read -r ooms timeouts crashes < <(sed -E 's|.*oom/timeout/crash: ([0-9]+/[0-9]+/[0-9]+).*|\1|' <<<"$stats")
  fi
  local new
  new=$(comm -13 <(echo "$before") <(artifacts_of "$t") | sed '/^$/d' || true)
  local secs rate
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  rate=$(awk -v r="$runs" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", r / (b - a) }')
  local verdict="ok"
  if [ "$crashes" -gt 0 ] || [ "$timeouts" -gt 0 ] || [ "$ooms" -gt 0 ] || [ -n "$new" ] \
    || [ "$runs" -eq 0 ]; then
    verdict="FAILED"
    FAILED=1
  fi
  [ "$runs" -eq 0 ] && echo "fuzz: $t: no input counted (exit $rc); see $log" >&2
  SUMMARY+=("$(printf '%-16s %12s %8s %10s %6s %16s  %s' "$t" "$runs" "$secs" "$rate" "$cov" \
    "$crashes/$timeouts/$ooms" "$verdict")")
  if [ -n "$new" ]; then
    echo "fuzz: $t: new artifacts:" >&2
    sed "s|^|  ${art#"$ROOT"/}/|" <<<"$new" >&2
  fi
}

print_summary() {
  printf '%-16s %12s %8s %10s %6s %16s  %s\n' target inputs seconds inputs/s cov \
    crash/hang/oom verdict
  printf '%s\n' "${SUMMARY[@]}"
}

cmd=${1:-}
case "$cmd" in
  "" | -h | --help) usage ;;
  list) printf '%s\n' "${TARGETS[@]}" ;;
  build) build ;;
  seeds)
    build
    "$(bin_dir)/fuzz-seeds" "$ROOT" "$FUZZ/seeds"
    ;;
  min)
    [ $# -eq 3 ] || usage
    build
    file=$(realpath "$3")
    set -- "$1" "$2" "$file"
    scratch=$(mktemp -d)
    (cd "$ROOT" && SYNFIRE_FUZZ_TMP="$scratch" "$(bin_dir)/$2" -minimize_crash=1 \
      -runs=100000 -timeout="$(timeout_of "$2")" -rss_limit_mb="$(rss_of "$2")" \
      -max_len="$(max_len "$2")" \
      -exact_artifact_path="$3.min" "$3") || true
    rm -rf "$scratch"
    [ -f "$3.min" ] || { echo "fuzz: $3 does not crash $2 (nothing to minimise)" >&2; exit 1; }
    echo "fuzz: minimised input: $3.min ($(wc -c <"$3.min") bytes)" >&2
    ;;
  *)
    n=${2:-10000000}
    if [ "$cmd" = all ]; then
      selected=("${TARGETS[@]}")
    else
      printf '%s\n' "${TARGETS[@]}" | grep -qx "$cmd" || { echo "fuzz: no target $cmd" >&2; usage; }
      selected=("$cmd")
    fi
    build
    for t in "${selected[@]}"; do
      run_target "$t" "$n"
    done
    print_summary
    exit "$FAILED"
    ;;
esac
