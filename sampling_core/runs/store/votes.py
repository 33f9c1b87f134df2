"""The answers of a prompt's samples, as a run keeps them for maj@k.

An attempt whose answer is known says ``"answer": {"value": ..., "right": ...}`` in its
record entry: the answer the first check that compares one compared
(``ValidationResult.answer``: the dataset-field checks give it) and that check's verdict;
else, when the run's strategy votes (``majority``), the strategy's normalised text and
whether the attempt passed. A generation a prefix check stopped early never said the
answer a check would compare (``{"value": null, "right": null}``: left out). A prompt's
samples are the subsamples pass@k counts, each its first passing attempt or else its last;
their answers make its vote profile (:mod:`sampling_core.runs.stats.majk`), which the record
keeps as ``attempts.samples.votes`` (``[[size, right], ...]``), counted before a long
attempt list is cut. Each sample's vote counts once, whatever the run's vote weighed
(:func:`vote_weight_of`: such a run's maj@k is labelled unweighted).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hook_specs.records import Attempt
from sampling_core.runs.stats.majk import Profile, profile_of, vote_profile
from sampling_core.runs.stats.passk import PassAtK
from sampling_core.strategies import MajorityVote, Strategy

__all__ = [
    "NOT_KNOWN",
    "AnswerOf",
    "answer_entry",
    "count_votes",
    "finished",
    "maj_caption",
    "maj_entries",
    "sample_votes",
    "vote_weight_of",
    "voted_answer",
]

AnswerOf = Callable[[str], str]
"""How a voting strategy groups answers (its ``normalize``)."""


def voted_answer(strategy: Strategy) -> AnswerOf | None:
    """How ``strategy`` groups answers when it votes (``MajorityVote.normalize``), else
    ``None``."""
    return strategy.normalize if isinstance(strategy, MajorityVote) else None


NOT_KNOWN = {"value": None, "right": None}
"""The answer of a generation a prefix check stopped early, when a check compares answers:
it never said the answer that check would have compared."""


def answer_entry(attempt: Attempt, answer_of: AnswerOf | None = None) -> dict[str, Any] | None:
    """``{"value", "right"}`` of an attempt: the answer the first check that compares one
    compared and its verdict; else, with ``answer_of``, that grouping of the text and
    whether the attempt passed; else ``None`` (no answer known).

    A generation stopped early never said the answer a check would compare: it has
    :data:`NOT_KNOWN` (the sample is left out of maj@k). Judged by whether it passed, its
    verdict is known (it failed: a prefix check failing is final), and it votes with its
    text as it was cut."""
    for verdict in attempt.validations:
        if verdict.answer is not None:
            if attempt.stopped_early:
                return dict(NOT_KNOWN)
            return {"value": verdict.answer, "right": verdict.passed}
    if answer_of is None:
        return None
    return {"value": answer_of(attempt.text), "right": attempt.passed}


def finished(passed: bool, last_attempt: int, loop_budget: int | None) -> bool:
    """Whether a subsample that made ``last_attempt`` attempts is a sample (pass@k's, and a
    vote in maj@k): it passed, or it spent its ``loop_budget`` (every one, when the budget
    is not known); else it was cut before it finished (a plugin's stop, a cancellation)
    and is no sample, as one that never started is not."""
    return passed or loop_budget is None or last_attempt >= loop_budget


def count_votes(each: Iterable[Any], loop_budget: int | None = None) -> Profile | None:
    """The vote profile of a prompt's attempt entries (as a record keeps them); ``None``
    when a sample's answer is not known (no check compared one and the strategy does not
    vote) or there is no sample. A subsample whose backend call failed without a pass is
    no sample, nor is one a rescore could not decide (``"not_known": true``, no pass), nor
    one whose answer was never said (stopped early: :data:`NOT_KNOWN`), nor, with
    ``loop_budget``, one cut before it passed or reached it (the samples pass@k counts:
    :func:`~sampling_core.runs.store.record.count_samples`)."""
    final: dict[int, dict[str, Any]] = {}
    left_out: set[int] = set()
    for entry in each:
        if not isinstance(entry, dict) or not isinstance(entry.get("subsample"), int):
            continue
        index = entry["subsample"]
        if entry.get("error") or entry.get("not_known") is True:
            left_out.add(index)
            continue
        if not isinstance(entry.get("passed"), bool):
            left_out.add(index)  # a verdict that is not known is no verdict
            continue
        kept = final.get(index)
        number = entry.get("attempt") if isinstance(entry.get("attempt"), int) else 0
        if kept is None or (
            not kept["passed"] and (entry["passed"] or number > (kept.get("attempt") or 0))
        ):
            final[index] = entry
    answers = []
    for index, entry in final.items():
        if index in left_out and not entry["passed"]:
            continue
        number = entry.get("attempt") if isinstance(entry.get("attempt"), int) else 0
        if not finished(entry["passed"], number, loop_budget):
            continue  # cut before it finished: no sample
        answer = entry.get("answer")
        if not isinstance(answer, dict) or "value" not in answer:
            return None
        if answer["value"] is None:
            continue  # stopped early: its answer is not known, the sample is left out
        if not isinstance(answer["value"], str):
            return None
        answers.append((answer["value"], answer.get("right") is True))
    return vote_profile(answers) or None


def sample_votes(record: dict[str, Any]) -> Profile | None:
    """The vote profile of a record: ``attempts.samples.votes`` when it has it, else
    :func:`count_votes` of its entries."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    samples = attempts.get("samples")
    if isinstance(samples, dict) and isinstance(samples.get("votes"), list):
        return profile_of(samples["votes"])
    budget = attempts.get("loop_budget")
    limit = budget if isinstance(budget, int) and not isinstance(budget, bool) else None
    return count_votes(attempts.get("each") or [], limit)


