"""The Ray executor's worker: a Ray actor that samples the prompts the driver sends it.

A worker builds its backend, strategy, requirements and plugins from the effective config
with :func:`~sampling_core.runs.prompt_run.build_components` and samples each prompt with
:func:`~sampling_core.runs.prompt_run.run_prompt`, exactly as the local executor does. It
writes nothing: records go back to the driver, and so do the lines its ``recorder``
plugin would have written to ``events.jsonl``.

This module does not import Ray: the driver wraps :class:`PromptWorker` with
``ray.remote``, and a worker process imports this module by name, so samplehooks (and
every plugin the config names) must be installed on each node.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from builtin_plugins.recorder import RecorderPlugin
from sampling_core.backends.base import aclose_backend
from sampling_core.plugins import PluginSpec
from sampling_core.runs.components import build_backend, close_plugins
from sampling_core.runs.config import RunConfig
from sampling_core.runs.dataset import PromptItem
from sampling_core.runs.prompt_run import build_components, run_prompt

__all__ = ["ForwardingRecorder", "PromptWorker"]


class ForwardingRecorder(RecorderPlugin):
    """The ``recorder`` plugin of a worker: it keeps each line for the driver to write."""

    def __init__(self) -> None:
        super().__init__(os.devnull)
        self.lines: list[str] = []

    def record(self, hook: str, payload: Any) -> None:
        """Keep the event's line (the driver appends it to ``events.jsonl``)."""
        self.lines.append(self.encode(hook, payload))
        self.lines_written += 1

    def take(self) -> list[str]:
        """The lines kept since the last call."""
        lines, self.lines = self.lines, []
        return lines


class PromptWorker:
    """Samples chunks of prompts with the run's components (an async Ray actor's class).

    ``backend`` is a backend object given to ``run_batch`` (copied to each worker), or
    ``None`` for the config's own; ``plugins`` are the extra plugins given to ``run_batch``.
    """

    def __init__(
        self, config: RunConfig, backend: Any = None, plugins: Sequence[PluginSpec] = ()
    ) -> None:
        self._own_backend = backend is None
        self._backend = build_backend(config) if backend is None else backend
        self._recorder = ForwardingRecorder() if "recorder" in config.plugins else None
        self._parts = build_components(
            config, self._backend, Path(os.devnull), plugins, recorder=self._recorder
        )

    def ready(self) -> int:
        """The worker's process id, once it is built (the driver waits for this)."""
        return os.getpid()

    async def run_chunk(
        self, items: Sequence[PromptItem], session: int
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """Sample ``items`` at once: their records, in order, and the recorder's new lines."""
        records: list[dict[str, Any]] = [{} for _ in items]

        async def one(index: int, item: PromptItem) -> None:
            records[index] = await run_prompt(self._parts, item, session)

        async with anyio.create_task_group() as group:
            for index, item in enumerate(items):
                group.start_soon(one, index, item)
        return records, self._recorder.take() if self._recorder is not None else []

    async def stop(self) -> None:
        """Release the plugins and the backend."""
        close_plugins(self._parts.sampler)
        if self._own_backend:
            await aclose_backend(self._backend)
