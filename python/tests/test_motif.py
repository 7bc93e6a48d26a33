"""synfire.motif equals a brute-force numpy oracle (every pair of z-normalised subsequences
outside the exclusion zone)."""

import numpy as np
import pytest

import synfire


def brute_force(x, m, exclusion):
    n = len(x) - m + 1
    sub = np.lib.stride_tricks.sliding_window_view(x, m)
    z = (sub - sub.mean(axis=1, keepdims=True)) / sub.std(axis=1, keepdims=True)
    d2 = np.maximum(2 * m - 2 * z @ z.T, 0.0)
    i, j = np.triu_indices(n, k=exclusion + 1)
    k = np.argmin(d2[i, j])
    return int(i[k]), int(j[k]), float(np.sqrt(d2[i[k], j[k]]))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_top_motif_equals_brute_force(seed):
    x = np.cumsum(np.random.default_rng(seed).standard_normal(600))
    m = 24
    got = synfire.motif(x, m, device="cpu")
    i, j, d = brute_force(x, m, exclusion=int(np.ceil(m / 4)))
    assert (int(got["i"][0]), int(got["j"][0])) == (i, j)
    assert abs(float(got["distance"][0]) - d) < 1e-6
    assert got.attrs["device"] == "cpu"


def test_top_k_are_sorted_and_bad_arguments_raise():
    x = np.cumsum(np.random.default_rng(9).standard_normal(800))
    got = synfire.motif(x, 16, top_k=3, device="cpu")
    assert len(got) == 3 and list(got["distance"]) == sorted(got["distance"])
    assert (got["i"] < got["j"]).all()
    with pytest.raises(ValueError, match="at least 2"):
        synfire.motif(x, 1)
    with pytest.raises(ValueError, match="samples"):
        synfire.motif(x[:10], 8)
    with pytest.raises(ValueError, match="device"):
        synfire.motif(x, 16, device="tpu")
