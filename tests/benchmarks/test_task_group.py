"""The task-group benchmark really runs the engine on an anyio task group, and puts the
engine's own runner back afterwards."""

from __future__ import annotations

import asyncio

from benchmarks.fakes import FakeModel, engine_runner
from benchmarks.task_group import with_runner
from sampling_core.engine import loop as loop_module
from sampling_core.engine.subsample_tasks import AnyioSubsampleTasks, subsample_tasks


class CountedTaskGroup(AnyioSubsampleTasks):
    made = 0

    def __init__(self, count: int) -> None:
        super().__init__(count)
        CountedTaskGroup.made += 1


def test_the_injected_runner_starts_the_subsamples_and_is_removed_after() -> None:
    model = FakeModel()
    run = with_runner(engine_runner(model, loop_budget=2, concurrency_budget=3), CountedTaskGroup)
    result = asyncio.run(run())
    assert CountedTaskGroup.made == 1
    assert result.iterations_used == 6 and model.calls == 6
    assert loop_module.subsample_tasks is subsample_tasks
