"""`synfire mine --nwb-output` read back by pynwb: the tables equal the JSON output, the
episodes link to the file's own units, and the occurrences are the count's own. The default
layout is NWB 2.10's events (an EventsTable per episode under /events), which nwbinspector
passes and pynapple loads; `--nwb-layout legacy` keeps the processing-module tables."""

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


def test_results_in_a_copy_of_the_input_nwb_legacy_layout(tmp_path):
    out = tmp_path / "with-results.nwb"
    doc = _mine(A2929, out, "--intervals", "(0.01,0.02],[0,0.002]", "--max-level", "3",
                "--support", "0.1", "--support-per", "seconds", "--unit-label", "location",
                "--epochs", "wake", "--surrogates", "dither:0.015", "--n-surrogates", "19",
                "--correction", "max-t", "--nwb-layout", "legacy")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    assert len(listed) > 10
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        # The copy keeps the recording: same units, same spikes.
        assert len(nwb.units) == 15
        # Legacy: nothing under /events, the version left as it was.
        assert not nwb.events
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
                "--sample-split", "0.5", "--test-top", "10", "--correction", "max-t")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        episodes = io.read().processing["synfire"]["episodes"].to_dataframe()
        assert list(episodes["test_count"]) == [e.get("test_count", -1) for e in listed]
        assert (episodes["test_count"] >= 0).sum() == 10


def test_results_in_a_new_nwb_for_a_kilosort_folder(tmp_path):
    # 3,096 episodes: the legacy layout's two tables (pynwb reads 3,096 EventsTables slowly).
    out = tmp_path / "kilosort-results.nwb"
    doc = _mine(CURATED, out, "--units", "good", "--sample-rate-hz", "30000",
                "--intervals", "(0,150]", "--max-level", "2", "--support", "1",
                "--support-per", "seconds", "--nwb-layout", "legacy")
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


EVENTS_ARGS = ("--intervals", "(0.01,0.02],[0,0.002]", "--max-level", "3", "--support", "0.1",
               "--support-per", "seconds", "--unit-label", "location", "--epochs", "wake",
               "--surrogates", "dither:0.015", "--n-surrogates", "19", "--correction", "max-t")


def test_events_layout_one_events_table_per_episode(tmp_path):
    out = tmp_path / "events.nwb"
    doc = _mine(A2929, out, *EVENTS_ARGS)
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    assert len(listed) > 10
    import h5py
    with h5py.File(out, "r") as f:
        assert f.attrs["nwb_version"] == "2.10.0"
        assert "occurrences" not in f["processing/synfire"]
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        assert len(nwb.units) == 15
        episodes = nwb.processing["synfire"]["episodes"].to_dataframe()
        assert len(episodes) == len(listed)
        assert len(nwb.events) == len(listed)
        for row, e in zip(episodes.itertuples(), listed):
            assert row.count == e["count"]
            assert row.significant == e["significant"]
            assert row.p_value == pytest.approx(e["p_value"])
            table = nwb.events[row.events_table]
            assert type(table).__name__ == "EventsTable"
            assert isinstance(table["timestamp"], pynwb.event.TimestampVectorData)
            assert isinstance(table["duration"], pynwb.event.DurationVectorData)
            assert table["timestamp"].unit == "seconds"
            assert table.source_description.startswith("synfire ")
            assert e["labels"][0].split(":")[1] in table.description
            occ = table.to_dataframe()
            # One row per occurrence: as many as the count, inside the wake epoch.
            assert len(occ) == e["count"]
            ids = [int(label.split(":")[1]) for label in e["labels"]]
            ts = occ["timestamp"].to_numpy()
            assert ts.min() >= 600.0 and (ts + occ["duration"].to_numpy()).max() < 1200.0
            assert np.all(np.diff(ts) > 0)  # non-overlapped, in time order
            for spikes, t, d, units in zip(occ["spikes"], ts, occ["duration"], occ["units"]):
                assert len(spikes) == len(ids)
                assert spikes[0] == t and spikes[-1] == pytest.approx(t + d, abs=1e-12)
                assert np.all(np.diff(spikes) >= 0)
                # Linked to the file's own units, node by node.
                assert list(units.index) == ids


def _inspector_messages(path):
    inspector = pytest.importorskip("nwbinspector")
    return list(inspector.inspect_nwbfile(nwbfile_path=str(path)))


def _ours(message):
    where = (message.location or "") + " " + (message.object_name or "")
    return "synfire" in where or where.startswith("/events")


def test_events_layout_passes_nwbinspector(tmp_path):
    from nwbinspector import Importance
    out = tmp_path / "events.nwb"
    _mine(A2929, out, *EVENTS_ARGS)
    before = _inspector_messages(A2929)
    after = _inspector_messages(out)
    # The input's own issues (its subject metadata, its position units) stay as they were;
    # nothing we wrote is an error or a best-practice violation, and no check crashed.
    serious = (Importance.ERROR, Importance.CRITICAL, Importance.BEST_PRACTICE_VIOLATION)
    key = lambda m: (m.check_function_name, m.location, m.object_name, m.message)
    new = [m for m in after if key(m) not in {key(b) for b in before}]
    assert not [m for m in new if m.importance in serious], new
    assert not [m for m in after if m.importance == Importance.ERROR], after
    assert new, "the inspector sees the new tables (suggestions only)"
    assert all(_ours(m) for m in new), new


def test_events_layout_in_a_new_file_passes_nwbinspector(tmp_path):
    from nwbinspector import Importance
    out = tmp_path / "kilosort-events.nwb"
    doc = _mine(CURATED, out, "--units", "good", "--sample-rate-hz", "30000",
                "--intervals", "(0,150]", "--max-level", "2", "--support", "12",
                "--support-per", "seconds")
    listed = [e for e in doc["episodes"] if len(e["labels"]) >= 2]
    with pynwb.NWBHDF5IO(str(out), "r") as io:
        nwb = io.read()
        assert len(nwb.events) == len(listed) > 0
        assert [len(t) for t in nwb.events.values()] == [e["count"] for e in listed]
    messages = _inspector_messages(out)
    # A new file knows no subject (DANDI wants one: the lab adds it); nothing else is critical,
    # and nothing we wrote is more than a suggestion.
    serious = [m for m in messages if m.importance in (Importance.ERROR, Importance.CRITICAL)]
    assert [m.check_function_name for m in serious] == ["check_subject_exists"], serious
    assert not [m for m in messages if _ours(m)
                and m.importance != Importance.BEST_PRACTICE_SUGGESTION], messages


def test_events_layout_loads_in_pynapple(tmp_path):
    nap = pytest.importorskip("pynapple")
    out = tmp_path / "events.nwb"
    _mine(A2929, out, *EVENTS_ARGS)
    data = nap.load_file(str(out))
    units = data["units"]
    assert len(units) == 15
    # The episodes' tables are not mistaken for units tables (no `*_times_index` column).
    assert not [k for k in data.keys() if "synfire_episode" in k and
                isinstance(data[k], nap.TsGroup)]


def test_bad_nwb_layout_is_refused(tmp_path):
    run = subprocess.run([BIN, "mine", str(A2929), "--intervals", "0-0.005", "--min-count", "5",
                          "--nwb-output", str(tmp_path / "x.nwb"), "--nwb-layout", "ndx-events"],
                         capture_output=True, text=True)
    assert run.returncode != 0
    assert "--nwb-layout" in run.stderr and "events" in run.stderr and "legacy" in run.stderr
