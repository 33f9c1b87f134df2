"""Rescore respects how each kept text came to be: a text cut by early stop is only the start
of an answer, judged only where its prefix decides, else *not known* (never passed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from builtin_plugins.mlflow_export import metrics_of
from hook_specs import RunEndPayload
from sampling_core import ScriptedBackend
from sampling_core.backends.base import GenerationRequest
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.compare import compare_runs
from sampling_core.runs.reports.report import build_report
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config

pytestmark = pytest.mark.anyio

REPLIES = {"p0": "a", "p1": "b", "p2": "c", "p3": "a b c d e"}  # p3 is cut at "a b"


def reply(request: GenerationRequest) -> str:
    return next(text for key, text in REPLIES.items() if key in request.prompt)


async def source(tmp_path: Path) -> Path:
    """Four prompts, one sample each; ``max_words: 1`` cut p3's reply at ``a b``."""
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": k, "prompt": f"Say {k}"}) + "\n" for k in REPLIES))
    config = write_config(
        tmp_path / "run.yaml",
        data,
        requirements=[{"max_words": 1}],
        budgets={"loop_budget": 1, "concurrency_budget": 1, "early_exit": False},
    )
    await run_batch(config, tmp_path / "src", backend=ScriptedBackend(reply))
    (cut,) = [r for r in records(tmp_path / "src") if r["key"] == "p3"]
    assert cut["attempts"]["each"][0]["text"] == "a b"  # the model was writing "a b c d e"
    assert cut["attempts"]["each"][0]["provenance"]["stopped_by"] == ["at most 1 words"]
    return tmp_path / "src"


async def test_a_cut_attempt_fails_when_a_check_still_in_force_failed_on_its_prefix(
    tmp_path: Path,
) -> None:
    src = await source(tmp_path)
    await rescore(src, tmp_path / "new", requirements=[{"max_words": 3}])  # max_words: 1 stays
    statuses = {r["key"]: r["status"] for r in records(tmp_path / "new")}
    assert statuses == {"p0": "ok", "p1": "ok", "p2": "ok", "p3": "failed"}
    report = build_report(tmp_path / "new")
    assert [(p.k, p.value) for p in report.pass_at_k] == [(1, 0.75)]
    assert report.not_known == (0, 0)


async def test_a_cut_attempt_the_new_checks_cannot_decide_is_not_known_never_passed(
    tmp_path: Path,
) -> None:
    src = await source(tmp_path)
    new_config = yaml.safe_load((tmp_path / "run.yaml").read_text())
    new_config["requirements"] = [{"max_words": 3}]  # replaces max_words: 1
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(new_config))

    summary = await rescore(src, tmp_path / "new", config=tmp_path / "new.yaml")

    (cut,) = [r for r in records(tmp_path / "new") if r["key"] == "p3"]
    entry = cut["attempts"]["each"][0]
    assert entry["not_known"] is True and entry["passed"] is False  # never passed
    assert cut["status"] != "ok" and cut["attempts"]["not_known"] == 1
    assert cut["attempts"]["samples"] == {"ran": 0, "passed": 0, "not_known": 1}
    assert summary.not_known == 1 and "not known: 1 attempts" in summary.render()

    report = build_report(tmp_path / "new")
    assert report.not_known == (1, 1)
    (at_1,) = report.pass_at_k
    assert at_1.prompts == 3  # the undecided sample is left out: n reduced
    assert [(p.k, p.value) for p in report.pass_at_k_if_failed] == [(1, 0.75)]
    text = report.render()
    assert "not known: 1 samples of 1 prompts" in text and "75.0%" in text
    data: dict[str, Any] = report.as_dict()
    assert data["pass_at_k_not_known"]["samples"] == 1

    view = run_data(tmp_path / "new")
    (row,) = [p for p in view["prompts"] if p["key"] == "p3"]
    assert row["not_known"] == 1
    assert [s["outcome"] for lane in row["lanes"] for s in lane["steps"]] == ["not_known"]


async def test_no_surface_shows_a_bare_pass_at_k_when_samples_are_not_known(
    tmp_path: Path,
) -> None:
    """The issue's example: 3 known samples pass, 1 is not known; pass@1 over the known ones
    is 1.0, and every surface gives it with its bounds [0.75, 1.0] and the count not known."""
    src = await source(tmp_path)
    new_config = yaml.safe_load((tmp_path / "run.yaml").read_text())
    new_config["requirements"] = [{"max_words": 3}]
    (tmp_path / "new.yaml").write_text(yaml.safe_dump(new_config))
    await rescore(src, tmp_path / "new", config=tmp_path / "new.yaml")

    report = build_report(tmp_path / "new")
    (at_1,) = report.pass_at_k
    assert (at_1.value, at_1.not_known, at_1.if_failed, at_1.if_passed) == (1.0, 1, 0.75, 1.0)
    for line in report.render().splitlines():
        if "100.0%" in line:
            assert "(1 not known: 75.0% to 100.0%)" in line, line
    expected = {"not_known": 1, "if_failed": 0.75, "if_passed": 1.0}
    (entry,) = report.as_dict()["pass_at_k"]
    assert expected.items() <= entry.items()
    (hat,) = report.as_dict()["pass_hat_k"]
    assert expected.items() <= hat.items()
    (viewed,) = run_data(tmp_path / "new")["pass_at_k"]
    assert expected.items() <= viewed.items()
    payload = RunEndPayload(
        run_dir="/r",
        session=1,
        totals={},
        pass_at_k=[entry],
        pass_hat_k=None,
        interrupted=False,
        elapsed_s=1.0,
    )
    assert metrics_of(payload) == {
        "pass_at_1": 1.0,
        "pass_at_1_if_failed": 0.75,
        "pass_at_1_if_passed": 1.0,
        "pass_at_1_left_out": 1.0,  # p3: in the bounds, not in the estimate (none known)
    }
    compared = compare_runs(src, tmp_path / "new")
    (note,) = [n for n in compared.notes if "not known" in n]
    assert "B has 1 samples not known" in note and "(1 not known: 75.0% to 100.0%)" in note
    assert "(1 not known: 75.0% to 100.0%)" in compared.render()
