"""The attempt that is running now, carried in context variables.

Every task anyio starts runs in a copy of its parent's context, so each subsample sees its
own attempt; hooks, backends and requirement checks called from it see the same value.
The same attempt is bound into structlog's contextvars (``sampling_id``,
``subsample_index``, ``attempt``, ``iteration``), so every log line made meanwhile carries it.

Binding through ``structlog.contextvars.bind_contextvars`` costs about half a microsecond for
two keys, once per attempt. It returns the ``contextvars.Token`` of each key, and a token
names its variable (``Token.var``): the first binding in the process keeps those variables,
and every later attempt sets them directly (about 50 ns each). The variables are the ones
structlog keeps for those keys, so ``merge_contextvars`` and ``get_contextvars`` read the
values as if they had been bound.

A subsample's attempts follow one another in its context, so the attempt is held in one
mutable :class:`Running` per subsample, set in the context once (``_current``) and
updated at each attempt: setting a context variable copies the context's map and makes a
token, about 1.5 k instructions, where an attribute write costs a few dozen. Whatever an
attempt runs and awaits (its checks, its backend call, its hooks, a task group inside
them) sees that attempt. A task an attempt starts and leaves running shares the
subsample's :class:`Running`: it sees the subsample's later attempts as they start, and
the last one once the subsample ended.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from typing import Any

from structlog.contextvars import bind_contextvars

from hook_specs.records import IterationInfo


class Running:
    """The attempt a subsample is running now (:attr:`info`)."""

    __slots__ = ("info",)

    def __init__(self, info: IterationInfo) -> None:
        self.info = info


_current: ContextVar[Running | None] = ContextVar("samplehooks_iteration", default=None)

_log_vars: tuple[ContextVar[Any], ...] = ()
"""structlog's variables for sampling_id, subsample_index, attempt and iteration, in that
order, once the first attempt of the process has bound them."""

_first_binding = threading.Lock()

Entered = tuple[Token[Any], ...]
"""What :func:`enter_subsample` replaced, for :func:`leave_subsample`."""


def current_iteration() -> IterationInfo | None:
    """The :class:`IterationInfo` of the attempt running in this context, or ``None``."""
    running = _current.get()
    return None if running is None else running.info


def enter_subsample(info: IterationInfo) -> tuple[Entered, Running]:
    """Make ``info`` (a subsample's first attempt) the current attempt, in
    :func:`current_iteration` and in structlog's contextvars; returns what it replaced and
    the subsample's :class:`Running` (for :func:`enter_next_attempt`)."""
    global _log_vars
    if not _log_vars:
        with _first_binding:  # two threads' first calls must not make a variable each
            tokens = bind_contextvars(
                sampling_id=info.sampling_id,
                subsample_index=info.subsample_index,
                attempt=info.attempt,
                iteration=info.iteration,
            )
            if not _log_vars:
                _log_vars = tuple(
                    tokens[key].var
                    for key in ("sampling_id", "subsample_index", "attempt", "iteration")
                )
        running = Running(info)
        return (*tokens.values(), _current.set(running)), running
    sampling_id, subsample_index, attempt, iteration = _log_vars
    running = Running(info)
    entered = (
        sampling_id.set(info.sampling_id),
        subsample_index.set(info.subsample_index),
        attempt.set(info.attempt),
        iteration.set(info.iteration),
        _current.set(running),
    )
    return entered, running


def enter_next_attempt(running: Running, info: IterationInfo) -> None:
    """Make ``info``, the next attempt of the subsample ``running`` is of, the current one."""
    _log_vars[2].set(info.attempt)
    _log_vars[3].set(info.iteration)
    running.info = info


def leave_subsample(entered: Entered) -> None:
    """Restore what :func:`enter_subsample` replaced (a subsample run in its caller's task)."""
    for token in reversed(entered):
        token.var.reset(token)
