"""One record rescored: its kept attempts checked again, judged and picked as the engine would.

The attempts are fed, in the order they completed, to the engine's own
:class:`~sampling_core.engine.tally.Tally`, so that the pick (the first pass, the
``ordered`` one, or the strategy's pick when nothing passes) follows the rule a run
follows, and the record's fields are made by the same
:func:`~sampling_core.runs.store.record.result_fields` a run uses. What did not change
(tokens, cost, latency, timings, the ``sampling_id`` that joins ``events.jsonl`` and
``texts.jsonl``) is the source's.

An attempt's provenance is respected. A text cut short by early stop is only the start of
what the model was writing: when a new requirement's prefix check fails on it, that
requirement failed whatever followed, and the attempt fails with it unmet; otherwise
judging it would need the text that was never generated, so it is **not known**
(``"not_known": true`` on its entry, counted in ``attempts.not_known``): it fails for the
pick (a verdict ``(not known: cut before its end)`` is added), is never passed, and its
subsample is left out of pass@k and pass^k (``attempts.samples.not_known``).

So is an attempt a check cannot judge because the run did not keep what the check needs
besides the text: a check (or its prefix reader) that raises
:class:`~sampling_core.requirements.context.CannotDecide` (``min_confidence`` without the
tokens' log-probabilities, a check asking a model: a rescore calls none). Its verdict says
so (``(not known: the check needs ...)``); the attempt is not known unless a check that
could decide failed it.

What rescoring cannot know is counted, not guessed: when the new checks fail an attempt
that ended its subsample (it passed before) or a prompt the source stopped at its first
pass, the engine would have gone on and made attempts that never ran. Each rescored record
says how many in ``rescored.not_run`` (the attempts its subsamples had left in their
budget), and the report adds them up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hook_specs.errors import StopSampling
from hook_specs.records import (
    CachedGeneration,
    Generation,
    IterationInfo,
    Message,
    TokenLogprob,
    Usage,
    ValidationResult,
)
from sampling_core.backends.base import GenerationRequest
from sampling_core.engine.seeds import derive_seed
from sampling_core.engine.streaming import (
    Failed,
    Notes,
    Prefixes,
    call_notes,
    failing_readers,
    judge_whole,
    prefixes_in_force,
    readers_of,
    unmet_early,
)
from sampling_core.engine.tally import Tally
from sampling_core.requirements.checks import Requirement, validate_all
from sampling_core.requirements.context import CannotDecide, CheckContext
from sampling_core.requirements.prefix import PrefixReader
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.store.record import AttemptEntry, RunRecord, count_samples
from sampling_core.runs.store.record_fields import result_fields
from sampling_core.runs.store.votes import count_votes, voted_answer
from sampling_core.strategies import Strategy

__all__ = ["NOT_KNOWN", "NoModelInRescore", "Rescoring", "rescore_record"]

NOT_KNOWN = "(not known: cut before its end)"
"""The verdict a rescore adds to an attempt it cannot judge (its text was cut short)."""


class NoModelInRescore(CannotDecide, RuntimeError):
    """A check asked for a model call (``CheckContext.generate``) while rescoring: its
    attempt is not known."""


async def _no_model(request: GenerationRequest, backend: Any = None) -> Generation:
    raise NoModelInRescore(
        "rescoring calls no model: this check asks one (an LLM judge); run it with "
        "`samplehooks run` instead",
        "a model's reply (a rescore calls no model)",
    )


class _Undecided:
    """A prefix reader in a rescore: one that cannot decide (it raised
    :class:`~sampling_core.requirements.context.CannotDecide`) fails nothing; its
    requirement's position goes into ``undecided``."""

    __slots__ = ("_out", "_position", "_reader", "_undecided")

    def __init__(self, reader: PrefixReader, position: int, undecided: set[int]) -> None:
        self._reader, self._position, self._undecided = reader, position, undecided
        self._out = False

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        if self._out:
            return True
        try:
            return self._reader.feed(delta, logprobs)
        except CannotDecide:
            self._out = True
            self._undecided.add(self._position)
            return True

    def finished(self, generation: Generation) -> None:
        if not self._out:
            self._reader.finished(generation)


def _readers(
    prefixes: Prefixes, notes: Notes, undecided: set[int]
) -> list[tuple[int, PrefixReader]]:
    """The readers of one attempt (see :func:`~sampling_core.engine.streaming.readers_of`),
    each one that cannot decide noted in ``undecided``."""
    return [(i, _Undecided(r, i, undecided)) for i, r in readers_of(prefixes, notes)]


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


