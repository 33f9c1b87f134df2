"""A batch run's response cache (``run.cache``, ``--cache``): opened before anything is written.

The process that writes the run directory opens the cache first, so that a damaged or
foreign file refuses the run with one :class:`~sampling_core.runs.errors.ConfigError` and
nothing is written. On the Ray executor each worker opens the file by its path: it works
when every worker sees the driver's file (a filesystem they share). The driver writes a
random token into the file and each worker looks for it there
(:func:`~sampling_core.backends.cache_store.probe_problem`) before it builds anything: a worker
that does not see that very file refuses the run at start, naming the node.
"""

from __future__ import annotations

import socket
from pathlib import Path

from sampling_core.backends.cache_store import CacheError, ResponseCache, probe_problem
from sampling_core.errors import exception_text
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.errors import ConfigError

__all__ = ["open_run_cache", "shared_cache_problem", "with_cache"]


def with_cache(config: RunConfig, cache: str | Path | None) -> RunConfig:
    """``config`` with ``run.cache`` set to ``cache`` (``None``: as it is), made absolute,
    so that every process of the run names the same file."""
    path = Path(cache) if cache is not None else config.run.cache
    if path is None:
        return config
    path = path.expanduser().resolve()
    if path == config.run.cache:
        return config
    return config.model_copy(update={"run": config.run.model_copy(update={"cache": path})})


def open_run_cache(config: RunConfig) -> ResponseCache | None:
    """The run's cache, opened (``None`` without one); a file that cannot be a cache raises
    :class:`ConfigError` naming it."""
    if config.run.cache is None:
        return None
    try:
        return ResponseCache(config.run.cache)
    except CacheError as exc:
        raise ConfigError(f"run.cache: {exception_text(exc)} (nothing was written)") from exc


def shared_cache_problem(config: RunConfig, token: str | None) -> str | None:
    """In a Ray worker: ``None`` when it sees the driver's cache file (the one holding
    ``token``), else the refusal of the run, naming this node."""
    if token is None or config.run.cache is None:
        return None
    problem = probe_problem(config.run.cache, token)
    if problem is None:
        return None
    return (
        f"run.cache: the Ray worker on {socket.gethostname()} does not see the driver's "
        f"response cache ({problem}); the cache works with the Ray executor when every "
        "node shares the driver's filesystem: put it on such a path, or leave out "
        "run.cache / --cache (nothing was written)"
    )
