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
