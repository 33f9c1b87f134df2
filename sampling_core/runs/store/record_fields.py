"""A ``sample()`` call's outcome as a record's fields: what a run writes of each prompt.

The writer's side of :mod:`sampling_core.runs.store.record`: :func:`result_fields` makes a record's
status, reason (the result's one failure label), text, attempts (each an
:class:`~sampling_core.runs.store.record.AttemptEntry`) and usage; :func:`error_fields` those of a
prompt that could not be sampled.
"""

from __future__ import annotations

from typing import Any

from sampling_core.engine.results import SamplingResult
from sampling_core.runs.store.record import AttemptEntry, count_samples
from sampling_core.runs.store.votes import AnswerOf, count_votes

__all__ = ["error_fields", "result_fields", "usage_entry"]


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
    ran, passed, _ = count_samples(entries, result.loop_budget)
    each = [e.as_json() for e in entries]
    samples: dict[str, Any] = {"ran": ran, "passed": passed}
    votes = count_votes(each, result.loop_budget)
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
