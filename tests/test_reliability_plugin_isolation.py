"""A plugin cannot take the program down while being imported, cannot replace a built-in by
taking its name, and a run config cannot make samplehooks import a module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_helpers import assert_refused, invoke, tree
from runs_helpers import write_config, write_dataset

ENTRY_POINTS = """\
[samplehooks]
exits = hostile_exit:Plugin
interrupts = hostile_interrupt:Plugin
basebomb = hostile_base:Plugin
tracing = hostile_tracing:Impostor
fine = hostile_fine:Plugin
"""

FINE = """\
from hook_specs import hookimpl

class Plugin:
    @hookimpl
    def sampling_iteration(self, payload):
        pass
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-site")
    info = root / "hostile_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    (root / "hostile_exit.py").write_text("import sys\nsys.exit(3)\n")
    (root / "hostile_interrupt.py").write_text("raise KeyboardInterrupt('from a plugin')\n")
    (root / "hostile_base.py").write_text("class Boom(BaseException):\n    pass\nraise Boom('x')\n")
    (root / "hostile_tracing.py").write_text(FINE.replace("class Plugin", "class Impostor"))
    (root / "hostile_fine.py").write_text(FINE)
    (root / "imported_marker.py").write_text(
        "import pathlib, os\npathlib.Path(os.environ['MARKER']).write_text('imported')\n"
    )
    return root


def run(site: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SAMPLEHOOKS_")}
    environ.update(PYTHONPATH=str(site), COLUMNS="200", **(env or {}))
    return subprocess.run(
        [sys.executable, "-m", "sampling_core.cli", *args],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_any_exception_raised_importing_a_plugin_is_isolated_and_named(site: Path) -> None:
    done = run(site, "sample", "q", "--backend", "scripted", "--reply", "an answer")
    assert done.returncode == 0, done.stderr
    assert "an answer" in done.stdout
    for name, raised in (
        ("exits", "SystemExit(3)"),
        ("interrupts", "KeyboardInterrupt(from a plugin)"),
        ("basebomb", "Boom(x)"),
    ):
        (line,) = [line for line in done.stderr.splitlines() if f"'{name}'" in line]
        assert line.startswith("samplehooks: warning:") and raised in line, line
    listed = {p["name"]: p for p in json.loads(run(site, "plugins", "--json").stdout)}
    assert listed["fine"]["loaded"] is True
    assert listed["exits"]["loaded"] is False and "SystemExit" in listed["exits"]["error"]


def test_a_third_party_plugin_cannot_take_a_builtins_name(site: Path) -> None:
    done = run(site, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    tracing = {p["name"]: p for p in json.loads(done.stdout)}["tracing"]
    assert tracing["builtin"] is True and tracing["distribution"] == "samplehooks"
    assert tracing["value"] == "builtin_plugins.tracing:TracingPlugin"
    warnings = [line for line in done.stderr.splitlines() if "hostile-plugins" in line]
    assert len(warnings) == 1 and "'tracing'" in warnings[0] and "built-in" in warnings[0]
    used = run(
        site, "sample", "q", "--backend", "scripted", "--reply", "a", "--plugin", "tracing",
        env={"SAMPLEHOOKS_DISABLE_PLUGINS": "exits,interrupts,basebomb"},
    )  # fmt: skip
    assert used.returncode == 0 and "hostile-plugins" in used.stderr, used.stderr


@pytest.mark.parametrize(
    "name", ["imported_marker", "imported_marker:Plugin", "os.path", "a/b", "pkg\\mod"]
)
def test_a_run_config_never_imports_a_module_path(
    site: Path, tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(site))
    marker = tmp_path / "marker"
    monkeypatch.setenv("MARKER", str(marker))
    data = write_dataset(tmp_path / "d.jsonl", 2)
    good = write_config(tmp_path / "good.yaml", data)
    assert invoke("run", good, "--out", tmp_path / "out").exit_code == 0
    before = tree(tmp_path / "out")
    config = write_config(tmp_path / "c.yaml", data, plugins=[name])
    if "." not in name and ":" not in name and "/" not in name and "\\" not in name:
        # a bare name is looked up among installed plugins only when the config is accepted;
        # it is not one here, so it is refused, and nothing was imported
        assert invoke("run", config, "--out", tmp_path / "new").exit_code == 2
    else:
        for args in (["--out", tmp_path / "new"], ["--out", tmp_path / "out", "--resume"]):
            assert_refused(invoke("run", config, *args), "module path", "installed plugins")
    assert not marker.exists() and tree(tmp_path / "out") == before
    assert not (tmp_path / "new").exists()
