"""One record read as a report row, and the samples it holds for pass@k.

Read from records as written by any version: fields a record lacks come out as unknown
(``None``) or zero, never as an error.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from math import isfinite
from typing import Any

__all__ = [
    "PromptRow",
    "count_samples",
    "finished",
    "prompt_row",
    "sample_counts",
    "usage_extras",
]


@dataclass(slots=True)
class PromptRow:
    """One prompt's outcome: what ``report --json`` lists under ``prompts``."""

    key: str
    sampling_id: str | None
    status: str
    attempts: int
    passes: int
    cancelled: int
    unmet: list[str]
    reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    """``None``: the backend did not report them (unknown, never 0)."""
    cost_usd: float | None
    latency_s: float | None
    elapsed_s: float | None
    samples: tuple[int, int, bool] = (0, 0, False)
    """``(n, c, partial)``: :func:`sample_counts` of the record."""
    not_started: int = 0
    """Subsamples that never started (the prompt was decided before their launch)."""
    stopped_early: int = 0
    """Attempts whose generation a prefix check stopped early."""

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "key": self.key,
            "sampling_id": self.sampling_id,
            "status": self.status,
            "attempts": self.attempts,
            "passes": self.passes,
            "cancelled": self.cancelled,
            "not_started": self.not_started,
            "stopped_early": self.stopped_early,
            "unmet_requirements": self.unmet,
            "reason": self.reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "elapsed_s": self.elapsed_s,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        return float(value)
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def count_samples(each: Iterable[Any], loop_budget: int | None = None) -> tuple[int, int]:
    """``(n, c)`` of a prompt's attempt entries: its subsamples that ended by passing or by
    spending their budget (not by a backend error), and how many of them passed.

    With ``loop_budget`` (the attempts a subsample had), a subsample that neither passed nor
    reached it was cut before it finished (a plugin's stop, a cancellation): it is no
    sample, as one that never started is not, never a failed one. A record keeps this as
    ``attempts.samples`` (``{"ran": n, "passed": c}``), counted before a long attempt list
    is cut (:mod:`sampling_core.runs.caps`).
    """
    passed: set[int] = set()
    errored: set[int] = set()
    seen: set[int] = set()
    last: dict[int, int] = {}
    for entry in each:
        if not isinstance(entry, dict):
            continue
        index = entry.get("subsample")
        if not isinstance(index, int):
            continue
        seen.add(index)
        number = _count(entry.get("attempt"))
        if number is not None and number > last.get(index, 0):
            last[index] = number
        if entry.get("error"):
            errored.add(index)
        elif entry.get("passed"):
            passed.add(index)
    ran = {
        i for i in seen - (errored - passed) if finished(i in passed, last.get(i, 0), loop_budget)
    }
    return len(ran), len(passed & ran)


def finished(passed: bool, last_attempt: int, loop_budget: int | None) -> bool:
    """Whether a subsample that made ``last_attempt`` attempts is a sample: it passed, or it
    spent its ``loop_budget`` (every one, when the budget is not known); else it was cut
    before it finished (a plugin's stop, a cancellation)."""
    return passed or loop_budget is None or last_attempt >= loop_budget


def sample_counts(record: dict[str, Any]) -> tuple[int, int, bool]:
    """``(n, c, partial)`` for pass@k: ``attempts.samples`` when the record has it, else
    :func:`count_samples` of its attempt entries; ``partial`` when those entries were cut
    (a record written before ``attempts.samples`` existed, with over 1,000 attempts)."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    samples = attempts.get("samples")
    if isinstance(samples, dict):
        n, c = _count(samples.get("ran")), _count(samples.get("passed"))
        if n is not None and c is not None and c <= n:
            return n, c, False
    n, c = count_samples(attempts.get("each") or [], _count(attempts.get("loop_budget")) or None)
    capped = record.get("capped") if isinstance(record.get("capped"), list) else []
    partial = any(isinstance(note, str) and note.startswith("attempts.each:") for note in capped)
    return n, c, partial


def prompt_row(record: dict[str, Any]) -> PromptRow:
    """The row of one record (old records lack some fields: they come out as ``None``)."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    timings = record.get("timings") if isinstance(record.get("timings"), dict) else {}
    each = [e for e in attempts.get("each") or [] if isinstance(e, dict)]
    unmet = list(record.get("failed_requirements") or [])
    if record.get("status") == "error" and not unmet:
        unmet = ["(error)"]
    passes = attempts.get("passing")
    return PromptRow(
        key=str(record.get("key")),
        sampling_id=record.get("sampling_id"),
        status=str(record.get("status")),
        attempts=int(attempts.get("used") or 0),
        passes=int(passes) if isinstance(passes, int) else sum(bool(e.get("passed")) for e in each),
        cancelled=int(attempts.get("cancelled") or 0),
        unmet=unmet,
        reason=record.get("reason"),
        input_tokens=_tokens(usage, "input_tokens"),
        output_tokens=_tokens(usage, "output_tokens"),
        cost_usd=_number(usage.get("cost_usd")),
        latency_s=_number(usage.get("latency_s"))
        if "latency_s" in usage
        else (sum(_number(e.get("latency_s")) or 0.0 for e in each) if each else None),
        elapsed_s=_number(timings.get("elapsed_s")),
        samples=sample_counts(record),
        not_started=_count(attempts.get("not_started")) or 0,
        stopped_early=_stopped_early(attempts, each),
    )


def _stopped_early(attempts: dict[str, Any], each: list[dict[str, Any]]) -> int:
    """Attempts stopped early by a prefix check: the record's count, else its entries'."""
    counted = _count(attempts.get("stopped_early"))
    return counted if counted is not None else sum(bool(e.get("stopped_early")) for e in each)


def _tokens(usage: dict[str, Any], name: str) -> int | None:
    """A record's token count; ``None`` when it says unknown (a record without the field,
    written before counts could be unknown, counts 0)."""
    value = usage.get(name, 0)
    return None if value is None else int(value)


def usage_extras(record: dict[str, Any]) -> tuple[int, int, int]:
    """``(cached calls, cached tokens, attempts never run)`` of a record: the calls the
    response cache answered and the tokens they took when generated, and for a rescored
    record the attempts the new checks would have made that the source never ran."""
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    cached = usage.get("cached")
    calls = tokens = 0
    if isinstance(cached, dict):
        calls = _count(cached.get("calls")) or 0
        tokens = (_count(cached.get("input_tokens")) or 0) + (
            _count(cached.get("output_tokens")) or 0
        )
    rescored = record.get("rescored")
    not_run = _count(rescored.get("not_run")) or 0 if isinstance(rescored, dict) else 0
    return calls, tokens, not_run
