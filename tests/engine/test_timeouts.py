"""Per-attempt and per-plugin timeouts (both off by default)."""

from __future__ import annotations

import anyio
import pytest

from hook_specs import hookimpl
from sampling_core import (
    AttemptTimeout,
    GenerationRequest,
    PluginError,
    RetryPolicy,
    Sampler,
    ScriptedBackend,
)
from sampling_core.hooks.faults import PluginTimeout

pytestmark = pytest.mark.anyio


async def test_a_hanging_backend_call_times_out_and_is_retried_as_transient():
    calls = 0

    async def reply(request: GenerationRequest) -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await anyio.sleep_forever()
        return "ok"

    sampler = Sampler(
        ScriptedBackend(reply),
        load_entrypoints=False,
        attempt_timeout=0.05,
        retry=RetryPolicy(max_retries=1, base_delay=0.0),
    )
    with anyio.fail_after(10):
        result = await sampler.sample("q")
    assert result.success and calls == 2


async def test_a_backend_that_always_hangs_ends_in_attempt_timeout():
    async def reply(request: GenerationRequest) -> str:
        await anyio.sleep_forever()
        return "never"

    sampler = Sampler(
        ScriptedBackend(reply), load_entrypoints=False, attempt_timeout=0.02, retry=RetryPolicy(0)
    )
    with anyio.fail_after(10), pytest.raises(AttemptTimeout):
        await sampler.sample("q", concurrency_budget=2)


def stuck_in(hook: str) -> object:
    """A plugin named ``Stuck`` whose async ``hook`` never returns."""

    async def wait(self, payload):
        await anyio.sleep_forever()

    return type("Stuck", (), {hook: hookimpl(wait)})()


@pytest.mark.parametrize("hook", ["sampling_iteration", "sampling_loop_end"])
async def test_a_plugin_that_blocks_forever_in_an_observe_only_hook_is_isolated(hook):
    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[stuck_in(hook)],
        load_entrypoints=False,
        plugin_timeout=0.05,
    )
    with anyio.fail_after(10):
        result = await sampler.sample("q", concurrency_budget=2)
    assert result.success
    events = result.iterations_used if hook == "sampling_iteration" else 1
    assert [(f.plugin_name, f.hook) for f in result.plugin_errors] == [("Stuck", hook)] * events
    for fault in result.plugin_errors:  # one per delivered event
        assert isinstance(fault.exception, PluginTimeout)


@pytest.mark.parametrize("hook", ["generation_pre_call", "sampling_loop_start"])
async def test_a_plugin_that_blocks_in_a_hook_that_may_write_fails_closed(hook):
    backend = ScriptedBackend(["x"])
    sampler = Sampler(
        backend, plugins=[stuck_in(hook)], load_entrypoints=False, plugin_timeout=0.02
    )
    with anyio.fail_after(10), pytest.raises(PluginError) as raised:
        await sampler.sample("q")
    assert (raised.value.plugin_name, raised.value.hook) == ("Stuck", hook)
    assert "took longer than" in str(raised.value)
    assert backend.calls == 0


@pytest.mark.parametrize("bad", [0, -1, True, "1"])
def test_timeouts_must_be_positive_numbers(bad):
    with pytest.raises(ValueError, match="seconds"):
        Sampler(ScriptedBackend(["x"]), load_entrypoints=False, attempt_timeout=bad)
