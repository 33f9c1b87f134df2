"""Entry-point plugins from a real installed distribution, and the environment switches."""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.support.plugin_site import run_python, write_site

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
    write_site(site, "good-plugin", {"good": "good_plugin"}, {"good_plugin": PLUGIN_MODULE})
    write_site(site, "broken-plugin", {"broken": "broken_plugin"}, {"broken_plugin": BROKEN_MODULE})
    return site


def run(site: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Python ``code`` in a subprocess that sees ``site`` installed, with ``env`` set."""
    return run_python(site, "-c", textwrap.dedent(code), env=env)


def test_an_installed_plugin_is_discovered_and_fires_and_a_broken_one_is_skipped(site):
    done = run(site, RUN)
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
    only = run(site, RUN, SAMPLEHOOKS_PLUGINS="good")
    assert only.returncode == 0, only.stderr
    assert "broken" not in only.stderr  # not named: not even tried
    assert "FIRED sampling_iteration 1" in only.stdout

    none = run(site, RUN, SAMPLEHOOKS_PLUGINS="")
    assert none.returncode == 0 and "FIRED" not in none.stdout

    disabled = run(site, RUN, SAMPLEHOOKS_DISABLE_PLUGINS="good,broken")
    assert disabled.returncode == 0 and "FIRED" not in disabled.stdout
    assert "could not be loaded" not in disabled.stderr

    missing = run(site, RUN, SAMPLEHOOKS_PLUGINS="good,nosuch")
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
    done = run(site, code)
    assert "STRICT broken load" in done.stdout, done.stderr


def test_an_installed_plugin_is_enabled_by_name_in_code(site):
    code = """
    from sampling_core import Sampler, ScriptedBackend
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False, plugins=["good"])
    print("NAMES", sampler.plugins.names())
    sampler.sample_sync("q")
    """
    done = run(site, code, SAMPLEHOOKS_PLUGINS="")
    assert "NAMES ['good']" in done.stdout, done.stderr
    assert "FIRED sampling_iteration 1" in done.stdout


def test_module_level_sample_uses_a_default_sampler_with_entry_points(site):
    code = """
    from sampling_core import ScriptedBackend, sample_sync
    print("RESULT", sample_sync("q", backend=ScriptedBackend(["x"])).text)
    """
    done = run(site, code)
    assert "FIRED sampling_loop_end success" in done.stdout, done.stderr
    assert "RESULT x" in done.stdout
