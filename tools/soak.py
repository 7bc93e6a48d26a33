#!/usr/bin/env python3
"""Soak benchmark of a live pipeline (issue 46: a rig runs all day).

Replays a real recording in a loop through `synfire replay` (synfire wire format, over
loopback TCP, at `--speed` times real time) into one long `synfire run`, for the equivalent of
`--hours` hours of recording (default 24 h at 60x: 24 min of wall time), and reports:

- the resident set of the `synfire run` process over time (read from /proc every second; a
  CSV of it is written), and whether it stays flat (its growth after the first loop);
- the accounting: every spike the replays sent is in a result line or counted (`late`,
  `overflow`, `out_of_range`, `duplicate`, `dropped`, from the run's `Source totals` and
  `Window totals` log lines); the difference (unaccounted spikes) must be 0;
- the result latency of the windows (window close to line written, p50, p99, max), from the
  run's `Result latency` log line.

Each replay is a new publisher session: the run sees a restart, emits the open windows
(incomplete) and starts a new epoch, as it would when a rig's publisher restarts.

Usage (from the repository root, after `cargo build --release`):

    python3 tools/soak.py                       # 24 h of recording at 60x: 24 min
    python3 tools/soak.py --hours 1             # the short version: 1 min
    python3 tools/soak.py --recording fixtures/spikes/A2929-200711/A2929-200711.nwb \
        --speed 60 --hours 24 --out target/soak

Standard library only. Exit status 1 when a spike is unaccounted for or a process fails.
"""

import argparse
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RECORDING = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
# fixtures/spikes/A2929-200711/PROVENANCE.txt: 1,200 s (600 s sleep + 600 s wake), 98,794 spikes.
DEFAULT_DURATION_S = 1200.0

PIPELINE = """\
# Written by tools/soak.py: the recording replayed in a loop, mined in 60 s tumbling windows.
[sources.live]
kind = "zmq"
endpoint = "{endpoint}"
format = "synfire"
stop_on_end = false
{ring}
[windows.w60]
source = "live"
length_s = 60.0
hop_s = 60.0

{stage}

[sinks.file]
kind = "jsonl"
path = "{lines}"
"""


