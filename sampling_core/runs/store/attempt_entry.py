"""A record's attempt entry: one attempt as a run keeps it, in the one JSON shape of an attempt.

The entry of :mod:`sampling_core.runs.store.record` (which defines the run record and re-exports
this): :class:`AttemptEntry` is made from an :class:`~hook_specs.records.Attempt` (or a
failed backend call), written by :meth:`AttemptEntry.as_json` (the shape a record, ``sample
--json`` and a loop-end dump write) and read back, from any version's record, by
:meth:`AttemptEntry.read`. :func:`count_samples` counts a prompt's samples for pass@k.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

from hook_specs.records import WHOLE, Attempt, Message, Provenance
from sampling_core.engine.results import AttemptError
from sampling_core.errors import exception_text
from sampling_core.runs.store.votes import AnswerOf, answer_entry, finished

__all__ = [
    "AttemptEntry",
    "as_count",
    "as_int",
    "as_mapping",
    "as_number",
    "as_strings",
    "count_samples",
]


def as_int(value: Any) -> int | None:
    """``value`` when it is an int (not a bool), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_count(value: Any) -> int | None:
    """``value`` when it is an int of at least 0, else ``None`` (unknown)."""
    found = as_int(value)
    return found if found is not None and found >= 0 else None


def as_number(value: Any) -> float | None:
    """``value`` as a float when it is a finite number (not a bool), else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        return float(value)
    return None


def as_mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty one."""
    return value if isinstance(value, dict) else {}


def as_strings(value: Any) -> list[str]:
    """``value``'s items as strings when it is a list, else none."""
    return [str(v) for v in value] if isinstance(value, list) else []


