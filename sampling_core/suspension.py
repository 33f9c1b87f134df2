"""Run a coroutine and tell whether it suspended (waited on its event loop) at all.

The engine must reach a point where it can be cancelled, and let other tasks run, at least
once per attempt. A backend that does real I/O suspends anyway; one that answers without
awaiting (a cache, a fake) does not, and would let ``sample()`` ignore an outer timeout and
starve other tasks. :func:`run_noting_suspension` drives the backend's coroutine as
``await`` would (plain Python generator protocol, no event-loop internals) and reports
whether it ever suspended, so the loop adds a checkpoint only when it did not.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any


@types.coroutine
def run_noting_suspension(coro: Coroutine[Any, Any, Any]) -> Generator[Any, Any, tuple[Any, bool]]:
    """``await coro``, returning ``(its value, whether it suspended)``."""
    try:
        yielded = coro.send(None)
    except StopIteration as done:
        return done.value, False
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
                return done.value, True
        else:
            try:
                yielded = coro.send(sent)
            except StopIteration as done:
                return done.value, True
