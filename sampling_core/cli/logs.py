"""Keep stdout for results: structlog lines printed by commands go to stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import structlog

from sampling_core.redaction import printable

# The logger factory structlog starts with (it prints on stdout), read through its public
# configuration before anything configured structlog; ``None`` when structlog was already
# configured when the CLI was imported: then the starting factory cannot be told apart from
# an application's own, and nothing is redirected.
_STARTING_FACTORY: Any = (
    None if structlog.is_configured() else structlog.get_config()["logger_factory"]
)


def _printable_values(logger: Any, method: str, event: Any) -> Any:
    """A structlog processor: every string value of the event :func:`printable`."""
    return {k: printable(v) if isinstance(v, str) else v for k, v in event.items()}


@contextmanager
def logs_to_stderr() -> Iterator[None]:
    """While a command runs, structlog lines that structlog would print on stdout go to stderr.

    The rule: lines are redirected only while structlog prints through the logger factory it
    starts with, that is when no application chose one (structlog not configured, or
    configured without a ``logger_factory``): that factory prints on stdout. A factory an
    application chose (a file, the ``logging`` module, even stdout named explicitly) is
    left alone. The lines redirected show their values :func:`printable` (a model's text
    in a field cannot drive the terminal). The previous configuration is restored after.
    """
    config = structlog.get_config()
    was_configured = structlog.is_configured()
    if was_configured and config["logger_factory"] is not _STARTING_FACTORY:
        yield  # the application chose where its lines go
        return
    structlog.configure(
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        processors=[_printable_values, *config["processors"]],
    )
    try:
        yield
    finally:
        if was_configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()
