"""The sampling loop, exactly as plugins see it: loop start, each backend call, stops, shields.

Every payload a plugin reads is compared whole (its field set is the payload model's), with
exact numbers: the call's settings at ``sampling_loop_start``; the messages, options, retry
number and purpose of each ``generation_pre_call``; ``generation_error``'s retry decision and
wait; the latency the engine measures; a stop from a plugin; and the shielded delivery of an
inline subsample's ``sampling_iteration`` while the caller is cancelled.
"""

from __future__ import annotations

import time

import anyio
import pytest
from structlog.testing import capture_logs

from hook_specs import StopSampling, hookimpl
from hook_specs.payloads import PAYLOAD_TYPES
from hook_specs.records import Generation, Usage
from sampling_core import GenerationRequest, RetryPolicy, Sampler, ScriptedBackend
from sampling_core.seeds import derive_seed
from sampling_core.transport import TransientBackendError

pytestmark = pytest.mark.anyio

RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01, jitter=0.0)


def passes(text: str) -> bool:
    """starts with ok"""
    return text.startswith("ok")


def short(text: str) -> bool:
    """at most three words"""
    return len(text.split()) <= 3


class Seen:
    """Every payload of the hooks named, as ``(hook, {field: value})`` in the order fired."""

    def __init__(self, *hooks: str) -> None:
        self.hooks = set(hooks)
        self.events: list[tuple[str, dict[str, object]]] = []

    def _keep(self, hook: str, payload) -> None:
        if hook in self.hooks:
            fields = {name: getattr(payload, name) for name in dict(payload)}
            assert set(fields) == set(PAYLOAD_TYPES[payload.hook].model_fields)
            self.events.append((hook, fields))

    @hookimpl
    def sampling_loop_start(self, payload):
        self._keep("loop_start", payload)

    @hookimpl
    def generation_pre_call(self, payload):
        self._keep("pre_call", payload)

    @hookimpl
    def generation_post_call(self, payload):
        self._keep("post_call", payload)

    @hookimpl
    def generation_error(self, payload):
        self._keep("error", payload)

    def of(self, hook: str) -> list[dict[str, object]]:
        return [fields for name, fields in self.events if name == hook]


def strict(backend, *plugins, **kwargs) -> Sampler:
    return Sampler(backend, plugins=plugins, load_entrypoints=False, strict_plugins=True, **kwargs)


# -- sampling_loop_start ----------------------------------------------------------------------


