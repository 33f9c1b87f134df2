"""The run record and its attempt entry: what a line of ``records.jsonl`` holds, defined once.

A batch run writes one record per prompt sampled (:class:`RunRecord`); its ``attempts.each``
list holds one :class:`AttemptEntry` per completed attempt, then one per attempt whose
backend call failed for good. Every writer builds them from these types (a run's prompts,
its error records, a rescore) and every reader reads them through :func:`read_record`, the
one lenient reader: records written by any earlier version are read, a field a record lacks
comes out as unknown (``None``) or zero, never as an error, and a field this version does
not know is kept and written back as it was. A line that lacks what every reader needs (a
string ``key``, a known ``status``, integer counts) is not a record: :func:`read_record`
returns ``None`` and the run calls the line damaged.

An attempt has one JSON shape (:meth:`AttemptEntry.as_json`), the same in a record, in
``samplehooks sample --json`` and wherever an attempt is dumped::

    {"subsample": 0, "attempt": 2, "iteration": 2, "sequence": 2, "passed": false,
     "latency_s": 0.41, "input_tokens": 31, "output_tokens": 9, "cost_usd": null,
     "finish_reason": "stopped_early", "model": "...", "text": "...",
     "provenance": {"kind": "stopped_early", "stopped_by": ["at most 8 words"],
                    "chars": 52, "tokens": 9},
     "stopped_early": true, "unmet": ["at most 8 words"], "failed": ["The answer has 9 ..."],
     "validations": [{"requirement": "at most 8 words", "passed": false, "reason": "...",
                      "score": null}]}

``provenance`` (:class:`~hook_specs.records.Provenance`) says how the text came to be;
``stopped_early`` and ``cached`` repeat its flags for readers of older records. A rescore
marks an attempt whose verdict needs text that was never generated ``"not_known": true``
(it is neither passed nor failed). The record's ``reason`` is the outcome's one failure
label (the result's ``failure_reason``: the same text as the loop end's and the trace's).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

from hook_specs.records import WHOLE, Attempt, Message, Provenance
from sampling_core.engine.results import AttemptError, SamplingResult
from sampling_core.errors import exception_text
from sampling_core.runs.votes import AnswerOf, answer_entry, count_votes

__all__ = [
    "STATUSES",
    "AttemptEntry",
    "PromptRow",
    "RunRecord",
    "count_samples",
    "error_fields",
    "read_record",
    "result_fields",
]

STATUSES = frozenset({"ok", "failed", "error"})


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    number = _int(value)
    return number if number is not None and number >= 0 else None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        return float(value)
    return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


# -- one attempt ---------------------------------------------------------------------------


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
    :mod:`sampling_core.runs.votes`)."""

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
        return data

    @classmethod
    def read(cls, data: Any) -> AttemptEntry | None:
        """An entry from a record's ``attempts.each`` as any version wrote it (``None``: not
        an attempt, which readers skip)."""
        if not isinstance(data, dict):
            return None
        index, number = _int(data.get("subsample")), _int(data.get("attempt"))
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
            iteration=_int(data.get("iteration")),
            sequence=_int(data.get("sequence")),
            passed=data.get("passed") is True,
            latency_s=_number(data.get("latency_s")),
            input_tokens=_count(data.get("input_tokens")),
            output_tokens=_count(data.get("output_tokens")),
            cost_usd=_number(data.get("cost_usd")),
            finish_reason=_str(data.get("finish_reason")),
            model=_str(data.get("model")),
            text=text if isinstance(text, str) else None,
            provenance=Provenance.from_json(
                data.get("provenance"),
                cut=data.get("stopped_early") is True,
                cached=data.get("cached") is True,
            ),
            messages=messages if isinstance(messages, list) else None,
            unmet=_strings(data.get("unmet")),
            failed=_strings(data.get("failed")),
            validations=[v for v in validations if isinstance(v, dict)]
            if isinstance(validations, list)
            else None,
            not_known=data.get("not_known") is True,
            answer=data["answer"] if isinstance(data.get("answer"), dict) else None,
        )


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def count_samples(entries: Iterable[AttemptEntry]) -> tuple[int, int, int]:
    """``(n, c, u)`` of a prompt's attempts for pass@k: its subsamples that ended by passing
    or by spending their budget (not by a backend error), how many of them passed, and how
    many a rescore could not decide (an attempt not known and none passed: left out of
    ``n``)."""
    passed: set[int] = set()
    errored: set[int] = set()
    unknown: set[int] = set()
    seen: set[int] = set()
    for entry in entries:
        index = entry.subsample
        seen.add(index)
        if entry.error is not None:
            errored.add(index)
        elif entry.passed:
            passed.add(index)
        elif entry.not_known:
            unknown.add(index)
    undecided = unknown - passed
    ran = seen - (errored - passed) - undecided
    return len(ran), len(passed & ran), len(undecided - (errored - passed))


