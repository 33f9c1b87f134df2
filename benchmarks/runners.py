"""What every scenario runs: each implementation's runner on the same fake model, and the
helpers that run one as many concurrent calls."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchmarks import mellea_baseline
from benchmarks.baselines import BareResult, bare_sample, floor_sample
from benchmarks.fakes import PROMPT, EngineBackend, FakeModel, engine_runner, passes
from benchmarks.timing import Runner, median, peak_memory_growth, time_batches
from sampling_core import SamplingResult


@dataclass(frozen=True, slots=True)
class Settings:
    """How much to measure. ``quick`` is the smoke mode: every scenario, tiny counts."""

    repeats: int = 7
    calls: int = 300
    many: int = 1000
    warmup: int = 20
    quick: bool = False

    @classmethod
    def smoke(cls) -> Settings:
        """The settings of ``--quick``."""
        return cls(repeats=1, calls=3, many=50, warmup=1, quick=True)


def bare_runner(model: FakeModel, *, loop_budget: int, concurrency_budget: int) -> Runner:
    """One bare-loop call on ``model``."""
    backend = EngineBackend(model)

    async def run() -> BareResult:
        return await bare_sample(
            backend,
            PROMPT,
            passes,
            loop_budget=loop_budget,
            concurrency_budget=concurrency_budget,
        )

    return run


def floor_runner(model: FakeModel, *, concurrency_budget: int) -> Runner:
    """One task per subsample awaiting the backend, nothing else: the event loop's floor."""
    backend = EngineBackend(model)

    async def run() -> None:
        await floor_sample(backend, PROMPT, concurrency_budget=concurrency_budget)

    return run


def implementations(model: FakeModel, *, loop_budget: int, concurrency_budget: int) -> dict:
    """The engine, the bare loop and (when installed) Mellea, on the same ``model``."""
    budgets = {"loop_budget": loop_budget, "concurrency_budget": concurrency_budget}
    runners: dict[str, Runner] = {
        "engine": engine_runner(model, **budgets),
        "bare": bare_runner(model, **budgets),
    }
    if mellea_baseline.available() is None:
        runners["mellea"] = mellea_baseline.mellea_runner(model, **budgets)
    return runners


def succeeded(result: Any) -> bool:
    """Whether an implementation's result holds a passing answer."""
    if isinstance(result, SamplingResult):
        return result.success
    if isinstance(result, BareResult):
        return result.winner is not None
    return bool(result.success)  # Mellea's SamplingResult


async def backend_calls(runners: dict[str, Runner], model: FakeModel) -> dict[str, int]:
    """How many backend calls one run of each implementation makes (the same work?)."""
    calls = {}
    for name, run in runners.items():
        model.reset()
        await run()
        calls[name] = model.calls
    return calls


def _all_at_once(run: Runner, count: int) -> Callable[[], Awaitable[list[Any]]]:
    async def run_all() -> list[Any]:
        # A task group rather than asyncio.gather, whose finished tasks (and their results)
        # stay alive after it returns and would weigh on the next implementation's GC.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run()) for _ in range(count)]
        return [task.result() for task in tasks]

    return run_all


async def many_at_once(
    single: Mapping[str, Runner], s: Settings
) -> tuple[dict[str, Runner], dict[str, list[float]], dict[str, float]]:
    """Each runner as ``s.many`` concurrent calls: those runners, their timed seconds
    (``s.repeats`` interleaved batches of one) and their peak memory growth in MiB (median
    of up to three separate runs)."""
    runners = {name: _all_at_once(run, s.many) for name, run in single.items()}
    seconds = await time_batches(runners, calls=1, repeats=s.repeats, warmup=1)
    memory = {}
    for name, run in runners.items():
        growth = [await peak_memory_growth(run) for _ in range(min(3, s.repeats))]
        memory[name] = median(growth) / 2**20
    return runners, seconds, memory
