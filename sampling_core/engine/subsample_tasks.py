"""The tasks of one call's subsamples: start them, cancel them, shield a completion.

The sampling loop asks four things of the tasks its subsamples run in:

* ``run(subsample, count)``: start ``subsample(0) .. subsample(count - 1)`` as tasks and
  return once every one has finished; if the caller is cancelled meanwhile, cancel them
  all, wait for them, then re-raise the caller's cancellation. Nothing outlives ``run``.
* ``cancel_all()``: early exit, ``StopSampling``, a fatal error.
* ``cancel(index)``: one subsample that can no longer win (``selection="ordered"``).
* ``shielded(index)``: a block (an attempt's completion) that no cancellation interrupts;
  a cancellation that arrives meanwhile lands at the subsample's next wait after it.

:class:`AnyioSubsampleTasks` does this with an anyio task group and a cancel scope per
subsample, under any backend anyio supports. :class:`AsyncioSubsampleTasks` does the
same with plain asyncio tasks, for about half the cost per attempt (12 against 23 µs at
four subsamples of four attempts; see ``docs/benchmarks.md``); :func:`subsample_tasks`
picks it when the loop runs on asyncio.

Both follow anyio's rules, so that a call behaves the same on every backend: a cancelled
task is cancelled only once it has started and while it waits (a subsample scheduled
before its group was cancelled still starts, and stops at its first wait); a task is
never cancelled while shielded; a task that cancels its own group runs on until its next
wait. An exception other than ``Exception`` escaping a subsample cancels the others and
is re-raised once all have finished (several: as a ``BaseExceptionGroup``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from typing import Any, Protocol

import anyio

from sampling_core.errors import exception_text

try:
    import sniffio
except ImportError:  # pragma: no cover - anyio no longer requires sniffio
    sniffio = None  # type: ignore[assignment]

Subsample = Callable[[int], Coroutine[Any, Any, None]]


class SubsampleTasks(Protocol):
    """What the loop needs from the tasks of its subsamples."""

    async def run(self, subsample: Subsample, count: int) -> None:
        """Run ``count`` subsamples as tasks until every one has finished."""

    def cancel_all(self) -> None:
        """Cancel every subsample."""

    def cancel(self, index: int) -> None:
        """Cancel subsample ``index``."""

    def shielded(self, index: int) -> AbstractContextManager[object]:
        """A block of subsample ``index`` that no cancellation interrupts."""


def subsample_tasks(count: int) -> SubsampleTasks:
    """Plain asyncio tasks when running on asyncio, else an anyio task group."""
    if running_event_loop() == "asyncio":
        return AsyncioSubsampleTasks(count)
    return AnyioSubsampleTasks(count)


def running_event_loop() -> str | None:
    """The async library running in this thread (``"asyncio"``, ``"trio"``, ...), or ``None``.

    Asked of sniffio, as anyio does, where it is installed (trio needs it); else asyncio is
    the only candidate.
    """
    if sniffio is not None:
        try:
            return sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return None
    try:  # pragma: no cover - without sniffio
        asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover
        return None
    return "asyncio"  # pragma: no cover


class AnyioSubsampleTasks:
    """An anyio task group, with a cancel scope per subsample."""

    __slots__ = ("_group_scope", "_scopes")

    def __init__(self, count: int) -> None:
        self._scopes = [anyio.CancelScope() for _ in range(count)]
        self._group_scope: anyio.CancelScope | None = None

    async def run(self, subsample: Subsample, count: int) -> None:
        """Run the subsamples in one task group."""
        async with anyio.create_task_group() as group:
            self._group_scope = group.cancel_scope
            for index in range(count):
                group.start_soon(self._run_one, subsample, index)

    async def _run_one(self, subsample: Subsample, index: int) -> None:
        with self._scopes[index]:
            await subsample(index)

    def cancel_all(self) -> None:
        """Cancel the group's scope."""
        if self._group_scope is not None:
            self._group_scope.cancel()

    def cancel(self, index: int) -> None:
        """Cancel one subsample's scope."""
        self._scopes[index].cancel()

    def shielded(self, index: int) -> AbstractContextManager[object]:
        """A shielded cancel scope."""
        return anyio.CancelScope(shield=True)


