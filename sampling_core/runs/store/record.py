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

The entry is :mod:`sampling_core.runs.store.attempt_entry`'s (re-exported here: import both from
this module); :mod:`sampling_core.runs.store.record_fields` makes a record's fields from a
``sample()`` result.

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

from dataclasses import dataclass, field
from typing import Any

from sampling_core.runs.store.attempt_entry import (
    AttemptEntry,
    as_count,
    as_int,
    as_mapping,
    as_number,
    count_samples,
)

__all__ = ["STATUSES", "AttemptEntry", "PromptRow", "RunRecord", "count_samples", "read_record"]

STATUSES = frozenset({"ok", "failed", "error"})


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
    score: tuple[float, float] | None = None
    """``(best, mean)`` of its attempts' scores (a strategy's scorer), ``None`` when none
    was scored."""

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data (``score``: ``{"best", "mean"}``, ``None`` when no attempt was
        scored)."""
        scored = None if self.score is None else {"best": self.score[0], "mean": self.score[1]}
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
            "score": scored,
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
        return as_count(self.attempts.get(name)) or 0

    def samples(self) -> tuple[int, int, bool, int]:
        """``(n, c, partial, u)`` for pass@k: ``attempts.samples`` when the record has it,
        else counted from its entries; ``partial`` when those entries were cut (a record
        written before ``attempts.samples`` existed, with over 1,000 attempts); ``u`` the
        samples a rescore could not decide (not in ``n``)."""
        samples = self.attempts.get("samples")
        if isinstance(samples, dict):
            n, c = as_count(samples.get("ran")), as_count(samples.get("passed"))
            if n is not None and c is not None and c <= n:
                return n, c, False, as_count(samples.get("not_known")) or 0
        n, c, u = count_samples(self.entries(), as_count(self.attempts.get("loop_budget")) or None)
        partial = any(note.startswith("attempts.each:") for note in self.capped)
        return n, c, partial, u

    def tokens(self, name: str) -> int | None:
        """A token count of ``usage``; ``None`` when it says unknown (a record without the
        field, written before counts could be unknown, counts 0)."""
        value = self.usage.get(name, 0)
        return as_count(value)

    def cached(self) -> tuple[int, int]:
        """``(calls, tokens)`` the response cache answered, and what they took when
        generated."""
        cached = as_mapping(self.usage.get("cached"))
        tokens = (as_count(cached.get("input_tokens")) or 0) + (
            as_count(cached.get("output_tokens")) or 0
        )
        return as_count(cached.get("calls")) or 0, tokens

    def not_run(self) -> int:
        """A rescored record's attempts the new checks would have made that never ran."""
        return as_count(as_mapping(self.rescored).get("not_run")) or 0

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

        passes = as_count(self.attempts.get("passing"))
        if passes is None:
            passes = sum(e.passed for e in entries())
        early = as_count(self.attempts.get("stopped_early"))
        if early is None:
            early = sum(not e.provenance.whole for e in entries() if e.completed)
        latency = as_number(self.usage.get("latency_s"))
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
            cost_usd=as_number(self.usage.get("cost_usd")),
            latency_s=latency,
            elapsed_s=as_number(as_mapping(self.timings).get("elapsed_s")),
            samples=(n, c, partial),
            not_started=self.count("not_started"),
            stopped_early=early,
            not_known=self.count("not_known"),
            score=_score_of([e.score for e in entries() if e.score is not None])
            if any("score" in e for e in self.attempts.get("each") or [] if isinstance(e, dict))
            else None,  # most runs have no scorer: their entries are not read for this
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
    if as_int(seq) is None or not isinstance(content_hash, str):
        return None
    attempts, usage = data.get("attempts", {}), data.get("usage", {})
    if not isinstance(attempts, dict) or as_int(attempts.get("used", 0)) is None:
        return None
    if not isinstance(usage, dict):
        return None
    for name in ("input_tokens", "output_tokens"):
        tokens = usage.get(name, 0)
        if tokens is not None and as_int(tokens) is None:  # None: unknown
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
        line=as_int(data.get("line")),
        content_hash=content_hash,
        session=as_int(session),
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


def _score_of(scores: list[float]) -> tuple[float, float] | None:
    """``(best, mean)`` of a prompt's attempts' scores, ``None`` without any."""
    return (max(scores), sum(scores) / len(scores)) if scores else None
