"""Measuring: interleaved timed batches, medians, peak memory, tasks left behind."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Runner = Callable[[], Awaitable[Any]]
"""One ``sample()`` call (or its baseline equivalent), ready to await."""


async def time_batches(
    runners: Mapping[str, Runner],
    *,
    calls: int,
    repeats: int,
    warmup: int,
    before: Callable[[], None] | None = None,
) -> dict[str, list[float]]:
    """Seconds taken by ``calls`` sequential awaits of each runner, ``repeats`` times.

    Every runner is warmed up first (``warmup`` calls); then the repetitions interleave
    the runners (A, B, C, A, B, C, ...) so that a change of load on the machine falls on
    all of them alike. ``before`` runs before every batch (e.g. to reset a fake model).
    """
    for run in runners.values():
        for _ in range(warmup):
            if before is not None:
                before()
            await run()
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(repeats):
        for name, run in runners.items():
            if before is not None:
                before()
            gc.collect()
            began = time.perf_counter()
            for _ in range(calls):
                await run()
            seconds[name].append(time.perf_counter() - began)
    return seconds


def median(values: list[float]) -> float:
    """The median of ``values``."""
    return statistics.median(values)


def tasks_left() -> int:
    """Tasks of the running loop other than the current one."""
    return len(asyncio.all_tasks() - {asyncio.current_task()})


async def peak_memory_growth(run: Runner) -> int:
    """Bytes allocated above the starting point at the peak of ``run`` (tracemalloc).

    ``run``'s return value is kept until the peak is read, so results count too.
    """
    gc.collect()
    tracemalloc.start()
    try:
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        kept = await run()
        _, peak = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    return peak - start
