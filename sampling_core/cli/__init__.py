"""The ``samplehooks`` command line."""

from sampling_core.cli.app import app, main

__all__ = ["app", "main"]
