"""Budget checks, shared by the ``Sampler`` (at construction) and the loop (after plugins)."""

from __future__ import annotations

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
