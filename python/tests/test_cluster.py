"""synfire.cluster on a local Ray cluster (issue 22): sessions mined on actors equal
synfire.mine in one process, exactly; a worker killed in the middle of a session is restarted
and the session retried, its outputs written once; surrogate batches split across actors give
the unsplit p-values bit for bit; a missing or corrupt session fails alone, named; and
`synfire batch` runs the same through the command line."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import ray

import synfire
from synfire import cluster

pynwb = pytest.importorskip("pynwb")

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
IBL = ROOT / "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"
INTERVALS = [(0, 0.005), (0.005, 0.010)]
SIG = {"surrogates": "dither:0.015", "n_surrogates": 9, "seed": 3, "correction": "max-t"}
OPTIONS = dict(min_count=200, max_level=3, device="cpu", significance=SIG)
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def workers():
    """A local cluster of 4 logical CPUs (no GPU: these tests count on the CPU; the GPU's are
    test_cluster_gpu.py) and two single-threaded actors."""
    cluster.connect("local", num_cpus=4, num_gpus=0)
    w = cluster.start_workers(2, cpus_per_worker=1, retries=2)
    yield w
    w.shutdown()
    ray.shutdown()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Two dense-preset sessions written by `synfire generate` (NWB and CSV)."""
    d = tmp_path_factory.mktemp("synthetic")
    paths = []
    for seed, fmt in [(1, "nwb"), (2, "csv")]:
        p = d / f"dense-{seed}.{fmt}"
        subprocess.run([BIN, "generate", "neuropixels", "--seed", str(seed), "--format", fmt,
                        "-o", str(p)], check=True, capture_output=True)
        paths.append(p)
    return paths


