"""The GPU paths from Python equal the CPU's: mining (and its significance test) exactly, the
motif search and the SING index exactly, soft-DTW within the float32 kernels' 1e-4. Without a
usable GPU every test here is skipped (shown as skipped, with the reason), unless
SYNFIRE_REQUIRE_GPU=1 (the GPU host's runs), which makes a missing GPU a failure, as in the
Rust tests (tests/common: `gpu_or_skip`)."""

import os
from pathlib import Path

import numpy as np
import pytest

import synfire

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"


@pytest.fixture(scope="module", autouse=True)
def gpu():
    """The GPUs found, or a skip (a failure with SYNFIRE_REQUIRE_GPU=1)."""
    try:
        found = synfire.gpus()
    except synfire.SynfireError as e:
        if os.environ.get("SYNFIRE_REQUIRE_GPU") == "1":
            pytest.fail(f"SYNFIRE_REQUIRE_GPU=1 but no GPU is usable: {e}")
        pytest.skip(f"needs a GPU: {e}")
    assert found and synfire.gpu_available()
    return found


def test_gpus_describe_the_devices(gpu):
    for d in gpu:
        assert d["name"] and d["total_memory"] > 0 and d["compute_capability"][0] >= 5
    assert [d["ordinal"] for d in gpu] == list(range(len(gpu)))


def rows(r):
    return list(zip(r.episodes["labels"], r.episodes["intervals"], r.episodes["count"]))


@pytest.mark.parametrize("kernel", ["hybrid", "ptpe", "mtpe"])
def test_mining_on_the_gpu_equals_the_cpu(kernel):
    # A lag-0 interval among them, so the kernels' equal-time rules are exercised too.
    ivs = ["[0,0.001]", "(0.001,0.005]", "(0.005,0.010]"]
    kw = dict(min_count=200, max_level=4)
    cpu = synfire.mine(A2929, ivs, device="cpu", **kw)
    gpu = synfire.mine(A2929, ivs, device="gpu", exact_kernel=kernel, **kw)
    assert len(cpu.episodes) > 100
    assert rows(gpu) == rows(cpu)
    # PreElim's share differs (the CPU counts level 2 exactly in one pass; the GPU does not).
    cols = ["level", "candidates", "removed_by_bounds", "frequent"]
    assert gpu.levels[cols].equals(cpu.levels[cols])


def test_significance_on_the_gpu_equals_the_cpu():
    ivs = ["[0,0.001]", "(0.001,0.005]", "(0.005,0.010]"]
    sig = {"surrogates": "dither:0.015", "n_surrogates": 9, "seed": 11, "test_top": 40,
           "correction": "max-t"}
    kw = dict(min_count=300, max_level=3, significance=sig, occurrences=True)
    cpu = synfire.mine(A2929, ivs, device="cpu", **kw)
    gpu = synfire.mine(A2929, ivs, device="gpu", **kw)
    assert rows(gpu) == rows(cpu)
    for c in ("surrogate_mean", "surrogate_std", "statistic", "p_value", "p_adjusted"):
        np.testing.assert_array_equal(gpu.episodes[c].to_numpy(), cpu.episodes[c].to_numpy())
    assert gpu.occurrences.equals(cpu.occurrences)


def test_motif_on_the_gpu_equals_the_cpu():
    x = np.cumsum(np.random.default_rng(5).standard_normal(20_000))
    cpu = synfire.motif(x, 128, top_k=3, device="cpu")
    gpu = synfire.motif(x, 128, top_k=3, device="gpu")
    assert gpu.attrs["device"] != "cpu" and cpu.attrs["device"] == "cpu"
    assert gpu[["i", "j"]].equals(cpu[["i", "j"]])
    np.testing.assert_allclose(gpu["distance"], cpu["distance"], rtol=1e-6, atol=1e-9)


def test_softdtw_on_the_gpu_is_within_the_float32_tolerance():
    rng = np.random.default_rng(8)
    X = [rng.normal(size=(n, 2)) for n in (30, 45, 60)]
    Y = [rng.normal(size=(m, 2)) for m in (40, 25)]
    for kw in (dict(), dict(divergence=True), dict(band=20)):
        cpu = synfire.softdtw(X, Y, gamma=0.5, device="cpu", **kw)
        gpu = synfire.softdtw(X, Y, gamma=0.5, device="gpu", **kw)
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-4 * np.abs(cpu).max())
    vc, gxc, gyc = synfire.softdtw(X, Y, gamma=0.5, gradient=True, device="cpu")
    vg, gxg, gyg = synfire.softdtw(X, Y, gamma=0.5, gradient=True, device="gpu")
    np.testing.assert_allclose(vg, vc, rtol=1e-4)
    for g, c in zip(gxg + gyg, gxc + gyc):
        assert g.shape == c.shape
        np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-4 * np.abs(c).max())


def test_sing_queries_on_the_gpu_equal_the_cpu():
    rng = np.random.default_rng(3)
    data = np.cumsum(rng.standard_normal((5_000, 128)), axis=1)
    index = synfire.Index.build(data, leaf_capacity=64)
    for q in data[:5] + rng.normal(scale=0.1, size=(5, 128)):
        ids_c, d_c = index.query(q, k=5, device="cpu")
        ids_g, d_g = index.query(q, k=5, device="gpu")
        np.testing.assert_array_equal(ids_g, ids_c)
        np.testing.assert_allclose(d_g, d_c, rtol=1e-9)


def test_shapelets_trained_on_the_gpu_equal_the_cpu():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((40, 60))
    y = np.array([i % 2 for i in range(40)])
    X[y == 1, 20:30] += 3.0
    cpu = synfire.ShapeletClassifier(min_length=5, max_length=15, device="cpu").fit(X, y)
    gpu = synfire.ShapeletClassifier(min_length=5, max_length=15, device="gpu").fit(X, y)
    assert gpu.model_ == cpu.model_
    assert (gpu.predict(X) == cpu.predict(X)).all()
