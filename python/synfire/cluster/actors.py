"""The Ray side of :mod:`synfire.cluster`: :func:`connect`, the actor (a warm
``synfire._synfire.Engine`` per GPU or CPU worker, the sessions of a split test kept while
their phases run), :class:`Workers` and :func:`start_workers`."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from collections import OrderedDict
from typing import Any

from .. import _synfire
from ._common import ray_module

__all__ = ["connect", "Workers", "start_workers"]


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
    ray = ray_module()
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


_WORKER_CLASS = None


def _worker_class():
    """The Ray actor class (made on first use, so that importing this module needs no Ray)."""
    global _WORKER_CLASS
    if _WORKER_CLASS is not None:
        return _WORKER_CLASS
    ray = ray_module()

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
        ray = ray_module()
        return ray.get([a.status.remote() for a in self.actors], timeout=timeout_s)

    def shutdown(self) -> None:
        """Stops the actors (their warm engines with them)."""
        ray = ray_module()
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
    ray = ray_module()
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
