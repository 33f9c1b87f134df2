"""The markers of the ``samplehooks`` project: pluggy's two, and ``background``."""

from __future__ import annotations

from typing import Any, TypeVar

import pluggy

F = TypeVar("F")

PROJECT_NAME = "samplehooks"
"""The pluggy project name, and the entry-point group plugins install under."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
"""Marks a hook specification (used by :mod:`hook_specs.specs` only)."""

hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Marks a hook implementation in a plugin: ``@hookimpl def sampling_iteration(payload): ...``."""

BACKGROUND_ATTRIBUTE = "samplehooks_background"
"""The attribute :func:`background` sets on an implementation."""


def background(function: F) -> F:
    """Deliver this observe-only implementation in the background (stack on ``@hookimpl``).

    The engine does not wait for it: its events are queued as read-only snapshots and
    delivered in order by a worker the ``Sampler`` owns (a thread; ``async`` observers run
    on that thread's own event loop), so a slow observer never holds up sampling or the
    event loop. Allowed on ``sampling_iteration``, ``sampling_loop_end``,
    ``generation_post_call`` and ``generation_error``; refused at registration elsewhere::

        class Exporter:
            @hookimpl
            @background
            def sampling_iteration(self, payload):
                slow_http_post(payload.model_dump(mode="json"))
    """
    setattr(function, BACKGROUND_ATTRIBUTE, True)
    return function


def is_background(function: Any) -> bool:
    """Whether ``function`` was marked with :func:`background`."""
    return getattr(function, BACKGROUND_ATTRIBUTE, False) is True
