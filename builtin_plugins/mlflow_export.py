"""The ``mlflow`` plugin: each batch run as one MLflow run, with its settings, totals and report.

Needs the ``mlflow`` extra (``pip install 'samplehooks[mlflow]'``: MLflow's tracking client,
``mlflow-skinny``, and what its SQLite store needs). Name it in a run's config
(``plugins: [{name: mlflow, options: {tracking_uri: "sqlite:///mlflow.db"}}]``) or on the
command line (``--plugin mlflow:tracking_uri=sqlite:///mlflow.db``).

It uses the run hooks only, so it works the same on the local and the Ray executor (the
process that writes the run directory fires them):

* ``run_start``: finds the MLflow run tagged ``samplehooks.run_id`` with this run's identity
  (from its ``meta.json``) in the experiment (a resume continues it; a new run in the path
  of a deleted one is another run, and gets its own), or starts one named after the run
  directory, tagged with both its identity and ``samplehooks.run_dir`` (its absolute
  directory), and logs the run's result settings as params (named by their paths:
  ``backend.model``, ``backend.resolved.model``);
* ``run_end``: logs the metrics ``success_rate``, ``ok``, ``failed``, ``error``,
  ``input_tokens``, ``output_tokens``, ``cost_usd`` (when known), ``cached_calls``,
  ``cached_tokens`` (the response cache's hits, apart), ``pass_at_<k>``,
  ``pass_hat_<k>`` and ``maj_at_<k>`` (when measured; ``maj_at_<k>_unweighted`` for a run
  whose vote weighed answers: maj@k counts each sample once) at step ``session``, and the artifacts
  ``samplehooks/report.json`` (as ``samplehooks report --json`` gives it),
  ``samplehooks/report.txt`` and ``samplehooks/prompts.csv`` (one row per prompt); then
  ends the MLflow run (``KILLED`` when the session was interrupted, ``FAILED`` after a fatal
  error).

Both are ``@background``: the tracking store is written by the background worker, so a slow
store never holds up sampling. A tracking store that cannot be reached or is locked is a
warning (``mlflow.unavailable`` on the ``samplehooks.mlflow`` logger, kept in
:attr:`MlflowExporter.problems`), never a failed run: results are not lost to an exporter.
The plugin writes nothing into the run directory (``affects_results = False``: it may be
added, removed or reconfigured on ``--resume``).
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import structlog

from hook_specs import RunEndPayload, RunStartPayload, background, hookimpl
from sampling_core.errors import exception_text
from sampling_core.redaction import ScrubbedLogger, shown
from sampling_core.runs.reports.report import write_report

__all__ = ["RUN_DIR_TAG", "RUN_ID_TAG", "MlflowExporter", "metrics_of", "status_of"]

RUN_DIR_TAG = "samplehooks.run_dir"
"""The tag naming an MLflow run's samplehooks run directory (its absolute path)."""
RUN_ID_TAG = "samplehooks.run_id"
"""The tag that ties an MLflow run to its samplehooks run: the run's identity (``run_id``
in its ``meta.json``). Runs made before runs had one are found by :data:`RUN_DIR_TAG`."""

logger = ScrubbedLogger(structlog.get_logger("samplehooks.mlflow"))  # a tracking URI's
# credentials, and secrets a store's error echoes, are never shown

_PARAM_VALUE_MAX = 6000  # MLflow's limit on a param's value
_BATCH = 100  # params per log_batch call (MLflow's limit)


