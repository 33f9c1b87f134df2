"""One prompt of a batch run: the engine objects a run uses, and the record a prompt ends in.

Every executor runs a prompt through :func:`run_prompt` with the :class:`RunComponents`
that :func:`build_components` makes from the effective config: the local executor once in
its own process, the Ray executor once in each worker. There is no other way a batch run
samples a prompt.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sampling_core.plugins import PluginSpec
from sampling_core.results import SamplingResult
from sampling_core.runs.components import (
    build_requirements,
    build_sampler,
    build_strategy,
    prompt_seed,
)
from sampling_core.runs.config import RunConfig
from sampling_core.runs.dataset import PromptItem
from sampling_core.runs.store import utc_now
from sampling_core.sampler import Sampler

__all__ = ["RunComponents", "build_components", "error_record", "run_prompt"]


@dataclass(slots=True)
class RunComponents:
    """What every prompt of a run is sampled with: one sampler and the config's objects."""

    config: RunConfig
    sampler: Sampler
    requirements: list[Any]
    strategy: Any
    options: dict[str, Any]


def build_components(
    config: RunConfig,
    backend: Any,
    events_file: Path,
    extra_plugins: Iterable[PluginSpec] = (),
    *,
    total: int = 0,
    recorder: Any = None,
) -> RunComponents:
    """The sampler (with the configured plugins and ``extra_plugins``), strategy,
    requirements and options of a run.

    ``recorder`` replaces the ``recorder`` plugin a config names (a Ray worker passes one
    that hands its lines to the driver instead of writing ``events_file``).
    """
    sampler = build_sampler(
        backend, config.plugins, events_file, extra_plugins, total=total, recorder=recorder
    )
    return RunComponents(
        config=config,
        sampler=sampler,
        requirements=build_requirements(config.requirements),
        strategy=build_strategy(config.strategy),
        options=config.options.as_options(),
    )


async def run_prompt(parts: RunComponents, item: PromptItem, session: int = 0) -> dict[str, Any]:
    """Sample one prompt; its record (``seq`` is 0 until the writer numbers it).

    An exception from the engine becomes an ``error`` record: a prompt always ends in one.
    """
    config = parts.config
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
        result = await parts.sampler.sample(
            item.prompt,
            requirements=[*parts.requirements, *build_requirements(item.requirements)],
            strategy=parts.strategy,
            loop_budget=config.budgets.loop_budget,
            concurrency_budget=config.budgets.concurrency_budget,
            seed=prompt_seed(config.seed, item.key),
            selection=config.selection,
            options=parts.options,
        )
    except Exception as exc:
        record.update(error_outcome(f"{type(exc).__name__}: {exc}"))
    else:
        record.update(_outcome(result))
    record["timings"] = {
        "started": started_at,
        "elapsed_s": round(time.perf_counter() - t0, 4),
    }
    return record


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
        "attempts": {"used": 0, "cancelled": 0, "passing": 0, "stop_reason": "error"},
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }


def _outcome(result: SamplingResult) -> dict[str, Any]:
    """A record's status, reason, text, attempts summary and usage, from a result."""
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
    return {
        "status": status,
        "reason": reason,
        "failed_requirements": failed_checks,
        "text": result.text,
        "attempts": {
            "used": result.iterations_used,
            "cancelled": result.cancelled,
            "passing": sum(1 for a in result.attempts if a.passed),
            "stop_reason": result.stop_reason,
            "each": [
                {
                    "subsample": a.subsample_index,
                    "attempt": a.attempt,
                    "passed": a.passed,
                    "latency_s": round(a.latency_s, 4),
                    **({"failed": a.failure_reasons} if not a.passed else {}),
                }
                for a in result.attempts
            ],
        },
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        },
    }
