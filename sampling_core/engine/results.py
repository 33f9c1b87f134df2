"""What ``sample()`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hook_specs.payloads import StopReason
from hook_specs.records import ZERO_USAGE, Attempt, CachedGeneration, Usage
from sampling_core.errors import exception_text
from sampling_core.hooks.faults import PluginFault

__all__ = ["AttemptError", "PluginFault", "SamplingResult"]


@dataclass(frozen=True, slots=True)
class AttemptError:
    """An attempt whose backend call raised; it ended its subsample."""

    subsample_index: int
    attempt: int
    iteration: int
    exception: BaseException

    def __str__(self) -> str:
        return (
            f"subsample {self.subsample_index}, attempt {self.attempt}: "
            f"{type(self.exception).__name__}: {exception_text(self.exception)}"
        )


@dataclass(slots=True)
class SamplingResult:
    """The outcome of one ``sample()`` call.

    ``text`` is the picked output (``None`` when no attempt completed); ``success`` says
    whether it passed every requirement; ``stop_reason`` says why the loop ended
    (``"success"`` implies ``success``). ``attempts`` holds the completed attempts ordered by
    (subsample_index, attempt). ``cancelled`` counts the attempts in flight when the call
    ended, ``not_started`` the subsamples that never started (the call was decided before
    their launch: ``launch`` other than ``"all"``). ``usage`` includes what the cancelled
    attempts spent, which is also ``cancelled_usage``: a streamed attempt's tokens as they
    arrived, any other one's unknown (a count of ``None``, never 0). With a response cache,
    ``cached_calls`` of the attempts were answered from it; ``cached_usage`` is what they
    took when they were generated (not in ``usage``: no new tokens were spent on them).
    ``failure_reason`` says in one line why it did not succeed.
    """

    success: bool
    text: str | None
    stop_reason: StopReason
    attempts: list[Attempt]
    iterations_used: int
    cancelled: int
    usage: Usage
    sampling_id: str
    elapsed_s: float
    loop_budget: int
    concurrency_budget: int
    strategy_name: str
    not_started: int = 0
    cancelled_usage: Usage = ZERO_USAGE
    picked: Attempt | None = None
    value: Any = None
    errors: list[AttemptError] = field(default_factory=list)
    plugin_errors: list[PluginFault] = field(default_factory=list)
    cancelled_because: str | None = None
    """Why the ``cancelled`` attempts were cancelled (``sibling_succeeded``,
    ``stopped_by_plugin``, ``budget``, ...; ``None`` when none was)."""
    failure_reason: str | None = None
    """Why the call did not succeed, in one line (``None`` when it did): the one label of
    the outcome, the same in the loop end's payload, a batch run's record and the trace."""

    @property
    def cached_calls(self) -> int:
        """How many of the attempts the response cache answered."""
        return sum(1 for a in self.attempts if a.generation.cached)

    @property
    def cached_usage(self) -> Usage:
        """What the attempts the response cache answered took when they were generated."""
        total = Usage()
        for a in self.attempts:
            if isinstance(a.generation, CachedGeneration):
                total += a.generation.cached_usage
        return total

    def __repr__(self) -> str:
        return (
            f"SamplingResult(success={self.success}, stop_reason={self.stop_reason!r}, "
            f"text={self.text!r}, iterations_used={self.iterations_used}, "
            f"cancelled={self.cancelled}, not_started={self.not_started}, "
            f"errors={len(self.errors)}, "
            f"plugin_errors={len(self.plugin_errors)})"
        )
