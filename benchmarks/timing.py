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
    the runners, in alternating order (A, B, C, C, B, A, A, B, C, ...), so that a change of
    load on the machine, or a cost one batch leaves to the next (garbage, a warm cache),
    falls on all of them alike. ``before`` runs before every batch (e.g. to reset a fake
    model). Lists are by repetition: ``[name][i]`` of two runners were timed back to back.
    """
    for run in runners.values():
        for _ in range(warmup):
            if before is not None:
                before()
            await run()
    seconds: dict[str, list[float]] = {name: [] for name in runners}
    for repetition in range(repeats):
        for name, run in alternating(runners, repetition):
            if before is not None:
                before()
            gc.collect()
            began = time.perf_counter()
            for _ in range(calls):
                await run()
            seconds[name].append(time.perf_counter() - began)
    return seconds


def alternating(runners: Mapping[str, Runner], repetition: int) -> list[tuple[str, Runner]]:
    """The runners in the order of ``repetition``: as given on even ones, reversed on odd."""
    ordered = list(runners.items())
    return ordered if repetition % 2 == 0 else ordered[::-1]


def paired_ratio(seconds: Mapping[str, list[float]], top: str, bottom: str) -> float | None:
    """The median over repetitions of ``top``'s time over ``bottom``'s, timed back to back.

    A pair shares the machine's load, so this moves less with the load than the ratio of
    the two medians. ``None`` when either runner was not measured.
    """
    a, b = seconds.get(top), seconds.get(bottom)
    if not a or not b:
        return None
    return statistics.median(x / y for x, y in zip(a, b, strict=True) if y)


def engine_pairs(
    seconds: dict[str, list[float]], engine: str = "engine", *, inverse: bool = False
) -> dict[str, float | None]:
    """Engine/bare and Mellea/engine as medians of per-repetition ratios (``inverse``: for a
    rate, where the faster is the larger)."""
    if inverse:
        return {
            "engine/bare": paired_ratio(seconds, "bare", engine),
            "mellea/engine": paired_ratio(seconds, engine, "mellea"),
        }
    return {
        "engine/bare": paired_ratio(seconds, engine, "bare"),
        "mellea/engine": paired_ratio(seconds, "mellea", engine),
    }


def ratio(values: dict[str, float | None], top: str, bottom: str) -> float | None:
    """``top``'s value over ``bottom``'s; ``None`` when either is missing or ``bottom`` is 0."""
    a, b = values.get(top), values.get(bottom)
    return None if a is None or not b else a / b


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
