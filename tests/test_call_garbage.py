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
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector frees is kept in gc.garbage
    try:
        await calls(20)
        gc.collect()
        ours = [shown(thing) for thing in gc.garbage if is_ours(thing)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    # Only this package's objects count: another test's thread may make garbage meanwhile.
    assert ours == [], f"freed only by the cycle collector: {sorted(set(ours))}"


OURS = ("sampling_core", "hook_specs")


def is_ours(thing: object) -> bool:
    """An object of this package, or a frame or coroutine running its code."""
    if type(thing).__module__.split(".")[0] in OURS:
        return True
    code = getattr(thing, "f_code", None) or getattr(thing, "cr_code", None)
    return code is not None and any(f"/{name}/" in code.co_filename for name in OURS)


def shown(thing: object) -> str:
    code = getattr(thing, "f_code", None) or getattr(thing, "cr_code", None)
    return f"{type(thing).__name__} {code.co_name}" if code else type(thing).__qualname__
