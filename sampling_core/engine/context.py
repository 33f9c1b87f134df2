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
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from typing import Any

from structlog.contextvars import bind_contextvars

from hook_specs.records import IterationInfo

_current: ContextVar[IterationInfo | None] = ContextVar("samplehooks_iteration", default=None)

_log_vars: tuple[ContextVar[Any], ...] = ()
"""structlog's variables for sampling_id, subsample_index, attempt and iteration, in that
order, once the first attempt of the process has bound them."""

_first_binding = threading.Lock()

Entered = tuple[Token[Any], ...]
"""What :func:`enter_subsample` replaced, for :func:`leave_subsample`."""


def current_iteration() -> IterationInfo | None:
    """The :class:`IterationInfo` of the attempt running in this context, or ``None``."""
    return _current.get()


def enter_subsample(info: IterationInfo) -> Entered:
    """Make ``info`` (a subsample's first attempt) the current attempt, in
    :func:`current_iteration` and in structlog's contextvars; returns what it replaced."""
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
        return (*tokens.values(), _current.set(info))
    sampling_id, subsample_index, attempt, iteration = _log_vars
    return (
        sampling_id.set(info.sampling_id),
        subsample_index.set(info.subsample_index),
        attempt.set(info.attempt),
        iteration.set(info.iteration),
        _current.set(info),
    )


def enter_next_attempt(info: IterationInfo) -> None:
    """Make ``info``, the next attempt of the subsample entered last, the current attempt."""
    _log_vars[2].set(info.attempt)
    _log_vars[3].set(info.iteration)
    _current.set(info)


def leave_subsample(entered: Entered) -> None:
    """Restore what :func:`enter_subsample` replaced (a subsample run in its caller's task)."""
    for token in reversed(entered):
        token.var.reset(token)
