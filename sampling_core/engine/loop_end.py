"""The fields of ``sampling_loop_end``: what a call's tally and result say at its end.

Built only when a plugin implements the hook (the loop asks for them then, and only then).
"""

from __future__ import annotations

import time
from operator import attrgetter
from typing import Any

from sampling_core.engine.results import SamplingResult, error_label
from sampling_core.engine.settings import CallSettings
from sampling_core.engine.tally import Tally

__all__ = ["loop_end_fields"]

_by_position = attrgetter("subsample_index", "attempt")


def loop_end_fields(
    tally: Tally, s: CallSettings, result: SamplingResult | None, exc: BaseException | None
) -> dict[str, Any]:
    """The fields of ``sampling_loop_end`` (``result`` is ``None`` on the error path, where
    ``exc`` ended the call; the failure label is then ``exc``'s, made here, on the thread
    that raised it)."""
    if tally.flights or tally.cut_short:
        tally.settle_cancelled(s.backend)
    if result is not None:
        attempts = list(result.attempts)  # the payload's own list (the result is the user's)
        picked = result.picked.sequence if result.picked is not None else None
        failure_reason = result.failure_reason
    else:
        attempts = sorted(tally.attempts, key=_by_position)
        picked = None
        failure_reason = error_label(exc) if exc is not None else None
    return {
        "success": result.success if result else False,
        "stop_reason": result.stop_reason if result else "error",
        "iterations_used": len(tally.attempts),
        "cancelled": tally.in_flight,
        "not_started": tally.not_started,
        "text": result.text if result else None,
        "usage": result.usage if result else tally.usage,
        "cancelled_usage": tally.cancelled_spent,
        "loop_budget": s.loop_budget,
        "concurrency_budget": s.concurrency_budget,
        "elapsed_s": result.elapsed_s if result else time.perf_counter() - tally.started,
        "error_count": len(tally.errors),
        "exception": exc,
        "attempts": attempts,
        "picked": picked,
        "failure_reason": failure_reason,
    }
