"""What may change on resume, plugins and the environment included: one labelled walk.

Observers (``affects_results = False``, nothing written into the run directory: tracing,
progress) may be added, removed or reconfigured; artifact writers (the recorder) may not;
other plugins change results. The environment variables the run's plugins read are recorded
in ``meta.json`` and compared. A run's plugins are installed plugins, wherever they are
named (config, ``--plugin``, ``SAMPLEHOOKS_PLUGINS``), and plugin objects given from Python
are recorded by their class.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import builtin_plugins
import sampling_core
from hook_specs import hookimpl
from sampling_core.cli.app import app
from sampling_core.hooks.entry_points import entry_point_object, installed_plugins
from sampling_core.kinds import collect_kinds
from sampling_core.runs import ConfigError, ResumeRefused, run_batch_sync
from sampling_core.runs.config.labelled import (
    ENGINE_ENVIRONMENT,
    environment_table,
    kind_options_table,
    plugin_label,
    plugin_rules_table,
)
from tests.support.runs_helpers import snapshot, write_config, write_dataset


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "data.jsonl", 3)


def config_with(tmp_path: Path, dataset: Path, plugins: list[Any], name: str = "c") -> Path:
    return write_config(tmp_path / f"{name}.yaml", dataset, plugins=plugins)


def lineage(out: Path) -> list[str]:
    text = (out / "effective_config.yaml").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if "resumed" in line]


OBSERVER_CHANGES = [
    ([], ["tracing"], 'plugins[tracing]: null -> "tracing"'),
    ([], ["progress"], 'plugins[progress]: null -> "progress"'),
    (["tracing"], [], 'plugins[tracing]: "tracing" -> null'),
    (
        ["tracing", "progress"],
        [{"name": "tracing", "options": {"capture_content": True}}, "progress"],
        'plugins[tracing]: "tracing" -> {"name": "tracing", "options": {"capture_content": true}}',
    ),
]


@pytest.mark.parametrize(
    ("before", "after", "noted"),
    OBSERVER_CHANGES,
    ids=["add", "add-progress", "remove", "reconfigure"],
)
def test_observers_may_be_added_removed_or_reconfigured_on_resume(
    tmp_path: Path, dataset: Path, before: list[Any], after: list[Any], noted: str
) -> None:
    out = tmp_path / "out"
    run_batch_sync(config_with(tmp_path, dataset, before, "a"), out)
    run_batch_sync(config_with(tmp_path, dataset, after, "b"), out, resume=True)
    [note] = lineage(out)
    assert noted in note


def test_an_observer_named_by_plugin_or_the_environment_may_be_added_on_resume(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    config = config_with(tmp_path, dataset, [])
    run_batch_sync(config, out)
    run_batch_sync(config, out, resume=True, plugin_options=["progress"])
    monkeypatch.setenv("SAMPLEHOOKS_PLUGINS", "tracing")
    run_batch_sync(config, out, resume=True)
    assert "plugins[progress]" in lineage(out)[0] and "plugins[tracing]" in lineage(out)[1]


RECORDER_CHANGES = [
    (["recorder"], [], {}),
    ([], ["recorder"], {}),
    (["recorder"], [{"name": "recorder", "options": {"capture_content": True}}], {}),
    (["recorder"], ["recorder"], {"SAMPLEHOOKS_TRACE_CONTENT": "1"}),
]


@pytest.mark.parametrize(
    ("before", "after", "env"), RECORDER_CHANGES, ids=["removed", "added", "content", "env"]
)
def test_recorder_changes_are_refused_with_nothing_written(
    tmp_path: Path,
    dataset: Path,
    monkeypatch: pytest.MonkeyPatch,
    before: list[Any],
    after: list[Any],
    env: dict[str, str],
) -> None:
    monkeypatch.delenv("SAMPLEHOOKS_TRACE_CONTENT", raising=False)
    out = tmp_path / "out"
    run_batch_sync(config_with(tmp_path, dataset, before, "a"), out)
    kept = snapshot(out)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ResumeRefused) as refused:
        run_batch_sync(config_with(tmp_path, dataset, after, "b"), out, resume=True)
    message = str(refused.value)
    assert "recorder" in message or "SAMPLEHOOKS_TRACE_CONTENT" in message
    if not env:
        assert "artifact writer (it writes into the run directory)" in message
    assert snapshot(out) == kept


def test_the_budget_guards_environment_is_recorded_and_compared_on_resume(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    config = config_with(tmp_path, dataset, ["budget_guard"])
    monkeypatch.setenv("SAMPLEHOOKS_BUDGET_GUARD", "max_tokens_total=100000")
    run_batch_sync(config, out)
    values = json.loads((out / "meta.json").read_text())["settings"]["values"]
    assert values["environment.SAMPLEHOOKS_BUDGET_GUARD"] == "max_tokens_total=100000"
    assert values["plugins[budget_guard]"] == "budget_guard"
    run_batch_sync(config, out, resume=True)  # the same ceiling: accepted
    kept = snapshot(out)
    monkeypatch.setenv("SAMPLEHOOKS_BUDGET_GUARD", "max_tokens_total=5")
    with pytest.raises(ResumeRefused) as refused:
        run_batch_sync(config, out, resume=True)
    assert refused.value.differences == [
        (
            "environment.SAMPLEHOOKS_BUDGET_GUARD",
            '"max_tokens_total=100000"',
            '"max_tokens_total=5"',
        )
    ]
    monkeypatch.delenv("SAMPLEHOOKS_BUDGET_GUARD")
    with pytest.raises(ResumeRefused):
        run_batch_sync(config, out, resume=True)
    assert snapshot(out) == kept


def test_a_variable_no_plugin_of_the_run_reads_is_neither_recorded_nor_compared(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    config = config_with(tmp_path, dataset, ["tracing"])
    monkeypatch.setenv("SAMPLEHOOKS_BUDGET_GUARD", "max_tokens_total=5")
    run_batch_sync(config, out)
    values = json.loads((out / "meta.json").read_text())["settings"]["values"]
    assert not [path for path in values if path.startswith(("environment.", "plugins"))]
    monkeypatch.setenv("SAMPLEHOOKS_TRACE_CONTENT", "1")  # tracing's: an observer's
    monkeypatch.delenv("SAMPLEHOOKS_BUDGET_GUARD")
    run_batch_sync(config, out, resume=True)


class Picky:
    """A plugin object given from Python that may change results."""

    @hookimpl
    def sampling_loop_start(self, payload: Any) -> None:
        payload.loop_budget = 1


class Watcher:
    """An observer object."""

    affects_results = False

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        pass


def test_plugin_objects_given_from_python_are_recorded_and_compared(
    tmp_path: Path, dataset: Path
) -> None:
    out = tmp_path / "out"
    config = config_with(tmp_path, dataset, [])
    run_batch_sync(config, out, plugins=[Picky(), Watcher()])
    values = json.loads((out / "meta.json").read_text())["settings"]["values"]
    assert values["plugins[Picky] (object)"] == f"{__name__}.Picky"
    assert "plugins[Watcher] (object)" not in values  # an observer
    run_batch_sync(config, out, resume=True, plugins=[Picky()])  # the observer dropped
    kept = snapshot(out)
    with pytest.raises(ResumeRefused) as refused:
        run_batch_sync(config, out, resume=True)
    assert refused.value.differences == [("plugins[Picky] (object)", f'"{__name__}.Picky"', "null")]
    assert snapshot(out) == kept


runner = CliRunner()


def test_a_module_path_given_by_plugin_is_refused_before_anything_is_written(
    tmp_path: Path, dataset: Path
) -> None:
    config = config_with(tmp_path, dataset, [])
    out = tmp_path / "out"
    result = runner.invoke(app, ["run", str(config), "--out", str(out), "--plugin", "tests.x"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert "--plugin" in line and "'tests.x' is a module path" in line
    assert not out.exists()


def test_a_module_path_in_samplehooks_plugins_is_refused_before_anything_is_written(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_with(tmp_path, dataset, [])
    monkeypatch.setenv("SAMPLEHOOKS_PLUGINS", "os.path")
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as refused:
        run_batch_sync(config, out)
    assert "SAMPLEHOOKS_PLUGINS" in str(refused.value)
    monkeypatch.setenv("SAMPLEHOOKS_PLUGINS", "tests:plugin")
    with pytest.raises(ConfigError) as refused:
        run_batch_sync(config, out)
    assert "'tests:plugin' is a module path" in str(refused.value)
    assert not out.exists()


def test_the_builtins_labels_are_the_rule_for_plugins() -> None:
    labels = {
        entry.name: plugin_label(entry_point_object(entry.name))[0]
        for entry in installed_plugins()
        if entry.builtin
    }
    assert labels["tracing"] == labels["progress"] == "throughput"  # observers
    assert labels["recorder"] == "result"  # an artifact writer
    assert labels["budget_guard"] == labels["ordering"] == "result"


def test_every_samplehooks_variable_in_the_code_is_labelled() -> None:
    """Every ``SAMPLEHOOKS_*`` variable the code reads is one samplehooks itself reads
    (:data:`ENGINE_ENVIRONMENT`) or one a built-in plugin names in ``reads_environment``."""
    found: set[str] = set()
    for package in (sampling_core, builtin_plugins):
        for path in Path(package.__file__).parent.rglob("*.py"):
            found |= set(re.findall(r"SAMPLEHOOKS_[A-Z][A-Z_]*[A-Z]", path.read_text()))
    declared = set(ENGINE_ENVIRONMENT)
    for entry in installed_plugins():
        if entry.builtin:
            declared |= set(getattr(entry_point_object(entry.name), "reads_environment", ()))
    assert found - declared == set()
    assert declared - found == set()  # no stale entry


@pytest.mark.parametrize(
    ("marker", "make"),
    [
        ("kind-options-table", lambda: kind_options_table(collect_kinds())),
        ("plugin-rules-table", plugin_rules_table),
        ("environment-table", environment_table),
    ],
)
def test_the_resume_tables_of_the_docs_are_generated_from_the_code(marker: str, make: Any) -> None:
    page = Path(__file__).parents[2] / "docs" / "batch-runs.md"
    found = re.search(
        rf"<!-- {marker}:start -->\n(.*?)<!-- {marker}:end -->", page.read_text(), re.S
    )
    assert found, f"docs/batch-runs.md lacks the {marker} markers"
    assert found.group(1) == make(), f"the {marker} in docs/batch-runs.md is out of date"
