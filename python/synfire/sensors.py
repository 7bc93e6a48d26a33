"""The sensor stages, numpy in and out: exact top-k motifs (a pandas frame), soft-DTW
(values, gradients, divergence), soft-DTW barycenters, the SING similarity-search index and
a shapelet-tree classifier with scikit-learn's conventions. Each runs on the CPU or a GPU
(``device="auto"|"cpu"|"gpu"``) as the command line does.

Long calls (:func:`motif`, :func:`softdtw`, :func:`barycenter`, :meth:`Index.build`,
:meth:`ShapeletClassifier.fit`) run on a thread of their own with the GIL released, and
Ctrl-C raises ``KeyboardInterrupt`` within about 0.1 s; the interrupted computation has no
cancellation hook, so it ends on its own thread, its result dropped, and a later call works
as usual."""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np
import pandas as pd

from . import _synfire

__all__ = ["motif", "softdtw", "barycenter", "Index", "ShapeletClassifier"]


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


def _series_list(x: Any, name: str) -> tuple[list[np.ndarray], int, list[tuple[int, ...]]]:
    """A collection as flattened float64 series: a 2-D array ``[B, N]`` (univariate), a 3-D
    array ``[B, N, D]``, or a sequence of ``[N]`` / ``[N, D]`` arrays (lengths may differ).
    Returns the flattened series, the channel count D and each series' shape."""
    if isinstance(x, np.ndarray) and x.ndim in (2, 3):
        items = list(x)
    elif isinstance(x, np.ndarray) and x.ndim == 1:
        items = [x]
    else:
        items = list(x)
    if not items:
        raise ValueError(f"{name}: no series")
    arrays = [np.asarray(s, dtype=np.float64) for s in items]
    dims = {1 if a.ndim == 1 else a.shape[1] for a in arrays}
    if any(a.ndim not in (1, 2) for a in arrays):
        raise ValueError(f"{name}: each series is [N] or [N, D]")
    if len(dims) != 1:
        raise ValueError(f"{name}: the series have different channel counts {sorted(dims)}")
    shapes = [a.shape for a in arrays]
    return [np.ascontiguousarray(a.ravel()) for a in arrays], dims.pop(), shapes