# -- one record ----------------------------------------------------------------------------


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
    """``(n, c, partial)``: the record's samples for pass@k (:meth:`RunRecord.samples`)."""
    not_started: int = 0
    """Subsamples that never started (the prompt was decided before their launch)."""
    stopped_early: int = 0
    """Attempts whose generation a prefix check stopped early."""
    not_known: int = 0
    """Attempts a rescore could not decide (their text was cut before the end)."""

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
            "not_known": self.not_known,
            "unmet_requirements": self.unmet,
            "reason": self.reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "elapsed_s": self.elapsed_s,
        }


@dataclass(slots=True)
class RunRecord:
    """One prompt's record. ``attempts`` and ``usage`` are the record's own mappings (as
    written, or as read: :meth:`entries` reads the attempts in them); ``extra`` holds the
    fields of a newer version, written back as they were."""

    key: str
    status: str
    seq: int = 0
    line: int | None = None
    content_hash: str = ""
    session: int | None = None
    sampling_id: str | None = None
    reason: str | None = None
    failed_requirements: list[str] = field(default_factory=list)
    text: str | None = None
    attempts: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] | None = None
    rescored: dict[str, Any] | None = None
    capped: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    # -- reading ----------------------------------------------------------------------------

    def entries(self) -> list[AttemptEntry]:
        """Its attempt entries, as written (entries that are not attempts are skipped)."""
        out = []
        for data in self.attempts.get("each") or []:
            entry = AttemptEntry.read(data)
            if entry is not None:
                out.append(entry)
        return out

    def completed(self) -> list[AttemptEntry]:
        """Its completed attempts (not its backend errors), in the order they completed."""
        done = [e for e in self.entries() if e.completed]
        return sorted(done, key=lambda e: e.sequence or 0)

    def count(self, name: str) -> int:
        """A count of ``attempts`` (``used``, ``cancelled``, ...): 0 when absent."""
        return _count(self.attempts.get(name)) or 0

    def samples(self) -> tuple[int, int, bool, int]:
        """``(n, c, partial, u)`` for pass@k: ``attempts.samples`` when the record has it,
        else counted from its entries; ``partial`` when those entries were cut (a record
        written before ``attempts.samples`` existed, with over 1,000 attempts); ``u`` the
        samples a rescore could not decide (not in ``n``)."""
        samples = self.attempts.get("samples")
        if isinstance(samples, dict):
            n, c = _count(samples.get("ran")), _count(samples.get("passed"))
            if n is not None and c is not None and c <= n:
                return n, c, False, _count(samples.get("not_known")) or 0
        n, c, u = count_samples(self.entries())
        partial = any(note.startswith("attempts.each:") for note in self.capped)
        return n, c, partial, u

    def tokens(self, name: str) -> int | None:
        """A token count of ``usage``; ``None`` when it says unknown (a record without the
        field, written before counts could be unknown, counts 0)."""
        value = self.usage.get(name, 0)
        return _count(value)

    def cached(self) -> tuple[int, int]:
        """``(calls, tokens)`` the response cache answered, and what they took when
        generated."""
        cached = _dict(self.usage.get("cached"))
        tokens = (_count(cached.get("input_tokens")) or 0) + (
            _count(cached.get("output_tokens")) or 0
        )
        return _count(cached.get("calls")) or 0, tokens

    def not_run(self) -> int:
        """A rescored record's attempts the new checks would have made that never ran."""
        return _count(_dict(self.rescored).get("not_run")) or 0

    def unmet(self) -> list[str]:
        """The requirements it missed (``["(error)"]`` for an error that names none)."""
        if self.status == "error" and not self.failed_requirements:
            return ["(error)"]
        return list(self.failed_requirements)

    def row(self) -> PromptRow:
        """Its report row."""
        each: list[AttemptEntry] | None = None

        def entries() -> list[AttemptEntry]:
            nonlocal each
            if each is None:
                each = self.entries()
            return each

        passes = _count(self.attempts.get("passing"))
        if passes is None:
            passes = sum(e.passed for e in entries())
        early = _count(self.attempts.get("stopped_early"))
        if early is None:
            early = sum(not e.provenance.whole for e in entries() if e.completed)
        latency = _number(self.usage.get("latency_s"))
        if "latency_s" not in self.usage and entries():
            latency = sum(e.latency_s or 0.0 for e in entries())
        n, c, partial, _ = self.samples()
        return PromptRow(
            key=self.key,
            sampling_id=self.sampling_id,
            status=self.status,
            attempts=self.count("used"),
            passes=passes,
            cancelled=self.count("cancelled"),
            unmet=self.unmet(),
            reason=self.reason,
            input_tokens=self.tokens("input_tokens"),
            output_tokens=self.tokens("output_tokens"),
            cost_usd=_number(self.usage.get("cost_usd")),
            latency_s=latency,
            elapsed_s=_number(_dict(self.timings).get("elapsed_s")),
            samples=(n, c, partial),
            not_started=self.count("not_started"),
            stopped_early=early,
            not_known=self.count("not_known"),
        )

    # -- writing ----------------------------------------------------------------------------

    def as_json(self) -> dict[str, Any]:
        """The record as JSON data, as ``records.jsonl`` holds it."""
        data: dict[str, Any] = {
            "seq": self.seq,
            "key": self.key,
            "line": self.line,
            "content_hash": self.content_hash,
            "session": self.session,
            "sampling_id": self.sampling_id,
            "status": self.status,
            "reason": self.reason,
            "failed_requirements": self.failed_requirements,
            "text": self.text,
            "attempts": self.attempts,
            "usage": self.usage,
        }
        if self.timings is not None:
            data["timings"] = self.timings
        if self.rescored is not None:
            data["rescored"] = self.rescored
        if self.capped:
            data["capped"] = self.capped
        data.update(self.extra)
        return data


