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
from typing import ClassVar

from hook_specs.records import Attempt, Message

__all__ = [
    "BestOfN",
    "MajorityVote",
    "MultiTurn",
    "RejectionSampling",
    "RepairTemplate",
    "Strategy",
    "STRATEGIES_BY_NAME",
]


class Strategy:
    """Base class: retries the prompt unchanged and picks the best-scoring attempt."""

    runs_whole_budget: ClassVar[bool] = False

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
        return max(attempts, key=_passed_then_score)  # max keeps the first of equals


def _passed_then_score(attempt: Attempt) -> tuple[bool, float]:
    return attempt.passed, attempt.score


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
    """Run the whole budget and pick the best-scoring attempt (passing ones first)."""

    runs_whole_budget: ClassVar[bool] = True


def normalize_answer(text: str) -> str:
    """Lower-case, trim, collapse white space, and drop trailing punctuation."""
    return re.sub(r"\s+", " ", text.strip().lower()).rstrip(".!? ")


class MajorityVote(Strategy):
    """Run the whole budget and pick the most common answer (self-consistency).

    Answers are compared after ``normalize`` (default: :func:`normalize_answer`). The vote
    is over passing attempts when there are any, else over all completed attempts; a tie
    goes to the answer seen first in (subsample_index, attempt) order.
    """

    runs_whole_budget: ClassVar[bool] = True

    def __init__(
        self,
        normalize: Callable[[str], str] = normalize_answer,
        *,
        keep_failures: int = 3,
    ) -> None:
        super().__init__(keep_failures=keep_failures)
        self.normalize = normalize

    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        """The first attempt whose normalised answer is the most common."""
        pool = [a for a in attempts if a.passed] or list(attempts)
        keys = [self.normalize(a.text) for a in pool]
        counts = Counter(keys)
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
