"""Keep stdout for results: structlog lines printed by commands go to stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import structlog


@contextmanager
def logs_to_stderr() -> Iterator[None]:
    """While a command runs, structlog lines that would be printed on stdout go to stderr.

    Only structlog's print-to-stdout factory (its default) is redirected: a logging setup
    of the application's own is left alone. The previous configuration is restored after.
    """
    config = structlog.get_config()
    factory = config.get("logger_factory")
    printing_to_stdout = isinstance(factory, structlog.PrintLoggerFactory) and (
        getattr(factory, "_file", None) in (None, sys.stdout, sys.__stdout__)
    )
    if not printing_to_stdout:
        yield
        return
    was_configured = structlog.is_configured()
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    try:
        yield
    finally:
        if was_configured:
            structlog.configure(**config)
        else:
            structlog.reset_defaults()
