"""pass@k counts each prompt's first samples: ``--retry-failed`` is reported beside it, never
mixed in; and a prompt's samples are counted whole, however many (no silent cap)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sampling_core import ScriptedBackend
from sampling_core.runs import run_batch_sync
from sampling_core.runs.reports.report import build_report
from sampling_core.runs.store.caps import MAX_LIST_ITEMS
from sampling_core.view import run_data
from tests.support.reliability_helpers import invoke
from tests.support.runs_helpers import records, write_config, write_dataset

PROMPTS, SAMPLES = 50, 4
PASSK = {"loop_budget": 1, "concurrency_budget": SAMPLES, "early_exit": False}


def _first_pass_then_all(tmp_path: Path) -> tuple[Path, Path]:
    """A run whose first session passes every sample of 1 prompt in 10 (true pass@1 = 0.10),
    then ``--retry-failed`` with a backend that passes every sample."""
    dataset = write_dataset(tmp_path / "data.jsonl", PROMPTS)
    config = write_config(tmp_path / "run.yaml", dataset, budgets=PASSK)

    def tenth(request: Any) -> str:
        number = int(str(request.messages[-1]["content"]).split()[2].rstrip("?"))
        return "short" if number % 10 == 0 else "far too many words for the five word check"

    out = tmp_path / "out"
    run_batch_sync(config, out, backend=ScriptedBackend(tenth))
    return config, out


def test_retry_failed_does_not_inflate_pass_at_k(tmp_path: Path) -> None:
    config, out = _first_pass_then_all(tmp_path)
    before = build_report(out)
    assert [(p.k, p.value, p.prompts) for p in before.pass_at_k] == [
        (1, 0.1, PROMPTS),
        (2, 0.1, PROMPTS),
        (4, 0.1, PROMPTS),
    ]
    assert before.retries is None

    run_batch_sync(config, out, resume=True, retry_failed=True, backend=ScriptedBackend(["ok"]))
    assert len(records(out)) == PROMPTS + 45  # every failed prompt was sampled again
    after = build_report(out)
    assert after.pass_at_k == before.pass_at_k  # the first samples, not the retries'
    assert after.pass_hat_k == before.pass_hat_k and before.pass_hat_k[0].value == 0.1
    assert after.summary.ok == PROMPTS  # the outcome: every prompt's latest record
    retries = after.retries
    assert retries is not None
    assert (retries.prompts, retries.records, retries.now_ok) == (45, 45, 45)
    assert [(p.k, p.value, p.prompts) for p in retries.pass_at_k] == [
        (1, 1.0, 45),
        (2, 1.0, 45),
        (4, 1.0, 45),
    ]

    data = json.loads(invoke("report", out, "--json").stdout)
    assert [p["value"] for p in data["pass_at_k"]] == [0.1, 0.1, 0.1]
    assert data["retries"]["prompts"] == 45 and data["retries"]["now_ok"] == 45
    assert [p["value"] for p in data["retries"]["pass_at_k"]] == [1.0, 1.0, 1.0]
    text = invoke("report", out).stdout
    assert "each prompt's first samples" in text
    assert "Retried (--retry-failed): 45 prompts sampled again (45 more records)" in text
    assert "  pass@1    10.0%" in text and "    pass@1   100.0%" in text
    assert "retried 45 prompts (--retry-failed)" in after.summary.render()

    page = run_data(out)
    assert [p["value"] for p in page["pass_at_k"]] == [0.1, 0.1, 0.1]
    assert page["retries"]["prompts"] == 45
    assert any("sampled again by --retry-failed" in note for note in page["notes"])


def test_a_prompt_whose_first_record_has_no_sample_counts_its_retry(tmp_path: Path) -> None:
    """An error record holds no sample (the backend failed): the retry's samples are the
    prompt's first."""
    dataset = write_dataset(tmp_path / "data.jsonl", 4)
    config = write_config(tmp_path / "run.yaml", dataset, budgets=PASSK)
    out = tmp_path / "out"

    def outage(request: Any) -> Exception | None:
        return RuntimeError("down") if "number 1?" in request.messages[-1]["content"] else None

    run_batch_sync(config, out, backend=ScriptedBackend(["short"], failures=outage))
    assert [r["key"] for r in records(out) if r["status"] == "error"] == ["p1"]
    assert build_report(out).pass_at_k[0].prompts == 3
    run_batch_sync(config, out, resume=True, retry_failed=True, backend=ScriptedBackend(["short"]))
    report = build_report(out)
    assert report.pass_at_k[0].prompts == 4 and report.pass_at_k[0].value == 1.0


def test_more_samples_than_a_record_keeps_attempts_are_all_counted(tmp_path: Path) -> None:
    samples = MAX_LIST_ITEMS + 100
    dataset = write_dataset(tmp_path / "data.jsonl", 1)
    budgets = {"loop_budget": 1, "concurrency_budget": samples, "early_exit": False}
    config = write_config(tmp_path / "run.yaml", dataset, budgets=budgets)
    out = tmp_path / "out"
    run_batch_sync(config, out, backend=ScriptedBackend(["short", "much too long to pass it"]))
    (record,) = records(out)
    assert len(record["attempts"]["each"]) == MAX_LIST_ITEMS  # cut, and said so
    assert record["attempts"]["samples"] == {"ran": samples, "passed": samples // 2}
    report = build_report(out)
    assert report.pass_at_k[-1].k == 1024 and report.pass_at_k[0].value == pytest.approx(0.5)
    assert report.partial_samples == 0 and "first 1,000 attempts" not in report.render()

    del record["attempts"]["samples"]  # as written before records kept their counts
    (out / "records.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    old = build_report(out)
    assert old.pass_at_k[-1].k == 512 and old.partial_samples == 1
    assert "1 prompts' samples were counted from the first 1,000 attempts" in old.render()
    assert json.loads(invoke("report", out, "--json").stdout)["pass_at_k_partial_prompts"] == 1
