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
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from . import MiningResult, SynfireError, _interval, _reader, _result, _synfire

__all__ = ["connect", "start_workers", "Workers", "mine_sessions", "test_session",
           "SessionsResult", "SessionFailed", "RAY_REQUIREMENT", "main"]

#: The Ray this module is written and tested against (``pip install`` it).
RAY_REQUIREMENT = "ray>=2.9,<3"

#: The options of :func:`synfire.mine` that go into the mining options (the rest are the
#: reader's).
_MINE_KEYS = ("min_count", "support", "support_per", "max_level", "one_pass", "bounds",
              "max_candidates", "time_budget_s", "device", "gpus", "exact_kernel",
              "calibration", "significance")
_READER_KEYS = ("units", "time_column", "unit_column", "sort", "unit_key", "unit_label",
                "epochs", "epochs_table")


class SessionFailed(Exception):
    """A session that :func:`test_session` could not finish; ``error`` names the original
    exception type (``FileNotFoundError``, ``SynfireError``, ``WorkerDied``, ...)."""

    def __init__(self, session: str, error: str, message: str) -> None:
        super().__init__(f"session {session}: {error}: {message}")
        self.session = session
        self.error = error
        self.message = message


def _ray():
    """The ``ray`` module, or an ImportError saying how to install it."""
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised where Ray is absent
        raise ImportError(
            f"synfire.cluster needs Ray: pip install '{RAY_REQUIREMENT}' (laptop: "
            "'ray[default]' adds the dashboard)") from e
    return ray


def connect(address: str | None = None, *, num_cpus: float | None = None,
            num_gpus: float | None = None, **init: Any) -> dict:
    """Connects this process to a Ray cluster, once (a connection already open is kept).

    Args:
        address: None: Ray's default (the cluster in ``RAY_ADDRESS`` if set, else a new local
            one on this machine); ``"local"``: a new local one; ``"auto"``: ``RAY_ADDRESS``,
            else the cluster already running on this node (``ray start --head`` on a Slurm
            allocation), else a new local one; anything else: that cluster's address
            (``"10.0.0.1:6379"``, or ``"ray://head:10001"`` through Ray Client), as
            ``ray.init(address=...)``.
        num_cpus, num_gpus: a new local cluster only: the CPUs and GPUs it offers (default:
            this machine's).
        init: further ``ray.init`` arguments (``runtime_env``, ``namespace``, ...).

    Returns:
        The cluster's resources (``ray.cluster_resources()``: ``CPU``, ``GPU``, memory, ...).

    Raises:
        ImportError: Ray is not installed.
        ConnectionError: no cluster at ``address``.
    """
    ray = _ray()
    if ray.is_initialized():
        return dict(ray.cluster_resources())
    init.setdefault("include_dashboard", False)
    init.setdefault("ignore_reinit_error", True)
    local = dict(num_cpus=num_cpus, num_gpus=num_gpus)
    if address == "local":
        ray.init(address="local", **local, **init)
    elif address == "auto":
        if os.environ.get("RAY_ADDRESS"):
            ray.init(**init)
        else:
            try:
                ray.init(address="auto", **init)
            except ConnectionError:
                ray.init(address="local", **local, **init)
    elif address is None:
        if os.environ.get("RAY_ADDRESS"):
            ray.init(**init)
        else:
            ray.init(**local, **init)
    else:
        ray.init(address=address, **init)
    return dict(ray.cluster_resources())


# ---- The actor ----

_WORKER_CLASS = None


