"""What the cluster modules share (private): the Ray requirement and its import, and the
sessions' names."""

from __future__ import annotations

import os
from typing import Mapping, Sequence


#: The Ray this module is written and tested against (``pip install`` it).
RAY_REQUIREMENT = "ray>=2.9,<3"


def ray_module():
    """The ``ray`` module, or an ImportError saying how to install it."""
    try:
        import ray
    except ImportError as e:  # pragma: no cover - exercised where Ray is absent
        raise ImportError(
            f"synfire.cluster needs Ray: pip install '{RAY_REQUIREMENT}' (laptop: "
            "'ray[default]' adds the dashboard)") from e
    return ray


def session_names(sessions: Sequence[str | os.PathLike] | Mapping[str, str | os.PathLike]
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
