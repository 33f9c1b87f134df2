"""A vote that ends once settled (consensus exit) and the numbers measured over samples
(pass@k, pass^k, maj@k): a settled vote's samples are stopped by a rule that reads them,
so a consensus run measures none of them; with ``early_exit: false`` the vote runs its
whole budget and they are measured over complete samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements import matches
from sampling_core.runs import run_batch
from sampling_core.runs.reports.report import build_report
from sampling_core.strategies import MajorityVote
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

ANSWERS = ["7", "7", "7", "3", "9"]


async def test_without_early_exit_a_consensus_vote_runs_its_whole_budget() -> None:
    backend = ScriptedBackend(lambda r: ANSWERS[r.iteration.subsample_index])
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q",
        requirements=[matches(r"^\d+$")],
        strategy=MajorityVote(consensus=1.0),
        concurrency_budget=5,
        launch="on_failure",
        early_exit=False,
    )
    assert (backend.calls, result.not_started, result.cancelled, result.text) == (5, 0, 0, "7")


@pytest.mark.parametrize("early_exit", [True, False])
async def test_a_consensus_run_measures_samples_only_when_complete(
    tmp_path: Path, early_exit: bool
) -> None:
    dataset = write_dataset(tmp_path / "prompts.jsonl", 4)
    script: dict[str, Any] = {"kind": "scripted", "replies": ["7"]}
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend=script,
        strategy={"name": "majority", "consensus": 1.0},
        budgets={"concurrency_budget": 5, "launch": "on_failure", "early_exit": early_exit},
    )
    await run_batch(config, tmp_path / "run")
    report = build_report(tmp_path / "run").as_dict()
    kept = [r["attempts"] for r in records(tmp_path / "run")]
    if early_exit:  # settled after three sevens (two votes open): two never
        # started, nothing measured
        assert [(a["used"], a["not_started"]) for a in kept] == [(3, 2)] * 4
        assert report["pass_at_k"] is None and report["maj_at_k"] is None
    else:  # every subsample answers: five samples a prompt
        assert [(a["used"], a["not_started"]) for a in kept] == [(5, 0)] * 4
        assert [a["samples"]["ran"] for a in kept] == [5] * 4
        assert report["maj_at_k"] and all(p["prompts"] == 4 for p in report["maj_at_k"])
        assert all(p["prompts"] == 4 for p in report["pass_at_k"])
