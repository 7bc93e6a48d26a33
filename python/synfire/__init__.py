"""synfire: frequent serial episodes in spike trains, exact on the CPU and the GPU.

An *episode* ``A -(lo,hi]-> B -(lo,hi]-> C`` is a sequence of units whose consecutive spikes
follow each other within the given delay intervals; its *count* (support) is the maximum
number of non-overlapped occurrences (Cao et al., "Towards real-time data mining of spike
train datasets using GPUs", Algorithm 1). :func:`mine` finds every episode whose count reaches
the threshold, level by level, exactly as ``synfire mine`` does, and can test each against
surrogates (``significance=``).

>>> import synfire
>>> r = synfire.mine("fixtures/spikes/A2929-200711/A2929-200711.nwb",
...                  intervals=[(0, 0.005), (0.005, 0.010)], support=0.2,
...                  support_per="seconds", max_level=3)
>>> r.episodes.head()  # doctest: +SKIP

This module is the package's face: the code lives in ``_mine.py`` (mining), ``_io.py``
(spikes in), ``_results.py`` (:class:`MiningResult`), ``_options.py`` (the options as the
extension reads them), ``sensors.py`` (the sensor stages) and the extension
``synfire._synfire`` (Rust, ``src/python/``); ``synfire.cluster`` runs many sessions on Ray.
The package is distributed as ``synfire-mining`` (``pip install synfire-mining``; the
package index's ``synfire`` is another project) and imported as ``synfire``; ``_distribution``
warns at import when both are installed.
"""

from __future__ import annotations

from . import _distribution, _synfire
from ._io import read_spikes, spike_arrays
from ._mine import gpu_available, gpus, mine
from ._results import MiningResult
from ._synfire import SynfireError
from .sensors import Index, ShapeletClassifier, barycenter, motif, softdtw

__all__ = ["mine", "motif", "read_spikes", "MiningResult", "SynfireError", "spike_arrays",
           "softdtw", "barycenter", "Index", "ShapeletClassifier", "gpus", "gpu_available",
           "__version__"]
__version__: str = _synfire.__version__
# A second distribution that installs `synfire/` (ADR 0005): warned about once, at import.
_distribution.check_clash()
