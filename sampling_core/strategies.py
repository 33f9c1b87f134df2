"""Strategies: how a failed attempt is repaired, and which attempt is picked.

The engine asks a strategy two things. ``repair(prompt, failures)`` builds the messages of
a subsample's next attempt from the original prompt and that subsample's last ``k``
failures (oldest first; ``k = keep_failures`` bounds the repair context).
``pick(attempts)`` chooses among completed attempts, ordered by (subsample_index, attempt),
when the loop did not end on a winner: it is given at least one attempt and returns one of
them (the very object); a call with no completed attempt picks nothing and never asks.
Strategies with ``runs_whole_budget`` do not stop at the first pass: every subsample runs
until it passes or spends its ``loop_budget``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from hook_specs.records import Attempt, Message
from sampling_core.voting import leader_stays, settled, standing

__all__ = [
    "BestOfN",
    "MajorityVote",
    "NORMALIZERS",
    "MultiTurn",
    "RejectionSampling",
    "RepairTemplate",
    "Strategy",
    "STRATEGIES_BY_NAME",
]


class Strategy:
    """Base class: retries the prompt unchanged and picks the best-scoring attempt."""

    runs_whole_budget: ClassVar[bool] = False
    scorer: Callable[..., Any] | None = None
    """A scorer (``scorer(text)`` or ``scorer(text, context)`` returning a number): when
    set, the engine scores every completed attempt (``Attempt.scored``)."""

    def __init__(self, *, keep_failures: int = 3) -> None:
        if (
            isinstance(keep_failures, bool)
            or not isinstance(keep_failures, int)
            or (keep_failures < 1)
        ):
            raise ValueError(f"keep_failures must be an int >= 1, got {keep_failures!r}")
        self.keep_failures = keep_failures

    @property
    def name(self) -> str:
        """The strategy's name in payloads, traces and results."""
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}(keep_failures={self.keep_failures})"

    @property
    def decides_early(self) -> bool:
        """Whether :meth:`decided` may end a call that runs the whole budget early."""
        return False

    def decided(self, attempts: Sequence[Attempt], open_subsamples: Sequence[int]) -> bool:
        """Whether the pick over ``attempts`` is settled although the subsamples
        ``open_subsamples`` (running or not started) may still answer: the call then ends."""
        return False

    def repair(self, prompt: list[Message], failures: Sequence[Attempt]) -> list[Message]:
        """The messages for a subsample's next attempt."""
        return prompt

    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        """Choose among completed attempts (at least one): a passing one first, then the
        best score. Ties go to the first in (subsample_index, attempt) order.

        An override returns one of ``attempts`` (the very object, not a copy); anything else
        (``None`` too) is a ``TypeError`` naming the strategy, and an exception it raises
        ends the call as a :class:`~sampling_core.errors.StrategyError` naming it.
        """
        # What max(attempts, key=(passed, score)) does (it keeps the first of equals), as a
        # loop: no call of a key function per attempt.
        best: Attempt | None = None
        best_key: tuple[bool, float] = (False, 0.0)
        for attempt in attempts:
            key = (attempt.passed, attempt.score)
            if best is None or key > best_key:
                best, best_key = attempt, key
        if best is None:
            raise ValueError("pick() needs at least one attempt")  # as max() did
        return best


class RejectionSampling(Strategy):
    """Sample again with the same prompt until an answer passes."""


def _unique_reasons(failures: Sequence[Attempt]) -> list[str]:
    seen: dict[str, None] = {}
    for failure in failures:
        for reason in failure.failure_reasons:
            seen.setdefault(reason, None)
    return list(seen)


