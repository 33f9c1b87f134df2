"""The ``ordering`` plugin: the reference checker of iteration ordering.

For each ``sample()`` call (by ``sampling_id``) it records the ``iteration`` numbers in
the order their ``sampling_iteration`` events arrive and checks the engine's promises:

* **inversions**: an iteration lower than one already seen. Expected when subsamples run
  concurrently (``iteration`` is not monotonic in event order); with
  ``concurrency_budget=1`` any inversion is a bug.
* **duplicates**: an iteration number seen twice.
* **attempt skips**: within a subsample, ``attempt`` must rise by one (1, 2, 3, ...).
* **protocol violations**: an iteration before ``sampling_loop_start`` or after
  ``sampling_loop_end``, a second start, an end without a start, a missing end,
  ``sequence`` not rising by one, an ``iteration`` that is not
  ``subsample_index * loop_budget + attempt``, or ``iterations_used`` that differs from the
  number of events delivered.

``OrderingChecker(strict=False)`` warns through structlog (event ``ordering.violation``)
when a call ends with a problem; with ``strict=True`` its ``sampling_loop_end`` raises
:class:`OrderingViolation`. ``report(sampling_id)`` returns a call's
:class:`OrderingReport`. Only the last ``keep`` finished reports are kept.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import structlog

from hook_specs import (
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    hookimpl,
)
from sampling_core import PluginError

__all__ = [
    "AttemptSkip",
    "OrderingChecker",
    "OrderingReport",
    "OrderingViolation",
    "PROBLEM_KINDS",
    "Violation",
]

logger = structlog.get_logger("samplehooks.ordering")

_TRUE = {"1", "true", "yes", "on"}


# Every kind of problem a report can hold: the protocol violations, then the findings kept
# in their own fields (duplicates, attempt_skips, inversions).
PROBLEM_KINDS = (
    "start_twice",
    "end_twice",
    "end_without_start",
    "missing_end",
    "iteration_before_start",
    "iteration_after_end",
    "sequence_gap",
    "iteration_number",
    "iterations_used",
    "duplicate",
    "attempt_skip",
    "inversion",
)


class Violation(str):
    """One protocol violation: its message, with ``kind`` (one of ``PROBLEM_KINDS``)."""

    kind: str

    def __new__(cls, kind: str, message: str) -> Violation:
        """The violation ``message`` of ``kind``."""
        if kind not in PROBLEM_KINDS:
            raise ValueError(f"unknown violation kind {kind!r}")
        self = super().__new__(cls, message)
        self.kind = kind
        return self


@dataclass(frozen=True, slots=True)
class AttemptSkip:
    """Within subsample ``subsample_index``, ``attempt`` came where ``expected`` should have."""

    subsample_index: int
    expected: int
    attempt: int


@dataclass(slots=True)
class OrderingReport:
    """What the checker saw for one ``sample()`` call.

    ``iterations`` lists the iteration numbers in event order. ``inversions`` holds one
    ``(earlier_iteration, later_iteration)`` pair per event that arrived after a higher
    iteration: the highest iteration seen before it, and it. ``inversion_count`` counts
    every out-of-order pair. ``concurrency_budget`` is the budget the call ran with
    (known at loop end).
    """

    sampling_id: str
    started: bool = False
    ended: bool = False
    concurrency_budget: int | None = None
    iterations: list[int] = field(default_factory=list)
    inversions: list[tuple[int, int]] = field(default_factory=list)
    inversion_count: int = 0
    duplicates: list[int] = field(default_factory=list)
    attempt_skips: list[AttemptSkip] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    # Working state, not part of the verdict.
    _sorted: list[int] = field(default_factory=list, repr=False)
    _next_attempt: dict[int, int] = field(default_factory=dict, repr=False)
    _positions: list[tuple[int, int, int]] = field(default_factory=list, repr=False)
    _last_sequence: int = field(default=0, repr=False)

    @property
    def inversions_expected(self) -> bool:
        """Whether inversions are expected: the call ran more than one subsample at once."""
        return self.concurrency_budget is not None and self.concurrency_budget > 1

    def problems(self, *, allow_concurrent_inversions: bool = True) -> list[Violation]:
        """Every problem as one line (a :class:`Violation`, with its ``kind``); inversions
        count unless they are expected and allowed."""
        found = list(self.violations)
        if self.duplicates:
            found.append(Violation("duplicate", f"duplicate iterations: {self.duplicates}"))
        for skip in self.attempt_skips:
            found.append(
                Violation(
                    "attempt_skip",
                    f"subsample {skip.subsample_index}: attempt {skip.attempt} "
                    f"where attempt {skip.expected} was expected",
                )
            )
        if self.inversions and not (allow_concurrent_inversions and self.inversions_expected):
            found.append(
                Violation(
                    "inversion",
                    f"{self.inversion_count} inversion(s) with "
                    f"concurrency_budget={self.concurrency_budget}: {self.inversions}",
                )
            )
        return found

    def problem_kinds(self, *, allow_concurrent_inversions: bool = True) -> list[str]:
        """The kind of each line of :meth:`problems`, in the same order."""
        return [
            problem.kind
            for problem in self.problems(allow_concurrent_inversions=allow_concurrent_inversions)
        ]

    @property
    def ok(self) -> bool:
        """No problem, counting inversions only where they are not expected."""
        return not self.problems()


class OrderingViolation(PluginError):
    """The checker found a problem and is strict; carries the call's report."""

    def __init__(self, plugin_name: str, hook: str, message: str, report: OrderingReport) -> None:
        super().__init__(plugin_name, hook, message)
        self.report = report


