"""synfire.mine from Python equals `synfire mine` on the command line, whatever the input form;
bad input raises the documented exceptions with the command line's messages."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import synfire

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
IBL = ROOT / "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))


def cli_json(path, *args):
    out = subprocess.run([BIN, "mine", str(path), "--format", "json", "-q", *args],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def as_set(episodes):
    """(labels, intervals, count) of every episode, independent of the report order among
    ties (type ids depend on the reader)."""
    return {(tuple(e[0]), tuple(e[1]), int(e[2])) for e in episodes}


def rows(result):
    return as_set(zip(result.episodes["labels"], result.episodes["intervals"],
                      result.episodes["count"]))


def doc_rows(doc):
    return as_set((e["labels"], e["intervals"], e["count"]) for e in doc["episodes"])


def read_csv(path):
    labels, times = [], []
    for line in Path(path).read_text().splitlines()[1:]:
        label, t = line.split(",")
        labels.append(label)
        times.append(float(t))
    return np.array(times), np.array(labels)


def test_a_file_mines_as_the_command_line():
    r = synfire.mine(A2929, [(0, 0.005), (0.005, 0.010), (0.010, 0.020)], support=0.2,
                     support_per="seconds", max_level=3)
    doc = cli_json(A2929, "--intervals", "0-0.005,0.005-0.010,0.010-0.020", "--support", "0.2",
                   "--support-per", "seconds", "--max-level", "3")
    assert r.min_count == doc["params"]["min_count"] == 240
    assert len(r.episodes) == len(doc["episodes"]) > 100
    # Same episodes, same counts, same order.
    assert list(r.episodes["count"]) == [e["count"] for e in doc["episodes"]]
    assert list(r.episodes["labels"]) == [tuple(e["labels"]) for e in doc["episodes"]]
    assert list(r.levels["frequent"]) == [lv["frequent"] for lv in doc["levels"]]
    top = r.episodes[r.episodes["labels"] == ("6", "6")].iloc[0]
    assert top["intervals"] == ("(10,20]ms",) and top["count"] == 5926


def test_read_spikes_round_trips_through_mine():
    times, units, labels = synfire.read_spikes(A2929)
    assert len(times) == len(units) == 98_794 and len(labels) == 15
    assert np.all(np.diff(times) >= 0)
    kw = dict(min_count=300, max_level=3)
    by_path = synfire.mine(A2929, [(0, 0.005), (0.005, 0.010)], **kw)
    by_arrays = synfire.mine((times, units, labels), [(0, 0.005), (0.005, 0.010)], **kw)
    assert rows(by_arrays) == rows(by_path)
    assert list(by_arrays.episodes["count"]) == list(by_path.episodes["count"])


def test_arrays_dicts_and_tuples_equal_the_file():
    times, labels = read_csv(IBL)
    ivs = ["(0,0.005]", "(0.005,0.010]"]
    want = doc_rows(cli_json(IBL, "--intervals", ",".join(ivs), "--min-count", "60",
                             "--max-level", "2"))
    by_tuple = synfire.mine((times, labels), ivs, min_count=60, max_level=2)
    assert rows(by_tuple) == want
    shuffled = np.random.default_rng(1).permutation(len(times))
    by_unsorted = synfire.mine((times[shuffled], labels[shuffled]), ivs, min_count=60,
                               max_level=2)
    assert rows(by_unsorted) == want
    trains = {u: times[labels == u] for u in np.unique(labels)}
    assert rows(synfire.mine(trains, ivs, min_count=60, max_level=2)) == want


def test_lag0_intervals_in_samples_and_significance_columns():
    times, labels = read_csv(IBL)
    r = synfire.mine((times, labels), ["[0,5]", "(5,150]"], sample_rate_hz=30000, min_count=60,
                     max_level=2,
                     significance={"surrogates": "dither:0.015", "n_surrogates": 9, "seed": 2,
                                   "correction": "max-t"})
    assert r.params["sample_rate_hz"] == 30000
    assert r.params["interval_notation"] == ["[0,0.166667]ms", "(0.166667,5]ms"]
    assert r.significance["n_surrogates"] == 9
    tested = r.episodes.dropna(subset=["p_value"])
    assert len(tested) == len(r.episodes[r.episodes["labels"].map(len) >= 2]) > 0
    assert str(tested["significant"].dtype) == "boolean" and not tested["significant"].isna().any()
    untested = r.episodes[r.episodes["labels"].map(len) == 1]
    assert untested["significant"].isna().all() and untested["p_value"].isna().all()
    doc = cli_json(IBL, "--sample-rate-hz", "30000", "--intervals", "[0,5],(5,150]",
                   "--min-count", "60", "--max-level", "2", "--surrogates", "dither:0.015",
                   "--n-surrogates", "9", "--seed", "2", "--correction", "max-t")
    got = {(e, round(p, 12)) for e, p in zip(r.episodes["labels"], r.episodes["p_value"])
           if p == p}
    want = {(tuple(e["labels"]), round(e["p_value"], 12)) for e in doc["episodes"]
            if "p_value" in e}
    assert got == want


def test_sample_split_gives_test_counts_as_the_command_line():
    """``sample_split``: the family's test counts and p-values equal ``--sample-split``'s."""
    sig = {"surrogates": "dither:0.01", "n_surrogates": 9, "seed": 3, "sample_split": 0.5,
           "test_top": 10, "correction": "max-t"}
    r = synfire.mine(A2929, [(0, 0.005), (0.005, 0.010)], min_count=300, max_level=3,
                     significance=sig)
    assert r.significance["sample_split"]["family"] == 10 == r.significance["tested"]
    tested = r.episodes.dropna(subset=["p_value"])
    assert len(tested) == 10
    assert r.significance["sample_split"]["screen_surrogates"] == 10
    assert str(r.episodes["test_count"].dtype) == "Int64"
    assert not tested["test_count"].isna().any()
    assert (tested["count"] >= tested["test_count"]).all()
    doc = cli_json(A2929, "--intervals", "0-0.005,0.005-0.010", "--min-count", "300",
                   "--max-level", "3", "--surrogates", "dither:0.01", "--n-surrogates", "9",
                   "--seed", "3", "--sample-split", "0.5", "--test-top", "10",
                   "--correction", "max-t")
    got = {(e, int(c), round(p, 12)) for e, c, p in
           zip(tested["labels"], tested["test_count"], tested["p_adjusted"])}
    want = {(tuple(e["labels"]), e["test_count"], round(e["p_adjusted"], 12))
            for e in doc["episodes"] if "p_value" in e}
    assert got == want
    with pytest.raises(ValueError, match="sample_split"):
        synfire.mine(A2929, [(0, 0.005)], min_count=300, max_level=2,
                     significance={**sig, "correction": "spectrum"})


def test_bad_input_raises_the_documented_exceptions():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        synfire.mine("no/such/file.nwb", [(0, 0.005)])
    with pytest.raises(ValueError, match="upper bound"):
        synfire.mine(A2929, [(0.5, 0.1)])
    with pytest.raises(ValueError, match="max_level"):
        synfire.mine(A2929, [(0, 0.005)], max_level=0)
    with pytest.raises(ValueError, match="1-D arrays of one length"):
        synfire.mine((np.zeros(3), np.zeros(2)), [(0, 0.005)])
    with pytest.raises(ValueError, match="negative"):
        synfire.mine((np.array([-1.0, 0.5]), np.array([1, 2])), [(0, 0.005)])
    with pytest.raises(ValueError, match="correction"):
        synfire.mine(A2929, [(0, 0.005)], min_count=300, max_level=2,
                     significance={"surrogates": "dither", "correction": "max-z"})
    assert issubclass(synfire.SynfireError, Exception)


def test_phy_folder_reads_like_the_files():
    """A phy/Kilosort folder: counts per cluster equal the .npy files (read with numpy)."""
    root = Path(__file__).resolve().parents[2] / "fixtures" / "spikes" / "np-curated-120s"
    times, index, labels = synfire.read_spikes(root, sample_rate_hz=30000, units="good")
    clusters = np.load(root / "spike_clusters.npy").ravel()
    samples = np.load(root / "spike_times.npy").ravel()
    groups = dict(line.split("\t") for line in (root / "cluster_group.tsv").read_text().split("\n")[1:] if line)
    good = sorted(int(k) for k, g in groups.items() if g.strip() == "good")
    assert labels == [str(g) for g in good]
    keep = np.isin(clusters, good)
    assert len(times) == keep.sum()
    want = {str(c): n for c, n in zip(*np.unique(clusters[keep], return_counts=True))}
    got = {labels[i]: n for i, n in zip(*np.unique(index, return_counts=True))}
    assert got == want
    np.testing.assert_array_equal(np.sort(times), np.sort(samples[keep] / 30000.0))
    with pytest.raises(synfire.SynfireError, match="params.py"):
        synfire.read_spikes(root)
    result = synfire.mine(root, ["(0,150]"], sample_rate_hz=30000, units="good",
                          support=0.2, support_per="seconds", max_level=2, device="cpu")
    assert len(result.episodes) > 0


def test_a_memory_budget_truncates_and_a_stray_timestamp_warns():
    """``memory_budget`` stops mining as ``--memory-budget`` does (the finished levels kept,
    ``truncated`` saying why), and a result that looks wrong warns (issue 45, issue 47)."""
    r = synfire.mine(A2929, [(0, 0.005)], min_count=100, max_level=3, memory_budget=1)
    assert r.truncated["reason"]["kind"] == "memory_budget"
    assert r.truncated["level"] == 1 and len(r.episodes) == 0
    with pytest.raises(ValueError, match="memory"):
        synfire.mine(A2929, [(0, 0.005)], min_count=100, memory_budget="8X")
    times = np.concatenate([np.arange(0, 100, 0.5), [1e12]])
    units = np.array([0, 1] * 100 + [0])
    with pytest.warns(UserWarning, match="check for a wrong timestamp"):
        r = synfire.mine((times, units), [(0, 0.6)], min_count=10, max_level=2)
    assert any("days" in w for w in r.warnings)
    r = synfire.mine(A2929, [(0, 0.005)], min_count=100, max_level=2)
    assert r.warnings == []
