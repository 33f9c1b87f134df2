"""Budget checks, shared by the ``Sampler`` (at construction) and the loop (after plugins)."""

from __future__ import annotations

from sampling_core.errors import BudgetError

DEFAULT_MAX_LOOP_BUDGET = 1_000
DEFAULT_MAX_CONCURRENCY_BUDGET = 4_096


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
