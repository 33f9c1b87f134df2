"""sampling_validate: plugins may change an attempt's verdicts before it is judged."""

from __future__ import annotations

import dataclasses

import pytest

from hook_specs import HookName, ValidationResult, hookimpl
from sampling_core import PluginError, Sampler, ScriptedBackend

pytestmark = pytest.mark.anyio


def short(text: str) -> bool:
    """at most 3 characters"""
    return len(text) <= 3


class AcceptLong:
    """Overrides the 'short' verdict for answers that mention 'ok'."""

    def __init__(self) -> None:
        self.seen = []

    @hookimpl
    def sampling_validate(self, payload):
        self.seen.append(
            (payload.attempt, payload.text, list(payload.results), list(payload.messages))
        )
        for i, verdict in enumerate(payload.results):
            if not verdict.passed and "ok" in payload.text:
                payload.results[i] = dataclasses.replace(
                    verdict, passed=True, reason="accepted by policy"
                )


async def test_a_plugin_flips_a_failed_verdict_with_a_reason(hook_recorder):
    plugin = AcceptLong()
    sampler = Sampler(
        ScriptedBackend(["far too long", "long but ok"]),
        plugins=[plugin, hook_recorder],
        load_entrypoints=False,
    )
    result = await sampler.sample("q", requirements=[short], loop_budget=3)
    assert result.success and result.text == "long but ok" and result.iterations_used == 2
    (verdict,) = result.picked.validations
    assert verdict.passed and verdict.reason == "accepted by policy"
    assert verdict.requirement == "at most 3 characters"
    first, second = plugin.seen
    assert first[0] == 1 and first[1] == "far too long" and not first[2][0].passed
    assert first[3] == [{"role": "user", "content": "q"}]  # the attempt's prompt
    assert second[0] == 2
    # sampling_iteration reports the verdicts as the plugin left them
    events = hook_recorder.payloads(HookName.SAMPLING_ITERATION)
    assert [e.passed for e in events] == [False, True]


async def test_its_messages_are_those_sent_after_generation_pre_call_edited_them():
    class SystemPrompt:
        @hookimpl
        def generation_pre_call(self, payload):
            payload.messages = [{"role": "system", "content": "be brief"}, *payload.messages]

    plugin = AcceptLong()
    sampler = Sampler(
        ScriptedBackend(["fine"]), plugins=[SystemPrompt(), plugin], load_entrypoints=False
    )
    await sampler.sample("q", requirements=[short])
    ((_, _, _, messages),) = plugin.seen
    assert messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
    ]


async def test_an_appended_failing_result_fails_the_attempt():
    class Veto:
        @hookimpl
        async def sampling_validate(self, payload):  # async implementations are awaited
            if "bad" in payload.text:
                payload.results.append(ValidationResult(False, "vetoed", None, "veto"))

    sampler = Sampler(ScriptedBackend(["bad", "yes"]), plugins=[Veto()], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[short], loop_budget=2)
    assert result.text == "yes" and result.iterations_used == 2
    failed = result.attempts[0]
    assert not failed.passed and failed.failure_reasons == ["vetoed"]
    assert failed.valid_count == 1 and failed.total_count == 2


async def test_a_plugin_can_replace_the_whole_list():
    class Replace:
        @hookimpl
        def sampling_validate(self, payload):
            payload.results = [ValidationResult(True, None, None, "plugin says yes")]

    sampler = Sampler(
        ScriptedBackend(["far too long"]), plugins=[Replace()], load_entrypoints=False
    )
    result = await sampler.sample("q", requirements=[short])
    assert result.success and [v.requirement for v in result.picked.validations] == [
        "plugin says yes"
    ]


async def test_a_fault_fails_closed_as_a_plugin_error():
    class Broken:
        @hookimpl
        def sampling_validate(self, payload):
            raise RuntimeError("judge unavailable")

    sampler = Sampler(ScriptedBackend(["abc"]), plugins=[Broken()], load_entrypoints=False)
    with pytest.raises(PluginError) as caught:
        await sampler.sample("q", requirements=[short])
    assert caught.value.plugin_name == "Broken" and "judge unavailable" in str(caught.value)


@pytest.mark.parametrize("bad", [["not a result"], ("a", "tuple"), None])
async def test_results_that_are_not_validation_results_fail_closed(bad):
    class Garbage:
        @hookimpl
        def sampling_validate(self, payload):
            payload.results = bad

    sampler = Sampler(ScriptedBackend(["abc"]), plugins=[Garbage()], load_entrypoints=False)
    with pytest.raises(PluginError, match="list of ValidationResult") as caught:
        await sampler.sample("q", requirements=[short])
    assert caught.value.plugin_name == "Garbage"


async def test_only_results_may_be_written():
    class Forger:
        @hookimpl
        def sampling_validate(self, payload):
            payload.text = "forged"

    sampler = Sampler(ScriptedBackend(["abc"]), plugins=[Forger()], load_entrypoints=False)
    with pytest.raises(PluginError, match="text"):
        await sampler.sample("q", requirements=[short])


async def test_no_payload_is_built_when_nobody_implements_it(monkeypatch):
    from sampling_core.hooks import table as dispatch

    built = []
    original = dispatch.BUILDERS[HookName.SAMPLING_VALIDATE]
    monkeypatch.setitem(
        dispatch.BUILDERS,
        HookName.SAMPLING_VALIDATE,
        lambda fields: built.append(fields) or original(fields),
    )

    class OnlyIteration:
        @hookimpl
        def sampling_iteration(self, payload):
            pass

    sampler = Sampler(ScriptedBackend(["abc"]), plugins=[OnlyIteration()], load_entrypoints=False)
    assert (await sampler.sample("q", requirements=[short])).success
    assert built == []
    sampler.register(AcceptLong())
    assert (await sampler.sample("q", requirements=[short])).success
    assert len(built) == 1  # registered later: fires from the next call
