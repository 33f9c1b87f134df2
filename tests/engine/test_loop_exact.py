"""The sampling loop, exactly as plugins see it: loop start, each backend call, checks.

Every payload a plugin reads is compared whole (its field set is the payload model's), with
exact numbers: the call's settings at ``sampling_loop_start``; the messages, options, retry
number and purpose of each ``generation_pre_call``; ``generation_error``'s retry decision and
wait; the latency the engine measures; what a check's context holds. Stops and cancellation
are in ``engine/test_stops_exact.py``, a check's own model calls in
``requirements/test_judge.py``.
"""

from __future__ import annotations

import time

import anyio
import pytest

from hook_specs import HookName, hookimpl
from sampling_core import GenerationRequest, RepairTemplate, RetryPolicy, ScriptedBackend
from sampling_core.backends.transport import TransientBackendError
from sampling_core.engine.seeds import derive_seed
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import BACKEND_CALLS, RETRY, events_of, fields_of, passes, strict

pytestmark = pytest.mark.anyio


def short(text: str) -> bool:
    """at most three words"""
    return len(text.split()) <= 3


H = HookName


# -- sampling_loop_start ----------------------------------------------------------------------


async def test_loop_start_shows_the_calls_settings_exactly():
    seen = HookRecorder()
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "q"}]
    result = await strict(ScriptedBackend(["ok"]), seen).sample(
        messages,
        requirements=[passes, short],
        loop_budget=2,
        concurrency_budget=3,
        selection="ordered",
        seed=7,
        options={"temperature": 0.5},
    )
    assert fields_of(seen, H.SAMPLING_LOOP_START) == [
        {
            "sampling_id": result.sampling_id,
            "strategy_name": "RejectionSampling",
            "prompt_key": None,  # outside a batch run
            "loop_budget": 2,
            "concurrency_budget": 3,
            "messages": messages,
            "requirements": ["starts with ok", "at most three words"],
            "selection": "ordered",
            "seed": 7,
            "options": {"temperature": 0.5},
            "provider_name": "samplehooks.scripted",
        }
    ]


async def test_loop_start_without_seed_options_or_provider_name():
    class Plain:
        async def generate(self, request: GenerationRequest) -> str:
            return "ok"

    seen = HookRecorder()
    await strict(Plain(), seen).sample("q")
    [fields] = fields_of(seen, H.SAMPLING_LOOP_START)
    assert (fields["seed"], fields["options"], fields["provider_name"]) == (None, {}, None)
    assert (fields["requirements"], fields["selection"]) == ([], "first")


async def test_what_a_plugin_changes_in_loop_starts_lists_stays_out_of_the_call():
    class Meddler:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.messages[0]["content"] = "changed"
            payload.messages.append({"role": "user", "content": "more"})
            payload.options["temperature"] = 2.0

    backend = ScriptedBackend(["ok"])
    await strict(backend, Meddler()).sample("q", options={"temperature": 0.1})
    [request] = backend.requests
    assert request.messages == [{"role": "user", "content": "q"}]
    assert request.options == {"temperature": 0.1}


async def test_budgets_written_at_loop_start_are_the_ones_the_call_runs_with():
    class Wider:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.loop_budget = 3
            payload.concurrency_budget = 2

    backend = ScriptedBackend(["no"])
    result = await strict(backend, Wider()).sample("q", requirements=[passes])
    assert (result.loop_budget, result.concurrency_budget, backend.calls) == (3, 2, 6)
    assert sorted(a.iteration for a in result.attempts) == [1, 2, 3, 4, 5, 6]


# -- what a check sees ------------------------------------------------------------------------


async def test_a_check_sees_its_attempts_messages_row_iteration_and_options():
    contexts = []

    def looks(text, context):
        """looks at its context"""
        contexts.append(context)
        return text == "ok"

    result = await strict(ScriptedBackend(["no", "ok"])).sample(
        "q",
        requirements=[looks],
        loop_budget=2,
        row={"id": 7},
        options={"temperature": 0.1},
        strategy=RepairTemplate(),
    )
    first, second = contexts
    assert list(first.messages) == [{"role": "user", "content": "q"}]
    assert list(second.messages) == result.attempts[1].messages != list(first.messages)
    assert (first.row, second.row) == ({"id": 7}, {"id": 7})
    assert (first.iteration.attempt, second.iteration.attempt) == (1, 2)
    assert first.iteration.sampling_id == result.sampling_id
    assert (first.options, second.options) == ({"temperature": 0.1}, {"temperature": 0.1})


