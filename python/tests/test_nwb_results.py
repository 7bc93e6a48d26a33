"""`synfire mine --nwb-output` read back by pynwb: the tables equal the JSON output, the
episodes link to the file's own units, and the occurrences are the count's own."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

pynwb = pytest.importorskip("pynwb")

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
CURATED = ROOT / "fixtures/spikes/np-curated-120s"


def _mine(path, out_nwb, *args):
    run = subprocess.run([BIN, "mine", str(path), "--format", "json", "-q",
                          "--nwb-output", str(out_nwb), *args],
                         capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def test_results_in_a_copy_of_the_input_nwb(tmp_path):
    out = tmp_path / "with-results.nwb"
    doc = _mine(A2929, out, "--intervals", "(0.01,0.02],[0,0.002]", "--max-level", "3",
                "--support", "0.1", "--support-per", "seconds", "--unit-label", "location",
                "--epochs", "wake", "--surrogates", "dither:0.015", "--n-surrogates", "19")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    assert len(listed) > 10
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        # The copy keeps the recording: same units, same spikes.
        assert len(nwb.units) == 15
        episodes = nwb.processing["synfire"]["episodes"].to_dataframe()
        occurrences = nwb.processing["synfire"]["occurrences"].to_dataframe()
        assert len(episodes) == len(listed)
        for row, e in zip(episodes.itertuples(), listed):
            assert list(row.unit_labels) == e["labels"]
            assert list(row.intervals) == e["intervals"]
            assert row.count == e["count"]
            assert row.significant == e["significant"]
            assert row.p_adjusted == pytest.approx(e["p_adjusted"])
            # Linked to the units table: the region's rows are the units whose ids the
            # labels carry (`adn:6` is unit id 6).
            ids = [int(label.split(":")[1]) for label in e["labels"]]
            assert list(row.units.index) == ids
            assert all(loc == label.split(":")[0]
                       for loc, label in zip(row.units["location"], e["labels"]))
        # Occurrences: as many as the count, inside the wake epoch, gaps fitting.
        per_episode = occurrences.groupby(occurrences["episode"].map(lambda df: df.index[0])).size()
        assert per_episode.to_dict() == {i: c for i, c in enumerate(episodes["count"]) if c > 0}
        starts = occurrences["start_time"].to_numpy()
        assert starts.min() >= 600.0 and occurrences["stop_time"].max() < 1200.0
        for spikes, stop in zip(occurrences["spike_times"], occurrences["stop_time"]):
            assert spikes[-1] == stop
            assert np.all(np.diff(spikes) >= 0)


def test_sample_split_test_counts_in_the_nwb(tmp_path):
    out = tmp_path / "split.nwb"
    doc = _mine(A2929, out, "--intervals", "0-0.005,0.005-0.010", "--max-level", "3",
                "--min-count", "300", "--surrogates", "dither:0.01", "--n-surrogates", "9",
                "--sample-split", "0.5", "--test-top", "10")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        episodes = io.read().processing["synfire"]["episodes"].to_dataframe()
        assert list(episodes["test_count"]) == [e.get("test_count", -1) for e in listed]
        assert (episodes["test_count"] >= 0).sum() == 10


def test_results_in_a_new_nwb_for_a_kilosort_folder(tmp_path):
    out = tmp_path / "kilosort-results.nwb"
    doc = _mine(CURATED, out, "--units", "good", "--sample-rate-hz", "30000",
                "--intervals", "(0,150]", "--max-level", "2", "--support", "1",
                "--support-per", "seconds")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        assert len(nwb.units) == 140
        units = nwb.units.to_dataframe()
        episodes = nwb.processing["synfire"]["episodes"].to_dataframe()
        assert list(episodes["count"]) == [e["count"] for e in listed]
        for row, e in zip(episodes.itertuples(), listed):
            assert [str(i) for i in row.units.index] == e["labels"]
        # The new file's spikes are the folder's good spikes, seconds.
        total = sum(len(t) for t in units["spike_times"])
        assert total == doc["events"]
