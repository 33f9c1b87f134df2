"""Hook delivery's faults, exactly: messages, log lines, orders, outcomes.

What an isolated fault logs and records, what strict mode raises, the plugin timeout, a
non-list written where a list is read, and one hook with several implementations, compared
whole. What a hook-call monitor receives is in ``hooks/test_monitoring.py``.
"""

from __future__ import annotations

import anyio
import pytest
from structlog.testing import capture_logs

from hook_specs import hookimpl
from hook_specs.records import ValidationResult
from sampling_core import PluginError, Sampler, ScriptedBackend
from sampling_core.hooks.faults import describe
from tests.support.engine_helpers import starts_ok, strict

pytestmark = pytest.mark.anyio


async def test_an_isolated_fault_is_logged_in_one_line_with_the_plugin_and_hook():
    class Broken:
        @hookimpl
        def sampling_loop_end(self, payload):
            raise RuntimeError("disk full")

    line = Broken.sampling_loop_end.__code__.co_firstlineno + 2  # @hookimpl, def, raise
    raises_at = f"{line} in sampling_loop_end"
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
            "raised_at": f"{__file__}:{raises_at}",  # the fault keeps no traceback
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
        "plugin 'BadRepair' failed in sampling_repair: "
        "payload.messages must be a list of messages (dicts)"
    )


async def test_a_value_a_plain_implementation_returns_is_not_awaited():
    class ReturnsValue:
        @hookimpl
        def sampling_iteration(self, payload):
            return True

    result = await strict(ScriptedBackend(["x"]), ReturnsValue()).sample("q")
    assert result.success and result.plugin_errors == []


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
