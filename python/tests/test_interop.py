"""synfire.mine on the containers of the real libraries (neo, pynapple, SpikeInterface,
installed from PyPI by tools/test-python.sh), built from the bundled recording A2929-200711,
gives exactly what `synfire mine` gives on the file (labels, intervals, counts, order), and
unit metadata (`location`) reaches the labels as `--unit-label location` puts it there."""

import csv
import importlib
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import synfire


def need(module):
    """The library, or a skip without it; tools/test-python.sh installs them all and sets
    SYNFIRE_REQUIRE_INTEROP=1, so in CI a missing one fails instead of skipping."""
    if os.environ.get("SYNFIRE_REQUIRE_INTEROP") == "1":
        return importlib.import_module(module)
    return pytest.importorskip(module)


neo = need("neo")
pq = need("quantities")
nap = need("pynapple")
si = need("spikeinterface.core")

ROOT = Path(__file__).resolve().parents[2]
A2929 = ROOT / "fixtures/spikes/A2929-200711/A2929-200711.nwb"
UNITS_CSV = ROOT / "fixtures/spikes/A2929-200711/units.csv"
BIN = os.environ.get("SYNFIRE_BIN", str(ROOT / "target/release/synfire"))
IVS = [(0, 0.005), (0.005, 0.010), (0.010, 0.020)]
KW = dict(support=0.2, support_per="seconds", max_level=3)
CLI_ARGS = ["--intervals", "0-0.005,0.005-0.010,0.010-0.020", "--support", "0.2",
            "--support-per", "seconds", "--max-level", "3"]
FS = 20_000.0  # the recording's clock (all but 1,970 spike times are whole 50 µs samples)


