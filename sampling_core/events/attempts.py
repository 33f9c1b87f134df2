"""Recorded events interpreted: each call, and per call each attempt and how it ended.

The one reading of the format of :mod:`sampling_core.events.reading` into facts, shared by
``samplehooks trace show`` (a table per call) and ``samplehooks view`` (lanes per
subsample). Events are grouped by ``sampling_id`` and, per call, by
``(subsample_index, attempt)``: one :class:`RecordedAttempt` per attempt.
:func:`iter_calls` hands each call on once its ``sampling_loop_end`` is read (the last event
of a call), so reading a file holds only the calls in flight; :func:`read_calls` lists them.

- ``generation_pre_call`` starts an attempt (its first one gives ``started``; ``retry``
  counts transport retries); ``generation_chunk`` counts the pieces of its streamed answer
  (``chunks``: what a cancelled attempt had received); ``generation_post_call`` gives
  latency and tokens; ``sampling_iteration`` completes it (sequence, passed, latency,
  tokens, cost, the failed checks' reasons, text, ``stopped_early``, ``provenance``); a
  ``generation_error`` that will not be retried ends it in an error; ``sampling_repair``
  names a failed attempt and changes nothing.
- A later event's value replaces an earlier one's; an absent or ``null`` field does not.
- ``sampling_loop_end`` ends the call: its attempts still in flight were cancelled.
- The generation events of a call a check made for the attempt (``purpose: "judge"``, an
  LLM-as-judge) carry the attempt's ids but say nothing of its own generation: they are
  checked like the others and change nothing.

Bad input follows the rule of :mod:`sampling_core.events.reading`: a field read here that has the
wrong type is an :class:`~sampling_core.events.reading.EventFileError` naming the line, the hook
and the field, raised, or given to ``on_bad_line`` and the whole event skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from hook_specs.names import HookName
from sampling_core.errors import exception_text
from sampling_core.events.reading import NO_CALL, EventFileError, numbered_events

__all__ = ["RecordedAttempt", "RecordedCall", "iter_calls", "read_calls"]


@dataclass(slots=True)
class RecordedAttempt:
    """One attempt of a call, as the recorded events describe it."""

    subsample_index: int
    attempt: int
    iteration: int
    started: float | None = None  # wall time of the attempt's first backend call
    finished: float | None = None  # wall time of its iteration (or final error) event
    sequence: int | None = None
    passed: bool | None = None
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    retries: int = 0
    state: str = "in flight"  # "completed", "error", "cancelled" or "in flight"
    error_type: str | None = None  # of the backend error that ended it
    cost_usd: float | None = None
    reasons: list[str] = field(default_factory=list)  # failed checks, or the backend error
    text: str | None = None  # when content was captured
    stopped_early: bool = False  # a prefix check stopped its generation
    chunks: int | None = None  # pieces of its streamed answer received (when streamed)
    provenance: dict[str, Any] | None = None  # how its text came to be (sampling_iteration)

    @property
    def outcome(self) -> str:
        """``"completed"``, ``"error: Type"``, ``"cancelled"`` or ``"in flight"``."""
        return f"error: {self.error_type or '?'}" if self.state == "error" else self.state

    @property
    def verdict(self) -> str:
        """``"passed"``, ``"failed"``, ``"error"`` or ``"cancelled"`` (an attempt whose call
        has no recorded end is counted as cancelled: it never completed)."""
        if self.state == "completed":
            return "passed" if self.passed else "failed"
        return "error" if self.state == "error" else "cancelled"


@dataclass(slots=True)
class RecordedCall:
    """One ``sample()`` call: its start and end payloads, and its attempts."""

    sampling_id: str
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    started_at: float | None = None  # its first event's time (its start event's)
    attempts: dict[tuple[int, int], RecordedAttempt] = field(default_factory=dict)
    texts_note: str | None = None  # why its whole texts are not shown, when a reader knows

    def rows(self) -> list[RecordedAttempt]:
        """The attempts in the order they finished; unfinished ones last."""
        never = float("inf")
        return sorted(
            self.attempts.values(),
            key=lambda r: (
                r.finished if r.finished is not None else never,
                r.sequence or 0,
                r.subsample_index,
                r.attempt,
            ),
        )


OnBad = Callable[[EventFileError], None]


def read_calls(
    path: str | os.PathLike[str],
    on_note: Callable[[str], None] | None = None,
    *,
    keep_call: Callable[[str], bool] | None = None,
    on_bad_line: OnBad | None = None,
) -> list[RecordedCall]:
    """The calls recorded in ``path`` (those ``keep_call`` accepts), in the order
    :func:`iter_calls` gives them.

    Raises ``OSError`` if the file cannot be read, and :class:`EventFileError` for a bad
    line unless ``on_bad_line`` is given (see :mod:`sampling_core.events.reading`).
    """
    return list(iter_calls(path, on_note, keep_call=keep_call, on_bad_line=on_bad_line))


def iter_calls(
    path: str | os.PathLike[str],
    on_note: Callable[[str], None] | None = None,
    *,
    keep_call: Callable[[str], bool] | None = None,
    on_bad_line: OnBad | None = None,
) -> Iterator[RecordedCall]:
    """The calls recorded in ``path`` (those ``keep_call`` accepts), each as soon as its
    ``sampling_loop_end`` is read; then, at the end of the file, those that never ended (a
    run killed meanwhile), in the order they began. Memory holds the calls in flight.

    Raises as :func:`read_calls` does, when it reaches the line.
    """
    calls: dict[str, RecordedCall] = {}
    events = numbered_events(path, on_note, keep_call=keep_call, on_bad_line=on_bad_line)
    for number, event in events:
        try:
            _add(calls, event)
        except _BadField as exc:
            message = f"line {number} ({event['hook']}): {exception_text(exc)}"
            _bad(EventFileError(message), on_bad_line)
            continue
        if event["hook"] == "sampling_loop_end":
            ended = event["payload"].get("sampling_id")
            yield calls.pop(NO_CALL if ended is None else ended)
    yield from calls.values()


def _bad(error: EventFileError, on_bad: OnBad | None) -> None:
    if on_bad is None:
        raise error
    on_bad(error)


_RUN_HOOKS = frozenset(hook.value for hook in HookName.run())

_ATTEMPT_HOOKS = frozenset(
    {
        "generation_pre_call",
        "generation_chunk",
        "generation_post_call",
        "generation_error",
        "sampling_iteration",
        "sampling_repair",
    }
)


def _add(calls: dict[str, RecordedCall], event: dict[str, Any]) -> None:
    """Apply one event (every field it has is checked before anything changes)."""
    hook, payload = event["hook"], event["payload"]
    if hook in _RUN_HOOKS:  # a batch run's own events: around the calls, of none of them
        return
    sampling_id = _typed(payload, "sampling_id", str)
    sampling_id = NO_CALL if sampling_id is None else sampling_id
    when = _typed(event, "time", float)
    if hook in _ATTEMPT_HOOKS:
        key = (_typed(payload, "subsample_index", int, True), _typed(payload, "attempt", int, True))
        iteration = _typed(payload, "iteration", int) or 0
        changes = _attempt_changes(hook, payload, when)
        if payload.get("purpose") == "judge":  # a check's own model call, not the attempt's
            changes = {}
        call = _call(calls, sampling_id, when)
        row = call.attempts.get(key)
        if row is None:
            row = call.attempts[key] = RecordedAttempt(*key, iteration)
        for name, value in changes.items():
            if value is not None and not (name == "started" and row.started is not None):
                setattr(row, name, value)
        return
    if hook == "sampling_loop_end":
        _typed(payload, "elapsed_s", float)
    call = _call(calls, sampling_id, when)
    if hook == "sampling_loop_start":
        call.start = payload
    elif hook == "sampling_loop_end":
        call.end = payload
        for row in call.attempts.values():
            if row.state == "in flight":
                row.state = "cancelled"


def _call(calls: dict[str, RecordedCall], sampling_id: str, when: float | None) -> RecordedCall:
    """The call ``sampling_id``, started at its first event's time (its sampling_loop_start)."""
    call = calls.get(sampling_id)
    if call is None:
        call = calls[sampling_id] = RecordedCall(sampling_id)
    if call.started_at is None:
        call.started_at = when
    return call