class RepairTemplate(Strategy):
    """Append why the last failures failed to the instruction, then ask again.

    ``template`` is formatted with ``reasons``: one ``- reason`` line per distinct reason
    (a check without a reason contributes its requirement's description).
    """

    DEFAULT_TEMPLATE: ClassVar[str] = (
        "\n\nA previous answer was rejected for these reasons:\n{reasons}\n"
        "Write a new answer that satisfies every requirement."
    )

    def __init__(self, template: str | None = None, *, keep_failures: int = 3) -> None:
        super().__init__(keep_failures=keep_failures)
        self.template = template or self.DEFAULT_TEMPLATE
        if "{reasons}" not in self.template:
            raise ValueError("RepairTemplate(template=...) must contain the placeholder {reasons}")

    def repair(self, prompt: list[Message], failures: Sequence[Attempt]) -> list[Message]:
        """The prompt with the failure reasons appended to its last user message."""
        reasons = "\n".join(f"- {r}" for r in _unique_reasons(failures))
        note = self.template.format(reasons=reasons)
        messages = list(prompt)
        for i in range(len(messages) - 1, -1, -1):
            if messages[i].get("role") == "user":
                messages[i] = {**messages[i], "content": f"{messages[i].get('content', '')}{note}"}
                return messages
        messages.append({"role": "user", "content": note.strip()})
        return messages


class MultiTurn(Strategy):
    """Continue the conversation: the rejected answer, then a user turn with the feedback.

    When nothing passes, the deepest turn is picked (highest attempt; ties: lowest subsample).
    """

    DEFAULT_FEEDBACK: ClassVar[str] = (
        "That answer does not meet these requirements:\n{reasons}\nPlease answer again."
    )

    def __init__(self, feedback: str | None = None, *, keep_failures: int = 3) -> None:
        super().__init__(keep_failures=keep_failures)
        self.feedback = feedback or self.DEFAULT_FEEDBACK
        if "{reasons}" not in self.feedback:
            raise ValueError("MultiTurn(feedback=...) must contain the placeholder {reasons}")

    def repair(self, prompt: list[Message], failures: Sequence[Attempt]) -> list[Message]:
        """The prompt, then an (answer, feedback) pair per kept failure."""
        messages = list(prompt)
        for failure in failures:
            reasons = "\n".join(f"- {r}" for r in failure.failure_reasons)
            messages.append({"role": "assistant", "content": failure.text})
            messages.append({"role": "user", "content": self.feedback.format(reasons=reasons)})
        return messages

    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        """A passing attempt if any, else the deepest turn."""
        passing = [a for a in attempts if a.passed]
        if passing:
            return passing[0]
        return max(attempts, key=lambda a: (a.attempt, -a.subsample_index))


class BestOfN(Strategy):
    """Run the whole budget and pick the best-scoring attempt (passing ones first).

    The score is ``scorer``'s when given (see :mod:`sampling_core.requirements.scorers`:
    mean token confidence, an LLM judge, a Python function), else the checks' mean.
    """

    runs_whole_budget: ClassVar[bool] = True

    def __init__(self, scorer: Callable[..., Any] | None = None, *, keep_failures: int = 3) -> None:
        super().__init__(keep_failures=keep_failures)
        if scorer is not None and not callable(scorer):
            raise TypeError(f"BestOfN(scorer=...) must be callable, not {scorer!r}")
        self.scorer = scorer


def normalize_answer(text: str) -> str:
    """Lower-case, trim, collapse white space, and drop trailing punctuation."""
    return re.sub(r"\s+", " ", text.strip().lower()).rstrip(".!? ")


_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def last_number(text: str) -> str:
    """The last number in the text (``"The answer is 12."`` -> ``"12"``), else the text as
    :func:`normalize_answer` gives it."""
    found = _NUMBER.findall(text.replace(",", ""))
    return found[-1] if found else normalize_answer(text)


NORMALIZERS: dict[str, Callable[[str], str]] = {
    "text": normalize_answer,
    "last_number": last_number,
}
"""How a vote compares answers, by the names configs use (``normalize: last_number``)."""


