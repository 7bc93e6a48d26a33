"""Mining (private; :mod:`synfire` re-exports it): :func:`mine` with its progress bar, and
:func:`gpus` / :func:`gpu_available`."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np

from . import _synfire
from ._io import spike_arrays
from ._options import MINING, mining_json, reader_options_json
from ._results import MiningResult, result_of
from ._synfire import SynfireError

__all__ = ["mine", "gpus", "gpu_available", "ProgressArg"]


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
    min_count: int | None = MINING["min_count"],
    support: float | None = MINING["support"],
    support_per: str = MINING["support_per"],
    max_level: int = MINING["max_level"],
    one_pass: bool = MINING["one_pass"],
    bounds: bool = MINING["bounds"],
    max_candidates: int | None = MINING["max_candidates"],
    time_budget_s: float | None = MINING["time_budget_s"],
    device: str = MINING["device"],
    gpus: Sequence[int] | None = MINING["gpus"],
    exact_kernel: str = MINING["exact_kernel"],
    calibration: str | os.PathLike | None = MINING["calibration"],
    sample_rate_hz: float | None = MINING["sample_rate_hz"],
    significance: Mapping[str, Any] | None = MINING["significance"],
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
    defaults: each keyword's default is the library's, ``synfire._synfire.defaults()``, which
    the command line's flags read too).

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
            (``"dither:0.015"``, ...) and optionally ``n_surrogates`` (default 200, as
            ``--n-surrogates``; 19 before issue 44), ``alpha`` (0.05), ``correction``
            (``"max-t"``, ...), ``seed`` (0), ``test_top``, ``significant_only``,
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
    options_json = mining_json(intervals, sample_rate_hz, {
        "min_count": min_count, "support": support, "support_per": support_per,
        "max_level": max_level, "one_pass": one_pass, "bounds": bounds,
        "max_candidates": max_candidates, "time_budget_s": time_budget_s, "device": device,
        "gpus": gpus, "exact_kernel": exact_kernel, "calibration": calibration,
        "significance": significance,
    })
    report = _progress(progress)
    try:
        if isinstance(spikes, (str, os.PathLike)):
            reader = reader_options_json(sample_rate_hz, {
                "units": units, "time_column": time_column, "unit_column": unit_column,
                "sort": sort, "unit_label": unit_label, "epochs": epochs,
                "epochs_table": epochs_table,
            })
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
    return result_of(json.loads(text), cols, occ)


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
