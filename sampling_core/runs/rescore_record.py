"""One record rescored: its kept attempts checked again, judged and picked as the engine would.

The attempts are fed, in the order they completed, to the engine's own
:class:`~sampling_core.engine.tally.Tally`, so that the pick (the first pass, the
``ordered`` one, or the strategy's pick when nothing passes) follows the rule a run
follows, and the record's fields are made by the same
:func:`~sampling_core.runs.prompt_run.outcome_fields` a run uses. What did not change
(tokens, cost, latency, timings, the ``sampling_id`` that joins ``events.jsonl`` and
``texts.jsonl``) is the source's.

What rescoring cannot know is counted, not guessed: when the new checks fail an attempt
that ended its subsample (it passed before) or a prompt the source stopped at its first
pass, the engine would have gone on and made attempts that never ran. Each rescored record
says how many in ``rescored.not_run`` (the attempts its subsamples had left in their
budget), and the report adds them up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hook_specs.records import (
    CachedGeneration,
    Generation,
    IterationInfo,
    Message,
    TokenLogprob,
    Usage,
)
from sampling_core.backends.base import GenerationRequest
from sampling_core.backends.transport import RetryPolicy
from sampling_core.engine.budgets import BudgetCaps
from sampling_core.engine.seeds import derive_seed
from sampling_core.engine.settings import CallSettings
from sampling_core.engine.streaming import call_notes, judge_whole, readers_of, unmet_early
from sampling_core.engine.tally import Tally
from sampling_core.requirements.checks import Requirement, validate_all
from sampling_core.requirements.context import CheckContext
from sampling_core.runs.dataset import PromptItem
from sampling_core.runs.outcome import attempt_entries
from sampling_core.runs.prompt_run import outcome_fields
from sampling_core.runs.votes import voted_answer
from sampling_core.strategies import Strategy

__all__ = ["NoModelInRescore", "Rescoring", "rescore_record"]


class NoModelInRescore(RuntimeError):
    """A check asked for a model call (``CheckContext.generate``) while rescoring."""


async def _no_model(request: GenerationRequest, backend: Any = None) -> Generation:
    raise NoModelInRescore(
        "rescoring calls no model: this check asks one (an LLM judge); run it with "
        "`samplehooks run` instead"
    )


@dataclass(frozen=True, slots=True)
class Rescoring:
    """What every record of one rescore is checked with."""

    requirements: Sequence[Requirement]
    strategy: Strategy
    selection: str
    early_exit: bool
    loop_budget: int
    concurrency_budget: int
    options: Mapping[str, Any]
    check_timeout: float | None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def completed_entries(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's completed attempts (not its backend errors), in completion order."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    each = [e for e in attempts.get("each") or [] if isinstance(e, dict)]
    done = [
        e
        for e in each
        if "error" not in e and _int(e.get("subsample")) is not None and _int(e.get("attempt"))
    ]
    return sorted(done, key=lambda e: _int(e.get("sequence")) or 0)


async def rescore_record(
    record: dict[str, Any],
    texts: Mapping[tuple[int, int], Mapping[str, Any]],
    item: PromptItem,
    own: Sequence[Requirement],
    how: Rescoring,
    seed: int | None,
) -> dict[str, Any]:
    """The record with its attempts checked against ``how.requirements`` plus the prompt's
    ``own``; ``texts``: the whole text (and messages) of each attempt; ``seed``: the
    prompt's seed (each attempt's is derived from it, as the engine did)."""
    attempts: dict[str, Any] = record["attempts"]
    loop_budget = _int(attempts.get("loop_budget")) or how.loop_budget
    concurrency = _int(attempts.get("concurrency_budget")) or how.concurrency_budget
    sampling_id = str(record.get("sampling_id") or "")
    prompt = _messages(item.prompt)
    requirements = [*how.requirements, *own]
    tally = Tally(sampling_id, how.strategy, how.selection, how.early_exit)
    tally.stopped = attempts.get("stop_reason") == "stopped_by_plugin"
    # the readers judge whole attempts as the engine does, in the order they completed
    # (a threshold calibrated per call from the first ones: min_confidence)
    _, judging, notes = call_notes(requirements, ())
    for entry in completed_entries(record):
        index, number = entry["subsample"], entry["attempt"]
        kept = texts[(index, number)]
        messages: list[Message] = list(kept.get("messages") or prompt)
        info = IterationInfo(sampling_id, index, number, index * loop_budget + number)
        options = dict(how.options)
        if seed is not None:
            options["seed"] = derive_seed(seed, index, number)
        generation = _generation(entry, kept["text"])  # a check may read it (its logprobs)
        context = CheckContext(messages, item.row, info, options, _no_model, generation)
        validations = validate_all(requirements, kept["text"], context, how.check_timeout)
        if not isinstance(validations, tuple):
            validations = await validations
        if judging and entry.get("stopped_early") is not True:
            failed = judge_whole(readers_of(judging, notes), generation)
            if failed:
                validations = unmet_early(validations, failed, requirements)
        # the strategy is the run's: its scorer's scores are the ones the run kept
        scored = _score(entry.get("score"))
        tally.record(info, messages, generation, validations, scored)
    result = tally.result(_settings(sampling_id, how, loop_budget, concurrency), [])
    answer_of = voted_answer(how.strategy)
    fields = outcome_fields(result, answer_of)
    errors = [e for e in attempts.get("each") or [] if isinstance(e, dict) and "error" in e]
    fields["attempts"].update(
        cancelled=attempts.get("cancelled", 0),
        each=[*attempt_entries(result, answer_of), *errors],
    )
    fields["usage"] = record.get("usage", fields["usage"])
    not_run = _not_run(fields["attempts"]["each"], result.success, how, loop_budget, concurrency)
    return {
        **record,
        **fields,
        "sampling_id": record.get("sampling_id"),
        "session": 1,
        "rescored": {"from_seq": record.get("seq"), "not_run": not_run},
    }


def _score(value: Any) -> float | None:
    """A kept score (``None`` when the entry has none, or not a finite number)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _messages(prompt: str | list[dict[str, Any]]) -> list[Message]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def _generation(entry: Mapping[str, Any], text: str) -> Generation:
    """The attempt's generation as the record kept it (its tokens, cost and latency)."""
    latency = entry.get("latency_s")
    kind = CachedGeneration if entry.get("cached") is True else Generation
    return kind(
        text=text,
        usage=Usage(  # a count the record does not hold stays unknown, never 0
            _int(entry.get("input_tokens")),
            _int(entry.get("output_tokens")),
            entry.get("cost_usd") if isinstance(entry.get("cost_usd"), int | float) else None,
        ),
        latency_s=float(latency) if isinstance(latency, int | float) else 0.0,
        logprobs=kept_logprobs(entry.get("logprobs")),
    )  # (a cached attempt's first cost is in the record's usage.cached, kept as it is)


