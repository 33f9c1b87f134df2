"""Hook delivery: live registration, background observers, deep read-only payloads.

(Hook-call monitoring: ``hooks/test_monitoring.py``.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import anyio
import pytest

from hook_specs import HookName, ReadOnlyFieldError, background, hookimpl
from sampling_core import Generation, PluginError, Sampler, ScriptedBackend, ValidationResult
from sampling_core.testing import HookRecorder

pytestmark = pytest.mark.anyio
H = HookName


def never(text: str) -> bool:
    """never passes"""
    return False


def sampler_with(*plugins, **kwargs) -> Sampler:
    return Sampler(ScriptedBackend(["x"]), plugins=plugins, load_entrypoints=False, **kwargs)


async def test_late_register_and_unregister_take_effect_from_the_next_call():
    sampler = sampler_with()
    await sampler.sample("q")
    late, direct = HookRecorder(), HookRecorder()
    sampler.plugins.register(late)
    sampler.plugins.manager.register(direct, "direct")  # straight on pluggy's manager
    first = await sampler.sample("q")
    assert late.sampling_ids() == [first.sampling_id] and direct.sampling_ids() == [
        first.sampling_id
    ]
    assert sampler.plugins.unregister("HookRecorder") is late
    sampler.plugins.manager.unregister(direct)
    await sampler.sample("q")
    assert late.sampling_ids() == [first.sampling_id] and direct.sampling_ids() == [
        first.sampling_id
    ]
    assert sampler.plugins.unregister("nobody") is None


class Slow:
    def __init__(self) -> None:
        self.seen: list[int] = []
        self.threads: set[str] = set()

    @hookimpl
    @background
    def sampling_iteration(self, payload):
        self.threads.add(threading.current_thread().name)
        self.seen.append(payload.sequence)

    @hookimpl
    @background
    async def sampling_loop_end(self, payload):
        await anyio.sleep(0)
        self.seen.append(-1)


async def test_background_events_arrive_in_order_off_the_loop_before_aclose_returns():
    slow = Slow()
    async with sampler_with(slow) as sampler:
        result = await sampler.sample(
            "q", requirements=[never], loop_budget=3, concurrency_budget=3
        )
    assert slow.seen == [*range(1, result.iterations_used + 1), -1]
    assert slow.threads == {"samplehooks-background-Slow"}


def test_sample_sync_returns_after_every_background_event():
    slow = Slow()
    result = sampler_with(slow).sample_sync("q", requirements=[never], loop_budget=4)
    assert slow.seen == [1, 2, 3, 4, -1] and result.iterations_used == 4


async def test_a_raising_background_observer_is_isolated_and_reported():
    class Broken:
        @hookimpl
        @background
        def generation_post_call(self, payload):
            raise RuntimeError("observer down")

    sampler = sampler_with(Broken())
    result = await sampler.sample("q")
    await sampler.aclose()
    assert result.success and result.plugin_errors == []
    [fault] = sampler.background_faults
    assert str(fault) == "Broken, generation_post_call: observer down"


async def test_a_stalled_observer_makes_the_engine_wait_and_nothing_is_dropped():
    release = threading.Event()

    class Stalled:
        def __init__(self) -> None:
            self.count = 0

        @hookimpl
        @background
        def sampling_iteration(self, payload):
            release.wait(10)
            self.count += 1

    stalled = Stalled()
    sampler = sampler_with(stalled, background_queue_size=2)
    with anyio.move_on_after(0.5) as scope:
        await sampler.sample("q", requirements=[never], loop_budget=8)
    assert scope.cancelled_caught  # the engine waited for room in the queue
    assert sampler.background.pending() <= 3  # bounded: two queued, one being delivered
    release.set()
    result = await sampler.sample("q", requirements=[never], loop_budget=8)
    await sampler.aclose()
    assert result.iterations_used == 8
    assert stalled.count == sampler.background.delivered >= 8 + 2


def test_background_is_refused_on_hooks_that_may_write():
    class Writer:
        @hookimpl
        @background
        def generation_pre_call(self, payload):
            pass

    with pytest.raises(PluginError, match="@background is only for observe-only hooks"):
        sampler_with(Writer())
    sampler = sampler_with()
    with pytest.raises(PluginError, match="@background"):
        sampler.plugins.manager.register(Writer())
    assert sampler.plugins.names() == []


def test_background_events_are_delivered_at_interpreter_exit(tmp_path):
    out = tmp_path / "events.txt"
    script = textwrap.dedent(
        f"""
        import asyncio, time
        from hook_specs import background, hookimpl
        from sampling_core import Sampler, ScriptedBackend

        class Writer:
            @hookimpl
            @background
            def sampling_iteration(self, payload):
                time.sleep(0.05)
                with open({str(out)!r}, "a") as f:
                    f.write(f"{{payload.sequence}}\\n")

        sampler = Sampler(ScriptedBackend(["x"]), plugins=[Writer()], load_entrypoints=False)
        asyncio.run(sampler.sample("q", requirements=[lambda t: False], loop_budget=5))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert out.read_text().split() == ["1", "2", "3", "4", "5"]