class MlflowExporter:
    """Exports each batch run to MLflow: one MLflow run per samplehooks run.

    ``tracking_uri``: where runs go (default: MLflow's own, e.g. ``MLFLOW_TRACKING_URI``);
    ``experiment``: the experiment's name (made when missing); ``run_name``: the MLflow run's
    name (default: the run directory's name).
    """

    affects_results = False  # writes nothing into the run directory

    def __init__(
        self,
        tracking_uri: str | None = None,
        experiment: str = "samplehooks",
        run_name: str | None = None,
    ) -> None:
        if importlib.util.find_spec("mlflow") is None:
            raise ImportError("the mlflow plugin needs MLflow: pip install 'samplehooks[mlflow]'")
        if not isinstance(experiment, str) or not experiment.strip():
            raise ValueError(f"experiment must be a name, not {experiment!r}")
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.run_name = run_name
        self.run_id: str | None = None
        """The MLflow run of this session (``None`` before ``run_start``, or when the
        tracking store could not be used)."""
        self.problems: list[str] = []
        """What went wrong with the tracking store (each also logged as a warning)."""

    # -- the hooks ----------------------------------------------------------------------------

    @hookimpl
    @background
    def run_start(self, payload: RunStartPayload) -> None:
        """Find or start the MLflow run, and log the result settings as params."""
        self.run_id = None
        try:
            client = self._client()
            run = self._find_or_start(client, payload)
            self.run_id = run.info.run_id
            self._log_params(client, run, payload.settings)
        except Exception as exc:
            self._problem("run_start", exc)

    @hookimpl
    @background
    def run_end(self, payload: RunEndPayload) -> None:
        """Log the metrics and the report, then end the MLflow run."""
        if self.run_id is None:
            return
        run_id, self.run_id = self.run_id, None
        try:
            client = self._client()
            self._log_metrics(client, run_id, payload)
            self._log_report(client, run_id, payload)
            client.set_terminated(run_id, status=status_of(payload))
        except Exception as exc:
            self._problem("run_end", exc)

    # -- MLflow ---------------------------------------------------------------------------------

    def _client(self) -> Any:
        from mlflow.tracking import MlflowClient

        return MlflowClient(tracking_uri=self.tracking_uri)

    def _find_or_start(self, client: Any, payload: RunStartPayload) -> Any:
        """The MLflow run of ``payload.run_dir`` in the experiment (made running again), or
        a new one."""
        found = client.get_experiment_by_name(self.experiment)
        experiment_id = (
            found.experiment_id if found is not None else client.create_experiment(self.experiment)
        )
        tags = {RUN_DIR_TAG: payload.run_dir}
        if payload.run_id is not None:
            tags[RUN_ID_TAG] = payload.run_id
        tag, value = (
            (RUN_ID_TAG, payload.run_id) if payload.run_id else (RUN_DIR_TAG, payload.run_dir)
        )
        for run in _runs_tagged(client, experiment_id, tag, value):
            client.update_run(run.info.run_id, status="RUNNING")
            return run
        name = self.run_name or Path(payload.run_dir).name
        return client.create_run(experiment_id, run_name=name, tags=tags)

    def _log_params(self, client: Any, run: Any, settings: dict[str, Any]) -> None:
        """Log each result setting not logged yet (a resume keeps them: they must match)."""
        from mlflow.entities import Param

        logged = run.data.params
        params = []
        for key, value in _param_names(settings).items():
            if key in logged:
                continue
            params.append(Param(key, _param_value(value)))
        for start in range(0, len(params), _BATCH):
            client.log_batch(run.info.run_id, params=params[start : start + _BATCH])

    def _log_metrics(self, client: Any, run_id: str, payload: RunEndPayload) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        values = metrics_of(payload)
        metrics = [Metric(key, value, now, payload.session) for key, value in values.items()]
        client.log_batch(run_id, metrics=metrics)

    def _log_report(self, client: Any, run_id: str, payload: RunEndPayload) -> None:
        """The report (JSON and text) and the per-prompt table, as artifacts, from the
        payload: the run was read once at its end, and its rows are iterated from there (a
        row at a time: they are never all in memory)."""
        with tempfile.TemporaryDirectory(prefix="samplehooks-mlflow-") as folder:
            out = Path(folder)
            with (out / "report.json").open("w", encoding="utf-8") as handle:
                write_report(dict(payload.report), payload.rows, handle)
            (out / "report.txt").write_text(payload.report_text + "\n", encoding="utf-8")
            write_table(out / "prompts.csv", iter(payload.rows))
            client.log_artifacts(run_id, folder, artifact_path="samplehooks")

    def _problem(self, hook: str, exc: Exception) -> None:
        text = shown(f"{type(exc).__name__}: {exception_text(exc)}")
        self.problems.append(f"{hook}: {text}")
        logger.warning(
            "mlflow.unavailable",
            hook=hook,
            tracking_uri=self.tracking_uri,
            error=text,
            note="the run goes on; its results are in the run directory",
        )


