"""Rescoring a run whose strategy scores its attempts (``BestOfN(scorer=...)``, a weighted
vote) or whose requirements read the generation itself (``min_confidence``): a rescore
keeps the strategy, so it picks by the scores the run kept, and an attempt a check could
not judge is not known, never passed (``tests/seams/test_rescore_not_kept.py``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from sampling_core import Generation, GenerationRequest, ScriptedBackend
from sampling_core.backends.scripted import scripted_logprobs
from sampling_core.runs import rescore, run_batch
from tests.support.runs_helpers import records, write_config, write_dataset

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
            "scorer": {"kind": "python", "function": f"{__name__}:shortest"},
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


def sure_or_not(request: GenerationRequest) -> Generation:
    """p0 answers with confidence, p1 hesitates (four tokens each, with log-probabilities)."""
    p = 0.99 if "number 0" in request.prompt else 0.3
    tokens = [f"t{i} " for i in range(4)]
    return Generation("".join(tokens), logprobs=scripted_logprobs(tokens, [math.log(p)] * 4))


async def test_a_rescore_judges_min_confidence_by_the_kept_log_probabilities(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    lenient = {"min_confidence": 0.0, "window": 2}  # nothing falls below 0
    config = write_config(tmp_path / "c.yaml", dataset, requirements=[lenient])
    await run_batch(config, tmp_path / "run", backend=ScriptedBackend(sure_or_not))
    assert [r["status"] for r in records(tmp_path / "run")] == ["ok", "ok"]
    strict = {"min_confidence": 1.5, "window": 2}  # between the two answers' (2.3, 0.8)
    await rescore(tmp_path / "run", tmp_path / "strict", requirements=[strict])
    assert {r["key"]: r["status"] for r in records(tmp_path / "strict")} == {
        "p0": "ok",
        "p1": "failed",
    }


async def test_a_rescore_without_kept_log_probabilities_says_min_confidence_is_not_known(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    await run_batch(write_config(tmp_path / "c.yaml", dataset), tmp_path / "run")
    assert [r["status"] for r in records(tmp_path / "run")] == ["ok", "ok"]
    added = {"min_confidence": 0.5}
    await rescore(tmp_path / "run", tmp_path / "new", requirements=[added])
    for record in records(tmp_path / "new"):
        (entry,) = record["attempts"]["each"]
        assert entry["not_known"] is True and not entry["passed"]  # never passed nor failed
        assert record["attempts"]["samples"] == {"ran": 0, "passed": 0, "not_known": 1}
        assert any("needs token log-probabilities" in reason for reason in entry["failed"])


async def test_a_rescore_calibrates_min_confidence_as_the_run_did(tmp_path: Path) -> None:
    # one prompt, four whole answers one after another: two calibrate, the third falls
    # below the threshold they give, the fourth does not
    answers = [(0.99, 0.99, 0.99, 0.99), (0.99, 0.6, 0.6, 0.99), (0.99, 0.5, 0.5, 0.5)]
    answers.append((0.99, 0.99, 0.9, 0.99))

    def reply(request: GenerationRequest) -> Generation:
        probabilities = answers[request.iteration.subsample_index]
        tokens = [f"t{i} " for i in range(4)]
        logprobs = scripted_logprobs(tokens, [math.log(q) for q in probabilities])
        return Generation("".join(tokens), logprobs=logprobs)

    dataset = write_dataset(tmp_path / "d.jsonl", 1)
    blocks: dict[str, Any] = {
        "strategy": {"name": "majority"},
        "budgets": {"concurrency_budget": 4, "launch": "on_failure"},
    }
    lenient = {"min_confidence": 0.0, "window": 2}
    config = write_config(tmp_path / "c.yaml", dataset, requirements=[lenient], **blocks)
    await run_batch(config, tmp_path / "run", backend=ScriptedBackend(reply))
    calibrated = {"min_confidence": "calibrated", "window": 2, "warmup": 2, "keep": 0.5}
    await rescore(tmp_path / "run", tmp_path / "new", requirements=[calibrated])
    (record,) = records(tmp_path / "new")
    passed = {e["subsample"]: e["passed"] for e in record["attempts"]["each"]}
    assert passed == {0: True, 1: True, 2: False, 3: True}
