"""The recorded-event format: one JSON object per line, ``{"hook", "time", "payload"}``.

The ``recorder`` plugin writes it. This module is its one reader (:func:`numbered_events`,
and :func:`read_events` on top of it); :mod:`sampling_core.events.attempts` is its one
interpretation into calls and attempts, which ``samplehooks trace show`` and
``samplehooks view`` both use. It lives here, with the engine, so neither imports a plugin.

**The rule for bad input.** A line is an event when it is UTF-8 text holding a JSON object
with a string ``"hook"`` and an object ``"payload"``; an event's fields that are
interpreted must have their type (``attempt`` an integer, ``latency_s`` a number, ...).
Anything else is an :class:`EventFileError` whose one-line message names the line (and
the field). A reader given ``on_bad_line`` is told of the error instead and skips the line
(the view does this, to show what it can of a damaged file and say how many lines it
skipped); without it, the error is raised (``read_events``, ``trace show``). Either way, a
last line without its newline that is not JSON was torn by a crash (or is being written):
it is skipped and ``on_note`` is told. Blank lines are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sampling_core.errors import SamplehooksError

__all__ = ["NO_CALL", "EventFileError", "is_recorded_event", "numbered_events", "read_events"]


NO_CALL = "?"
"""The ``sampling_id`` of events recorded without one."""


class EventFileError(SamplehooksError, ValueError):
    """A recorded event file has a line that is not a recorded event; the message names it."""


def numbered_events(
    path: str | os.PathLike[str],
    on_note: Callable[[str], None] | None = None,
    *,
    keep_call: Callable[[str], bool] | None = None,
    on_bad_line: Callable[[EventFileError], None] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Stream a recorded file as ``(line number, event)`` pairs, in file order.

    ``keep_call``: keep only the events whose ``payload["sampling_id"]`` it accepts (an
    event without one belongs to the call :data:`NO_CALL`). Every line is still checked,
    so a damaged line is found wherever it is.
    Bad lines and a torn last line are handled as the module says. Opening the file may
    raise ``OSError`` (on the first iteration).
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                event = _event(number, raw)
            except _TornLine:
                if on_note is not None:
                    on_note(f"line {number} was cut off (a crash while writing); skipped")
                break
            except EventFileError as exc:
                if on_bad_line is None:
                    raise
                on_bad_line(exc)
                continue
            if event is None:
                continue
            if keep_call is not None:
                call = event["payload"].get("sampling_id")
                call = NO_CALL if call is None else call
                if isinstance(call, str) and not keep_call(call):
                    continue  # (one that is not a string is kept, to be reported)
            yield number, event


def read_events(
    path: str | os.PathLike[str], on_note: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Read a recorded file back: one dict per line.

    A last line without its newline that is not JSON was torn by a crash: it is skipped,
    and ``on_note`` (if given) is told. Raises :class:`EventFileError` (a ``ValueError``)
    naming the line when any other line is not UTF-8, not JSON, or not a recorded event.
    """
    return [event for _, event in numbered_events(path, on_note)]


class _TornLine(Exception):
    """The last line, cut off before its newline."""


def _event(number: int, raw: bytes) -> dict[str, Any] | None:
    """Line ``number`` as an event (``None`` when blank); raises if it is not one."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EventFileError(
            f"line {number} is not UTF-8 text (byte {exc.start + 1} of the line)"
        ) from None
    if not line.strip():
        return None
    try:
        event = json.loads(line)
    except json.JSONDecodeError as exc:
        if not line.endswith("\n"):  # the last line, torn by a crash
            raise _TornLine from None
        raise EventFileError(f"line {number} is not JSON ({exc.msg})") from None
    except RecursionError:
        raise EventFileError(f"line {number} is not JSON (nested too deeply)") from None
    if not is_recorded_event(event):
        raise EventFileError(f"line {number} {NOT_AN_EVENT}")
    return event


NOT_AN_EVENT = 'is not a recorded hook event (needs "hook" and "payload")'


def is_recorded_event(value: Any) -> bool:
    """Whether ``value`` is shaped like an event: a string ``"hook"``, an object ``"payload"``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("hook"), str)
        and isinstance(value.get("payload"), dict)
    )
