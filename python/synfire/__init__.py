"""synfire: frequent serial episodes in spike trains, exact on the CPU and the GPU.

An *episode* ``A -(lo,hi]-> B -(lo,hi]-> C`` is a sequence of units whose consecutive spikes
follow each other within the given delay intervals; its *count* (support) is the maximum
number of non-overlapped occurrences (Cao et al., "Towards real-time data mining of spike
train datasets using GPUs", Algorithm 1). :func:`mine` finds every episode whose count reaches
the threshold, level by level, exactly as ``synfire mine`` does, and can test each against
surrogates (``significance=``).

>>> import synfire
>>> r = synfire.mine("fixtures/spikes/A2929-200711/A2929-200711.nwb",
...                  intervals=[(0, 0.005), (0.005, 0.010)], support=0.2,
...                  support_per="seconds", max_level=3)
>>> r.episodes.head()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from . import _synfire
from ._synfire import SynfireError

from .sensors import Index, ShapeletClassifier, barycenter, softdtw  # noqa: E402

__all__ = ["mine", "motif", "read_spikes", "MiningResult", "SynfireError", "spike_arrays",
           "softdtw", "barycenter", "Index", "ShapeletClassifier", "gpus", "gpu_available",
           "__version__"]
__version__: str = _synfire.__version__


@dataclass
class MiningResult:
    """What :func:`mine` returns.

    Attributes:
        episodes: one row per frequent episode, in the report order (level, then count
            descending): ``labels`` (tuple of unit labels, length N), ``intervals_s`` (tuple of
            N - 1 ``(low, high)`` pairs in seconds, as given), ``intervals`` (the same in the
            text notation, ``"(4,6]ms"`` or ``"[0,0.2]ms"``), ``count`` (int), and with a
            significance test ``surrogate_mean``, ``surrogate_std``, ``statistic``,
            ``p_value``, ``p_adjusted`` (NaN where not tested), ``significant`` (nullable
            boolean, NA where not tested), and with ``sample_split`` ``test_count`` (the
            count in the test part, which the test compares with its surrogates; nullable
            integer, NA where not tested).
        levels: one row per level: ``level``, ``candidates``, ``removed_by_bounds``,
            ``eliminated_by_preelim``, ``frequent``, ``seconds``.
        min_count: the minimum count the threshold resolved to.
        params: the settings used (``params`` of ``docs/mine-json.md``).
        significance: the test's summary (``method``, ``n_surrogates``, ``alpha``, ...), or
            None without one.
        truncated: why mining stopped early (a dict), or None.
        document: the ``synfire mine --format json`` document, without its ``episodes``
            (they are the frame).
        occurrences: with ``mine(..., occurrences=True)``, the non-overlapped occurrences of
            every episode of two or more nodes (``synfire mine --occurrences FILE.csv``), a
            long frame with one row per event of an occurrence: ``episode`` (the episode's
            row in ``episodes``), ``occurrence`` (0-based, in time order), ``node`` (0-based),
            ``unit`` (the node's unit label, categorical), ``time_s`` (seconds). They are the
            occurrences the count counts (Algorithm 1, greedy earliest end): exactly ``count``
            per episode, each one's gaps inside the episode's intervals, each starting after
            the previous one ends. None otherwise.
    """

    episodes: pd.DataFrame
    levels: pd.DataFrame
    min_count: int
    params: dict
    significance: dict | None
    truncated: dict | None
    document: dict = field(repr=False)
    occurrences: pd.DataFrame | None = field(default=None, repr=False)


_TEST_COLUMNS = ("surrogate_mean", "surrogate_std", "statistic", "p_value", "p_adjusted",
                 "significant")


def spike_arrays(spikes: Any, unit_label: str | None = None
                 ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Turns a lab's spike container into ``(times_s, unit_index, labels)``.

    Accepted, with each unit keeping its label:

    * ``(times_s, unit_index, labels)``, as :func:`read_spikes` returns it;
    * ``(times_s, unit_ids)``: two 1-D arrays of equal length (shape ``[n]``; times in
      seconds; unit ids of any type, labelled by ``str``, numbered by first appearance as
      the CSV reader numbers them);
    * a mapping ``{unit: times_s}`` (values: arrays in seconds, ``neo.SpikeTrain`` or
      ``pynapple.Ts``);
    * a sequence of ``neo.SpikeTrain`` (a list, or ``neo.Segment.spiketrains``; labelled by
      ``name``, else ``annotations["unit_id"]``, else the position), times rescaled to
      seconds;
    * a ``pynapple.TsGroup`` (its keys as labels, each ``Ts``'s times in seconds);
    * a SpikeInterface ``BaseSorting`` of one segment (its unit ids; spike frames divided by
      the sampling frequency).

    Args:
        spikes: the container.
        unit_label: label each unit ``"{value}:{label}"`` by this metadata of the unit, as
            ``synfire mine --unit-label`` labels NWB units (``location`` gives ``adn:6``): a
            ``pynapple.TsGroup`` metadata column (``tsgroup.get_info(name)``), a SpikeInterface
            unit property (``sorting.get_property(name)``), a ``neo.SpikeTrain`` annotation.

    Returns:
        times (float64, ``[n]``), unit index (uint32, ``[n]``, into ``labels``), labels.

    Raises:
        ValueError: arrays of different lengths, non-1-D arrays, two units with one label, a
            sorting of several segments, a missing ``unit_label`` metadata, an unknown
            container.
    """
    # SpikeInterface sorting (duck-typed: no import of spikeinterface).
    if hasattr(spikes, "get_unit_ids") and hasattr(spikes, "get_unit_spike_train"):
        segments = int(spikes.get_num_segments()) if hasattr(spikes, "get_num_segments") else 1
        if segments != 1:
            raise ValueError(
                f"spikes: the sorting has {segments} segments; mine one at a time "
                "(spikeinterface.core.select_segment_sorting(sorting, i))")
        fs = float(spikes.get_sampling_frequency())
        ids = list(spikes.get_unit_ids())
        trains = {u: np.asarray(spikes.get_unit_spike_train(u, segment_index=0)) / fs
                  for u in ids}
        values = None
        if unit_label is not None:
            values = spikes.get_property(unit_label)
            if values is None:
                raise ValueError(
                    f"unit_label: the sorting has no unit property {unit_label!r} (it has "
                    f"{list(spikes.get_property_keys())})")
        return _from_mapping(trains, values)
    # pynapple TsGroup: a mapping of Ts objects (`.t`, seconds) with metadata columns.
    if isinstance(spikes, Mapping) and callable(getattr(spikes, "get_info", None)):
        trains = {k: np.asarray(spikes[k].t) for k in spikes.keys()}
        values = None
        if unit_label is not None:
            columns = list(getattr(spikes, "metadata_columns", []) or [])
            if columns and unit_label not in columns:
                raise ValueError(f"unit_label: the TsGroup has no metadata column "
                                 f"{unit_label!r} (it has {columns})")
            try:
                values = list(spikes.get_info(unit_label))
            except Exception as e:  # pynapple raises its own errors for a missing column
                raise ValueError(f"unit_label: the TsGroup has no metadata column "
                                 f"{unit_label!r}: {e}") from None
        return _from_mapping(trains, values)
    if isinstance(spikes, Mapping):
        if unit_label is not None:
            raise ValueError("unit_label: a {unit: times} mapping has no unit metadata; "
                             "label the keys instead")
        return _from_mapping({k: _train_times(v) for k, v in spikes.items()})
    if isinstance(spikes, tuple) and len(spikes) in (2, 3) and unit_label is not None:
        raise ValueError("unit_label: arrays have no unit metadata; label the unit ids instead")
    if isinstance(spikes, tuple) and len(spikes) == 3:
        # What read_spikes returns: times, unit index, labels.
        times = np.asarray(spikes[0], dtype=np.float64)
        index = np.asarray(spikes[1], dtype=np.uint32)
        if times.ndim != 1 or index.shape != times.shape:
            raise ValueError("spikes: (times_s, unit_index, labels) needs two 1-D arrays of one "
                             f"length, got shapes {times.shape} and {index.shape}")
        return times, index, [str(x) for x in spikes[2]]
    if isinstance(spikes, tuple) and len(spikes) == 2:
        times = np.asarray(spikes[0], dtype=np.float64)
        ids = np.asarray(spikes[1])
        if times.ndim != 1 or ids.ndim != 1 or len(times) != len(ids):
            raise ValueError(
                f"spikes: (times_s, unit_ids) must be two 1-D arrays of one length, got shapes "
                f"{times.shape} and {ids.shape}")
        # Units numbered by first appearance, as the CSV reader does (the numbering decides
        # the order of equal times and the surrogates' random streams).
        uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty(len(order), dtype=np.uint32)
        rank[order] = np.arange(len(order), dtype=np.uint32)
        return times, rank[inverse.ravel()], [str(u) for u in uniq[order]]
    # A sequence of neo.SpikeTrain (a list, a tuple, neo's SpikeTrainList).
    if not isinstance(spikes, (str, bytes, np.ndarray)) and hasattr(spikes, "__iter__"):
        items = list(spikes)
        if items and all(hasattr(s, "rescale") and hasattr(s, "magnitude") for s in items):
            trains, values = {}, []
            for i, st in enumerate(items):
                annotations = getattr(st, "annotations", {}) or {}
                name = getattr(st, "name", None) or annotations.get("unit_id", i)
                if str(name) in trains:
                    raise ValueError(f"spikes: two spike trains are named {str(name)!r}")
                trains[str(name)] = _train_times(st)
                if unit_label is not None:
                    if unit_label not in annotations:
                        raise ValueError(f"unit_label: spike train {str(name)!r} has no "
                                         f"annotation {unit_label!r}")
                    values.append(annotations[unit_label])
            return _from_mapping(trains, values if unit_label is not None else None)
    raise ValueError(
        "spikes: expected a path, (times_s, unit_ids) arrays, a {unit: times_s} mapping, a list "
        f"of neo.SpikeTrain, a pynapple.TsGroup or a SpikeInterface sorting, got {type(spikes)!r}")


def _train_times(train: Any) -> np.ndarray:
    """One unit's spike times in seconds: a ``neo.SpikeTrain`` (rescaled), a ``pynapple.Ts``
    (``.t``) or an array of seconds."""
    if hasattr(train, "rescale") and hasattr(train, "magnitude"):
        return np.asarray(train.rescale("s").magnitude, dtype=np.float64).ravel()
    if hasattr(train, "t") and not isinstance(train, np.ndarray):
        return np.asarray(train.t, dtype=np.float64).ravel()
    return np.asarray(train, dtype=np.float64).ravel()


def motif(x: Any, m: int, top_k: int = 1, exclusion: int | None = None,
          device: str = "auto") -> pd.DataFrame:
    """The exact top-k motifs of a series (``synfire motif``): the pairs of subsequences of
    length ``m`` with the smallest z-normalised Euclidean distance, non-overlapping.

    Args:
        x: the series, 1-D (``[n]`` samples; converted to float64).
        m: subsequence length, samples (≥ 2).
        top_k: how many motifs (≥ 1).
        exclusion: pairs need ``j - i > exclusion`` (default ``ceil(m / 4)``).
        device: ``"auto"``, ``"cpu"`` or ``"gpu"``.

    Returns:
        A frame with columns ``i``, ``j`` (0-based starts, ``i < j``) and ``distance``, best
        first; ``.attrs`` holds ``method`` (the exact path that found it) and ``device``.
        Source: Mueen et al., "Exact discovery of time series motifs" (SDM 2009), and the
        matrix profile (Yeh et al. 2016); results equal brute force.

    Raises:
        ValueError: ``m`` or ``top_k`` out of range, a series too short, a bad device name.
        SynfireError: ``device="gpu"`` without a usable GPU.
    """
    arr = np.ascontiguousarray(np.asarray(x, dtype=np.float64).ravel())
    pairs, method, dev = _synfire.motif(arr, int(m), int(top_k), exclusion, device)
    frame = pd.DataFrame(pairs, columns=["i", "j", "distance"])
    frame.attrs.update(method=method, device=dev)
    return frame


def _reader(units: Sequence[str] | str | None, sample_rate_hz: float | None,
            time_column: str | None, unit_column: str | None, sort: bool,
            unit_key: str | None = None, unit_label: str | None = None,
            epochs: Sequence[str] | str | None = None, epochs_table: str | None = None) -> str:
    """The reader options as the extension reads them (JSON)."""
    if isinstance(units, str):
        units = [u.strip() for u in units.split(",")]
    if isinstance(epochs, str):
        epochs = [e.strip() for e in epochs.split(",")]
    if epochs_table is not None and epochs is None:
        raise ValueError("epochs_table: names the table `epochs` reads; give `epochs` too")
    options = {
        "units": list(units) if units is not None else None,
        "sample_rate_hz": float(sample_rate_hz) if sample_rate_hz is not None else None,
        "time_column": time_column,
        "unit_column": unit_column,
        "sort": bool(sort),
        "unit_label": unit_label,
        "epochs": list(epochs) if epochs is not None else None,
        "epochs_table": epochs_table,
    }
    if unit_key is not None:
        options["unit_key"] = unit_key
    return json.dumps(options)


def read_spikes(
    path: str | os.PathLike,
    *,
    units: Sequence[str] | str | None = None,
    sample_rate_hz: float | None = None,
    time_column: str | None = None,
    unit_column: str | None = None,
    sort: bool = False,
    unit_key: str | None = None,
    unit_label: str | None = None,
    epochs: Sequence[str] | str | None = None,
    epochs_table: str | None = None,
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Reads spikes as ``synfire mine`` reads them, without h5py, pynwb or phylib: an NWB
    units table (``/units/id``, ``spike_times``, ``spike_times_index``), a CSV
    (``label,time`` lines, or columns named by a header such as ``spike_time_s,cluster_id``),
    a phy/Kilosort folder (``spike_times.npy`` in samples, ``spike_clusters.npy`` or
    ``spike_templates.npy``, ``params.py``'s ``sample_rate``, the cluster groups), or an
    Open Ephys binary recording (``structure.oebin`` and its spike ``.npy`` arrays).

    Args:
        path: the file, the phy/Kilosort folder, or the Open Ephys ``structure.oebin`` (or a
            recording, experiment or Record Node folder holding exactly one recording).
        units: phy: keep the clusters of these groups (``"good"``, ``["good", "mua"]``);
            Open Ephys: ``"sorted"`` (sorted id not 0) or ``"unsorted"`` (sorted id 0); the
            spikes left out are logged, never silently lost.
        unit_key: Open Ephys only: unit names, ``"electrode_sorted_id"`` (default,
            ``"Electrode 1/0"``), ``"electrode"`` or ``"full"`` (``"stream/electrode/id"``),
            as the live Open Ephys source names them.
        unit_label: NWB only: label each unit ``"{value}:{id}"`` by this column of the units
            table (``"location"`` gives ``"adn:6"``), as ``--unit-label``.
        epochs: NWB only: keep the spikes inside the epochs with these tags (rows of
            ``/intervals/epochs``, or of ``epochs_table``; ``"*"`` every row), e.g.
            ``"wake"``, as ``--epochs``.
        epochs_table: NWB only: the ``TimeIntervals`` table under ``/intervals/`` that
            ``epochs`` reads (default ``epochs``; e.g. ``"trials"`` with ``epochs="*"``).
        sample_rate_hz: phy only: the sampling rate (Hz) when ``params.py`` lacks it.
        time_column, unit_column: CSV only: the header names of the time (seconds) and unit
            columns.
        sort: sort unsorted input by time instead of refusing it.

    Returns:
        times (seconds, float64, ``[n]``, time order), each spike's unit index (uint32,
        ``[n]``), the units' labels (NWB: the decimal unit ids; CSV: the labels; phy: the
        cluster ids, ascending).

    Raises:
        FileNotFoundError: the path does not exist.
        SynfireError: the input cannot be read (the message names the file and the dataset,
            line or field), looks wrong (a CSV whose unit labels look like spike times), or
            an option its format has no use for (``unit_label`` for a CSV, say).
        ValueError: a malformed option.
    """
    reader = _reader(units, sample_rate_hz, time_column, unit_column, sort, unit_key,
                     unit_label, epochs, epochs_table)
    times, index, labels = _synfire.read_spikes(os.fspath(path), reader)
    return times, index, labels


def _from_mapping(trains: Mapping[Any, Iterable[float]], values: Sequence[Any] | None = None
                  ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(times, unit index, labels)`` of ``{unit: times_s}``; with ``values`` (one per unit,
    in order) the labels are ``"{value}:{unit}"``."""
    labels = [str(k) for k in trains]
    if values is not None:
        values = list(values)
        if len(values) != len(labels):
            raise ValueError(f"unit_label: {len(values)} values for {len(labels)} units")
        labels = [f"{v}:{k}" for v, k in zip(values, labels)]
    if len(set(labels)) != len(labels):
        raise ValueError("spikes: two units have the same label")
    arrays = [np.asarray(v, dtype=np.float64).ravel() for v in trains.values()]
    times = np.concatenate(arrays) if arrays else np.empty(0)
    index = np.concatenate([np.full(len(a), i, dtype=np.uint32) for i, a in enumerate(arrays)]) \
        if arrays else np.empty(0, dtype=np.uint32)
    return times, index, labels


def _interval(iv: Any) -> Any:
    """An interval as MiningOptions reads it: ``(low, high)`` numbers (meaning ``(low,
    high]``) or the notation ``"[0,0.001]"`` / ``"(0.004,0.006]"``."""
    if isinstance(iv, str):
        return iv
    low, high = iv
    return [float(low), float(high)]


ProgressArg = Union[bool, None, Callable[[int, int, int], Any]]


class _StderrProgress:
    """The command line's progress bar as one line on standard error, redrawn in place:
    ``  level 3 [00:00:12] ########---------- 12345/67890 candidates``, cleared at the end."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.drawn = False

    def __call__(self, level: int, done: int, total: int) -> None:
        elapsed = int(time.monotonic() - self.started)
        clock = f"{elapsed // 3600:02}:{elapsed // 60 % 60:02}:{elapsed % 60:02}"
        width = 30
        filled = width * done // total if total else width
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r{'level ' + str(level):>9} [{clock}] {bar} {done}/{total} "
                         "candidates\x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _progress(progress: ProgressArg) -> Callable[[int, int, int], Any] | None:
    """The callable :func:`mine` reports to: ``progress`` itself, a bar on standard error
    (True, or None when standard error is a terminal, as the command line), or none."""
    if callable(progress):
        return progress
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    if progress is True:
        return _StderrProgress()
    if progress is False:
        return None
    raise ValueError(f"progress: expected True, False, None or a callable, got {progress!r}")


def mine(
    spikes: Any,
    intervals: Sequence[Any],
    *,
    min_count: int | None = None,
    support: float | None = None,
    support_per: str = "events",
    max_level: int = 10,
    one_pass: bool = False,
    bounds: bool = True,
    max_candidates: int | None = None,
    time_budget_s: float | None = None,
    device: str = "auto",
    gpus: Sequence[int] | None = None,
    exact_kernel: str = "hybrid",
    calibration: str | os.PathLike | None = None,
    sample_rate_hz: float | None = None,
    significance: Mapping[str, Any] | None = None,
    occurrences: bool = False,
    progress: ProgressArg = None,
    unit_label: str | None = None,
    epochs: Sequence[str] | str | None = None,
    epochs_table: str | None = None,
    units: Sequence[str] | str | None = None,
    time_column: str | None = None,
    unit_column: str | None = None,
    sort: bool = False,
) -> MiningResult:
    """Mines the frequent serial episodes of ``spikes`` (``synfire mine``, same options and
    defaults).

    The work runs on a thread of its own with the GIL released (other Python threads go on);
    Ctrl-C raises ``KeyboardInterrupt`` within about 0.1 s and stops the mining at its next
    batch of candidates, or a significance test under way at its next surrogate or batch;
    a later call is unaffected.

    Args:
        spikes: a path to an NWB units table, a CSV, a phy/Kilosort folder or an Open Ephys
            recording (as :func:`read_spikes`), or any container :func:`spike_arrays` accepts:
            ``(times_s, unit_ids)`` arrays, a ``{unit: times_s}`` dict, a list of
            ``neo.SpikeTrain``, a ``pynapple.TsGroup``, a SpikeInterface sorting.
        intervals: the delay intervals between consecutive spikes of an episode, each
            ``(low, high)`` in seconds meaning ``(low, high]``, or the notation
            ``"(low,high]"`` / ``"[low,high]"`` (``"[0,0.001]"`` admits simultaneous spikes:
            lag-0 synchrony). With ``sample_rate_hz`` the bounds are whole samples.
        min_count: minimum number of non-overlapped occurrences.
        support: support threshold: a fraction of the events (default 0.001), or with
            ``support_per="seconds"`` occurrences per second.
        support_per: ``"events"`` or ``"seconds"``.
        max_level: largest episode size N.
        one_pass, bounds, max_candidates, time_budget_s, device, gpus, exact_kernel,
            calibration: as the command line's ``--one-pass``, ``--no-bounds`` (False),
            ``--max-candidates``, ``--time-budget-s``, ``--device auto|cpu|gpu``, ``--gpus``,
            ``--exact-kernel``, ``--calibration``.
        sample_rate_hz: read ``intervals`` in whole samples of this clock (for a phy folder
            without ``params.py`` also its sampling rate).
        significance: test the episodes against surrogates: a dict with ``surrogates``
            (``"dither:0.015"``, ...) and optionally ``n_surrogates`` (default 19), ``alpha``,
            ``correction`` (``"max-t"``, ...), ``seed``, ``test_top``, ``significant_only``,
            ``sample_split`` (a fraction in (0, 1): ``max-t`` with the family selected on
            that leading part of the recording and tested on the rest, as
            ``--sample-split``).
        occurrences: also return every listed episode's non-overlapped occurrences
            (:attr:`MiningResult.occurrences`; ``--occurrences``).
        progress: the levels' progress, as the command line's bar: None (default) draws it
            on standard error when that is a terminal; True always, False never; a callable
            is called ``progress(level, done, total)`` on the calling thread (candidates of
            the level dealt with so far, of ``total``) at each level's start and end and
            about every 50 ms between; ``(level, done)`` only increases. An exception it
            raises stops the run and propagates.
        unit_label: label each unit ``"{value}:{unit}"`` by this metadata, as
            ``--unit-label``: a column of an NWB file's units table (``"location"`` gives
            ``"adn:6"``), a ``pynapple.TsGroup`` metadata column, a SpikeInterface unit
            property or a ``neo.SpikeTrain`` annotation.
        epochs, epochs_table: NWB paths only: mine the spikes inside these epochs (as
            ``--epochs`` / ``--epochs-table``; :func:`read_spikes`).
        units, time_column, unit_column, sort: how a path is read (:func:`read_spikes`).

    Returns:
        A :class:`MiningResult`; ``.episodes`` is a pandas DataFrame.

    Raises:
        ValueError: a bad option (named as on the command line) or bad spikes.
        FileNotFoundError: a path that does not exist.
        SynfireError: a device failure, an unreadable file, an option the file's format has
            no use for.
        KeyboardInterrupt: Ctrl-C during the call.
    """
    specs = [_interval(iv) for iv in intervals]
    options: dict[str, Any] = {
        "min_count": min_count,
        "support": support,
        "support_per": support_per,
        "max_level": max_level,
        "one_pass": one_pass,
        "bounds": bounds,
        "max_candidates": max_candidates,
        "time_budget_s": time_budget_s,
        "device": device,
        "gpus": list(gpus) if gpus is not None else None,
        "exact_kernel": exact_kernel,
        "calibration": os.fspath(calibration) if calibration is not None else None,
        "significance": dict(significance) if significance is not None else None,
    }
    if sample_rate_hz is not None:
        options["intervals_samples"] = specs
        options["sample_rate_hz"] = float(sample_rate_hz)
    else:
        options["intervals_s"] = specs
    options_json = json.dumps(options)
    report = _progress(progress)
    try:
        if isinstance(spikes, (str, os.PathLike)):
            reader = _reader(units, sample_rate_hz, time_column, unit_column, sort,
                             unit_label=unit_label, epochs=epochs, epochs_table=epochs_table)
            text, cols, occ = _synfire.mine_file(os.fspath(spikes), options_json, reader,
                                                 report, bool(occurrences))
        else:
            if epochs is not None or epochs_table is not None:
                raise ValueError("epochs: read NWB files' epoch tables; select the spikes of "
                                 "a container before mining it")
            times, index, labels = spike_arrays(spikes, unit_label=unit_label)
            text, cols, occ = _synfire.mine_arrays(np.ascontiguousarray(times, dtype=np.float64),
                                                   np.ascontiguousarray(index, dtype=np.uint32),
                                                   labels, options_json, report,
                                                   bool(occurrences))
    finally:
        if isinstance(report, _StderrProgress):
            report.close()
    return _result(json.loads(text), cols, occ)


def gpus() -> list[dict]:
    """The GPUs synfire can use here (``device="gpu"``): one dict each, ``ordinal``,
    ``name``, ``compute_capability`` ``(major, minor)``, ``multiprocessors``,
    ``total_memory`` (bytes), ``driver_version``. The CUDA driver is loaded at run time, as
    the command line loads it; the package links no CUDA library.

    Raises:
        SynfireError: none is usable; the message says why (no driver library, no device).
    """
    return _synfire.gpus()


def gpu_available() -> bool:
    """Whether :func:`gpus` finds a usable GPU (``device="auto"`` would take it)."""
    try:
        return len(gpus()) > 0
    except SynfireError:
        return False


def _result(doc: dict, cols: dict, occ: dict | None = None) -> MiningResult:
    """The result from the document (without its episodes), the episodes' columns and the
    occurrences' columns."""
    names = cols["type_labels"]
    notation = doc["params"]["interval_notation"]
    bounds = [tuple(b) for b in doc["params"]["intervals"]]
    lengths = cols["lengths"].tolist()
    types = cols["types"].tolist()
    gaps = cols["intervals"].tolist()
    labels, ivs_s, ivs = [], [], []
    t = g = 0
    for n in lengths:
        labels.append(tuple(names[k] for k in types[t:t + n]))
        idx = gaps[g:g + n - 1]
        ivs_s.append(tuple(bounds[i] for i in idx))
        ivs.append(tuple(notation[i] for i in idx))
        t += n
        g += n - 1
    columns: dict[str, Any] = {
        "labels": labels,
        "intervals_s": ivs_s,
        "intervals": ivs,
        "count": cols["count"].astype(np.int64),
    }
    if doc.get("significance") is not None:
        tested = cols["tested"]
        for c in _TEST_COLUMNS[:-1]:
            columns[c] = cols[c]
        significant = pd.array(cols["significant"], dtype="boolean")
        significant[~tested] = pd.NA
        columns["significant"] = significant
        if doc["significance"].get("sample_split") is not None:
            columns["test_count"] = pd.Series(cols["test_count"]).astype("Int64").array
    episodes = pd.DataFrame(columns)
    levels = pd.DataFrame(doc["levels"])
    occurrences = None
    if occ is not None:
        occurrences = pd.DataFrame({
            "episode": occ["episode"].astype(np.int64),
            "occurrence": occ["occurrence"].astype(np.int64),
            "node": occ["node"].astype(np.int64),
            "unit": pd.Categorical.from_codes(occ["unit"].astype(np.int64),
                                              categories=list(names)),
            "time_s": occ["time_s"],
        })
    return MiningResult(
        episodes=episodes,
        levels=levels,
        min_count=int(doc["params"]["min_count"]),
        params=doc["params"],
        significance=doc.get("significance"),
        truncated=doc.get("truncated"),
        document=doc,
        occurrences=occurrences,
    )
