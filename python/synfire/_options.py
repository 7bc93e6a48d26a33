"""The options as the extension reads them (private), built here once for :func:`synfire.mine`
and :mod:`synfire.cluster`: the mining options (JSON, :func:`mining_json`) and the reader
options (JSON, :func:`reader_json`), every default taken from the extension
(``synfire._synfire.defaults()``: the library's, which the command line's flags take too)."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping, Sequence

from . import _synfire

#: Every default, as the library defines it (``src/python/defaults.rs``): ``mining`` (each
#: mining option), ``significance`` (each option of ``significance=`` but ``surrogates``: those
#: of ``synfire mine --surrogates``), ``window_n_surrogates``, ``surrogate_method``.
DEFAULTS: dict[str, Any] = _synfire.defaults()
#: The mining options' defaults (``max_level``: 10, ``device``: ``"auto"``, ...).
MINING: dict[str, Any] = DEFAULTS["mining"]
#: The significance options' defaults (``n_surrogates``: 200, ``alpha``: 0.05, ...).
SIGNIFICANCE: dict[str, Any] = DEFAULTS["significance"]

#: The keywords of :func:`synfire.mine` that go into the mining options (``sample_rate_hz``
#: goes into both; the intervals are an argument of their own).
MINING_KEYS = ("min_count", "support", "support_per", "max_level", "one_pass", "bounds",
               "max_candidates", "time_budget_s", "device", "gpus", "exact_kernel",
               "calibration", "significance")
#: The keywords of :func:`synfire.mine` that say how a path is read.
READER_KEYS = ("units", "time_column", "unit_column", "sort", "unit_key", "unit_label",
               "epochs", "epochs_table")


def interval(iv: Any) -> Any:
    """An interval as MiningOptions reads it: ``(low, high)`` numbers (meaning ``(low,
    high]``) or the notation ``"[0,0.001]"`` / ``"(0.004,0.006]"``."""
    if isinstance(iv, str):
        return iv
    low, high = iv
    return [float(low), float(high)]


def significance_options(given: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``significance=`` dict with every option it leaves out at its default
    (:data:`SIGNIFICANCE`: 200 surrogates, as ``synfire mine --n-surrogates``), or None."""
    if given is None:
        return None
    return {**SIGNIFICANCE, **dict(given)}


def mining_json(intervals: Sequence[Any], sample_rate_hz: float | None,
                options: Mapping[str, Any]) -> str:
    """The mining options as the extension reads them (JSON): the intervals (in seconds, or
    in samples with ``sample_rate_hz``) and each of :data:`MINING_KEYS` from ``options``, at
    its default (:data:`MINING`) where absent or None; reader keys in ``options`` are left
    for :func:`reader_options_json`.

    Raises:
        TypeError: a key that is neither a mining nor a reader option (named).
        ValueError: an interval that is not a pair or a string.
    """
    unknown = sorted(set(options) - set(MINING_KEYS) - set(READER_KEYS))
    if unknown:
        raise TypeError(f"unknown option(s) of synfire.mine: {', '.join(unknown)}")
    specs = [interval(iv) for iv in intervals]
    out: dict[str, Any] = {}
    for k in MINING_KEYS:
        v = options.get(k)
        if v is None:
            v = MINING[k]
        elif k == "gpus":
            v = list(v)
        elif k == "calibration":
            v = os.fspath(v)
        elif k == "significance":
            v = significance_options(v)
        out[k] = v
    if sample_rate_hz is not None:
        out["intervals_samples"] = specs
        out["sample_rate_hz"] = float(sample_rate_hz)
    else:
        out["intervals_s"] = specs
    return json.dumps(out)


def reader_options_json(sample_rate_hz: float | None, options: Mapping[str, Any]) -> str:
    """The reader options (JSON, :func:`reader_json`) of :data:`READER_KEYS` in ``options``
    (absent: their defaults)."""
    return reader_json(units=options.get("units"), sample_rate_hz=sample_rate_hz,
                       time_column=options.get("time_column"),
                       unit_column=options.get("unit_column"),
                       sort=bool(options.get("sort")), unit_key=options.get("unit_key"),
                       unit_label=options.get("unit_label"), epochs=options.get("epochs"),
                       epochs_table=options.get("epochs_table"))


def reader_json(units: Sequence[str] | str | None, sample_rate_hz: float | None,
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
