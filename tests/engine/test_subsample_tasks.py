"""Subsample tasks follow anyio's cancellation rules with plain asyncio tasks and under trio.

Under asyncio, ``subsample_tasks`` gives plain asyncio tasks; under trio, an anyio task
group. The same assertions run on both, so both keep the same rules.
"""

from __future__ import annotations

import anyio
import pytest

from sampling_core.engine.subsample_tasks import (
    AnyioSubsampleTasks,
    AsyncioSubsampleTasks,
    subsample_tasks,
)

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


class Started:
    """Counts the subsamples that started; :attr:`all` is set once ``n`` have."""

    def __init__(self, n: int) -> None:
        self.n, self.count, self.all = n, 0, anyio.Event()

    def one(self) -> None:
        self.count += 1
        if self.count == self.n:
            self.all.set()


def unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def test_asyncio_gets_plain_tasks_and_trio_a_task_group(anyio_backend):
    expected = AsyncioSubsampleTasks if anyio_backend == "asyncio" else AnyioSubsampleTasks
    assert type(subsample_tasks(2)) is expected


async def test_run_returns_once_every_subsample_has_finished():
    done = []
    tasks = subsample_tasks(5)

    async def subsample(index: int) -> None:
        await anyio.lowlevel.checkpoint()
        done.append(index)

    await tasks.run(subsample, 5)
    assert sorted(done) == [0, 1, 2, 3, 4]


async def test_cancelled_before_starting_each_still_starts_and_stops_at_its_first_wait():
    started, finished = [], []
    tasks = subsample_tasks(4)

    async def subsample(index: int) -> None:
        started.append(index)
        if index == 0:
            tasks.cancel_all()  # before the others have started
        await anyio.sleep_forever()
        finished.append(index)

    with anyio.fail_after(10):
        await tasks.run(subsample, 4)
    assert sorted(started) == [0, 1, 2, 3]
    assert finished == []


async def test_a_shielded_block_is_not_cut_short_and_the_cancel_lands_after_it():
    order = []
    entered, cancelled = anyio.Event(), anyio.Event()
    tasks = subsample_tasks(2)

    async def subsample(index: int) -> None:
        if index == 0:
            with tasks.shielded(0):
                entered.set()
                await cancelled.wait()  # the cancel arrives while this waits
                order.append("shielded block finished")
            order.append("runs on to its next wait")
            await anyio.sleep_forever()
            order.append("never")
        else:
            await entered.wait()
            tasks.cancel_all()
            cancelled.set()
            await anyio.sleep_forever()

    with anyio.fail_after(10):
        await tasks.run(subsample, 2)
    assert order == ["shielded block finished", "runs on to its next wait"]


async def test_cancelling_one_subsample_leaves_the_others():
    finished = []
    started, release = Started(3), anyio.Event()
    tasks = subsample_tasks(3)

    async def subsample(index: int) -> None:
        started.one()
        await release.wait()
        finished.append(index)

    async def cancel_one_then_release() -> None:
        await started.all.wait()
        tasks.cancel(1)
        await anyio.lowlevel.checkpoint()
        release.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_one_then_release)
            await tasks.run(subsample, 3)
    assert sorted(finished) == [0, 2]


async def test_cancelling_the_caller_cancels_all_waits_for_them_and_raises_its_cancellation():
    cleaned_up, outcome = [], []
    started = Started(3)
    tasks = subsample_tasks(3)

    async def subsample(index: int) -> None:
        started.one()
        try:
            await anyio.sleep_forever()
        finally:
            with tasks.shielded(index):
                await anyio.lowlevel.checkpoint()  # cleanup that awaits, shielded
            cleaned_up.append(index)

    async def caller() -> None:
        try:
            await tasks.run(subsample, 3)
            outcome.append("returned")
        except anyio.get_cancelled_exc_class():
            outcome.append("cancelled")
            raise

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:  # swallows only its own cancellation
            group.start_soon(caller)
            await started.all.wait()
            group.cancel_scope.cancel()
    assert outcome == ["cancelled"]
    assert sorted(cleaned_up) == [0, 1, 2]


async def test_an_exception_escaping_a_subsample_cancels_the_rest_and_is_raised():
    stopped = []
    tasks = subsample_tasks(3)

    async def subsample(index: int) -> None:
        if index == 1:
            await anyio.lowlevel.checkpoint()
            raise Boom("subsample 1")
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append(index)

    with anyio.fail_after(10), pytest.raises(BaseException) as caught:
        await tasks.run(subsample, 3)
    assert isinstance(unwrap(caught.value), Boom)
    assert sorted(stopped) == [0, 2]
