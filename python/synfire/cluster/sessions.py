"""Sessions on the cluster: :func:`mine_sessions` (one task per session, or a session's
surrogates split into batches across every actor), :func:`test_session`, what comes back
(:class:`SessionsResult`, :class:`SessionFailed`) and the progress shown meanwhile."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from .. import _synfire
from .._options import mining_json, reader_options_json
from .._results import MiningResult, result_of
from ._common import ray_module, session_names
from .actors import Workers, start_workers

__all__ = ["mine_sessions", "test_session", "SessionsResult", "SessionFailed"]


class SessionFailed(Exception):
    """A session that :func:`test_session` could not finish; ``error`` names the original
    exception type (``FileNotFoundError``, ``SynfireError``, ``WorkerDied``, ...)."""

    def __init__(self, session: str, error: str, message: str) -> None:
        super().__init__(f"session {session}: {error}: {message}")
        self.session = session
        self.error = error
        self.message = message


def _options_json(intervals: Sequence[Any], sample_rate_hz: float | None,
                  mine_options: Mapping[str, Any]) -> tuple[str, str]:
    """(mining options, reader options) as JSON, built by :func:`synfire.mine`'s builder and
    checked (every bad option named in one ValueError)."""
    options_json = mining_json(intervals, sample_rate_hz, mine_options)
    reader_text = reader_options_json(sample_rate_hz, mine_options)
    _synfire.check_options(options_json)
    return options_json, reader_text


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
    ray = ray_module()
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
    ray = ray_module()
    started = time.perf_counter()
    deadline = started + timeout_s if timeout_s is not None else None
    pairs = session_names(sessions)
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
    jobs: list[dict[str, Any]] = []
    for name, path in pairs:
        jobs.append({
            "session": name, "path": path, "options": options_json, "reader": reader_json,
            "nwb_output": str(out / f"{name}.synfire.nwb") if out and "nwb" in kinds else None,
            "json_output": (str(out / f"{name}.synfire.json") if out and "json" in kinds
                            else None),
            "combine": bool(combine),
        })
    own = not isinstance(workers, Workers)
    pool = workers if isinstance(workers, Workers) else start_workers(
        workers, cpus_per_worker=cpus_per_worker, retries=retries, address=address)
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
            result = result_of(json.loads(rec["doc"]), rec["cols"])
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
test_session.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
