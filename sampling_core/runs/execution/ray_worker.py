"""The Ray executor's worker: a Ray actor that samples the prompts the driver sends it.

A worker builds its backend, strategy, requirements and plugins from the effective config
with :func:`~sampling_core.runs.config.components.build_components` and samples each prompt with
:func:`~sampling_core.runs.execution.prompt_run.run_prompt`, exactly as the local executor does. It
writes nothing the run keeps: records go back to the driver, and so does every line its
plugins write to the run's events file (a plugin's ``for_run`` is given a file in the
worker's own temporary directory, which the worker reads back after each chunk and
removes when it stops).

This module does not import Ray: the driver wraps :class:`PromptWorker` with
``ray.remote``, and a worker process imports this module by name, so samplehooks (and
every plugin the config names) must be installed on each node.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from sampling_core.backends.base import aclose_backend
from sampling_core.hooks.entry_points import PluginSpec
from sampling_core.kinds import KindRegistry
from sampling_core.runs.config.components import build_backend, build_components, close_plugins
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.execution.prompt_run import run_prompt
from sampling_core.runs.execution.run_cache import shared_cache_problem
from sampling_core.runs.resume.integrity import resolved_settings

__all__ = ["EventsTail", "PromptWorker"]


class EventsTail:
    """The complete lines appended to a file since the last :meth:`take`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def take(self) -> str:
        """The new complete lines (each ending in a newline; ``""`` when there are none)."""
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return ""
        end = data.rfind(b"\n") + 1  # a line still being written waits for the next take
        self._offset += end
        return data[:end].decode("utf-8", "replace")


class PromptWorker:
    """Samples chunks of prompts with the run's components (an async Ray actor's class).

    ``backend`` is a backend object given to ``run_batch`` (copied to each worker), or
    ``None`` for the config's own; ``plugins`` are the extra plugins given to ``run_batch``.
    ``cache_probe`` is the token the driver wrote into the response cache: a worker that
    does not find it there builds nothing and says why in :meth:`ready`.
    """

    def __init__(
        self,
        config: RunConfig,
        kinds: KindRegistry,
        backend: Any = None,
        plugins: Sequence[PluginSpec] = (),
        cache_probe: str | None = None,
    ) -> None:
        self._problem = shared_cache_problem(config, cache_probe)
        if self._problem is not None:
            return
        self._own_backend = backend is None
        self._backend = build_backend(config, kinds) if backend is None else backend
        self._dir = Path(tempfile.mkdtemp(prefix="samplehooks-worker-"))
        self._events = EventsTail(self._dir / "events.jsonl")
        self._parts = build_components(
            config, kinds, self._events.path, backend=self._backend, extra_plugins=plugins
        )

    def ready(self) -> tuple[int, dict[str, Any], str | None]:
        """The worker's process id, what its backend really uses (its resolved settings,
        recorded in ``meta.json``) and why it cannot take part (``None``: it can), once it is
        built (the driver waits for this)."""
        if self._problem is not None:
            return os.getpid(), {}, self._problem
        return os.getpid(), resolved_settings(self._backend), None

    async def run_chunk(
        self, items: Sequence[PromptItem], session: int
    ) -> tuple[list[dict[str, Any]], str]:
        """Sample ``items`` at once: their records, in order, and their event lines (every
        background event of the chunk delivered first)."""
        records: list[dict[str, Any]] = [{} for _ in items]

        async def one(index: int, item: PromptItem) -> None:
            records[index] = await run_prompt(self._parts, item, session)

        async with anyio.create_task_group() as group:
            for index, item in enumerate(items):
                group.start_soon(one, index, item)
        # background observers (the recorder) write the chunk's events before they are taken
        await self._parts.sampler.background.adrain()
        return records, self._events.take()

    async def stop(self) -> str:
        """Deliver the queued background events, release the plugins and the backend, and
        remove the worker's temporary files; the event lines not yet taken."""
        if self._problem is not None:
            return ""
        await self._parts.sampler.background.adrain()
        close_plugins(self._parts.sampler)
        lines = self._events.take()
        if self._own_backend:
            await aclose_backend(self._backend)
        shutil.rmtree(self._dir, ignore_errors=True)
        return lines