@dataclass(slots=True)
class AttemptEntry:
    """One attempt of a record: where it ran, its verdict, spend, text and provenance; or,
    with ``error``, an attempt whose backend call failed for good."""

    subsample: int
    attempt: int
    iteration: int | None = None
    sequence: int | None = None
    passed: bool = False
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    model: str | None = None
    text: str | None = None
    provenance: Provenance = WHOLE
    messages: list[Message] | None = None
    unmet: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    validations: list[dict[str, Any]] | None = None
    error: str | None = None
    not_known: bool = False
    """A rescore could not decide it: deciding needs text that was never generated."""
    answer: dict[str, Any] | None = None
    """``{"value", "right"}``: its answer, when known (what maj@k counts:
    :mod:`sampling_core.runs.store.votes`)."""
    score: float | None = None
    """The strategy's scorer's score (``BestOfN(scorer=...)``, a weighted vote), if any."""
    logprobs: list[dict[str, Any]] | None = None
    """Its tokens' log-probabilities, when the request asked for them (options
    ``logprobs``): ``{"token", "logprob", "top"}`` each."""

    @property
    def completed(self) -> bool:
        """Generated and validated (not a backend error)."""
        return self.error is None

    @classmethod
    def of_attempt(
        cls, a: Attempt, prompt: list[Message] | None = None, answer_of: AnswerOf | None = None
    ) -> AttemptEntry:
        """The entry of a completed attempt (``prompt``: the call's first request; an
        attempt that sent other messages, a repaired one, keeps them; ``answer_of``: how
        the run's strategy groups answers, when it votes)."""
        generation = a.generation
        usage = generation.usage
        validations = [
            {"requirement": v.requirement, "passed": v.passed, "reason": v.reason, "score": v.score}
            for v in a.validations
        ]
        failed = not a.passed
        return cls(
            subsample=a.subsample_index,
            attempt=a.attempt,
            iteration=a.iteration,
            sequence=a.sequence,
            passed=a.passed,
            latency_s=round(a.latency_s, 4),
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=usage.cost_usd,
            finish_reason=generation.finish_reason,
            model=generation.model,
            text=a.text,
            provenance=a.provenance,
            messages=a.messages if a.attempt > 1 and a.messages != prompt else None,
            unmet=[v.requirement or "a requirement" for v in a.validations if not v.passed]
            if failed
            else [],
            failed=a.failure_reasons if failed else [],
            validations=validations,
            answer=answer_entry(a, answer_of),
            score=a.scored,
            logprobs=None
            if generation.logprobs is None
            else [
                {"token": t.token, "logprob": t.logprob, "top": [list(p) for p in t.top]}
                for t in generation.logprobs
            ],
        )

    @classmethod
    def of_error(cls, e: AttemptError) -> AttemptEntry:
        """The entry of an attempt whose backend call raised for good."""
        text = f"{type(e.exception).__name__}: {exception_text(e.exception)}"[:300]
        return cls(e.subsample_index, e.attempt, e.iteration, error=text)

    def as_json(self) -> dict[str, Any]:
        """The one JSON shape of an attempt (see the module's docstring)."""
        if self.error is not None:
            return {
                "subsample": self.subsample,
                "attempt": self.attempt,
                "passed": False,
                "error": self.error,
            }
        data: dict[str, Any] = {
            "subsample": self.subsample,
            "attempt": self.attempt,
            "iteration": self.iteration,
            "sequence": self.sequence,
            "passed": self.passed,
            "latency_s": self.latency_s,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "finish_reason": self.finish_reason,
            "model": self.model,
            "text": self.text,
            "provenance": self.provenance.as_json(),
        }
        if self.provenance.cached:
            data["cached"] = True
        if not self.provenance.whole:
            data["stopped_early"] = True
        if self.messages is not None:
            data["messages"] = self.messages
        if not self.passed:
            data["unmet"] = self.unmet
            data["failed"] = self.failed
        if self.validations is not None:
            data["validations"] = self.validations
        if self.not_known:
            data["not_known"] = True
        if self.answer is not None:
            data["answer"] = self.answer
        if self.score is not None:
            data["score"] = self.score
        if self.logprobs is not None:
            data["logprobs"] = self.logprobs
        return data

    @classmethod
    def read(cls, data: Any) -> AttemptEntry | None:
        """An entry from a record's ``attempts.each`` as any version wrote it (``None``: not
        an attempt, which readers skip)."""
        if not isinstance(data, dict):
            return None
        index, number = as_int(data.get("subsample")), as_int(data.get("attempt"))
        if index is None or number is None:
            return None
        if data.get("error"):
            return cls(index, number, error=str(data["error"]))
        text = data.get("text")
        messages = data.get("messages")
        validations = data.get("validations")
        return cls(
            subsample=index,
            attempt=number,
            iteration=as_int(data.get("iteration")),
            sequence=as_int(data.get("sequence")),
            passed=data.get("passed") is True,
            latency_s=as_number(data.get("latency_s")),
            input_tokens=as_count(data.get("input_tokens")),
            output_tokens=as_count(data.get("output_tokens")),
            cost_usd=as_number(data.get("cost_usd")),
            finish_reason=_str(data.get("finish_reason")),
            model=_str(data.get("model")),
            text=text if isinstance(text, str) else None,
            provenance=Provenance.from_json(
                data.get("provenance"),
                cut=data.get("stopped_early") is True,
                cached=data.get("cached") is True,
            ),
            messages=messages if isinstance(messages, list) else None,
            unmet=as_strings(data.get("unmet")),
            failed=as_strings(data.get("failed")),
            validations=[v for v in validations if isinstance(v, dict)]
            if isinstance(validations, list)
            else None,
            not_known=data.get("not_known") is True,
            answer=data["answer"] if isinstance(data.get("answer"), dict) else None,
            score=as_number(data.get("score")),
            logprobs=[p for p in data["logprobs"] if isinstance(p, dict)]
            if isinstance(data.get("logprobs"), list)
            else None,
        )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def count_samples(
    entries: Iterable[AttemptEntry], loop_budget: int | None = None
) -> tuple[int, int, int]:
    """``(n, c, u)`` of a prompt's attempts for pass@k: its subsamples that ended by passing
    or by spending their budget (not by a backend error; with ``loop_budget``, not cut
    before either: :func:`~sampling_core.runs.store.votes.finished`), how many of them passed, and
    how many a rescore could not decide (an attempt not known and none passed: left out of
    ``n``)."""
    passed: set[int] = set()
    errored: set[int] = set()
    unknown: set[int] = set()
    seen: set[int] = set()
    last: dict[int, int] = {}
    for entry in entries:
        index = entry.subsample
        seen.add(index)
        last[index] = max(last.get(index, 0), entry.attempt)
        if entry.error is not None:
            errored.add(index)
        elif entry.passed:
            passed.add(index)
        elif entry.not_known:
            unknown.add(index)
    undecided = unknown - passed
    ran = {
        i
        for i in seen - (errored - passed) - undecided
        if finished(i in passed, last[i], loop_budget)
    }
    return len(ran), len(passed & ran), len(undecided - (errored - passed))
