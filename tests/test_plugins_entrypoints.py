"""Entry-point plugins from a real installed distribution, and the environment switches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PLUGIN_MODULE = """
from hook_specs import hookimpl

CALLS = []

@hookimpl
def sampling_iteration(payload):
    print("FIRED sampling_iteration", payload.iteration, flush=True)

@hookimpl
def sampling_loop_end(payload):
    print("FIRED sampling_loop_end", payload.stop_reason, flush=True)
"""

BROKEN_MODULE = "raise ImportError('this plugin is broken on purpose')\n"

RUN = """
import json
from sampling_core import Sampler, ScriptedBackend
sampler = Sampler(ScriptedBackend(["hello"]))
print("NAMES", json.dumps(sampler.plugins.names()), flush=True)
result = sampler.sample_sync("q")
print("RESULT", result.success, flush=True)
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory laid out like site-packages, holding two installed distributions."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "good_plugin.py").write_text(PLUGIN_MODULE)
    (site / "broken_plugin.py").write_text(BROKEN_MODULE)
    for dist, entry in (
        ("good_plugin", "good = good_plugin"),
        ("broken_plugin", "broken = broken_plugin"),
    ):
        info = site / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: 1.0\n"
        )
        (info / "entry_points.txt").write_text(f"[samplehooks]\n{entry}\n")
        (info / "RECORD").write_text("")
    return site


def run_python(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SAMPLEHOOKS_")}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")])
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_an_installed_plugin_is_discovered_and_fires_and_a_broken_one_is_skipped(site):
    done = run_python(site, RUN)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    names = json.loads(next(line for line in lines if line.startswith("NAMES"))[6:])
    assert "good" in names and "broken" not in names
    assert "FIRED sampling_iteration 1" in lines
    assert "FIRED sampling_loop_end success" in lines
    assert "RESULT True" in lines
    assert "plugin 'broken' could not be loaded" in done.stderr
    assert "this plugin is broken on purpose" in done.stderr


def test_samplehooks_plugins_selects_and_disable_blocks(site):
    only = run_python(site, RUN, SAMPLEHOOKS_PLUGINS="good")
    assert only.returncode == 0, only.stderr
    assert "broken" not in only.stderr  # not named: not even tried
    assert "FIRED sampling_iteration 1" in only.stdout

    none = run_python(site, RUN, SAMPLEHOOKS_PLUGINS="")
    assert none.returncode == 0 and "FIRED" not in none.stdout

    disabled = run_python(site, RUN, SAMPLEHOOKS_DISABLE_PLUGINS="good,broken")
    assert disabled.returncode == 0 and "FIRED" not in disabled.stdout
    assert "could not be loaded" not in disabled.stderr

    missing = run_python(site, RUN, SAMPLEHOOKS_PLUGINS="good,nosuch")
    assert missing.returncode == 0
    assert "'nosuch', but no such plugin is installed" in missing.stderr


def test_strict_mode_turns_a_broken_entry_point_into_an_error(site):
    code = """
    from sampling_core import PluginError, Sampler, ScriptedBackend
    try:
        Sampler(ScriptedBackend(["x"]), strict_plugins=True)
    except PluginError as exc:
        print("STRICT", exc.plugin_name, exc.hook)
    """
    done = run_python(site, code)
    assert "STRICT broken load" in done.stdout, done.stderr


def test_an_installed_plugin_is_enabled_by_name_in_code(site):
    code = """
    from sampling_core import Sampler, ScriptedBackend
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False, plugins=["good"])
    print("NAMES", sampler.plugins.names())
    sampler.sample_sync("q")
    """
    done = run_python(site, code, SAMPLEHOOKS_PLUGINS="")
    assert "NAMES ['good']" in done.stdout, done.stderr
    assert "FIRED sampling_iteration 1" in done.stdout


def test_module_level_sample_uses_a_default_sampler_with_entry_points(site):
    code = """
    from sampling_core import ScriptedBackend, sample_sync
    print("RESULT", sample_sync("q", backend=ScriptedBackend(["x"])).text)
    """
    done = run_python(site, code)
    assert "FIRED sampling_loop_end success" in done.stdout, done.stderr
    assert "RESULT x" in done.stdout
