"""Spikes in: :func:`read_spikes` (a file or folder read as ``synfire mine`` reads it) and
:func:`spike_arrays` (a lab's spike container: arrays, a ``{unit: times}`` mapping, neo,
pynapple, SpikeInterface) as ``(times_s, unit_index, labels)``."""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import _synfire
from ._options import reader_json

__all__ = ["read_spikes", "spike_arrays"]


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
        unit_ids = list(spikes.get_unit_ids())
        trains = {u: np.asarray(spikes.get_unit_spike_train(u, segment_index=0)) / fs
                  for u in unit_ids}
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
                group: Any = spikes  # a TsGroup: a Mapping with metadata
                values = list(group.get_info(unit_label))
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
    reader = reader_json(units, sample_rate_hz, time_column, unit_column, sort, unit_key,
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
