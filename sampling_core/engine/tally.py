"""What one call has produced so far, and the pick: completed attempts, errors, the winner.

A :class:`Tally` numbers and keeps every completed attempt, judges it (first pass, or the
best ``(attempt, subsample_index)`` under ``selection="ordered"``), cancels the subsamples
that can no longer win (unless ``early_exit`` is off), counts tokens and in-flight
attempts, and finally makes the :class:`~sampling_core.engine.results.SamplingResult` and the
fields of ``sampling_loop_end``.

Backend calls cut short by a cancellation count too: a streamed one what it streamed
(its :class:`~sampling_core.engine.streaming.Flight` is still in :attr:`Tally.flights`), any
other one as unknown (``None`` tokens, never 0).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import structlog

from hook_specs.errors import StopSampling
from hook_specs.payloads import StopReason
from hook_specs.records import (
    WHOLE,
    ZERO_USAGE,
    Attempt,
    Generation,
    IterationInfo,
    Message,
    Provenance,
    Usage,
    ValidationResult,
)
from sampling_core.engine.results import AttemptError, SamplingResult
from sampling_core.engine.streaming import Flight
from sampling_core.engine.subsample_tasks import SubsampleTasks
from sampling_core.errors import StrategyError, exception_text
from sampling_core.hooks.faults import PluginFault, describe
from sampling_core.requirements.formats import parse_format
from sampling_core.strategies import Strategy

logger = structlog.get_logger("samplehooks")


class Tally:
    """The attempts, errors and tokens of one call, and its winner."""

    __slots__ = (
        "attempts",
        "best_key",
        "cancelled_for",
        "cancelled_spent",
        "cost_usd",
        "current_attempt",
        "cut_short",
        "early_exit",
        "ended",
        "errors",
        "fatal",
        "flights",
        "in_flight",
        "input_tokens",
        "judges_passes",
        "output_tokens",
        "over",
        "priced",
        "sampling_id",
        "selection",
        "sequence",
        "started",
        "stop_text",
        "stopped",
        "stopped_by",
        "strategy",
        "tasks",
        "votes_early",
        "winner",
    )

    def __init__(
        self, sampling_id: str, strategy: Strategy, selection: str, early_exit: bool
    ) -> None:
        self.sampling_id = sampling_id
        self.strategy = strategy
        self.selection = selection
        # A strategy that runs the whole budget judges no pass before its pick at the end.
        self.judges_passes = not strategy.runs_whole_budget
        self.early_exit = early_exit and self.judges_passes
        # A vote with a consensus ends the call once settled (see subsample_ended).
        self.votes_early = strategy.decides_early and early_exit
        self.ended: list[bool] = []  # per subsample, kept while votes_early
        self.attempts: list[Attempt] = []
        self.errors: list[AttemptError] = []
        self.input_tokens: int | None = 0  # None once a call did not report its tokens
        self.output_tokens: int | None = 0
        self.cost_usd = 0.0  # the priced calls' cost; it stands while every call was priced
        self.priced: bool | None = None  # True once a call was priced; False once one was not
        self.sequence = 0
        self.in_flight = 0  # attempts whose backend call began and that have not completed
        self.cut_short = 0  # backend calls (not streamed) cancelled before they answered
        self.flights: dict[int, Flight] = NO_FLIGHTS  # streamed calls running (see SamplingCall)
        self.cancelled_spent = ZERO_USAGE  # what the calls cut short spent, once settled
        self.winner: Attempt | None = None
        self.best_key: tuple[int, int] | None = None  # selection="ordered"
        self.stopped = False
        self.over = False  # no attempt should start any more (stopped, failed, or won)
        self.stopped_by: str | None = None  # the plugin that raised StopSampling first
        self.stop_text: str | None = None  # ...and the reason it gave
        self.fatal: BaseException | None = None
        self.cancelled_for: str | None = None  # why the tally cancelled attempts, if it did
        self.current_attempt: list[int] = []
        self.tasks: SubsampleTasks | None = None  # the subsample tasks; None while none runs
        self.started = time.perf_counter()

    def open_subsamples(self, count: int, tasks: SubsampleTasks | None) -> None:
        """The call runs ``count`` subsamples (in ``tasks``; ``None``: one, inline)."""
        self.current_attempt = [0] * count
        if self.votes_early:
            self.ended = [False] * count
        self.tasks = tasks

    def watch_streams(self) -> None:
        """The call streams its backend calls: keep their flights (see :attr:`flights`)."""
        self.flights = {}

    def take_off(self, info: IterationInfo, answered_by: str | None = None) -> Flight:
        """A streamed backend call begins (``answered_by``: a plugin streams instead of the
        backend): its flight, kept until it :meth:`landed` (one still kept when the call
        ends was cancelled, and counts what it spent)."""
        flight = Flight(info, answered_by)
        self.flights[info.iteration] = flight
        return flight

    def landed(self, info: IterationInfo) -> None:
        """A streamed backend call ended, by its answer or an error (not cut short)."""
        del self.flights[info.iteration]

    def began(self) -> None:
        """An attempt not started through :meth:`may_start` (a rescore's) is in flight until
        it is recorded."""
        self.in_flight += 1

    def dropped(self) -> None:
        """An attempt in flight ended without being recorded: its backend failed for good, or
        its backend call never began (refused by ``generation_pre_call``, or cancelled
        before it)."""
        self.in_flight -= 1

    def cut(self) -> None:
        """A backend call (not streamed) was cancelled before it answered: its spend is
        unknown, settled with the others at the end."""
        self.cut_short += 1

    def may_start(self, index: int, number: int) -> bool:
        """Whether subsample ``index`` may start attempt ``number`` (and note that it does:
        the attempt is in flight until it is recorded, or :meth:`dropped` if its backend
        call never began or failed for good)."""
        if self.over:
            return False
        if self.early_exit and self.best_key is not None and (number, index) > self.best_key:
            return False  # selection="ordered": this subsample can no longer win
        self.current_attempt[index] = number
        self.in_flight += 1
        return True

    def count_usage(self, usage: Usage) -> None:
        """Add one generation's tokens (cancelled attempts' too, where reported): a sum is
        unknown (``None``) once a part is, as :func:`~hook_specs.records.add_counts` says,
        written out here without a call since it runs for every attempt."""
        inputs, outputs = usage.input_tokens, usage.output_tokens
        if inputs is None or self.input_tokens is None:
            self.input_tokens = None
        else:
            self.input_tokens += inputs
        if outputs is None or self.output_tokens is None:
            self.output_tokens = None
        else:
            self.output_tokens += outputs
        if self.priced is not False:
            cost = usage.cost_usd
            self.priced = cost is not None
            if cost is not None:
                self.cost_usd += cost

    def record(
        self,
        info: IterationInfo,
        messages: list[Message],
        generation: Generation,
        validations: tuple[ValidationResult, ...],
        provenance: Provenance = WHOLE,
        scored: float | None = None,
    ) -> Attempt:
        """Number, keep and judge a validated attempt, no longer in flight (``scored``: the
        strategy's scorer's)."""
        self.in_flight -= 1
        self.sequence += 1
        passed = True  # count_passed(validations) == len(validations), without a call
        for verdict in validations:
            if not verdict.passed:
                passed = False
                break
        attempt = Attempt(
            info.subsample_index,
            info.attempt,
            info.iteration,
            self.sequence,
            generation.text,
            generation,
            validations,
            passed,
            messages,
            provenance,
            scored,
        )
        self.attempts.append(attempt)
        if attempt.passed and self.judges_passes:
            self._judge_pass(attempt)
        return attempt

    def record_error(self, info: IterationInfo, exc: BaseException) -> None:
        """Keep an attempt whose backend call raised for good."""
        self.errors.append(AttemptError(info.subsample_index, info.attempt, info.iteration, exc))
        logger.warning(
            "sampling.backend_error", error_type=type(exc).__name__, error=exception_text(exc)
        )

    # -- what ends the call early: every cancellation of the call is decided here ---------

    def stop(self, stop: StopSampling) -> None:
        """A plugin raised ``StopSampling``: no attempt starts any more, none in flight goes on.
        The first stop names the plugin the loop end's ``failure_reason`` gives."""
        if not self.stopped:
            self.stopped_by = getattr(stop, "plugin_name", None)
            self.stop_text = stop.reason
        self.stopped = self.over = True
        self.cancelled_for = self.cancelled_for or "stopped_by_plugin"
        logger.info("sampling.stopped_by_plugin", sampling_id=self.sampling_id, reason=stop.reason)
        if self.tasks is not None:
            self.tasks.cancel_all()

    def fail(self, exc: BaseException) -> None:
        """A plugin failed closed (or a strategy raised): the call ends with ``exc``."""
        if self.fatal is None:
            self.fatal = exc
        self.over = True
        self.cancelled_for = self.cancelled_for or "error"
        if self.tasks is not None:
            self.tasks.cancel_all()

    def subsample_ended(self, index: int) -> None:
        """Subsample ``index`` answers no more (``votes_early`` only): when the strategy's
        vote is settled while the others may still answer, no attempt starts any more and
        those in flight are cancelled."""
        ended = self.ended
        if ended[index]:
            return
        ended[index] = True
        if self.over:
            return
        still_open = [i for i, done in enumerate(ended) if not done]
        try:
            decided = bool(still_open) and self.strategy.decided(self._in_order(), still_open)
        except Exception as exc:  # a bug in a strategy ends the call, as in its pick
            self.fail(exc)
            return
        if decided:
            self.over = True
            self.cancelled_for = self.cancelled_for or "budget"  # the vote needs no more
            if self.tasks is not None:
                self.tasks.cancel_all()

    def _in_order(self) -> list[Attempt]:
        return sorted(self.attempts, key=_by_position)

    def cancel_reason(self, exc: BaseException) -> str:
        """Why a backend call that began ended by ``exc`` without an answer
        (``generation_cancelled``'s ``reason``): the plugin's stop, Ctrl-C, what the tally
        cancelled for, else the caller's cancellation."""
        if isinstance(exc, StopSampling):
            return "stopped_by_plugin"
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            return "interrupted"
        if isinstance(exc, Exception):  # a plugin failed closed before the call began
            return "error"
        return self.cancelled_for or "caller_cancelled"

    def _judge_pass(self, attempt: Attempt) -> None:
        tasks = self.tasks if self.early_exit else None
        if tasks is not None:
            self.cancelled_for = self.cancelled_for or "sibling_succeeded"
        if self.selection == "first":
            if self.winner is None:
                self.winner = attempt
                if self.early_exit:  # else the call goes on (never undoing a stop)
                    self.over = True
                if tasks is not None:
                    tasks.cancel_all()
            return
        key = (attempt.attempt, attempt.subsample_index)
        if self.best_key is None or key < self.best_key:
            self.best_key = key
            if tasks is None:
                return
            for index, number in enumerate(self.current_attempt):
                # one not started yet (number 0, maybe waiting its turn) would start at 1
                if index != attempt.subsample_index and (number or 1, index) > key:
                    tasks.cancel(index)

    # -- the end ------------------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        """Tokens spent so far, and their cost while every call's price is known."""
        return Usage(self.input_tokens, self.output_tokens, self.cost_usd if self.priced else None)

    def settle_cancelled(self, backend: object) -> None:
        """Count what the backend calls cut short by a cancellation spent (once the
        subsamples have ended): a streamed call what it streamed, any other one unknown.
        The caller checks ``flights or cut_short`` first (nothing to settle, most calls)."""
        free = bool(getattr(backend, "free_of_charge", False))
        spent = ZERO_USAGE
        for flight in self.flights.values():
            spent = spent + flight.spent(free)
        if self.cut_short:
            spent = spent + Usage(None, None, 0.0 if free else None)
        self.flights = NO_FLIGHTS
        self.cut_short = 0
        self.cancelled_spent = self.cancelled_spent + spent
        self.count_usage(spent)

    def count_answered(self, usage: Usage) -> None:
        """Count what a backend call spent that answered, when its attempt was cancelled
        before the call returned (a ``generation_call`` wrapper still at work after its
        answer): spent by a cancelled attempt, and known."""
        self.cancelled_spent = self.cancelled_spent + usage
        self.count_usage(usage)

    @property
    def not_started(self) -> int:
        """Subsamples that never started an attempt (the call was decided first)."""
        started = self.current_attempt
        return started.count(0) if 0 in started else 0

    def result(
        self,
        loop_budget: int,
        concurrency_budget: int,
        format: Any = None,
        faults: list[PluginFault] | None = None,
        backend: object = None,
    ) -> SamplingResult:
        """The call's result under those budgets (``format``: the call's, to parse the pick
        with), once what the cancelled calls spent is settled (``backend``: the call's); it
        raises the first backend error if nothing else happened. A rescore makes its result
        of the attempts it fed in with the budgets alone (no backend, no settings)."""
        if self.flights or self.cut_short:
            self.settle_cancelled(backend)
        attempts = self.attempts
        not_started = 0
        if concurrency_budget > 1:  # one subsample completes its attempts in order
            attempts = sorted(attempts, key=_by_position)
            not_started = self.not_started
        if not attempts and self.errors and not self.stopped:
            raise self.errors[0].exception
        picked = self._pick(attempts)
        success = picked is not None and picked.passed
        stop_reason: StopReason
        if self.stopped:
            stop_reason = "stopped_by_plugin"
        elif success:
            stop_reason = "success"
        else:
            stop_reason = "budget_exhausted"
        value = None
        if format is not None and picked is not None:
            try:
                value = parse_format(format, picked.text)
            except ValueError:
                value = None
        result = SamplingResult(
            success=success,
            text=picked.text if picked is not None else None,
            stop_reason=stop_reason,
            attempts=attempts,
            iterations_used=len(attempts),
            cancelled=self.in_flight,
            not_started=not_started,
            usage=self.usage,
            cancelled_usage=self.cancelled_spent,
            sampling_id=self.sampling_id,
            elapsed_s=time.perf_counter() - self.started,
            loop_budget=loop_budget,
            concurrency_budget=concurrency_budget,
            strategy_name=self.strategy.name,
            picked=picked,
            value=value,
            errors=self.errors,
            plugin_errors=faults if faults is not None else [],
        )
        if self.stopped:  # what the result's failure_reason says of the stop
            result.stopped_by, result.stop_text = self.stopped_by, self.stop_text
        if self.in_flight:
            result.cancelled_because = self.cancelled_for or (
                "stopped_by_plugin" if self.stopped else "caller_cancelled"
            )
        return result

    def _pick(self, attempts: Sequence[Attempt]) -> Attempt | None:
        if self.judges_passes:
            if self.winner is not None:
                return self.winner
            if self.best_key is not None:
                attempt, index = self.best_key
                for candidate in attempts:
                    if candidate.subsample_index == index and candidate.attempt == attempt:
                        return candidate
        if not attempts:
            return None  # nothing to pick from: the strategy is not asked
        try:
            picked: object = self.strategy.pick(attempts)
        except Exception as exc:
            raise StrategyError(self.strategy.name, f"pick() raised {describe(exc)}") from exc
        for candidate in attempts:  # by identity: a copy, or another call's attempt, is not
            if candidate is picked:
                return candidate
        raise TypeError(
            f"strategy {self.strategy.name!r}: pick() returned {_shown(picked)}, which is "
            "not one of this call's attempts; return one of the attempts it was given "
            "(the very object, not a copy)"
        )


NO_FLIGHTS: dict[int, Flight] = {}
"""A call that does not stream keeps no flights: this empty dict, never written to."""

_by_position = attrgetter("subsample_index", "attempt")
"""An attempt's place in (subsample_index, attempt) order, the order of ``result.attempts``."""


def _shown(value: Any) -> str:
    """What a strategy's ``pick`` returned, briefly: an attempt by its identity, or the type."""
    if isinstance(value, Attempt):
        return (
            f"an attempt (subsample {value.subsample_index}, attempt {value.attempt}, "
            f"sequence {value.sequence}) of another call, or a copy"
        )
    return "None" if value is None else f"a {type(value).__name__}"
