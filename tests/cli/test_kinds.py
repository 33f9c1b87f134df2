"""Kinds and plugin options on the command line: ``sample`` and ``run`` take them from the registry.

Bad input (unknown kind, bad option, a factory that raises, a misbehaving provider hook, a
name clash) is one line and exit 2, and ``run`` writes nothing. Misbehaving plugins are
installed the way an installer leaves them (``plugin_site``, a site on ``PYTHONPATH``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.plugin_site import run_cli, write_site
from tests.support.reliability_helpers import assert_refused, invoke
from tests.support.runs_helpers import records, write_config, write_dataset

# -- sample -------------------------------------------------------------------------------


def test_backend_options_strategy_options_and_requirement_kinds() -> None:
    result = invoke(
        "sample", "Name a colour.",
        "--backend", "scripted",
        "--backend-option", "replies=[one two three, blue]",
        "--backend-option", "latency_s=0",
        "--strategy", "repair:keep_failures=1",
        "--require", "max-words:1",
        "--require", "contains:blue",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == "blue\n"


def test_text_stays_text_where_an_option_takes_text() -> None:
    # `contains:42` is the text "42", and `--reply 7` the reply "7" (YAML would read numbers)
    result = invoke(
        "sample", "A number.", "--backend", "scripted", "--reply", "42", "--require", "contains:42"
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == "42\n"


def test_plugin_options_on_sample() -> None:
    result = invoke(
        "sample", "one two",
        "--backend", "scripted", "--reply", "a b c",
        "--require", "contains:zebra",
        "--loop-budget", "5",
        "--plugin", "budget_guard:max_tokens=12",
    )  # fmt: skip
    assert result.exit_code == 1
    assert "stop: stopped_by_plugin" in result.stderr and "attempts: 2" in result.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--backend", "nosuch"], "unknown backend kind 'nosuch'"),
        (["--backend", "scriptd", "--reply", "x"], "did you mean 'scripted'?"),
        (["--backend", "scripted", "--reply", "x", "--backend-option", "latency_s=slow"],
         "option 'latency_s'"),
        (["--backend", "scripted", "--reply", "x", "--backend-option", "speed=1"],
         "unknown option 'speed'"),
        (["--backend", "scripted", "--reply", "x", "--backend-option", "latency_s"],
         "NAME=VALUE"),
        (["--backend", "scripted", "--reply", "x", "--base-url", "http://x"],
         "--base-url is not for backend 'scripted'"),
        (["--backend", "scripted", "--reply", "x", "--strategy", "nosuch"],
         "unknown strategy kind 'nosuch'"),
        (["--backend", "scripted", "--reply", "x", "--strategy", "repair:template=no braces"],
         "{reasons}"),
        (["--backend", "scripted", "--reply", "x", "--plugin", "budget_guard:max_tokens=lots"],
         "max_tokens"),
        (["--backend", "scripted", "--reply", "x", "--plugin", "tracing:colour=1"],
         "colour"),
    ],
)  # fmt: skip
def test_bad_kinds_and_options_are_one_line_exit_2(args: list[str], says: str) -> None:
    assert_refused(invoke("sample", "hi", *args), says)


# -- run ----------------------------------------------------------------------------------


@pytest.fixture
def config(tmp_path: Path) -> Path:
    dataset = write_dataset(tmp_path / "data.jsonl", 3)
    return write_config(tmp_path / "run.yaml", dataset)


def test_run_takes_plugins_with_options(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "out"
    result = invoke(
        "run", config, "--out", out, "--plugin", "recorder:capture_content=true", env={}
    )
    assert result.exit_code == 0, result.output
    effective = yaml.safe_load((out / "effective_config.yaml").read_text())
    assert effective["plugins"] == [{"name": "recorder", "options": {"capture_content": True}}]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert events and len(records(out)) == 3


def test_run_honours_the_plugin_environment_variables(tmp_path: Path, config: Path) -> None:
    added = invoke("run", config, "--out", tmp_path / "a", env={"SAMPLEHOOKS_PLUGINS": "recorder"})
    assert added.exit_code == 0, added.output
    assert (tmp_path / "a" / "events.jsonl").stat().st_size > 0
    blocked = invoke(
        "run", config, "--out", tmp_path / "b", "--plugin", "recorder",
        env={"SAMPLEHOOKS_DISABLE_PLUGINS": "recorder"},
    )  # fmt: skip
    assert blocked.exit_code == 0, blocked.output
    effective = yaml.safe_load((tmp_path / "b" / "effective_config.yaml").read_text())
    assert effective["plugins"] == []
    assert not (tmp_path / "b" / "events.jsonl").exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--plugin", "recorder:capture_content=maybe"], "capture_content"),
        (["--plugin", "nosuch-plugin"], "nosuch-plugin"),
        (["--plugin", "recorder:oops"], "NAME=VALUE"),
    ],
)
def test_run_refuses_a_bad_plugin_and_writes_nothing(
    tmp_path: Path, config: Path, flags: list[str], says: str
) -> None:
    out = tmp_path / "out"
    assert_refused(invoke("run", config, "--out", out, *flags, env={}), says)
    assert not out.exists()


def test_run_refuses_an_unknown_kind_and_writes_nothing(tmp_path: Path, config: Path) -> None:
    for key, value, says in [
        ("backend", {"kind": "nosuch"}, "unknown backend kind 'nosuch'"),
        ("backend", {"kind": "scripted", "replies": ["x"], "latency_s": "slow"}, "latency_s"),
        ("strategy", {"name": "repair", "template": "no braces"}, "{reasons}"),
        ("requirements", [{"max_wrds": 3}], "did you mean 'max_words'?"),
    ]:
        bad = write_config(tmp_path / "bad.yaml", tmp_path / "data.jsonl", **{key: value})
        out = tmp_path / "out"
        assert_refused(invoke("run", bad, "--out", out, env={}), says)
        assert not out.exists()


# -- misbehaving plugins, really installed -----------------------------------------------

_HOOKIMPL = "from hook_specs import hookimpl\n\n@hookimpl\n"
BAD_PLUGINS = {
    "raises": "def register_requirements(register):\n    raise RuntimeError('no licence')\n",
    "notcallable": "def register_backends(register):\n    register('broken', 42)\n",
    "clash": "def register_requirements(register):\n"
    "    register('max_words', lambda n: (lambda text: True))\n",
}


def site_with(root: Path, name: str, source: str) -> Path:
    """A directory holding an installed distribution with one plugin module ``name``."""
    return write_site(
        root / name, f"bad-{name}", {name: f"bad_{name}"}, {f"bad_{name}": _HOOKIMPL + source}
    )


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("raises", "plugin 'raises': register_requirements raised RuntimeError: no licence"),
        ("notcallable", "plugin 'notcallable' registered backend 'broken' with 42"),
        (
            "clash",
            "requirement kind 'max_words' is registered by two plugins, 'kinds' and 'clash'; "
            "disable one with SAMPLEHOOKS_DISABLE_PLUGINS=clash",
        ),
    ],
)
def test_a_misbehaving_provider_hook_is_one_line_exit_2_and_listed(
    tmp_path: Path, config: Path, name: str, says: str
) -> None:
    site = site_with(tmp_path / "sites", name, BAD_PLUGINS[name])
    assert_refused(run_cli(site, "sample", "hi", "--backend", "scripted", "--reply", "x"), says)
    out = tmp_path / "out"
    assert_refused(run_cli(site, "run", config, "--out", out), says)
    assert not out.exists()
    listed = run_cli(site, "plugins", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = [p for p in json.loads(listed.stdout) if p["name"] == name]
    if name == "clash":  # alone it is fine; the clash is with another plugin
        assert entry["loaded"] and entry["provides"] == {"requirement": ["max_words"]}
    else:
        assert not entry["loaded"] and says in entry["error"]


def test_budget_guard_max_tokens_from_yaml_and_from_the_command_line(tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text('{"id": "a", "prompt": "one two"}\n{"id": "b", "prompt": "one two"}\n')
    common = {
        "backend": {"kind": "scripted", "replies": ["a b c"]},  # 5 tokens a call
        "requirements": [{"contains": "zebra"}],
        "budgets": {"loop_budget": 5},
    }
    guarded = write_config(
        tmp_path / "guarded.yaml",
        dataset,
        plugins=[{"name": "budget_guard", "options": {"max_tokens": 12}}],
        **common,
    )
    plain = write_config(tmp_path / "plain.yaml", dataset, **common)
    for config, flags in [(guarded, []), (plain, ["--plugin", "budget_guard:max_tokens=12"])]:
        out = tmp_path / config.stem
        result = invoke("run", config, "--out", out, *flags, env={})
        assert result.exit_code == 0, result.output
        for record in records(out):  # per call: every prompt stops after its third call
            assert record["attempts"]["stop_reason"] == "stopped_by_plugin"
            usage = record["usage"]  # the scripted backend reports no cost
            assert (usage["input_tokens"], usage["output_tokens"]) == (6, 9)
            assert usage["cost_usd"] is None and usage["latency_s"] >= 0
            assert set(usage) == {
                "input_tokens",
                "output_tokens",
                "cost_usd",
                "latency_s",
                "cancelled",  # what attempts cancelled in flight spent
            }
    unguarded = invoke("run", plain, "--out", tmp_path / "free", env={})
    assert unguarded.exit_code == 0
    assert {r["attempts"]["used"] for r in records(tmp_path / "free")} == {5}
