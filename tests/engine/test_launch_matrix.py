"""Every call ends: each launch policy, with each selection, strategy and ``early_exit``, on
every way a call can end (nothing passes, a pass, a backend error, ``StopSampling``, the
caller's cancellation).

A subsample waiting for its turn must end too, whatever the call decided meanwhile: one
refused its start (``selection="ordered"`` knows it can no longer win) hands its turn on,
and one that can no longer win stops waiting. ``anyio.fail_after`` below guards against a
hang; it is not a timing assertion (each case takes milliseconds).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from hook_specs import SamplingIterationPayload, StopSampling, hookimpl
from sampling_core import (
    BestOfN,
    GenerationRequest,
    MajorityVote,
    MultiTurn,
    RejectionSampling,
    RepairTemplate,
    Sampler,
    ScriptedBackend,
)
from sampling_core.engine import launch as launch_module
from sampling_core.requirements.checks import contains
from sampling_core.runs import run_batch_sync
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

LOOP, COUNT = 2, 4
HANG_GUARD_S = 30

STRATEGIES = {
    "rejection": RejectionSampling,
    "repair": RepairTemplate,
    "multi_turn": MultiTurn,
    "best_of_n": BestOfN,
    "majority": MajorityVote,
}

PASSES: dict[str, set[tuple[int, int]]] = {
    "none_passes": set(),
    # subsample 1 passes first: under "ordered" subsample 0's second attempt and the later
    # subsamples' starts are refused (a call that once hung)
    "second_passes": {(1, 1)},
    "last_passes_late": {(COUNT - 1, LOOP)},
    "every_attempt_passes": {(i, a) for i in range(COUNT) for a in range(1, LOOP + 1)},
}
ENDINGS = [*PASSES, "backend_error", "stop_sampling", "caller_cancels"]


def where(request: GenerationRequest) -> tuple[int, int]:
    info = request.iteration
    assert info is not None
    return info.subsample_index, info.attempt


class StopsAtSecond:
    """Ends the loop on purpose once two attempts completed."""

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        if payload.sequence == 2:
            raise StopSampling("enough")


async def instant_turns(seconds: float) -> None:
    """The staggered launcher's clock, without waiting: a turn comes at the next checkpoint."""
    await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("selection", ["first", "ordered"])
@pytest.mark.parametrize("launch", ["all", "staggered", "on_failure"])
async def test_every_call_ends(
    launch: str, selection: str, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The matrix's last two axes (``early_exit``, how the call ends) run in one test: a case
    costs milliseconds, a test far more. A failure names its case."""
    monkeypatch.setattr(launch_module, "sleep", instant_turns)
    for early_exit in (True, False):
        for ending in ENDINGS:
            case = f"{launch=} {selection=} {strategy=} {early_exit=} {ending=}"
            await one_call_ends(launch, selection, strategy, early_exit, ending, case)


async def one_call_ends(
    launch: str, selection: str, strategy: str, early_exit: bool, ending: str, case: str
) -> None:
    outer = anyio.CancelScope()

    async def reply(request: GenerationRequest) -> str:
        index, attempt = where(request)
        if ending == "backend_error" and index == 0:
            raise RuntimeError("down")  # not transient: ends subsample 0
        if ending == "caller_cancels" and backend.calls == 3:
            outer.cancel()
            await anyio.sleep_forever()
        return "good" if (index, attempt) in PASSES.get(ending, set()) else "bad"

    backend = ScriptedBackend(reply)
    plugins: list[Any] = [StopsAtSecond()] if ending == "stop_sampling" else []
    results = []
    with anyio.fail_after(HANG_GUARD_S, reason=f"hangs: {case}"):
        with outer:
            results.append(
                await Sampler(backend, plugins=plugins, load_entrypoints=False).sample(
                    "q",
                    requirements=[contains("good")],
                    loop_budget=LOOP,
                    concurrency_budget=COUNT,
                    strategy=STRATEGIES[strategy](),
                    selection=selection,  # type: ignore[arg-type]
                    early_exit=early_exit,
                    launch=launch,  # type: ignore[arg-type]
                )
            )
    if ending == "caller_cancels":
        assert outer.cancelled_caught and not results, case
        return
    (result,) = results
    spent = result.iterations_used + result.cancelled + len(result.errors)
    assert spent <= backend.calls, case
    assert 1 <= COUNT - result.not_started <= COUNT, case
    if ending == "stop_sampling":
        assert result.stop_reason == "stopped_by_plugin", case
        return
    decides_early = early_exit and not STRATEGIES[strategy].runs_whole_budget
    if not decides_early or ending in ("none_passes", "backend_error"):
        # nothing ends the call early: every subsample ran its course
        assert result.not_started == 0 and result.cancelled == 0, case
    assert result.success == (ending not in ("none_passes", "backend_error")), case


@pytest.mark.parametrize("launch", ["staggered", "on_failure"])
async def test_a_subsample_that_can_no_longer_win_stops_waiting_for_its_turn(launch: str) -> None:
    backend = ScriptedBackend(["good"])
    with anyio.fail_after(HANG_GUARD_S, reason="a subsample waited for a turn it cannot use"):
        result = await Sampler(backend, load_entrypoints=False).sample(
            "q",
            requirements=[contains("good")],
            concurrency_budget=COUNT,
            selection="ordered",
            launch=launch,  # type: ignore[arg-type]
            stagger_s=3600,
        )
    # the first subsample's first attempt is the best there can be: nobody else starts
    assert result.success and backend.calls == 1 and result.not_started == COUNT - 1


def test_a_run_with_on_failure_and_ordered_selection_ends(tmp_path: Path) -> None:
    """The same in a batch run from YAML (where the hang held the whole run)."""
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["one two three four five six", "short"]},
        budgets={"loop_budget": 2, "concurrency_budget": COUNT, "launch": "on_failure"},
        selection="ordered",
    )
    done: list[Any] = []
    thread = threading.Thread(
        target=lambda: done.append(run_batch_sync(config, tmp_path / "out")), daemon=True
    )
    thread.start()
    thread.join(HANG_GUARD_S)  # a guard against a hang, not a timing assertion
    assert done, "the run hung"
    assert [r["status"] for r in records(tmp_path / "out")] == ["ok"] * 3
