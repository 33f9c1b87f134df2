"""A command reads a run once: every full reading of ``records.jsonl`` goes through
``RunDirectory._read_records``, which these tests count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builtin_plugins.mlflow_export import MlflowExporter
from hook_specs import RunEndPayload, hookimpl
from sampling_core.cli.app import app
from sampling_core.runs import run_batch_sync
from sampling_core.runs.store.store import RunDirectory
from tests.support.runs_helpers import write_config, write_dataset

READER = RunDirectory._read_records


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The run directories whose records were read in full, one entry per reading."""
    seen: list[Path] = []

    def counted(self: RunDirectory, scan: Any) -> Iterator[Any]:
        seen.append(self.path)
        return READER(self, scan)

    monkeypatch.setattr(RunDirectory, "_read_records", counted)
    return seen


class RowsReader:
    """A run_end plugin that iterates the rows the payload carries."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.report: dict[str, Any] = {}

    @hookimpl
    def run_end(self, payload: RunEndPayload) -> None:
        self.rows = list(payload.rows)
        self.report = dict(payload.report)


def finished_run(tmp_path: Path) -> Path:
    config = write_config(
        tmp_path / "run.yaml",
        write_dataset(tmp_path / "d.jsonl", 3),
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
    )
    run_batch_sync(config, tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.slow
def test_a_run_with_recorder_tracing_and_mlflow_reads_its_records_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[Path]
) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    config = write_config(
        tmp_path / "run.yaml",
        write_dataset(tmp_path / "d.jsonl", 3),
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        plugins=["recorder", "tracing"],
    )
    rows = RowsReader()
    exporter = MlflowExporter(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    summary = run_batch_sync(config, tmp_path / "run", plugins=[exporter, rows])
    assert reads == [tmp_path / "run"]  # once, for run_end, MLflow and the summary alike
    assert exporter.problems == [] and summary.done == 3
    assert sorted(r["key"] for r in rows.rows) == ["p0", "p1", "p2"]  # in the order written
    assert rows.report["totals"]["done"] == 3 and rows.report["pass_at_k"]
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").open()]
    (end,) = [e["payload"] for e in events if e["hook"] == "run_end"]
    assert "rows" not in end and end["report"]["totals"]["done"] == 3


def test_report_and_view_read_a_run_once(tmp_path: Path, reads: list[Path]) -> None:
    run = finished_run(tmp_path)
    for command in (["report", str(run)], ["report", str(run), "--json"], ["view", str(run)]):
        reads.clear()
        result = CliRunner().invoke(app, command)
        assert result.exit_code == 0, result.output
        assert reads == [run], command


def test_rescore_reads_the_source_once_and_the_new_run_once(
    tmp_path: Path, reads: list[Path]
) -> None:
    run = finished_run(tmp_path)
    reads.clear()
    new = tmp_path / "new"
    result = CliRunner().invoke(
        app, ["rescore", str(run), "--out", str(new), "--require", "max_words:3"]
    )
    assert result.exit_code == 0, result.output
    assert [p.name for p in reads] == ["run", f".new.rescore-{__import__('os').getpid()}"]
    assert "Rescored from" in result.output and (new / "view.html").is_file()


def test_samplehooks_run_reads_its_run_once_for_its_end_and_its_report(
    tmp_path: Path, reads: list[Path]
) -> None:
    config = write_config(
        tmp_path / "run.yaml",
        write_dataset(tmp_path / "d.jsonl", 3),
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        plugins=["tracing"],
    )
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert reads == [tmp_path / "run"] and "pass@1" in result.output


def test_a_resumed_run_is_read_once_and_its_end_counts_the_new_records(
    tmp_path: Path, reads: list[Path]
) -> None:
    from sampling_core.runs import summarize
    from sampling_core.runs.reports.report import build_report

    config = write_config(
        tmp_path / "run.yaml",
        write_dataset(tmp_path / "d.jsonl", 6, zebra_every=3),
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
    )
    out = tmp_path / "run"
    run_batch_sync(config, out, plugins=[RowsReader()])  # the resume's plugins: the same
    full = build_report(out, rows=True).as_dict()
    kept = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    (out / "records.jsonl").write_bytes(b"".join(kept[:2]) + kept[2][:17])  # killed mid-line
    rows = RowsReader()
    reads.clear()
    lines: list[Any] = []

    def every_record(index: Any) -> None:  # found by their offsets, the appended ones too
        count = index.value("SELECT COUNT(*) FROM rec")
        lines.extend(index.read_record(line).key for line in range(1, count + 1))

    summary = run_batch_sync(config, out, resume=True, plugins=[rows], with_index=every_record)
    assert lines == [json.loads(line)["key"] for line in (out / "records.jsonl").open()]
    assert reads == [out]  # once, at the resume's start: its end reads no more
    assert summary.as_dict() == summarize(out).as_dict()
    assert sorted(r["key"] for r in rows.rows) == sorted(r["key"] for r in full["prompts"])
    again = build_report(out, rows=True).as_dict()
    assert (
        rows.report["totals"] == again["totals"] and rows.report["pass_at_k"] == again["pass_at_k"]
    )
    assert {r["key"]: r["status"] for r in rows.rows} == {
        r["key"]: r["status"] for r in again["prompts"]
    }
