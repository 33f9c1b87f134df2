"""What a record keeps of each attempt of a prompt, from a ``SamplingResult``.

Every completed attempt becomes one entry: where it ran (subsample, attempt, sequence),
whether it passed, the requirements it missed and why, its latency, tokens and cost, and
the start of its text. Attempts whose backend call failed are entries with ``"error"``.
Records written before these fields existed (no ``sampling_id``, no tokens per attempt)
are still read: every reader takes each field as optional.
"""

from __future__ import annotations

from typing import Any

from sampling_core.engine.results import SamplingResult
from sampling_core.errors import exception_text

__all__ = ["TEXT_KEPT", "attempt_entries", "usage_entry"]

TEXT_KEPT = 400
"""The characters of each attempt's text a record keeps (the picked text is kept whole)."""


def attempt_entries(result: SamplingResult) -> list[dict[str, Any]]:
    """One entry per completed attempt, then one per failed backend call, in position order."""
    entries: list[dict[str, Any]] = []
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
            "text": a.text[:TEXT_KEPT],
        }
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
    """The call's totals: tokens, cost (``None`` when unknown) and summed backend latency."""
    return {
        "input_tokens": result.usage.input_tokens,
        "output_tokens": result.usage.output_tokens,
        "cost_usd": result.usage.cost_usd,
        "latency_s": round(sum(a.latency_s for a in result.attempts), 4),
    }