def cli_json(path, *args):
    out = subprocess.run([BIN, "mine", str(path), "--format", "json", "-q", *args],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def rows(result):
    """(labels, intervals, count) of every episode, in the report's order."""
    return [(tuple(l), tuple(i), int(c)) for l, i, c in
            zip(result.episodes["labels"], result.episodes["intervals"],
                result.episodes["count"])]


def doc_rows(doc):
    return [(tuple(e["labels"]), tuple(e["intervals"]), int(e["count"]))
            for e in doc["episodes"]]


@pytest.fixture(scope="module")
def recording():
    """The recording's spikes per unit (read by synfire, no pynwb), the units' locations
    (units.csv) and the command line's result, plain and with `--unit-label location`."""
    times, index, labels = synfire.read_spikes(A2929)
    trains = {label: times[index == i] for i, label in enumerate(labels)}
    with open(UNITS_CSV, newline="") as f:
        location = {r["unit_id"]: r["location"] for r in csv.DictReader(f)}
    return dict(trains=trains, location=location, cli=doc_rows(cli_json(A2929, *CLI_ARGS)),
                cli_location=doc_rows(cli_json(A2929, *CLI_ARGS, "--unit-label", "location")))


def test_neo_spike_trains_mine_as_the_file(recording):
    trains, location = recording["trains"], recording["location"]
    t_stop = max(t.max() for t in trains.values()) + 1.0
    sts = [neo.SpikeTrain(t * pq.s, t_stop=t_stop * pq.s, name=label,
                          location=location[label]) for label, t in trains.items()]
    want = recording["cli"]
    assert len(want) > 100
    assert rows(synfire.mine(sts, IVS, **KW)) == want
    # A Segment's SpikeTrainList, and trains in milliseconds (rescaled to seconds: the
    # result equals that of the rescaled times as arrays).
    segment = neo.Segment()
    segment.spiketrains.extend(sts)
    assert rows(synfire.mine(segment.spiketrains, IVS, **KW)) == want
    ms = [neo.SpikeTrain(t * 1000 * pq.ms, t_stop=t_stop * 1000 * pq.ms, name=label)
          for label, t in trains.items()]
    as_seconds = {label: (t * 1000 * pq.ms).rescale("s").magnitude for label, t in trains.items()}
    assert rows(synfire.mine(ms, IVS, **KW)) == rows(synfire.mine(as_seconds, IVS, **KW))
    # Annotations as labels, as --unit-label labels NWB units.
    labelled = synfire.mine(sts, IVS, unit_label="location", **KW)
    assert rows(labelled) == recording["cli_location"]
    assert ("adn:6", "adn:6") in set(labelled.episodes["labels"])
    with pytest.raises(ValueError, match="no annotation 'depth'"):
        synfire.mine(sts, IVS, unit_label="depth", **KW)


def test_pynapple_tsgroup_from_its_own_nwb_reader_mines_as_the_file(recording):
    units = nap.load_file(str(A2929))["units"]
    assert isinstance(units, nap.TsGroup) and len(units) == 15
    assert rows(synfire.mine(units, IVS, **KW)) == recording["cli"]
    # Its `location` metadata column (from the NWB units table) as the labels' prefix.
    labelled = synfire.mine(units, IVS, unit_label="location", **KW)
    assert rows(labelled) == recording["cli_location"]
    assert {l.split(":")[0] for e in labelled.episodes["labels"] for l in e} == {"adn", "ca1"}
    with pytest.raises(ValueError, match="no metadata column 'depth'"):
        synfire.mine(units, IVS, unit_label="depth", **KW)
    # A TsGroup built in memory, its metadata set afterwards.
    trains, location = recording["trains"], recording["location"]
    group = nap.TsGroup({int(k): nap.Ts(t=t) for k, t in trains.items()})
    group.set_info(location=np.array([location[k] for k in trains]))
    assert rows(synfire.mine(group, IVS, unit_label="location", **KW)) \
        == recording["cli_location"]


def test_spikeinterface_sorting_mines_as_its_times(recording, tmp_path):
    trains, location = recording["trains"], recording["location"]
    frames = {label: np.round(t * FS).astype(np.int64) for label, t in trains.items()}
    assert all(np.abs(f / FS - trains[k]).max() <= 1.01e-6 for k, f in frames.items())
    sorting = si.NumpySorting.from_unit_dict(frames, sampling_frequency=FS)
    sorting.set_property("location", np.array([location[k] for k in sorting.get_unit_ids()]))
    got = synfire.mine(sorting, IVS, **KW)
    # The sorting's spike times are frames / fs: the same as those times as arrays, and as
    # the command line on a CSV of them (written with every digit).
    seconds = {k: f / FS for k, f in frames.items()}
    assert rows(got) == rows(synfire.mine(seconds, IVS, **KW))
    path = tmp_path / "sorting.csv"
    events = sorted((t, k) for k, ts in seconds.items() for t in ts.tolist())
    path.write_text("label,time_s\n" + "".join(f"{k},{t!r}\n" for t, k in events))
    cli = doc_rows(cli_json(path, *CLI_ARGS))
    assert sorted(rows(got)) == sorted(cli) and len(cli) > 100
    # Moving 1,970 spikes by 1 µs onto the 20 kHz grid changes no episode of the file's.
    assert sorted(rows(got)) == sorted(recording["cli"])
    labelled = synfire.mine(sorting, IVS, unit_label="location", **KW)
    assert sorted(rows(labelled)) == sorted(recording["cli_location"])
    with pytest.raises(ValueError, match="no unit property 'depth'"):
        synfire.mine(sorting, IVS, unit_label="depth", **KW)
    two = si.NumpySorting.from_unit_dict([frames, frames], sampling_frequency=FS)
    with pytest.raises(ValueError, match="2 segments"):
        synfire.mine(two, IVS, **KW)
    one = si.select_segment_sorting(two, segment_indices=1)
    assert sorted(rows(synfire.mine(one, IVS, **KW))) == sorted(rows(got))


def test_nwb_unit_label_and_epochs_from_a_path(recording):
    r = synfire.mine(A2929, IVS, unit_label="location", **KW)
    assert rows(r) == recording["cli_location"]
    wake = synfire.mine(A2929, IVS, epochs="wake", **KW)
    assert rows(wake) == doc_rows(cli_json(A2929, *CLI_ARGS, "--epochs", "wake"))
    times, _, labels = synfire.read_spikes(A2929, epochs=["wake"], unit_label="location")
    assert labels[6] == "adn:6" and times.min() >= 600 - 1e-9
    with pytest.raises(ValueError, match="epochs"):
        synfire.mine(recording["trains"], IVS, epochs="wake", **KW)
    with pytest.raises(synfire.SynfireError, match="unit-label"):
        synfire.mine(ROOT / "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv", IVS,
                     unit_label="location", **KW)
