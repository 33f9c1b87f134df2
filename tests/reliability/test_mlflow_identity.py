"""The ``mlflow`` plugin ties an MLflow run to a samplehooks run by the run's identity.

A run's identity (``run_id``) is made with the run and kept in its ``meta.json``: a resume
continues its MLflow run, and a new run made in the path of a deleted one is another run,
with an MLflow run of its own (not the old one's params and steps). Params are named by
their settings' paths, readably (``backend.resolved.model``, not ``backend _resolved_.model``).
Against a real tracking store: an SQLite file in the test's folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import mlflow.tracking as mlflow_tracking
import pytest

from builtin_plugins.mlflow_export import RUN_DIR_TAG, RUN_ID_TAG, MlflowExporter
from hook_specs import hookimpl
from sampling_core.runs import run_batch_sync
from tests.support.runs_helpers import write_config

pytestmark = pytest.mark.slow  # a real tracking store: MLflow's migrations take seconds


class SeesRunIds:
    def __init__(self) -> None:
        self.seen: list[str | None] = []

    @hookimpl
    def run_start(self, payload: Any) -> None:
        self.seen.append(payload.run_id)


def runs_of(uri: str) -> list[Any]:
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("samplehooks")
    return list(client.search_runs([experiment.experiment_id], order_by=["attributes.start_time"]))


def run_id_of(out: Path) -> str:
    return json.loads((out / "meta.json").read_text())["run_id"]


def test_a_new_run_in_a_reused_path_is_another_mlflow_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": k, "prompt": k}) + "\n" for k in "abc"))
    out, watcher = tmp_path / "run", SeesRunIds()
    first_config = write_config(tmp_path / "first.yaml", dataset, seed=1)
    run_batch_sync(first_config, out, plugins=[MlflowExporter(tracking_uri=uri), watcher])
    first_id = run_id_of(out)
    run_batch_sync(  # a resume: the same run, the same MLflow run
        first_config, out, resume=True, plugins=[MlflowExporter(tracking_uri=uri), watcher]
    )
    shutil.rmtree(out)  # the run is deleted; another one is made in its place
    second_config = write_config(tmp_path / "second.yaml", dataset, seed=2)
    run_batch_sync(second_config, out, plugins=[MlflowExporter(tracking_uri=uri), watcher])
    second_id = run_id_of(out)

    assert first_id != second_id and watcher.seen == [first_id, first_id, second_id]
    old, new = runs_of(uri)
    assert old.data.tags[RUN_ID_TAG] == first_id and new.data.tags[RUN_ID_TAG] == second_id
    assert old.data.tags[RUN_DIR_TAG] == new.data.tags[RUN_DIR_TAG] == str(out)
    assert (old.data.params["seed"], new.data.params["seed"]) == ("1", "2")
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    steps = [[m.step for m in client.get_metric_history(r.info.run_id, "ok")] for r in (old, new)]
    assert steps == [[1, 2], [1]]  # the new run starts at its own first session


def test_params_are_named_by_their_settings_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps({"id": "a", "prompt": "a"}) + "\n")
    out = tmp_path / "run"
    run_batch_sync(
        write_config(tmp_path / "run.yaml", dataset),
        out,
        plugins=[MlflowExporter(tracking_uri=uri)],
    )
    [run] = runs_of(uri)
    params = run.data.params
    settings = json.loads((out / "meta.json").read_text())["settings"]["values"]
    assert "backend (resolved).model" in settings and len(params) == len(settings)
    assert params["backend.resolved.model"] == "scripted"
    assert params["budgets.loop_budget"] == str(settings["budgets.loop_budget"])
    assert not [name for name in params if "_resolved_" in name or " " in name or "(" in name]
