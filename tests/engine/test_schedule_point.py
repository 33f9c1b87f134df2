"""A backend that answers without awaiting can neither starve other tasks nor ignore an
outer cancellation: the engine yields at least once a millisecond
(sampling_core.engine.suspension)."""

from __future__ import annotations

import anyio
import pytest

from hook_specs.records import Generation
from sampling_core import GenerationRequest, Sampler

pytestmark = pytest.mark.anyio


class Instant:
    """Answers at once, never awaiting (as a cache would)."""

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: GenerationRequest) -> Generation:
        self.calls += 1
        return Generation(text="no")


def never(text: str) -> bool:
    """never passes"""
    return False


@pytest.mark.parametrize("concurrency", [1, 4])
async def test_an_outer_timeout_ends_a_call_whose_backend_never_awaits(concurrency):
    backend = Instant()
    sampler = Sampler(
        backend, load_entrypoints=False, max_loop_budget=10**7, max_attempts_per_call=10**8
    )
    with anyio.move_on_after(0.05) as scope:
        await sampler.sample(
            "q", requirements=[never], loop_budget=10**6, concurrency_budget=concurrency
        )
    assert scope.cancelled_caught
    assert 0 < backend.calls < 10**6 * concurrency


async def test_a_loop_of_one_attempt_calls_that_never_await_is_cancellable():
    backend = Instant()
    sampler = Sampler(backend, load_entrypoints=False)
    with anyio.move_on_after(0.05) as scope:
        while True:  # each call alone is far shorter than the schedule interval
            await sampler.sample("q", requirements=[never])
    assert scope.cancelled_caught and backend.calls > 0


async def test_other_tasks_run_while_a_call_of_instant_attempts_runs():
    backend = Instant()
    sampler = Sampler(
        backend, load_entrypoints=False, max_loop_budget=10**6, max_attempts_per_call=10**8
    )
    ticks = 0
    call_done = False

    async def ticker() -> None:
        nonlocal ticks
        while not call_done:
            ticks += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as group:
        group.start_soon(ticker)
        await anyio.sleep(0)  # the ticker is running
        before = ticks
        await sampler.sample("q", requirements=[never], loop_budget=20_000)
        during = ticks - before
        call_done = True
    assert backend.calls == 20_000
    assert during >= 2  # the ticker ran while the call ran, not only after it


async def test_siblings_that_run_while_one_takes_the_schedule_point_do_not_take_it_too(
    monkeypatch,
):
    from sampling_core.engine import loop, suspension

    now = [100.0]  # a clock that moves only when the test says
    monkeypatch.setattr(suspension, "perf_counter", lambda: now[0])
    monkeypatch.setattr(loop.time, "perf_counter", lambda: now[0])
    # a second since the last yield: overdue
    suspension.note_yield(suspension.thread_clock(), now[0] - 1.0)
    taken = []
    checkpoint = anyio.lowlevel.checkpoint

    async def counted() -> None:
        taken.append(now[0])
        await checkpoint()

    monkeypatch.setattr(anyio.lowlevel, "checkpoint", counted)
    sampler = Sampler(Instant(), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never], concurrency_budget=4)
    assert result.iterations_used == 4
    # The first subsample to find the engine overdue yields; the three that run while it
    # waits find the yield already noted.
    assert taken == [100.0]
