"""The attempt that is running now, carried in a context variable.

Every task anyio starts runs in a copy of its parent's context, so each subsample sees its
own attempt; hooks, backends and requirement checks called from it see the same value.
"""

from __future__ import annotations

from contextvars import ContextVar, Token

from hook_specs.records import IterationInfo

_current: ContextVar[IterationInfo | None] = ContextVar("samplehooks_iteration", default=None)


def current_iteration() -> IterationInfo | None:
    """The :class:`IterationInfo` of the attempt running in this context, or ``None``."""
    return _current.get()


def enter_attempt(info: IterationInfo) -> Token[IterationInfo | None]:
    """Make ``info`` the current attempt; returns the token :func:`leave_attempt` takes."""
    return _current.set(info)


def leave_attempt(token: Token[IterationInfo | None]) -> None:
    """Restore the current attempt to what it was before ``enter_attempt`` gave ``token``."""
    _current.reset(token)
