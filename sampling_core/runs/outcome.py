"""What a record keeps of each attempt of a prompt, from a ``SamplingResult``.

Every completed attempt becomes one entry: where it ran (subsample, attempt, sequence),
whether it passed, the requirements it missed and why, its latency, tokens and cost, its
whole text, and the messages it sent when they were not the prompt's (a repaired
attempt's). The record writer moves the whole texts and the messages to ``texts.jsonl``
and leaves a preview in the record (:mod:`sampling_core.runs.kept_texts`). An attempt
answered from the response cache says ``"cached": true``, one a prefix check cut short
``"stopped_early": true``; one a strategy's scorer scored keeps its ``"score"``, one whose
request asked for token log-probabilities (options ``logprobs``) keeps them in
``"logprobs"``. Attempts whose backend call failed are entries with ``"error"``. A token
count is ``null`` when unknown (an attempt cancelled in flight that did not stream).
An attempt whose answer is known says ``"answer": {"value": ..., "right": ...}``: what
maj@k counts (:mod:`sampling_core.runs.votes`).
Records written before these fields existed (no ``sampling_id``, no tokens per attempt)
are still read: every reader takes each field as optional.
"""

from __future__ import annotations

from typing import Any

from sampling_core.engine.results import SamplingResult
from sampling_core.errors import exception_text
from sampling_core.runs.votes import AnswerOf, answer_entry

__all__ = ["attempt_entries", "usage_entry"]


def attempt_entries(
    result: SamplingResult, answer_of: AnswerOf | None = None
) -> list[dict[str, Any]]:
    """One entry per completed attempt, then one per failed backend call, in position order
    (``answer_of``: how the run's strategy groups answers, when it votes)."""
    entries: list[dict[str, Any]] = []
    prompt = next((a.messages for a in result.attempts if a.attempt == 1), None)
    for a in result.attempts:
        usage = a.generation.usage
        entry: dict[str, Any] = {
            "subsample": a.subsample_index,
            "attempt": a.attempt,
            "sequence": a.sequence,
            "passed": a.passed,
            "latency_s": round(a.latency_s, 4),
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cost_usd": usage.cost_usd,
            "text": a.text,
        }
        answer = answer_entry(a, answer_of)
        if answer is not None:
            entry["answer"] = answer
        if a.generation.cached:
            entry["cached"] = True
        if a.stopped_early:
            entry["stopped_early"] = True
        if a.scored is not None:  # the strategy's scorer's
            entry["score"] = a.scored
        if a.generation.logprobs is not None:  # asked for (options logprobs)
            entry["logprobs"] = [
                {"token": t.token, "logprob": t.logprob, "top": [list(p) for p in t.top]}
                for t in a.generation.logprobs
            ]
        if a.attempt > 1 and a.messages != prompt:
            entry["messages"] = a.messages
        if not a.passed:
            entry["unmet"] = [
                v.requirement or "a requirement" for v in a.validations if not v.passed
            ]
            entry["failed"] = a.failure_reasons
        entries.append(entry)
    for e in result.errors:
        entries.append(
            {
                "subsample": e.subsample_index,
                "attempt": e.attempt,
                "passed": False,
                "error": f"{type(e.exception).__name__}: {exception_text(e.exception)}"[:300],
            }
        )
    return entries


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
