"""One resolver of plugin specs: every form works, and fails, the same on every path.

Forms: an object, a module, a name, ``(name, options)``, ``{"name": ..., "options": ...}``.
Paths: ``Sampler(plugins=...)``, per-call ``sample(..., plugins=...)``, a run config's
``plugins:`` and the CLI's ``--plugin NAME:k=v`` (``sample`` and ``run``). The plugin caps
the loop budget at 2 where the call asks for 5 attempts that all fail, so a spec that is
ignored shows as 5 attempts.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from builtin_plugins.budget_guard import BudgetGuard, Totals
from hook_specs import hookimpl
from sampling_core import PluginError, Sampler, ScriptedBackend
from sampling_core.cli.app import app
from sampling_core.runs import ConfigError, run_batch_sync
from tests.support.runs_helpers import records, snapshot, write_config, write_dataset


def capping_module() -> types.ModuleType:
    module = types.ModuleType("capping_module")

    @hookimpl
    def sampling_loop_start(payload: Any) -> None:
        payload.loop_budget = min(payload.loop_budget, 2)

    module.sampling_loop_start = sampling_loop_start  # type: ignore[attr-defined]
    return module


FORMS: dict[str, Callable[[], Any]] = {
    "object": lambda: BudgetGuard(max_loop_budget=2, totals=Totals()),
    "module": capping_module,
    "name": lambda: "budget_guard",  # its ceiling from SAMPLEHOOKS_BUDGET_GUARD
    "tuple": lambda: ("budget_guard", {"max_loop_budget": 2}),
    "dict": lambda: {"name": "budget_guard", "options": {"max_loop_budget": 2}},
}


@pytest.fixture(params=sorted(FORMS))
def spec(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    if request.param == "name":
        monkeypatch.setenv("SAMPLEHOOKS_BUDGET_GUARD", "max_loop_budget=2")
    else:
        monkeypatch.delenv("SAMPLEHOOKS_BUDGET_GUARD", raising=False)
    return FORMS[request.param]()


def failing_backend() -> ScriptedBackend:
    return ScriptedBackend(["no animal here"])


@pytest.mark.anyio
async def test_each_form_on_the_sampler_caps_every_call(spec: Any) -> None:
    backend = failing_backend()
    sampler = Sampler(backend, plugins=[spec], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[lambda t: "zebra" in t], loop_budget=5)
    assert (result.iterations_used, backend.calls) == (2, 2)


@pytest.mark.anyio
async def test_each_form_given_to_one_call_caps_that_call_only(spec: Any) -> None:
    backend = failing_backend()
    sampler = Sampler(backend, load_entrypoints=False)
    capped = await sampler.sample(
        "q", requirements=[lambda t: "zebra" in t], loop_budget=5, plugins=[spec]
    )
    plain = await sampler.sample("q", requirements=[lambda t: "zebra" in t], loop_budget=5)
    assert (capped.iterations_used, plain.iterations_used, backend.calls) == (2, 5, 7)


BAD_SPECS = [
    (
        ("budget_guard", {"no_such_option": 1}),
        "plugin 'budget_guard' failed in options",
        "no_such_option",
    ),
    (
        {"name": "budget_guard", "options": {"max_loop_budget": "two"}},
        "plugin 'budget_guard' failed in options",
        "max_loop_budget",
    ),
    (("budget_guard", ["max_loop_budget"]), "plugin 'budget_guard' failed in options", "mapping"),
    (
        {"name": "budget_guard", "option": {"max_loop_budget": 2}},
        "plugin 'budget_guard' failed in options",
        "'option'",
    ),
    (("no_such_plugin", {}), "plugin 'no_such_plugin' failed in load", "no_such_plugin"),
    ({"options": {}}, "failed in load", "'name'"),
    (("budget_guard", {}, "extra"), "failed in load", "cannot read this spec"),
]


@pytest.mark.parametrize(("bad", "says", "names"), BAD_SPECS)
def test_a_bad_spec_on_the_sampler_is_one_error_naming_plugin_and_option(
    bad: Any, says: str, names: str
) -> None:
    with pytest.raises(PluginError) as raised:
        Sampler(failing_backend(), plugins=[bad], load_entrypoints=False)
    assert says in str(raised.value) and names in str(raised.value)


@pytest.mark.anyio
@pytest.mark.parametrize(("bad", "says", "names"), BAD_SPECS)
async def test_a_bad_spec_given_to_a_call_fails_before_any_generation(
    bad: Any, says: str, names: str
) -> None:
    backend = failing_backend()
    sampler = Sampler(backend, load_entrypoints=False)
    with pytest.raises(PluginError) as raised:
        await sampler.sample("q", loop_budget=5, plugins=[bad])
    assert says in str(raised.value) and names in str(raised.value)
    assert backend.calls == 0


def run_dir_config(tmp_path: Path, plugins: list[Any]) -> Path:
    dataset = write_dataset(tmp_path / "prompts.jsonl", 2)
    return write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["no animal here"]},
        requirements=[{"contains": "zebra"}],
        budgets={"loop_budget": 5},
        plugins=plugins,
    )


@pytest.mark.parametrize(
    "entry",
    [{"name": "budget_guard", "options": {"max_loop_budget": 2}}, "budget_guard"],
    ids=["mapping", "name"],
)
def test_a_run_configs_plugins_cap_every_prompt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: Any
) -> None:
    if entry == "budget_guard":
        monkeypatch.setenv("SAMPLEHOOKS_BUDGET_GUARD", "max_loop_budget=2")
    config = run_dir_config(tmp_path, [entry])
    run_batch_sync(config, tmp_path / "out")
    assert [r["attempts"]["used"] for r in records(tmp_path / "out")] == [2, 2]


def test_a_bad_option_in_a_run_config_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    config = run_dir_config(tmp_path, [{"name": "budget_guard", "options": {"no_such": 1}}])
    with pytest.raises(ConfigError) as raised:
        run_batch_sync(config, tmp_path / "out")
    assert "budget_guard" in str(raised.value) and "no_such" in str(raised.value)
    assert not (tmp_path / "out").exists()


runner = CliRunner()


def test_the_cli_sample_plugin_option_caps_the_call() -> None:
    result = runner.invoke(
        app,
        [
            "sample", "q", "--backend", "scripted", "--reply", "no animal here",
            "--require", "contains:zebra", "--loop-budget", "5", "--json",
            "--plugin", "budget_guard:max_loop_budget=2",
        ],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["iterations_used"] == 2


def test_the_cli_run_plugin_option_caps_every_prompt(tmp_path: Path) -> None:
    config = run_dir_config(tmp_path, [])
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["run", str(config), "--out", str(out), "--plugin", "budget_guard:max_loop_budget=2"]
    )
    assert result.exit_code == 0, result.output
    assert [r["attempts"]["used"] for r in records(out)] == [2, 2]


@pytest.mark.parametrize("command", ["sample", "run"])
def test_a_bad_cli_plugin_option_is_one_line_naming_plugin_and_option(
    tmp_path: Path, command: str
) -> None:
    config = run_dir_config(tmp_path, [])
    before = snapshot(tmp_path)
    args = {
        "sample": ["sample", "q", "--backend", "scripted", "--reply", "x"],
        "run": ["run", str(config), "--out", str(tmp_path / "out")],
    }[command]
    result = runner.invoke(app, [*args, "--plugin", "budget_guard:no_such_option=1"])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert "budget_guard" in line and "no_such_option" in line
    assert snapshot(tmp_path) == before  # nothing written