class MajorityVote(Strategy):
    """Pick the most common answer (self-consistency); with ``consensus``, stop once it is
    settled.

    ``weight`` (a scorer, e.g. mean token confidence) makes each answer count its score
    instead of 1 (DeepConf's confidence-weighted vote); it cannot be combined with
    ``consensus``.

    Answers are compared after ``normalize`` (default: :func:`normalize_answer`; a name of
    :data:`NORMALIZERS` is accepted, e.g. ``"last_number"``). The vote
    is over passing attempts when there are any, else over all completed attempts; a tie
    goes to the answer seen first in (subsample_index, attempt) order.

    ``consensus=None`` (the default) runs the whole budget. ``consensus=1.0`` ends the call
    as soon as no answer of the subsamples still running or not started can change the
    pick; a value in (0, 1) ends it once the posterior probability that the leader stays
    the pick reaches it (:mod:`sampling_core.voting` states the model). Running subsamples
    are then cancelled and the others never start.
    """

    runs_whole_budget: ClassVar[bool] = True

    def __init__(
        self,
        normalize: Callable[[str], str] | str = normalize_answer,
        *,
        consensus: float | None = None,
        weight: Callable[..., Any] | None = None,
        keep_failures: int = 3,
    ) -> None:
        super().__init__(keep_failures=keep_failures)
        if weight is not None and not callable(weight):
            raise TypeError(f"MajorityVote(weight=...) must be a scorer (callable), not {weight!r}")
        if weight is not None and consensus is not None:
            raise ValueError(
                "MajorityVote: consensus counts votes, so it cannot be combined with weight "
                "(a weighted vote runs the whole budget); choose one"
            )
        self.scorer = weight
        if consensus is not None and (
            isinstance(consensus, bool)
            or not isinstance(consensus, int | float)
            or not 0.0 < consensus <= 1.0
        ):
            raise ValueError(
                f"MajorityVote(consensus=...) must be None or a number in (0, 1], not {consensus!r}"
            )
        if isinstance(normalize, str):
            if normalize not in NORMALIZERS:
                raise ValueError(
                    f"MajorityVote(normalize=...): {normalize!r} is not one of "
                    f"{', '.join(map(repr, NORMALIZERS))} (or give a function)"
                )
            normalize = NORMALIZERS[normalize]
        self.normalize = normalize
        self.consensus = None if consensus is None else float(consensus)

    def __repr__(self) -> str:
        return (
            f"{self.name}(consensus={self.consensus}, weighted={self.scorer is not None}, "
            f"keep_failures={self.keep_failures})"
        )

    @property
    def decides_early(self) -> bool:
        """Whether the vote may end the call before the whole budget is spent."""
        return self.consensus is not None

    def decided(self, attempts: Sequence[Attempt], open_subsamples: Sequence[int]) -> bool:
        """Whether the vote over ``attempts`` is settled while the subsamples
        ``open_subsamples`` may still vote once each (see :mod:`sampling_core.voting`)."""
        if self.consensus is None:
            return False
        passing = [a for a in attempts if a.passed]
        if not passing:
            return False  # a first pass would replace the whole pool
        votes = standing([(self.normalize(a.text), a.subsample_index) for a in passing])
        if settled(votes, open_subsamples):
            return True
        if self.consensus >= 1.0:
            return False
        leader = votes.leader()
        ranked = sorted(votes.order, key=lambda a: (-votes.counts[a], votes.first[a]))
        lead = int(votes.counts[leader])
        rival = ranked[1] if len(ranked) > 1 else None
        runner_up = int(votes.counts[rival]) if rival is not None else 0
        rival_first = votes.first[rival] if rival is not None else len(attempts) + 1
        earliest = min(rival_first, *open_subsamples)
        wins_tie = votes.first[leader] < earliest
        chance = leader_stays(lead, runner_up, len(open_subsamples), wins_tie)
        return chance >= self.consensus

    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        """The first attempt whose normalised answer is the most common (with ``weight``:
        whose answers' scores add up to the most)."""
        pool = [a for a in attempts if a.passed] or list(attempts)
        keys = [self.normalize(a.text) for a in pool]
        counts: Counter[str] | dict[str, float]
        if self.scorer is None:
            counts = Counter(keys)
        else:
            counts = {}
            for attempt, key in zip(pool, keys, strict=True):
                counts[key] = counts.get(key, 0.0) + (attempt.scored or 0.0)
        best = max(counts.values())
        return next(a for a, key in zip(pool, keys, strict=True) if counts[key] == best)


STRATEGIES_BY_NAME: dict[str, type[Strategy]] = {
    "rejection": RejectionSampling,
    "repair": RepairTemplate,
    "multiturn": MultiTurn,
    "best_of_n": BestOfN,
    "majority": MajorityVote,
}
"""The strategies by the names configs and the command line use."""
