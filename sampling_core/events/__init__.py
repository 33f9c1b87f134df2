"""Recorded hook events: the ``events.jsonl`` format, read line by line (``reading``) and
interpreted into calls and attempts (``attempts``), for ``trace show`` and ``view``.

This package's ``__all__`` is its public surface.
"""

from sampling_core.events.attempts import RecordedAttempt, RecordedCall, iter_calls, read_calls
from sampling_core.events.reading import (
    NO_CALL,
    EventFileError,
    is_recorded_event,
    numbered_events,
    read_events,
)

__all__ = [
    "NO_CALL",
    "EventFileError",
    "RecordedAttempt",
    "RecordedCall",
    "is_recorded_event",
    "iter_calls",
    "numbered_events",
    "read_calls",
    "read_events",
]
