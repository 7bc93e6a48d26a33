"""The sensor stages from Python against independent numpy oracles and the command line."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import synfire

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
ITALY = ROOT / "fixtures/ucr/ItalyPowerDemand"


def read_ts(path):
    """A UCR `.ts` file: (series [B, N], labels [B]) — an independent little parser."""
    rows, labels = [], []
    data = False
    for line in Path(path).read_text().splitlines():
        if line.strip().lower() == "@data":
            data = True
            continue
        if data and line.strip():
            values, label = line.rsplit(":", 1)
            rows.append([float(v) for v in values.split(",")])
            labels.append(label.strip())
    return np.array(rows), labels


def sdtw_oracle(x, y, gamma):
    """Cuturi & Blondel's recurrence, plainly (x: [N, D], y: [M, D])."""
    n, m = len(x), len(y)
    r = np.full((n + 1, m + 1), np.inf)
    r[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d = np.sum((x[i - 1] - y[j - 1]) ** 2)
            a = np.array([r[i - 1, j - 1], r[i - 1, j], r[i, j - 1]])
            mu = a.min()
            r[i, j] = d + mu - gamma * np.log(np.sum(np.exp(-(a - mu) / gamma)))
    return r[n, m]


def test_softdtw_values_gradients_and_divergence():
    rng = np.random.default_rng(7)
    X = [rng.normal(size=(n, 2)) for n in (5, 8, 6)]
    Y = [rng.normal(size=(m, 2)) for m in (7, 4)]
    values = synfire.softdtw(X, Y, gamma=0.5, device="cpu")
    assert values.shape == (3, 2)
    for i, x in enumerate(X):
        for j, y in enumerate(Y):
            assert values[i, j] == pytest.approx(sdtw_oracle(x, y, 0.5), rel=1e-12, abs=1e-12)
    # Gradients against central differences of the summed values.
    v, gx, gy = synfire.softdtw(X, Y, gamma=0.5, gradient=True, device="cpu")
    assert [g.shape for g in gx] == [x.shape for x in X]
    eps = 1e-6
    for i in (0, 2):
        for k in ((0, 0), (3, 1)):
            up = [x.copy() for x in X]
            dn = [x.copy() for x in X]
            up[i][k] += eps
            dn[i][k] -= eps
            fd = (synfire.softdtw(up, Y, gamma=0.5, device="cpu").sum()
                  - synfire.softdtw(dn, Y, gamma=0.5, device="cpu").sum()) / (2 * eps)
            assert gx[i][k] == pytest.approx(fd, rel=1e-5, abs=1e-7)
    # The divergence of a series with itself is 0, and ≥ 0 otherwise.
    d = synfire.softdtw(X, gamma=1.0, divergence=True, device="cpu")
    assert np.allclose(np.diag(d), 0.0, atol=1e-9)
    assert (d >= -1e-9).all()
    with pytest.raises(ValueError, match="gamma|γ"):
        synfire.softdtw(X, Y, gamma=0.0)
    with pytest.raises(ValueError, match="channels"):
        synfire.softdtw(X, [rng.normal(size=(4, 3))])


def test_barycenter_equals_the_command_line(tmp_path):
    X, labels = read_ts(ITALY / "ItalyPowerDemand_TRAIN.ts")
    ones = X[[i for i, l in enumerate(labels) if l == "1"]][:10]
    z, info = synfire.barycenter(ones, gamma=1.0, max_iterations=30, device="cpu")
    assert z.shape == (24,)
    obj = info["objective"]
    assert all(b <= a + 1e-12 for a, b in zip(obj, obj[1:])), obj
    # The CLI on the same ten series (written as a UCR .tsv: label then values).
    tsv = tmp_path / "ones.tsv"
    tsv.write_text("".join("1\t" + "\t".join(repr(float(v)) for v in row) + "\n" for row in ones))
    out = subprocess.run([BIN, "barycenter", str(tsv), "--gamma", "1.0", "--iterations", "30",
                          "--device", "cpu", "--format", "json"],
                         capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    cli = np.array(doc["barycenter"]).ravel()
    np.testing.assert_allclose(z, cli, rtol=0, atol=1e-12)


def test_index_answers_as_a_brute_force_and_survives_save_load(tmp_path):
    X, _ = read_ts(ITALY / "ItalyPowerDemand_TEST.ts")
    index = synfire.Index.build(X, leaf_capacity=64)
    assert len(index) == len(X) and index.series_length == 24
    z = (X - X.mean(axis=1, keepdims=True)) / X.std(axis=1, keepdims=True)
    rng = np.random.default_rng(3)
    for q in [X[5] + rng.normal(scale=0.1, size=24), rng.normal(size=24)]:
        qz = (q - q.mean()) / q.std()
        d = np.sqrt(((z - qz) ** 2).sum(axis=1))
        want = np.argsort(d, kind="stable")[:5]
        ids, dist = index.query(q, k=5, device="cpu")
        assert list(ids) == list(want)
        np.testing.assert_allclose(dist, d[want], rtol=1e-4)
    index.save(tmp_path / "idx")
    again = synfire.Index.load(tmp_path / "idx")
    ids2, _ = again.query(X[5], k=3, device="cpu")
    assert list(ids2)[0] == 5
    with pytest.raises(ValueError):
        synfire.Index.build([np.arange(5.0), np.arange(6.0)])


def test_query_batch_equals_query_row_by_row():
    X, _ = read_ts(ITALY / "ItalyPowerDemand_TEST.ts")
    index = synfire.Index.build(X, leaf_capacity=64)
    rng = np.random.default_rng(4)
    qs = np.stack([X[i] + rng.normal(scale=0.2, size=24) for i in range(0, 300, 7)])
    ids, dist = index.query_batch(qs, k=4, device="cpu")
    assert ids.shape == (len(qs), 4) and dist.shape == (len(qs), 4)
    for row, q in enumerate(qs):
        want_ids, want_d = index.query(q, k=4, device="cpu")
        assert list(ids[row]) == list(want_ids)
        np.testing.assert_array_equal(dist[row], want_d)
    with pytest.raises(ValueError, match="dimensions"):
        index.query_batch(qs[0], k=1)
    with pytest.raises(ValueError, match="query 2"):
        index.query_batch(np.stack([qs[0], qs[1], np.full(24, np.nan)]), k=1)


def test_shapelet_classifier_matches_the_command_line():
    Xtr, ytr = read_ts(ITALY / "ItalyPowerDemand_TRAIN.ts")
    Xte, yte = read_ts(ITALY / "ItalyPowerDemand_TEST.ts")
    clf = synfire.ShapeletClassifier(min_length=4, max_length=8, device="cpu")
    with pytest.raises(ValueError, match="fit"):
        clf.predict(Xte)
    assert clf.fit(Xtr, ytr) is clf
    assert list(clf.classes_) == ["1", "2"]
    acc = clf.score(Xte, yte)
    out = subprocess.run([BIN, "shapelet", str(ITALY / "ItalyPowerDemand_TRAIN.ts"), "--test",
                          str(ITALY / "ItalyPowerDemand_TEST.ts"), "--min-length", "4",
                          "--max-length", "8", "--device", "cpu", "--format", "json"],
                         capture_output=True, text=True, check=True)
    assert acc == pytest.approx(json.loads(out.stdout)["test_accuracy"], abs=0)
    assert clf.score(Xtr, ytr) == 1.0
    # Labels keep their type; params round-trip (scikit-learn's clone relies on it).
    ints = synfire.ShapeletClassifier(min_length=4, max_length=6, device="cpu")
    ints.fit(Xtr, [int(v) for v in ytr])
    assert set(ints.predict(Xte[:20])) <= {1, 2}
    params = clf.get_params()
    assert synfire.ShapeletClassifier(**params).get_params() == params
    with pytest.raises(ValueError, match="unknown"):
        clf.set_params(depth=3)
