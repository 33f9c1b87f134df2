"""The call's tally, exactly: loop-end fields, token and cost sums, errors, the pick, the order.

What a user reads in the ``SamplingResult`` and a plugin in ``sampling_loop_end`` is compared
whole, with exact numbers, so a mutant of :mod:`sampling_core.engine.tally` that shifts a count,
drops a field or picks another attempt fails here.
"""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

from hook_specs import HookName, StopSampling, hookimpl
from hook_specs.records import Generation, Usage
from sampling_core import ScriptedBackend
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import fields_of, passes, strict

pytestmark = pytest.mark.anyio


def priced(text: str, tokens_in: int, tokens_out: int, cost: float | None) -> Generation:
    return Generation(text, usage=Usage(tokens_in, tokens_out, cost), latency_s=0.0)


async def test_loop_end_fields_of_a_success_are_exactly_the_results():
    replies = [priced("no", 3, 5, 0.25), priced("ok", 7, 11, 0.5)]
    seen = HookRecorder()
    sampler = strict(ScriptedBackend(replies), seen)
    began = time.perf_counter()
    result = await sampler.sample("q", requirements=[passes], loop_budget=4)
    wall = time.perf_counter() - began
    assert result.usage == Usage(10, 16, 0.75)
    assert result.value is None and result.errors == [] and result.plugin_errors == []
    assert 0 < result.elapsed_s <= wall
    [fields] = fields_of(seen, HookName.SAMPLING_LOOP_END)  # exactly the model's fields
    assert fields == {
        "sampling_id": result.sampling_id,
        "strategy_name": "RejectionSampling",
        "prompt_key": None,
        "success": True,
        "stop_reason": "success",
        "iterations_used": 2,
        "cancelled": 0,
        "not_started": 0,
        "text": "ok",
        "usage": Usage(10, 16, 0.75),
        "cancelled_usage": Usage(),
        "loop_budget": 4,
        "concurrency_budget": 1,
        "elapsed_s": result.elapsed_s,
        "error_count": 0,
        "exception": None,
        "attempts": result.attempts,
        "picked": 2,
        "failure_reason": None,
    }


async def test_loop_end_fields_on_the_error_path():
    boom = ValueError("backend down")
    seen = HookRecorder()
    sampler = strict(ScriptedBackend(["x"], failures=lambda request: boom), seen)
    began = time.perf_counter()
    with pytest.raises(ValueError, match="backend down"):
        await sampler.sample("q", requirements=[passes], loop_budget=3, concurrency_budget=2)
    wall = time.perf_counter() - began
    [fields] = fields_of(seen, HookName.SAMPLING_LOOP_END)
    elapsed = fields.pop("elapsed_s")
    assert 0 < elapsed <= wall
    assert fields == {
        "sampling_id": fields["sampling_id"],
        "strategy_name": "RejectionSampling",
        "prompt_key": None,
        "success": False,
        "stop_reason": "error",
        "iterations_used": 0,
        "cancelled": 0,
        "not_started": 0,
        "text": None,
        "usage": Usage(0, 0, None),
        "cancelled_usage": Usage(),
        "loop_budget": 3,
        "concurrency_budget": 2,
        "error_count": 2,
        "exception": boom,
        "attempts": [],
        "picked": None,
        "failure_reason": "ValueError: backend down",
    }


@pytest.mark.parametrize(
    ("costs", "total"),
    [
        ((0.25, 0.5, 1.0), 1.75),
        ((None, 0.5, 1.0), None),
        ((0.25, None, 1.0), None),
        ((0.0, 0.0, 0.0), 0.0),
    ],
)
async def test_usage_sums_every_call_and_prices_only_when_every_call_was_priced(costs, total):
    replies = [priced("no", 2 + i, 10 * (i + 1), cost) for i, cost in enumerate(costs)]
    result = await strict(ScriptedBackend(replies)).sample(
        "q", requirements=[passes], loop_budget=3
    )
    assert result.stop_reason == "budget_exhausted"
    assert result.usage == Usage(2 + 3 + 4, 10 + 20 + 30, total)


