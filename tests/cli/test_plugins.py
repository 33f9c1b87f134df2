"""``samplehooks plugins``: built-ins, a really installed third-party plugin, broken ones.

The third-party distribution is made the way an installer leaves it (``plugin_site``), in a
temporary directory put on ``PYTHONPATH`` of the command's process, so entry-point
discovery finds it exactly as it finds anything in site-packages.
"""

from __future__ import annotations

import json
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugin_site import run_cli, run_python, write_site

PLUGIN_MODULE = '''
from hook_specs import hookimpl

print("foo_plugin: imported")  # must not end up in `samplehooks plugins --json`

class FooPlugin:
    """Counts attempts and tags every backend call."""

    def __init__(self):
        self.seen = []

    @hookimpl
    def generation_pre_call(self, payload):
        payload.options = {**payload.options, "tag": "foo"}

    @hookimpl
    def sampling_iteration(self, payload):
        self.seen.append(payload.iteration)

class Wrapper:
    @hookimpl(wrapper=True)
    def sampling_iteration(self, payload):
        yield
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding an installed distribution ``foo-plugin`` 1.0 with three plugins."""
    return write_site(
        tmp_path_factory.mktemp("site"),
        "foo-plugin",
        {"foo": "foo_plugin:FooPlugin", "broken": "foo_broken", "wrapper": "foo_plugin:Wrapper"},
        {
            "foo_plugin": PLUGIN_MODULE,
            "foo_broken": "raise ImportError('foo_broken needs libfoo 2')\n",
        },
    )


def listing(site: Path, env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    done = run_cli(site, "plugins", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {plugin["name"]: plugin for plugin in json.loads(done.stdout)}


def our_builtins() -> set[str]:
    """The built-ins our own distribution registers in group ``samplehooks``."""
    eps = metadata.distribution("samplehooks").entry_points
    return {ep.name for ep in eps if ep.group == "samplehooks"}


def test_json_lists_builtins_the_third_party_plugin_and_the_broken_ones(site: Path) -> None:
    plugins = listing(site)

    foo = plugins["foo"]
    assert set(foo) == {
        *("name", "value", "distribution", "version", "builtin", "enabled"),
        *("loaded", "error", "hooks", "provides"),
    }
    assert foo["distribution"] == "foo-plugin" and foo["version"] == "1.0"
    assert foo["value"] == "foo_plugin:FooPlugin"
    assert foo["builtin"] is False and foo["enabled"] is True
    assert foo["loaded"] is True and foo["error"] is None
    assert foo["hooks"] == ["sampling_iteration", "generation_pre_call"]  # HookName's order

    broken = plugins["broken"]
    assert broken["loaded"] is False and broken["hooks"] == []
    assert broken["error"] == "ImportError: foo_broken needs libfoo 2"
    wrapper = plugins["wrapper"]
    assert wrapper["loaded"] is False
    assert "wrapper" in wrapper["error"] and "sampling_loop_start" in wrapper["error"]

    builtins = our_builtins()
    assert builtins, "samplehooks registers its built-in plugins as entry points"
    for name in builtins:
        entry = plugins[name]
        assert entry["builtin"] is True and entry["distribution"] == "samplehooks"
        assert entry["loaded"] is True, entry["error"]
        assert entry["hooks"] and entry["enabled"] is False  # built-ins load only when named


def test_enabled_follows_the_environment(site: Path) -> None:
    name = sorted(our_builtins())[0]
    plugins = listing(
        site, env={"SAMPLEHOOKS_PLUGINS": f"{name},foo", "SAMPLEHOOKS_DISABLE_PLUGINS": "foo"}
    )
    assert plugins[name]["enabled"] is True
    assert plugins["foo"]["enabled"] is False
    assert plugins["broken"]["enabled"] is False


def test_table_shows_every_plugin_and_why_one_did_not_load(site: Path) -> None:
    done = run_cli(site, "plugins")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "foo-plugin" in out and "third-party" in out and "built-in" in out
    foo_rows = out[out.index("\nfoo ") + 1 :].splitlines()[:2]
    assert "foo-plugin" in foo_rows[0] and "third-party" in foo_rows[0]
    assert foo_rows[0].split()[-2:] == ["sampling_iteration", "-"]  # hooks, no kinds
    assert foo_rows[1].split()[-1] == "generation_pre_call"
    assert "broken could not be loaded: ImportError: foo_broken needs libfoo 2" in out
    assert "wrapper could not be loaded" in out


def test_the_listed_plugin_fires_and_the_broken_one_does_not_break_sampling(site: Path) -> None:
    script = textwrap.dedent(
        """
        from sampling_core import Sampler, ScriptedBackend
        backend = ScriptedBackend(["no", "yes"])
        sampler = Sampler(backend)
        result = sampler.sample_sync("Say yes.", requirements=[lambda t: t == "yes"],
                                     loop_budget=2)
        print(result.text, sampler.plugins.names(), sampler.plugins.get("foo").seen,
              [r.options.get("tag") for r in backend.requests])
        """
    )
    done = run_python(site, "-c", script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "yes ['foo'] [1, 2] ['foo', 'foo']"
    assert "plugin 'broken' could not be loaded and was skipped" in done.stderr