def softdtw(
    X: Any,
    Y: Any | None = None,
    *,
    gamma: float = 1.0,
    band: int | None = None,
    divergence: bool = False,
    gradient: bool = False,
    device: str = "auto",
) -> np.ndarray | tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Soft-DTW of every pair of ``X`` and ``Y`` (Cuturi & Blondel, ICML 2017, Eq. 1;
    ``divergence=True``: ``sdtw(x, y) − (sdtw(x, x) + sdtw(y, y)) / 2``, Blondel, Mensch &
    Vert, AISTATS 2021), as ``synfire softdtw``.

    Args:
        X, Y: collections of series: a ``[B, N]`` or ``[B, N, D]`` array or a list of ``[N]`` /
            ``[N, D]`` arrays (lengths may differ). ``Y`` defaults to ``X``.
        gamma: smoothing γ > 0 (squared units of the series).
        band: Sakoe-Chiba half-width in time steps of the longer series (None: no band).
        divergence: the soft-DTW divergence instead of the value.
        gradient: also return the gradients.
        device: ``"auto"``, ``"cpu"`` or ``"gpu"`` (the GPU computes in float32).

    Returns:
        ``values`` ``[len(X), len(Y)]``; with ``gradient``, ``(values, grad_X, grad_Y)`` where
        ``grad_X[i]`` is ∂(Σ_j values[i, j])/∂X[i] shaped like ``X[i]`` and ``grad_Y[j]`` is
        ∂(Σ_i values[i, j])/∂Y[j].

    Raises:
        ValueError: an empty or non-finite series, mismatched channels, γ ≤ 0, a band too
            narrow to reach the end cell (the message names ``a[i]`` / ``b[j]``: X and Y).
        SynfireError: a GPU failure with ``device="gpu"``.
    """
    a, dims, shapes_a = _series_list(X, "X")
    if Y is None:
        b, shapes_b = a, shapes_a
    else:
        b, dims_b, shapes_b = _series_list(Y, "Y")
        if dims_b != dims:
            raise ValueError(f"X has {dims} channels but Y has {dims_b}")
    values, grads = _synfire.softdtw(a, b, dims, float(gamma), band, divergence, gradient,
                                     device)
    if grads is None:
        return values
    ga, gb = grads
    return (values, [g.reshape(s) for g, s in zip(ga, shapes_a)],
            [g.reshape(s) for g, s in zip(gb, shapes_b)])


def barycenter(
    X: Any,
    *,
    gamma: float = 1.0,
    band: int | None = None,
    weights: Sequence[float] | None = None,
    init: str = "auto",
    max_iterations: int = 100,
    device: str = "auto",
) -> tuple[np.ndarray, dict]:
    """The soft-DTW barycenter of ``X`` (Cuturi & Blondel 2017, §4, Eq. 4: the series ``z``
    minimising ``Σ_k w_k sdtw_γ(z, x_k)``, by L-BFGS), as ``synfire barycenter``.

    Args:
        X: the series (as :func:`softdtw` takes them).
        gamma, band: as :func:`softdtw`.
        weights: one non-negative weight per series (default equal).
        init: ``"auto"`` (mean for equal lengths, else medoid), ``"mean"`` or ``"medoid"``.
        max_iterations: L-BFGS iterations at most.
        device: ``"auto"``, ``"cpu"`` or ``"gpu"`` (the objective's gradients on the GPU).

    Returns:
        ``(z, info)``: the barycenter, ``[L]`` or ``[L, D]`` (L: the start's length), and a dict
        with ``objective`` (per iteration, decreasing), ``iterations``, ``stop``,
        ``gradient_norm``, ``medoid`` (the start's index for a medoid start).

    Raises:
        ValueError: bad series, weights or options. SynfireError: a GPU failure.
    """
    a, dims, shapes = _series_list(X, "X")
    w = [float(v) for v in weights] if weights is not None else None
    z, info = _synfire.barycenter(a, dims, float(gamma), band, w, init, int(max_iterations),
                                  device)
    return (z if dims == 1 and len(shapes[0]) == 1 else z.reshape(-1, dims)), info


class Index:
    """A SING similarity-search index (an iSAX tree searched exactly, on the CPU or a GPU):
    the exact k nearest series of a query under the z-normalised Euclidean distance, as
    ``synfire search``.

    Build with :meth:`build`, or :meth:`load` one saved by :meth:`save` or ``synfire search
    build``."""

    def __init__(self, inner: Any):
        self._inner = inner

    @classmethod
    def build(cls, series: Any, *, leaf_capacity: int = 1024) -> "Index":
        """Indexes ``series`` (``[B, N]`` or a list of ``[N]`` arrays, one length; ids
        ``0..B``), each z-normalised.

        Raises:
            ValueError: an empty collection, ragged or non-finite series.
        """
        arrays, dims, _ = _series_list(series, "series")
        if dims != 1:
            raise ValueError("series: the index takes univariate series")
        return cls(_synfire.SingIndex.build(arrays, int(leaf_capacity)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Index":
        """Loads an index folder. Raises SynfireError / ValueError naming the file at fault."""
        return cls(_synfire.SingIndex.load(os.fspath(path)))

    def save(self, path: str | os.PathLike) -> None:
        """Saves the index to the folder ``path``."""
        self._inner.save(os.fspath(path))

    def __len__(self) -> int:
        return len(self._inner)

    @property
    def series_length(self) -> int:
        """Samples per series."""
        return self._inner.series_length

    def query(self, q: Any, k: int = 1, *, device: str = "auto") -> tuple[np.ndarray, np.ndarray]:
        """The exact ``k`` nearest series of ``q`` (``[N]``, z-normalised here).

        Returns:
            ``(ids, distances)``, nearest first (ties: smallest id), distances Euclidean
            between z-normalised series.
        """
        q = np.ascontiguousarray(np.asarray(q, dtype=np.float64).ravel())
        return self._inner.query(q, int(k), device)

    def query_batch(self, qs: Any, k: int = 1, *, device: str = "auto") -> tuple[np.ndarray, np.ndarray]:
        """The exact ``k`` nearest series of each row of ``qs`` (``[B, N]``, each z-normalised
        here), answered together: on a GPU the PAA bound of every (query, series) pair and
        exact distances of the survivors (the GPU holds the index's PAA array and, when they
        fit, its series, uploaded at the first batch of each call), on the CPU the queries in
        parallel. The answers equal ``query``'s for each row.

        Returns:
            ``(ids, distances)``, each ``[B, min(k, len(self))]``, nearest first (ties:
            smallest id).

        Raises:
            ValueError: ``qs`` not two-dimensional, a row of the wrong length or holding NaN,
            ``k = 0``.
        """
        qs = np.asarray(qs, dtype=np.float64)
        if qs.ndim != 2:
            raise ValueError(f"qs: expected a [B, N] array, got {qs.ndim} dimensions")
        return self._inner.query_batch(np.ascontiguousarray(qs), int(k), device)


class ShapeletClassifier:
    """A shapelet-tree classifier (Ye & Keogh, KDD 2009; logical shapelets with
    ``max_terms > 1``, Mueen, Keogh & Young, KDD 2011) with scikit-learn's conventions:
    ``fit``, ``predict``, ``score``, ``get_params``, ``set_params``, ``classes_``. Usable in
    scikit-learn pipelines and grid searches without depending on scikit-learn.

    Args:
        min_length, max_length: candidate shapelet lengths, samples (``max_length`` ≤ the
            series length; None: the series length).
        step: length step.
        max_terms: shapelets per rule (1: plain shapelets).
        max_depth: deepest split level (None: until pure).
        device: ``"auto"``, ``"cpu"`` or ``"gpu"`` for training.
    """

    def __init__(self, min_length: int = 3, max_length: int | None = None, step: int = 1,
                 max_terms: int = 1, max_depth: int | None = None, device: str = "auto"):
        self.min_length = min_length
        self.max_length = max_length
        self.step = step
        self.max_terms = max_terms
        self.max_depth = max_depth
        self.device = device

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters (scikit-learn's convention)."""
        return {k: getattr(self, k) for k in
                ("min_length", "max_length", "step", "max_terms", "max_depth", "device")}

    def set_params(self, **params: Any) -> "ShapeletClassifier":
        """Sets constructor parameters; unknown names are a ValueError."""
        for k, v in params.items():
            if k not in self.get_params():
                raise ValueError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    @staticmethod
    def _rows(X: Any) -> list[list[float]]:
        arrays, dims, _ = _series_list(X, "X")
        if dims != 1:
            raise ValueError("X: shapelets take univariate series")
        return [a.tolist() for a in arrays]

    def fit(self, X: Any, y: Sequence[Any]) -> "ShapeletClassifier":
        """Trains the tree on ``X`` (``[B, N]``) with labels ``y`` (``[B]``, any hashable;
        compared as text)."""
        rows = self._rows(X)
        labels = [str(v) for v in y]
        self._label_of = {str(v): v for v in y}
        max_length = self.max_length if self.max_length is not None else len(rows[0])
        self.model_ = _synfire.shapelet_fit(rows, labels, int(self.min_length), int(max_length),
                                            int(self.step), int(self.max_terms), self.max_depth,
                                            self.device)
        self.classes_ = np.array(sorted(self._label_of.values(), key=str), dtype=object)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The predicted label of each series of ``X``."""
        if not hasattr(self, "model_"):
            raise ValueError("this ShapeletClassifier is not fitted yet; call fit first")
        labels = _synfire.shapelet_predict(self.model_, self._rows(X))
        return np.array([self._label_of[l] for l in labels], dtype=object)

    def score(self, X: Any, y: Sequence[Any]) -> float:
        """Accuracy of :meth:`predict` on ``X`` against ``y``."""
        pred = self.predict(X)
        return float(np.mean([str(p) == str(t) for p, t in zip(pred, y)]))