STAGES = {
    "episodes": """[stages.episodes]
kind = "episodes"
window = "w60"
intervals_s = [[0.0, 0.005], [0.005, 0.010], [0.010, 0.020]]
support = 0.2
support_per = "seconds"
max_level = 4
device = "{device}"
""",
    "rate": """[stages.rates]
kind = "rate"
window = "w60"
""",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def logged(text, message, key, label=None):
    """The integer or float value of `key=` in the first log line with `message` (and `label`)."""
    for line in text.splitlines():
        if message in line and (label is None or f"{label} " in line):
            m = re.search(rf" {re.escape(key)}=([0-9.eE+-]+)", line)
            if m:
                v = m.group(1)
                return float(v) if any(c in v for c in ".eE") else int(v)
    raise SystemExit(f"soak: no `{key}=` in a log line `{message}` ({label}):\n{text[-4000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recording", type=Path, default=DEFAULT_RECORDING)
    ap.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="the recording's length in seconds (default: 1,200 for the bundled A2929-200711)",
    )
    ap.add_argument("--speed", type=float, default=60.0, help="replay speed, x real time")
    ap.add_argument("--hours", type=float, default=24.0, help="hours of recording to replay")
    ap.add_argument("--device", default="cpu", help="the episodes stage's device (cpu|gpu|auto)")
    ap.add_argument(
        "--ring-capacity",
        type=int,
        default=None,
        help="the source's ring_capacity (default the source's, 1,048,576 records: its pages "
        "are touched, and counted in RSS, during the first million spikes)",
    )
    ap.add_argument(
        "--stage",
        choices=sorted(STAGES),
        default="episodes",
        help="the stage on the windows (default episodes; rate: a cheap one, to tell a stage's memory from the pipeline's)",
    )
    ap.add_argument("--synfire", type=Path, default=ROOT / "target/release/synfire")
    ap.add_argument("--out", type=Path, default=ROOT / "target/soak")
    args = ap.parse_args()

    duration = args.duration_s or (
        DEFAULT_DURATION_S if args.recording.resolve() == DEFAULT_RECORDING else None
    )
    if duration is None:
        raise SystemExit("soak: give --duration-s for a recording other than the bundled one")
    loops = max(1, math.ceil(args.hours * 3600.0 / duration))
    # A pipeline's relative paths are resolved against its own folder: write absolute ones.
    args.out = args.out.resolve()
    args.recording = args.recording.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    lines_path = args.out / "lines.jsonl"
    if lines_path.exists():
        lines_path.unlink()
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    pipeline = args.out / "soak.toml"
    pipeline.write_text(
        PIPELINE.format(
            endpoint=endpoint,
            stage=STAGES[args.stage].format(device=args.device),
            ring=(
                f"ring_capacity = {args.ring_capacity}\n" if args.ring_capacity else ""
            ),
            lines=lines_path,
        )
    )
    env = dict(os.environ, NO_COLOR="1")
    env.pop("SYNFIRE_LOG", None)
    run_log = open(args.out / "run.log", "w")
    run = subprocess.Popen(
        [str(args.synfire), "run", str(pipeline)],
        stdout=subprocess.DEVNULL,
        stderr=run_log,
        env=env,
    )
    started = time.monotonic()
    samples = []  # (wall_s, loop, rss_mib)
    state = {"loop": 0, "watch": True}

    def watch():
        while state["watch"]:
            r = rss_mib(run.pid)
            if r is not None:
                samples.append((time.monotonic() - started, state["loop"], r))
            time.sleep(1.0)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    print(
        f"soak: {args.recording.name} ({duration:.0f} s) x {loops} loops at {args.speed:g}x "
        f"= {loops * duration / 3600:.2f} h of recording, about "
        f"{loops * duration / args.speed / 60:.1f} min",
        flush=True,
    )
    sent = 0
    for k in range(loops):
        state["loop"] = k
        rep = subprocess.Popen(
            [
                str(args.synfire),
                "replay",
                str(args.recording),
                "--to",
                endpoint,
                "--speed",
                str(args.speed),
                "--subscribers",
                "1",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        # The replay waits for the run to subscribe: if the run ends (fails), stop waiting.
        while True:
            try:
                _, rep_err = rep.communicate(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if run.poll() is not None:
                    rep.kill()
                    rep.communicate()
                    raise SystemExit(
                        f"soak: synfire run ended early ({run.returncode}):\n"
                        + (args.out / "run.log").read_text()[-4000:]
                    )
        if rep.returncode != 0:
            raise SystemExit(f"soak: replay {k} failed:\n{rep_err}")
        sent += logged(rep_err, "Replay finished.", "events")
        last = samples[-1][2] if samples else float("nan")
        print(
            f"  loop {k + 1}/{loops}: {sent} spikes sent, RSS {last:.1f} MiB, "
            f"{time.monotonic() - started:.0f} s",
            flush=True,
        )
    # The run takes what is still queued, then stops.
    time.sleep(2.0)
    run.send_signal(signal.SIGINT)
    try:
        run.wait(timeout=10)
    except subprocess.TimeoutExpired:
        run.kill()
        raise SystemExit("soak: synfire run did not exit within 10 s of SIGINT")
    state["watch"] = False
    watcher.join()
    run_log.close()
    text = (args.out / "run.log").read_text()
    if run.returncode != 0:
        raise SystemExit(f"soak: synfire run failed ({run.returncode}):\n{text[-4000:]}")

    windowed = 0
    windows = 0
    with open(lines_path) as f:
        for line in f:
            windowed += json.loads(line)["events"]
            windows += 1
    src = "source=live"
    counts = {
        "late": logged(text, "Window totals.", "late", "window=w60"),
        "overflow": logged(text, "Window totals.", "overflow", "window=w60"),
        "out_of_range": logged(text, "Source totals.", "out_of_range", src),
        "duplicate": logged(text, "Source totals.", "duplicate", src),
        "dropped": logged(text, "Source totals.", "dropped", src),
    }
    unaccounted = sent - windowed - sum(counts.values())
    latency = {
        k: logged(text, "Result latency", k, "sink=file")
        for k in ("windows", "p50_s", "p99_s", "max_s", "incomplete_windows")
    }
    with open(args.out / "rss.csv", "w") as f:
        f.write("wall_s,loop,rss_mib\n")
        for t, k, r in samples:
            f.write(f"{t:.1f},{k},{r:.2f}\n")
    first_loop_end = [r for t, k, r in samples if k == 0]
    warm = first_loop_end[-1] if first_loop_end else float("nan")
    peak = max(r for _, _, r in samples)
    final = samples[-1][2]
    summary = {
        "recording": str(args.recording),
        "loops": loops,
        "speed": args.speed,
        "recording_hours": loops * duration / 3600,
        "stage": args.stage,
        "ring_capacity": args.ring_capacity or 1048576,
        "wall_s": round(time.monotonic() - started, 1),
        "sent": sent,
        "windowed": windowed,
        "lines": windows,
        **counts,
        "unaccounted": unaccounted,
        "rss_mib_after_first_loop": round(warm, 1),
        "rss_mib_peak": round(peak, 1),
        "rss_mib_final": round(final, 1),
        "rss_growth_mib_after_first_loop": round(peak - warm, 1),
        "result_latency": latency,
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    if unaccounted != 0:
        print(f"soak: {unaccounted} spikes unaccounted for", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
