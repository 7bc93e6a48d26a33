from dataclasses import dataclass
from os import PathLike
from typing import Any, Mapping, Sequence

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

def motif(x: Any, m: int, top_k: int = ..., exclusion: int | None = ..., device: str = ...) -> pd.DataFrame: ...
def read_spikes(
    path: str | PathLike,
    *,
    units: Sequence[str] | str | None = ...,
    sample_rate_hz: float | None = ...,
    time_column: str | None = ...,
    unit_column: str | None = ...,
    sort: bool = ...,
) -> tuple[np.ndarray, np.ndarray, list[str]]: ...
def spike_arrays(spikes: Any) -> tuple[np.ndarray, np.ndarray, list[str]]: ...
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
    units: Sequence[str] | str | None = ...,
    time_column: str | None = ...,
    unit_column: str | None = ...,
    sort: bool = ...,
) -> MiningResult: ...
