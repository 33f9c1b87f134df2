"""Hook dispatch on pluggy: order, awaits, isolation, fail-closed, strictness and naming."""

from __future__ import annotations

import types

import anyio
import pytest
from structlog.testing import capture_logs

from hook_specs import HookName, ReadOnlyFieldError, hookimpl
from hook_specs.contract import PAYLOAD_TYPES
from sampling_core import GenerationRequest, PluginError, Sampler, ScriptedBackend
from sampling_core.hooks import table as dispatch

pytestmark = pytest.mark.anyio
H = HookName


def never(text: str) -> bool:
    """never passes"""
    return False


def sampler_with(*plugins, backend=None, **kwargs) -> Sampler:
    return Sampler(
        backend or ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False, **kwargs
    )


async def test_pluggy_order_awaits_and_changes_are_seen_by_the_next():
    order = []

    class Plain:
        def __init__(self, label):
            self.label = label

        @hookimpl
        async def generation_pre_call(self, payload):
            await anyio.sleep(0.001)
            payload.options = {**payload.options, "trail": payload.options["trail"] + [self.label]}
            order.append(self.label)

    class First:
        @hookimpl(tryfirst=True)
        def generation_pre_call(self, payload):
            payload.options = {"trail": ["first"]}
            order.append("first")

    class Last:
        @hookimpl(trylast=True)
        def generation_pre_call(self, payload):
            order.append("last")
            payload.options = {**payload.options, "trail": payload.options["trail"] + ["last"]}

    backend = ScriptedBackend(["x"])
    sampler = sampler_with(Last(), Plain("a"), First(), Plain("b"), backend=backend)
    await sampler.sample("q")
    # tryfirst, then plain ones last-registered-first, then trylast; each saw the change before
    assert order == ["first", "b", "a", "last"]
    assert backend.requests[0].options["trail"] == ["first", "b", "a", "last"]


async def test_pre_call_and_repair_changes_reach_the_backend():
    class Editor:
        @hookimpl
        def generation_pre_call(self, payload):
            payload.messages = [{"role": "system", "content": "be brief"}, *payload.messages]
            payload.options["temperature"] = 0.1

        @hookimpl
        def sampling_repair(self, payload):
            payload.messages = [{"role": "user", "content": f"retry after {payload.attempt}"}]

    backend = ScriptedBackend(["x"])
    await sampler_with(Editor(), backend=backend).sample(
        "q", requirements=[never], loop_budget=2, options={"max_tokens": 5}
    )
    first, second = backend.requests
    assert first.messages == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "q"},
    ]
    assert first.options == {"max_tokens": 5, "temperature": 0.1}
    assert second.messages[-1] == {"role": "user", "content": "retry after 1"}


async def test_opt_in_arguments_specname_and_optionalhook():
    calls = []

    class Flexible:
        @hookimpl
        def sampling_loop_end(self):
            calls.append("no-arg end")

        @hookimpl(specname="sampling_iteration")
        def on_attempt(self, payload):
            calls.append(f"attempt {payload.iteration}")

        @hookimpl(optionalhook=True)
        def some_future_hook(self, payload):
            calls.append("never")

    await sampler_with(Flexible()).sample("q")
    assert calls == ["attempt 1", "no-arg end"]


async def test_unknown_hooks_and_wrappers_are_refused_at_registration():
    class Typo:
        @hookimpl
        def sampling_iteraton(self, payload):
            pass

    class Wrapper:
        @hookimpl(wrapper=True)
        def sampling_loop_start(self, payload):
            return (yield)

    with pytest.raises(PluginError, match="unknown hook 'sampling_iteraton'"):
        sampler_with(Typo())
    with pytest.raises(PluginError) as caught:
        sampler_with(Wrapper())
    assert "sampling_loop_end" in str(caught.value) and caught.value.plugin_name == "Wrapper"


@pytest.mark.parametrize(
    "hook", [H.SAMPLING_ITERATION, H.GENERATION_POST_CALL, H.SAMPLING_LOOP_END]
)
async def test_faults_in_observe_only_hooks_are_isolated_and_named(hook):
    seen = []

    def broken(self, payload):
        raise RuntimeError("plugin bug")

    broken.__name__ = hook.value
    Broken = type("Broken", (), {hook.value: hookimpl(broken)})

    class Healthy:
        @hookimpl(trylast=True)
        def sampling_iteration(self, payload):
            seen.append(payload.iteration)

    with capture_logs() as logs:
        result = await sampler_with(Healthy(), Broken()).sample("q", loop_budget=1)
    assert result.success and seen == [1]
    (fault,) = result.plugin_errors
    assert str(fault) == f"Broken, {hook.value}: plugin bug"
    assert any(
        log["event"] == "plugin.error" and log["plugin"] == "Broken" and log["hook"] == hook.value
        for log in logs
    )


async def test_strict_sampler_raises_observe_only_faults():
    class Broken:
        @hookimpl
        def sampling_iteration(self, payload):
            raise RuntimeError("plugin bug")

    with pytest.raises(PluginError) as caught:
        await sampler_with(Broken(), strict_plugins=True).sample("q")
    assert (caught.value.plugin_name, caught.value.hook) == ("Broken", "sampling_iteration")


