"""Hook-call monitoring, in pluggy's terms: ``Sampler.plugins.add_hookcall_monitoring(before,
after)`` (or pluggy's manager's) sees every hook the engine fires, with its implementations,
its ``payload`` and its outcome, and can be undone. (A monitor added after a call's plugins were
cached: ``hooks/test_call_plugins_cache.py``; monitors and direct routes:
``hooks/test_delivery_direct``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from hook_specs import StopSampling, hookimpl
from sampling_core import PluginError, Sampler, ScriptedBackend
from tests.support.engine_helpers import hook_sequence, never

pytestmark = pytest.mark.anyio


@dataclass
class Monitor:
    """What a pair of monitoring callbacks received, in the order they were called."""

    calls: list[tuple[str, str, list[str], Any, Any]] = field(default_factory=list)

    def before(self, hook_name: str, hook_impls: list[Any], kwargs: dict[str, Any]) -> None:
        assert set(kwargs) == {"payload"}
        self.calls.append(
            ("before", hook_name, [i.plugin_name for i in hook_impls], kwargs["payload"], None)
        )

    def after(
        self, outcome: Any, hook_name: str, hook_impls: list[Any], kwargs: dict[str, Any]
    ) -> None:
        assert set(kwargs) == {"payload"}
        impls = [i.plugin_name for i in hook_impls]
        self.calls.append(("after", hook_name, impls, kwargs["payload"], outcome))

    def fired(self) -> list[str]:
        return [name for when, name, *_ in self.calls if when == "before"]

    def outcome_of(self, hook_name: str) -> Any:
        [outcome] = [
            o for when, name, _, _, o in self.calls if (when, name) == ("after", hook_name)
        ]
        return outcome


async def test_a_monitor_sees_every_hook_call_in_pluggys_terms_and_can_be_undone():
    class A:
        @hookimpl
        def sampling_iteration(self, payload):
            pass

    class B:
        @hookimpl
        def sampling_iteration(self, payload):
            raise ValueError("b broke")

    monitor = Monitor()
    sampler = Sampler(ScriptedBackend(["x"]), plugins=[A(), B()], load_entrypoints=False)
    undo = sampler.plugins.add_hookcall_monitoring(monitor.before, monitor.after)
    result = await sampler.sample("q", requirements=[never], loop_budget=2)

    # every hook the engine fires, implemented or not, in the engine's order
    assert monitor.fired() == hook_sequence(2)
    # each call: `before` then `after`, with the implementations and the one payload object;
    # a call hook's pair encloses the hooks fired within it (its outcome: the work's result)
    pairs, opened = [], []
    for call in monitor.calls:
        if call[0] == "before":
            opened.append(call)
        else:
            pairs.append((opened.pop(), call))
    assert not opened
    befores = [before for before, _ in pairs]
    for (when, name, impls, payload, _), (then, same, impls_after, payload_after, outcome) in pairs:
        assert (when, then, name, impls) == ("before", "after", same, impls_after)
        assert payload is payload_after and payload.sampling_id == result.sampling_id
        assert impls == (["A", "B"] if name == "sampling_iteration" else [])
        # B's fault is isolated: the hook call itself ended with no exception
        assert outcome.exception is None
        if name == "sampling_call":
            assert outcome.get_result() is result
        elif name == "generation_call":
            assert outcome.get_result().text == "x"
        else:
            assert outcome.get_result() == []
    iteration_payloads = [p for _, name, _, p, _ in befores if name == "sampling_iteration"]
    assert [type(p).__name__ for p in iteration_payloads] == ["SamplingIterationPayload"] * 2
    assert [(f.plugin_name, f.hook, str(f.exception)) for f in result.plugin_errors] == [
        ("B", "sampling_iteration", "b broke"),
    ] * 2

    undo()
    monitor.calls.clear()
    await sampler.sample("q")
    assert monitor.calls == []


async def test_a_monitor_sees_stop_sampling_end_a_hook_call_of_a_plugin_registered_later():
    class Stopper:
        @hookimpl
        def generation_post_call(self, payload):
            raise StopSampling("enough")

    monitor = Monitor()
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    sampler.plugins.add_hookcall_monitoring(monitor.before, monitor.after)
    sampler.plugins.register(Stopper())  # registration is live: the monitor sees it
    result = await sampler.sample("q", requirements=[never], loop_budget=2)
    assert result.stop_reason == "stopped_by_plugin"
    assert ("before", "generation_post_call", ["Stopper"]) in [c[:3] for c in monitor.calls]
    assert type(monitor.outcome_of("generation_post_call").exception) is StopSampling


async def test_a_monitor_sees_the_plugin_error_a_hook_call_ended_with():
    class Refuser:
        @hookimpl
        def generation_pre_call(self, payload):
            raise KeyError("nope")

    monitor = Monitor()
    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Refuser()], load_entrypoints=False)
    sampler.plugins.add_hookcall_monitoring(monitor.before, monitor.after)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    exception = monitor.outcome_of("generation_pre_call").exception
    assert exception is raised.value
    assert str(exception) == "plugin 'Refuser' failed in generation_pre_call: KeyError: 'nope'"


async def test_monitoring_added_on_the_pluggy_manager_counts_too():
    names = []
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    sampler.plugins.manager.add_hookcall_monitoring(
        lambda name, impls, kwargs: names.append(name), lambda *args: None
    )
    await sampler.sample("q")
    assert "sampling_iteration" in names and "sampling_loop_end" in names
