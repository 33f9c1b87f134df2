"""Iteration numbering, sequence order, and the current attempt in context variables."""

from __future__ import annotations

import anyio
import pytest
import structlog

from hook_specs import HookName, ValidationResult, hookimpl
from sampling_core import (
    GenerationRequest,
    Requirement,
    Sampler,
    ScriptedBackend,
    current_iteration,
)

pytestmark = pytest.mark.anyio


def never(text: str) -> bool:
    """never passes"""
    return False


async def test_ids_are_1_to_L_times_C_and_match_current_iteration_everywhere(hook_recorder):
    seen_in_backend = []
    seen_in_check = []

    async def reply(request: GenerationRequest) -> str:
        info = current_iteration()
        assert info is not None and info == request.iteration
        seen_in_backend.append(info)
        await anyio.sleep(0.001 * (3 - info.subsample_index))
        return f"answer {info.iteration}"

    async def check(text: str) -> ValidationResult:
        info = current_iteration()
        seen_in_check.append((info, text))
        return ValidationResult(False, "no")

    assert current_iteration() is None
    sampler = Sampler(ScriptedBackend(reply), plugins=[hook_recorder], load_entrypoints=False)
    result = await sampler.sample(
        "q", requirements=[Requirement("async never", check)], loop_budget=2, concurrency_budget=3
    )
    assert current_iteration() is None

    assert {i.iteration for i in seen_in_backend} == set(range(1, 7))
    assert [a.iteration for a in result.attempts] == [1, 2, 3, 4, 5, 6]
    assert [(a.subsample_index, a.attempt) for a in result.attempts] == [
        (s, a) for s in range(3) for a in (1, 2)
    ]
    for attempt in result.attempts:
        assert attempt.iteration == attempt.subsample_index * 2 + attempt.attempt
    # every check saw the attempt whose text it checked
    for info, text in seen_in_check:
        assert text == f"answer {info.iteration}"

    per_attempt = [
        HookName.GENERATION_PRE_CALL,
        HookName.GENERATION_CALL,
        HookName.GENERATION_CANCELLED,
        HookName.GENERATION_CHUNK,
        HookName.GENERATION_POST_CALL,
        HookName.SAMPLING_VALIDATE,
        HookName.SAMPLING_ITERATION,
        HookName.SAMPLING_REPAIR,
    ]
    for hook, payload, info in ((e.hook, e.payload, e.iteration) for e in hook_recorder):
        if hook in per_attempt:
            assert info is not None
            assert (info.iteration, info.subsample_index, info.attempt) == (
                payload.iteration,
                payload.subsample_index,
                payload.attempt,
            )
            assert info.sampling_id == payload.sampling_id == result.sampling_id
        else:
            assert info is None  # loop start, the call's work and end run outside any attempt
    assert sorted(p.iteration for p in hook_recorder.payloads(HookName.SAMPLING_ITERATION)) == list(
        range(1, 7)
    )


async def test_sequence_is_completion_order_and_iteration_is_not_monotonic(hook_recorder):
    # Later subsamples answer first: subsample i waits until subsample i+1's attempt was
    # delivered, so iterations complete in the order 4, 3, 2, 1 whatever the load.
    delivered = {i: anyio.Event() for i in range(1, 5)}

    class Gate:
        @hookimpl
        def sampling_iteration(self, payload):
            delivered[payload.iteration].set()

    async def reply(request: GenerationRequest) -> str:
        index = request.iteration.subsample_index
        if index < 3:
            await delivered[index + 2].wait()  # iteration of subsample index+1
        return "x"

    sampler = Sampler(
        ScriptedBackend(reply), plugins=[hook_recorder, Gate()], load_entrypoints=False
    )
    result = await sampler.sample("q", requirements=[never], loop_budget=1, concurrency_budget=4)
    events = hook_recorder.payloads(HookName.SAMPLING_ITERATION)
    assert [e.sequence for e in events] == [1, 2, 3, 4]
    assert [e.iteration for e in events] == [4, 3, 2, 1]
    assert sorted(a.sequence for a in result.attempts) == [1, 2, 3, 4]


