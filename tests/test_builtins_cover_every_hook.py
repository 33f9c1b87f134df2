"""The built-ins that promise every hook event (DESIGN section 4) implement every hook that
has a payload, so that a hook added to the contract cannot be forgotten by them (the
provider hooks, ``register_*``, are not events)."""

from __future__ import annotations

import pytest

from builtin_plugins.recorder import RecorderPlugin
from builtin_plugins.tracing import EVENT_NAMES, TracingPlugin
from hook_specs.payloads import PAYLOAD_TYPES
from sampling_core.testing import HookRecorder

EVERY_HOOK = sorted(hook.value for hook in PAYLOAD_TYPES)


@pytest.mark.parametrize("plugin", [RecorderPlugin, TracingPlugin, HookRecorder])
@pytest.mark.parametrize("hook", EVERY_HOOK)
def test_it_implements_the_hook(plugin: type, hook: str) -> None:
    assert callable(getattr(plugin, hook, None)), f"{plugin.__name__} lacks {hook}"


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

    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[Garbage(), RecorderPlugin(tmp_path / "events.jsonl"), TracingPlugin()],
        load_entrypoints=False,
        strict_plugins=True,  # a fault of a built-in would surface too
    )
    with pytest.raises(PluginError) as caught:
        sampler.sample_sync("q", requirements=[lambda text: True])
    assert caught.value.hook == "sampling_validate"
    assert "Garbage" in caught.value.plugin_name
