"""Hook delivery, exactly: each attempt payload's fields, and budgets written at loop start.

Compares what a plugin reads and what a user reads in a budget error, whole, so a change of a
field or a message in :mod:`sampling_core.hooks.channel` fails here. Faults and monitors are in
``hooks/test_delivery_faults_exact.py``.
"""

from __future__ import annotations

import pytest

from hook_specs import HookName, hookimpl
from hook_specs.records import WHOLE, Generation, Usage, ValidationResult
from sampling_core import BudgetError, Sampler, ScriptedBackend
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import events_of, starts_ok, strict

pytestmark = pytest.mark.anyio


# The per-attempt hooks that fire once the backend has answered.
AFTER_THE_CALL = (
    HookName.GENERATION_POST_CALL,
    HookName.SAMPLING_VALIDATE,
    HookName.SAMPLING_ITERATION,
    HookName.SAMPLING_REPAIR,
)


async def test_each_attempt_payload_holds_exactly_what_the_attempt_did():
    first = Generation("no way", usage=Usage(1, 2, 0.25), latency_s=0.5, model="m")
    second = Generation("ok then", usage=Usage(3, 2, 0.5), latency_s=0.25, model="m")
    seen = HookRecorder()
    result = await strict(ScriptedBackend([first, second]), seen).sample(
        "q", requirements=[starts_ok], loop_budget=2
    )
    call = {
        "sampling_id": result.sampling_id,
        "strategy_name": "RejectionSampling",
        "prompt_key": None,  # outside a batch run
    }
    asked = [{"role": "user", "content": "q"}]
    failed = ValidationResult(False, "does not start with ok", 0.0, "starts with ok")
    passed = ValidationResult(True, None, 1.0, "starts with ok")
    repaired = result.attempts[1].messages
    one = {**call, "subsample_index": 0, "attempt": 1, "iteration": 1}
    two = {**call, "subsample_index": 0, "attempt": 2, "iteration": 2}
    assert events_of(seen, *AFTER_THE_CALL) == [
        (
            "generation_post_call",
            {
                **one,
                "sequence": None,
                "generation": first,
                "latency_s": 0.5,
                "retry": 0,
                "purpose": "sample",
            },
        ),
        (
            "sampling_validate",
            {
                **one,
                "sequence": None,
                "text": "no way",
                "messages": asked,
                "generation": first,
                "results": [failed],
            },
        ),
        (
            "sampling_iteration",
            {
                **one,
                "sequence": 1,
                "generation": first,
                "text": "no way",
                "validations": [failed],
                "passed": False,
                "valid_count": 0,
                "total_count": 1,
                "latency_s": 0.5,
                "usage": Usage(1, 2, 0.25),
                "cached": False,
                "stopped_early": False,
                "provenance": WHOLE,
            },
        ),
        (
            "sampling_repair",
            {
                **one,
                "sequence": 1,
                "text": "no way",
                "validations": [failed],
                "failure_reasons": ["does not start with ok"],
                "next_attempt": 2,
                "messages": repaired,
            },
        ),
        (
            "generation_post_call",
            {
                **two,
                "sequence": None,
                "generation": second,
                "latency_s": 0.25,
                "retry": 0,
                "purpose": "sample",
            },
        ),
        (
            "sampling_validate",
            {
                **two,
                "sequence": None,
                "text": "ok then",
                "messages": repaired,
                "generation": second,
                "results": [passed],
            },
        ),
        (
            "sampling_iteration",
            {
                **two,
                "sequence": 2,
                "generation": second,
                "text": "ok then",
                "validations": [passed],
                "passed": True,
                "valid_count": 1,
                "total_count": 1,
                "latency_s": 0.25,
                "usage": Usage(3, 2, 0.5),
                "cached": False,
                "stopped_early": False,
                "provenance": WHOLE,
            },
        ),
    ]


async def test_budgets_a_plugin_sets_at_loop_start_are_checked_and_it_is_named():
    class Greedy:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.concurrency_budget = 0

    with pytest.raises(BudgetError) as raised:
        await Sampler(ScriptedBackend(["x"]), plugins=[Greedy()], load_entrypoints=False).sample(
            "q"
        )
    assert "concurrency_budget" in str(raised.value) and "plugin 'Greedy'" in str(raised.value)

    class TooMany:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.loop_budget = 5
            payload.concurrency_budget = 5

    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[TooMany()],
        load_entrypoints=False,
        max_attempts_per_call=20,
    )
    with pytest.raises(BudgetError) as raised:
        await sampler.sample("q")
    assert "plugin 'TooMany'" in str(raised.value)


class OnlyLoop:
    @hookimpl
    def sampling_loop_start(self, payload):
        payload.loop_budget = 5


class OnlyConcurrency:
    @hookimpl
    def sampling_loop_start(self, payload):
        payload.concurrency_budget = 5


@pytest.mark.parametrize(
    ("plugin", "given", "changed"),
    [
        (OnlyLoop(), {"concurrency_budget": 5}, "loop_budget"),
        (OnlyConcurrency(), {"loop_budget": 5}, "concurrency_budget"),
    ],
)
async def test_too_many_attempts_name_the_budget_a_plugin_changed_and_the_plugin(
    plugin, given, changed
):
    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[plugin], load_entrypoints=False, max_attempts_per_call=20
    )
    with pytest.raises(BudgetError) as raised:
        await sampler.sample("q", **given)
    assert raised.value.field == changed and raised.value.value == 5
    assert str(raised.value) == (
        f"{changed}=5 set by plugin {type(plugin).__name__!r} is invalid: "
        "loop_budget x concurrency_budget = 5 x 5 = 25 attempts exceeds the sampler's cap of "
        "20 (max_attempts_per_call on Sampler): a call keeps every attempt it makes"
    )


async def test_a_loop_budget_changed_alone_is_checked():
    class LoopZero:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.loop_budget = 0

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[LoopZero()], load_entrypoints=False)
    with pytest.raises(BudgetError) as raised:
        await sampler.sample("q")
    assert str(raised.value) == "loop_budget=0 set by plugin 'LoopZero' is invalid: must be >= 1"
