"""Hook delivery, exactly: each attempt payload's fields, monitors, faults and their messages.

Compares what a plugin, a hook-call monitor and a user reading the logs or an exception see,
whole, so a change of a field, an order or a message in :mod:`sampling_core.dispatch` fails
here.
"""

from __future__ import annotations

import anyio
import pytest
from structlog.testing import capture_logs

from hook_specs import hookimpl
from hook_specs.payloads import PAYLOAD_TYPES
from hook_specs.records import Generation, Usage, ValidationResult
from sampling_core import BudgetError, PluginError, Sampler, ScriptedBackend
from sampling_core.dispatch import describe

pytestmark = pytest.mark.anyio


def starts_ok(text: str) -> ValidationResult:
    """starts with ok"""
    passed = text.startswith("ok")
    return ValidationResult(passed, None if passed else "does not start with ok", 1.0 * passed)


def fields_of(payload) -> dict[str, object]:
    fields = {name: getattr(payload, name) for name in dict(payload)}
    assert set(fields) == set(PAYLOAD_TYPES[payload.hook].model_fields)
    return fields


class Attempts:
    """The fields of every per-attempt payload, in the order fired."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, object]]] = []

    @hookimpl
    def generation_post_call(self, payload):
        self.events.append(("post_call", fields_of(payload)))

    @hookimpl
    def sampling_validate(self, payload):
        self.events.append(("validate", fields_of(payload)))

    @hookimpl
    def sampling_iteration(self, payload):
        self.events.append(("iteration", fields_of(payload)))

    @hookimpl
    def sampling_repair(self, payload):
        self.events.append(("repair", fields_of(payload)))


def strict(backend, *plugins, **kwargs) -> Sampler:
    return Sampler(backend, plugins=plugins, load_entrypoints=False, strict_plugins=True, **kwargs)


async def test_each_attempt_payload_holds_exactly_what_the_attempt_did():
    first = Generation("no way", usage=Usage(1, 2, 0.25), latency_s=0.5, model="m")
    second = Generation("ok then", usage=Usage(3, 2, 0.5), latency_s=0.25, model="m")
    seen = Attempts()
    result = await strict(ScriptedBackend([first, second]), seen).sample(
        "q", requirements=[starts_ok], loop_budget=2
    )
    call = {"sampling_id": result.sampling_id, "strategy_name": "RejectionSampling"}
    asked = [{"role": "user", "content": "q"}]
    failed = ValidationResult(False, "does not start with ok", 0.0, "starts with ok")
    passed = ValidationResult(True, None, 1.0, "starts with ok")
    repaired = result.attempts[1].messages
    one = {**call, "subsample_index": 0, "attempt": 1, "iteration": 1}
    two = {**call, "subsample_index": 0, "attempt": 2, "iteration": 2}
    assert seen.events == [
        (
            "post_call",
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
            "validate",
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
            "iteration",
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
            },
        ),
        (
            "repair",
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
            "post_call",
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
            "validate",
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
            "iteration",
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
            },
        ),
    ]


async def test_monitors_see_each_hook_call_in_pluggys_terms():
    class A:
        @hookimpl
        def sampling_iteration(self, payload):
            pass

    class B:
        @hookimpl
        def sampling_iteration(self, payload):
            raise ValueError("b broke")

    calls = []

    def before(hook_name, hook_impls, kwargs):
        calls.append(
            (
                "before",
                hook_name,
                [i.plugin_name for i in hook_impls],
                type(kwargs["payload"]).__name__,
            )
        )

    def after(outcome, hook_name, hook_impls, kwargs):
        calls.append(
            ("after", hook_name, [i.plugin_name for i in hook_impls], outcome.get_result())
        )

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[A(), B()], load_entrypoints=False)
    sampler.plugins.add_hookcall_monitoring(before, after)
    result = await sampler.sample("q")
    mine = [c for c in calls if c[1] == "sampling_iteration"]
    assert mine == [
        ("before", "sampling_iteration", ["A", "B"], "SamplingIterationPayload"),
        ("after", "sampling_iteration", ["A", "B"], []),
    ]
    [fault] = result.plugin_errors
    assert (fault.plugin_name, fault.hook, str(fault.exception)) == (
        "B",
        "sampling_iteration",
        "b broke",
    )


async def test_a_monitor_sees_the_exception_a_hook_call_ended_with():
    class Refuser:
        @hookimpl
        def generation_pre_call(self, payload):
            raise KeyError("nope")

    outcomes = []

    def after(outcome, hook_name, hook_impls, kwargs):
        outcomes.append((hook_name, outcome.exception))

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Refuser()], load_entrypoints=False)
    sampler.plugins.add_hookcall_monitoring(lambda *args: None, after)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    [exception] = [e for hook, e in outcomes if hook == "generation_pre_call"]
    assert exception is raised.value
    assert str(exception) == "plugin 'Refuser' failed in generation_pre_call: KeyError: 'nope'"


async def test_an_isolated_fault_is_logged_in_one_line_with_the_plugin_and_hook():
    class Broken:
        @hookimpl
        def sampling_loop_end(self, payload):
            raise RuntimeError("disk full")

    with capture_logs() as logs:
        result = await Sampler(
            ScriptedBackend(["x"]), plugins=[Broken()], load_entrypoints=False
        ).sample("q")
    assert [e for e in logs if e["event"] == "plugin.error"] == [
        {
            "event": "plugin.error",
            "log_level": "warning",
            "plugin": "Broken",
            "hook": "sampling_loop_end",
            "error_type": "RuntimeError",
            "error": "disk full",
        }
    ]
    assert [str(f) for f in result.plugin_errors] == ["Broken, sampling_loop_end: disk full"]


async def test_strict_turns_an_isolated_fault_into_a_plugin_error_with_the_cause():
    class Broken:
        @hookimpl
        def generation_post_call(self, payload):
            raise RuntimeError()

    with pytest.raises(PluginError) as raised:
        await strict(ScriptedBackend(["x"]), Broken()).sample("q")
    assert str(raised.value) == "plugin 'Broken' failed in generation_post_call: RuntimeError"
    assert (raised.value.plugin_name, raised.value.hook) == ("Broken", "generation_post_call")
    assert type(raised.value.__cause__) is RuntimeError


def test_describe_names_the_type_and_the_message_when_there_is_one():
    assert describe(ValueError("bad")) == "ValueError: bad"
    assert describe(ValueError()) == "ValueError"


async def test_an_async_implementation_over_the_timeout_is_cut_off_and_named():
    class Slow:
        @hookimpl
        async def generation_post_call(self, payload):
            await anyio.sleep(1)

    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Slow()], load_entrypoints=False, plugin_timeout=0.01
    )
    result = await sampler.sample("q")
    [fault] = result.plugin_errors
    assert (fault.plugin_name, fault.hook) == ("Slow", "generation_post_call")
    assert str(fault.exception) == "took longer than 0.01s and was cancelled"


async def test_results_or_messages_replaced_by_a_non_list_fail_closed_naming_the_writer():
    class BadVerdicts:
        @hookimpl
        def sampling_validate(self, payload):
            payload.results = (ValidationResult(True),)

    with pytest.raises(PluginError) as raised:
        await Sampler(
            ScriptedBackend(["x"]), plugins=[BadVerdicts()], load_entrypoints=False
        ).sample("q")
    assert str(raised.value) == (
        "plugin 'BadVerdicts' failed in sampling_validate: "
        "payload.results must be a list of ValidationResult"
    )

    class BadRepair:
        @hookimpl
        def sampling_repair(self, payload):
            payload.messages = "try again"

    with pytest.raises(PluginError) as raised:
        await Sampler(ScriptedBackend(["x"]), plugins=[BadRepair()], load_entrypoints=False).sample(
            "q", requirements=[starts_ok], loop_budget=2
        )
    assert str(raised.value) == (
        "plugin 'BadRepair' failed in sampling_repair: payload.messages must be a list of messages"
    )


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
    ("plugin", "given"),
    [(OnlyLoop(), {"concurrency_budget": 5}), (OnlyConcurrency(), {"loop_budget": 5})],
)
async def test_too_many_attempts_name_the_plugin_that_changed_either_budget(plugin, given):
    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[plugin], load_entrypoints=False, max_attempts_per_call=20
    )
    with pytest.raises(BudgetError) as raised:
        await sampler.sample("q", **given)
    assert str(raised.value) == (
        f"concurrency_budget=5 set by plugin {type(plugin).__name__!r} is invalid: "
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


async def test_a_value_a_plain_implementation_returns_is_not_awaited():
    class ReturnsValue:
        @hookimpl
        def sampling_iteration(self, payload):
            return True

    result = await strict(ScriptedBackend(["x"]), ReturnsValue()).sample("q")
    assert result.success and result.plugin_errors == []


async def test_a_monitor_gets_the_payload_in_kwargs_before_and_after():
    class Observer:
        @hookimpl
        def sampling_loop_end(self, payload):
            pass

    kwargs_seen: list[tuple[str, object]] = []

    def before(hook_name, hook_impls, kwargs):
        if hook_name == "sampling_loop_end":
            kwargs_seen.append(("before", kwargs["payload"]))

    def after(outcome, hook_name, hook_impls, kwargs):
        if hook_name == "sampling_loop_end":
            kwargs_seen.append(("after", kwargs["payload"]))

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Observer()], load_entrypoints=False)
    sampler.plugins.add_hookcall_monitoring(before, after)
    result = await sampler.sample("q")
    assert [when for when, _ in kwargs_seen] == ["before", "after"]
    first, second = (payload for _, payload in kwargs_seen)
    assert first is second and first.sampling_id == result.sampling_id


async def test_with_several_implementations_each_is_called_and_the_breaker_is_named():
    calls: list[str] = []

    class NoPayload:
        @hookimpl
        def sampling_validate(self):
            calls.append("NoPayload")

    class Breaker:
        @hookimpl
        def sampling_validate(self, payload):
            calls.append("Breaker")
            payload.results = (ValidationResult(True),)

    class Reader:
        @hookimpl(tryfirst=True)
        def sampling_validate(self, payload):
            calls.append("Reader")

    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[Breaker(), NoPayload(), Reader()],
        load_entrypoints=False,
    )
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    assert calls == ["Reader", "NoPayload", "Breaker"]
    assert str(raised.value) == (
        "plugin 'Breaker' failed in sampling_validate: "
        "payload.results must be a list of ValidationResult"
    )
