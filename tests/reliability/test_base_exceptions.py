"""``BaseException`` subclasses from the backend, a check or a plugin, at every hook.

Nothing may swallow them: ``sample()`` raises the very exception (not a group), after
``sampling_loop_end`` fired once with it; siblings in flight are cancelled and no task is
left behind. ``KeyboardInterrupt`` and ``SystemExit`` escape the event loop by design, so
they are checked in a child process (see also ``engine/test_errors.py``).
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import anyio
import pytest

from hook_specs import hookimpl
from sampling_core import GenerationRequest, Sampler, ScriptedBackend
from tests.support.task_helpers import alive_tasks

pytestmark = pytest.mark.anyio


class Fatal(BaseException):
    """A custom ``BaseException``: not an ``Exception``."""


class Boom(RuntimeError):
    pass


HOOKS = [
    "sampling_loop_start",
    "generation_pre_call",
    "generation_post_call",
    "generation_error",
    "sampling_iteration",
    "sampling_repair",
    "sampling_loop_end",
]


class Harness:
    """Three subsamples: #1 meets the fault; #0 and #2 wait in their backend call."""

    def __init__(self, where: str, is_async: bool) -> None:
        self.where = where
        self.ends: list[Any] = []
        self.waiting = 0
        self.cancelled = 0
        self.raised: Fatal | None = None
        harness = self

        class Faulty:
            @hookimpl
            def sampling_loop_end(self, payload: Any) -> None:
                harness.ends.append(payload)
                if where == "sampling_loop_end":
                    harness.fail()

        if where in HOOKS and where != "sampling_loop_end":
            setattr(Faulty, where, hookimpl(self._hook(where, is_async)))
        self.plugin = Faulty()

    def fail(self) -> None:
        self.raised = Fatal(self.where)
        raise self.raised

    def _hook(self, name: str, is_async: bool) -> Any:
        harness = self

        def mine(payload: Any) -> bool:
            return getattr(payload, "subsample_index", 1) == 1

        if is_async:

            async def hook(self: Any, payload: Any) -> None:
                await anyio.sleep(0)
                if mine(payload):
                    harness.fail()
        else:

            def hook(self: Any, payload: Any) -> None:
                if mine(payload):
                    harness.fail()

        hook.__name__ = name
        return hook

    async def reply(self, request: GenerationRequest) -> str:
        if request.iteration.subsample_index != 1 and self.where != "sampling_loop_end":
            self.waiting += 1
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled += 1
        if request.iteration.subsample_index == 1:
            if self.where == "backend":
                self.fail()
            if self.where == "generation_error":
                raise Boom("down")
        return "no"

    def check(self, text: str) -> bool:
        """never passes"""
        if self.where == "check":
            self.fail()
        return False


@pytest.mark.parametrize(
    ("where", "is_async"),
    [("backend", False), ("check", False)]
    + [(hook, False) for hook in HOOKS]
    + [(hook, True) for hook in ("generation_pre_call", "sampling_iteration", "sampling_repair")],
)
async def test_a_base_exception_propagates_as_itself_and_nothing_is_left(
    where: str, is_async: bool
) -> None:
    harness = Harness(where, is_async)
    sampler = Sampler(
        ScriptedBackend(harness.reply), plugins=[harness.plugin], load_entrypoints=False
    )
    before = alive_tasks()
    with anyio.fail_after(10), pytest.raises(Fatal) as caught:
        await sampler.sample("q", requirements=[harness.check], loop_budget=2, concurrency_budget=3)
    assert caught.value is harness.raised and type(caught.value) is Fatal
    assert alive_tasks() <= before
    assert harness.cancelled == harness.waiting  # every sibling in flight was cancelled
    (end,) = harness.ends  # loop end fired exactly once
    if where == "sampling_loop_end":
        assert end.exception is None and end.stop_reason == "budget_exhausted"
    else:
        assert end.exception is harness.raised and end.stop_reason == "error"


async def test_base_exceptions_from_several_subsamples_at_once_raise_one_not_a_group() -> None:
    ends: list[Any] = []

    class Everywhere:
        @hookimpl
        def generation_pre_call(self, payload: Any) -> None:
            raise Fatal(f"subsample {payload.subsample_index}")

        @hookimpl
        def sampling_loop_end(self, payload: Any) -> None:
            ends.append(payload)

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Everywhere()], load_entrypoints=False)
    before = alive_tasks()
    with anyio.fail_after(10), pytest.raises(Fatal) as caught:
        await sampler.sample("q", concurrency_budget=3)
    assert type(caught.value) is Fatal and str(caught.value).startswith("subsample ")
    (note,) = caught.value.__notes__
    assert note.startswith("other subsamples raised too: Fatal: subsample ")
    (end,) = ends
    assert end.exception is caught.value
    assert alive_tasks() <= before


async def test_a_plugin_timeout_does_not_turn_a_base_exception_into_a_fault() -> None:
    harness = Harness("sampling_iteration", is_async=True)
    sampler = Sampler(
        ScriptedBackend(harness.reply),
        plugins=[harness.plugin],
        load_entrypoints=False,
        plugin_timeout=5.0,
    )
    with anyio.fail_after(10), pytest.raises(Fatal):
        await sampler.sample("q", requirements=[harness.check], concurrency_budget=3)
    assert harness.cancelled == harness.waiting
    (end,) = harness.ends
    assert end.exception is harness.raised


CHILD = """
import sys, anyio
from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend

where, name, loop = sys.argv[1:4]
kind = {"KeyboardInterrupt": KeyboardInterrupt, "SystemExit": SystemExit}[name]
ends, waiting, cancelled = [], [], []

def fire():
    raise kind(3) if kind is SystemExit else kind()

class Plugin:
    @hookimpl
    def sampling_loop_end(self, payload):
        ends.append(payload.stop_reason)

def hook(self, payload):
    if payload.subsample_index == 1:
        fire()

hook.__name__ = where
if where != "backend":
    setattr(Plugin, where, hookimpl(hook))

async def reply(request):
    if request.iteration.subsample_index == 1:
        if where == "backend":
            fire()
        return "no"
    waiting.append(1)
    try:
        await anyio.sleep_forever()
    finally:
        cancelled.append(1)

async def main():
    sampler = Sampler(ScriptedBackend(reply), plugins=[Plugin()], load_entrypoints=False)
    await sampler.sample("q", requirements=[lambda t: False], concurrency_budget=3, loop_budget=2)

try:
    anyio.run(main, backend=loop)
except kind as exc:
    print(f"propagated {type(exc).__name__}; loop ends {ends}")
    print(f"in flight: {len(waiting)}; cancelled: {len(cancelled)}")
"""


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "trio"])
@pytest.mark.parametrize(
    ("where", "name"),
    [
        ("backend", "SystemExit"),
        ("generation_pre_call", "KeyboardInterrupt"),
        ("generation_post_call", "SystemExit"),
        ("sampling_iteration", "KeyboardInterrupt"),
    ],
)
def test_keyboard_interrupt_and_system_exit_propagate_from_backends_and_plugins(
    where: str, name: str, loop: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", CHILD, where, name, loop],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    outcome, in_flight = done.stdout.strip().splitlines()
    assert outcome == f"propagated {name}; loop ends ['error']"
    waiting, cancelled = (int(part.split(": ")[1]) for part in in_flight.split("; "))
    assert waiting == cancelled  # every sibling whose call had begun was cancelled
    assert "Task was destroyed" not in done.stderr and "never awaited" not in done.stderr
