"""What mining returns (private): :class:`MiningResult` and its making from the extension's
document and columns, shared by :func:`synfire.mine` and :mod:`synfire.cluster`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd


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


def result_of(doc: dict, cols: dict, occ: dict | None = None) -> MiningResult:
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
