"""A consensus vote (or an early exit) ends a call before every subsample ran, then a
rescore: what the run did and the rescore cannot change (subsamples cancelled, and why;
subsamples never started) is the run's in the rescored records and report, as its tokens
and timings are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.report import build_report
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

FACTS = ("used", "cancelled", "cancelled_because", "not_started", "stop_reason")


def seven(request: GenerationRequest) -> str:
    return "7"


@pytest.mark.parametrize(
    ("strategy", "budgets"),
    [
        # one at a time: after three 7s of five nothing can change the pick, two never start
        ({"name": "majority", "consensus": 1.0}, {"launch": "on_failure"}),
        # all at once, and the first pass cancels the others (a latency makes them overlap)
        ("rejection", {}),
    ],
    ids=["consensus", "early_exit"],
)
async def test_a_rescore_keeps_what_the_run_did_not_run(
    tmp_path: Path, strategy: Any, budgets: dict[str, Any]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    source = write_config(
        tmp_path / "a.yaml",
        dataset,
        requirements=[{"matches": r"^\d+$"}],
        strategy=strategy,
        budgets={"loop_budget": 1, "concurrency_budget": 5, **budgets},
    )
    await run_batch(source, tmp_path / "a", backend=ScriptedBackend(seven, latency=0.01))
    ran = {r["key"]: {f: r["attempts"].get(f) for f in FACTS} for r in records(tmp_path / "a")}
    assert all(facts["not_started"] or facts["cancelled"] for facts in ran.values())
    await rescore(tmp_path / "a", tmp_path / "b")  # the same checks: nothing changes
    rescored = {r["key"]: {f: r["attempts"].get(f) for f in FACTS} for r in records(tmp_path / "b")}
    assert rescored == ran
    before, after = build_report(tmp_path / "a"), build_report(tmp_path / "b")
    assert after.summary.not_started == before.summary.not_started
    assert after.as_dict()["totals"]["not_started"] == before.as_dict()["totals"]["not_started"]
