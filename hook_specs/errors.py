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
        self.plugin_name: str | None = None
        """The name of the plugin that raised it: set by the engine as it stops sampling
        (the loop end's ``failure_reason`` says ``stopped by plugin NAME``)."""


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


def exception_text(exc: BaseException) -> str:
    """``str(exc)``, or ``<unprintable TypeName>`` when that raises: the one formatter of
    every exception samplehooks shows or records (backends and plugins make exceptions, and
    their ``__str__`` may be broken too). Also ``sampling_core.errors.exception_text``."""
    try:
        return str(exc)
    except Exception:
        return f"<unprintable {type(exc).__name__}>"
