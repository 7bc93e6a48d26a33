"""A worked example of the Python package on a real recording (run by CI through
tools/test-python.sh, so it cannot rot).

The IBL raster bundled in fixtures/ (289 Kilosort units of a Neuropixels probe, 120 s; see
fixtures/spikes/ibl-ephys_test/PROVENANCE.md) is loaded as plain numpy arrays, as a lab's
notebook would hold it; synfire mines the pairs of units that fire within 0-5 ms and 5-10 ms
of each other at least 0.2 times per second, tests each against 49 dithered surrogates with
the max-t procedure, prints the significant ones, most frequent first, and the spike times
of the first occurrences of the top one.

Run from a clone after `bash tools/test-python.sh` (which installs the package):
    target/py-venv/bin/python docs/python_example.py
"""

from pathlib import Path

import numpy as np

import synfire

root = Path(__file__).resolve().parents[1]
csv = root / "fixtures/spikes/ibl-ephys_test/ibl-ephys_test.csv"
data = np.genfromtxt(csv, delimiter=",", names=True, dtype=None, encoding="utf-8")
times_s, units = data["time_s"], data["label"]
print(f"{len(np.unique(units))} units, {len(times_s)} spikes over {np.ptp(times_s):.1f} s")

result = synfire.mine(
    (times_s, units),
    intervals=[(0, 0.005), (0.005, 0.010)],
    support=0.2,
    support_per="seconds",
    max_level=2,
    significance={"surrogates": "dither:0.015", "n_surrogates": 49, "seed": 1},
    occurrences=True,
)
print(f"minimum count {result.min_count}; levels:")
print(result.levels[["level", "candidates", "frequent", "seconds"]].to_string(index=False))

pairs = result.episodes[result.episodes["labels"].map(len) == 2]
significant = pairs[pairs["significant"] == True]  # noqa: E712 (a pandas mask)
print(f"\n{len(significant)} of {len(pairs)} frequent pairs are significant (max-t, alpha 0.05):")
print(significant[["labels", "intervals", "count", "surrogate_mean", "p_adjusted"]]
      .head(10).to_string(index=False))
assert len(pairs) > 1000 and 0 < len(significant) < len(pairs)

# Every occurrence the count counts, as a long frame (one row per spike of an occurrence).
top = significant.index[0]
occ = result.occurrences[result.occurrences["episode"] == top]
spikes = occ.pivot(index="occurrence", columns="node", values="time_s")
print(f"\nfirst occurrences of {' -> '.join(result.episodes.loc[top, 'labels'])} "
      f"({len(spikes)} in all), seconds:")
print(spikes.head(5).to_string())
assert len(spikes) == result.episodes.loc[top, "count"]