class OrderingChecker:
    """Checks the ordering of iteration events, per ``sampling_id``.

    ``strict``: raise :class:`OrderingViolation` at loop end instead of warning (default
    from ``SAMPLEHOOKS_ORDERING_STRICT``). ``keep``: how many finished reports to keep.
    ``max_open``: how many calls may be open at once; beyond it the oldest open call is
    closed with a "missing end" violation (so memory stays bounded even if ends are lost).
    ``allow_concurrent_inversions``: inversions are a problem only when the call ran
    one subsample at a time (set ``False`` to flag every inversion).
    """

    reads_environment = ("SAMPLEHOOKS_ORDERING_STRICT",)

    def __init__(
        self,
        strict: bool | None = None,
        *,
        keep: int = 256,
        max_open: int = 10_000,
        allow_concurrent_inversions: bool = True,
        name: str = "ordering",
    ) -> None:
        if strict is None:
            strict = os.environ.get("SAMPLEHOOKS_ORDERING_STRICT", "").lower() in _TRUE
        if keep < 1 or max_open < 1:
            raise ValueError("OrderingChecker: keep and max_open must be >= 1")
        self.strict = strict
        self.keep = keep
        self.max_open = max_open
        self.allow_concurrent_inversions = allow_concurrent_inversions
        self.name = name
        self._open: OrderedDict[str, OrderingReport] = OrderedDict()
        self._done: OrderedDict[str, OrderingReport] = OrderedDict()
        self._lock = threading.Lock()

    # -- reading ------------------------------------------------------------------------

    def report(self, sampling_id: str) -> OrderingReport:
        """The report of call ``sampling_id`` (open or among the last ``keep`` finished).

        Raises ``KeyError`` when the checker has no record of it.
        """
        with self._lock:
            found = self._open.get(sampling_id) or self._done.get(sampling_id)
        if found is None:
            raise KeyError(f"no ordering report for sampling_id {sampling_id!r}")
        return found

    def reports(self) -> list[OrderingReport]:
        """Every report kept: finished ones (oldest first), then open ones."""
        with self._lock:
            return [*self._done.values(), *self._open.values()]

    def close_open(self) -> list[OrderingReport]:
        """Close every call still open as "missing end" (e.g. at shutdown); returns them."""
        with self._lock:
            closing = list(self._open.values())
            self._open.clear()
            for report in closing:
                report.violations.append(
                    Violation("missing_end", "sampling_loop_end never arrived")
                )
                self._finish(report)
        return closing

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl(tryfirst=True)
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Open a report for the call (runs first, so a plugin stopping the call is fine)."""
        sid = payload.sampling_id
        with self._lock:
            report = self._open.get(sid) or self._done.get(sid)
            if report is not None:
                report.violations.append(
                    Violation("start_twice", "sampling_loop_start arrived twice")
                )
                return
            report = OrderingReport(sid, started=True)
            self._open[sid] = report
            while len(self._open) > self.max_open:
                _, oldest = self._open.popitem(last=False)
                oldest.violations.append(
                    Violation("missing_end", "sampling_loop_end never arrived")
                )
                self._finish(oldest)

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Record one completed attempt and check it against what came before."""
        sid = payload.sampling_id
        report = self._open.get(sid)
        if report is None:
            with self._lock:
                report = self._done.get(sid)
                if report is not None:
                    report.violations.append(
                        Violation(
                            "iteration_after_end",
                            f"iteration {payload.iteration} arrived after sampling_loop_end",
                        )
                    )
                    return
                report = self._open.get(sid)
                if report is None:
                    report = OrderingReport(sid)
                    report.violations.append(
                        Violation(
                            "iteration_before_start",
                            f"iteration {payload.iteration} arrived before sampling_loop_start",
                        )
                    )
                    self._open[sid] = report
        _record(report, payload)

    @hookimpl(trylast=True)
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Close the call's report; warn about problems, or raise when strict."""
        sid = payload.sampling_id
        with self._lock:
            report = self._open.pop(sid, None)
            if report is None:
                if sid in self._done:
                    self._done[sid].violations.append(
                        Violation("end_twice", "sampling_loop_end arrived twice")
                    )
                    report = self._done[sid]
                else:
                    report = OrderingReport(sid)
                    report.violations.append(
                        Violation("end_without_start", "sampling_loop_end arrived without a start")
                    )
                    self._finish(report)
            else:
                self._finish(report)
            report.ended = True
            report.concurrency_budget = payload.concurrency_budget
            _check_end(report, payload)
        problems = report.problems(allow_concurrent_inversions=self.allow_concurrent_inversions)
        if not problems:
            return
        message = "; ".join(problems)
        if self.strict:
            raise OrderingViolation(self.name, "sampling_loop_end", message, report)
        logger.warning(
            "ordering.violation",
            sampling_id=sid,
            problems=problems,
            inversions=len(report.inversions),
            duplicates=report.duplicates,
        )

    def _finish(self, report: OrderingReport) -> None:
        """Move a report to the finished ones, dropping the oldest beyond ``keep``."""
        report._sorted = []
        report._next_attempt = {}
        self._done[report.sampling_id] = report
        while len(self._done) > self.keep:
            self._done.popitem(last=False)