class AsyncioSubsampleTasks:
    """Plain asyncio tasks, cancelled by anyio's rules (see the module's docstring)."""

    __slots__ = (
        "_errors",
        "_loop",
        "_pending",
        "_remaining",
        "_shielded",
        "_tasks",
        "_waiter",
    )

    def __init__(self, count: int) -> None:
        self._tasks: list[asyncio.Task[None]] = []
        self._shielded = [False] * count
        self._pending = [False] * count  # cancelled while shielded
        self._remaining = 0
        self._waiter: asyncio.Future[None] | None = None
        self._errors: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def run(self, subsample: Subsample, count: int) -> None:
        """Start the tasks, wait for all of them, re-raise the caller's cancellation."""
        loop = self._loop = asyncio.get_running_loop()
        self._remaining = count
        tasks = self._tasks
        finished = self._finished  # one bound method for every task
        for index in range(count):
            task = loop.create_task(subsample(index))
            task.add_done_callback(finished)
            tasks.append(task)
        cancelled: BaseException | None = None
        while self._remaining:
            self._waiter = loop.create_future()
            try:
                await self._waiter
            except asyncio.CancelledError as exc:
                # The caller is cancelled: cancel every subsample and wait for them all.
                # Repeated cancellations while waiting are absorbed; the first is re-raised.
                if cancelled is None:
                    cancelled = exc
                self.cancel_all()
        self._waiter = None
        if cancelled is not None:
            raise cancelled
        if self._errors:
            if len(self._errors) == 1:
                raise self._errors[0]
            raise BaseExceptionGroup("subsamples failed", self._errors)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._remaining -= 1
        if not task.cancelled():
            error = task.exception()
            if error is not None:
                self._errors.append(error)
                self.cancel_all()
        if not self._remaining and self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def cancel_all(self) -> None:
        """Cancel every subsample that has not finished."""
        for index in range(len(self._tasks)):
            self.cancel(index)

    def cancel(self, index: int) -> None:
        """Cancel subsample ``index`` as soon as anyio's rules allow."""
        task = self._tasks[index]
        if task.done():
            return
        if self._shielded[index]:
            self._pending[index] = True
            return
        if task is asyncio.current_task() or _not_started(task):
            # Not started yet, or running now: like anyio, try again on the next turn of
            # the event loop (by then it waits, or has finished).
            assert self._loop is not None
            self._loop.call_soon(self.cancel, index)
        else:
            task.cancel()

    def shield(self, index: int, on: bool) -> None:
        """Turn subsample ``index``'s shield on or off (off: a cancellation held back lands)."""
        self._shielded[index] = on
        if not on and self._pending[index]:
            self._pending[index] = False
            self.cancel(index)

    def shielded(self, index: int) -> _Shield:
        """A block of subsample ``index`` that :meth:`cancel` does not interrupt."""
        return _Shield(self, index)


def _not_started(task: asyncio.Task[None]) -> bool:
    """Whether ``task`` has not begun to run its coroutine yet (asked only to cancel it)."""
    return inspect.getcoroutinestate(task.get_coro()) == inspect.CORO_CREATED


def one_of(group: BaseExceptionGroup) -> BaseException:
    """The exception to raise for a group of them: the first that is not a cancellation,
    as itself, with the others named in a note (the group when all are cancellations)."""
    errors = group.exceptions
    if len(errors) == 1:
        return errors[0]
    cancelled = anyio.get_cancelled_exc_class()
    chosen = next((e for e in errors if not isinstance(e, cancelled)), None)
    if chosen is None:
        return group
    others = "; ".join(
        f"{type(e).__name__}: {exception_text(e)}" for e in errors if e is not chosen
    )
    chosen.add_note(f"other subsamples raised too: {others}")
    return chosen


class _Shield:
    __slots__ = ("_index", "_tasks")

    def __init__(self, tasks: AsyncioSubsampleTasks, index: int) -> None:
        self._tasks = tasks
        self._index = index

    def __enter__(self) -> _Shield:
        self._tasks.shield(self._index, True)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._tasks.shield(self._index, False)
