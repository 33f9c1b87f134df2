"""Early stop, then a rescore that cannot judge what early stop cut, then pass@k: the
attempts not known are left out of n alike in the record, the report, compare and the view."""

from __future__ import annotations

from pathlib import Path

import pytest

from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.compare import compare_runs
from sampling_core.runs.reports.report import build_report
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

REPLIES = ["one two", "one two three four five six seven", "zebra yes", "a b c d e f g h"]


def reply(request: GenerationRequest) -> str:
    return REPLIES[request.iteration.subsample_index]


async def test_not_known_attempts_leave_pass_at_k_alike_everywhere(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    budgets = {"concurrency_budget": 4, "early_exit": False}
    source = write_config(
        tmp_path / "a.yaml", dataset, requirements=[{"max_words": 5}], budgets=budgets
    )
    await run_batch(source, tmp_path / "a", backend=ScriptedBackend(reply))
    # the cut answers (subsamples 1 and 3) never said whether "zebra" would follow
    zebra = write_config(
        tmp_path / "b.yaml", dataset, requirements=[{"contains": "zebra"}], budgets=budgets
    )
    await rescore(tmp_path / "a", tmp_path / "b", config=zebra)
    for record in records(tmp_path / "b"):
        assert record["attempts"]["samples"] == {"ran": 2, "passed": 1, "not_known": 2}
    report = build_report(tmp_path / "b").as_dict()
    expected = [(1, 0.5), (2, 1.0)]  # n = 2, c = 1 for every prompt
    assert [(p["k"], p["value"]) for p in report["pass_at_k"]] == expected
    view = run_data(tmp_path / "b")
    assert [(p["k"], p["value"]) for p in view["pass_at_k"]] == expected
    compared = compare_runs(tmp_path / "a", tmp_path / "b").as_dict()
    pass_at = [(m["k"], m["b"]) for m in compared["measures"] if m["measure"] == "pass@k"]
    assert pass_at == expected
