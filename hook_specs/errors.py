"""Exceptions that belong to the plugin contract."""

from __future__ import annotations


class StopSampling(Exception):
    """Raised by a plugin to end sampling on purpose.

    From ``sampling_loop_start`` it ends the call before any generation; from any hook fired
    for an attempt it ends the loop, cancels what is in flight, and ``sample()`` returns the
    best result so far with ``stop_reason="stopped_by_plugin"``.
    """

    def __init__(self, reason: str = "stopped by a plugin") -> None:
        super().__init__(reason)
        self.reason = reason


class ReadOnlyFieldError(AttributeError):
    """A plugin wrote to a payload field its hook does not let it change."""

    def __init__(self, field: str, hook: str, writable: frozenset[str]) -> None:
        allowed = ", ".join(sorted(writable)) or "nothing"
        super().__init__(
            f"{hook}: payload field {field!r} is read-only in this hook "
            f"(a plugin may change: {allowed})"
        )
        self.field = field
        self.hook = hook
