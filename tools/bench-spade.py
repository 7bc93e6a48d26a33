#!/usr/bin/env python3
"""Elephant's SPADE on a synfire spike file (tdminer CSV `label,time`), for the side-by-side
table of `synfire bench significance` (docs/benchmarks.md). Never a test dependency.

SPADE (Torre et al. 2013; Quaglio et al. 2017; Stella et al. 2019) bins the trains, mines
frequent patterns with FP-growth within `winlen` bins, and filters them by the pattern
spectrum of dithered surrogates (signature = (size, count)); `stat_corr` controls the tests
over signatures. Settings mirror synfire's workload: 5 ms bins, a 20 ms window (winlen 4),
patterns of 2-4 spikes, the same minimum count.

Setup (a venv outside the repository):
    python3 -m venv /tmp/venv && /tmp/venv/bin/pip install elephant==1.1.1 statsmodels
Usage:
    /tmp/venv/bin/python tools/bench-spade.py fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv \\
        --min-occ 24 --n-surr 20,100

Prints one Markdown row per surrogate count: seconds, significant patterns, their sizes and
how many are synchronous (every spike in one bin: lag 0).
"""
import argparse
import csv
import math
import time
from collections import defaultdict

import neo
import numpy as np
import quantities as pq
from elephant.spade import spade


def read_trains(path):
    """Spike trains per label from a `label,time` CSV (`#` lines skipped), with the span."""
    by = defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row or row[0].startswith("#"):
                continue
            try:
                t = float(row[1])
            except (IndexError, ValueError):
                continue  # a header
            by[row[0]].append(t)
    t0 = min(min(v) for v in by.values())
    t1 = max(max(v) for v in by.values())
    trains = [
        neo.SpikeTrain(np.sort(v) * pq.s, t_start=t0 * pq.s, t_stop=(t1 + 1e-3) * pq.s)
        for _, v in sorted(by.items())
    ]
    return trains, t1 - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("input")
    ap.add_argument("--bin-size-ms", type=float, default=5.0)
    ap.add_argument("--winlen", type=int, default=4)
    ap.add_argument("--max-spikes", type=int, default=4)
    ap.add_argument("--min-occ", type=int, default=None,
                    help="minimum count (default: 0.2 per second of the span)")
    ap.add_argument("--n-surr", default="20,100")
    ap.add_argument("--dither-ms", type=float, default=15.0)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    trains, span = read_trains(args.input)
    min_occ = args.min_occ or math.ceil(0.2 * span)
    print(f"SPADE (elephant) on {args.input}: {len(trains)} units, {span:.1f} s, "
          f"bin {args.bin_size_ms} ms, winlen {args.winlen}, 2-{args.max_spikes} spikes, "
          f"min_occ {min_occ}, dither {args.dither_ms} ms, alpha {args.alpha} (fdr_bh over "
          f"signatures)")
    print()
    print("| surrogates | seconds | significant patterns | sizes | synchronous (one bin) |")
    print("|---:|---:|---:|---|---:|")
    for n in [int(x) for x in args.n_surr.split(",")]:
        started = time.perf_counter()
        out = spade(trains, bin_size=args.bin_size_ms * pq.ms, winlen=args.winlen,
                    min_spikes=2, max_spikes=args.max_spikes, min_occ=min_occ, n_surr=n,
                    dither=args.dither_ms * pq.ms, spectrum="#", alpha=args.alpha,
                    stat_corr="fdr_bh", surr_method="dither_spikes", psr_param=None)
        seconds = time.perf_counter() - started
        patterns = out["patterns"]
        sizes = defaultdict(int)
        sync = 0
        for p in patterns:
            sizes[len(p["neurons"])] += 1
            sync += all(lag == 0 for lag in np.asarray(p["lags"]).ravel())
        shown = ", ".join(f"{k}: {v}" for k, v in sorted(sizes.items())) or "-"
        print(f"| {n} | {seconds:.1f} | {len(patterns)} | {shown} | {sync} |", flush=True)


if __name__ == "__main__":
    main()