def _attempt_changes(hook: str, payload: dict[str, Any], when: float | None) -> dict[str, Any]:
    """What ``hook``'s event says of its attempt, as field values (``None``: says nothing)."""
    if hook == "generation_pre_call":
        return {"started": when, "retries": _typed(payload, "retry", int)}
    if hook == "generation_chunk":
        index = _typed(payload, "index", int)
        return {"chunks": None if index is None else index + 1}
    if hook == "generation_post_call":
        generation = _typed(payload, "generation", dict) or {}
        return {"latency_s": _typed(payload, "latency_s", float), **_usage(generation)}
    if hook == "sampling_iteration":
        return {
            "sequence": _typed(payload, "sequence", int),
            "passed": _typed(payload, "passed", bool),
            "latency_s": _typed(payload, "latency_s", float),
            **_usage(payload),
            "reasons": _failed_checks(payload),
            "text": _typed(payload, "text", str),
            "finished": when,
            "state": "completed",
            "stopped_early": _typed(payload, "stopped_early", bool),
            "provenance": _typed(payload, "provenance", dict),
        }
    if hook == "generation_error" and not _typed(payload, "will_retry", bool):
        error_type = _typed(payload, "error_type", str)
        exception = _typed(payload, "exception", str)
        return {
            "finished": when,
            "state": "error",
            "error_type": error_type,
            "reasons": [exception or error_type or "error"],  # exception: "Type: message"
        }
    return {}


def _usage(holder: dict[str, Any]) -> dict[str, Any]:
    usage = _typed(holder, "usage", dict) or {}
    return {
        "input_tokens": _typed(usage, "input_tokens", int),
        "output_tokens": _typed(usage, "output_tokens", int),
        "cost_usd": _typed(usage, "cost_usd", float),
    }


def _failed_checks(payload: dict[str, Any]) -> list[str]:
    """Why the attempt failed: each failed check's reason (or, when content was not
    captured, its requirement)."""
    out = []
    for check in _typed(payload, "validations", list) or []:
        if not isinstance(check, dict):
            raise _BadField(f"validations must hold objects, got {check!r}")
        if not check.get("passed"):
            out.append(str(check.get("reason") or check.get("requirement") or "a requirement"))
    return out


class _BadField(ValueError):
    """A field of an event does not have its type."""


_KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}
_KINDS.update({dict: "an object", list: "a list"})


def _typed(data: dict[str, Any], name: str, kind: type, required: bool = False) -> Any:
    """``data[name]`` if it is of ``kind`` (an int is a float; a bool is neither); ``None``
    when absent or ``null`` unless ``required``."""
    value = data.get(name)
    if value is None and not required:
        return None
    if isinstance(value, bool) and kind is not bool:
        ok = False
    else:
        ok = isinstance(value, int | float) if kind is float else isinstance(value, kind)
    if not ok:
        raise _BadField(f"{name} must be {_KINDS[kind]}, got {value!r}")
    return float(value) if kind is float else value
