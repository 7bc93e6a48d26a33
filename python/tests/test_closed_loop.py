"""The closed loop against an independent mock of the Open Ephys Network Events plugin
(tools/mock_network_events.py, Python + pyzmq): `synfire run` replays the bundled real
recording with a detect stage and an `openephys_ttl` sink; the mock receives exactly one
`TTL Line=<n> State=1` request per occurrence, their number equals `synfire count` on the same
file, and every pulse is ended by a `State=0`. A plugin that hangs is survived: timeouts are
counted and the sink reconnects."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
MOCK = ROOT / "tools/mock_network_events.py"
EPISODES = ["6-(10,20]ms-6", "5-(0,5]ms-6"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mock(port, log, *extra):
    p = subprocess.Popen([sys.executable, str(MOCK), "--port", str(port), "--log", str(log),
                          *extra], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def pipeline(tmp_path, port, **ttl):
    out = tmp_path / "occurrences.jsonl"
    options = "\n".join(f"{k} = {v}" for k, v in ttl.items())
    text = f"""
[sources.a2929]
kind = "hdf5"
path = "{A2929}"
overflow = "block"

[stages.detect]
kind = "detect"
source = "a2929"
episodes = {json.dumps(EPISODES)}

[sinks.lines]
kind = "jsonl"
path = "{out}"
stages = ["detect"]

[sinks.stim]
kind = "openephys_ttl"
endpoint = "tcp://127.0.0.1:{port}"
stages = ["detect"]
{options}
"""
    path = tmp_path / "closed-loop.toml"
    path.write_text(text)
    return path, out


def offline_counts(tmp_path):
    episodes = tmp_path / "episodes.txt"
    episodes.write_text("\n".join(EPISODES) + "\n")
    out = subprocess.run([BIN, "count", str(episodes), str(A2929), "--format", "json"],
                         check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    rows = doc["episodes"] if isinstance(doc, dict) else doc
    return {r["episode"]: r["count"] for r in rows}


def requests(log):
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_one_ttl_request_per_occurrence_equal_to_the_offline_count(tmp_path):
    port = free_port()
    log = tmp_path / "requests.jsonl"
    mock = start_mock(port, log)
    try:
        # An archive replayed as fast as it reads detects in bursts: the requests may wait
        # (a rig keeps the default max_age_ms of a few ms).
        toml, out = pipeline(tmp_path, port, line=2, pulse_ms=1, queue=1000000,
                             max_age_ms=3600000)
        run = subprocess.run([BIN, "run", str(toml)], capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    lines = [json.loads(l) for l in out.read_text().splitlines()]
    counts = offline_counts(tmp_path)
    per_episode = {}
    for l in lines:
        per_episode[l["episode"]] = per_episode.get(l["episode"], 0) + 1
    assert per_episode == counts, (per_episode, counts)
    got = requests(log)
    on = [r for r in got if r["request"] == "TTL Line=2 State=1"]
    off = [r for r in got if r["request"] == "TTL Line=2 State=0"]
    assert len(on) == len(lines) == sum(counts.values())
    assert all(r["reply"] == "TTLHandled: Line=2 State=1" for r in on)
    assert len(on) + len(off) == len(got), "nothing but TTL requests on line 2"
    # Every pulse ends: the last request is an off, and offs never outnumber ons.
    assert got[-1]["request"].endswith("State=0")
    assert 1 <= len(off) <= len(on)


def test_a_hanging_plugin_is_timed_out_and_reconnected(tmp_path):
    port = free_port()
    log = tmp_path / "requests.jsonl"
    mock = start_mock(port, log, "--hang", "3")
    try:
        toml, out = pipeline(tmp_path, port, pulse_ms=0, timeout_ms=20, queue=1000000,
                             max_age_ms=3600000)
        run = subprocess.run([BIN, "run", str(toml)], capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 0, run.stderr
    finally:
        mock.terminate()
        mock.wait(timeout=10)
    lines = out.read_text().splitlines()
    got = requests(log)
    hung = [r for r in got if r["reply"] is None]
    answered = [r for r in got if r["reply"] is not None]
    assert len(hung) == 3
    totals = next(l for l in run.stderr.splitlines() if "TTL sink totals." in l)
    fields = dict(kv.split("=") for kv in totals.split() if "=" in kv)
    # Each hung request is a timeout; every occurrence is answered or counted as lost.
    assert int(fields["timeouts"]) == 3, totals
    assert int(fields["ok"]) == len(answered), totals
    lost = sum(int(fields[k]) for k in ("timeouts", "send_errors", "dropped", "rejected", "stale"))
    assert int(fields["ok"]) + lost == len(lines), totals
    assert int(fields["ok"]) > len(lines) - 10, totals