def kept_logprobs(kept: Any) -> tuple[TokenLogprob, ...] | None:
    """The token log-probabilities a record's entry kept (``"logprobs"``: ``{"token",
    "logprob", "top"}`` each), or ``None`` when it kept none (the run did not ask for them)."""
    if not isinstance(kept, list):
        return None
    out = []
    for token in kept:
        if not isinstance(token, dict) or not isinstance(token.get("logprob"), int | float):
            return None  # not as a run writes them: not known
        top = token.get("top") if isinstance(token.get("top"), list) else []
        pairs = tuple((str(p[0]), float(p[1])) for p in top if isinstance(p, list) and len(p) == 2)
        out.append(TokenLogprob(str(token.get("token", "")), float(token["logprob"]), pairs))
    return tuple(out)


def _settings(sampling_id: str, how: Rescoring, loop: int, concurrency: int) -> CallSettings:
    """The settings a :class:`Tally` reads to make the result (no backend: none is called)."""
    return CallSettings(
        sampling_id=sampling_id,
        backend=None,  # type: ignore[arg-type]
        messages=[],
        requirements=tuple(how.requirements),
        strategy=how.strategy,
        loop_budget=loop,
        concurrency_budget=concurrency,
        selection=how.selection,
        seed=None,
        options=dict(how.options),
        format=None,
        retry=RetryPolicy(),
        attempt_timeout=None,
        caps=BudgetCaps(loop, concurrency, loop * concurrency),
        early_exit=how.early_exit,
    )


def _not_run(
    each: list[dict[str, Any]], success: bool, how: Rescoring, loop: int, concurrency: int
) -> int:
    """The attempts the engine would have gone on to make under the new checks that the
    source never ran (0 when the new verdicts end where the source ended)."""
    stops_at_first_pass = how.early_exit and not how.strategy.runs_whole_budget
    if success and stops_at_first_pass:
        return 0  # the new pick completed no later than what the source ran
    last: dict[int, tuple[int, bool]] = {}
    ended_by_error: set[int] = set()
    for entry in each:
        index, number = _int(entry.get("subsample")), _int(entry.get("attempt"))
        if index is None or number is None:
            continue
        if "error" in entry:
            ended_by_error.add(index)
        elif number >= last.get(index, (0, False))[0]:
            last[index] = (number, bool(entry.get("passed")))
    missing = 0
    for index in range(concurrency):
        if index in ended_by_error:
            continue
        number, passed = last.get(index, (0, False))
        if not passed:
            missing += max(loop - number, 0)
    return missing
