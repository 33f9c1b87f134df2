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
from sampling_core.dispatch import PluginTimeout

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


async def test_a_plugin_that_blocks_forever_is_isolated_under_a_timeout():
    class Stuck:
        @hookimpl
        async def sampling_iteration(self, payload):
            await anyio.sleep_forever()

    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Stuck()], load_entrypoints=False, plugin_timeout=0.05
    )
    with anyio.fail_after(10):
        result = await sampler.sample("q", concurrency_budget=2)
    assert result.success
    assert len(result.plugin_errors) == result.iterations_used  # one per delivered event
    for fault in result.plugin_errors:
        assert isinstance(fault.exception, PluginTimeout) and fault.plugin_name == "Stuck"


async def test_a_slow_plugin_in_a_mutating_hook_fails_closed():
    class Slow:
        @hookimpl
        async def generation_pre_call(self, payload):
            await anyio.sleep(5)

    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[Slow()], load_entrypoints=False, plugin_timeout=0.02)
    with anyio.fail_after(10), pytest.raises(PluginError, match="took longer than"):
        await sampler.sample("q")
    assert backend.calls == 0


@pytest.mark.parametrize("bad", [0, -1, True, "1"])
def test_timeouts_must_be_positive_numbers(bad):
    with pytest.raises(ValueError, match="seconds"):
        Sampler(ScriptedBackend(["x"]), load_entrypoints=False, attempt_timeout=bad)