async def test_loop_start_shows_the_calls_settings_exactly():
    seen = Seen("loop_start")
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
    assert seen.of("loop_start") == [
        {
            "sampling_id": result.sampling_id,
            "strategy_name": "RejectionSampling",
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

    seen = Seen("loop_start")
    await strict(Plain(), seen).sample("q")
    [fields] = seen.of("loop_start")
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


# -- stops ------------------------------------------------------------------------------------


async def test_a_stop_at_loop_start_makes_no_call_and_is_logged_with_its_reason():
    class Stop:
        @hookimpl
        def sampling_loop_start(self, payload):
            raise StopSampling("closed for today")

    backend = ScriptedBackend(["ok"])
    with capture_logs() as logs:
        result = await strict(backend, Stop()).sample("q", concurrency_budget=2)
    assert (result.stop_reason, backend.calls, result.attempts) == ("stopped_by_plugin", 0, [])
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
    began = time.perf_counter()
    result = await strict(backend, StopOnFirstAnswer()).sample(
        "q", requirements=[passes], loop_budget=2, concurrency_budget=3
    )
    assert (result.stop_reason, result.attempts, result.cancelled) == ("stopped_by_plugin", [], 3)
    assert backend.calls == 3
    assert time.perf_counter() - began < 1.0  # the siblings' one-second calls were cut short


# -- generation_pre_call / post_call / error --------------------------------------------------


async def test_each_attempt_sends_the_calls_options_with_its_own_derived_seed():
    seen = Seen("pre_call")
    backend = ScriptedBackend(["no"])
    await strict(backend, seen).sample(
        "q", requirements=[passes], loop_budget=2, seed=11, options={"temperature": 0.3}
    )
    assert [
        (f["attempt"], f["options"], f["retry"], f["purpose"]) for f in seen.of("pre_call")
    ] == [
        (1, {"temperature": 0.3, "seed": derive_seed(11, 0, 1)}, 0, "sample"),
        (2, {"temperature": 0.3, "seed": derive_seed(11, 0, 2)}, 0, "sample"),
    ]
    assert [r.options for r in backend.requests] == [f["options"] for f in seen.of("pre_call")]
    unseeded = Seen("pre_call")
    await strict(ScriptedBackend(["ok"]), unseeded).sample("q", options={"top_p": 0.9})
    assert [f["options"] for f in unseeded.of("pre_call")] == [{"top_p": 0.9}]


async def test_a_transient_failure_is_retried_with_the_retry_number_and_the_wait_announced():
    seen = Seen("pre_call", "post_call", "error")
    busy = TransientBackendError("busy", retry_after=0.004)
    backend = ScriptedBackend(["ok"], failures={1: busy})
    result = await strict(backend, seen, retry=RETRY).sample("q", requirements=[passes])
    assert [(hook, f.get("retry")) for hook, f in seen.events] == [
        ("pre_call", 0),
        ("error", 0),
        ("pre_call", 1),
        ("post_call", 1),
    ]
    error = seen.of("error")[0]
    assert error == {
        "sampling_id": result.sampling_id,
        "strategy_name": "RejectionSampling",
        "subsample_index": 0,
        "attempt": 1,
        "iteration": 1,
        "sequence": None,
        "exception": busy,
        "error_type": "TransientBackendError",
        "will_retry": True,
        "retry_in_s": 0.004,  # the server's Retry-After beats the 1 ms backoff
        "retry": 0,
        "purpose": "sample",
    }
    assert (result.success, result.cancelled, result.errors, backend.calls) == (True, 0, [], 2)
    assert result.attempts[0].attempt == 1  # a retry is not an attempt


async def test_a_call_that_stays_transient_is_retried_max_retries_times_then_kept_as_an_error():
    seen = Seen("error")
    busy = TransientBackendError("busy")
    backend = ScriptedBackend(["ok"], failures=lambda request: busy)
    with pytest.raises(TransientBackendError):
        await strict(backend, seen, retry=RETRY).sample("q")
    assert [(f["retry"], f["will_retry"], f["retry_in_s"]) for f in seen.of("error")] == [
        (0, True, 0.001),
        (1, True, 0.002),
        (2, False, None),
    ]
    assert backend.calls == 3


async def test_a_failure_that_is_not_transient_is_not_retried():
    seen = Seen("error", "post_call")
    broken = ValueError("bad request")
    backend = ScriptedBackend(["ok"], failures={1: broken})
    result = await strict(backend, seen, retry=RETRY).sample(
        "q", requirements=[passes], loop_budget=2, concurrency_budget=2
    )
    [error] = seen.of("error")
    assert (error["will_retry"], error["retry_in_s"], error["retry"]) == (False, None, 0)
    assert [(e.attempt, e.exception) for e in result.errors] == [(1, broken)]
    assert (result.success, result.cancelled, backend.calls) == (True, 0, 2)


async def test_the_engine_measures_the_latency_of_a_reply_that_reports_none():
    class Slow:
        async def generate(self, request: GenerationRequest) -> str:
            await anyio.sleep(0.02)
            return "ok"

    class Instant:
        async def generate(self, request: GenerationRequest) -> str:
            return "ok"

    for backend, least in ((Slow(), 0.02), (Instant(), 0.0)):
        seen = Seen("post_call")
        began = time.perf_counter()
        result = await strict(backend, seen).sample("q")
        wall = time.perf_counter() - began
        [post] = seen.of("post_call")
        assert least <= post["latency_s"] == result.attempts[0].latency_s <= wall
        assert post["generation"].latency_s == post["latency_s"]
        assert (post["retry"], post["purpose"]) == (0, "sample")


# -- a check's own model calls ----------------------------------------------------------------


async def test_a_checks_model_call_goes_through_the_hooks_as_a_judge_call():
    seen = Seen("pre_call", "post_call", "error")

    async def judged(text, context):
        """a judge says yes"""
        request = GenerationRequest(
            [{"role": "user", "content": f"ok? {text}"}], {"max_tokens": 1}, context.iteration
        )
        verdict = await context.generate(request, backend=judge)
        return verdict.text == "yes"

    busy = TransientBackendError("busy")
    main = ScriptedBackend(["ok fine"])
    judge = ScriptedBackend(["yes"], failures={1: busy})
    result = await strict(main, seen, retry=RETRY).sample(
        "q", requirements=[judged], seed=5, options={"temperature": 0.2}
    )
    assert result.success and (main.calls, judge.calls) == (1, 2)
    calls = [(hook, f["purpose"], f["retry"]) for hook, f in seen.events]
    assert calls == [
        ("pre_call", "sample", 0),
        ("post_call", "sample", 0),
        ("pre_call", "judge", 0),
        ("error", "judge", 0),
        ("pre_call", "judge", 1),
        ("post_call", "judge", 1),
    ]
    judge_call = seen.of("pre_call")[1]
    assert judge_call["messages"] == [{"role": "user", "content": "ok? ok fine"}]
    assert judge_call["options"] == {"max_tokens": 1}  # the check's own, no derived seed
    assert (judge_call["attempt"], judge_call["iteration"]) == (1, 1)
    # a judge call is no attempt of its own: nothing in flight, no error kept
    assert (result.cancelled, result.errors, result.iterations_used) == (0, [], 1)
    assert result.usage == Usage(1 + 3, 2 + 1)


async def test_a_judge_call_that_fails_for_good_fails_the_check_not_the_attempt():
    async def judged(text, context):
        """a judge says yes"""
        request = GenerationRequest([{"role": "user", "content": text}], {}, context.iteration)
        await context.generate(request)
        return True

    def reply(request):
        if request.messages[-1]["content"] == "q":
            return Generation("answer", usage=Usage(2, 1, 0.5))
        raise ValueError("judge offline")

    result = await strict(ScriptedBackend(reply)).sample("q", requirements=[judged])
    [attempt] = result.attempts
    assert attempt.passed is False and "judge offline" in attempt.validations[0].reason
    assert (result.errors, result.cancelled) == ([], 0)
    assert result.usage == Usage(2, 1, 0.5)


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
