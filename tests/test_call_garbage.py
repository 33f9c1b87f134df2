"""A ``sample()`` call leaves no reference cycle behind.

Everything a call makes is freed by reference counting the moment the call returns; none
of it waits for the cyclic garbage collector. A cycle (a bound method of the call kept on
the call itself, say) would keep each call's objects alive until a collection and cost
every call the collector's work: one such cycle once added about 3 k instructions per
attempt with a plugin registered.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from benchmarks.fakes import TrivialPlugin
from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements import max_words

pytestmark = pytest.mark.anyio


class AsyncObserver:
    """An async implementation: iteration events are then delivered in order, locked."""

    @hookimpl
    async def sampling_iteration(self, payload: Any) -> None:
        return None


def never(text: str) -> bool:
    """never passes"""
    return False


CASES = {
    "no plugin": ({}, []),
    "trivial plugin": ({}, [TrivialPlugin()]),
    "async observer": ({}, [AsyncObserver()]),
    "streamed, early stop": ({"requirements": [max_words(1)]}, []),
    "staggered launch": ({"launch": "on_failure"}, [TrivialPlugin()]),
}


@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("case", list(CASES))
async def test_a_call_leaves_no_cycle(case: str, concurrency: int) -> None:
    ask, plugins = CASES[case]
    sampler = Sampler(ScriptedBackend(["one two three"]), plugins=plugins, load_entrypoints=False)
    ask = {"requirements": [never], **ask}

    async def calls(n: int) -> None:
        for _ in range(n):
            await sampler.sample("q", loop_budget=3, concurrency_budget=concurrency, **ask)

    await calls(3)  # warm: tables, caches and lazily made objects exist from here on
    gc.collect()
    gc.disable()
    try:
        await calls(20)
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{found} objects were freed only by the cycle collector"
