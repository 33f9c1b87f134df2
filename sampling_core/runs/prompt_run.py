"""One prompt of a batch run: the record a prompt ends in.

Every executor samples a prompt with :func:`run_prompt` and the
:class:`~sampling_core.runs.components.Components` that
:func:`~sampling_core.runs.components.build_components` makes from the effective config:
the local executor once in its own process, the Ray executor once in each worker. There is
no other way a batch run samples a prompt.
"""

from __future__ import annotations

import time
from typing import Any

from structlog.contextvars import bound_contextvars

from sampling_core.engine.results import SamplingResult
from sampling_core.errors import exception_text
from sampling_core.runs.components import Components, build_requirements, prompt_seed
from sampling_core.runs.dataset import PromptItem
from sampling_core.runs.outcome import attempt_entries, usage_entry
from sampling_core.runs.rows import count_samples
from sampling_core.runs.store import utc_now
from sampling_core.runs.votes import AnswerOf, count_votes, voted_answer

__all__ = ["error_outcome", "error_record", "outcome_fields", "run_prompt"]


async def run_prompt(parts: Components, item: PromptItem, session: int = 0) -> dict[str, Any]:
    """Sample one prompt; its record (``seq`` is 0 until the writer numbers it).

    An exception from the engine becomes an ``error`` record: a prompt always ends in one.
    """
    started_at = utc_now()
    t0 = time.perf_counter()
    record: dict[str, Any] = {
        "seq": 0,
        "key": item.key,
        "line": item.line,
        "content_hash": item.content_hash,
        "session": session,
    }
    try:
        own = build_requirements(item.requirements, parts.kinds) if item.requirements else []
        with bound_contextvars(prompt_key=item.key):  # on every log line of the prompt
            result = await _sample(parts, item, own)
    except Exception as exc:
        record.update(error_outcome(f"{type(exc).__name__}: {exception_text(exc)}"))
    else:
        record.update(outcome_fields(result, voted_answer(parts.strategy)))
    record["timings"] = {
        "started": started_at,
        "elapsed_s": round(time.perf_counter() - t0, 4),
    }
    return record


async def _sample(parts: Components, item: PromptItem, own: list[Any]) -> SamplingResult:
    """The prompt's ``sample()`` call, with the run's settings, its key and its line."""
    config = parts.config
    return await parts.sampler.sample(
        item.prompt,
        row=item.row,
        prompt_key=item.key,
        requirements=[*parts.requirements, *own],
        strategy=parts.strategy,
        loop_budget=config.budgets.loop_budget,
        concurrency_budget=config.budgets.concurrency_budget,
        seed=prompt_seed(config.seed, item.key),
        selection=config.selection,
        options=parts.options,
        early_exit=config.budgets.early_exit,
        early_stop=config.budgets.early_stop,
        launch=config.budgets.launch,
        stagger_s=config.budgets.stagger_s,
        format=config.format,
        ask_again=item.retry,
    )


def error_record(item: PromptItem, reason: str, session: int = 0) -> dict[str, Any]:
    """The record of a prompt that could not be sampled at all (``reason`` says why)."""
    return {
        "seq": 0,
        "key": item.key,
        "line": item.line,
        "content_hash": item.content_hash,
        "session": session,
        **error_outcome(reason),
        "timings": {"started": utc_now(), "elapsed_s": 0.0},
    }


def error_outcome(reason: str) -> dict[str, Any]:
    """The fields of an ``error`` record that made no attempt."""
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


def outcome_fields(result: SamplingResult, answer_of: AnswerOf | None = None) -> dict[str, Any]:
    """A record's status, reason, text, attempts summary and usage, from a result
    (``answer_of``: how the run's strategy groups answers, when it votes)."""
    failed_checks: list[str] = []
    if result.success:
        status, reason = "ok", None
    elif result.stop_reason == "error" or (not result.attempts and result.errors):
        status = "error"
        reason = str(result.errors[0]) if result.errors else "the sampling call ended in error"
    else:
        status = "failed"
        reasons = result.picked.failure_reasons if result.picked is not None else []
        if result.picked is not None:
            failed_checks = [
                v.requirement or "a requirement" for v in result.picked.validations if not v.passed
            ]
        reason = "; ".join(reasons) or f"stopped: {result.stop_reason}"
        if result.stop_reason == "stopped_by_plugin":
            reason = f"stopped by a plugin; {reason}"
    each = attempt_entries(result, answer_of)
    ran, passed = count_samples(each, result.loop_budget)
    samples: dict[str, Any] = {"ran": ran, "passed": passed}
    votes = count_votes(each, result.loop_budget)
    if votes is not None:
        samples["votes"] = [list(group) for group in votes]
    return {
        "sampling_id": result.sampling_id,
        "status": status,
        "reason": reason,
        "failed_requirements": failed_checks,
        "text": result.text,
        "attempts": {
            "used": result.iterations_used,
            "cancelled": result.cancelled,
            "not_started": result.not_started,
            "stopped_early": sum(1 for a in result.attempts if a.stopped_early),
            "passing": sum(1 for a in result.attempts if a.passed),
            "stop_reason": result.stop_reason,
            "loop_budget": result.loop_budget,
            "concurrency_budget": result.concurrency_budget,
            "samples": samples,
            "each": each,
        },
        "usage": usage_entry(result),
    }
