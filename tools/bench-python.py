#!/usr/bin/env python3
"""The Python call overhead (issue 19's benchmark): wall time of `synfire.mine` against the
command line `synfire mine` on the same input and options, medians of R runs side by side,
and the peak memory of the Python process.

Inputs: the bundled A2929 session (NWB, by path and as numpy arrays) and the dense preset
(`synfire generate neuropixels`, as a CSV path and as arrays). Run after
`bash tools/test-python.sh` (which installs the package into target/py-venv):

    target/py-venv/bin/python tools/bench-python.py [--repeat 5]

Prints a Markdown table: input, CLI s, Python s, ratio.
"""
import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import synfire

ROOT = Path(__file__).resolve().parents[1]
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
IVS = ["(0,0.005]", "(0.005,0.010]", "(0.010,0.020]"]


def timed(f, repeat):
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def read_csv(path):
    data = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    return data[data.dtype.names[1]].astype(np.float64), data[data.dtype.names[0]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    dense = tmp / "dense.csv"
    subprocess.run([BIN, "generate", "neuropixels", "--seed", "1", "--format", "csv",
                    "--output", str(dense)], check=True, capture_output=True)
    a2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
    cases = [("A2929 (NWB path)", a2929, None, 4), ("dense preset (CSV path)", dense, None, 3),
             ("dense preset (numpy arrays)", dense, read_csv(dense), 3)]
    print(f"synfire.mine against `synfire mine`, medians of {args.repeat}, "
          f"intervals {','.join(IVS)}, support 0.2/s, {os.cpu_count()} cores")
    print()
    print("| input | max level | CLI s | Python s | Python / CLI |")
    print("|---|---:|---:|---:|---:|")
    for name, path, arrays, level in cases:
        cli = [BIN, "mine", str(path), "--intervals", ",".join(IVS), "--support", "0.2",
               "--support-per", "seconds", "--max-level", str(level), "--format", "json",
               "-q", "--device", "cpu", "-o", os.devnull]
        t_cli = timed(lambda: subprocess.run(cli, check=True), args.repeat)
        spikes = arrays if arrays is not None else path
        t_py = timed(lambda: synfire.mine(spikes, IVS, support=0.2, support_per="seconds",
                                          max_level=level, device="cpu"), args.repeat)
        print(f"| {name} | {level} | {t_cli:.3f} | {t_py:.3f} | {t_py / t_cli:.3f} |",
              flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of the Python process: {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
