"""Secrets in URLs: credentials a URL-shaped setting carries are never written or shown.

A key in a backend's base URL query (``?api-key=...``), a user and password in the MLflow
plugin's ``tracking_uri``, a URL with credentials in the environment: none of them reaches
``effective_config.yaml``, ``meta.json``, MLflow params, the run hooks' payloads, log events,
stdout or stderr. The requests still carry them. A resume with the same URL (or another key)
is no result change.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import mlflow.tracking as mlflow_tracking
import pytest
import yaml

from builtin_plugins.mlflow_export import MlflowExporter
from hook_specs import hookimpl
from sampling_core import redaction
from sampling_core.runs import run_batch_sync
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer
from tests.support.reliability_helpers import invoke

pytestmark = pytest.mark.usefixtures("fresh_secrets")
SLOW = pytest.mark.slow  # MLflow: its client and store take seconds

KEY = "qk-PLANTED-0123456789"
PASSWORD = "pw-PLANTED-9876543210"
SHORT = "Zq7x"  # a password too short to be a secret by value: masked as a URL's part


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(tmp_path: Path, base_url: str, *plugins: Any) -> Path:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text("".join(json.dumps({"id": k, "prompt": k}) + "\n" for k in "ab"))
    path = tmp_path / "run.yaml"
    body = {
        "dataset": {"path": str(dataset)},
        "backend": {"kind": "openai", "model": "m", "base_url": base_url},
        "plugins": list(plugins),
    }
    path.write_text(yaml.safe_dump(body))
    return path


def everything_in(folder: Path) -> str:
    return "\n".join(p.read_text("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@SLOW
def test_a_run_writes_and_shows_no_credential_of_any_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    store = f"http://mluser:{SHORT}@127.0.0.1:{closed_port()}/"
    with ScriptedHTTPServer(lambda n, body: Reply()) as server:
        path = config(tmp_path, f"{server.base_url}?api-key={KEY}&api-version=2")
        plugin = f"mlflow:tracking_uri={store}"  # on the command line: argv is recorded too
        result = invoke("run", path, "--out", tmp_path / "run", "--plugin", plugin)
    assert result.exit_code == 0, result.stderr
    assert len(server.arrivals) == 2  # the key still went where it belongs
    shown = everything_in(tmp_path / "run") + result.stdout + result.stderr
    assert KEY not in shown and SHORT not in shown and "mluser" not in shown
    assert "mlflow.unavailable" in result.stderr  # the store was unreachable, and said so
    effective = yaml.safe_load((tmp_path / "run" / "effective_config.yaml").read_text())
    assert effective["backend"]["base_url"].endswith("/v1?api-key=***&api-version=2")
    assert effective["plugins"][0]["options"]["tracking_uri"].startswith("http://***@127.0.0.1")
    settings = json.loads((tmp_path / "run" / "meta.json").read_text())["settings"]["values"]
    assert settings["backend.base_url"].endswith("?api-key=***&api-version=2")


class SeesRunStart:
    def __init__(self) -> None:
        self.seen: list[Any] = []

    @hookimpl
    def run_start(self, payload: Any) -> None:
        self.seen.append(json.dumps([payload.config, payload.settings]))


@SLOW
def test_mlflow_params_and_run_hooks_hold_no_credential_and_a_resume_is_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    watcher = SeesRunStart()
    with ScriptedHTTPServer(lambda n, body: Reply()) as server:
        path = config(tmp_path, f"{server.base_url}?token={KEY}")
        body = yaml.safe_load(path.read_text())
        out = tmp_path / "run"
        run_batch_sync(path, out, plugins=[MlflowExporter(tracking_uri=uri), watcher])
        (out / "records.jsonl").write_text("")  # as if killed before any record
        body["backend"]["base_url"] = f"{server.base_url}?token=another-{KEY}"
        path.write_text(yaml.safe_dump(body))  # another key: no result change
        run_batch_sync(path, out, resume=True, plugins=[watcher])
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("samplehooks")
    [run] = client.search_runs([experiment.experiment_id])
    assert run.data.params["backend.base_url"] == f"{server.base_url}?token=***"
    assert not any(KEY in value for value in run.data.params.values())
    assert len(watcher.seen) == 2 and not any(KEY in seen for seen in watcher.seen)


def test_credentials_of_urls_are_masked_whatever_their_length() -> None:
    cases = {
        "http://user:pw@host:5000/x?api-key=abc&api-version=2": (
            "http://***@host:5000/x?api-key=***&api-version=2"
        ),
        "postgresql://admin@db/x and sqlite:///tmp/mlflow.db": (
            "postgresql://***@db/x and sqlite:///tmp/mlflow.db"
        ),
        "https://h/v1?key=&sig=s1#top": "https://h/v1?key=&sig=***#top",
        "http://[::1]:8080/v1?access_token=t": "http://[::1]:8080/v1?access_token=***",
        "no url, user:pw@host": "no url, user:pw@host",
    }
    for url, masked in cases.items():
        assert redaction.mask_url_credentials(url) == masked


def test_credentials_of_a_url_in_the_environment_are_secrets_everywhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"https://me:{PASSWORD}@tracking.example/")
    redaction.refresh_environment()
    assert redaction.scrub(f"the store said: {PASSWORD} is wrong") == "the store said: *** is wrong"


def test_credentials_of_a_url_in_a_run_config_are_secrets_everywhere(tmp_path: Path) -> None:
    from sampling_core.runs import load_config
    from sampling_core.runs.config.loading import refuse_unwritable

    path = config(
        tmp_path,
        "http://127.0.0.1:1/v1",
        {"name": "mlflow", "options": {"tracking_uri": f"https://me:{PASSWORD}@mlflow.example"}},
    )
    refuse_unwritable(load_config(path, kinds=None))  # what every run does before writing
    assert redaction.scrub(f"refused {PASSWORD}") == "refused ***"
