"""synfire.mine(..., occurrences=True): every episode's non-overlapped occurrences, checked
against the recording itself (real spikes, gaps inside the intervals, non-overlapped, as many
as the count) and against `synfire mine --occurrences FILE.csv`."""

import csv
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import synfire

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
# Gaps (5,10] ms and [0,2] ms (closed: lag 0 admitted), as tests/cli_occurrences.rs.
IVS = ["(0.005,0.010]", "[0,0.002]"]
KW = dict(support=0.05, support_per="seconds", max_level=3)


@pytest.fixture(scope="module")
def mined():
    return synfire.mine(A2929, IVS, occurrences=True, **KW)


def test_occurrences_are_real_fitting_non_overlapped_and_as_many_as_the_count(mined):
    times, index, labels = synfire.read_spikes(A2929)
    spikes = {(labels[u], t) for u, t in zip(index.tolist(), times.tolist())}
    type_id = {label: i for i, label in enumerate(labels)}
    ep, occ = mined.episodes, mined.occurrences
    assert list(occ.columns) == ["episode", "occurrence", "node", "unit", "time_s"]
    multi = ep[ep["labels"].map(len) >= 2]
    assert len(multi) > 20 and (ep["labels"].map(len) == 3).any()
    # Exactly the episodes of two or more nodes have occurrences (as the command line).
    assert set(occ["episode"].unique()) == set(multi.index)
    assert all((u, t) in spikes for u, t in zip(occ["unit"].astype(str), occ["time_s"]))
    for row, group in occ.groupby("episode", sort=True):
        e = ep.loc[row]
        n = len(e["labels"])
        group = group.sort_values(["occurrence", "node"])
        t = group["time_s"].to_numpy().reshape(-1, n)
        units = group["unit"].astype(str).to_numpy().reshape(-1, n)
        assert len(t) == e["count"], (e["labels"], len(t), e["count"])
        assert (group["occurrence"].to_numpy().reshape(-1, n)
                == np.arange(len(t))[:, None]).all()
        assert (units == np.array(e["labels"])).all()
        for k, (notation, (low, high)) in enumerate(zip(e["intervals"], e["intervals_s"])):
            d = t[:, k + 1] - t[:, k]
            if notation.startswith("["):
                # Lag 0 only from a lower unit (type id) to a higher one.
                a, b = e["labels"][k], e["labels"][k + 1]
                assert ((d >= low) & (d <= high)).all(), (e["labels"], k)
                assert (d > 0).all() or type_id[a] < type_id[b], (e["labels"], k)
            else:
                assert ((d > low) & (d <= high)).all(), (e["labels"], k)
        # Non-overlapped: each occurrence starts after the previous one ends.
        assert (t[1:, 0] > t[:-1, -1]).all(), e["labels"]


def test_occurrences_equal_the_command_line(mined, tmp_path):
    out = tmp_path / "occ.csv"
    subprocess.run([BIN, "mine", str(A2929), "--intervals", ",".join(IVS), "--support", "0.05",
                    "--support-per", "seconds", "--max-level", "3", "-q", "--occurrences",
                    str(out)], check=True, capture_output=True)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    cli = {(r["episode"], int(r["occurrence"]), int(r["node"]), r["unit"], float(r["time_s"]))
           for r in rows}
    ep, occ = mined.episodes, mined.occurrences

    def name(row):
        labels, ivs = ep.loc[row, "labels"], ep.loc[row, "intervals"]
        return "".join(f"{u}-{iv}-" for u, iv in zip(labels, ivs)) + labels[-1]

    names = {row: name(row) for row in occ["episode"].unique()}
    ours = {(names[e], o, n, str(u), t) for e, o, n, u, t in
            zip(occ["episode"], occ["occurrence"], occ["node"], occ["unit"], occ["time_s"])}
    assert len(ours) == len(occ) == len(rows) > 1000
    assert ours == cli


def test_occurrences_follow_the_listing_and_default_to_none():
    times, labels = np.array([0.0, 0.003, 0.010, 0.013, 0.020, 0.023]), np.array(list("ababab"))
    r = synfire.mine((times, labels), [(0, 0.005)], min_count=3, max_level=2)
    assert r.occurrences is None
    r = synfire.mine((times, labels), [(0, 0.005)], min_count=3, max_level=2, occurrences=True)
    assert list(r.episodes["labels"]) == [("a",), ("b",), ("a", "b")]
    assert r.occurrences["episode"].tolist() == [2] * 6
    assert r.occurrences["time_s"].tolist() == times.tolist()
    assert r.occurrences["unit"].astype(str).tolist() == list("ababab")
    # With significant_only the frame lists fewer rows (36 of 52 pairs); `episode` indexes
    # that frame.
    sig = {"surrogates": "dither:0.015", "n_surrogates": 39, "seed": 1, "correction": "max-t"}
    kw = dict(min_count=300, max_level=2, occurrences=True)
    ivs = ["(0,0.005]", "(0.005,0.010]"]
    every = synfire.mine(A2929, ivs, significance=sig, **kw)
    r = synfire.mine(A2929, ivs, significance={**sig, "significant_only": True}, **kw)
    pairs = r.episodes[r.episodes["labels"].map(len) == 2]
    assert 0 < len(pairs) < (every.episodes["labels"].map(len) == 2).sum()
    assert set(r.occurrences["episode"]) == set(pairs.index)
    counts = r.occurrences[r.occurrences["node"] == 0].groupby("episode").size()
    assert (counts == r.episodes.loc[counts.index, "count"]).all()
