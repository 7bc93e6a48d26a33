"""synfire.cluster with one actor per GPU (issue 22): sessions mined and tested on the actors'
warm GPU counters equal the CPU's single-process results exactly, the counters are kept from
one session to the next, and surrogate batches on the GPUs give the CPU's p-values bit for
bit. Skipped without a usable GPU (a failure with SYNFIRE_REQUIRE_GPU=1, the GPU host's
runs)."""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import ray

import synfire
from synfire import cluster

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
IBL = ROOT / "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"
INTERVALS = [(0, 0.005), (0.005, 0.010)]
SIG = {"surrogates": "dither:0.015", "n_surrogates": 9, "seed": 3, "correction": "max-t"}
OPTIONS = dict(min_count=200, max_level=3, significance=SIG)


@pytest.fixture(scope="module")
def gpu_workers():
    """One actor per GPU of a local cluster, or a skip without a GPU."""
    try:
        found = synfire.gpus()
    except synfire.SynfireError as e:
        if os.environ.get("SYNFIRE_REQUIRE_GPU") == "1":
            pytest.fail(f"SYNFIRE_REQUIRE_GPU=1 but no GPU is usable: {e}")
        pytest.skip(f"needs a GPU: {e}")
    resources = cluster.connect("local")
    assert int(resources.get("GPU", 0)) == len(found)
    w = cluster.start_workers()
    assert len(w) == len(found) and w.resources["num_gpus"] == 1
    yield w
    w.shutdown()
    ray.shutdown()


def test_sessions_on_gpu_actors_equal_the_cpu_and_keep_their_counters(gpu_workers):
    for _ in range(2):
        r = cluster.mine_sessions([A2929, IBL], INTERVALS, workers=gpu_workers, device="gpu",
                                  progress=False, timeout_s=600, **OPTIONS)
        assert r.ok, r.failures
        for name, path in [("A2929-200711", A2929), ("ibl-ephys_test", IBL)]:
            want = synfire.mine(path, INTERVALS, device="cpu", **OPTIONS)
            pd.testing.assert_frame_equal(r.results[name].episodes, want.episodes,
                                          check_exact=True)
    status = gpu_workers.status()
    # Each actor sees its own GPU and kept its counters across the sessions it mined.
    assert all(len(s["gpu_ids"]) == 1 for s in status)
    assert sum(s["sessions"] for s in status) == 4
    assert all(s["gpu_counters"] >= 1 for s in status if s["sessions"])


def test_surrogate_batches_on_gpus_give_the_cpu_p_values(gpu_workers):
    sig = {**SIG, "n_surrogates": 12, "seed": 5}
    want = synfire.mine(A2929, INTERVALS, device="cpu", **{**OPTIONS, "significance": sig})
    got = cluster.test_session(A2929, INTERVALS, surrogate_batch=4, workers=gpu_workers,
                               device="gpu", progress=False, timeout_s=600,
                               **{**OPTIONS, "significance": sig})
    pd.testing.assert_frame_equal(got.episodes, want.episodes, check_exact=True)
    a = got.episodes["p_adjusted"].to_numpy()
    b = want.episodes["p_adjusted"].to_numpy()
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