def timeless(doc):
    """A `synfire mine` document without its timings (`seconds` of each level)."""
    if isinstance(doc, dict):
        return {k: timeless(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [timeless(v) for v in doc]
    return doc


def reference(path, **extra):
    return synfire.mine(path, INTERVALS, **{**OPTIONS, **extra})


def test_sessions_on_actors_equal_single_process_results(workers, synthetic, tmp_path):
    sessions = [A2929, IBL, *synthetic]
    seen = []
    r = cluster.mine_sessions(sessions, INTERVALS, workers=workers, output_dir=tmp_path,
                              timeout_s=TIMEOUT_S, progress=lambda *a: seen.append(a),
                              **OPTIONS)
    names = ["A2929-200711", "ibl-ephys_test", "dense-1", "dense-2"]
    assert r.ok, r.failures
    assert list(r.sessions["session"]) == names and seen[-1] == (4, 4, 0)
    # Both actors worked.
    assert r.sessions["pid"].nunique() == 2
    total = 0
    for name, path in zip(names, sessions):
        want = reference(path)
        got = r.results[name]
        assert len(want.episodes) > 50
        # Same episodes, counts, order and p-values: the frames are equal value for value.
        pd.testing.assert_frame_equal(got.episodes, want.episodes, check_exact=True)
        assert timeless(got.document) == timeless(want.document)
        part = r.episodes[r.episodes["session"] == name].drop(columns="session")
        pd.testing.assert_frame_equal(part.reset_index(drop=True), want.episodes,
                                      check_exact=True)
        total += len(want.episodes)
        # Written per session: the JSON document with the episodes, and NWB results.
        row = r.sessions.set_index("session").loc[name]
        doc = json.loads(Path(row["json_output"]).read_text())
        assert [e["count"] for e in doc["episodes"]] == list(want.episodes["count"])
        assert [tuple(e["labels"]) for e in doc["episodes"]] == list(want.episodes["labels"])
        with pynwb.NWBHDF5IO(row["nwb_output"], "r") as io:
            table = io.read().processing["synfire"]["episodes"].to_dataframe()
        multi = want.episodes[want.episodes["labels"].map(len) >= 2]
        assert list(table["count"]) == list(multi["count"])
        np.testing.assert_array_equal(table["p_value"].to_numpy(), multi["p_value"].to_numpy())
    assert len(r.episodes) == total
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{n}.synfire.{ext}" for n in names for ext in ("json", "nwb"))
    # Without combining, only each session's row comes back.
    summary = cluster.mine_sessions([A2929], INTERVALS, workers=workers, combine=False,
                                    timeout_s=TIMEOUT_S, progress=False, **OPTIONS)
    assert summary.ok and summary.results == {} and len(summary.episodes) == 0
    row = summary.sessions.iloc[0]
    assert row["episodes"] == len(r.results["A2929-200711"].episodes)
    assert row["min_count"] == r.results["A2929-200711"].min_count


def test_a_killed_worker_is_restarted_and_its_session_retried_written_once(synthetic,
                                                                           tmp_path, workers):
    sessions = {"first": A2929, "killed": synthetic[0], "last": IBL}
    extra = dict(significance={**SIG, "n_surrogates": 29})
    want = {n: reference(p, **extra) for n, p in sessions.items()}
    # A partial file an earlier killed run left behind is cleaned up, not kept beside.
    (tmp_path / "killed.synfire.nwb.partial-99999").write_bytes(b"half a file")
    with cluster.start_workers(1, cpus_per_worker=1, retries=2) as one:
        box = {}
        run = threading.Thread(target=lambda: box.update(r=cluster.mine_sessions(
            sessions, INTERVALS, workers=one, output_dir=tmp_path, timeout_s=TIMEOUT_S,
            progress=False, **{**OPTIONS, **extra})))
        run.start()
        deadline = time.time() + 120
        while True:
            (st,) = one.status()
            if st["session"] == "killed":
                break
            assert time.time() < deadline and run.is_alive(), "the session never started"
            time.sleep(0.02)
        killed = st["pid"]
        os.kill(killed, signal.SIGKILL)
        run.join(TIMEOUT_S)
        assert not run.is_alive()
        (after,) = one.status()
    r = box["r"]
    assert r.ok, r.failures
    assert after["pid"] != killed
    # The retried session ran in the restarted process; the combined result is complete.
    rows = r.sessions.set_index("session")
    assert rows.loc["killed", "pid"] == after["pid"] and rows.loc["first", "pid"] == killed
    assert list(r.sessions["session"]) == list(sessions)
    for name in sessions:
        pd.testing.assert_frame_equal(r.results[name].episodes, want[name].episodes,
                                      check_exact=True)
        assert (r.episodes["session"] == name).sum() == len(want[name].episodes)
    # Each output exists once, whole, with the single-process content; no partial files.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{n}.synfire.{ext}" for n in sessions for ext in ("json", "nwb"))
    cli = subprocess.run([BIN, "mine", str(synthetic[0]), "--format", "json", "-q",
                          "--intervals", "(0,0.005],(0.005,0.010]", "--min-count", "200",
                          "--max-level", "3", "--device", "cpu", "--surrogates",
                          "dither:0.015", "--n-surrogates", "29", "--seed", "3",
                          "--correction", "max-t"],
                         check=True, capture_output=True, text=True)
    written = json.loads((tmp_path / "killed.synfire.json").read_text())
    assert timeless(written) == timeless(json.loads(cli.stdout))
    with pynwb.NWBHDF5IO(str(tmp_path / "killed.synfire.nwb"), "r") as io:
        table = io.read().processing["synfire"]["episodes"].to_dataframe()
    multi = want["killed"].episodes[want["killed"].episodes["labels"].map(len) >= 2]
    assert list(table["count"]) == list(multi["count"])


@pytest.mark.parametrize("correction", ["max-t", "spectrum", "fdr-bh"])
def test_surrogate_batches_across_actors_give_the_unsplit_p_values(workers, correction):
    sig = {**SIG, "n_surrogates": 10, "correction": correction, "seed": 11}
    want = synfire.mine(A2929, INTERVALS, **{**OPTIONS, "significance": sig})
    got = cluster.test_session(A2929, INTERVALS, surrogate_batch=3, workers=workers,
                               timeout_s=TIMEOUT_S, progress=False,
                               **{**OPTIONS, "significance": sig})
    tested = want.episodes["p_value"].notna()
    assert tested.sum() > 50
    pd.testing.assert_frame_equal(got.episodes, want.episodes, check_exact=True)
    assert got.significance == want.significance
    for col in ("p_value", "p_adjusted", "surrogate_mean", "surrogate_std", "statistic"):
        a = got.episodes[col].to_numpy()
        b = want.episodes[col].to_numpy()
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64)), col
    # Another seed gives other p-values, so the equality above can fail.
    other = synfire.mine(A2929, INTERVALS, **{**OPTIONS, "significance": {**sig, "seed": 12}})
    assert not np.array_equal(other.episodes["surrogate_mean"].to_numpy()[tested],
                              want.episodes["surrogate_mean"].to_numpy()[tested])


