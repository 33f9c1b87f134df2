"""Faults of one plugin in one hook are bounded within a call (the first few kept, the rest
counted) and keep no payload: an observer raising on every chunk of a long stream costs a
few faults, whatever the stream's length, and no chunk's payload outlives its delivery."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import anyio
import pytest

from hook_specs import (
    GenerationChunkPayload,
    HookPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    background,
    hookimpl,
)
from sampling_core import Sampler, ScriptedBackend
from sampling_core.hooks.faults import KEPT_PER_HOOK, Faults

pytestmark = pytest.mark.anyio

CHUNKS = 300


class Payloads:
    """Weak references to the payloads an observer was given: which ones are still alive."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref[HookPayload]] = []

    def saw(self, payload: HookPayload) -> None:
        self.refs.append(weakref.ref(payload))

    def alive(self) -> int:
        gc.collect()
        return sum(ref() is not None for ref in self.refs)


class RaisesOnEveryChunk:
    def __init__(self, payloads: Payloads) -> None:
        self.payloads = payloads

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.payloads.saw(payload)
        raise ValueError(f"chunk {payload.index}")


class RaisesOnEveryChunkAsync(RaisesOnEveryChunk):
    @hookimpl
    async def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.payloads.saw(payload)
        await anyio.lowlevel.checkpoint()
        raise ValueError(f"chunk {payload.index}")


class RaisesWhileHandling(RaisesOnEveryChunk):
    """Raises while handling its own error: the handled one's frames hold the payload too."""

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.payloads.saw(payload)
        try:
            {}[payload.index]
        except KeyError as exc:
            raise ValueError("no such chunk") from exc


def long_reply() -> ScriptedBackend:
    return ScriptedBackend([" ".join(["w"] * CHUNKS)])


@pytest.mark.parametrize(
    "plugin", [RaisesOnEveryChunk, RaisesOnEveryChunkAsync, RaisesWhileHandling]
)
async def test_an_observer_raising_on_every_chunk_costs_a_few_faults_and_keeps_no_payload(
    plugin: type[RaisesOnEveryChunk],
) -> None:
    payloads = Payloads()
    result = await Sampler(long_reply(), plugins=[plugin(payloads)], load_entrypoints=False).sample(
        "q"
    )
    assert result.success and len(payloads.refs) == CHUNKS  # every chunk was delivered
    faults = result.plugin_errors
    assert len(faults) == KEPT_PER_HOOK
    assert [f.more for f in faults] == [0] * (KEPT_PER_HOOK - 1) + [CHUNKS - KEPT_PER_HOOK]
    assert f"(and {CHUNKS - KEPT_PER_HOOK} more in this hook, not kept)" in str(faults[-1])
    assert all(f.hook == "generation_chunk" for f in faults)
    assert payloads.alive() == 0  # neither the faults nor their tracebacks hold a payload


async def test_each_plugin_in_each_hook_is_bounded_apart() -> None:
    payloads = Payloads()

    class AlsoIterations(RaisesOnEveryChunk):
        @hookimpl
        def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
            raise ValueError("iteration")

    result = await Sampler(
        long_reply(),
        plugins=[AlsoIterations(payloads), RaisesOnEveryChunk(payloads)],
        load_entrypoints=False,
    ).sample("q", concurrency_budget=2, early_exit=False)
    kept = [(f.plugin_name, f.hook) for f in result.plugin_errors]
    assert kept.count(("AlsoIterations", "generation_chunk")) == KEPT_PER_HOOK
    assert kept.count(("RaisesOnEveryChunk", "generation_chunk")) == KEPT_PER_HOOK
    assert (
        kept.count(("AlsoIterations", "sampling_iteration")) == 2
    )  # two attempts: under the bound
    assert sum(f.more for f in result.plugin_errors) == 2 * (2 * CHUNKS - KEPT_PER_HOOK)


async def test_a_background_observer_raising_on_every_chunk_is_bounded_too() -> None:
    payloads = Payloads()

    class InTheBackground:
        @background
        @hookimpl
        def generation_chunk(self, payload: GenerationChunkPayload) -> None:
            payloads.saw(payload)
            raise ValueError("late")

    sampler = Sampler(long_reply(), plugins=[InTheBackground()], load_entrypoints=False)
    await sampler.sample("q")
    await sampler.aclose()
    faults = sampler.background_faults
    assert len(faults) == KEPT_PER_HOOK and faults[-1].more == CHUNKS - KEPT_PER_HOOK
    assert payloads.alive() == 0


async def test_the_engines_own_error_keeps_its_traceback_when_a_loop_end_observer_raises() -> None:
    class FailsAtTheEnd:
        @hookimpl
        def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
            raise ValueError("while the call failed")

    sampler = Sampler(
        ScriptedBackend(["x"], failures={1: RuntimeError("down")}),
        plugins=[FailsAtTheEnd()],
        load_entrypoints=False,
    )
    with pytest.raises(RuntimeError, match="down") as raised:
        await sampler.sample("q")
    assert raised.value.__traceback__ is not None  # the caller's error is not the plugin's


def test_a_fault_list_keeps_where_each_kept_fault_was_raised(capsys: Any) -> None:
    def plugin_code() -> None:
        raise ValueError("here")

    faults = Faults()
    for _ in range(KEPT_PER_HOOK + 2):
        try:
            plugin_code()
        except ValueError as exc:
            faults.add("p", "generation_chunk", exc)
    logged = capsys.readouterr().out
    assert logged.count("plugin.error ") == KEPT_PER_HOOK
    assert "in plugin_code" in logged and "test_fault_bounds.py" in logged
    assert logged.count("plugin.error.repeated") == 1
    assert faults[-1].more == 2 and all(f.exception.__traceback__ is None for f in faults)