@pytest.mark.parametrize(
    "write",
    [
        lambda p: setattr(p.generation, "text", "forged"),
        lambda p: setattr(p.validations[0], "passed", True),
        lambda p: p.validations.append(None),
        lambda p: p.validations.__setitem__(0, ValidationResult(True)),
        lambda p: p.validations.__setitem__(slice(0, 1), [ValidationResult(True)]),
        lambda p: p.validations.__delitem__(0),
        lambda p: p.validations.__iadd__([ValidationResult(True)]),
        lambda p: p.validations.sort(key=id),
        lambda p: setattr(p.usage, "input_tokens", 0),
        lambda p: setattr(p.generation.usage, "output_tokens", 0),
        lambda p: p.generation.raw["choices"].__setitem__(0, "forged"),
        lambda p: p.generation.raw.__setitem__("model", "forged"),
    ],
    ids=[
        "generation.text",
        "validations[0].passed",
        "append",
        "validations[0] =",
        "validations[0:1] =",
        "del validations[0]",
        "+=",
        "sort",
        "usage",
        "generation.usage",
        "raw['choices'][0] =",
        "raw['model'] =",
    ],
)
async def test_nested_writes_in_observe_only_hooks_are_refused(write):
    refused = []

    class Forger:
        @hookimpl
        def sampling_iteration(self, payload):
            try:
                write(payload)
            except ReadOnlyFieldError as exc:
                refused.append(exc)

    raw = {"choices": ["x"], "model": "m"}
    backend = ScriptedBackend(lambda request: Generation("x", raw=raw))
    sampler = Sampler(backend, plugins=[Forger()], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never])
    [error] = refused
    assert error.hook == "sampling_iteration" and "sampling_iteration" in str(error)
    [attempt] = result.attempts
    assert result.text == "x" and [v.passed for v in attempt.validations] == [False]
    assert raw == {"choices": ["x"], "model": "m"}


async def test_forging_the_answer_in_post_call_fails_and_names_the_field():
    class Forger:
        @hookimpl
        def generation_post_call(self, payload):
            payload.generation.text = "forged"

    result = await sampler_with(Forger()).sample("q")
    assert result.text == "x"
    [fault] = result.plugin_errors
    assert "'generation.text'" in str(fault) and "generation_post_call" in str(fault)


async def test_early_exit_off_runs_every_subsample_to_its_end():
    backend = ScriptedBackend(["good", "bad", "bad", "bad"])
    sampler = Sampler(backend, load_entrypoints=False)
    result = await sampler.sample(
        "q",
        requirements=[lambda t: t == "good"],
        loop_budget=2,
        concurrency_budget=2,
        early_exit=False,
    )
    assert result.success and result.text == "good" and result.cancelled == 0
    assert len(backend.requests) >= 3  # the sibling went on after the pass


async def test_a_backend_that_never_awaits_still_honours_an_outer_timeout():
    class Instant:
        async def generate(self, request):
            return "no"

    sampler = Sampler(
        Instant(), load_entrypoints=False, max_loop_budget=10**8, max_attempts_per_call=10**8
    )
    with anyio.move_on_after(0.2) as scope:
        await sampler.sample("q", requirements=[never], loop_budget=10**8, concurrency_budget=1)
    assert scope.cancelled_caught


async def test_attempts_refused_in_pre_call_are_not_counted_as_cancelled():
    class Refuser:
        @hookimpl
        def generation_pre_call(self, payload):
            if payload.attempt == 2:
                from hook_specs import StopSampling

                raise StopSampling("budget")

    result = await sampler_with(Refuser()).sample("q", requirements=[never], loop_budget=3)
    assert result.stop_reason == "stopped_by_plugin"
    assert result.iterations_used == 1 and result.cancelled == 0