def test_missing_and_corrupt_sessions_fail_alone_with_named_errors(workers, tmp_path):
    corrupt_nwb = tmp_path / "corrupt-nwb.nwb"
    corrupt_nwb.write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(2048))
    corrupt_csv = tmp_path / "corrupt-csv.csv"
    corrupt_csv.write_text("unit,time\na,0.5\nb,not-a-time\n")
    missing = tmp_path / "missing.nwb"
    out = tmp_path / "out"
    seen = []
    r = cluster.mine_sessions([A2929, missing, corrupt_nwb, corrupt_csv], INTERVALS,
                              workers=workers, output_dir=out, outputs=["json"],
                              timeout_s=TIMEOUT_S,
                              progress=lambda *a: seen.append(a), **OPTIONS)
    assert not r.ok and seen[-1] == (4, 4, 3)
    failed = r.failures.set_index("session")
    assert list(failed.index) == ["missing", "corrupt-nwb", "corrupt-csv"]
    assert list(failed["error"]) == ["FileNotFoundError", "SynfireError", "SynfireError"]
    for row in r.failures.itertuples():
        assert row.path in row.message, row.message
    assert "HDF5" in failed.loc["corrupt-nwb", "message"]
    assert "line 3" in failed.loc["corrupt-csv", "message"]
    # The good session completed, equal to one process; only its outputs were written.
    pd.testing.assert_frame_equal(r.results["A2929-200711"].episodes,
                                  reference(A2929).episodes, check_exact=True)
    assert set(r.episodes["session"]) == {"A2929-200711"}
    assert sorted(p.name for p in out.iterdir()) == ["A2929-200711.synfire.json"]


def test_bad_options_and_session_names_fail_before_any_work(workers):
    with pytest.raises(ValueError, match="max_level"):
        cluster.mine_sessions([A2929], INTERVALS, workers=workers, max_level=0)
    with pytest.raises(ValueError, match="both named"):
        cluster.mine_sessions([A2929, Path("elsewhere") / A2929.name], INTERVALS,
                              workers=workers)
    with pytest.raises(TypeError, match="no_such_option"):
        cluster.mine_sessions([A2929], INTERVALS, workers=workers, no_such_option=1)
    with pytest.raises(cluster.SessionFailed, match="FileNotFoundError"):
        cluster.test_session("no/such.nwb", INTERVALS, significance=SIG, surrogate_batch=2,
                             workers=workers, timeout_s=TIMEOUT_S)


def test_synfire_batch_runs_the_sessions_file_on_an_existing_cluster(workers, tmp_path):
    listing = tmp_path / "sessions.txt"
    listing.write_text(f"# two sessions\n{A2929}\n\n{tmp_path / 'gone.nwb'}\n")
    out = tmp_path / "results"
    address = ray.get_runtime_context().gcs_address
    run = subprocess.run(
        [BIN, "batch", str(listing), "--intervals", "(0,0.005],(0.005,0.010]", "--min-count",
         "200", "--max-level", "3", "--device", "cpu", "--surrogates", "dither:0.015",
         "--n-surrogates", "9", "--seed", "3", "--correction", "max-t", "--cluster", address, "--workers", "1", "--cpus-per-worker", "1",
         "--output-dir", str(out), "--python", sys.executable, "--quiet"],
        capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 1, run.stderr
    assert f"session gone ({tmp_path / 'gone.nwb'}): FileNotFoundError" in run.stderr
    table = pd.read_csv(out / "sessions.csv")
    assert list(table["session"]) == ["A2929-200711", "gone"]
    assert list(table["ok"]) == [True, False]
    episodes = pd.read_csv(out / "episodes.csv")
    want = reference(A2929)
    assert list(episodes["session"].unique()) == ["A2929-200711"]
    assert list(episodes["count"]) == list(want.episodes["count"])
    np.testing.assert_array_equal(episodes["p_value"].to_numpy(),
                                  want.episodes["p_value"].to_numpy())
    assert (out / "A2929-200711.synfire.nwb").exists()


def test_a_session_whose_worker_dies_beyond_the_retries_fails_named_and_others_go_on(
        synthetic, workers):
    sessions = {"doomed": synthetic[0], "after": A2929}
    extra = dict(significance={**SIG, "n_surrogates": 29})
    with cluster.start_workers(1, cpus_per_worker=1, retries=0) as one:
        box = {}
        run = threading.Thread(target=lambda: box.update(r=cluster.mine_sessions(
            sessions, INTERVALS, workers=one, timeout_s=TIMEOUT_S, progress=False,
            **{**OPTIONS, **extra})))
        run.start()
        deadline = time.time() + 120
        while True:
            (st,) = one.status()
            if st["session"] == "doomed":
                break
            assert time.time() < deadline and run.is_alive(), "the session never started"
            time.sleep(0.02)
        os.kill(st["pid"], signal.SIGKILL)
        run.join(TIMEOUT_S)
        assert not run.is_alive()
    r = box["r"]
    rows = r.sessions.set_index("session")
    assert not rows.loc["doomed", "ok"] and rows.loc["doomed", "error"] == "WorkerDied"
    assert rows.loc["doomed", "message"].startswith("its worker process died once")
    # The restarted worker mined the next session, equal to one process.
    assert rows.loc["after", "ok"]
    pd.testing.assert_frame_equal(r.results["after"].episodes,
                                  reference(A2929, **extra).episodes, check_exact=True)
