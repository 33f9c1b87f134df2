"""The built-ins that promise every hook event (tracing, recorder) implement every hook that
has a payload, so that a hook added to the contract cannot be forgotten by them (the
provider hooks, ``register_*``, are not events)."""

from __future__ import annotations

from pathlib import Path

import pluggy
import pytest

from benchmarks.fakes import TrivialPlugin
from builtin_plugins.recorder import RecorderPlugin, read_events
from builtin_plugins.tracing import EVENT_NAMES, TracingPlugin
from hook_specs import specs
from hook_specs.contract import PAYLOAD_TYPES
from hook_specs.markers import PROJECT_NAME
from sampling_core.testing import HookRecorder

EVERY_HOOK = sorted(hook.value for hook in PAYLOAD_TYPES)


@pytest.mark.parametrize("plugin", [RecorderPlugin, TracingPlugin, HookRecorder, TrivialPlugin])
def test_it_implements_every_hook_that_has_a_payload(plugin: type, tmp_path: Path) -> None:
    made = plugin(tmp_path / "events.jsonl") if plugin is RecorderPlugin else plugin()
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(specs)
    manager.register(made)  # what pluggy sees: marked implementations, not mere methods
    implemented = [hook for hook in EVERY_HOOK if getattr(manager.hook, hook).get_hookimpls()]
    assert implemented == EVERY_HOOK


def test_tracing_names_an_event_for_every_hook() -> None:
    assert sorted(EVENT_NAMES) == EVERY_HOOK
    assert len(set(EVENT_NAMES.values())) == len(EVENT_NAMES)


def test_a_bad_results_write_is_blamed_on_its_writer_not_on_the_builtins(tmp_path) -> None:
    """recorder and tracing read ``results`` after the other plugins (``trylast``): a list
    of something else written before them is the writer's fault, named as such."""
    from hook_specs import hookimpl
    from sampling_core import PluginError, Sampler, ScriptedBackend

    class Garbage:
        @hookimpl
        def sampling_validate(self, payload: object) -> None:
            payload.results = ["not a ValidationResult"]  # type: ignore[attr-defined]

    recorder = RecorderPlugin(tmp_path / "events.jsonl")
    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[Garbage(), recorder, TracingPlugin()],
        load_entrypoints=False,
        strict_plugins=True,  # a fault of a built-in would surface too
    )
    with pytest.raises(PluginError) as caught:
        sampler.sample_sync("q", requirements=[lambda text: True])
    assert caught.value.hook == "sampling_validate"
    assert "Garbage" in caught.value.plugin_name
    recorder.close()
    hooks = [event["hook"] for event in read_events(recorder.path)]
    assert "sampling_validate" not in hooks  # not recorded as if it had been checked
    assert hooks[0] == "sampling_loop_start" and hooks[-1] == "sampling_loop_end"
