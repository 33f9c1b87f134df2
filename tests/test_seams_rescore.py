"""Rescoring a run whose strategy scores its attempts (``BestOfN(scorer=...)``, a weighted
vote) or whose requirements read the generation itself (``min_confidence``): a rescore
keeps the strategy, so it picks by the scores the run kept, and it never passes an
attempt a check could not judge."""

from __future__ import annotations

from pathlib import Path

import pytest
from runs_helpers import records, write_config, write_dataset

from sampling_core.runs import rescore, run_batch

pytestmark = pytest.mark.anyio


def shortest(text: str) -> float:
    """a scorer: shorter is better"""
    return -float(len(text))


async def test_a_rescore_picks_by_the_scores_the_run_kept(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a much longer answer", "short"]},
        strategy={
            "name": "best_of_n",
            "scorer": {"kind": "python", "function": "test_seams_rescore:shortest"},
        },
        budgets={"concurrency_budget": 2},
    )
    await run_batch(config, tmp_path / "run")
    (source,) = records(tmp_path / "run")
    assert source["text"] == "short"
    await rescore(tmp_path / "run", tmp_path / "again")
    (again,) = records(tmp_path / "again")
    assert again["text"] == "short"
    assert sorted(e["score"] for e in again["attempts"]["each"]) == sorted(
        e["score"] for e in source["attempts"]["each"]
    )
