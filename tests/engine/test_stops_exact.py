"""Stops, cancellation and context, exactly: what ends a call early and what it leaves.

A stop from a plugin at loop start or in one subsample, a caller cancelling the call while
``sampling_loop_end`` or an inline subsample's ``sampling_iteration`` is being delivered
(both shielded, delivered whole), a ``BaseException`` from a subsample, and the caller's
context variables after an inline call.
"""

from __future__ import annotations

import anyio
import pytest
from structlog.contextvars import bind_contextvars, clear_contextvars, get_contextvars
from structlog.testing import capture_logs

from hook_specs import HookName, StopSampling, Usage, hookimpl
from sampling_core import ScriptedBackend
from sampling_core.engine.context import current_iteration
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import fields_of, passes, strict

pytestmark = pytest.mark.anyio


# -- stops ------------------------------------------------------------------------------------


async def test_a_stop_at_loop_start_makes_no_call_and_is_logged_with_its_reason():
    class Stop:
        @hookimpl
        def sampling_loop_start(self, payload):
            raise StopSampling("closed for today")

    backend, seen = ScriptedBackend(["ok"]), HookRecorder()
    with capture_logs() as logs:
        result = await strict(backend, Stop(), seen).sample("q", concurrency_budget=2)
    assert (result.stop_reason, backend.calls, result.attempts) == ("stopped_by_plugin", 0, [])
    # nothing generated, so nothing spent, and nothing priced
    assert (result.text, result.usage, result.usage.cost_usd) == (None, Usage(), None)
    assert fields_of(seen, HookName.SAMPLING_LOOP_END)[0]["usage"] == Usage(0, 0, None)
    assert [e for e in logs if e["event"] == "sampling.stopped_by_plugin"] == [
        {
            "event": "sampling.stopped_by_plugin",
            "log_level": "info",
            "sampling_id": result.sampling_id,
            "reason": "closed for today",
        }
    ]


async def test_a_stop_in_one_subsample_cancels_its_siblings_in_flight():
    class StopOnFirstAnswer:
        @hookimpl
        def generation_post_call(self, payload):
            raise StopSampling("seen enough")

    def latency(request):
        return 0.01 if request.iteration.subsample_index == 0 else 1.0

    backend = ScriptedBackend(["no"], latency=latency)
    result = await strict(backend, StopOnFirstAnswer()).sample(
        "q", requirements=[passes], loop_budget=2, concurrency_budget=3
    )
    # the siblings' one-second calls were cut short: none completed, all three in flight
    assert (result.stop_reason, result.attempts, result.cancelled) == ("stopped_by_plugin", [], 3)
    assert backend.calls == 3


async def test_loop_end_is_delivered_whole_when_the_caller_cancels_the_call():
    seen: list[tuple[str, int]] = []

    class SlowEnd:
        @hookimpl
        async def sampling_loop_end(self, payload):
            await anyio.sleep(0.01)  # cut short unless shielded
            seen.append((payload.stop_reason, payload.cancelled))

    started = anyio.Event()

    class Started:
        @hookimpl
        def generation_pre_call(self, payload):
            started.set()

    sampler = strict(ScriptedBackend(["ok"], latency=5.0), SlowEnd(), Started())
    async with anyio.create_task_group() as group:
        group.start_soon(sampler.sample, "q")
        await started.wait()
        group.cancel_scope.cancel()
    assert seen == [("error", 1)]


class Abort(BaseException):
    """Not an Exception: no subsample may swallow it."""


async def test_a_base_exception_in_one_subsample_propagates_as_itself():
    def failures(request):
        return Abort("stop everything") if request.iteration.subsample_index == 1 else None

    backend = ScriptedBackend(["no"], latency=0.001, failures=failures)
    with pytest.raises(Abort, match="stop everything"):
        await strict(backend).sample("q", requirements=[passes], concurrency_budget=2)


async def test_an_inline_call_gives_the_caller_its_context_back():
    bind_contextvars(request_id="r1", attempt="outer")
    try:
        result = await strict(ScriptedBackend(["no", "ok"])).sample(
            "q", requirements=[passes], loop_budget=2
        )
        assert result.iterations_used == 2
        assert get_contextvars() == {"request_id": "r1", "attempt": "outer"}
        assert current_iteration() is None
    finally:
        clear_contextvars()


# -- shielded delivery ------------------------------------------------------------------------


async def test_an_inline_subsamples_iteration_event_is_delivered_whole_when_the_caller_cancels():
    entered = anyio.Event()
    delivered: list[int] = []

    class SlowObserver:
        @hookimpl
        async def sampling_iteration(self, payload):
            entered.set()
            await anyio.sleep(0.02)
            delivered.append(payload.iteration)

    sampler = strict(ScriptedBackend(["no"]), SlowObserver())
    async with anyio.create_task_group() as group:

        async def call() -> None:
            await sampler.sample("q", requirements=[passes], loop_budget=3)

        group.start_soon(call)
        await entered.wait()
        group.cancel_scope.cancel()
    assert delivered == [1]  # finished although cancelled; no second attempt started


@pytest.mark.parametrize("ended_by", ["stop", "fail"])
def test_a_pass_recorded_after_the_call_ended_does_not_start_it_again(ended_by):
    """``early_exit=False``: a pass still being recorded after a stop (or a fatal error)
    leaves the call over; no attempt starts after it."""
    from hook_specs.records import Generation, IterationInfo, ValidationResult
    from sampling_core.engine.tally import Tally
    from sampling_core.strategies import RejectionSampling

    tally = Tally("s", RejectionSampling(), "first", False)
    tally.current_attempt = [1, 1]
    if ended_by == "stop":
        tally.stop(StopSampling("enough"))
    else:
        tally.fail(RuntimeError("a strategy broke"))
    tally.record(IterationInfo("s", 1, 1, 2), [], Generation("ok"), (ValidationResult(True),))
    assert tally.over and not tally.may_start(0, 2)
