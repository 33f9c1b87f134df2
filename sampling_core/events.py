"""The recorded-event format: one JSON object per line, ``{"hook", "time", "payload"}``.

The ``recorder`` plugin writes it; ``samplehooks trace show`` reads it with
:func:`read_events`. It lives here, with the engine, so the CLI never imports a plugin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sampling_core.errors import SamplehooksError

__all__ = ["EventFileError", "read_events"]


class EventFileError(SamplehooksError, ValueError):
    """A recorded event file has a line that is not a recorded event; the message names it."""


def read_events(
    path: str | os.PathLike[str], on_note: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """Read a recorded file back: one dict per line.

    A last line without its newline that is not JSON was torn by a crash: it is skipped,
    and ``on_note`` (if given) is told. Raises :class:`EventFileError` (a ``ValueError``)
    naming the line when any other line is not UTF-8, not JSON, or not a recorded event.
    """
    events = []
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EventFileError(
                    f"line {number} is not UTF-8 text (byte {exc.start + 1} of the line)"
                ) from None
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                if not line.endswith("\n"):  # the last line, torn by a crash
                    if on_note is not None:
                        on_note(f"line {number} was cut off (a crash while writing); skipped")
                    break
                raise EventFileError(f"line {number} is not JSON ({exc.msg})") from None
            except RecursionError:
                raise EventFileError(f"line {number} is not JSON (nested too deeply)") from None
            if (
                not isinstance(event, dict)
                or not isinstance(event.get("hook"), str)
                or not isinstance(event.get("payload"), dict)
            ):
                raise EventFileError(
                    f'line {number} is not a recorded hook event (needs "hook" and "payload")'
                )
            events.append(event)
    return events