async def test_a_backend_error_is_kept_with_its_position_and_logged():
    boom = ConnectionResetError("peer gone")
    backend = ScriptedBackend(["no"], failures={2: boom})
    with capture_logs() as logs:
        result = await strict(backend).sample("q", requirements=[passes], loop_budget=3)
    [error] = result.errors
    assert (error.subsample_index, error.attempt, error.iteration) == (0, 2, 2)
    assert error.exception is boom
    assert [e for e in logs if e["event"] == "sampling.backend_error"] == [
        {
            "event": "sampling.backend_error",
            "log_level": "warning",
            "error_type": "ConnectionResetError",
            "error": "peer gone",
        }
    ]
    assert result.iterations_used == 1 and result.stop_reason == "budget_exhausted"


async def test_attempts_keep_the_messages_they_sent():
    result = await strict(ScriptedBackend(["no", "ok"])).sample(
        "q", requirements=[passes], loop_budget=2
    )
    first, second = result.attempts
    assert first.messages == [{"role": "user", "content": "q"}]
    assert second.messages == [{"role": "user", "content": "q"}]
    assert (first.sequence, second.sequence) == (1, 2)
    assert (first.iteration, second.iteration) == (1, 2)


async def test_attempts_are_listed_by_position_whatever_order_they_completed_in():
    def slow_first(request):
        return 0.03 if request.iteration.subsample_index == 0 else 0.0

    backend = ScriptedBackend(lambda r: f"s{r.iteration.subsample_index}", latency=slow_first)
    result = await strict(backend).sample("q", requirements=[passes], concurrency_budget=2)
    assert [a.text for a in result.attempts] == ["s0", "s1"]
    assert [a.sequence for a in result.attempts] == [2, 1]


async def test_without_early_exit_a_pass_cancels_nothing_and_the_first_to_pass_is_picked():
    def reply(request):
        info = request.iteration
        return "no" if info.subsample_index == 0 else f"ok{info.subsample_index}"

    def latency(request):
        return 0.01 if request.iteration.subsample_index == 0 else 0.0

    backend = ScriptedBackend(reply, latency=latency)
    result = await strict(backend).sample(
        "q", requirements=[passes], loop_budget=3, concurrency_budget=2, early_exit=False
    )
    assert backend.calls == 4  # subsample 0's three failures, subsample 1's first pass
    assert [(a.subsample_index, a.attempt) for a in result.attempts] == [
        (0, 1),
        (0, 2),
        (0, 3),
        (1, 1),
    ]
    assert (result.text, result.cancelled, result.stop_reason) == ("ok1", 0, "success")


async def test_the_winner_is_the_first_pass_not_the_strategys_pick():
    def reply(request):
        return f"ok{request.iteration.subsample_index}"

    def latency(request):
        return 0.02 if request.iteration.subsample_index == 0 else 0.0

    backend = ScriptedBackend(reply, latency=latency)
    result = await strict(backend).sample(
        "q", requirements=[passes], concurrency_budget=2, early_exit=False
    )
    assert [a.text for a in result.attempts] == ["ok0", "ok1"]
    assert result.text == "ok1" and result.picked is not None
    assert (result.picked.subsample_index, result.picked.sequence) == (1, 1)


async def test_a_stop_before_the_first_attempt_starts_no_sibling():
    class StopFirst:  # whichever subsample asks first (trio may start either)
        asked = 0

        @hookimpl
        def generation_pre_call(self, payload):
            self.asked += 1
            if self.asked == 1:
                raise StopSampling("enough")

    backend = ScriptedBackend(["no"])
    result = await strict(backend, StopFirst()).sample(
        "q", requirements=[passes], loop_budget=2, concurrency_budget=2
    )
    assert backend.calls == 0
    assert (result.stop_reason, result.attempts, result.errors) == ("stopped_by_plugin", [], [])


class Answer(BaseModel):
    n: int


async def test_value_is_none_without_a_format_and_when_the_pick_does_not_parse():
    plain = await strict(ScriptedBackend(['{"n": 1}'])).sample("q")
    assert plain.value is None
    broken = await strict(ScriptedBackend(["no json"])).sample("q", format=Answer, loop_budget=1)
    assert (broken.text, broken.value, broken.success) == ("no json", None, False)
    parsed = await strict(ScriptedBackend(['{"n": 3}'])).sample("q", format=Answer)
    assert parsed.value == Answer(n=3)