async def test_the_samplers_check_timeout_reaches_the_checks():
    async def slow(text):
        """answers slowly"""
        await anyio.sleep(1)
        return True

    sampler = strict(ScriptedBackend(["ok"]), check_timeout=0.01)
    result = await sampler.sample("q", requirements=[slow])
    [verdict] = result.attempts[0].validations
    assert (verdict.passed, verdict.reason) == (
        False,
        "the check took longer than check_timeout (0.01s)",
    )


# -- generation_pre_call / post_call / error --------------------------------------------------


async def test_each_attempt_sends_the_calls_options_with_its_own_derived_seed():
    seen = HookRecorder()
    backend = ScriptedBackend(["no"])
    await strict(backend, seen).sample(
        "q", requirements=[passes], loop_budget=2, seed=11, options={"temperature": 0.3}
    )
    assert [
        (f["attempt"], f["options"], f["retry"], f["purpose"])
        for f in fields_of(seen, H.GENERATION_PRE_CALL)
    ] == [
        (1, {"temperature": 0.3, "seed": derive_seed(11, 0, 1)}, 0, "sample"),
        (2, {"temperature": 0.3, "seed": derive_seed(11, 0, 2)}, 0, "sample"),
    ]
    assert [r.options for r in backend.requests] == [
        f["options"] for f in fields_of(seen, H.GENERATION_PRE_CALL)
    ]
    unseeded = HookRecorder()
    await strict(ScriptedBackend(["ok"]), unseeded).sample("q", options={"top_p": 0.9})
    assert [f["options"] for f in fields_of(unseeded, H.GENERATION_PRE_CALL)] == [{"top_p": 0.9}]


async def test_a_transient_failure_is_retried_with_the_retry_number_and_the_wait_announced():
    seen = HookRecorder()
    busy = TransientBackendError("busy", retry_after=0.004)
    backend = ScriptedBackend(["ok"], failures={1: busy})
    began = time.perf_counter()
    result = await strict(backend, seen, retry=RETRY).sample("q", requirements=[passes])
    wall = time.perf_counter() - began
    assert [(hook, f["retry"]) for hook, f in events_of(seen, *BACKEND_CALLS)] == [
        ("generation_pre_call", 0),
        ("generation_error", 0),
        ("generation_pre_call", 1),
        ("generation_post_call", 1),
    ]
    error = fields_of(seen, H.GENERATION_ERROR)[0]
    assert 0.0 <= error["latency_s"] <= wall  # measured: see the test below
    assert error == {
        "sampling_id": result.sampling_id,
        "strategy_name": "RejectionSampling",
        "prompt_key": None,
        "subsample_index": 0,
        "attempt": 1,
        "iteration": 1,
        "sequence": None,
        "exception": busy,
        "error_type": "TransientBackendError",
        "latency_s": error["latency_s"],
        "will_retry": True,
        "retry_in_s": 0.004,  # the server's Retry-After beats the 1 ms backoff
        "retry": 0,
        "purpose": "sample",
    }
    assert (result.success, result.cancelled, result.errors, backend.calls) == (True, 0, [], 2)
    assert result.attempts[0].attempt == 1  # a retry is not an attempt


@pytest.mark.parametrize(
    ("policy", "waits"), [(RETRY, [0.004]), (RetryPolicy(base_delay=0.0), [0.0])]
)
async def test_the_wait_before_a_retry_is_the_one_announced(monkeypatch, policy, waits):
    slept: list[float] = []
    real_sleep = anyio.sleep

    async def sleep(delay: float) -> None:
        slept.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(anyio, "sleep", sleep)
    seen = HookRecorder()
    busy = TransientBackendError("busy", retry_after=0.004 if waits[0] else None)
    result = await strict(ScriptedBackend(["ok"], failures={1: busy}), seen, retry=policy).sample(
        "q"
    )
    assert result.success and slept == waits == [
        fields_of(seen, H.GENERATION_ERROR)[0]["retry_in_s"]
    ]


async def test_a_call_that_stays_transient_is_retried_max_retries_times_then_kept_as_an_error():
    seen = HookRecorder()
    busy = TransientBackendError("busy")
    backend = ScriptedBackend(["ok"], failures=lambda request: busy)
    with pytest.raises(TransientBackendError):
        await strict(backend, seen, retry=RETRY).sample("q")
    assert [
        (f["retry"], f["will_retry"], f["retry_in_s"]) for f in fields_of(seen, H.GENERATION_ERROR)
    ] == [
        (0, True, 0.001),
        (1, True, 0.002),
        (2, False, None),
    ]
    assert backend.calls == 3


