"""The pluggy markers of the ``samplehooks`` project."""

from __future__ import annotations

import pluggy

PROJECT_NAME = "samplehooks"
"""The pluggy project name, and the entry-point group plugins install under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification (used by :mod:`hook_specs.specs` only)."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook implementation in a plugin: ``@hookimpl def sampling_iteration(payload): ...``."""