async def test_faults_in_hooks_that_change_the_payload_fail_closed():
    class Broken:
        @hookimpl
        def sampling_repair(self, payload):
            raise RuntimeError("cannot repair")

    backend = ScriptedBackend(["x"])
    with pytest.raises(PluginError, match="plugin 'Broken' failed in sampling_repair"):
        await sampler_with(Broken(), backend=backend).sample(
            "q", requirements=[never], loop_budget=3
        )
    assert backend.calls == 1


async def test_writing_a_read_only_field_raises_at_once_naming_field_and_hook():
    class Meddler:
        @hookimpl
        def sampling_iteration(self, payload):
            payload.passed = True

        @hookimpl
        def sampling_loop_start(self, payload):
            payload.loop_budget = 2  # allowed

    result = await sampler_with(Meddler()).sample("q", requirements=[never])
    assert result.success is False and result.iterations_used == 2
    faults = result.plugin_errors
    assert len(faults) == 2
    assert all(isinstance(f.exception, ReadOnlyFieldError) for f in faults)
    assert "'passed'" in str(faults[0]) and "sampling_iteration" in str(faults[0])

    class Pusher:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.messages = []

    with pytest.raises(PluginError) as caught:
        await sampler_with(Pusher()).sample("q")
    assert isinstance(caught.value.__cause__, ReadOnlyFieldError)
    assert "'messages'" in str(caught.value) and "sampling_loop_start" in str(caught.value)


async def test_names_are_class_names_with_suffixes_and_modules_by_name():
    class Counter:
        @hookimpl
        def sampling_iteration(self, payload):
            pass

    module = types.ModuleType("my_plugin_module")

    @hookimpl
    def sampling_loop_end(payload):
        pass

    module.sampling_loop_end = sampling_loop_end
    sampler = sampler_with(Counter(), Counter(), module)
    assert sampler.plugins.names() == ["Counter", "Counter-2", "my_plugin_module"]
    assert sampler.register(Counter()) == "Counter-3"


async def test_per_call_plugins_never_see_another_calls_events():
    class Seen:
        def __init__(self):
            self.ids = set()

        @hookimpl
        def sampling_iteration(self, payload):
            self.ids.add(payload.sampling_id)

        @hookimpl
        def sampling_loop_end(self, payload):
            self.ids.add(payload.sampling_id)

    shared = Seen()
    sampler = sampler_with(shared, backend=ScriptedBackend(["x"], latency=0.002))
    mine, yours = Seen(), Seen()
    results = {}

    async def run(label, plugin):
        results[label] = await sampler.sample(
            "q", requirements=[never], loop_budget=3, concurrency_budget=2, plugins=[plugin]
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run, "mine", mine)
        group.start_soon(run, "yours", yours)
    assert mine.ids == {results["mine"].sampling_id}
    assert yours.ids == {results["yours"].sampling_id}
    assert shared.ids == {results["mine"].sampling_id, results["yours"].sampling_id}
    assert sampler.plugins.names() == ["Seen"]  # per-call plugins were not kept


async def test_no_payload_is_built_for_a_hook_nobody_implements(monkeypatch):
    built = []
    # The engine builds every payload through the builders the hook channel made once.
    builders = dict(dispatch.BUILDERS)
    assert builders.keys() == PAYLOAD_TYPES.keys()

    def counting(build):
        def count(fields):
            payload = build(fields)
            built.append(payload.hook)
            return payload

        return count

    for hook, build in builders.items():
        monkeypatch.setitem(dispatch.BUILDERS, hook, counting(build))

    await sampler_with().sample("q", requirements=[never], loop_budget=2, concurrency_budget=2)
    assert built == []

    class OnlyEnd:
        @hookimpl
        def sampling_loop_end(self, payload):
            pass

    await sampler_with(OnlyEnd()).sample("q", requirements=[never], loop_budget=2)
    assert built == [H.SAMPLING_LOOP_END]


async def test_trace_hooks_prints_every_hook_call(monkeypatch, capsys, hook_recorder):
    monkeypatch.setenv("SAMPLEHOOKS_TRACE_HOOKS", "1")
    await sampler_with(hook_recorder).sample("q")
    err = capsys.readouterr().err
    for hook in ("sampling_loop_start", "generation_pre_call", "sampling_iteration"):
        assert f"samplehooks: {hook} -> HookRecorder" in err
    assert "iteration=1" in err


async def test_hooks_see_the_attempt_in_a_backend_raised_error(hook_recorder):
    def fail(request: GenerationRequest):
        return ValueError("bad request") if request.iteration.attempt == 2 else None

    await sampler_with(hook_recorder, backend=ScriptedBackend(["x"], failures=fail)).sample(
        "q", requirements=[never], loop_budget=3
    )
    (error,) = hook_recorder.payloads(H.GENERATION_ERROR)
    assert (error.attempt, error.iteration, error.will_retry) == (2, 2, False)
    assert str(error.exception) == "bad request"


@pytest.mark.parametrize("others", [0, 1], ids=["alone", "with another plugin"])
async def test_a_write_made_after_the_hook_is_credited_to_nobody(others):
    kept = []

    class Keeper:
        @hookimpl
        def generation_pre_call(self, payload):
            payload.options = {"temperature": 0.1}
            kept.append(payload)

    class Bystander:  # registered last, so it runs first
        @hookimpl
        def generation_pre_call(self, payload):
            pass

    plugins = [Keeper()] + [Bystander() for _ in range(others)]
    await sampler_with(*plugins).sample("q")
    [payload] = kept
    assert payload.written_by("options") == "Keeper"
    payload.messages = []  # after the hook: no implementation is running
    assert payload.written_by("messages") is None
