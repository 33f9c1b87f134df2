"""A plugin cannot take the program down while being imported, cannot replace a built-in by
taking its name, and a run config cannot make samplehooks import a module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.plugin_site import run_cli, write_site
from tests.support.reliability_helpers import assert_refused, invoke, tree
from tests.support.runs_helpers import write_config, write_dataset

ENTRY_POINTS = {
    "exits": "hostile_exit:Plugin",
    "interrupts": "hostile_interrupt:Plugin",
    "basebomb": "hostile_base:Plugin",
    "tracing": "hostile_tracing:Impostor",
    "fine": "hostile_fine:Plugin",
}

FINE = """\
from hook_specs import hookimpl

class Plugin:
    @hookimpl
    def sampling_iteration(self, payload):
        pass
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    modules = {
        "hostile_exit": "import sys\nsys.exit(3)\n",
        "hostile_interrupt": "raise KeyboardInterrupt('from a plugin')\n",
        "hostile_base": "class Boom(BaseException):\n    pass\nraise Boom('x')\n",
        "hostile_tracing": FINE.replace("class Plugin", "class Impostor"),
        "hostile_fine": FINE,
        "imported_marker": (
            "import pathlib, os\npathlib.Path(os.environ['MARKER']).write_text('imported')\n"
        ),
    }
    return write_site(
        tmp_path_factory.mktemp("hostile-site"), "hostile-plugins", ENTRY_POINTS, modules
    )


def test_any_exception_raised_importing_a_plugin_is_isolated_and_named(site: Path) -> None:
    done = run_cli(site, "sample", "q", "--backend", "scripted", "--reply", "an answer")
    assert done.returncode == 0, done.stderr
    assert "an answer" in done.stdout
    for name, raised in (
        ("exits", "SystemExit(3)"),
        ("interrupts", "KeyboardInterrupt(from a plugin)"),
        ("basebomb", "Boom(x)"),
    ):
        (line,) = [line for line in done.stderr.splitlines() if f"'{name}'" in line]
        assert line.startswith("samplehooks: warning:") and raised in line, line
    listed = {p["name"]: p for p in json.loads(run_cli(site, "plugins", "--json").stdout)}
    assert listed["fine"]["loaded"] is True
    assert listed["exits"]["loaded"] is False and "SystemExit" in listed["exits"]["error"]


def test_a_third_party_plugin_cannot_take_a_builtins_name(site: Path) -> None:
    done = run_cli(site, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    tracing = {p["name"]: p for p in json.loads(done.stdout)}["tracing"]
    assert tracing["builtin"] is True and tracing["distribution"] == "samplehooks"
    assert tracing["value"] == "builtin_plugins.tracing:TracingPlugin"
    warnings = [line for line in done.stderr.splitlines() if "hostile-plugins" in line]
    assert len(warnings) == 1 and "'tracing'" in warnings[0] and "built-in" in warnings[0]
    used = run_cli(
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
