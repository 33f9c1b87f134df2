"""Per prompt, its attempts as lanes (one per subsample), from ``events.jsonl`` or the records.

A step is one attempt with its outcome: ``passed``, ``failed``, ``error`` (the backend call
raised for good), ``cancelled`` (in flight when another subsample's pass ended the call) or,
in a rescored run, ``not_known`` (the new checks cannot judge it: cut before its end, or a
check needs what the run did not keep);
``stopped_early`` marks a failed one whose generation a prefix check cut short (its
``provenance`` says by which check and after how much; ``score``: the strategy's scorer's,
from the record), and a
cancelled one that streamed shows the tokens it received. The hook events say all of it, as
:mod:`sampling_core.events.attempts` reads them (the same reading ``samplehooks trace show``
prints): an attempt that no ``sampling_iteration`` or final ``generation_error`` ended was
cancelled. Without events (the ``recorder`` plugin was off) the record's attempts are used;
a subsample that stopped short of its budget on a failure, in a call that cancelled
attempts, is shown with one cancelled step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sampling_core.events.attempts import RecordedAttempt, RecordedCall, read_calls
from sampling_core.runs.store.record import RunRecord

__all__ = [
    "EventsFile",
    "add_record_details",
    "add_whole_texts",
    "lanes_from_call",
    "lanes_from_record",
    "read_events_by_call",
]

TEXT_SHOWN = 400


class EventsFile:
    """What could be read of ``events.jsonl``: the wanted calls by ``sampling_id``, and
    how many lines were skipped."""

    def __init__(self) -> None:
        self.by_call: dict[str, RecordedCall] = {}
        self.bad_lines = 0
        self.present = False


def read_events_by_call(path: Path, wanted: set[str]) -> EventsFile:
    """The calls in ``wanted``, read by :func:`sampling_core.events.attempts.read_calls`
    (streamed: the events of other calls are not kept).

    Tolerant, as the view always was: a line that is not an event (a torn last line of a
    run in progress, damage) or whose fields have the wrong type is counted and skipped,
    not raised, so the view shows what it can and says how many lines it skipped. A
    missing or unreadable file leaves :attr:`EventsFile.present` false.
    """
    found = EventsFile()

    def skip(_: object) -> None:
        found.bad_lines += 1

    try:
        calls = read_calls(path, on_note=skip, keep_call=wanted.__contains__, on_bad_line=skip)
    except OSError:
        return found
    found.present = True
    found.by_call = {call.sampling_id: call for call in calls}
    return found


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _step(attempt: int, outcome: str, **extra: Any) -> dict[str, Any]:
    return {"attempt": attempt, "outcome": outcome, **extra}


def lanes_from_call(call: RecordedCall) -> list[dict[str, Any]]:
    """Lanes of one call from its recorded attempts."""
    return _as_lanes({key: _attempt_step(row) for key, row in call.attempts.items()})


def _attempt_step(row: RecordedAttempt) -> dict[str, Any]:
    outcome = row.verdict
    if outcome == "error":
        return _step(row.attempt, outcome, reasons=[reason[:300] for reason in row.reasons])
    if outcome == "cancelled":
        return _step(row.attempt, outcome, time=row.started, tokens=row.chunks)
    return _step(
        row.attempt,
        outcome,
        stopped_early=row.stopped_early,
        provenance=row.provenance,
        sequence=row.sequence,
        reasons=row.reasons,
        latency_s=row.latency_s,
        tokens=_sum(row.input_tokens, row.output_tokens),
        cost_usd=row.cost_usd,
        text=None if row.text is None else row.text[:TEXT_SHOWN],
        time=row.finished,
    )


def _as_lanes(steps: dict[tuple[int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    lanes: dict[int, list[dict[str, Any]]] = {}
    for (index, _), step in sorted(steps.items()):
        lanes.setdefault(index, []).append(step)
    return [{"subsample": index, "steps": lane} for index, lane in sorted(lanes.items())]


def lanes_from_record(record: RunRecord) -> list[dict[str, Any]]:
    """Lanes of one prompt from its record (``attempts.each``, read through
    :class:`~sampling_core.runs.store.record.RunRecord`)."""
    steps: dict[tuple[int, int], dict[str, Any]] = {}
    for e in record.entries():
        index, number = e.subsample, e.attempt
        if e.error is not None:
            steps[(index, number)] = _step(number, "error", reasons=[e.error])
            continue
        steps[(index, number)] = _step(
            number,
            "not_known" if e.not_known else "passed" if e.passed else "failed",
            stopped_early=not e.provenance.whole,
            provenance=e.provenance.as_json(),
            sequence=e.sequence,
            reasons=e.failed,
            latency_s=e.latency_s,
            tokens=_sum(e.input_tokens, e.output_tokens),
            cost_usd=e.cost_usd,
            text=e.text,
            score=e.score,
        )
    loop_budget = _int(record.attempts.get("loop_budget"))
    if record.count("cancelled") > 0 and loop_budget is not None:
        last: dict[int, tuple[int, str]] = {}
        for (index, number), step in steps.items():
            if number >= last.get(index, (0, ""))[0]:
                last[index] = (number, step["outcome"])
        for index, (number, outcome) in last.items():
            if outcome == "failed" and number < loop_budget:
                steps[(index, number + 1)] = _step(number + 1, "cancelled")
    return _as_lanes(steps)


def add_record_details(lanes: list[dict[str, Any]], record: RunRecord) -> None:
    """Fill in what the events left out (text and reasons, when content was not captured)
    and the provenance, from the record's entry of the same attempt."""
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
            for name in ("text", "reasons", "cost_usd", "score", "provenance"):
                if not step.get(name) and known.get(name):
                    step[name] = known[name]


def _sum(inputs: Any, outputs: Any) -> int | None:
    """Input plus output tokens; ``None`` (shown as unknown) when either is not a count."""
    if isinstance(inputs, int) and isinstance(outputs, int):
        return inputs + outputs
    return None


def add_whole_texts(
    lanes: list[dict[str, Any]], texts: dict[tuple[int, int], dict[str, Any]]
) -> None:
    """Replace each completed attempt's text by its whole text (``texts``: the call's kept
    texts by ``(subsample, attempt)``, from ``texts.jsonl``)."""
    for lane in lanes:
        for step in lane["steps"]:
            whole = texts.get((lane["subsample"], step["attempt"]))
            if whole is not None and step["outcome"] in ("passed", "failed"):
                step["text"] = whole["text"]
