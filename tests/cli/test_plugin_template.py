"""``samplehooks plugins new NAME``: the written distribution installs, lists and passes its tests.

pip builds the generated distribution (hatchling, no build isolation, no index) into a
directory of its own, as ``tests/plugins/test_example_plugin.py`` does with the example; a
subprocess with that directory on ``PYTHONPATH`` sees it installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sampling_core.cli import app
from tests.support.plugin_site import pip_install, run_cli, run_python

pytestmark = pytest.mark.slow


def test_new_plugin_round_trip(tmp_path: Path) -> None:
    made = CliRunner().invoke(app, ["plugins", "new", "demo-checks", "--dir", str(tmp_path)])
    assert made.exit_code == 0, made.output
    root = tmp_path / "samplehooks-demo-checks"
    assert (root / "pyproject.toml").is_file() and (root / "tests" / "test_plugin.py").is_file()

    site = pip_install(root, tmp_path / "site")

    listed = run_cli(site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    (plugin,) = [p for p in json.loads(listed.stdout) if p["name"] == "demo-checks"]
    assert plugin["loaded"] and plugin["enabled"]
    assert plugin["hooks"] == ["sampling_iteration", "register_requirements"]
    assert plugin["provides"] == {"requirement": ["demo_checks_max_lines"]}

    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    tested = run_python(site, "-m", "pytest", *flags, str(root / "tests"), cwd=tmp_path)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed" in tested.stdout

    sampled = run_cli(
        site, "sample", "Hi.", "--backend", "scripted",
        "--reply", "one\ntwo\nthree", "--reply", "one", "--require", "demo_checks_max_lines:1",
        "--plugin", "demo-checks:label=cli",
    )  # fmt: skip
    assert sampled.returncode == 0, sampled.stderr
    assert sampled.stdout == "one\n"


def test_a_bad_name_or_a_full_directory_is_refused(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(app, ["plugins", "new", "Bad Name", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "plugin name 'Bad Name'" in bad.stderr
    assert list(tmp_path.iterdir()) == []
    assert runner.invoke(app, ["plugins", "new", "x", "--dir", str(tmp_path)]).exit_code == 0
    again = runner.invoke(app, ["plugins", "new", "x", "--dir", str(tmp_path)])
    assert again.exit_code == 2 and "already holds files" in again.stderr
