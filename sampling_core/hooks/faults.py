"""What a plugin did wrong: an isolated fault, a timeout, an awaitable not awaited.

One formatter for every exception shown or recorded: :func:`sampling_core.errors.exception_text`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import structlog

from sampling_core.errors import exception_text

__all__ = ["PluginFault", "PluginTimeout", "describe", "log_fault", "not_awaited"]

logger = structlog.get_logger("samplehooks")


@dataclass(frozen=True, slots=True)
class PluginFault:
    """A plugin's exception, isolated in an observe-only hook."""

    plugin_name: str
    hook: str
    exception: BaseException

    def __str__(self) -> str:
        return f"{self.plugin_name}, {self.hook}: {exception_text(self.exception)}"


class PluginTimeout(TimeoutError):
    """An async hook implementation ran longer than the dispatcher's timeout."""


def not_awaited(pending: Any) -> TypeError:
    """The fault of a plain function that returned an awaitable: the awaitable is closed, not
    run, on every delivery path (inline or background)."""
    close = getattr(pending, "close", None)
    if close is not None:
        close()
    return TypeError(
        f"returned {type(pending).__name__} from a plain function; an implementation "
        "whose work must be awaited is declared `async def`"
    )


def log_fault(plugin_name: str, hook: str, exc: BaseException) -> None:
    """Log an isolated plugin fault (``plugin.error``, with the plugin's name)."""
    logger.warning(
        "plugin.error",
        plugin=plugin_name,
        hook=hook,
        error_type=type(exc).__name__,
        error=exception_text(exc),
    )


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just ``Type``)."""
    text = exception_text(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
