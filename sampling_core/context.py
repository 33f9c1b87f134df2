"""The attempt that is running now, carried in a context variable.

Every task anyio starts runs in a copy of its parent's context, so each subsample sees its
own attempt; hooks, backends and requirement checks called from it see the same value.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

from hook_specs.records import IterationInfo

_current: ContextVar[IterationInfo | None] = ContextVar("samplehooks_iteration", default=None)


def current_iteration() -> IterationInfo | None:
    """The :class:`IterationInfo` of the attempt running in this context, or ``None``."""
    return _current.get()


def enter_attempt(info: IterationInfo) -> Callable[[], None]:
    """Make ``info`` the current attempt; returns what restores the value before."""
    token = _current.set(info)
    return lambda: _current.reset(token)