async def rescore_record(
    record: RunRecord,
    texts: Mapping[tuple[int, int], Mapping[str, Any]],
    item: PromptItem,
    own: Sequence[Requirement],
    how: Rescoring,
    seed: int | None,
) -> dict[str, Any]:
    """The record with its attempts checked against ``how.requirements`` plus the prompt's
    ``own``, as JSON data; ``texts``: the whole text (and messages) of each attempt;
    ``seed``: the prompt's seed (each attempt's is derived from it, as the engine did)."""
    attempts = record.attempts
    loop_budget = _int(attempts.get("loop_budget")) or how.loop_budget
    concurrency = _int(attempts.get("concurrency_budget")) or how.concurrency_budget
    sampling_id = record.sampling_id or ""
    prompt = _messages(item.prompt)
    requirements = [*how.requirements, *own]
    prefixes = prefixes_in_force(requirements, early_stop=True)
    # the readers judge the attempts as the engine did, in the order they completed, with
    # what they keep per call (min_confidence: a threshold calibrated from the first ones)
    notes, judging, judging_notes = call_notes(requirements, prefixes)
    tally = Tally(sampling_id, how.strategy, how.selection, how.early_exit)
    if attempts.get("stop_reason") == "stopped_by_plugin":
        tally.stop(StopSampling())
    not_known: set[tuple[int, int]] = set()
    for entry in record.completed():
        index, number = entry.subsample, entry.attempt
        kept = texts[(index, number)]
        text = kept["text"]
        messages: list[Message] = list(kept.get("messages") or prompt)
        info = IterationInfo(sampling_id, index, number, index * loop_budget + number)
        options = dict(how.options)
        if seed is not None:
            options["seed"] = derive_seed(seed, index, number)
        generation = _generation(entry, text)  # a check may read it (its logprobs)
        context = CheckContext(messages, item.row, info, options, _no_model, generation)
        undecided: set[int] = set()  # the checks that need what the run did not keep
        validations = validate_all(requirements, text, context, how.check_timeout, undecided)
        if not isinstance(validations, tuple):
            validations = await validations
        if undecided:  # named as not known, never as unmet
            validations = _not_known_named(validations, undecided)
        if not entry.provenance.whole:  # only the start of what the model was writing
            failed = _failing_prefix(prefixes, notes, generation, undecided)
            if failed:  # that requirement fails whatever followed
                validations = unmet_early(validations, failed, requirements)
            else:  # deciding needs the text that was never generated
                not_known.add((index, number))
                validations = (*validations, ValidationResult(False, NOT_KNOWN, None, NOT_KNOWN))
        else:
            if judging:  # whole: the readers judge it as the engine would have, read whole
                failed = judge_whole(_readers(judging, judging_notes, undecided), generation)
                if failed:
                    validations = unmet_early(validations, failed, requirements)
                    undecided.difference_update(position for position, _ in failed)
            if undecided and all(
                v.passed for i, v in enumerate(validations) if i not in undecided
            ):  # no check that could decide failed it
                not_known.add((index, number))
        tally.began()
        # the strategy is the run's: its scorer's scores are the ones the run kept
        tally.record(info, messages, generation, validations, entry.provenance, entry.score)
    result = tally.result(loop_budget, concurrency)
    fields = result_fields(result, voted_answer(how.strategy))
    each = fields["attempts"]["each"]
    for data in each:
        if (data["subsample"], data["attempt"]) in not_known:
            data["not_known"] = True
    n, c, u = count_undecided(each, loop_budget)
    stopped = _stopped_at_a_pass(record, loop_budget)
    u += len(_undecided_by_a_stop(stopped, each))
    samples: dict[str, Any] = {"ran": n, "passed": c, "not_known": u}
    votes = count_votes(each, loop_budget)
    if votes is not None:
        samples["votes"] = [list(group) for group in votes]
    errors = [e for e in attempts.get("each") or [] if isinstance(e, dict) and "error" in e]
    fields["attempts"].update(
        # what the run did not run stays the run's: a rescore starts and cancels nothing
        **{name: attempts[name] for name in _KEPT_COUNTS if name in attempts},
        not_known=len(not_known),
        samples=samples,
        each=[*each, *errors],
    )
    fields["usage"] = record.usage or fields["usage"]
    not_run = _not_run(fields["attempts"]["each"], result.success, how, loop_budget, concurrency)
    out = record.as_json()
    out.update(fields)
    out.update(
        sampling_id=record.sampling_id,
        session=1,
        rescored={
            "from_seq": record.seq,
            "not_run": not_run,
            **({"stopped_at_pass": sorted(stopped)} if stopped else {}),
        },
    )
    return out


