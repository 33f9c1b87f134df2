"""The task-group scenario: the engine's subsample runner against an anyio task group.

On asyncio the engine starts a call's subsamples as plain asyncio tasks
(:class:`~sampling_core.engine.subsample_tasks.AsyncioSubsampleTasks`, cancelled by anyio's rules);
under trio it uses an anyio task group with a cancel scope per subsample
(:class:`~sampling_core.engine.subsample_tasks.AnyioSubsampleTasks`: ``anyio.create_task_group()``,
``start_soon``, early exit by cancelling the group's scope). This scenario runs the same
engine workload with each, on asyncio, the task group injected as the loop's runner for the
duration of its calls, and the bare loop and Mellea beside them as in every scenario:

* one call at ``concurrency_budget`` 1, 4, 16 and 512 (``loop_budget=4``, zero-latency
  backend, never passing: every subsample runs all its attempts): µs per attempt. At 1 the
  lone subsample runs in the caller's task and neither runner is used (a control);
* one call of 16 subsamples whose ninth backend call passes (early exit: the others are
  cancelled): µs per call;
* 1,000 concurrent calls (``loop_budget=2, concurrency_budget=2``, 5 ms backend): wall time
  and peak memory growth.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchmarks.fakes import FakeModel
from benchmarks.report import Check, Row
from benchmarks.runners import implementations, many_at_once
from benchmarks.timing import (
    Runner,
    engine_pairs,
    median,
    paired_ratio,
    ratio,
    time_batches,
)
from sampling_core.engine import loop as loop_module
from sampling_core.engine.subsample_tasks import AnyioSubsampleTasks, SubsampleTasks

RUNNER = "engine's runner"
TASK_GROUP = "anyio task group"


def with_runner(run: Runner, make_tasks: Callable[[int], SubsampleTasks]) -> Runner:
    """``run`` with the sampling loop starting subsamples through ``make_tasks``."""

    async def swapped() -> Any:
        saved = loop_module.subsample_tasks
        loop_module.subsample_tasks = make_tasks  # type: ignore[assignment]
        try:
            return await run()
        finally:
            loop_module.subsample_tasks = saved

    return swapped


def counted_afresh(run: Runner, model: Any) -> Runner:
    """``run`` with ``model`` counting its backend calls from zero (each call passes on the
    same call number)."""

    async def afresh() -> Any:
        model.reset()
        return await run()

    return afresh


def variants(single: dict[str, Runner]) -> dict[str, Runner]:
    """The engine with each runner, then the yardsticks (the bare loop, Mellea)."""
    runners = {
        RUNNER: single["engine"],
        TASK_GROUP: with_runner(single["engine"], AnyioSubsampleTasks),
    }
    runners["bare"] = single["bare"]
    if "mellea" in single:
        runners["mellea"] = single["mellea"]
    return runners


def rows_for(
    scenario_setting: str,
    metric: str,
    values: dict[str, float],
    seconds: dict[str, list[float]],
    checks: Callable[[dict[str, float | None]], list[Check]],
    notes: dict[str, Any] | None = None,
) -> list[Row]:
    """One row per runner: that engine's value beside the bare loop's and Mellea's."""
    rows = []
    paired_group = paired_ratio(seconds, TASK_GROUP, RUNNER) if seconds else None
    for name in (RUNNER, TASK_GROUP):
        shown = {"engine": values[name], "bare": values.get("bare"), "mellea": values.get("mellea")}
        pairs = engine_pairs(seconds, name) if seconds else {}
        extra = {"task_group_over_runner_paired": paired_group, **(notes or {})}
        if name == TASK_GROUP:
            extra["task_group_over_runner_medians"] = values[TASK_GROUP] / values[RUNNER]
        rows.append(
            Row(
                "anyio task group",
                f"{scenario_setting}, {name}",
                metric,
                shown,
                checks(shown),
                extra,
                pairs,
            )
        )
    return rows


async def task_group(s: Any) -> list[Row]:
    """The engine's runner against an anyio task group, same workloads, same process."""

    rows: list[Row] = []
    for concurrency in (1, 4, 16, 512):
        model = FakeModel()
        runners = variants(implementations(model, loop_budget=4, concurrency_budget=concurrency))
        calls = max(1, s.calls * 4 // concurrency)  # about as many attempts at each setting
        seconds = await time_batches(runners, calls=calls, repeats=s.repeats, warmup=s.warmup)
        attempts = calls * 4 * concurrency
        values = {n: median(v) / attempts * 1e6 for n, v in seconds.items()}
        rows += rows_for(
            f"0 ms backend, loop_budget=4, concurrency_budget={concurrency}",
            "µs/attempt",
            values,
            seconds,
            lambda v: [Check("Mellea/engine", ratio(v, "mellea", "engine"), ">=", 8)],
        )

    model = FakeModel(passes=lambda n: n == 8)
    runners = variants(implementations(model, loop_budget=4, concurrency_budget=16))
    runners = {name: counted_afresh(run, model) for name, run in runners.items()}
    calls = max(1, s.calls // 4)
    seconds = await time_batches(runners, calls=calls, repeats=s.repeats, warmup=s.warmup)
    values = {n: median(v) / calls * 1e6 for n, v in seconds.items()}
    rows += rows_for(
        "early exit: 16 subsamples, 0 ms backend, the 9th backend call passes",
        "µs per call",
        values,
        seconds,
        lambda v: [],
    )

    model = FakeModel(latency=0.005)
    single = variants(implementations(model, loop_budget=2, concurrency_budget=2))
    _, seconds, memory = await many_at_once(single, s)
    wall = {n: median(v) * 1e3 for n, v in seconds.items()}
    setting = f"{s.many} concurrent calls, loop_budget=2, concurrency_budget=2, 5 ms backend"
    rows += rows_for(
        setting,
        "wall ms",
        wall,
        seconds,
        lambda v: [Check("engine/bare", ratio(v, "engine", "bare"), "<=", 2.5)],
    )
    rows += rows_for(
        setting,
        "peak memory growth MiB",
        memory,
        {},
        lambda v: [Check("engine/bare", ratio(v, "engine", "bare"), "<=", 2)],
        {"measured_with": "tracemalloc, results kept until the peak is read"},
    )
    return rows
