"""Type stubs of the extension module (src/python/). Use the functions of `synfire`."""

from typing import Any, Callable

import numpy as np
import numpy.typing as npt
from typing_extensions import Self, final

__all__ = [
    "gpus", "read_spikes", "motif", "mine_arrays", "mine_file", "softdtw", "barycenter",
    "shapelet_fit", "shapelet_predict", "SingIndex", "check_options", "Engine", "Session",
    "defaults", "SynfireError", "__version__",
]

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

def gpus() -> list[dict[str, Any]]:
    """The usable GPUs (ordinal, name, compute_capability, multiprocessors, total_memory,
    driver_version); SynfireError saying why when there is none."""

def mine_arrays(
    times: npt.NDArray[np.float64],
    units: npt.NDArray[np.uint32],
    labels: list[str],
    options_json: str,
    progress: Callable[[int, int, int], Any] | None = ...,
    occurrences: bool = ...,
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """Mines spikes given as arrays (times in seconds, shape [n]; each spike's index into
    `labels`, shape [n]) on a thread of its own (GIL released, Ctrl-C raises
    KeyboardInterrupt and stops it, `progress(level, done, total)` called on this thread);
    returns the `synfire mine` JSON document without its episodes, the episodes as columns
    (numpy arrays: lengths, types, intervals, count, tested, the test statistics,
    significant; and type_labels), and with `occurrences` their occurrences as columns
    (episode, occurrence, node, unit type id, time_s), else None."""

def mine_file(
    path: str,
    options_json: str,
    reader_json: str,
    progress: Callable[[int, int, int], Any] | None = ...,
    occurrences: bool = ...,
) -> tuple[str, dict[str, Any], dict[str, Any] | None]:
    """Mines a spike file or folder (NWB units table, CSV, phy/Kilosort, Open Ephys) read
    with the reader options (JSON); returns what `mine_arrays` returns."""

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

@final
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
    def query_batch(
        self, qs: npt.NDArray[np.float64], k: int = ..., device: str = ...
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.float64]]: ...

def defaults() -> dict[str, Any]:
    """The default of every option as the library defines it (src/python/defaults.rs):
    `mining` (each mining option: `max_level` 10, `device` "auto", ...), `significance` (each
    option of `significance=` but `surrogates`: `n_surrogates` 200, `alpha` 0.05,
    `correction` "guided", `seed` 0, ...), `window_n_surrogates` (a pipeline window's, 19) and
    `surrogate_method` (`delta_s`, `dead_time_s`, seconds)."""

# synfire.cluster's side of the extension (src/python/cluster.rs, issue 22).

def check_options(options_json: str) -> None:
    """Checks mining options (JSON, as synfire.mine passes them); ValueError naming every bad one."""

@final
class Engine:
    """A cluster worker's warm engine: GPU counters kept between sessions."""
    def __init__(self) -> None: ...
    @property
    def sessions(self) -> int: ...
    @property
    def gpu_counters(self) -> int: ...

@final
class Session:
    """One session read once, its options resolved; run whole or in the phases of a split test."""
    def __new__(cls, path: str, options_json: str, reader_json: str,
                input: str | None = ...) -> Self: ...
    @property
    def input(self) -> str: ...
    @property
    def tests_significance(self) -> bool: ...
    def __len__(self) -> int: ...
    def run(self, engine: Engine, nwb_output: str | None = ...,
            json_output: str | None = ...) -> tuple[str, dict[str, Any]]: ...
    def plan(self, engine: Engine) -> tuple[bytes, int, int]: ...
    def first_pass(self, engine: Engine, plan: bytes, start: int, end: int) -> bytes: ...
    def union(self, engine: Engine, plan: bytes, parts: list[bytes]) -> bytes: ...
    def second_pass(self, engine: Engine, plan: bytes, union: bytes, part: bytes) -> bytes: ...
    def finish(self, engine: Engine, plan: bytes, first: list[bytes], union: bytes | None = ...,
               second: list[bytes] = ..., nwb_output: str | None = ...,
               json_output: str | None = ...) -> tuple[str, dict[str, Any]]: ...
