"""Early stop, a rescore that cannot judge the cut answers, then pass@k and pass^k: a prompt
with k samples but fewer than k of them known is in a k's bounds (its samples not known
counted failed, then passed) and not in its estimate, so the estimate may fall outside the
bounds. Each such k counts those prompts and says so beside the number, on every surface;
never a number outside its own bounds with nothing said."""

from __future__ import annotations

from pathlib import Path

import pytest

from builtin_plugins.mlflow_export import metrics_of
from hook_specs import RunEndPayload
from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.compare import compare_runs
from sampling_core.runs.reports.report import build_report
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

LONG = "one two three four five six seven"  # cut by max_words 5 after its sixth word
REPLIES = {"Question number 0?": ["yes"] * 4, "Question number 1?": ["no", LONG, LONG, LONG]}


def reply(request: GenerationRequest) -> str:
    assert request.iteration is not None
    return REPLIES[request.prompt][request.iteration.subsample_index]


async def test_an_estimate_over_fewer_prompts_than_its_bounds_says_so(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    budgets = {"concurrency_budget": 4, "early_exit": False}
    source = write_config(
        tmp_path / "a.yaml", dataset, requirements=[{"max_words": 5}], budgets=budgets
    )
    await run_batch(source, tmp_path / "a", backend=ScriptedBackend(reply))
    # without max_words, whether the cut answers say "yes" later is not known
    yes = write_config(
        tmp_path / "b.yaml", dataset, requirements=[{"contains": "yes"}], budgets=budgets
    )
    await rescore(tmp_path / "a", tmp_path / "b", config=yes)
    samples = {r["key"]: r["attempts"]["samples"] for r in records(tmp_path / "b")}
    assert samples == {
        "p0": {"ran": 4, "passed": 4, "not_known": 0},
        "p1": {"ran": 1, "passed": 0, "not_known": 3},
    }
    report = build_report(tmp_path / "b")
    data = report.as_dict()
    # pass^2: p0 alone has two known samples, 1.0; the bounds are over p0 and p1, whose one
    # known sample failed: (1 + 0) / 2 counted failed, (1 + C(3,2)/C(4,2)) / 2 passed
    at_1, at_2, at_4 = data["pass_hat_k"]
    assert (at_2["value"], at_2["prompts"], at_2["left_out"]) == (1.0, 1, 1)
    assert (at_2["if_failed"], at_2["if_passed"]) == (0.5, 0.75)  # 1.0 is outside them
    assert (at_4["prompts"], at_4["left_out"]) == (1, 1)
    assert (at_1["prompts"], "left_out" in at_1) == (2, False)  # both have a known sample
    assert at_1["if_failed"] <= at_1["value"] <= at_1["if_passed"]
    said = "(bounds over 2 prompts, the estimate over 1: 1 with fewer than 2 known samples)"
    lines = [line for line in report.render().splitlines() if line.strip().startswith("pass")]
    assert sum(said in line for line in lines) == 2  # pass@2 and pass^2
    view = run_data(tmp_path / "b")
    assert [p.get("left_out") for p in view["pass_at_k"]] == [None, 1, 1]
    # the page shows the note the report writes (one rule: PassAtK.note), not a copy of it
    notes = {
        f"pass{op}{p.k}": p.note()
        for op, t in (("@", report.pass_at_k), ("^", report.pass_hat_k))
        for p in t
    }
    shown = {
        f"pass{op}{e['k']}": e["note"]
        for op, t in (("@", view["pass_at_k"]), ("^", view["pass_hat_k"]))
        for e in t
    }
    assert shown == notes and said in shown["pass^2"]
    assert said in compare_runs(tmp_path / "a", tmp_path / "b").render()
    ended = {"run_dir": "/r", "session": 1, "interrupted": False, "elapsed_s": 1.0}
    payload = RunEndPayload(**ended, totals={}, pass_at_k=None, pass_hat_k=data["pass_hat_k"])
    logged = metrics_of(payload)  # MLflow's
    assert (logged["pass_hat_2"], logged["pass_hat_2_left_out"]) == (1.0, 1.0)
    assert "pass_hat_1_left_out" not in logged