def metrics_of(payload: RunEndPayload) -> dict[str, float]:
    """The metrics ``run_end`` logs, by name."""
    totals = payload.totals
    metrics: dict[str, float] = {}
    for name in (
        "success_rate",
        "ok",
        "failed",
        "error",
        "not_known_prompts",  # a rescore's prompts whose outcome it could not decide
        "input_tokens",
        "output_tokens",
        "cached_calls",  # answered by the response cache: no backend call, apart
        "cached_tokens",
    ):
        value = totals.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            metrics[name] = float(value)
    cost = totals.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        metrics["cost_usd"] = float(cost)
    for prefix, table in (
        ("pass_at", payload.pass_at_k),
        ("pass_hat", payload.pass_hat_k),
        ("maj_at", payload.maj_at_k),
    ):
        for entry in table or []:
            # maj@k of a run whose vote weighed answers counts each sample once: said so
            name = f"{prefix}_{entry['k']}" + ("_unweighted" if entry.get("unweighted") else "")
            metrics[name] = float(entry["value"])
            # some samples not known: the bounds too, and the prompts in the bounds left out
            # of the estimate (too few known samples), which then may fall outside them
            for bound in ("if_failed", "if_passed", "left_out"):
                if isinstance(entry.get(bound), int | float):
                    metrics[f"{name}_{bound}"] = float(entry[bound])
    return metrics


def status_of(payload: RunEndPayload) -> str:
    """How the MLflow run ends: ``FAILED`` after a fatal error, ``KILLED`` when the session
    was interrupted (Ctrl-C, SIGTERM), else ``FINISHED``."""
    if payload.error:
        return "FAILED"
    return "KILLED" if payload.interrupted else "FINISHED"


def write_table(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """One CSV row per prompt (lists joined with ``; ``)."""
    with path.open("w", encoding="utf-8", newline="") as out:
        table = None
        for row in rows:
            if table is None:
                table = csv.DictWriter(out, fieldnames=list(row))
                table.writeheader()
            table.writerow(
                {k: "; ".join(map(str, v)) if isinstance(v, list) else v for k, v in row.items()}
            )


def _runs_tagged(client: Any, experiment_id: str, tag: str, value: str) -> list[Any]:
    """The experiment's runs whose ``tag`` is ``value``, the latest first."""
    if "'" not in value:
        quoted = f"'{value}'"
    elif '"' not in value:
        quoted = f'"{value}"'
    else:  # no quoting holds it: compare the tags here
        runs = client.search_runs([experiment_id], order_by=["attributes.start_time DESC"])
        return [r for r in runs if r.data.tags.get(tag) == value]
    return list(
        client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{tag}` = {quoted}",
            order_by=["attributes.start_time DESC"],
            max_results=1,
        )
    )


_PARAM_KEY_MAX = 250  # MLflow's limit on a param's name


def _param_names(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings by MLflow param name: each path's words (letters, digits, ``_ - /``)
    joined by dots (``backend (resolved).model`` is ``backend.resolved.model``); two paths
    that would share a name keep them apart with a digest of the path."""
    out: dict[str, Any] = {}
    for path, value in settings.items():
        key = ".".join(re.findall(r"[\w\-/]+", path))[:_PARAM_KEY_MAX] or "_"
        if key in out:
            digest = hashlib.blake2b(path.encode("utf-8", "replace"), digest_size=4).hexdigest()
            key = f"{key[: _PARAM_KEY_MAX - 9]}.{digest}"
        out[key] = value
    return out


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)
    return shown(text)[:_PARAM_VALUE_MAX]
