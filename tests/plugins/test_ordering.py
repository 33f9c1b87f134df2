"""The ordering checker: inversions under concurrency, none without, and protocol checks."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from builtin_plugins.ordering import AttemptSkip, OrderingChecker, OrderingViolation
from hook_specs import (
    Generation,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    Usage,
    hookimpl,
)
from sampling_core import GenerationRequest, PluginError


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


def never(text: str) -> bool:
    """never passes"""
    return False


class LaterSubsamplesFirst:
    """A backend and a plugin that make subsample k answer only after subsample k+1 completed.

    So later subsamples answer faster, deterministically: iterations complete as
    C, C-1, ..., 1 (with ``loop_budget=1``).
    """

    def __init__(self, count: int) -> None:
        self.count = count
        self.completed = [anyio.Event() for _ in range(count)]

    async def reply(self, request: GenerationRequest) -> str:
        index = request.iteration.subsample_index
        if index + 1 < self.count:
            await self.completed[index + 1].wait()
        return "x"

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        self.completed[payload.subsample_index].set()


@pytest.mark.anyio
async def test_inversions_are_reported_when_later_subsamples_answer_faster(
    sampler, scripted_backend
):
    checker = OrderingChecker(strict=True)  # inversions are expected here: no violation
    gate = LaterSubsamplesFirst(4)
    s = sampler(scripted_backend(gate.reply), plugins=[checker, gate], strict_plugins=True)
    result = await s.sample("q", requirements=[never], loop_budget=1, concurrency_budget=4)

    report = checker.report(result.sampling_id)
    assert report.iterations == [4, 3, 2, 1]
    assert report.inversions == [(4, 3), (4, 2), (4, 1)]
    assert report.inversion_count == 6
    assert report.duplicates == [] and report.attempt_skips == [] and report.violations == []
    assert report.started and report.ended and report.concurrency_budget == 4
    assert report.ok and result.plugin_errors == []


@pytest.mark.anyio
async def test_no_inversion_one_subsample_at_a_time_even_strict(sampler, scripted_backend):
    checker = OrderingChecker(strict=True, allow_concurrent_inversions=False)
    s = sampler(scripted_backend(["a", "b"], latency=0.001), plugins=[checker], strict_plugins=True)
    result = await s.sample("q", requirements=[never], loop_budget=4, concurrency_budget=1)
    report = checker.report(result.sampling_id)
    assert report.iterations == [1, 2, 3, 4]
    assert report.inversions == [] and report.inversion_count == 0
    assert report.ok and result.plugin_errors == []


@pytest.mark.anyio
async def test_strict_violation_lands_in_plugin_errors_or_raises_when_sampler_is_strict(
    sampler, scripted_backend
):
    # Flag every inversion, so the concurrent run above becomes a violation.
    checker = OrderingChecker(strict=True, allow_concurrent_inversions=False)
    gate = LaterSubsamplesFirst(3)
    s = sampler(scripted_backend(gate.reply), plugins=[checker, gate], strict_plugins=False)
    result = await s.sample("q", requirements=[never], concurrency_budget=3)
    (fault,) = result.plugin_errors
    assert isinstance(fault.exception, OrderingViolation)
    assert isinstance(fault.exception, PluginError)
    assert fault.hook == "sampling_loop_end"
    assert fault.exception.report.inversions == [(3, 2), (3, 1)]
    kinds = fault.exception.report.problem_kinds(allow_concurrent_inversions=False)
    assert kinds == ["inversion"]
    assert result.stop_reason == "budget_exhausted"  # the call itself went fine

    gate = LaterSubsamplesFirst(3)
    strict = sampler(scripted_backend(gate.reply), plugins=[checker, gate], strict_plugins=True)
    with pytest.raises(OrderingViolation, match="inversion") as raised:
        await strict.sample("q", requirements=[never], concurrency_budget=3)
    assert raised.value.plugin_name == "ordering"
    assert raised.value.report.iterations == [3, 2, 1]


# -- protocol checks, driven hook by hook -------------------------------------------------


def start(sid: str = "c1") -> SamplingLoopStartPayload:
    return SamplingLoopStartPayload(
        sampling_id=sid,
        strategy_name="RejectionSampling",
        loop_budget=3,
        concurrency_budget=2,
        messages=[],
        requirements=[],
        selection="first",
        options={},
    )


def iteration(
    index: int, attempt: int, sequence: int, *, sid: str = "c1", loop_budget: int = 3
) -> SamplingIterationPayload:
    return SamplingIterationPayload(
        sampling_id=sid,
        strategy_name="RejectionSampling",
        subsample_index=index,
        attempt=attempt,
        iteration=index * loop_budget + attempt,
        sequence=sequence,
        generation=Generation("x"),
        text="x",
        validations=[],
        passed=False,
        valid_count=0,
        total_count=0,
        latency_s=0.0,
        usage=Usage(),
    )


def end(
    used: int, *, sid: str = "c1", concurrency_budget: int = 2, loop_budget: int = 3
) -> SamplingLoopEndPayload:
    return SamplingLoopEndPayload(
        sampling_id=sid,
        strategy_name="RejectionSampling",
        success=False,
        stop_reason="budget_exhausted",
        iterations_used=used,
        cancelled=0,
        usage=Usage(),
        loop_budget=loop_budget,
        concurrency_budget=concurrency_budget,
        elapsed_s=0.0,
    )


def report_of(*arrivals: tuple[int, int, int]) -> Any:
    """The report on call "c1" whose iterations arrive as ``(subsample_index, attempt,
    sequence)``, in this order, then its loop end (one iteration used per arrival)."""
    checker = OrderingChecker()
    checker.sampling_loop_start(start())
    for index, attempt, seq in arrivals:
        checker.sampling_iteration(iteration(index, attempt, seq))
    checker.sampling_loop_end(end(len(arrivals)))
    return checker.report("c1")


def test_a_clean_concurrent_call_has_inversions_but_no_problem():
    report = report_of((1, 1, 1), (0, 1, 2), (0, 2, 3), (1, 2, 4))
    assert report.iterations == [4, 1, 2, 5]
    assert report.inversions == [(4, 1), (4, 2)]
    assert report.problems() == [] and report.problem_kinds() == []
    assert report.problem_kinds(allow_concurrent_inversions=False) == ["inversion"]


def test_duplicates_skips_and_sequence_gaps_are_problems():
    checker = OrderingChecker()
    checker.sampling_loop_start(start())
    checker.sampling_iteration(iteration(0, 1, 1))
    checker.sampling_iteration(iteration(0, 1, 2))  # the same attempt twice
    checker.sampling_iteration(iteration(1, 2, 4))  # attempt 1 of subsample 1 skipped; seq gap
    with capture_logs() as logs:
        checker.sampling_loop_end(end(3))
    report = checker.report("c1")
    assert report.duplicates == [1]
    assert report.attempt_skips == [AttemptSkip(0, 2, 1), AttemptSkip(1, 1, 2)]
    assert [v.kind for v in report.violations] == ["sequence_gap"]
    assert report.violations == ["sequence 4 arrived after sequence 2"]
    assert report.problem_kinds() == ["sequence_gap", "duplicate", "attempt_skip", "attempt_skip"]
    assert len(report.problems()) == 4 and not report.ok
    (warning,) = [e for e in logs if e["event"] == "ordering.violation"]
    assert warning["log_level"] == "warning" and warning["sampling_id"] == "c1"


def test_protocol_order_is_checked():
    checker = OrderingChecker()

    def kinds(sid: str) -> list[str]:
        return [v.kind for v in checker.report(sid).violations]

    checker.sampling_iteration(iteration(0, 1, 1, sid="early"))  # before start
    checker.sampling_loop_end(end(1, sid="early"))
    assert kinds("early") == ["iteration_before_start"]

    checker.sampling_loop_start(start("late"))
    checker.sampling_loop_end(end(0, sid="late"))
    checker.sampling_iteration(iteration(0, 1, 1, sid="late"))  # after end
    assert kinds("late") == ["iteration_after_end"]
    checker.sampling_loop_start(start("late"))
    checker.sampling_loop_end(end(0, sid="late"))
    assert kinds("late") == ["iteration_after_end", "start_twice", "end_twice"]

    checker.sampling_loop_end(end(0, sid="never-started"))
    assert kinds("never-started") == ["end_without_start"]

    checker.sampling_loop_start(start("open"))
    (closed,) = checker.close_open()
    assert closed.sampling_id == "open" and not closed.ended
    assert [v.kind for v in closed.violations] == ["missing_end"]
    assert closed.violations == ["sampling_loop_end never arrived"]


def test_numbering_and_counts_are_checked_at_loop_end():
    checker = OrderingChecker()
    checker.sampling_loop_start(start())
    checker.sampling_iteration(iteration(1, 1, 1, loop_budget=5))  # iteration 6, budget is 3
    checker.sampling_loop_end(end(2))  # says 2 were used; 1 event arrived
    report = checker.report("c1")
    assert report.problem_kinds() == ["iteration_number", "iterations_used"]
    assert report.problems() == [
        "iteration 6 is not subsample_index*loop_budget+attempt (1*3+1)",
        "iterations_used=2 but 1 sampling_iteration event(s) arrived",
    ]


def test_inversions_with_one_subsample_are_a_problem():
    checker = OrderingChecker(strict=True)
    checker.sampling_loop_start(start())
    checker.sampling_iteration(iteration(0, 2, 1))
    checker.sampling_iteration(iteration(0, 1, 2))
    with pytest.raises(OrderingViolation, match="inversion") as raised:
        checker.sampling_loop_end(end(2, concurrency_budget=1))
    # attempt 2 came first in subsample 0: two skips (1 expected, then 3), and the inversion
    assert raised.value.report.problem_kinds() == ["attempt_skip", "attempt_skip", "inversion"]
    assert raised.value.report.inversions == [(2, 1)]


def test_memory_is_bounded():
    checker = OrderingChecker(keep=3, max_open=2)
    for n in range(5):
        sid = f"c{n}"
        checker.sampling_loop_start(start(sid))
        checker.sampling_iteration(iteration(0, 1, 1, sid=sid))
        checker.sampling_loop_end(end(1, sid=sid))
    assert [r.sampling_id for r in checker.reports()] == ["c2", "c3", "c4"]
    with pytest.raises(KeyError, match="c0"):
        checker.report("c0")

    for n in range(3):  # a third open call evicts the oldest as "missing end"
        checker.sampling_loop_start(start(f"open{n}"))
    assert [v.kind for v in checker.report("open0").violations] == ["missing_end"]
    assert len(checker.reports()) == 3 + 2


def test_the_documented_defaults_and_the_strict_variable(monkeypatch):
    monkeypatch.delenv("SAMPLEHOOKS_ORDERING_STRICT", raising=False)
    checker = OrderingChecker()
    assert (checker.strict, checker.keep, checker.max_open) == (False, 256, 10_000)
    assert checker.allow_concurrent_inversions is True and checker.name == "ordering"
    for value in ("1", "True", "YES", "on"):
        monkeypatch.setenv("SAMPLEHOOKS_ORDERING_STRICT", value)
        assert OrderingChecker().strict is True, value
    monkeypatch.setenv("SAMPLEHOOKS_ORDERING_STRICT", "0")
    assert OrderingChecker().strict is False
    assert OrderingChecker(strict=False).strict is False  # an explicit value wins


def test_keep_and_max_open_must_be_at_least_one():
    message = "OrderingChecker: keep and max_open must be >= 1"
    for bad in ({"keep": 0}, {"max_open": 0}):
        with pytest.raises(ValueError) as raised:
            OrderingChecker(**bad)
        assert str(raised.value) == message
    smallest = OrderingChecker(keep=1, max_open=1)
    assert (smallest.keep, smallest.max_open) == (1, 1)


def test_an_open_call_has_a_report_and_a_strict_end_names_its_hook():
    checker = OrderingChecker(strict=True)
    checker.sampling_loop_start(start())
    checker.sampling_iteration(iteration(0, 1, 1))
    assert checker.report("c1").iterations == [1] and not checker.report("c1").ended
    with pytest.raises(OrderingViolation) as raised:
        checker.sampling_loop_end(end(2))
    assert raised.value.hook == "sampling_loop_end" and raised.value.plugin_name == "ordering"
    assert str(raised.value) == (
        "plugin 'ordering' failed in sampling_loop_end: "
        "iterations_used=2 but 1 sampling_iteration event(s) arrived"
    )


def test_inversion_count_and_duplicates_in_the_middle_of_what_was_seen():
    # iterations 1, 3, 2, 3: the 2 is below one iteration (3) of the two seen; then 3 again
    report = report_of((0, 1, 1), (0, 3, 2), (0, 2, 3), (0, 3, 4))
    assert report.iterations == [1, 3, 2, 3]
    assert report.inversions == [(3, 2)] and report.inversion_count == 1
    assert report.duplicates == [3]
