"""Per prompt, its attempts as lanes (one per subsample), from ``events.jsonl`` or the records.

A step is one attempt with its outcome: ``passed``, ``failed``, ``error`` (the backend
call raised for good) or ``cancelled`` (in flight when another subsample's pass ended the
call). The hook events say all of it: a ``generation_pre_call`` that no
``sampling_iteration`` or final ``generation_error`` followed was cancelled. Without
events (the ``recorder`` plugin was off) the record's attempts are used; a subsample
that stopped short of its budget on a failure, in a call that cancelled attempts, is
shown with one cancelled step.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "EventsFile",
    "add_record_details",
    "lanes_from_events",
    "lanes_from_record",
    "read_events_by_call",
]

TEXT_SHOWN = 400


class EventsFile:
    """What could be read of ``events.jsonl``: events per ``sampling_id``, and what was not."""

    def __init__(self) -> None:
        self.by_call: dict[str, list[dict[str, Any]]] = {}
        self.bad_lines = 0
        self.present = False


def read_events_by_call(path: Path, wanted: set[str]) -> EventsFile:
    """The events of the calls in ``wanted``, grouped by ``sampling_id``, in file order.

    Lines that are not events (a torn last line of a run in progress, damage) are counted,
    not raised: the view shows what it can and says how many lines it skipped.
    """
    found = EventsFile()
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return found
    found.present = True
    with handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
                payload = event["payload"]
                call = payload["sampling_id"]
            except (ValueError, KeyError, TypeError, RecursionError):
                found.bad_lines += 1
                continue
            if call in wanted and isinstance(event.get("hook"), str):
                found.by_call.setdefault(call, []).append(event)
    return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _step(attempt: int, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"attempt": attempt, "outcome": outcome, **extra}


def _reasons(validations: Any) -> list[str]:
    out = []
    for v in validations if isinstance(validations, list) else []:
        if isinstance(v, dict) and not v.get("passed"):
            out.append(str(v.get("reason") or v.get("requirement") or "a requirement"))
    return out


def lanes_from_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Lanes of one call from its hook events."""
    steps: dict[tuple[int, int], dict[str, Any]] = {}
    for event in events:
        hook, p = event.get("hook"), event.get("payload") or {}
        index, number = _int(p.get("subsample_index")), _int(p.get("attempt"))
        if index is None or number is None:
            continue
        where = (index, number)
        if hook == "generation_pre_call" and where not in steps:
            steps[where] = _step(number, "cancelled", time=event.get("time"))
        elif hook == "sampling_iteration":
            usage = p.get("usage") if isinstance(p.get("usage"), dict) else {}
            text = p.get("text")
            steps[where] = _step(
                number,
                "passed" if p.get("passed") else "failed",
                sequence=p.get("sequence"),
                reasons=_reasons(p.get("validations")),
                latency_s=p.get("latency_s"),
                tokens=(usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0),
                cost_usd=usage.get("cost_usd"),
                text=text[:TEXT_SHOWN] if isinstance(text, str) else None,
                time=event.get("time"),
            )
        elif hook == "generation_error" and not p.get("will_retry"):
            kind = p.get("error_type") or "error"
            steps[where] = _step(number, "error", reasons=[f"{kind}: {p.get('exception')}"[:300]])
    return _as_lanes(steps)


def _as_lanes(steps: dict[tuple[int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    lanes: dict[int, list[dict[str, Any]]] = {}
    for (index, _), step in sorted(steps.items()):
        lanes.setdefault(index, []).append(step)
    return [{"subsample": index, "steps": lane} for index, lane in sorted(lanes.items())]


def lanes_from_record(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Lanes of one prompt from its record (``attempts.each``)."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    steps: dict[tuple[int, int], dict[str, Any]] = {}
    for e in attempts.get("each") or []:
        if not isinstance(e, dict):
            continue
        index, number = _int(e.get("subsample")), _int(e.get("attempt"))
        if index is None or number is None:
            continue
        if e.get("error"):
            steps[(index, number)] = _step(number, "error", reasons=[str(e["error"])])
            continue
        tokens = (e.get("input_tokens") or 0) + (e.get("output_tokens") or 0)
        steps[(index, number)] = _step(
            number,
            "passed" if e.get("passed") else "failed",
            sequence=e.get("sequence"),
            reasons=[str(r) for r in e.get("failed") or []],
            latency_s=e.get("latency_s"),
            tokens=tokens if "input_tokens" in e else None,
            cost_usd=e.get("cost_usd"),
            text=e.get("text"),
        )
    loop_budget = _int(attempts.get("loop_budget"))
    if (attempts.get("cancelled") or 0) > 0 and loop_budget is not None:
        last: dict[int, tuple[int, str]] = {}
        for (index, number), step in steps.items():
            if number >= last.get(index, (0, ""))[0]:
                last[index] = (number, step["outcome"])
        for index, (number, outcome) in last.items():
            if outcome == "failed" and number < loop_budget:
                steps[(index, number + 1)] = _step(number + 1, "cancelled")
    return _as_lanes(steps)


def add_record_details(lanes: list[dict[str, Any]], record: dict[str, Any]) -> None:
    """Fill in what the events left out (text and reasons, when content was not captured)
    from the record's entry of the same attempt."""
    from_record = {
        (lane["subsample"], step["attempt"]): step
        for lane in lanes_from_record(record)
        for step in lane["steps"]
    }
    for lane in lanes:
        for step in lane["steps"]:
            known = from_record.get((lane["subsample"], step["attempt"]))
            if known is None or known["outcome"] != step["outcome"]:
                continue
            for name in ("text", "reasons", "cost_usd"):
                if not step.get(name) and known.get(name):
                    step[name] = known[name]
