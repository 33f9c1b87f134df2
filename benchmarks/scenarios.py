"""The benchmark scenarios: each runs the engine and its baselines in one process.

Every scenario returns :class:`~benchmarks.report.Row` objects: one value per
implementation (``engine``, ``bare``, ``mellea``; ``None`` where Mellea is not installed)
and the checks against the project's performance targets (``docs/benchmarks.md``).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable

from benchmarks.background_observer import background_observer
from benchmarks.fakes import (
    FakeModel,
    TrivialPlugin,
    engine_runner,
    tracing_plugin,
)
from benchmarks.recorder import recorder
from benchmarks.report import FLOOR, Check, Row
from benchmarks.runners import (
    Settings,
    backend_calls,
    floor_runner,
    implementations,
    many_at_once,
    succeeded,
)
from benchmarks.task_group import task_group
from benchmarks.timing import (
    Runner,
    alternating,
    engine_pairs,
    median,
    paired_ratio,
    ratio,
    tasks_left,
    time_batches,
)


def _complete(values: dict[str, float]) -> dict[str, float | None]:
    return {name: values.get(name) for name in ("engine", "bare", "mellea")}


async def cost_per_attempt(s: Settings) -> list[Row]:
    """Zero-latency backend, ``loop_budget=4``, never passing: µs per attempt."""
    rows = []
    for concurrency in (1, 4):
        model = FakeModel()
        runners = implementations(model, loop_budget=4, concurrency_budget=concurrency)
        work = await backend_calls(runners, model)
        seconds = await time_batches(runners, calls=s.calls, repeats=s.repeats, warmup=s.warmup)
        attempts = s.calls * 4 * concurrency
        values = _complete({n: median(v) / attempts * 1e6 for n, v in seconds.items()})
        rows.append(
            Row(
                "cost per attempt",
                f"0 ms backend, loop_budget=4, concurrency_budget={concurrency}",
                "µs/attempt",
                values,
                [Check("Mellea/engine", ratio(values, "mellea", "engine"), ">=", 8)],
                {"backend_calls_per_sample": work},
                engine_pairs(seconds),
            )
        )
    return rows


async def concurrency_scaling(s: Settings) -> list[Row]:
    """20 ms backend, ``loop_budget=1``: wall time of one call against the ideal 20 ms."""
    rows = []
    ideal = 0.020
    for concurrency in (1, 8, 64, 512):
        model = FakeModel(latency=ideal)
        runners = implementations(model, loop_budget=1, concurrency_budget=concurrency)
        runners[FLOOR] = floor_runner(model, concurrency_budget=concurrency)
        work = await backend_calls(runners, model)
        seconds = await time_batches(runners, calls=1, repeats=s.repeats, warmup=1)
        values = _complete({n: median(v) / ideal for n, v in seconds.items()})
        values[FLOOR] = median(seconds[FLOOR]) / ideal
        rows.append(
            Row(
                "concurrency scaling",
                f"20 ms backend, loop_budget=1, concurrency_budget={concurrency}",
                "x ideal 20 ms",
                values,
                [Check("engine", values["engine"], "<=", 1.15)],
                {"backend_calls_per_sample": work},
                engine_pairs(seconds),
            )
        )
    return rows


async def early_exit(s: Settings) -> list[Row]:
    """8 subsamples, attempt i takes 20 ms x (1+i), the first passes."""
    model = FakeModel(latency=lambda n: 0.020 * (1 + n), passes=lambda n: n == 0)
    runners = implementations(model, loop_budget=1, concurrency_budget=8)
    for run in runners.values():
        model.reset()
        await run()
    took: dict[str, list[float]] = {name: [] for name in runners}
    cancelled: dict[str, list[float]] = {name: [] for name in runners}
    left: dict[str, int] = dict.fromkeys(runners, 0)
    passed: dict[str, bool] = dict.fromkeys(runners, True)
    for repetition in range(s.repeats):
        for name, run in alternating(runners, repetition):
            model.reset()
            gc.collect()
            began = time.perf_counter()
            result = await run()
            took[name].append((time.perf_counter() - began) * 1e3)
            left[name] = max(left[name], tasks_left())
            cancelled[name].append(model.cancelled)
            passed[name] = passed[name] and succeeded(result)
    setting = "8 subsamples, attempt i takes 20 ms x (1+i), the first passes"
    ms = _complete({n: median(v) for n, v in took.items()})
    engine_ms = ms["engine"]
    return [
        Row(
            "early exit",
            setting,
            "ms to return",
            ms,
            [Check("engine/ideal", None if engine_ms is None else engine_ms / 20, "<=", 1.15)],
            {"ideal_ms": 20, "returned_the_passing_answer": passed},
            engine_pairs(took),
        ),
        Row(
            "early exit",
            setting,
            "siblings cancelled",
            _complete({n: median(v) for n, v in cancelled.items()}),
            [Check("engine", median(cancelled["engine"]), "==", 7)],
        ),
        Row(
            "early exit",
            setting,
            "tasks left behind",
            _complete({n: float(v) for n, v in left.items()}),
            [Check("engine", float(left["engine"]), "==", 0)],
        ),
    ]


async def many_calls(s: Settings) -> list[Row]:
    """``s.many`` concurrent ``sample()`` calls, ``loop_budget=2, concurrency_budget=2``, 5 ms."""
    model = FakeModel(latency=0.005)
    single = implementations(model, loop_budget=2, concurrency_budget=2)
    work = await backend_calls(single, model)
    runners, seconds, memory = await many_at_once(single, s)
    wall = _complete({n: median(v) * 1e3 for n, v in seconds.items()})
    per_second = _complete({n: s.many / median(v) for n, v in seconds.items()})
    left: dict[str, float] = {}
    for name, run in runners.items():
        await run()
        left[name] = float(tasks_left())
    mib = _complete(memory)
    setting = f"{s.many} concurrent calls, loop_budget=2, concurrency_budget=2, 5 ms backend"
    return [
        Row(
            "many calls",
            setting,
            "wall ms",
            wall,
            [Check("engine/bare", ratio(wall, "engine", "bare"), "<=", 2.5)],
            {"ideal_ms": 10, "backend_calls_per_sample": work},
            engine_pairs(seconds),
        ),
        Row(
            "many calls", setting, "calls/s", per_second, paired=engine_pairs(seconds, inverse=True)
        ),
        Row(
            "many calls",
            setting,
            "peak memory growth MiB",
            mib,
            [Check("engine/bare", ratio(mib, "engine", "bare"), "<=", 2)],
            {"measured_with": "tracemalloc, results kept until the peak is read"},
        ),
        Row(
            "many calls",
            setting,
            "tasks left behind",
            _complete(left),
            [Check("engine", left["engine"], "==", 0)],
        ),
    ]


async def hooks(s: Settings) -> list[Row]:
    """Cost per attempt with no plugin, a trivial plugin on every hook, the tracing plugin."""
    rows = []
    for concurrency in (1, 4):
        model = FakeModel()
        budgets = {"loop_budget": 4, "concurrency_budget": concurrency}
        runners = implementations(model, **budgets)
        variants: dict[str, Runner] = {
            "no plugin": runners.pop("engine"),
            "trivial": engine_runner(model, plugins=[TrivialPlugin()], **budgets),
            "per call": engine_runner(model, call_plugins=[TrivialPlugin()], **budgets),
        }
        tracing = tracing_plugin()
        if tracing is not None:
            variants["tracing"] = engine_runner(model, plugins=[tracing], **budgets)
        seconds = await time_batches(
            {**variants, **runners}, calls=s.calls, repeats=s.repeats, warmup=s.warmup
        )
        attempts = s.calls * 4 * concurrency
        us = {n: median(v) / attempts * 1e6 for n, v in seconds.items()}
        reference = {n: us.get(n) for n in ("bare", "mellea")}
        none = us["no plugin"]
        setting = f"0 ms backend, loop_budget=4, concurrency_budget={concurrency}"
        trivial, traced = us["trivial"], us.get("tracing")
        # Each repetition times the variants back to back: the ratio of a pair is measured
        # under the same load, so the median of those ratios moves less with the machine's
        # load than the ratio of the two medians (both are reported).
        paired = median(
            [t / n for t, n in zip(seconds["trivial"], seconds["no plugin"], strict=True)]
        )
        rows += [
            Row(
                "hooks",
                f"{setting}, no plugin",
                "µs/attempt",
                {"engine": none, **reference},
                paired=engine_pairs(seconds, "no plugin"),
            ),
            Row(
                "hooks",
                f"{setting}, trivial plugin on every hook",
                "µs/attempt",
                {"engine": trivial, **reference},
                [Check("÷ no plugin", paired, "<=", 2)],
                {"ratio_of_medians": trivial / none, "median_of_paired_ratios": paired},
                engine_pairs(seconds, "trivial"),
            ),
            Row(
                "hooks",
                f"{setting}, trivial plugin passed to every call",
                "µs/attempt",
                {"engine": us["per call"], **reference},
                [],
                {
                    "÷ registered on the sampler": us["per call"] / trivial,
                    "÷ registered on the sampler, paired": paired_ratio(
                        seconds, "per call", "trivial"
                    ),
                },
                engine_pairs(seconds, "per call"),
            ),
            Row(
                "hooks",
                f"{setting}, tracing plugin",
                "µs/attempt",
                {"engine": traced, **reference},
                [Check("engine µs", traced, "<", 1000)],
                {
                    "tracing_plugin": "builtin_plugins.tracing" if traced else "not available",
                    "otel_spans": getattr(tracing, "otel", None) is not None,
                },
                engine_pairs(seconds, "tracing") if traced is not None else {},
            ),
        ]
    return rows


SCENARIOS: dict[str, Callable[[Settings], Awaitable[list[Row]]]] = {
    "cost_per_attempt": cost_per_attempt,
    "concurrency_scaling": concurrency_scaling,
    "early_exit": early_exit,
    "many_calls": many_calls,
    "hooks": hooks,
    "background_observer": background_observer,
    "recorder": recorder,
    "task_group": task_group,
}
"""Every scenario, by the name ``--only`` takes."""
