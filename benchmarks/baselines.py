"""The bare asyncio loop: the least code that does the engine's work, as a yardstick.

One task per subsample in an ``asyncio.TaskGroup``; each makes up to ``loop_budget``
attempts (request, backend call, check, append to a result list) and the first passing
attempt cancels its siblings. A single subsample (``concurrency_budget=1``) runs inline in
the caller's task, with no task group, as the engine runs it. No plugins, no contextvars, no
payloads, no result object beyond a list: whatever the engine costs above this is the
engine's own overhead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sampling_core.backends import GenerationRequest


@dataclass(slots=True)
class BareResult:
    """What the bare loop returns: every completed attempt, the winner, the cancellations."""

    attempts: list[tuple[int, int, str, bool]] = field(default_factory=list)
    winner: tuple[int, int, str, bool] | None = None
    cancelled: int = 0


async def bare_sample(
    backend: Any,
    prompt: str,
    check: Callable[[str], bool],
    *,
    loop_budget: int,
    concurrency_budget: int,
) -> BareResult:
    """Sample ``prompt`` with ``concurrency_budget`` tasks of ``loop_budget`` attempts each."""
    messages = [{"role": "user", "content": prompt}]
    result = BareResult()
    tasks: list[asyncio.Task[None]] = []

    async def subsample(index: int) -> None:
        for attempt in range(1, loop_budget + 1):
            generation = await backend.generate(GenerationRequest(messages, {}, None))
            passed = check(generation.text)
            outcome = (index, attempt, generation.text, passed)
            result.attempts.append(outcome)
            if passed:
                if result.winner is None:
                    result.winner = outcome
                    me = asyncio.current_task()
                    for task in tasks:
                        if task is not me and not task.done():
                            task.cancel()
                            result.cancelled += 1
                return

    if concurrency_budget == 1:  # nothing to cancel: no task, as the engine does
        await subsample(0)
        return result
    async with asyncio.TaskGroup() as group:
        tasks.extend(group.create_task(subsample(i)) for i in range(concurrency_budget))
    return result


async def floor_sample(backend: Any, prompt: str, *, concurrency_budget: int) -> None:
    """The least any implementation with one asyncio task per subsample does: start the
    tasks, each awaiting one backend call, and wait for them. No check, no result, no
    cancellation; what this takes above the backend's latency is the event loop's own cost.
    """
    request = GenerationRequest([{"role": "user", "content": prompt}], {}, None)
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(backend.generate(request)) for _ in range(concurrency_budget)]
    for task in tasks:
        await task
