"""``samplehooks report``: records with per-attempt outcomes, totals, per-prompt rows, pass@k."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sampling_core import ScriptedBackend
from sampling_core.runs import run_batch_sync
from sampling_core.runs.reports.report import build_report
from sampling_core.runs.stats.passk import pass_at_k
from tests.support.reliability_helpers import invoke
from tests.support.runs_helpers import records, write_config, write_dataset

MIXED = ["a short answer", "an answer that is much too long for the check"]


def passk_run(tmp_path: Path, count: int = 6) -> Path:
    dataset = write_dataset(tmp_path / "data.jsonl", count, zebra_every=3)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": MIXED},
        budgets={"loop_budget": 1, "concurrency_budget": 4, "early_exit": False},
    )
    out = tmp_path / "out"
    run_batch_sync(config, out)
    return out


def test_records_carry_sampling_id_and_each_attempts_outcome(tmp_path: Path) -> None:
    out = passk_run(tmp_path)
    for record in records(out):
        assert len(record["sampling_id"]) == 16
        each = record["attempts"]["each"]
        assert len(each) == 4 and record["attempts"]["cancelled"] == 0  # no early exit
        assert {e["subsample"] for e in each} == {0, 1, 2, 3}
        for entry in each:
            assert entry["attempt"] == 1 and entry["input_tokens"] > 0
            assert entry["output_tokens"] == len(entry["text"].split())
            assert entry["cost_usd"] is None  # the scripted backend has no price
            if not entry["passed"]:
                assert entry["unmet"] and len(entry["unmet"]) == len(entry["failed"])
        usage = record["usage"]
        assert usage["input_tokens"] == sum(e["input_tokens"] for e in each)
        assert usage["cost_usd"] is None and usage["latency_s"] >= 0


def test_report_json_has_totals_rows_and_pass_at_k(tmp_path: Path) -> None:
    out = passk_run(tmp_path)
    result = invoke("report", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["totals"]["done"] == 6 and data["totals"]["early_exit"] is False
    assert data["totals"]["cost_usd"] is None and data["totals"]["unpriced_prompts"] == 6
    rows = {row["key"]: row for row in data["prompts"]}
    assert set(rows) == {f"p{i}" for i in range(6)}
    counts = []
    for record in records(out):
        row = rows[record["key"]]
        assert row["sampling_id"] == record["sampling_id"]
        assert row["attempts"] == 4 and row["status"] == record["status"]
        c = sum(e["passed"] for e in record["attempts"]["each"])
        assert row["passes"] == c
        counts.append(c)
        if record["key"] in ("p0", "p3"):  # these need "zebra": nothing passes
            assert row["status"] == "failed" and "contains 'zebra'" in " ".join(
                row["unmet_requirements"]
            )
    table = data["pass_at_k"]
    assert [p["k"] for p in table] == [1, 2, 4]
    for p in table:
        expected = sum(pass_at_k(4, c, p["k"]) for c in counts) / len(counts)
        assert p["value"] == pytest.approx(expected, abs=1e-6)
        assert p["low"] <= p["value"] <= p["high"]
    assert invoke("report", out, "--json").stdout == result.stdout  # reproducible


def test_report_json_has_pass_hat_k_of_hand_computed_values(tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": k, "prompt": k}) + "\n" for k in "abc"))
    passing = {"a": 4, "b": 2, "c": 1}  # subsamples below this number pass

    def reply(request) -> str:
        passes = request.iteration.subsample_index < passing[request.messages[0]["content"]]
        return "short" if passes else "far too many words"

    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        requirements=[{"max_words": 2}],
        budgets={"loop_budget": 1, "concurrency_budget": 4, "early_exit": False},
    )
    run_batch_sync(config, tmp_path / "out", backend=ScriptedBackend(reply))
    data = json.loads(invoke("report", tmp_path / "out", "--json").stdout)
    # (n, c) = (4, 4), (4, 2), (4, 1): pass^k = C(c,k)/C(4,k), averaged over the 3 prompts
    hat = {p["k"]: p["value"] for p in data["pass_hat_k"]}
    assert hat == {
        1: round((4 / 4 + 2 / 4 + 1 / 4) / 3, 6),
        2: round((6 / 6 + 1 / 6 + 0) / 3, 6),
        4: round((1 + 0 + 0) / 3, 6),
    }
    assert [p["k"] for p in data["pass_hat_k"]] == [p["k"] for p in data["pass_at_k"]]
    assert all(
        p["prompts"] == 3 and p["low"] <= p["value"] <= p["high"] for p in data["pass_hat_k"]
    )
    text = invoke("report", tmp_path / "out").stdout
    assert "pass^2 " in text and "58.3%" in text  # pass^1 = 7/12


def test_terminal_report_lists_failed_prompts_and_pass_at_k(tmp_path: Path) -> None:
    out = passk_run(tmp_path)
    text = invoke("report", out, "--top", "1").stdout
    assert "pass@1 " in text and "pass@4 " in text
    assert "Prompts not ok (2; the first 1):" in text
    assert "failed p0: " in text.replace("  ", " ") and "p3:" not in text
    assert "Cost: unknown" in text


def test_early_exit_runs_report_no_pass_at_k(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 3)
    config = write_config(tmp_path / "run.yaml", dataset, budgets={"concurrency_budget": 4})
    run_batch_sync(config, tmp_path / "out")
    report = build_report(tmp_path / "out")
    assert report.early_exit and report.pass_at_k == [] and report.pass_hat_k == []
    assert report.as_dict()["pass_at_k"] is None and report.as_dict()["pass_hat_k"] is None
    assert "pass@" not in report.render()


def test_a_run_directory_of_the_old_record_format_is_still_read(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 2)
    config = write_config(tmp_path / "run.yaml", dataset)
    out = tmp_path / "out"
    run_batch_sync(config, out)
    old = {  # as written before records had sampling_id, per-attempt usage and cost
        "seq": 1,
        "key": "p0",
        "line": 1,
        "content_hash": next(r for r in records(out) if r["key"] == "p0")["content_hash"],
        "session": 1,
        "status": "failed",
        "reason": "too long",
        "failed_requirements": ["at most 5 words"],
        "text": "x",
        "attempts": {
            "used": 1,
            "cancelled": 0,
            "passing": 0,
            "stop_reason": "budget_exhausted",
            "each": [
                {"subsample": 0, "attempt": 1, "passed": False, "latency_s": 0.5, "failed": ["x"]}
            ],
        },
        "usage": {"input_tokens": 3, "output_tokens": 9},
        "timings": {"started": "2025-01-01T00:00:00Z", "elapsed_s": 0.6},
    }
    (out / "records.jsonl").write_text(json.dumps(old) + "\n", encoding="utf-8")
    result = invoke("report", out, "--json")
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)["prompts"]
    assert row["sampling_id"] is None and row["cost_usd"] is None
    assert (row["attempts"], row["passes"], row["latency_s"]) == (1, 0, 0.5)
    assert row["unmet_requirements"] == ["at most 5 words"]
    assert "failed p0: at most 5 words" in invoke("report", out).stdout.replace("  ", " ")


def test_report_on_what_is_not_a_run_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "missing"):
        result = invoke("report", target)
        assert result.exit_code == 2
        assert result.stderr.startswith("samplehooks: error: ")
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_without_rows_the_report_keeps_totals_and_only_the_first_prompts_not_ok(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 30)
    config = write_config(
        tmp_path / "run.yaml", dataset, backend={"kind": "scripted", "replies": MIXED[::-1]}
    )
    run_batch_sync(config, tmp_path / "out")
    full = build_report(tmp_path / "out", rows=True, top=100)
    light = build_report(tmp_path / "out", top=3)
    assert len(full.rows) == 30 and light.rows == [] and light.as_dict()["prompts"] == []
    not_ok = sorted((r for r in full.rows if r.status != "ok"), key=lambda r: r.key)
    assert light.failed_count == full.failed_count == len(not_ok) > 3
    assert [r.key for r in light.failed_rows()] == [r.key for r in not_ok[:3]]
    assert light.as_dict()["totals"] == full.as_dict()["totals"]
    assert light.render(top=3) == full.render(top=3)


def test_report_json_written_row_by_row_is_the_whole_report_as_json(tmp_path: Path) -> None:
    out = passk_run(tmp_path)
    whole = json.dumps(build_report(out, rows=True).as_dict(), indent=2) + "\n"
    assert invoke("report", out, "--json").stdout == whole
    empty = tmp_path / "empty"
    run_batch_sync(write_config(tmp_path / "e.yaml", write_dataset(tmp_path / "e.jsonl", 1)), empty)
    (empty / "records.jsonl").write_text("")  # no prompt done yet
    listed = invoke("report", empty, "--json").stdout
    assert listed == json.dumps(build_report(empty, rows=True).as_dict(), indent=2) + "\n"
    assert json.loads(listed)["prompts"] == []
