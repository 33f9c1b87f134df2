"""Budgets and their caps, checked in one place: :meth:`BudgetCaps.check`, called by the
``Sampler`` for what the caller asked and by the loop for what ``sampling_loop_start``
plugins left."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sampling_core.errors import BudgetError

DEFAULT_MAX_LOOP_BUDGET = 1_000
DEFAULT_MAX_CONCURRENCY_BUDGET = 4_096
DEFAULT_MAX_ATTEMPTS_PER_CALL = 100_000
"""``loop_budget x concurrency_budget`` at most: a call keeps every completed attempt (text,
verdicts, messages) for its result, so this bounds one call's memory (about 1 KB an
attempt with short answers: ~100 MB at the cap)."""


def check_budget(field: str, value: object, cap: int, source: str) -> int:
    """Return ``value`` if it is an int within ``1..cap``; else raise :class:`BudgetError`.

    ``bool`` is not accepted as an int here, nor are floats, even integral ones.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(field, value, source, f"must be an int >= 1, not {type(value).__name__}")
    if value < 1:
        raise BudgetError(field, value, source, "must be >= 1")
    if value > cap:
        raise BudgetError(
            field, value, source, f"exceeds the sampler's cap of {cap} (max_{field} on Sampler)"
        )
    return value


def check_attempts(
    loop_budget: int,
    concurrency_budget: int,
    cap: int,
    source: str,
    field: str = "concurrency_budget",
) -> None:
    """Raise :class:`BudgetError` when ``loop_budget x concurrency_budget`` exceeds ``cap``.

    The error names ``field`` (``"loop_budget"`` or ``"concurrency_budget"``: the one
    ``source`` set) with its value.
    """
    if loop_budget * concurrency_budget > cap:
        raise BudgetError(
            field,
            loop_budget if field == "loop_budget" else concurrency_budget,
            source,
            f"loop_budget x concurrency_budget = {loop_budget} x {concurrency_budget} = "
            f"{loop_budget * concurrency_budget} attempts exceeds the sampler's cap of {cap} "
            "(max_attempts_per_call on Sampler): a call keeps every attempt it makes",
        )


def _nobody(field: str) -> str | None:
    return None


@dataclass(frozen=True, slots=True)
class BudgetCaps:
    """What one call may ask for: each budget's cap and their product's."""

    loop_budget: int = DEFAULT_MAX_LOOP_BUDGET
    concurrency_budget: int = DEFAULT_MAX_CONCURRENCY_BUDGET
    attempts_per_call: int = DEFAULT_MAX_ATTEMPTS_PER_CALL

    def check(
        self,
        loop_budget: object,
        concurrency_budget: object,
        written_by: Callable[[str], str | None] = _nobody,
    ) -> tuple[int, int]:
        """The budgets, if both are ints within their caps and their product within its own;
        else :class:`BudgetError` naming the field, the value and who set it
        (``written_by(field)``: a plugin's name, or ``None`` for the caller)."""
        if (
            type(loop_budget) is int
            and type(concurrency_budget) is int
            and 1 <= loop_budget <= self.loop_budget
            and 1 <= concurrency_budget <= self.concurrency_budget
            and loop_budget * concurrency_budget <= self.attempts_per_call
        ):
            return loop_budget, concurrency_budget

        def source(field: str) -> str:
            writer = written_by(field)
            return f"plugin {writer!r}" if writer else "the caller"

        check_budget("loop_budget", loop_budget, self.loop_budget, source("loop_budget"))
        check_budget(
            "concurrency_budget",
            concurrency_budget,
            self.concurrency_budget,
            source("concurrency_budget"),
        )
        # The error names a budget a plugin changed (the concurrency first), as it was set.
        field = next(
            (f for f in ("concurrency_budget", "loop_budget") if written_by(f)),
            "concurrency_budget",
        )
        check_attempts(
            loop_budget,  # type: ignore[arg-type]
            concurrency_budget,  # type: ignore[arg-type]
            self.attempts_per_call,
            source(field),
            field,
        )
        return loop_budget, concurrency_budget  # type: ignore[return-value]