_KEPT_COUNTS = ("cancelled", "cancelled_because", "not_started")
"""A record's counts of the subsamples its run cancelled (and why) or never started: the
source's in a rescored record."""


def _not_known_named(
    validations: tuple[ValidationResult, ...], undecided: set[int]
) -> tuple[ValidationResult, ...]:
    """``validations`` with each undecided one's requirement named ``"... (not known)"``:
    the record's unmet requirements and failure label never call it unmet."""
    return tuple(
        v.of(f"{v.requirement} (not known)") if i in undecided else v
        for i, v in enumerate(validations)
    )


def _failing_prefix(
    prefixes: Prefixes, notes: Notes, generation: Generation, undecided: set[int]
) -> Failed:
    """The prefix checks that fail the kept text of a cut attempt, read as one piece (with
    its tokens' log-probabilities when the record kept them; one that needs what the run
    did not keep fails nothing)."""
    if not prefixes:
        return ()
    readers = _readers(prefixes, notes, undecided)
    return failing_readers(readers, generation.text, tuple(generation.logprobs or ()))


def kept_logprobs(entry: AttemptEntry) -> tuple[TokenLogprob, ...] | None:
    """The token log-probabilities an attempt's entry kept, or ``None`` when it kept none
    (the run did not ask for them)."""
    if entry.logprobs is None:
        return None
    return tuple(
        TokenLogprob(
            str(p.get("token", "")),
            float(p.get("logprob", 0.0)),
            tuple((str(t[0]), float(t[1])) for t in p.get("top") or () if len(t) == 2),
        )
        for p in entry.logprobs
    )


def count_undecided(each: list[dict[str, Any]], loop_budget: int) -> tuple[int, int, int]:
    """``(n, c, u)`` of rescored entries (see
    :func:`~sampling_core.runs.store.record.count_samples`)."""
    entries = [e for e in map(AttemptEntry.read, each) if e is not None]
    return count_samples(entries, loop_budget)


def _stopped_at_a_pass(record: RunRecord, loop_budget: int) -> set[int]:
    """The subsamples that the run which generated ``record`` stopped at a pass before
    they spent their ``loop_budget``: read from its entries' verdicts, or, when ``record``
    is itself a rescore's (whose verdicts are not the ones the run stopped at), kept in its
    ``rescored`` block (``stopped_at_pass``), so a rescore of a rescore knows them too."""
    kept = (record.rescored or {}).get("stopped_at_pass")
    if isinstance(kept, list):
        return {i for i in kept if isinstance(i, int) and not isinstance(i, bool)}
    return {e.subsample for e in record.completed() if e.passed and e.attempt < loop_budget}


def _undecided_by_a_stop(stopped: set[int], each: list[dict[str, Any]]) -> set[int]:
    """Of the subsamples the run ``stopped`` at a pass, those whose outcome the rescore
    cannot know: none of their rescored entries ``each`` passes (the new checks fail the
    pass the run stopped at, and the attempts it would have gone on to make never ran) or
    is already not known.

    They are samples not known (pass@k's ``u``), not subsamples cut before they finished
    (those the run cut, which are no samples: :func:`~sampling_core.runs.store.votes.finished`)."""
    undecided = set(stopped)
    for entry in map(AttemptEntry.read, each):
        if entry is not None and (entry.passed or entry.not_known):
            undecided.discard(entry.subsample)
    return undecided


def _messages(prompt: str | list[dict[str, Any]]) -> list[Message]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


def _generation(entry: AttemptEntry, text: str) -> Generation:
    """The attempt's generation as the record kept it (its tokens, cost and latency)."""
    kind = CachedGeneration if entry.provenance.cached else Generation
    return kind(
        text=text,
        # a count the record does not hold stays unknown, never 0
        usage=Usage(entry.input_tokens, entry.output_tokens, entry.cost_usd),
        finish_reason=entry.finish_reason,
        model=entry.model,
        latency_s=entry.latency_s or 0.0,
        answered_by=entry.provenance.answered_by,
        logprobs=kept_logprobs(entry),
    )  # (a cached attempt's first cost is in the record's usage.cached, kept as it is)


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
