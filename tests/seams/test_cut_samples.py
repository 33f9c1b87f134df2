"""pass@k's samples are subsamples that finished: a subsample a plugin's stop (or any
cancellation) cut before it passed or spent its loop budget is no sample, never a failed
one (its n is reduced, as for a subsample that never started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hook_specs import StopSampling, hookimpl
from sampling_core.runs import run_batch
from sampling_core.runs.reports.report import build_report
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


class StopAtTheFourthAttempt:
    """Ends each call at its fourth attempt (a ceiling, say)."""

    affects_results = False

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        self.seen[payload.sampling_id] = self.seen.get(payload.sampling_id, 0) + 1
        if self.seen[payload.sampling_id] == 4:
            raise StopSampling("enough")


def finished_subsamples(record: dict[str, Any]) -> int:
    """The record's subsamples that spent their budget of three (every attempt fails)."""
    last: dict[int, int] = {}
    for entry in record["attempts"]["each"]:
        last[entry["subsample"]] = max(last.get(entry["subsample"], 0), entry["attempt"])
    assert any(number < 3 for number in last.values())  # four attempts: one was cut
    return sum(number == 3 for number in last.values())


async def test_subsamples_cut_before_they_finished_are_no_samples(tmp_path: Path) -> None:
    # three attempts a subsample, every attempt fails, the call stopped at its fourth
    # attempt: at most one subsample spent its budget (a failed sample); those cut before
    # (which ones depends on when on_failure started them) are no samples
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        requirements=[{"contains": "zebra"}],
        budgets={
            "loop_budget": 3,
            "concurrency_budget": 3,
            "launch": "on_failure",
            "early_exit": False,
        },
    )
    await run_batch(config, tmp_path / "run", plugins=[StopAtTheFourthAttempt()])
    measured = 0
    for record in records(tmp_path / "run"):
        attempts = record["attempts"]
        assert attempts["used"] == 4
        ran = finished_subsamples(record)
        assert (attempts["samples"]["ran"], attempts["samples"]["passed"]) == (ran, 0)
        measured += ran > 0
    report = build_report(tmp_path / "run").as_dict()
    assert [p["prompts"] for p in report["pass_at_k"] or []] == ([measured] if measured else [])


async def test_a_cut_subsample_casts_no_vote_in_maj_at_k(tmp_path: Path) -> None:
    # a vote (majority: answers are its samples' texts), every answer "no": only the
    # subsamples that spent their budget vote
    dataset = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["no"]},
        requirements=[{"contains": "zebra"}],
        strategy={"name": "majority"},
        budgets={
            "loop_budget": 3,
            "concurrency_budget": 3,
            "launch": "on_failure",
            "early_exit": False,
        },
    )
    await run_batch(config, tmp_path / "run", plugins=[StopAtTheFourthAttempt()])
    (record,) = records(tmp_path / "run")
    ran = finished_subsamples(record)
    assert record["attempts"]["samples"].get("votes") == ([[ran, False]] if ran else None)
