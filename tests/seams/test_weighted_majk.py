"""maj@k beside a weighted vote: maj@k counts each sample's answer once (the majority of k
samples), so for a run whose vote weighed answers by a scorer it is not that vote's
accuracy. Every surface says so: the report (text and ``--json``), ``run_end``, MLflow,
``compare`` and the view; a run whose vote counts answers once is not labelled."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from builtin_plugins.mlflow_export import metrics_of
from hook_specs import RunEndPayload
from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.runs.reports.compare import compare_runs
from sampling_core.runs.reports.report import build_report
from sampling_core.view.data import run_data
from tests.support.runs_helpers import write_config, write_dataset

pytestmark = pytest.mark.anyio

ANSWERS = ["3", "3", "7"]  # counted once each: 3 wins; weighed by length: 7 wins


def by_subsample(request: GenerationRequest) -> str:
    return ANSWERS[request.iteration.subsample_index]


def long_sevens(text: str) -> float:
    """weighs a 7 five times as much as any other answer"""
    return 5.0 if text == "7" else 1.0


async def vote(tmp_path: Path, name: str, **strategy: Any) -> Path:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / f"{name}.yaml",
        dataset,
        requirements=[{"matches": r"^\d+$"}],
        strategy={"name": "majority", **strategy},
        budgets={"concurrency_budget": 3, "early_exit": False},
    )
    await run_batch(config, tmp_path / name, backend=ScriptedBackend(by_subsample))
    return tmp_path / name


async def test_maj_at_k_of_a_weighted_vote_is_labelled_unweighted_everywhere(
    tmp_path: Path,
) -> None:
    weight = {"kind": "python", "function": f"{__name__}:long_sevens"}
    weighted = await vote(tmp_path, "weighted", weight=weight)
    counted = await vote(tmp_path, "counted")

    report = build_report(weighted)
    data = report.as_dict()
    # the weight is named by its kind and its options: which python function weighed them
    named = f"python (function={__name__}:long_sevens)"
    assert data["maj_at_k"] and all(
        e["unweighted"] is True and e["run_vote_weight"] == named for e in data["maj_at_k"]
    )
    assert "maj@k, unweighted" in report.render()
    assert f"vote weighed answers by {named}" in report.render()
    ended = {"run_dir": "/r", "session": 1, "interrupted": False, "elapsed_s": 1.0}
    payload = RunEndPayload(
        **ended, totals={}, pass_at_k=None, pass_hat_k=None, maj_at_k=data["maj_at_k"]
    )
    logged = metrics_of(payload)
    assert "maj_at_1_unweighted" in logged and "maj_at_1" not in logged
    view = run_data(weighted)
    assert all(e["unweighted"] is True for e in view["maj_at_k"])

    plain = build_report(counted)
    assert all("unweighted" not in e for e in plain.as_dict()["maj_at_k"])
    assert "unweighted" not in plain.render()
    plain_end = RunEndPayload(
        **ended,
        totals={},
        pass_at_k=None,
        pass_hat_k=None,
        maj_at_k=plain.as_dict()["maj_at_k"],
    )
    assert "maj_at_1" in metrics_of(plain_end)

    compared = compare_runs(counted, weighted)
    as_json = compared.as_dict()
    assert as_json["vote_weight"] == {"a": None, "b": named}
    maj = [m for m in as_json["measures"] if m["measure"] == "maj@k"]
    assert maj and all(m["unweighted"] is True for m in maj)
    text = compared.render()
    assert "maj@1 unweighted" in text
    measured = [line for line in text.splitlines() if " -> " in line]
    assert any("unweighted" in line for line in measured)
    for line in measured:  # a label, then at least one space, then A's figure
        assert re.match(r"  \S.*\S +\d+\.\d% -> ", line), line
    assert f"B's vote weighed answers by {named}; maj@k counts each sample once" in text
    both_counted = compare_runs(counted, counted).as_dict()
    assert all("unweighted" not in m for m in both_counted["measures"])
