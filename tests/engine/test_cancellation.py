"""Early exit: the first success cancels its siblings; nothing outlives sample()."""

from __future__ import annotations

import anyio
import pytest

from hook_specs import HookName, hookimpl
from sampling_core import GenerationRequest, Sampler, ScriptedBackend
from tests.support.task_helpers import alive_tasks

pytestmark = pytest.mark.anyio


def is_win(text: str) -> bool:
    """says win"""
    return text == "win"


async def test_first_success_cancels_in_flight_siblings(hook_recorder):
    before = alive_tasks()
    started, finished = [], []
    winner_done = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        index = request.iteration.subsample_index
        started.append(index)
        if index == 2:
            await anyio.sleep(0.01)  # every sibling is in flight by then
            return "win"
        await anyio.sleep(30)  # cancelled long before this ends
        finished.append(index)
        return "late"

    sampler = Sampler(ScriptedBackend(reply), plugins=[hook_recorder], load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[is_win], concurrency_budget=4)
    winner_done.set()
    assert result.success and result.text == "win" and result.stop_reason == "success"
    assert sorted(started) == [0, 1, 2, 3]
    assert finished == []
    assert result.cancelled == 3
    assert result.iterations_used == 1
    end = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)[0]
    assert end.cancelled == 3 and end.iterations_used == 1
    assert len(hook_recorder.payloads(HookName.GENERATION_POST_CALL)) == 1
    assert alive_tasks() <= before


async def test_no_attempt_starts_once_the_call_is_decided():
    started = []

    async def reply(request: GenerationRequest) -> str:
        started.append(request.iteration.subsample_index)
        if len(started) == 1:
            return "win"  # at once: the call is decided before any sibling ran
        await anyio.sleep(30)
        return "late"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[is_win], concurrency_budget=4)
    assert result.success and result.text == "win"
    assert len(started) == 1  # no sibling called the backend after that
    assert result.cancelled == 0 and result.iterations_used == 1


async def test_nothing_finishes_after_sample_returns():
    before = alive_tasks()
    finished_after = []
    returned = False

    async def reply(request: GenerationRequest) -> str:
        index = request.iteration.subsample_index
        if index == 0:
            await anyio.sleep(0.001)
            return "win"
        try:
            await anyio.sleep(5)
        finally:
            if returned:
                finished_after.append(index)
        return "late"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[is_win], concurrency_budget=8, loop_budget=3)
    returned = True
    await anyio.sleep(0.01)
    assert result.success and finished_after == []
    assert result.cancelled == 7
    assert alive_tasks() <= before


async def test_a_completed_attempts_iteration_event_is_not_cut_short():
    delivered = []
    gate = anyio.Event()

    class SlowObserver:
        @hookimpl
        async def sampling_iteration(self, payload):
            if payload.text == "slow-fail":
                # Completed before the winner; its delivery must finish although the
                # winner cancels the group meanwhile.
                gate.set()
                await anyio.sleep(0.02)
            delivered.append(payload.iteration)

    async def reply(request: GenerationRequest) -> str:
        if request.iteration.subsample_index == 0:
            return "slow-fail"
        await gate.wait()
        return "win"

    sampler = Sampler(ScriptedBackend(reply), plugins=[SlowObserver()], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[is_win], concurrency_budget=2)
    assert result.success
    assert sorted(delivered) == sorted(a.iteration for a in result.attempts)
    assert result.iterations_used == len(delivered) == 2


async def test_cancelling_the_caller_leaves_no_task_and_fires_loop_end(hook_recorder):
    before = alive_tasks()
    entered = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        entered.set()
        await anyio.sleep(30)
        return "x"

    sampler = Sampler(ScriptedBackend(reply), plugins=[hook_recorder], load_entrypoints=False)
    async with anyio.create_task_group() as group:

        async def run() -> None:
            await sampler.sample("q", concurrency_budget=6, loop_budget=2)

        group.start_soon(run)
        await entered.wait()
        group.cancel_scope.cancel()
    assert alive_tasks() <= before
    ends = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)
    assert len(ends) == 1 and ends[0].stop_reason == "error"
    assert ends[0].cancelled == 6


async def test_timing_out_the_caller_leaves_no_task():
    before = alive_tasks()

    async def reply(request: GenerationRequest) -> str:
        await anyio.sleep(30)
        return "x"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    with pytest.raises(TimeoutError), anyio.fail_after(0.05):
        await sampler.sample("q", concurrency_budget=16, loop_budget=3)
    assert alive_tasks() <= before


async def test_ordered_selection_cancels_losers_at_the_same_attempt_number(hook_recorder):
    # Subsample 0 passes at attempt 1 while 1 and 2 are still in their attempt 1: their keys
    # (1, 1) and (1, 2) sort after (1, 0), so they can no longer win and are cancelled.
    started: list[tuple[int, int]] = []
    others_in_flight = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        info = request.iteration
        started.append((info.subsample_index, info.attempt))
        if info.subsample_index == 0:
            await others_in_flight.wait()
            return "win"
        if {(1, 1), (2, 1)} <= set(started):
            others_in_flight.set()
        await anyio.sleep(2.0)  # long after subsample 0 passed: only seen if not cancelled
        return "lose"

    sampler = Sampler(ScriptedBackend(reply), plugins=[hook_recorder], load_entrypoints=False)
    result = await sampler.sample(
        "q", requirements=[is_win], concurrency_budget=3, loop_budget=2, selection="ordered"
    )
    assert (result.picked.subsample_index, result.picked.attempt) == (0, 1)
    assert sorted(started) == [(0, 1), (1, 1), (2, 1)]
    assert result.cancelled == 2
    assert [(a.subsample_index, a.attempt) for a in result.attempts] == [(0, 1)]
    assert hook_recorder.iterations() == [1]


async def test_ordered_selection_is_reproducible_and_cancels_losers():
    # Subsample 3 passes first in time, but subsample 1 passes at the same attempt and
    # a lower index, so "ordered" must pick subsample 1 on every run.
    def latency(request: GenerationRequest) -> float:
        if request.iteration.attempt > 1:
            return 30.0  # later attempts never finish: they are cancelled once 1 passes
        return {0: 0.003, 1: 0.002, 2: 0.004, 3: 0.0}[request.iteration.subsample_index]

    def reply(request: GenerationRequest) -> str:
        return "win" if request.iteration.subsample_index in (1, 3) else "lose"

    texts = set()
    for _ in range(3):
        sampler = Sampler(ScriptedBackend(reply, latency=latency), load_entrypoints=False)
        result = await sampler.sample(
            "q", requirements=[is_win], concurrency_budget=4, loop_budget=3, selection="ordered"
        )
        texts.add((result.picked.subsample_index, result.picked.attempt))
        assert result.success
        # subsample 2 (slow, failing at attempt 1) can no longer win once 1 passed at attempt 1
        assert all(a.attempt == 1 for a in result.attempts)
        # subsample 0 must finish attempt 1 (it could still win with a lower index)
        assert any(a.subsample_index == 0 for a in result.attempts)
    assert texts == {(1, 1)}
