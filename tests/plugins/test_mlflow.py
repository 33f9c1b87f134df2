"""The ``mlflow`` plugin against a real MLflow tracking store: an SQLite file in the test's
temporary directory (no server, no network), read back with ``MlflowClient``."""

from __future__ import annotations

import csv
import json
import os
import signal
import sqlite3
import subprocess
import time
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import mlflow.tracking as mlflow_tracking  # the mlflow extra is part of the test extra
import pytest

from builtin_plugins.mlflow_export import RUN_DIR_TAG, MlflowExporter, metrics_of, status_of
from hook_specs import RunEndPayload
from sampling_core import ScriptedBackend
from sampling_core.runs import run_batch_sync
from sampling_core.runs.reports.report import build_report
from tests.support.interrupt_helpers import python_command
from tests.support.runs_helpers import records, write_config

SLOW = pytest.mark.slow  # a real tracking store: MLflow's migrations take seconds

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def the_run(uri: str, run_dir: Path) -> Any:
    """The one MLflow run tagged with ``run_dir``."""
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("samplehooks")
    [run] = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{RUN_DIR_TAG}` = '{run_dir}'"
    )
    return client, run


def history(client: Any, run: Any, metric: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, metric)]


def test_the_entry_point_and_the_extra() -> None:
    target = PYPROJECT["project"]["entry-points"]["samplehooks"]["mlflow"]
    assert EntryPoint("mlflow", target, "samplehooks").load() is MlflowExporter
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert any(req.startswith("mlflow-skinny") for req in extras["mlflow"])
    assert "samplehooks[mlflow]" in extras["test"]
    assert MlflowExporter.affects_results is False


def end(**fields: Any) -> RunEndPayload:
    base = {"run_dir": "/r", "session": 2, "pass_at_k": None, "pass_hat_k": None}
    return RunEndPayload(**{**base, "interrupted": False, "elapsed_s": 1.0, **fields})


def test_the_metrics_and_the_final_status_of_a_session() -> None:
    totals = {"success_rate": 0.5, "ok": 1, "failed": 1, "error": 0, "input_tokens": 7}
    priced = {**totals, "output_tokens": 9, "cost_usd": 0.25, "done": 2}
    passk = [{"k": 1, "value": 0.5, "low": 0.0, "high": 1.0, "prompts": 2}]
    hat = [{"k": 1, "value": 0.5}, {"k": 2, "value": 0.25}]
    maj = [{"k": 1, "value": 0.4}]
    assert metrics_of(end(totals=priced, pass_at_k=passk, pass_hat_k=hat, maj_at_k=maj)) == {
        "success_rate": 0.5,
        "ok": 1.0,
        "failed": 1.0,
        "error": 0.0,
        "input_tokens": 7.0,
        "output_tokens": 9.0,
        "cost_usd": 0.25,
        "pass_at_1": 0.5,
        "pass_hat_1": 0.5,
        "pass_hat_2": 0.25,
        "maj_at_1": 0.4,
    }
    unknown = metrics_of(end(totals={**totals, "cost_usd": None}))
    assert "cost_usd" not in unknown and "pass_at_1" not in unknown  # unknown is not 0
    assert status_of(end(totals={})) == "FINISHED"
    assert status_of(end(totals={}, interrupted=True)) == "KILLED"
    assert status_of(end(totals={}, interrupted=True, error="OSError: disk full")) == "FAILED"


@SLOW
def test_a_run_and_its_resume_are_one_mlflow_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": k, "prompt": k}) + "\n" for k in "abcdef"))
    passing = dict(zip("abcdef", (2, 2, 1, 1, 0, 2), strict=True))  # passing subsamples

    def reply(request: Any) -> str:
        ok = request.iteration.subsample_index < passing[request.messages[0]["content"]]
        return "short" if ok else "far too many words"

    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        requirements=[{"max_words": 2}],
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        strategy="majority",  # its answers vote: maj@k
    )
    out, uri = tmp_path / "run", store(tmp_path)
    backend = ScriptedBackend(reply)
    run_batch_sync(config, out, backend=backend, plugins=[MlflowExporter(tracking_uri=uri)])
    client, first = the_run(uri, out)
    assert first.info.status == "FINISHED" and first.info.run_name == "run"
    assert history(client, first, "ok") == [(1, 5.0)]
    # as if the run was killed after 2 records: the resume continues the same MLflow run
    kept = (out / "records.jsonl").read_text().splitlines(keepends=True)[:2]
    (out / "records.jsonl").write_text("".join(kept))
    exporter = MlflowExporter(tracking_uri=uri)
    run_batch_sync(config, out, backend=backend, resume=True, plugins=[exporter])
    assert exporter.problems == []
    client, run = the_run(uri, out)
    assert run.info.run_id == first.info.run_id and run.info.status == "FINISHED"
    assert run.data.tags[RUN_DIR_TAG] == str(out)
    metrics = run.data.metrics
    assert history(client, run, "ok") == [(1, 5.0), (2, 5.0)]  # one value per session
    assert (metrics["failed"], metrics["error"], metrics["success_rate"]) == (1.0, 0.0, 5 / 6)
    totals = build_report(out).as_dict()["totals"]
    assert (metrics["input_tokens"], metrics["output_tokens"]) == (
        totals["input_tokens"],
        totals["output_tokens"],
    )
    assert "cost_usd" not in metrics  # the scripted backend has no price: unknown, not 0
    # (n, c) = (2,2), (2,2), (2,1), (2,1), (2,0), (2,2)
    assert metrics["pass_at_1"] == pytest.approx(8 / 12, abs=1e-6)
    assert metrics["pass_at_2"] == pytest.approx(5 / 6, abs=1e-6)
    assert metrics["pass_hat_1"] == pytest.approx(8 / 12, abs=1e-6)
    assert metrics["pass_hat_2"] == pytest.approx(3 / 6, abs=1e-6)
    # votes: "short" passes, the long answer fails; two tied answers score half
    assert metrics["maj_at_1"] == pytest.approx(4 / 6, abs=1e-6)
    assert metrics["maj_at_2"] == pytest.approx(4 / 6, abs=1e-6)
    settings = json.loads((out / "meta.json").read_text())["settings"]["values"]
    params = run.data.params
    assert params["budgets.concurrency_budget"] == "2"
    assert params["requirements"] == json.dumps([{"max_words": 2}])
    assert len(params) == len(settings)
    # the report and the per-prompt table, as artifacts
    folder = Path(client.download_artifacts(run.info.run_id, "samplehooks", str(tmp_path)))
    assert (
        json.loads((folder / "report.json").read_text()) == build_report(out, rows=True).as_dict()
    )
    assert "pass^2" in (folder / "report.txt").read_text()
    with (folder / "prompts.csv").open(newline="") as table:
        rows = list(csv.DictReader(table))
    assert sorted(row["key"] for row in rows) == list("abcdef")
    # nothing was written into the run directory
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "effective_config.yaml",
        "meta.json",
        "progress.json",
        "records.jsonl",
        "texts.jsonl",
    ]


@SLOW
@pytest.mark.parametrize("trouble", ["unreachable", "locked"])
def test_an_unusable_tracking_store_is_a_warning_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trouble: str
) -> None:
    monkeypatch.chdir(tmp_path)
    from structlog.testing import capture_logs

    if trouble == "unreachable":  # a file where the store's folder should be
        (tmp_path / "not-a-folder").write_text("")
        uri = f"sqlite:///{tmp_path / 'not-a-folder' / 'mlflow.db'}"
    else:  # another process holds the store's lock for the whole run
        uri = store(tmp_path)
        holder = sqlite3.connect(tmp_path / "mlflow.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": k, "prompt": k}) + "\n" for k in "abc"))
    config = write_config(tmp_path / "run.yaml", dataset)
    exporter = MlflowExporter(tracking_uri=uri)
    with capture_logs() as logs:
        summary = run_batch_sync(config, tmp_path / "run", plugins=[exporter])
    assert summary.complete and summary.ok == 3
    assert sorted(r["key"] for r in records(tmp_path / "run")) == ["a", "b", "c"]
    [problem] = exporter.problems  # run_start failed; run_end had no MLflow run to end
    assert problem.startswith("run_start: ")
    [warning] = [e for e in logs if e["event"] == "mlflow.unavailable"]
    assert warning["log_level"] == "warning" and warning["tracking_uri"] == uri


def checkout_site(folder: Path) -> Path:
    """This checkout's distribution metadata (its entry points, ``mlflow`` included), as an
    installer writes it: a subprocess with it first on ``PYTHONPATH`` finds the plugins of
    this checkout by name, whatever is installed."""
    info = folder / "samplehooks-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: samplehooks\nVersion: 0.1.0\n")
    lines = []
    for group, entries in PYPROJECT["project"]["entry-points"].items():
        lines += [f"[{group}]", *(f"{name} = {target}" for name, target in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return folder


@SLOW
def test_ctrl_c_then_resume_from_the_command_line(tmp_path: Path) -> None:
    uri = store(tmp_path)
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(
        "".join(json.dumps({"id": f"p{i}", "prompt": "q"}) + "\n" for i in range(40))
    )
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.05},
        plugins=["recorder", {"name": "mlflow", "options": {"tracking_uri": uri}}],
        run={"max_concurrent_prompts": 2},
    )
    out = tmp_path / "run"
    paths = [checkout_site(tmp_path / "site"), ROOT]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}
    command = python_command("-m", "sampling_core.cli", "run", str(config), "--out", str(out))
    proc = subprocess.Popen(command, env=env, cwd=tmp_path, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    lines = out / "records.jsonl"
    while len(lines.read_bytes().splitlines() if lines.exists() else []) < 3:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    written = [json.loads(line)["key"] for line in lines.read_text().splitlines()]
    assert 3 <= len(written) < 40 and len(set(written)) == len(written)
    events = [json.loads(line) for line in (out / "events.jsonl").open()]
    ends = [e["payload"] for e in events if e["hook"] == "prompt_end"]
    ended = [end["key"] for end in ends if end["status"] != "interrupted"]
    assert sorted(ended) == sorted(written)  # one prompt_end per record
    started = [e["payload"]["key"] for e in events if e["hook"] == "prompt_start"]
    assert sorted(end["key"] for end in ends) == sorted(started)  # in flight: interrupted
    assert events[-1]["hook"] == "run_end" and events[-1]["payload"]["interrupted"] is True
    client, run = the_run(uri, out)
    assert run.info.status == "KILLED"
    assert history(client, run, "ok") == [(1, float(len(written)))]
    done = subprocess.run([*command, "--resume"], env=env, cwd=tmp_path, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert sorted(r["key"] for r in records(out)) == sorted(f"p{i}" for i in range(40))
    client, again = the_run(uri, out)
    assert again.info.run_id == run.info.run_id and again.info.status == "FINISHED"
    assert history(client, again, "ok") == [(1, float(len(written))), (2, 40.0)]