def _worker_class():
    """The Ray actor class (made on first use, so that importing this module needs no Ray)."""
    global _WORKER_CLASS
    if _WORKER_CLASS is not None:
        return _WORKER_CLASS
    ray = _ray()

    @ray.remote(concurrency_groups={"status": 1})
    class SessionWorker:
        """One actor: a warm engine (`synfire._synfire.Engine`) kept for its life, the
        sessions of a split test kept while their phases run. Work methods run one at a
        time; `status` answers while one runs."""

        def __init__(self) -> None:
            self._engine = _synfire.Engine()
            self._sessions: OrderedDict[str, Any] = OrderedDict()
            self._current: str | None = None
            self._fetched: str | None = None  # made when the first URI is fetched

        @ray.method(concurrency_group="status")
        def status(self) -> dict:
            """pid, host, GPUs, the session being worked on, sessions mined so far."""
            return {"pid": os.getpid(), "host": socket.gethostname(),
                    "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                    "session": self._current, "sessions": self._engine.sessions,
                    "gpu_counters": self._engine.gpu_counters}

        def _local(self, path: str) -> str:
            """A local path for `path` (URIs fetched into this actor's folder)."""
            if "://" in path and not path.startswith("file://") and self._fetched is None:
                self._fetched = tempfile.mkdtemp(prefix="synfire-sessions-")
            return _fetch(path, self._fetched or "")

        def _release(self, local: str) -> None:
            """Deletes a fetched copy once no kept session reads it."""
            if self._fetched and local.startswith(self._fetched + os.sep) and all(
                    keep != local for _, keep in self._sessions.values()):
                if os.path.isdir(local):
                    shutil.rmtree(local, ignore_errors=True)
                elif os.path.exists(local):
                    os.remove(local)

        def _open(self, job: dict) -> tuple[Any, str]:
            """The job's session and the local path it was read from, for the phases of a
            split test: the last two sessions read are kept (a fetched copy is deleted when
            its session is dropped)."""
            key = json.dumps([job["path"], job["options"], job["reader"]])
            kept = self._sessions.get(key)
            if kept is not None:
                self._sessions.move_to_end(key)
                return kept
            local = self._local(job["path"])
            try:
                s = _synfire.Session(local, job["options"], job["reader"], job["path"])
            except BaseException:
                self._release(local)
                raise
            self._sessions[key] = (s, local)
            while len(self._sessions) > 2:
                _, (_, old) = self._sessions.popitem(last=False)
                self._release(old)
            return s, local

        def _record(self, job: dict, started: tuple[float, float], **fields: Any) -> dict:
            return {"session": job["session"], "path": job["path"], "pid": os.getpid(),
                    "host": socket.gethostname(), "seconds": time.perf_counter() - started[0],
                    "cpu_s": time.process_time() - started[1],
                    "nwb_output": job.get("nwb_output"), "json_output": job.get("json_output"),
                    **fields}

        def run(self, job: dict) -> dict:
            """The whole session (`synfire.mine`'s computation), its outputs written; never
            raises for the session's own errors: they come back named."""
            started = (time.perf_counter(), time.process_time())
            self._current = job["session"]
            local = None
            try:
                local = self._local(job["path"])
                session = _synfire.Session(local, job["options"], job["reader"], job["path"])
                doc, cols = session.run(self._engine, job.get("nwb_output"),
                                        job.get("json_output"))
                return self._record(job, started, ok=True, **_payload(job, doc, cols))
            except Exception as e:  # noqa: BLE001 - every session error is reported
                message = str(e)
                if local is not None and local != job["path"]:
                    message = message.replace(local, job["path"])  # name the URI given
                return self._record(job, started, ok=False, error=type(e).__name__,
                                    message=message)
            finally:
                self._current = None
                if local is not None:
                    self._release(local)

        def plan(self, job: dict) -> tuple:
            self._current = job["session"]
            try:
                return self._open(job)[0].plan(self._engine)
            finally:
                self._current = None

        def first_pass(self, job: dict, plan: bytes, start: int, end: int) -> bytes:
            self._current = f"{job['session']} surrogates {start}..{end}"
            try:
                return self._open(job)[0].first_pass(self._engine, plan, start, end)
            finally:
                self._current = None

        def union(self, job: dict, plan: bytes, *parts: bytes) -> bytes:
            self._current = f"{job['session']} union"
            try:
                return self._open(job)[0].union(self._engine, plan, list(parts))
            finally:
                self._current = None

        def second_pass(self, job: dict, plan: bytes, union: bytes, part: bytes) -> bytes:
            self._current = f"{job['session']} second pass"
            try:
                return self._open(job)[0].second_pass(self._engine, plan, union,
                                                                 part)
            finally:
                self._current = None

        def finish(self, job: dict, plan: bytes, n_first: int, union: bytes | None,
                   *parts: bytes) -> dict:
            started = (time.perf_counter(), time.process_time())
            self._current = f"{job['session']} finish"
            try:
                doc, cols = self._open(job)[0].finish(
                    self._engine, plan, list(parts[:n_first]), union, list(parts[n_first:]),
                    job.get("nwb_output"), job.get("json_output"))
                return self._record(job, started, ok=True, **_payload(job, doc, cols))
            finally:
                self._current = None

    _WORKER_CLASS = SessionWorker
    return SessionWorker


def _payload(job: dict, doc: str, cols: dict) -> dict:
    """What a finished session sends back: the document and the episodes' columns, or with
    ``combine=False`` only their number and the minimum count (the results are in its
    files)."""
    if job.get("combine", True):
        return {"doc": doc, "cols": cols}
    return {"n_episodes": int(len(cols["count"])),
            "min_count": int(json.loads(doc)["params"]["min_count"])}


