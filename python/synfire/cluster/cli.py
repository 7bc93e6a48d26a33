"""``python -m synfire.cluster batch``: the entry ``synfire batch`` runs (``src/cli/batch.rs``)
after checking its arguments."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from ._common import session_names
from .sessions import mine_sessions

__all__ = ["main"]


def _episode_text(labels: Sequence[str], intervals: Sequence[str]) -> str:
    parts = [labels[0]]
    for iv, label in zip(intervals, labels[1:]):
        parts += [iv, label]
    return "-".join(parts)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """`frame` as CSV through a temporary file and a rename."""
    tmp = path.with_name(path.name + f".partial-{os.getpid()}")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m synfire.cluster batch``: what ``synfire batch`` runs after checking its
    arguments. Reads the sessions file (one path or URI per line; ``#`` lines and blank
    lines skipped; ``NAME<TAB>PATH`` names a session), mines every session on the cluster
    with the options (JSON, as ``synfire.mine`` passes them), writes each session's results
    and ``episodes.csv`` (every session's episodes, a ``session`` column first) and
    ``sessions.csv`` (one row per session, failures with their error) into the output
    folder, prints the sessions table, and returns 0 when every session finished, 1 when
    some failed (listed on standard error), 2 for bad arguments."""
    parser = argparse.ArgumentParser(prog="python -m synfire.cluster",
                                     description="synfire batch's cluster entry point")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("batch", help="mine every session of a sessions file on a Ray cluster")
    b.add_argument("sessions", help="file with one session path or URI per line")
    b.add_argument("--options-json", required=True,
                   help="the mining options as synfire.mine passes them (JSON)")
    b.add_argument("--reader-json", default="{}", help="the reader options (JSON)")
    b.add_argument("--cluster", default="auto",
                   help="auto (RAY_ADDRESS, else a cluster on this node, else a local one), "
                        "local, or a cluster address")
    b.add_argument("--workers", type=int, default=None)
    b.add_argument("--cpus-per-worker", type=float, default=None)
    b.add_argument("--retries", type=int, default=3)
    b.add_argument("--surrogate-batch", type=int, default=None)
    b.add_argument("--output-dir", required=True)
    b.add_argument("--outputs", default="nwb,json", help="nwb, json or nwb,json")
    b.add_argument("--no-combine", action="store_true",
                   help="no episodes.csv: each session's episodes stay in its own files")
    b.add_argument("--timeout-s", type=float, default=None)
    b.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        text = Path(args.sessions).read_text()
    except OSError as e:
        print(f"error: sessions file {args.sessions}: {e.strerror}", file=sys.stderr)
        return 2
    named: dict[str, str] = {}
    paths: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "\t" in line:
            name, path = (x.strip() for x in line.split("\t", 1))
            named[name] = path
        else:
            paths.append(line)
    try:
        if named and paths:
            raise ValueError("sessions file: name every session (NAME<TAB>PATH) or none")
        pairs = session_names(named or paths)
        options = json.loads(args.options_json)
        reader = json.loads(args.reader_json)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    intervals = options.pop("intervals_samples", None) or options.pop("intervals_s", [])
    options.pop("intervals_s", None)
    rate = options.pop("sample_rate_hz", None)
    reader.pop("sample_rate_hz", None)
    reader = {k: v for k, v in reader.items() if v is not None}
    out = Path(args.output_dir)
    try:
        r = mine_sessions(dict(pairs), intervals, output_dir=out,
                          outputs=[k.strip() for k in args.outputs.split(",") if k.strip()],
                          combine=not args.no_combine,
                          address=args.cluster,
                          workers=args.workers, cpus_per_worker=args.cpus_per_worker,
                          retries=args.retries, surrogate_batch=args.surrogate_batch,
                          progress=False if args.quiet else None, timeout_s=args.timeout_s,
                          sample_rate_hz=rate, **options, **reader)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.no_combine:
        frame = r.episodes.copy()
        if len(frame):
            frame.insert(1, "episode", [_episode_text(lab, ivs) for lab, ivs in
                                        zip(frame["labels"], frame["intervals"])])
            frame = frame.drop(columns=["labels", "intervals", "intervals_s"])
        _write_csv(frame, out / "episodes.csv")
    _write_csv(r.sessions, out / "sessions.csv")
    shown = r.sessions[["session", "ok", "episodes", "min_count", "seconds", "error"]]
    print(shown.to_string(index=False))
    print(f"{int(r.sessions['ok'].sum())} of {len(r.sessions)} sessions in {r.seconds:.1f} s; "
          f"results in {out}")
    if not r.ok:
        for f in r.failures.itertuples():
            print(f"error: session {f.session} ({f.path}): {f.error}: {f.message}",
                  file=sys.stderr)
        return 1
    return 0
