"""The options as the extension reads them (private): intervals, the reader options and the
mining options, each as JSON, built here once for :func:`synfire.mine` and
:mod:`synfire.cluster`."""

from __future__ import annotations

import json
from typing import Any, Sequence


def interval(iv: Any) -> Any:
    """An interval as MiningOptions reads it: ``(low, high)`` numbers (meaning ``(low,
    high]``) or the notation ``"[0,0.001]"`` / ``"(0.004,0.006]"``."""
    if isinstance(iv, str):
        return iv
    low, high = iv
    return [float(low), float(high)]


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