_KNOWN = frozenset(
    {
        "seq",
        "key",
        "line",
        "content_hash",
        "session",
        "sampling_id",
        "status",
        "reason",
        "failed_requirements",
        "text",
        "attempts",
        "usage",
        "timings",
        "rescored",
        "capped",
    }
)


def read_record(data: Any) -> RunRecord | None:
    """The record in ``data`` (a parsed line of ``records.jsonl``, written by any version),
    or ``None`` when it lacks what every reader needs: a string ``key``, a known
    ``status``, integer ``seq`` and ``attempts.used``, token counts that are integers or
    ``null``, ``failed_requirements`` a list of strings. Every other field is optional."""
    if not isinstance(data, dict):
        return None
    key, status = data.get("key"), data.get("status")
    if not isinstance(key, str) or status not in STATUSES:
        return None
    seq, content_hash = data.get("seq", 0), data.get("content_hash", "")
    if _int(seq) is None or not isinstance(content_hash, str):
        return None
    attempts, usage = data.get("attempts", {}), data.get("usage", {})
    if not isinstance(attempts, dict) or _int(attempts.get("used", 0)) is None:
        return None
    if not isinstance(usage, dict):
        return None
    for name in ("input_tokens", "output_tokens"):
        count = usage.get(name, 0)
        if count is not None and _int(count) is None:  # None: unknown
            return None
    failed = data.get("failed_requirements") or []
    if not isinstance(failed, list) or not all(isinstance(r, str) for r in failed):
        return None
    session, reason, sampling_id = data.get("session"), data.get("reason"), data.get("sampling_id")
    timings, rescored, capped = data.get("timings"), data.get("rescored"), data.get("capped")
    text = data.get("text")
    return RunRecord(
        key=key,
        status=status,
        seq=seq,
        line=_int(data.get("line")),
        content_hash=content_hash,
        session=_int(session),
        sampling_id=sampling_id if isinstance(sampling_id, str) else None,
        reason=None if reason is None else str(reason),
        failed_requirements=list(failed),
        text=text if isinstance(text, str) else None,
        attempts=attempts,
        usage=usage,
        timings=timings if isinstance(timings, dict) else None,
        rescored=rescored if isinstance(rescored, dict) else None,
        capped=[c for c in capped if isinstance(c, str)] if isinstance(capped, list) else [],
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


# -- from a result -------------------------------------------------------------------------


def result_fields(result: SamplingResult, answer_of: AnswerOf | None = None) -> dict[str, Any]:
    """The outcome of a ``sample()`` call as a record's fields: status, reason (the
    result's failure label), text, attempts and usage (``answer_of``: how the run's
    strategy groups answers, when it votes)."""
    failed_checks: list[str] = []
    if result.success:
        status = "ok"
    elif not result.attempts and result.errors:
        status = "error"
    else:
        status = "failed"
        if result.picked is not None:
            failed_checks = [
                v.requirement or "a requirement" for v in result.picked.validations if not v.passed
            ]
    prompt = next((a.messages for a in result.attempts if a.attempt == 1), None)
    entries = [AttemptEntry.of_attempt(a, prompt, answer_of) for a in result.attempts]
    entries += [AttemptEntry.of_error(e) for e in result.errors]
    ran, passed, _ = count_samples(entries)
    each = [e.as_json() for e in entries]
    samples: dict[str, Any] = {"ran": ran, "passed": passed}
    votes = count_votes(each)
    if votes is not None:
        samples["votes"] = [list(group) for group in votes]
    return {
        "sampling_id": result.sampling_id,
        "status": status,
        "reason": result.failure_reason,
        "failed_requirements": failed_checks,
        "text": result.text,
        "attempts": {
            "used": result.iterations_used,
            "cancelled": result.cancelled,
            "cancelled_because": result.cancelled_because,
            "not_started": result.not_started,
            "stopped_early": sum(1 for a in result.attempts if not a.provenance.whole),
            "passing": sum(1 for a in result.attempts if a.passed),
            "stop_reason": result.stop_reason,
            "loop_budget": result.loop_budget,
            "concurrency_budget": result.concurrency_budget,
            "samples": samples,
            "each": each,
        },
        "usage": usage_entry(result),
    }


def error_fields(reason: str) -> dict[str, Any]:
    """The fields of an ``error`` record that made no attempt (``reason``: its label)."""
    return {
        "status": "error",
        "reason": reason,
        "text": None,
        "attempts": {
            "used": 0,
            "cancelled": 0,
            "not_started": 0,
            "passing": 0,
            "stop_reason": "error",
        },
        "usage": {"input_tokens": 0, "output_tokens": 0, "cost_usd": None},
    }


def usage_entry(result: SamplingResult) -> dict[str, Any]:
    """The call's totals: tokens and cost (``None`` when unknown), cancelled attempts
    included, what those spent apart, and summed backend latency; with ``cached`` the calls
    the response cache answered and the tokens (and cost) they took when they were
    generated, which this call did not spend again."""
    cancelled = result.cancelled_usage
    entry: dict[str, Any] = {
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cost_usd": result.usage.cost_usd,
        "latency_s": round(sum(a.latency_s for a in result.attempts), 4),
        "cancelled": {
            "input_tokens": cancelled.input_tokens,
            "output_tokens": cancelled.output_tokens,
        },
    }
    if result.cached_calls:
        saved = result.cached_usage
        entry["cached"] = {
            "calls": result.cached_calls,
            "input_tokens": saved.input_tokens,
            "output_tokens": saved.output_tokens,
            "cost_usd": saved.cost_usd,
        }
    return entry
