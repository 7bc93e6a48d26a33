#!/usr/bin/env bash
# Installs what a fresh machine needs to build synfire, and nothing else:
#   - a Rust toolchain (must already be there: rustup is not fetched here),
#   - CMake >= 3.26 for the static HDF5 build of hdf5-metno (Debian 12 ships 3.25),
#     installed from PyPI when missing or too old.
# Idempotent: a second run only checks.
set -euo pipefail

need_cmake() {
  command -v cmake >/dev/null 2>&1 || return 0
  local v
  v=$(cmake --version | head -n1 | awk '{print $3}')
  # true (needs install) when v < 3.26
  [ "$(printf '%s\n3.26.0\n' "$v" | sort -V | head -n1)" != "3.26.0" ]
}

if ! command -v cargo >/dev/null 2>&1; then
  echo "setup: cargo not found; install a Rust toolchain (rustup) first" >&2
  exit 1
fi

if need_cmake; then
  echo "setup: installing CMake >= 3.26 from PyPI (needed to build HDF5 statically)" >&2
  python3 -m pip install --quiet --disable-pip-version-check 'cmake>=3.26' >&2
  hash -r
  if need_cmake; then
    echo "setup: cmake >= 3.26 still not on PATH after pip install; add pip's script dir to PATH" >&2
    exit 1
  fi
fi
echo "setup: ok ($(cargo --version), $(cmake --version | head -n1))" >&2
