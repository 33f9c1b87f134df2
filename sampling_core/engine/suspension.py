"""Awaiting a backend's coroutine while noting whether it suspended, and the schedule point.

The engine must not run for long without letting other tasks run or an outer cancellation
(``move_on_after`` around ``sample()``) land. A backend that does real I/O suspends anyway;
one that answers without awaiting (a cache, a fake) does not. So the loop keeps, per
thread, when it last knew it had yielded to the event loop, and adds a checkpoint once
more than :data:`SCHEDULE_INTERVAL_S` passed since (:func:`overdue`, :func:`note_yield`):
fast attempts pay for one checkpoint per millisecond, not one per attempt.

The loop runs the backend's coroutine up to its first suspension with the plain generator
protocol (``coro.send(None)``; no event-loop internals); when it did suspend,
:func:`finish` awaits the rest as ``await`` would have. An answer that never suspended
costs one ``send`` and no wrapper.
"""

from __future__ import annotations

import threading
import types
from collections.abc import Coroutine, Generator
from time import perf_counter
from typing import Any

SCHEDULE_INTERVAL_S = 0.001
"""The longest the engine runs, as far as it can tell, without yielding."""


@types.coroutine
def finish(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """Await the rest of ``coro``, which suspended by yielding ``yielded`` to the first
    ``coro.send(None)``; returns its value. Cancellation and other exceptions thrown in
    are passed on to ``coro``, closing it closes ``coro``."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as done:
                return done.value
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value


class YieldClock:
    """When the engine, in one thread, last knew it had yielded to the event loop
    (:attr:`at`, a ``perf_counter()`` reading)."""

    __slots__ = ("at",)

    def __init__(self) -> None:
        self.at = 0.0


class _ThisThread(threading.local):
    def __init__(self) -> None:
        self.clock = YieldClock()


_this_thread = _ThisThread()


def thread_clock() -> YieldClock:
    """This thread's :class:`YieldClock`. A call runs in one thread (its event loop's): it
    reads the clock once and hands it to :func:`note_yield` and :func:`overdue`."""
    return _this_thread.clock


def note_yield(clock: YieldClock, at: float) -> None:
    """The engine, in ``clock``'s thread, is known to have yielded at ``at`` (``perf_counter``)."""
    clock.at = at


def overdue(clock: YieldClock) -> bool:
    """Whether no yield was noted on ``clock`` (its thread's) for longer than the interval.

    One value per thread, not per task: any task running now got control after the
    latest yield noted by any task, so the time since then never underestimates how long
    the current task has run.
    """
    return perf_counter() - clock.at > SCHEDULE_INTERVAL_S
