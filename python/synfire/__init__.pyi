from dataclasses import dataclass
from os import PathLike
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np
import pandas as pd

from ._synfire import SynfireError as SynfireError

__version__: str

@dataclass
class MiningResult:
    episodes: pd.DataFrame
    levels: pd.DataFrame
    min_count: int
    params: dict
    significance: dict | None
    truncated: dict | None
    document: dict
    occurrences: pd.DataFrame | None = ...

ProgressArg = Union[bool, None, Callable[[int, int, int], Any]]

def gpus() -> list[dict[str, Any]]: ...
def gpu_available() -> bool: ...
def motif(x: Any, m: int, top_k: int = ..., exclusion: int | None = ..., device: str = ...) -> pd.DataFrame: ...
def read_spikes(
    path: str | PathLike,
    *,
    units: Sequence[str] | str | None = ...,
    sample_rate_hz: float | None = ...,
    time_column: str | None = ...,
    unit_column: str | None = ...,
    sort: bool = ...,
    unit_key: str | None = ...,
    unit_label: str | None = ...,
    epochs: Sequence[str] | str | None = ...,
    epochs_table: str | None = ...,
) -> tuple[np.ndarray, np.ndarray, list[str]]: ...
def spike_arrays(
    spikes: Any, unit_label: str | None = ...
) -> tuple[np.ndarray, np.ndarray, list[str]]: ...
def mine(
    spikes: Any,
    intervals: Sequence[Any],
    *,
    min_count: int | None = ...,
    support: float | None = ...,
    support_per: str = ...,
    max_level: int = ...,
    one_pass: bool = ...,
    bounds: bool = ...,
    max_candidates: int | None = ...,
    time_budget_s: float | None = ...,
    device: str = ...,
    gpus: Sequence[int] | None = ...,
    exact_kernel: str = ...,
    calibration: str | PathLike | None = ...,
    sample_rate_hz: float | None = ...,
    significance: Mapping[str, Any] | None = ...,
    occurrences: bool = ...,
    progress: ProgressArg = ...,
    unit_label: str | None = ...,
    epochs: Sequence[str] | str | None = ...,
    epochs_table: str | None = ...,
    units: Sequence[str] | str | None = ...,
    time_column: str | None = ...,
    unit_column: str | None = ...,
    sort: bool = ...,
) -> MiningResult: ...

def softdtw(
    X: Any,
    Y: Any | None = ...,
    *,
    gamma: float = ...,
    band: int | None = ...,
    divergence: bool = ...,
    gradient: bool = ...,
    device: str = ...,
) -> np.ndarray | tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]: ...
def barycenter(
    X: Any,
    *,
    gamma: float = ...,
    band: int | None = ...,
    weights: Sequence[float] | None = ...,
    init: str = ...,
    max_iterations: int = ...,
    device: str = ...,
) -> tuple[np.ndarray, dict]: ...

class Index:
    @classmethod
    def build(cls, series: Any, *, leaf_capacity: int = ...) -> Index: ...
    @classmethod
    def load(cls, path: str | PathLike) -> Index: ...
    def save(self, path: str | PathLike) -> None: ...
    def __len__(self) -> int: ...
    @property
    def series_length(self) -> int: ...
    def query(self, q: Any, k: int = ..., *, device: str = ...) -> tuple[np.ndarray, np.ndarray]: ...
    def query_batch(self, qs: Any, k: int = ..., *, device: str = ...) -> tuple[np.ndarray, np.ndarray]: ...

class ShapeletClassifier:
    min_length: int
    max_length: int | None
    step: int
    max_terms: int
    max_depth: int | None
    device: str
    classes_: np.ndarray
    def __init__(
        self,
        min_length: int = ...,
        max_length: int | None = ...,
        step: int = ...,
        max_terms: int = ...,
        max_depth: int | None = ...,
        device: str = ...,
    ) -> None: ...
    def get_params(self, deep: bool = ...) -> dict: ...
    def set_params(self, **params: Any) -> ShapeletClassifier: ...
    def fit(self, X: Any, y: Sequence[Any]) -> ShapeletClassifier: ...
    def predict(self, X: Any) -> np.ndarray: ...
    def score(self, X: Any, y: Sequence[Any]) -> float: ...
