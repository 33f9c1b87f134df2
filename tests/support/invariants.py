"""The invariants every returned ``SamplingResult`` keeps, whatever happened on the way."""

from __future__ import annotations

from hook_specs import Usage
from sampling_core import SamplingResult


def check_result(
    result: SamplingResult, loop_budget: int, concurrency_budget: int, returned: Usage
) -> None:
    """Ids unique and in range, counts consistent, usage complete, stop reason agreeing.

    ``returned`` is the usage of every generation the backend returned, so cancelled
    attempts' spend must be in ``result.usage`` too; a backend call cut short by a
    cancellation adds its spend (``result.cancelled_usage``), unknown when it did not
    stream (never 0).
    """
    total = loop_budget * concurrency_budget
    ids = [a.iteration for a in result.attempts]
    assert len(ids) == len(set(ids)) and all(1 <= i <= total for i in ids)
    assert result.iterations_used == len(result.attempts) <= total
    assert sorted(a.sequence for a in result.attempts) == list(range(1, len(ids) + 1))
    for a in result.attempts:
        assert a.iteration == a.subsample_index * loop_budget + a.attempt
    assert result.usage == returned + result.cancelled_usage
    if result.cancelled == 0:
        assert result.cancelled_usage == Usage()
    # what the completed attempts spent (an answer the cache or a plugin gave: nothing)
    completed = sum((a.generation.spent for a in result.attempts), Usage())
    if result.usage.known:
        assert completed.total_tokens <= result.usage.total_tokens
    assert result.cancelled >= 0
    assert result.success == (result.picked is not None and result.picked.passed)
    assert result.success == any(a.passed for a in result.attempts)
    if result.stop_reason == "success":
        assert result.success
    if not result.success:
        assert result.stop_reason in ("budget_exhausted", "stopped_by_plugin")
