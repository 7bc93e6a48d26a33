#!/usr/bin/env bash
# The Python package's tests (issue 19): builds and installs the package from this checkout
# into a virtual environment (<target dir>/py-venv, reused), then runs pytest on python/tests.
# Needs python3 (>= 3.10) with venv, network access to PyPI the first time (maturin, numpy,
# pandas, pytest, pynwb, pyzmq for the mock Network Events plugin; neo, pynapple and
# spikeinterface for the interoperability tests, about 40 s more on a cold cache; ray for the
# cluster tests, issue 22: a 79 MB wheel, 240 MB installed; mypy for the type checks, issue
# 44; nwbinspector for the NWB results, issue 47), and what `cargo build` needs. The CLI binary the tests compare against is
# the release build of this checkout (built here if missing). Honours CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
case "$target" in /*) ;; *) target="$PWD/$target" ;; esac
venv="$target/py-venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  'maturin>=1.7,<2' 'numpy>=1.22' 'pandas>=1.5' 'pytest>=7' 'pynwb>=4,<5' 'pyzmq>=25' \
  'neo>=0.13,<0.15' 'pynapple>=0.8,<0.12' 'spikeinterface>=0.101,<0.106' 'ray>=2.9,<3' \
  'mypy>=1.18,<3' 'nwbinspector>=0.7,<0.8'
# This package was distributed as `synfire` before ADR 0005 (now `synfire-mining`); a venv
# that still holds that install would keep its files and make the package warn of a clash.
if "$venv/bin/python" -m pip show synfire 2>/dev/null | grep '^Summary: Frequent serial episodes' >/dev/null; then
  "$venv/bin/python" -m pip uninstall --quiet --yes synfire >&2
fi
# The extension, built in release mode into the venv (cargo's target/ shared with the tests).
VIRTUAL_ENV="$venv" "$venv/bin/maturin" develop --release --quiet >&2
cargo build --release --quiet --bin synfire
# The types (issue 44): the package's inline annotations (`[tool.mypy]` in pyproject.toml), and
# the extension's stub (python/synfire/_synfire.pyi) against the module just built.
"$venv/bin/python" -m mypy
"$venv/bin/python" -m mypy.stubtest synfire._synfire
SYNFIRE_BIN="$target/release/synfire" SYNFIRE_REQUIRE_INTEROP=1 \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider python/tests
# The worked example of docs/ (a real recording), so it cannot rot.
"$venv/bin/python" docs/python_example.py
