"""What ``sample()`` returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hook_specs.errors import StopSampling
from hook_specs.payloads import StopReason
from hook_specs.records import ZERO_USAGE, Attempt, CachedGeneration, Usage
from sampling_core.errors import exception_text
from sampling_core.hooks.faults import PluginFault

__all__ = ["AttemptError", "PluginFault", "SamplingResult", "error_label"]

_DEFAULT_STOP = StopSampling().reason


def error_label(exc: BaseException) -> str:
    """The failure label of an outcome that ``exc`` ended: its type and text, on one line."""
    return _one_line(f"{type(exc).__name__}: {exception_text(exc)}")


def _one_line(text: str) -> str:
    """``text`` on one line: each line break becomes a space."""
    return " ".join(text.splitlines())


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
    stopped_by: str | None = None
    """The plugin whose ``StopSampling`` stopped the call (when one did, and is known)."""
    stop_text: str | None = None
    """The reason that ``StopSampling`` gave."""

    @property
    def failure_reason(self) -> str | None:
        """Why the call did not succeed, in one line (``None`` when it did): the one label
        of the outcome, the same in the loop end's payload, a batch run's record and the
        trace. The plugin that stopped it (and the reason it gave), the first backend error
        when no attempt completed, the unmet requirements of the picked attempt (named by
        their descriptions, never the output's text), or ``budget exhausted``."""
        if self.success:
            return None
        if self.stop_reason == "stopped_by_plugin":
            by = self.stopped_by
            label = f"stopped by plugin {by}" if by else "stopped by a plugin"
            why = self.stop_text
            if why and why != _DEFAULT_STOP:
                label = f"{label}: {why}"
            return _one_line(label)
        if not self.attempts and self.errors:  # every attempt's backend failed
            return error_label(self.errors[0].exception)
        picked = self.picked
        if picked is not None:
            unmet = [v.requirement or "a requirement" for v in picked.validations if not v.passed]
            if unmet:
                return _one_line("unmet requirements: " + "; ".join(unmet))
        return "budget exhausted"

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
