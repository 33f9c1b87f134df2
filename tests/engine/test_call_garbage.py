"""A ``sample()`` call leaves no reference cycle behind.

Everything a call makes is freed by reference counting the moment the call returns; none
of it waits for the cyclic garbage collector. A cycle (a bound method of the call kept on
the call itself, say) would keep each call's objects alive until a collection and cost
every call the collector's work: one such cycle once added about 3 k instructions per
attempt with a plugin registered.

The calls run in a process of their own: in the test process, garbage another test left
(an exception and its frames, released late) could be collected meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CASES = (
    "no plugin",
    "trivial plugin",
    "async observer",
    "async wrappers",
    "streamed, early stop",
    "launch",
)

SCRIPT = r'''
import gc, json, sys
import anyio
from typing import Any
from benchmarks.fakes import TrivialPlugin
from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements import max_words


class AsyncObserver:
    @hookimpl
    async def sampling_iteration(self, payload: Any) -> None:
        return None


class AsyncWrappers:
    @hookimpl(wrapper=True)
    async def sampling_call(self, payload: Any) -> Any:
        yield

    @hookimpl(wrapper=True)
    async def generation_call(self, payload: Any) -> Any:
        outcome = yield
        outcome.force_result(outcome.get_result())


def never(text: str) -> bool:
    """never passes"""
    return False


CASES = {
    "no plugin": ({}, []),
    "trivial plugin": ({}, [TrivialPlugin()]),
    "async observer": ({}, [AsyncObserver()]),
    "async wrappers": ({}, [AsyncWrappers()]),
    "streamed, early stop": ({"requirements": [max_words(1)]}, []),
    "launch": ({"launch": "on_failure"}, [TrivialPlugin()]),
}


def shown(thing):
    code = getattr(thing, "f_code", None) or getattr(thing, "cr_code", None)
    return f"{type(thing).__name__} {code.co_name}" if code else type(thing).__qualname__


async def left_behind(case, concurrency):
    ask, plugins = CASES[case]
    sampler = Sampler(ScriptedBackend(["one two three"]), plugins=plugins, load_entrypoints=False)
    ask = {"requirements": [never], **ask}

    async def calls(n):
        for _ in range(n):
            await sampler.sample("q", loop_budget=3, concurrency_budget=concurrency, **ask)

    await calls(3)  # warm: tables, caches and lazily made objects exist from here on
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector frees is kept in gc.garbage
    try:
        await calls(20)
        gc.collect()
        return sorted({shown(thing) for thing in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


found = {}
for backend in ("asyncio", "trio"):
    for case in CASES:
        for concurrency in (1, 4):
            found[f"{backend}|{case}|{concurrency}"] = anyio.run(
                left_behind, case, concurrency, backend=backend
            )
print(json.dumps(found))
'''


@pytest.fixture(scope="module")
def garbage() -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).resolve().parents[2],  # the checkout: benchmarks is importable
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("concurrency", [1, 4])
@pytest.mark.parametrize("case", CASES)
def test_a_call_leaves_no_cycle(
    garbage: dict[str, list[str]], backend: str, case: str, concurrency: int
) -> None:
    left = garbage[f"{backend}|{case}|{concurrency}"]
    assert left == [], f"freed only by the cycle collector: {left}"
