"""Type stubs of the extension module (src/python.rs). Use the functions of `synfire`."""

from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

class SynfireError(Exception):
    """A synfire failure that is not a bad argument: a device, a file that cannot be read."""

def motif(
    x: npt.NDArray[np.float64], m: int, top_k: int = ..., exclusion: int | None = ...,
    device: str = ...,
) -> tuple[list[tuple[int, int, float]], str, str]:
    """Exact top-k motifs: ([(i, j, distance)], method, device)."""

def read_spikes(
    path: str, reader_json: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.uint32], list[str]]:
    """Reads a spike file or phy folder with the reader options (JSON): times (s, [n]),
    unit index ([n]), labels."""

def mine_arrays(
    times: npt.NDArray[np.float64],
    units: npt.NDArray[np.uint32],
    labels: list[str],
    options_json: str,
) -> tuple[str, dict[str, Any]]:
    """Mines spikes given as arrays (times in seconds, shape [n]; each spike's index into
    `labels`, shape [n]); returns the `synfire mine` JSON document without its episodes, and
    the episodes as columns (numpy arrays: lengths, types, intervals, count, tested, the test
    statistics, significant; and type_labels)."""

def mine_file(path: str, options_json: str, reader_json: str) -> tuple[str, dict[str, Any]]:
    """Mines a spike file or folder (NWB units table, CSV, phy/Kilosort) read with the reader
    options (JSON); returns what `mine_arrays` returns."""

def softdtw(
    a: list[npt.NDArray[np.float64]],
    b: list[npt.NDArray[np.float64]],
    dims: int,
    gamma: float,
    band: int | None = ...,
    divergence: bool = ...,
    gradient: bool = ...,
    device: str = ...,
) -> tuple[npt.NDArray[np.float64], tuple[list[npt.NDArray[np.float64]], list[npt.NDArray[np.float64]]] | None]:
    """Soft-DTW of all pairs of flattened series; values and optional gradients."""

def barycenter(
    set: list[npt.NDArray[np.float64]],
    dims: int,
    gamma: float,
    band: int | None = ...,
    weights: list[float] | None = ...,
    init: str = ...,
    max_iterations: int = ...,
    device: str = ...,
) -> tuple[npt.NDArray[np.float64], dict[str, Any]]:
    """Soft-DTW barycenter of flattened series and the optimisation's record."""

def shapelet_fit(
    series: list[list[float]],
    labels: list[str],
    min_length: int,
    max_length: int,
    step: int = ...,
    max_terms: int = ...,
    max_depth: int | None = ...,
    device: str = ...,
) -> str:
    """Trains a shapelet tree; returns the model as JSON."""

def shapelet_predict(model: str, series: list[list[float]]) -> list[str]:
    """The labels a model gives each series."""

class SingIndex:
    """A SING similarity-search index."""
    @staticmethod
    def build(series: list[npt.NDArray[np.float64]], leaf_capacity: int = ...) -> SingIndex: ...
    @staticmethod
    def load(path: str) -> SingIndex: ...
    def save(self, path: str) -> None: ...
    def __len__(self) -> int: ...
    @property
    def series_length(self) -> int: ...
    def query(
        self, q: npt.NDArray[np.float64], k: int = ..., device: str = ...
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64]]: ...
