"""The recorded-event format: one JSON object per line, ``{"hook", "time", "payload"}``.

The ``recorder`` plugin writes it; ``samplehooks trace show`` reads it with
:func:`read_events`. It lives here, with the engine, so the CLI never imports a plugin.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["read_events"]


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a recorded file back: one dict per line.

    Raises ``ValueError`` naming the line when a line is not a recorded event.
    """
    events = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"line {number} is not JSON ({exc.msg})") from None
            except RecursionError:
                raise ValueError(f"line {number} is not JSON (nested too deeply)") from None
            if (
                not isinstance(event, dict)
                or not isinstance(event.get("hook"), str)
                or not isinstance(event.get("payload"), dict)
            ):
                raise ValueError(
                    f'line {number} is not a recorded hook event (needs "hook" and "payload")'
                )
            events.append(event)
    return events
