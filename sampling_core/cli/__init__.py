"""The ``samplehooks`` command line: ``main`` (the console script) and ``app`` (the typer
application, for ``typer.testing.CliRunner``).

This package's ``__all__`` is its public surface; its modules (one per command) are internal.
"""

from sampling_core.cli.app import app, main

__all__ = ["app", "main"]