def _record(report: OrderingReport, payload: SamplingIterationPayload) -> None:
    iteration = payload.iteration
    seen = report._sorted
    position = bisect.bisect_right(seen, iteration)
    if position < len(seen):  # some iteration already seen is higher
        report.inversions.append((seen[-1], iteration))
        report.inversion_count += len(seen) - position
    if position and seen[position - 1] == iteration:
        report.duplicates.append(iteration)
    seen.insert(position, iteration)
    report.iterations.append(iteration)

    index, attempt = payload.subsample_index, payload.attempt
    expected = report._next_attempt.get(index, 1)
    if attempt != expected:
        report.attempt_skips.append(AttemptSkip(index, expected, attempt))
    report._next_attempt[index] = attempt + 1
    report._positions.append((index, attempt, iteration))

    sequence = payload.sequence
    if sequence is not None:
        if sequence != report._last_sequence + 1:
            report.violations.append(
                Violation(
                    "sequence_gap",
                    f"sequence {sequence} arrived after sequence {report._last_sequence}",
                )
            )
        report._last_sequence = sequence


def _check_end(report: OrderingReport, payload: SamplingLoopEndPayload) -> None:
    loop_budget = payload.loop_budget
    for index, attempt, iteration in report._positions:
        if iteration != index * loop_budget + attempt:
            report.violations.append(
                Violation(
                    "iteration_number",
                    f"iteration {iteration} is not subsample_index*loop_budget+attempt "
                    f"({index}*{loop_budget}+{attempt})",
                )
            )
    report._positions = []
    if payload.iterations_used != len(report.iterations):
        report.violations.append(
            Violation(
                "iterations_used",
                f"iterations_used={payload.iterations_used} but "
                f"{len(report.iterations)} sampling_iteration event(s) arrived",
            )
        )