def vote_weight_of(config: Mapping[str, Any]) -> str | None:
    """What a run's vote weighed each answer by (its strategy's ``weight`` scorer, named by
    its kind and its options: ``mean_confidence``, ``python (function=mypkg.scores:f)``),
    or ``None`` when each answer counted once.

    maj@k counts each sample's answer once, as the vote it estimates is a count (the
    majority of k samples): for a run whose vote weighed answers it is not that vote's
    accuracy, and every surface labels it unweighted (:func:`maj_entries`,
    :func:`maj_caption`; ``compare``; MLflow's ``maj_at_<k>_unweighted``)."""
    strategy = config.get("strategy")
    weight = strategy.get("weight") if isinstance(strategy, Mapping) else None
    if weight is None or weight is False:
        return None
    if isinstance(weight, Mapping):
        named = weight.get("kind") or weight.get("name")
        if not named:
            return json.dumps(dict(weight), sort_keys=True, default=str)
        options = [f"{k}={v}" for k, v in sorted(weight.items()) if k not in ("kind", "name")]
        return f"{named} ({', '.join(options)})" if options else str(named)
    return str(weight)


def maj_entries(table: Iterable[PassAtK], weight: str | None) -> list[dict[str, Any]]:
    """A maj@k table as JSON-ready entries; with the run's vote ``weight``, each says it
    is ``"unweighted"`` and names the weight (``"run_vote_weight"``)."""
    entries: list[dict[str, Any]] = [dict(entry.as_dict()) for entry in table]
    if weight is not None:
        for entry in entries:
            entry.update(unweighted=True, run_vote_weight=weight)
    return entries


def maj_caption(weight: str | None) -> str:
    """The line that heads a run's maj@k (as text)."""
    if weight is None:
        return "maj@k (the majority answer of k samples is right, ties split; same intervals):"
    return (
        "maj@k, unweighted (the majority answer of k samples is right, each sample counted "
        f"once, ties split; same intervals); this run's vote weighed answers by {weight}, "
        "so maj@k is not its vote's accuracy:"
    )