async def test_iteration_events_are_delivered_one_at_a_time_in_sequence_order():
    active = 0
    overlaps = 0
    delivered = []

    class SlowObserver:
        @hookimpl
        async def sampling_iteration(self, payload):
            nonlocal active, overlaps
            active += 1
            overlaps += active > 1
            await anyio.sleep(0.001 * (payload.iteration % 3))
            delivered.append(payload.sequence)
            active -= 1

    sampler = Sampler(
        ScriptedBackend(["x"], latency=0.0005), plugins=[SlowObserver()], load_entrypoints=False
    )
    result = await sampler.sample("q", requirements=[never], loop_budget=3, concurrency_budget=5)
    assert overlaps == 0
    assert delivered == list(range(1, 16))
    assert result.iterations_used == 15


async def test_structlog_contextvars_carry_the_attempt():
    lines = []

    def check(text: str) -> bool:
        """logs"""
        structlog.get_logger("test").info("checking")
        lines.append(dict(structlog.contextvars.get_contextvars()))
        return False

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[check], loop_budget=2, concurrency_budget=2)
    ids = {(c["subsample_index"], c["attempt"], c["iteration"]) for c in lines}
    assert ids == {(0, 1, 1), (0, 2, 2), (1, 1, 3), (1, 2, 4)}
    assert {c["sampling_id"] for c in lines} == {result.sampling_id}
    assert "iteration" not in structlog.contextvars.get_contextvars()


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_every_call_binds_its_attempts_even_after_the_context_was_cleared(concurrency):
    """The first call binds through structlog; later calls set the same variables directly.
    Either way each log line of an attempt carries that attempt, a cleared context changes
    nothing, and the caller's own values come back when a call ends."""
    seen: list[dict[str, object]] = []

    def check(text: str) -> bool:
        """logs"""
        seen.append(dict(structlog.contextvars.get_contextvars()))
        return False

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    structlog.contextvars.bind_contextvars(attempt="the caller's", request="r-1")
    try:
        for _ in range(3):
            seen.clear()
            result = await sampler.sample(
                "q", requirements=[check], loop_budget=3, concurrency_budget=concurrency
            )
            got = sorted((c["subsample_index"], c["attempt"], c["iteration"]) for c in seen)
            assert got == [(i, a, i * 3 + a) for i in range(concurrency) for a in range(1, 4)]
            assert {c["sampling_id"] for c in seen} == {result.sampling_id}
            assert {c["request"] for c in seen} == {"r-1"}  # the caller's bindings show too
            after = structlog.contextvars.get_contextvars()
            assert after == {"attempt": "the caller's", "request": "r-1"}
            assert current_iteration() is None
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(attempt="the caller's", request="r-1")
    finally:
        structlog.contextvars.clear_contextvars()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_task_an_attempt_leaves_running_sees_its_subsamples_later_attempts():
    import asyncio

    seen: list[tuple[int, int, int] | None] = []
    second_started = asyncio.Event()
    tasks: list[asyncio.Task[None]] = []

    async def later(own: int) -> None:  # started by attempt 1, still running in attempt 2
        await second_started.wait()
        info = current_iteration()
        logged = structlog.contextvars.get_contextvars()["attempt"]
        seen.append((own, info.attempt, logged) if info is not None else None)

    async def reply(request: GenerationRequest) -> str:
        info = current_iteration()
        assert info is not None
        if info.attempt == 1:
            own = info.attempt  # what it must remember of its own, read before it starts
            tasks.append(asyncio.create_task(later(own)))
        else:
            second_started.set()
            await asyncio.sleep(0)  # the task runs while attempt 2 runs
        return "x"

    await Sampler(ScriptedBackend(reply), load_entrypoints=False).sample(
        "q", requirements=[never], loop_budget=2
    )
    await asyncio.gather(*tasks)
    assert seen == [(1, 2, 1)]  # its own, the subsample's now, and its log lines' own
