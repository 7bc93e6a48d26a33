#!/usr/bin/env python3
"""The cluster benchmark of issue 22 (docs/benchmarks.md, "Beyond one machine"): sessions per
minute for N dense-preset sessions mined by synfire.cluster on 1, 2, 4, ... workers, against
the same sessions mined one after another in one process (synfire.mine), with the per-session
overhead of the cluster path.

    target/py-venv/bin/python tools/bench-cluster.py --sessions 32 --workers 1,2,4
    # GPU host, one actor per GPU:
    python tools/bench-cluster.py --sessions 32 --workers 1,2,4,8 --device gpu

Sessions are written by `synfire generate neuropixels --seed K --format nwb` (the dense
preset: 300 units, 120 s, about 133,000 spikes) and mined with the dense settings of issue 17
(0-5, 5-10, 10-20 ms, 0.2 occurrences/s, 4 nodes). Each worker count gets fresh actors
(started before the clock runs); CPU workers share this machine's cores (`cores / workers`
Ray CPUs and counting threads each, at least 1 thread); GPU workers take one GPU each.
Configurations alternate over `--rounds` rounds; the table has medians. Wall time depends on
what else the machine runs; CPU seconds per session (every thread of the worker processes
during their sessions, plus the driver; Ray's own daemons not counted) much less, so the
per-session overhead of the cluster path is given in CPU seconds against the one process.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import synfire
from synfire import cluster

ROOT = Path(__file__).resolve().parents[1]
INTERVALS = [(0.0, 0.005), (0.005, 0.010), (0.010, 0.020)]


def generate(binary: str, folder: Path, n: int) -> list[Path]:
    paths = []
    for seed in range(1, n + 1):
        p = folder / f"dense-{seed:03d}.nwb"
        if not p.exists():
            subprocess.run([binary, "generate", "neuropixels", "--seed", str(seed), "--format",
                            "nwb", "-o", str(p)], check=True, capture_output=True)
        paths.append(p)
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--workers", default="1,2,4",
                    help="worker counts, comma-separated (GPU: at most the GPUs)")
    ap.add_argument("--max-level", type=int, default=4)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu", "auto"])
    ap.add_argument("--n-surrogates", type=int, default=0,
                    help="also test each session against this many dither surrogates (max-t)")
    ap.add_argument("--rounds", type=int, default=2,
                    help="rounds of every configuration, alternated (medians reported)")
    ap.add_argument("--write", action="store_true",
                    help="also a run that writes every session's NWB and JSON results")
    ap.add_argument("--address", default="local", help="the Ray cluster (default: a new local one)")
    ap.add_argument("--folder", default=None, help="where the sessions are generated (kept)")
    ap.add_argument("--synfire-bin", default=os.environ.get(
        "SYNFIRE_BIN", str(ROOT / "target/release/synfire")))
    args = ap.parse_args()

    folder = Path(args.folder or tempfile.mkdtemp(prefix="synfire-bench-cluster-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = generate(args.synfire_bin, folder, args.sessions)
    options = dict(support=0.2, support_per="seconds", max_level=args.max_level,
                   device=args.device)
    if args.n_surrogates:
        options["significance"] = {"surrogates": "dither:0.015",
                                   "n_surrogates": args.n_surrogates, "seed": 1}
    cores = os.cpu_count() or 1
    counts = [int(w) for w in args.workers.split(",")]
    # One process, one session after another (all cores to each session; one GPU).
    baseline = dict(options, gpus=[0]) if args.device == "gpu" else options
    synfire.mine(paths[0], INTERVALS, **baseline)  # warm-up: page cache, kernels
    resources = cluster.connect(args.address, num_cpus=cores if args.address == "local" else None)
    gpus = int(resources.get("GPU", 0))
    configs = [(0, False)] + [(w, False) for w in counts] + (
        [(counts[-1], True)] if args.write else [])
    walls: dict = {c: [] for c in configs}
    cpus: dict = {c: [] for c in configs}
    starts: dict = {c: [] for c in configs}
    threads: dict = {}
    single = None
    episodes = 0
    loads = []
    for _ in range(args.rounds):
        for w, write in configs:
            loads.append(os.getloadavg()[0])
            if w == 0:
                t, c = time.perf_counter(), time.process_time()
                results = [synfire.mine(p, INTERVALS, **baseline) for p in paths]
                walls[(w, write)].append(time.perf_counter() - t)
                cpus[(w, write)].append(time.process_time() - c)
                if single is None:
                    single = [list(r.episodes["count"]) for r in results]
                    episodes = sum(len(r.episodes) for r in results)
                del results
                continue
            per_cpu = None if gpus else cores / w
            started = time.perf_counter()
            with cluster.start_workers(w, cpus_per_worker=per_cpu) as workers:
                starts[(w, write)].append(time.perf_counter() - started)
                threads[(w, write)] = workers.threads
                out = tempfile.mkdtemp(prefix="synfire-bench-out-") if write else None
                t, c = time.perf_counter(), time.process_time()
                r = cluster.mine_sessions(paths, INTERVALS, workers=workers, output_dir=out,
                                          progress=False, **options)
                walls[(w, write)].append(time.perf_counter() - t)
                driver = time.process_time() - c
            if not r.ok:
                print(r.failures.to_string(), file=sys.stderr)
                return 1
            # Every session equals the one-process run (its counts here; the tests compare
            # whole frames).
            for p, want in zip(paths, single):
                assert list(r.results[p.stem].episodes["count"]) == want, p
            cpus[(w, write)].append(float(r.sessions["cpu_s"].sum()) + driver)
            del r
    n = args.sessions
    med = statistics.median
    one_wall, one_cpu = med(walls[(0, False)]), med(cpus[(0, False)])
    print(f"# {platform.node()}: {cores} cores, {gpus} GPUs; synfire {synfire.__version__}; "
          f"{datetime.date.today()}; {n} dense-preset sessions ({episodes} episodes in all); "
          f"max level {args.max_level}; device {args.device}"
          + (f"; {args.n_surrogates} surrogates (max-t)" if args.n_surrogates else "")
          + f"; medians of {args.rounds} rounds, configurations alternated; 1-minute load "
          f"average during the runs {min(loads):.1f}-{max(loads):.1f}")
    print("| run | threads each | start s | wall s | sessions/min | speedup vs 1 worker "
          "| efficiency vs one process | CPU s/session | overhead CPU s/session |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rate1 = None
    for w, write in configs:
        wall, cpu = med(walls[(w, write)]), med(cpus[(w, write)])
        rate = n / wall * 60
        if w == 0:
            print(f"| one process (synfire.mine, one session after another) | {cores} | — "
                  f"| {wall:.1f} | {rate:.1f} | — | 1.00 | {cpu / n:.3f} | — |")
            continue
        if rate1 is None:
            rate1 = rate
        # Efficiency: throughput per unit of hardware against the one process (which had
        # every core, or one GPU): CPU workers share the cores, GPU workers add GPUs.
        hardware = w if gpus else 1
        efficiency = rate / (n / one_wall * 60 * hardware)
        name = f"{w} worker{'s' if w > 1 else ''}" + (", writing NWB + JSON" if write else "")
        print(f"| {name} | {threads[(w, write)]} | {med(starts[(w, write)]):.1f} | {wall:.1f} "
              f"| {rate:.1f} | {rate / rate1:.2f} | {efficiency:.2f} | {cpu / n:.3f} "
              f"| {(cpu - one_cpu) / n:+.3f} |")
    print(f"# sessions kept in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