async def test_a_failure_that_is_not_transient_is_not_retried():
    seen = HookRecorder()
    broken = ValueError("bad request")
    backend = ScriptedBackend(["ok"], failures={1: broken})
    result = await strict(backend, seen, retry=RETRY).sample(
        "q", requirements=[passes], loop_budget=2, concurrency_budget=2
    )
    [error] = fields_of(seen, H.GENERATION_ERROR)
    assert (error["will_retry"], error["retry_in_s"], error["retry"]) == (False, None, 0)
    assert [(e.attempt, e.exception) for e in result.errors] == [(1, broken)]
    assert (result.success, result.cancelled, backend.calls) == (True, 0, 2)


async def test_the_engine_measures_how_long_a_failed_call_ran():
    """``generation_error``'s ``latency_s`` runs from just before the backend call (where a
    returned call's measure starts) to its exception, retried or not."""
    busy = TransientBackendError("busy", retry_after=0.0)
    broken = ValueError("bad request")
    for failures, least in (([busy, broken], 0.02), ([broken], 0.0)):
        script = iter(failures)  # subsample 0's calls fail in turn
        given_up = anyio.Event()

        def fail(request: GenerationRequest, script=script) -> Exception | None:
            return next(script) if request.iteration.subsample_index == 0 else None

        async def answer(request: GenerationRequest, given_up=given_up) -> str:
            await given_up.wait()  # subsample 1 answers once subsample 0 gave up
            return "ok"

        class GivenUp:
            @hookimpl
            def generation_error(self, payload, given_up=given_up) -> None:
                if not payload.will_retry:
                    given_up.set()

        seen = HookRecorder()
        backend = ScriptedBackend(answer, latency=least, failures=fail)
        began = time.perf_counter()
        result = await strict(backend, GivenUp(), seen, retry=RETRY).sample(
            "q", concurrency_budget=2
        )
        wall = time.perf_counter() - began
        errors = fields_of(seen, H.GENERATION_ERROR)
        assert [e["exception"] for e in errors] == failures
        assert all(least <= e["latency_s"] for e in errors)
        assert sum(e["latency_s"] for e in errors) <= wall
        assert result.success and [e.exception for e in result.errors] == [broken]


async def test_the_engine_measures_the_latency_of_a_reply_that_reports_none():
    class Slow:
        async def generate(self, request: GenerationRequest) -> str:
            await anyio.sleep(0.02)
            return "ok"

    class Instant:
        async def generate(self, request: GenerationRequest) -> str:
            return "ok"

    for backend, least in ((Slow(), 0.02), (Instant(), 0.0)):
        seen = HookRecorder()
        began = time.perf_counter()
        result = await strict(backend, seen).sample("q")
        wall = time.perf_counter() - began
        [post] = fields_of(seen, H.GENERATION_POST_CALL)
        assert least <= post["latency_s"] == result.attempts[0].latency_s <= wall
        assert post["generation"].latency_s == post["latency_s"]
        assert (post["retry"], post["purpose"]) == (0, "sample")


async def test_a_check_sees_what_the_backend_was_sent_seed_and_plugin_changes_included():
    contexts = []

    def looks(text, context):
        """looks at its context"""
        contexts.append(context)
        return False

    class Steer:
        @hookimpl
        def generation_pre_call(self, payload):
            payload.options = {**payload.options, "top_p": 0.5}
            payload.messages = [*payload.messages, {"role": "user", "content": "briefly"}]

    backend = ScriptedBackend(["a", "b"])
    sampler = strict(backend, Steer())
    await sampler.sample(
        "q", requirements=[looks], loop_budget=2, seed=3, options={"temperature": 0.1}
    )
    assert [dict(c.options) for c in contexts] == [r.options for r in backend.requests]
    assert [list(c.messages) for c in contexts] == [r.messages for r in backend.requests]
    assert contexts[0].options == {
        "temperature": 0.1,
        "seed": derive_seed(3, 0, 1),
        "top_p": 0.5,
    }
    assert contexts[1].options["seed"] == derive_seed(3, 0, 2)
    assert list(contexts[0].messages)[-1] == {"role": "user", "content": "briefly"}
