"""The benchmarks' yardsticks do what the engine does: the bare loop and the timed batches."""

from __future__ import annotations

import asyncio

from benchmarks.baselines import bare_sample
from benchmarks.timing import paired_ratio, time_batches
from sampling_core import Generation, GenerationRequest


class TaskNotingBackend:
    """Answers ``"no"`` and notes the task each call ran in."""

    def __init__(self) -> None:
        self.tasks: list[asyncio.Task[object] | None] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.tasks.append(asyncio.current_task())
        return Generation("no")


def test_one_subsample_runs_inline_in_the_callers_task_as_the_engine_does():
    async def main() -> tuple[asyncio.Task[object] | None, list, list]:
        one, four = TaskNotingBackend(), TaskNotingBackend()
        await bare_sample(one, "q", lambda t: False, loop_budget=3, concurrency_budget=1)
        await bare_sample(four, "q", lambda t: False, loop_budget=1, concurrency_budget=4)
        return asyncio.current_task(), one.tasks, four.tasks

    caller, inline, spread = asyncio.run(main())
    assert inline == [caller] * 3
    assert caller not in spread and len(set(spread)) == 4


def test_batches_alternate_their_order_between_repetitions():
    order: list[str] = []

    def runner(name: str):
        async def run() -> None:
            order.append(name)

        return run

    runners = {name: runner(name) for name in "ABC"}
    seconds = asyncio.run(time_batches(runners, calls=1, repeats=4, warmup=0))
    assert "".join(order) == "ABCCBAABCCBA"
    assert {name: len(values) for name, values in seconds.items()} == dict.fromkeys("ABC", 4)


def test_the_paired_ratio_is_the_median_of_ratios_of_the_same_repetition():
    seconds = {"engine": [2.0, 9.0, 3.0], "bare": [1.0, 3.0, 2.0]}
    # ratios 2, 3, 1.5: their median is 2.0; the ratio of the medians (3.0 / 2.0) would be 1.5
    assert paired_ratio(seconds, "engine", "bare") == 2.0
    assert paired_ratio(seconds, "mellea", "engine") is None