def _fetch(path: str, folder: str) -> str:
    """`path` itself, or for a URI (``s3://``, ``gs://``, ``https://``, ...) a local copy in
    `folder`, fetched once through fsspec."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if "://" not in path:
        return path
    try:
        import fsspec
    except ImportError as e:
        raise ImportError(f"{path}: reading a session from a URI needs fsspec and its "
                          "protocol's package (pip install fsspec s3fs / gcsfs)") from e
    name = re.sub(r"[^A-Za-z0-9._-]", "_", path.rstrip("/"))
    local = os.path.join(folder, name[-200:])
    if not os.path.exists(local):
        fs, _, (remote,) = fsspec.get_fs_token_paths(path)
        partial = local + ".partial"
        fs.get(remote, partial, recursive=fs.isdir(remote))
        os.replace(partial, local)
    # A local copy keeps the input's file name (its format is read from the extension).
    return local


class Workers:
    """The actors of a run: one per GPU (``num_gpus=1``), or per CPU worker where the
    cluster has no GPU, each holding a warm engine for its life. Restarted by Ray when their
    process dies (``max_restarts=-1``); a call in flight is retried ``retries`` times
    (``max_task_retries``). Use as a context manager, or call :meth:`shutdown`.

    Attributes:
        actors: the Ray actor handles.
        resources: each actor's Ray resources (``num_cpus``, ``num_gpus``).
        threads: the counting threads of each actor (``RAYON_NUM_THREADS``).
        retries: times a call is retried after its actor's process died.
    """

    def __init__(self, actors: list, resources: dict, threads: int, retries: int) -> None:
        self.actors = actors
        self.resources = resources
        self.threads = threads
        self.retries = retries

    def __len__(self) -> int:
        return len(self.actors)

    def status(self, timeout_s: float = 30.0) -> list[dict]:
        """Each actor's ``pid``, ``host``, ``gpu_ids``, current ``session`` (None when idle),
        ``sessions`` mined and ``gpu_counters`` kept; answered while a session runs."""
        ray = _ray()
        return ray.get([a.status.remote() for a in self.actors], timeout=timeout_s)

    def shutdown(self) -> None:
        """Stops the actors (their warm engines with them)."""
        ray = _ray()
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def start_workers(count: int | None = None, *, cpus_per_worker: float | None = None,
                  retries: int = 3, address: str | None = None,
                  timeout_s: float = 120.0) -> Workers:
    """Starts the actors on the cluster (connecting first, :func:`connect`).

    Args:
        count: number of actors. Default: one per free GPU of the cluster, else one per free
            CPU.
        cpus_per_worker: Ray CPUs each actor takes (may be fractional; its counting threads
            are this rounded, at least 1). Default: the cluster's free CPUs divided evenly
            among the actors (GPU actors take the CPUs beside their GPU).
        retries: times a call is retried after its worker process died (Ray's
            ``max_task_retries``); a session's own errors are not retried.
        address: as :func:`connect`.
        timeout_s: how long to wait for every actor to start.

    Returns:
        The :class:`Workers`, started (each has answered :meth:`Workers.status`).

    Raises:
        ValueError: ``count`` or ``cpus_per_worker`` not positive, more GPU actors than GPUs.
        TimeoutError: an actor did not start in time (the cluster lacks the resources).
    """
    ray = _ray()
    connect(address)
    # What is free now (a cluster may run other work), by the kinds the cluster has.
    total = ray.cluster_resources()
    free = ray.available_resources()
    gpus = int(free.get("GPU", 0)) if total.get("GPU", 0) else 0
    cpus = float(free.get("CPU", total.get("CPU", 1)))
    if count is not None and count < 1:
        raise ValueError(f"workers: must be at least 1, got {count}")
    if cpus_per_worker is not None and cpus_per_worker <= 0:
        raise ValueError(f"cpus_per_worker: must be positive, got {cpus_per_worker}")
    if gpus:
        count = count or gpus
        if count > gpus:
            raise ValueError(f"workers: {count} GPU actors but the cluster has {gpus} free GPUs")
        per_cpu = cpus_per_worker or max(1.0, float(int(cpus // count)))
        options = {"num_gpus": 1, "num_cpus": per_cpu}
    else:
        count = count or max(1, int(cpus))
        if cpus_per_worker:
            per_cpu = cpus_per_worker
        elif count > cpus:
            per_cpu = cpus / count
        else:
            per_cpu = float(int(cpus // count))
        options = {"num_cpus": per_cpu}
    threads = max(1, int(round(per_cpu)))
    cls = _worker_class()
    actors = [cls.options(max_restarts=-1, max_task_retries=retries,
                          runtime_env={"env_vars": {"RAYON_NUM_THREADS": str(threads)}},
                          **options).remote()
              for _ in range(count)]
    workers = Workers(actors, options, threads, retries)
    try:
        workers.status(timeout_s=timeout_s)
    except ray.exceptions.GetTimeoutError as e:
        workers.shutdown()
        raise TimeoutError(f"{count} workers with {options} each did not start within "
                           f"{timeout_s} s: does the cluster have the resources? (lower cpus_per_worker "
                           "or the number of workers)") from e
    return workers


# ---- Sessions ----

def _session_names(sessions: Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike]
                   ) -> list[tuple[str, str]]:
    """(name, path) of every session: a mapping's keys, else each path's file or folder name
    without its extension. Raises ValueError for two sessions of one name."""
    if isinstance(sessions, Mapping):
        pairs = [(str(k), os.fspath(v)) for k, v in sessions.items()]
    elif isinstance(sessions, (str, os.PathLike)):
        raise TypeError("sessions: a list of paths (or a {name: path} mapping), not one path")
    else:
        pairs = []
        for p in sessions:
            path = os.fspath(p)
            base = path.rstrip("/").rsplit("/", 1)[-1]
            stem = base
            for ext in (".nwb", ".csv", ".txt", ".h5", ".hdf5", ".oebin"):
                if stem.lower().endswith(ext):
                    stem = stem[: -len(ext)]
                    break
            pairs.append((stem or base, path))
    seen: dict[str, str] = {}
    for name, path in pairs:
        if not name or "/" in name or name in (".", ".."):
            raise ValueError(f"sessions: `{name}` ({path}) cannot name a session's output files")
        if name in seen:
            raise ValueError(
                f"sessions: {seen[name]} and {path} are both named `{name}`; pass a "
                "{name: path} mapping to name them apart")
        seen[name] = path
    if not pairs:
        raise ValueError("sessions: none given")
    return pairs


def _options_json(intervals: Sequence[Any], sample_rate_hz: float | None,
                  mine_options: Mapping[str, Any]) -> tuple[str, str]:
    """(mining options, reader options) as JSON, built as :func:`synfire.mine` builds them."""
    unknown = sorted(set(mine_options) - set(_MINE_KEYS) - set(_READER_KEYS))
    if unknown:
        raise TypeError(f"unknown option(s) of synfire.mine: {', '.join(unknown)}")
    specs = [_interval(iv) for iv in intervals]
    options: dict[str, Any] = {}
    for k in _MINE_KEYS:
        if k in mine_options and mine_options[k] is not None:
            v = mine_options[k]
            if k == "gpus":
                v = list(v)
            elif k == "calibration":
                v = os.fspath(v)
            elif k == "significance":
                v = dict(v)
            options[k] = v
    if sample_rate_hz is not None:
        options["intervals_samples"] = specs
        options["sample_rate_hz"] = float(sample_rate_hz)
    else:
        options["intervals_s"] = specs
    reader = {k: mine_options.get(k) for k in _READER_KEYS}
    reader_json = _reader(units=reader["units"], sample_rate_hz=sample_rate_hz,
                          time_column=reader["time_column"], unit_column=reader["unit_column"],
                          sort=bool(reader["sort"]), unit_key=reader["unit_key"],
                          unit_label=reader["unit_label"], epochs=reader["epochs"],
                          epochs_table=reader["epochs_table"])
    options_json = json.dumps(options)
    _synfire.check_options(options_json)
    return options_json, reader_json


@dataclass
class SessionsResult:
    """What :func:`mine_sessions` returns.

    Attributes:
        episodes: every session's episodes in one frame: ``session`` (its name) first, then
            the columns of :attr:`synfire.MiningResult.episodes`; sessions in the order given,
            each in its report order.
        sessions: one row per session, in the order given: ``session``, ``path``, ``ok``,
            ``error`` (the exception's type name, ``WorkerDied`` when its worker died more
            often than the retries allow; None when ok), ``message``, ``episodes`` (rows),
            ``min_count``, ``seconds`` (wall time on its worker; split tests: of the whole
            test), ``cpu_s`` (CPU seconds of its worker process, every thread; split tests:
            of the finish only), ``host``, ``pid``, ``nwb_output``, ``json_output`` (the files
            written, or None).
        results: each finished session's :class:`synfire.MiningResult`, by name.
        seconds: wall time of the run.
    """

    episodes: pd.DataFrame
    sessions: pd.DataFrame
    results: dict[str, MiningResult] = field(repr=False)
    seconds: float

    @property
    def failures(self) -> pd.DataFrame:
        """The rows of :attr:`sessions` that failed, with ``error`` and ``message``."""
        return self.sessions[~self.sessions["ok"]].reset_index(drop=True)

    @property
    def ok(self) -> bool:
        """True when every session finished."""
        return bool(self.sessions["ok"].all())


class _Progress:
    """Sessions done, failed and running, on standard error: a bar redrawn in place on a
    terminal, else a line every 10 s and at the end; or a callable
    ``progress(done, total, failed)``."""

    def __init__(self, total: int, what: str, progress: Any) -> None:
        self.total, self.what = total, what
        self.done = self.failed = 0
        self.started = time.perf_counter()
        self.last = 0.0
        self.shown = -1
        self.call = progress if callable(progress) else None
        tty = sys.stderr.isatty()
        self.draw = self.call is None and (progress is True or (progress is None and tty))
        self.tty = tty

    def update(self, ok: bool, running: Iterable[str] = ()) -> None:
        self.done += 1
        self.failed += 0 if ok else 1
        self.show(running)

    def show(self, running: Iterable[str] = (), final: bool = False) -> None:
        if self.call is not None:
            self.call(self.done, self.total, self.failed)
            return
        if not self.draw or (final and self.shown == self.done):
            return
        now = time.perf_counter()
        if not (self.tty or final or now - self.last >= 10.0 or self.done == self.total):
            return
        self.last = now
        self.shown = self.done
        elapsed = now - self.started
        rate = self.done / elapsed * 60.0 if elapsed > 0 else 0.0
        eta = (self.total - self.done) / (self.done / elapsed) if self.done else float("nan")
        width = 24
        fill = int(width * self.done / max(self.total, 1))
        line = (f"{self.what} [{'#' * fill}{'.' * (width - fill)}] {self.done}/{self.total}"
                f" ({self.failed} failed) {rate:.1f}/min"
                + (f", eta {eta:.0f} s" if eta == eta else ""))
        names = list(running)[:3]
        if names:
            line += f"; running {', '.join(names)}"
        if self.tty:
            end = "\n" if self.done == self.total or final else ""
            sys.stderr.write("\r" + line[:160].ljust(160) + end)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def _failure(job: dict, error: str, message: str) -> dict:
    return {"session": job["session"], "path": job["path"], "ok": False, "error": error,
            "message": message, "seconds": float("nan"), "cpu_s": float("nan"),
            "host": None, "pid": None,
            "nwb_output": None, "json_output": None}


def _from_ray_error(job: dict, e: BaseException, retries: int) -> dict:
    """A session's failure from the exception ``ray.get`` raised: the worker died more often
    than the retries allow, or a phase raised (its original type and message)."""
    ray = _ray()
    if isinstance(e, ray.exceptions.RayActorError):
        times = "once" if retries == 0 else f"{retries + 1} times"
        return _failure(job, "WorkerDied", f"its worker process died {times} while working "
                        f"on it ({type(e).__name__}: {str(e).splitlines()[0]})")
    cause = getattr(e, "cause", None)
    if isinstance(e, ray.exceptions.RayTaskError) and cause is not None:
        return _failure(job, type(cause).__name__, str(cause))
    return _failure(job, type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def _split_session(ray: Any, workers: Workers, home: Any, job: dict, batch: int,
                   deadline: float | None) -> dict:
    """One session with its surrogates split into batches across every actor: the plan on
    `home`, each first-pass batch on the next actor, the union and the finish on `home`; Ray
    moves the parts between them (object references, never through this process)."""
    actors = workers.actors
    started = time.perf_counter()
    plan, n, passes = ray.get(home.plan.remote(job), timeout=_left(deadline))
    plan_ref = ray.put(plan)
    ranges = [(k, min(k + batch, n)) for k in range(0, n, batch)]
    first = [actors[i % len(actors)].first_pass.remote(job, plan_ref, a, b)
             for i, (a, b) in enumerate(ranges)]
    if passes == 2:
        union = home.union.remote(job, plan_ref, *first)
        second = [actors[i % len(actors)].second_pass.remote(job, plan_ref, union, part)
                  for i, part in enumerate(first)]
        done = home.finish.remote(job, plan_ref, len(first), union, *first, *second)
    else:
        done = home.finish.remote(job, plan_ref, len(first), None, *first)
    record = ray.get(done, timeout=_left(deadline))
    record["seconds"] = time.perf_counter() - started
    return record


def _await_restart(ray: Any, actor: Any, deadline: float | None,
                   patience_s: float = 60.0) -> None:
    """Waits until ``actor`` answers ``status`` again after its process died.

    Ray restarts the actor (``max_restarts=-1``), but a call sent while it restarts is refused
    without running (``ActorUnavailableError``: "The actor is restarting"), which would report
    the next session as lost to a worker death it never saw. So a session goes to a restarted
    actor only once the actor answers. Gives up after ``patience_s`` seconds or at
    ``deadline`` (``time.perf_counter()`` seconds), leaving the next call to report what
    happens; returns at once for an actor that is alive.
    """
    limit = time.perf_counter() + patience_s
    if deadline is not None:
        limit = min(limit, deadline)
    while True:
        left = limit - time.perf_counter()
        if left <= 0:
            return
        try:
            ray.get(actor.status.remote(), timeout=left)
            return
        except ray.exceptions.GetTimeoutError:
            return
        except ray.exceptions.RayActorError:
            time.sleep(min(0.05, left))


def _left(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.perf_counter()
    if left <= 0:
        raise TimeoutError("the run took longer than its timeout_s")
    return left


def mine_sessions(
    sessions: Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike],
    intervals: Sequence[Any],
    *,
    output_dir: str | os.PathLike | None = None,
    outputs: Sequence[str] = ("nwb", "json"),
    combine: bool = True,
    address: str | None = None,
    workers: int | Workers | None = None,
    cpus_per_worker: float | None = None,
    retries: int = 3,
    surrogate_batch: int | None = None,
    progress: bool | Callable[[int, int, int], Any] | None = None,
    timeout_s: float | None = None,
    sample_rate_hz: float | None = None,
    **mine_options: Any,
) -> SessionsResult:
    """Mines every session on the cluster, one task per session, as :func:`synfire.mine`
    mines one: the same options, the same episodes, counts and p-values.

    Args:
        sessions: paths or URIs of NWB files, phy/Kilosort folders, CSVs or Open Ephys
            recordings, named by their file or folder name without extension; or a mapping
            ``{name: path}``. URIs (``s3://``, ``gs://``, ``https://``) are fetched by each
            worker through fsspec.
        intervals: as :func:`synfire.mine`.
        output_dir: write each session's results there (created): ``<name>.synfire.nwb``
            (NWB results: a copy of an NWB input with the ``synfire`` processing module, else
            a new NWB file with the units; ``synfire mine --nwb-output``) and
            ``<name>.synfire.json`` (``synfire mine --format json``), each through
            ``<file>.partial-<pid>`` and a rename, so a file is never seen half written and a
            retried session replaces it whole. None: nothing is written.
        outputs: which of ``"nwb"`` and ``"json"`` to write into ``output_dir``. The NWB
            results hold every listed episode's occurrences and are the slow part of a
            dense session (``docs/cluster.md``, capacity model).
        combine: send every session's episodes back and combine them (``episodes``,
            ``results``); False: only each session's row of ``sessions`` (the episodes are
            in its files), for collections whose episodes do not fit this process's memory.
        address: the cluster (:func:`connect`); ignored when ``workers`` is a
            :class:`Workers`.
        workers: a :class:`Workers` to run on (kept running), or how many to start (default:
            one per GPU, else one per CPU; stopped at the end).
        cpus_per_worker, retries: as :func:`start_workers` (when ``workers`` is a
            :class:`Workers`, its own).
        surrogate_batch: split each session's significance test into batches of this many
            surrogates across every worker (sessions then run one after another); None: one
            task per session.
        progress: None: a bar on standard error when it is a terminal; True: always (a line
            every 10 s when it is not); False: none; a callable: ``progress(done, total,
            failed)`` after every session.
        timeout_s: give up (TimeoutError) when the run takes longer.
        sample_rate_hz: as :func:`synfire.mine`.
        mine_options: every other option of :func:`synfire.mine` (``min_count``,
            ``support``, ``max_level``, ``device``, ``significance``, ``units``, ...).

    Returns:
        A :class:`SessionsResult`: the combined frame, a row per session, failures named.

    Raises:
        TypeError: an option :func:`synfire.mine` does not have.
        ValueError: a bad option (before any session runs), two sessions of one name.
        ImportError: Ray is not installed.
        TimeoutError: the run took longer than ``timeout_s``.
    """
    ray = _ray()
    started = time.perf_counter()
    deadline = started + timeout_s if timeout_s is not None else None
    pairs = _session_names(sessions)
    options_json, reader_json = _options_json(intervals, sample_rate_hz, mine_options)
    if surrogate_batch is not None:
        if surrogate_batch < 1:
            raise ValueError(f"surrogate_batch: must be at least 1, got {surrogate_batch}")
        if not mine_options.get("significance"):
            raise ValueError("surrogate_batch: splits a significance test; give `significance`")
    kinds = {outputs} if isinstance(outputs, str) else set(outputs)
    if not kinds <= {"nwb", "json"}:
        raise ValueError(f"outputs: `nwb`, `json` or both, got {sorted(kinds)}")
    out = Path(output_dir) if output_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    jobs = []
    for name, path in pairs:
        jobs.append({
            "session": name, "path": path, "options": options_json, "reader": reader_json,
            "nwb_output": str(out / f"{name}.synfire.nwb") if out and "nwb" in kinds else None,
            "json_output": (str(out / f"{name}.synfire.json") if out and "json" in kinds
                            else None),
            "combine": bool(combine),
        })
    own = not isinstance(workers, Workers)
    pool = start_workers(workers, cpus_per_worker=cpus_per_worker, retries=retries,
                         address=address) if own else workers
    records: dict[str, dict] = {}
    bar = _Progress(len(jobs), "sessions", progress)
    try:
        if surrogate_batch is not None:
            for i, job in enumerate(jobs):
                home = pool.actors[i % len(pool)]
                try:
                    rec = _split_session(ray, pool, home, job, surrogate_batch, deadline)
                except TimeoutError:
                    raise
                except ray.exceptions.GetTimeoutError as e:
                    raise TimeoutError(f"session {job['session']} did not finish within "
                                       f"timeout_s = {timeout_s}") from e
                except Exception as e:  # noqa: BLE001 - every session error is reported
                    rec = _from_ray_error(job, e, pool.retries)
                    if isinstance(e, ray.exceptions.RayActorError):
                        for actor in pool.actors:
                            _await_restart(ray, actor, deadline)
                records[job["session"]] = rec
                bar.update(rec["ok"])
        else:
            _run_each(ray, pool, jobs, records, bar, deadline, timeout_s)
    finally:
        bar.show(final=True)
        if own:
            pool.shutdown()
    return _combine(jobs, records, time.perf_counter() - started)


def _run_each(ray: Any, pool: Workers, jobs: list[dict], records: dict, bar: _Progress,
              deadline: float | None, timeout_s: float | None) -> None:
    """One `run` call in flight per actor; the next session goes to the actor that finishes
    (Ray's `ray.wait` pattern, as `ray.util.ActorPool` does it, keeping each call's session
    so that a failure is reported against it)."""
    pending = list(reversed(jobs))
    idle = list(pool.actors)
    flight: dict[Any, tuple[dict, Any]] = {}
    while pending or flight:
        while idle and pending:
            actor = idle.pop()
            job = pending.pop()
            flight[actor.run.remote(job)] = (job, actor)
        ready, _ = ray.wait(list(flight), num_returns=1, timeout=_left(deadline))
        if not ready:
            running = ", ".join(j["session"] for j, _ in flight.values())
            raise TimeoutError(f"the run took longer than timeout_s = {timeout_s}; still "
                               f"running: {running}")
        job, actor = flight.pop(ready[0])
        try:
            rec = ray.get(ready[0])
        except Exception as e:  # noqa: BLE001 - a dead worker fails its session only
            rec = _from_ray_error(job, e, pool.retries)
            if isinstance(e, ray.exceptions.RayActorError):
                _await_restart(ray, actor, deadline)
        idle.append(actor)
        records[job["session"]] = rec
        bar.update(rec["ok"], (j["session"] for j, _ in flight.values()))


def _combine(jobs: list[dict], records: dict[str, dict], seconds: float) -> SessionsResult:
    """The combined frame and the per-session table, in the order the sessions were given."""
    frames, rows, results = [], [], {}
    for job in jobs:
        rec = records.get(job["session"]) or _failure(job, "NotRun", "the run stopped first")
        row = {k: rec.get(k) for k in ("session", "path", "ok", "error", "message")}
        row.update(episodes=0, min_count=None, seconds=rec.get("seconds"),
                   cpu_s=rec.get("cpu_s"), host=rec.get("host"), pid=rec.get("pid"),
                   nwb_output=rec.get("nwb_output") if rec["ok"] else None,
                   json_output=rec.get("json_output") if rec["ok"] else None)
        if rec["ok"] and "doc" not in rec:
            row.update(episodes=rec["n_episodes"], min_count=rec["min_count"], error=None,
                       message=None)
        elif rec["ok"]:
            result = _result(json.loads(rec["doc"]), rec["cols"])
            results[job["session"]] = result
            frame = result.episodes.copy()
            frame.insert(0, "session", job["session"])
            frames.append(frame)
            row.update(episodes=len(frame), min_count=result.min_count, error=None,
                       message=None)
        rows.append(row)
    episodes = (pd.concat(frames, ignore_index=True) if frames
                else pd.DataFrame({"session": pd.Series([], dtype=object)}))
    table = pd.DataFrame(rows, columns=["session", "path", "ok", "error", "message", "episodes",
                                        "min_count", "seconds", "cpu_s", "host", "pid",
                                        "nwb_output", "json_output"])
    table["ok"] = table["ok"].astype(bool)
    return SessionsResult(episodes=episodes, sessions=table, results=results, seconds=seconds)


def test_session(session: str | os.PathLike, intervals: Sequence[Any], *,
                 significance: Mapping[str, Any], surrogate_batch: int,
                 **options: Any) -> MiningResult:
    """One session with its surrogates split into batches of ``surrogate_batch`` across every
    worker: the :class:`synfire.MiningResult` that :func:`synfire.mine` returns for the same
    options and seed, every p-value bit for bit (``docs/cluster.md``, "Surrogate batches").

    Args:
        session: the path or URI.
        intervals, significance: as :func:`synfire.mine`.
        surrogate_batch: surrogates per batch (≥ 1).
        options: the other options of :func:`mine_sessions` and :func:`synfire.mine`.

    Raises:
        SessionFailed: the session failed (``error`` names the original exception type).
    """
    r = mine_sessions({"session": session}, intervals, significance=significance,
                      surrogate_batch=surrogate_batch, **options)
    if not r.ok:
        f = r.failures.iloc[0]
        raise SessionFailed(os.fspath(session), f["error"], f["message"])
    return r.results["session"]
test_session.__test__ = False  # not a pytest test


# ---- The command line's entry (`synfire batch`) ----

def _episode_text(labels: Sequence[str], intervals: Sequence[str]) -> str:
    parts = [labels[0]]
    for iv, label in zip(intervals, labels[1:]):
        parts += [iv, label]
    return "-".join(parts)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    """`frame` as CSV through a temporary file and a rename."""
    tmp = path.with_name(path.name + f".partial-{os.getpid()}")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m synfire.cluster batch``: what ``synfire batch`` runs after checking its
    arguments. Reads the sessions file (one path or URI per line; ``#`` lines and blank
    lines skipped; ``NAME<TAB>PATH`` names a session), mines every session on the cluster
    with the options (JSON, as ``synfire.mine`` passes them), writes each session's results
    and ``episodes.csv`` (every session's episodes, a ``session`` column first) and
    ``sessions.csv`` (one row per session, failures with their error) into the output
    folder, prints the sessions table, and returns 0 when every session finished, 1 when
    some failed (listed on standard error), 2 for bad arguments."""
    parser = argparse.ArgumentParser(prog="python -m synfire.cluster",
                                     description="synfire batch's cluster entry point")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("batch", help="mine every session of a sessions file on a Ray cluster")
    b.add_argument("sessions", help="file with one session path or URI per line")
    b.add_argument("--options-json", required=True,
                   help="the mining options as synfire.mine passes them (JSON)")
    b.add_argument("--reader-json", default="{}", help="the reader options (JSON)")
    b.add_argument("--cluster", default="auto",
                   help="auto (RAY_ADDRESS, else a cluster on this node, else a local one), "
                        "local, or a cluster address")
    b.add_argument("--workers", type=int, default=None)
    b.add_argument("--cpus-per-worker", type=float, default=None)
    b.add_argument("--retries", type=int, default=3)
    b.add_argument("--surrogate-batch", type=int, default=None)
    b.add_argument("--output-dir", required=True)
    b.add_argument("--outputs", default="nwb,json", help="nwb, json or nwb,json")
    b.add_argument("--no-combine", action="store_true",
                   help="no episodes.csv: each session's episodes stay in its own files")
    b.add_argument("--timeout-s", type=float, default=None)
    b.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    try:
        text = Path(args.sessions).read_text()
    except OSError as e:
        print(f"error: sessions file {args.sessions}: {e.strerror}", file=sys.stderr)
        return 2
    named: dict[str, str] = {}
    paths: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "\t" in line:
            name, path = (x.strip() for x in line.split("\t", 1))
            named[name] = path
        else:
            paths.append(line)
    try:
        if named and paths:
            raise ValueError("sessions file: name every session (NAME<TAB>PATH) or none")
        pairs = _session_names(named or paths)
        options = json.loads(args.options_json)
        reader = json.loads(args.reader_json)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    intervals = options.pop("intervals_samples", None) or options.pop("intervals_s", [])
    options.pop("intervals_s", None)
    rate = options.pop("sample_rate_hz", None)
    reader.pop("sample_rate_hz", None)
    reader = {k: v for k, v in reader.items() if v is not None}
    out = Path(args.output_dir)
    try:
        r = mine_sessions(dict(pairs), intervals, output_dir=out,
                          outputs=[k.strip() for k in args.outputs.split(",") if k.strip()],
                          combine=not args.no_combine,
                          address=args.cluster,
                          workers=args.workers, cpus_per_worker=args.cpus_per_worker,
                          retries=args.retries, surrogate_batch=args.surrogate_batch,
                          progress=False if args.quiet else None, timeout_s=args.timeout_s,
                          sample_rate_hz=rate, **options, **reader)
    except (ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not args.no_combine:
        frame = r.episodes.copy()
        if len(frame):
            frame.insert(1, "episode", [_episode_text(lab, ivs) for lab, ivs in
                                        zip(frame["labels"], frame["intervals"])])
            frame = frame.drop(columns=["labels", "intervals", "intervals_s"])
        _write_csv(frame, out / "episodes.csv")
    _write_csv(r.sessions, out / "sessions.csv")
    shown = r.sessions[["session", "ok", "episodes", "min_count", "seconds", "error"]]
    print(shown.to_string(index=False))
    print(f"{int(r.sessions['ok'].sum())} of {len(r.sessions)} sessions in {r.seconds:.1f} s; "
          f"results in {out}")
    if not r.ok:
        for f in r.failures.itertuples():
            print(f"error: session {f.session} ({f.path}): {f.error}: {f.message}",
                  file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
