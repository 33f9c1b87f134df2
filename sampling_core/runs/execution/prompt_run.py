"""One prompt of a batch run: the record a prompt ends in.

Every executor samples a prompt with :func:`run_prompt` and the
:class:`~sampling_core.runs.config.components.Components` that
:func:`~sampling_core.runs.config.components.build_components` makes from the effective config:
the local executor once in its own process, the Ray executor once in each worker. There is
no other way a batch run samples a prompt.
"""

from __future__ import annotations

import time
from typing import Any

from structlog.contextvars import bound_contextvars

from sampling_core.engine.results import SamplingResult, error_label
from sampling_core.runs.config.components import Components, build_requirements, prompt_seed
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.store.record import RunRecord
from sampling_core.runs.store.record_fields import error_fields, result_fields
from sampling_core.runs.store.store import utc_now
from sampling_core.runs.store.votes import voted_answer

__all__ = ["error_record", "run_prompt"]


async def run_prompt(parts: Components, item: PromptItem, session: int = 0) -> dict[str, Any]:
    """Sample one prompt; its record (``seq`` is 0 until the writer numbers it).

    An exception from the engine becomes an ``error`` record: a prompt always ends in one.
    """
    started_at = utc_now()
    t0 = time.perf_counter()
    try:
        own = build_requirements(item.requirements, parts.kinds) if item.requirements else []
        with bound_contextvars(prompt_key=item.key):  # on every log line of the prompt
            result = await _sample(parts, item, own)
    except Exception as exc:
        fields = error_fields(error_label(exc))
    else:
        fields = result_fields(result, voted_answer(parts.strategy))
    timings = {"started": started_at, "elapsed_s": round(time.perf_counter() - t0, 4)}
    return _record(item, session, fields, timings)


def _record(
    item: PromptItem, session: int, fields: dict[str, Any], timings: dict[str, Any]
) -> dict[str, Any]:
    """The record of ``item`` with its outcome's ``fields``, as JSON data."""
    record = RunRecord(
        key=item.key,
        status=fields["status"],
        line=item.line,
        content_hash=item.content_hash,
        session=session,
        sampling_id=fields.get("sampling_id"),
        reason=fields["reason"],
        failed_requirements=fields.get("failed_requirements", []),
        text=fields["text"],
        attempts=fields["attempts"],
        usage=fields["usage"],
        timings=timings,
    )
    return record.as_json()


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
        seed=prompt_seed(config.seed, item.key, item.retry),
        selection=config.selection,
        options=parts.options,
        early_exit=config.budgets.early_exit,
        early_stop=config.budgets.early_stop,
        launch=config.budgets.launch,
        stagger_s=config.budgets.stagger_s,
        format=config.format,
        ask_again=item.retry > 0,
    )


def error_record(item: PromptItem, reason: str, session: int = 0) -> dict[str, Any]:
    """The record of a prompt that could not be sampled at all (``reason`` says why)."""
    return _record(item, session, error_fields(reason), {"started": utc_now(), "elapsed_s": 0.0})
