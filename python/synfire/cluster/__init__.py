"""synfire.cluster: many sessions and surrogate batches on a Ray cluster (issue 22).

Ray places the work (``num_gpus``: one actor per GPU, or per CPU worker where there is
none), keeps each actor's state, retries a task whose worker died (``max_restarts``,
``max_task_retries``) and runs the same way on a laptop, on a Slurm allocation and on
Kubernetes (``docs/cluster.md``; why Ray and not Dask: ``docs/adr/0004-cluster-engine.md``).
synfire adds no scheduler, transport or retry logic of its own: it starts the actors, hands
each one session at a time and combines what comes back.

* :func:`mine_sessions` mines many sessions (NWB files, phy/Kilosort folders, CSVs, Open Ephys
  recordings, or ``s3://``/``gs://``... URIs read through fsspec), one task per session,
  results combined into one :class:`SessionsResult` (a ``session`` column first) and written
  per session (``<output_dir>/<session>.synfire.nwb``: the NWB results of ``synfire mine
  --nwb-output``; ``<session>.synfire.json``: the ``synfire mine --format json`` document),
  each file through a temporary file and a rename. A failed session is reported with its
  error (:attr:`SessionsResult.failures`), never dropped; the others complete.
* With ``surrogate_batch=N`` each session's significance test is split into batches of ``N``
  surrogates across every actor (counter-based surrogates: surrogate ``s`` is the same
  wherever it is made; integer sums combine exactly), and the p-values equal the
  single-process run's with the same seed, bit for bit (:func:`test_session` for one session).
* Each actor (:class:`Workers`) holds a warm engine for its life: its GPU counters (device
  threads, CUDA contexts, compiled kernels, calibration) are kept between sessions.
* :func:`connect` joins an existing cluster by address (``ray.init(address=...)``) or starts a
  local one.

>>> from synfire import cluster                                      # doctest: +SKIP
>>> r = cluster.mine_sessions(["a.nwb", "b.nwb"], [(0, 0.005), (0.005, 0.010)],
...                           support=0.2, support_per="seconds", max_level=4,
...                           output_dir="results")                  # doctest: +SKIP
>>> r.episodes.groupby("session")["count"].size()                    # doctest: +SKIP

The command line runs :func:`main` (``synfire batch SESSIONS.txt --intervals ...`` calls
``python3 -m synfire.cluster batch ...``).

This module is the face: ``actors.py`` holds the Ray side (:func:`connect`, the actor,
:class:`Workers`, :func:`start_workers`), ``sessions.py`` the sessions (:func:`mine_sessions`,
:func:`test_session`, :class:`SessionsResult`), ``cli.py`` the command line's entry
(:func:`main`, run by ``__main__.py``).
"""

from __future__ import annotations

from ._common import RAY_REQUIREMENT
from .actors import Workers, connect, start_workers
from .cli import main
from .sessions import SessionFailed, SessionsResult, mine_sessions, test_session

__all__ = ["connect", "start_workers", "Workers", "mine_sessions", "test_session",
           "SessionsResult", "SessionFailed", "RAY_REQUIREMENT", "main"]
