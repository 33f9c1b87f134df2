"""The Ray executor (``run.executor: ray``): the run's prompts sampled by workers on a cluster.

The driver (this process) streams the dataset, sends prompts to the workers in chunks,
keeps at most ``workers x calls_per_worker`` prompts in flight, and is the only writer of
the run directory: each record comes back to it and goes through
:meth:`~sampling_core.runs.execution.session.BatchSession.finish`, and so do the lines the workers'
plugins write to their events file (the ``recorder``'s: appended to ``events.jsonl``).

A worker that dies (killed, out of memory, its node lost) is replaced; the prompts it held
go to the queue again, up to :data:`MAX_TRIES` times each, then end in an ``error`` record
saying why. Every prompt ends in exactly one record.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio

from sampling_core.errors import exception_text
from sampling_core.hooks.entry_points import PluginSpec
from sampling_core.kinds import KindRegistry
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.errors import ConfigError
from sampling_core.runs.execution.prompt_run import error_record
from sampling_core.runs.execution.ray_worker import PromptWorker
from sampling_core.runs.execution.session import BatchSession

__all__ = ["MAX_TRIES", "RayWorkers", "with_executor"]

MAX_TRIES = 3
"""How many workers a prompt may be sent to before it ends in an ``error`` record."""

_READY_S = 120.0  # how long the workers may take to start (a node may be starting too)
_PROBE_S = 5.0  # how long the cluster's address may take to answer
_WAIT_S = 0.25  # how long one wait for results blocks (an interrupt is seen within this)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ConfigError(
            f"run.executor 'ray' needs Ray ({exception_text(exc)}); "
            "install it with: pip install 'samplehooks[ray]'"
        ) from exc
    return ray


@dataclass(slots=True)
class _Chunk:
    """Prompts sent to one worker in one call, with how often each was sent before."""

    slot: int
    handle: Any
    items: list[tuple[PromptItem, int]]


@dataclass(slots=True)
class RayWorkers:
    """The run's worker actors on a Ray cluster, and the driver loop that feeds them."""

    ray: Any
    config: RunConfig
    kinds: KindRegistry
    backend: Any
    plugins: list[PluginSpec]
    handles: list[Any]
    owns_cluster: bool
    load: list[int] = field(default_factory=list)
    replaced: int = 0
    resolved: dict[str, Any] = field(default_factory=dict)
    """What the workers' backend really uses (``resolved_settings``), for ``meta.json``."""
    cache_probe: str | None = None
    """The token the driver wrote into the response cache, which each worker looks for."""

    @classmethod
    def start(
        cls,
        config: RunConfig,
        kinds: KindRegistry,
        backend: Any = None,
        plugins: Sequence[PluginSpec] = (),
        cache_probe: str | None = None,
    ) -> RayWorkers:
        """Connect to the cluster and start the workers; raise :class:`ConfigError` (before
        anything is written) when the cluster cannot be reached, a worker cannot be built, or
        a worker does not see the response cache holding ``cache_probe``
        (:mod:`sampling_core.runs.execution.run_cache`)."""
        ray = _import_ray()
        settings = config.run.ray
        _probe(settings.address)
        owns = not ray.is_initialized()  # else: this process's own connection is used
        if owns:
            where = settings.address or "a new local cluster"
            try:
                ray.init(
                    address=settings.address,
                    include_dashboard=False,
                    logging_level=logging.WARNING,
                    configure_logging=False,
                )
            except Exception as exc:
                raise ConfigError(
                    f"run.ray.address: cannot reach the Ray cluster at {where} "
                    f"({_cause(exc)}); "
                    "check the address and that the cluster is up (`ray status`)"
                ) from exc
        workers = cls(ray, config, kinds, backend, list(plugins), [], owns)
        workers.cache_probe = cache_probe
        try:
            workers.handles = [workers._spawn() for _ in range(settings.workers)]
            workers.load = [0] * settings.workers
            ready = ray.get([h.ready.remote() for h in workers.handles], timeout=_READY_S)
            workers.resolved = ready[0][1]
            problem = next((found[2] for found in ready if found[2] is not None), None)
        except ray.exceptions.GetTimeoutError as exc:
            workers.close()
            raise ConfigError(
                f"the Ray workers did not start within {_READY_S:.0f} s; each takes one CPU "
                f"and the cluster has {ray.cluster_resources().get('CPU', 0):.0f}: lower "
                "run.ray.workers (--workers) or add nodes"
            ) from exc
        except Exception as exc:
            workers.close()
            raise ConfigError(
                f"a Ray worker cannot set up the run: {_cause(exc)}; every node needs "
                "samplehooks and the configured plugins installed (docs/scale-out.md)"
            ) from exc
        if problem is not None:
            workers.close()
            raise ConfigError(problem)
        return workers

    def _spawn(self) -> Any:
        actor = self.ray.remote(PromptWorker).options(
            max_concurrency=self.config.run.ray.calls_per_worker + 1, num_cpus=1
        )
        return actor.remote(self.config, self.kinds, self.backend, self.plugins, self.cache_probe)

    async def execute(self, session: BatchSession) -> None:
        """Sample every pending prompt of ``session`` on the workers."""
        ray = self.ray
        cap = self.config.run.ray.calls_per_worker
        chunk_size = max(1, cap // 2)
        again: deque[tuple[PromptItem, int]] = deque()
        fresh: Iterator[PromptItem] = session.pending
        in_flight: dict[Any, _Chunk] = {}
        events: IO[str] | None = None
        try:
            while True:
                for slot in range(len(self.handles)):
                    while self.load[slot] < cap:
                        room = min(chunk_size, cap - self.load[slot])
                        items = _take(again, fresh, room)
                        if not items:
                            break
                        for item, tries in items:  # announced once, when first sent
                            if tries == 0:
                                await session.start(item)
                        handle = self.handles[slot]
                        ref = handle.run_chunk.remote([i for i, _ in items], session.number)
                        in_flight[ref] = _Chunk(slot, handle, items)
                        self.load[slot] += len(items)
                if not in_flight:
                    return
                ready, _ = await anyio.to_thread.run_sync(
                    lambda: ray.wait(list(in_flight), num_returns=1, timeout=_WAIT_S)
                )
                for ref in ready:
                    chunk = in_flight.pop(ref)
                    self.load[chunk.slot] -= len(chunk.items)
                    try:
                        records, lines = ray.get(ref)  # lines: complete, newline-ended
                    except ray.exceptions.RayError as exc:
                        await self._lost(chunk, exc, again, session)
                        continue
                    if lines:
                        if events is None:
                            events = session.run_dir.events_file.open("a", encoding="utf-8")
                        events.write(lines)
                        events.flush()
                    for record in records:
                        await session.finish(record)
        finally:
            if events is not None:
                events.close()

    async def _lost(
        self,
        chunk: _Chunk,
        exc: BaseException,
        again: deque[tuple[PromptItem, int]],
        session: BatchSession,
    ) -> None:
        """A chunk's call failed: replace a dead worker, send its prompts again or give up."""
        if isinstance(exc, self.ray.exceptions.RayActorError):
            if self.handles[chunk.slot] is chunk.handle:  # not replaced yet
                with contextlib.suppress(Exception):  # gone for good, even if only unreachable
                    self.ray.kill(chunk.handle, no_restart=True)
                self.handles[chunk.slot] = self._spawn()
                self.replaced += 1
            why = "the worker running it died"
        else:
            why = "its worker failed"
        for item, tries in chunk.items:
            if tries + 1 >= MAX_TRIES:
                reason = f"{why} {MAX_TRIES} times (last: {_cause(exc)})"
                await session.finish(error_record(item, reason, session.number))
            else:
                again.append((item, tries + 1))

    def close(self, events_file: Path | None = None) -> None:
        """Stop the workers (and the cluster this process started); the event lines they
        still held are appended to ``events_file``."""
        ray = self.ray
        stopping = [handle.stop.remote() for handle in self.handles]
        if stopping:  # a dead worker has nothing left to release: wait for the others only
            done, _ = ray.wait(stopping, num_returns=len(stopping), timeout=10)
            lines = []
            for ref in done:
                with contextlib.suppress(Exception):
                    lines.append(ray.get(ref))
            if events_file is not None and any(lines):
                with events_file.open("a", encoding="utf-8") as events:
                    events.write("".join(lines))
        for handle in self.handles:
            ray.kill(handle, no_restart=True)
        self.handles = []
        if self.owns_cluster:
            ray.shutdown()


def with_executor(
    config: RunConfig,
    executor: str | None = None,
    address: str | None = None,
    workers: int | None = None,
) -> RunConfig:
    """``config`` with the executor settings given on the command line (``None``: as is)."""
    if executor is None and address is None and workers is None:
        return config
    run = config.run.model_dump()
    if executor is not None:
        run["executor"] = executor
    if address is not None:
        run["ray"]["address"] = address
    if workers is not None:
        run["ray"]["workers"] = workers
    try:
        settings = type(config.run).model_validate(run)
    except ValueError as exc:
        raise ConfigError(f"--executor/--ray-address/--workers: {exception_text(exc)}") from exc
    if settings.executor != "ray" and (address is not None or workers is not None):
        raise ConfigError(
            "--ray-address and --workers apply to the Ray executor: add --executor ray"
        )
    return config.model_copy(update={"run": settings})


_H2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""HTTP/2's client preface and an empty SETTINGS frame: a Ray cluster's address (its GCS, or
a Ray Client server) is a gRPC server, which answers with a SETTINGS frame of its own."""


def _probe(address: str | None) -> None:
    """Fail fast when ``HOST:PORT`` does not answer, or answers but is not a gRPC server
    (an HTTP server, the dashboard, a port that says nothing): Ray itself would wait for
    minutes. With ``RAY_USE_TLS`` on, only the connection is checked."""
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=_PROBE_S) as s:
            if os.environ.get("RAY_USE_TLS", "").lower() in ("1", "true"):
                return
            s.sendall(_H2_HELLO)
            head = _read_some(s, 9)
    except (OSError, ValueError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ConfigError(
            f"run.ray.address: cannot reach the Ray cluster at {address} ({detail}); "
            "check the address and that the cluster is up (`ray status` on its head node). "
            "Nothing was written"
        ) from exc
    if len(head) >= 9 and head[3] == 4:  # an HTTP/2 SETTINGS frame: gRPC, as Ray speaks
        return
    if head.startswith((b"HTTP/", b"<")):  # a status line, or an HTTP/0.9-style page
        said = f"it answered as an HTTP server: {_first_line(head)!r}"
    elif not head:
        said = f"it sent nothing back within {_PROBE_S:g} s"
    else:
        said = f"it answered {_first_line(head)!r}, not as Ray does"
    raise ConfigError(
        f"run.ray.address: {address} is open but is not a Ray cluster ({said}); give the "
        "head node's cluster address (HOST:6379 by default, as `ray status` shows it) or "
        "ray://HOST:10001 for Ray Client; the dashboard's port (8265) is not it. "
        "Nothing was written"
    )


def _read_some(sock: socket.socket, size: int) -> bytes:
    """Up to ``size`` bytes: fewer when the peer closes or goes quiet for ``_PROBE_S``."""
    got = b""
    try:
        while len(got) < size:
            more = sock.recv(256)  # an HTTP server's status line comes in whole
            if not more:
                break
            got += more
    except OSError:  # a timeout, or a reset: what came so far tells what it is
        pass
    return got


def _first_line(data: bytes) -> str:
    return data.split(b"\r\n")[0].split(b"\n")[0][:80].decode("ascii", "replace")


def _take(
    again: deque[tuple[PromptItem, int]], fresh: Iterator[PromptItem], room: int
) -> list[tuple[PromptItem, int]]:
    """Up to ``room`` prompts: those to send again first, then the dataset's next ones."""
    items: list[tuple[PromptItem, int]] = []
    while again and len(items) < room:
        items.append(again.popleft())
    for item in fresh:
        items.append((item, 0))
        if len(items) >= room:
            break
    return items


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RAISED = re.compile(r"^(?:\w+\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)): (.*)$")
"""A traceback's last line: ``module.Type: message``."""


def _cause(exc: BaseException) -> str:
    """What went wrong, in one line with its type and no terminal colour codes.

    Ray wraps what a worker raised (in a ``RayTaskError``, or as text in an
    ``ActorDiedError`` or ``UnserializableException``) with its own traceback: the last
    ``Type: message`` line of that text is the worker's own exception."""
    text = _ANSI.sub("", exception_text(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        found = _RAISED.match(line)
        if found and not found.group(1).startswith(("Ray", "ActorDied", "Unserializable")):
            return f"{found.group(1)}: {found.group(2)}"
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
