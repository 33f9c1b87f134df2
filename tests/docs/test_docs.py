"""The docs site: the hook reference matches ``hook_specs``, the examples run, it builds strictly.

Python blocks fenced as ```` ```python ```` in the pages below are executed, each page's blocks
in order in one namespace. A block whose first line is ``# test_<name>.py`` is a pytest module:
it is run by pytest in a subprocess instead, with the page's first block as the plugin module
it imports.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest
import typer

from hook_specs import PAYLOAD_TYPES, HookName, specs
from sampling_core import RepairTemplate, Sampler, TransientBackendError
from sampling_core.backends.transport import RetryPolicy
from sampling_core.cli.app import app
from sampling_core.requirements.checks import contains
from tests.support.plugin_site import run_python

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXECUTED_PAGES = [
    "index.md",
    "quickstart.md",
    "concepts.md",
    "writing-plugins.md",
    "writing-an-exporter.md",
    "spending-fewer-tokens.md",
    "comparing-runs.md",
    "fewer-samples.md",
    "plugins/cache.md",
]


def load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```\s*$", text, re.S | re.M)


def example_blocks(section: str) -> list[str]:
    """The python blocks after a hook section's "**Example.**" label."""
    _, _, after = section.partition("**Example.**")
    return python_blocks(after)


def sections(text: str) -> dict[str, str]:
    """Level-2 sections of a page by heading text (up to the next level-2 heading)."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


@pytest.fixture(scope="module")
def hook_sections() -> dict[HookName, str]:
    found = {}
    for heading, body in sections((DOCS / "hooks.md").read_text()).items():
        match = re.fullmatch(r"`(\w+)`(?: \{#\w+\})?", heading)
        if match and match.group(1) in {h.value for h in HookName.fired()}:
            found[HookName(match.group(1))] = body
    return found


# -- the hook reference -----------------------------------------------------------------


def test_the_committed_hook_reference_is_what_gen_hooks_writes() -> None:
    gen_hooks = load(DOCS / "gen_hooks.py", "gen_hooks")
    assert (DOCS / "hooks.md").read_text() == gen_hooks.render(), (
        "docs/hooks.md is stale: run `python docs/gen_hooks.py`"
    )


def test_every_hook_and_every_payload_field_is_documented(
    hook_sections: dict[HookName, str],
) -> None:
    missing = [hook.value for hook in HookName.fired() if hook not in hook_sections]
    assert not missing, f"hooks without a section in docs/hooks.md: {missing}"
    for hook, body in hook_sections.items():
        assert callable(getattr(specs, hook.value)) and getattr(specs, hook.value).__doc__
        payload = PAYLOAD_TYPES[hook]
        assert f"{hook.value}(payload: {payload.__name__})" in body
        for name, info in payload.model_fields.items():
            assert info.description, f"{payload.__name__}.{name} has no description"
            row = re.search(rf"^\| `{name}` \| `[^`]+` \| (.+) \|$", body, re.M)
            assert row, f"{hook.value}: payload field {name!r} is not documented"
            assert info.description.removesuffix(" Writable.").split("`")[0] in row.group(1)
            assert ("**Writable.**" in row.group(1)) == (name in payload.writable)
        assert "**When it fires.**" in body and "**What may be changed.**" in body
        assert len(example_blocks(body)) == 1, f"{hook.value}: expected one example"


def test_the_hook_examples_are_plugins_that_run(hook_sections: dict[HookName, str]) -> None:
    plugins = [example_plugin(hook, hook_sections[hook]) for hook in HookName.per_call()]

    async def reply(request: Any) -> str:
        if request.iteration.subsample_index == 3:  # in flight until the winner cancels it
            await anyio.sleep_forever()
        return "yes" if request.iteration.attempt == 2 else "no"

    from sampling_core.testing import HookRecorder, make_scripted_backend

    recorder = HookRecorder()
    backend = make_scripted_backend(reply, failures={1: TransientBackendError("429")})
    sampler = Sampler(
        backend,
        plugins=[*plugins, recorder],
        load_entrypoints=False,
        strict_plugins=True,
        retry=RetryPolicy(max_retries=1, base_delay=0.001),
    )
    result = sampler.sample_sync(
        "Say yes.",
        requirements=[contains("yes")],
        strategy=RepairTemplate(),
        loop_budget=2,
        concurrency_budget=8,
    )
    assert result.success and result.plugin_errors == []
    assert set(recorder.names()) == {hook.value for hook in HookName.per_call()}
    assert result.concurrency_budget == 4  # CapConcurrency
    summary, errors = plugins[3], plugins[6]
    assert summary.lines and errors.errors == {"TransientBackendError (retried)": 1}
    (cancelled,) = [p for p in plugins if type(p).__name__ == "CancelledCalls"]
    assert set(cancelled.reasons) == {"sibling_succeeded"}  # subsample 3's call, at least


def example_plugin(hook: HookName, section: str) -> Any:
    """The plugin of a hook section's example, made."""
    namespace: dict[str, Any] = {"__name__": f"hooks_md_{hook.value}"}
    exec(compile(example_blocks(section)[0], f"hooks.md:{hook.value}", "exec"), namespace)
    (cls,) = [v for v in namespace.values() if isinstance(v, type) and hasattr(v, hook.value)]
    assert hasattr(getattr(cls, hook.value), "samplehooks_impl"), f"{cls} is no hookimpl"
    return cls()


def test_the_run_hook_examples_are_plugins_that_run(
    hook_sections: dict[HookName, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from sampling_core import ScriptedBackend
    from sampling_core.runs import run_batch_sync
    from tests.support.runs_helpers import write_config

    monkeypatch.chdir(tmp_path)  # FailureLog writes failures.jsonl here
    banner, topics, failures, scores = (
        example_plugin(hook, hook_sections[hook]) for hook in HookName.run()
    )
    dataset = tmp_path / "data.jsonl"
    lines = [{"id": "a", "topic": "sea"}, {"id": "b"}, {"id": "c", "topic": "sea"}]
    dataset.write_text("".join(json.dumps({**x, "prompt": x["id"]}) + "\n" for x in lines))
    passes = {"a": (True, True), "b": (False, False), "c": (True, False)}  # by subsample

    def reply(request: Any) -> str:
        ok = passes[request.messages[0]["content"]][request.iteration.subsample_index]
        return "short" if ok else "far too many words"

    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        requirements=[{"max_words": 2}],
        budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
    )
    plugins = [banner, topics, failures, scores]
    run_batch_sync(config, tmp_path / "run", backend=ScriptedBackend(reply), plugins=plugins)
    run_dir = str(tmp_path / "run")
    assert banner.lines == [f"starting {run_dir} (session 1): 3 of 3 prompts to run (local)"]
    assert topics.topics == {"sea": 2, "none": 1}
    logged = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert [(x["key"], x["status"]) for x in logged] == [("b", "failed")]
    # pass^1 = mean(2/2, 0/2, 1/2); pass^2 = mean(1, 0, 0)
    assert scores.lines == ["2 ok, 1 failed, 0 errors of 3; pass^1 50%; pass^2 33%"]


# -- the other pages --------------------------------------------------------------------


@pytest.mark.parametrize("page", EXECUTED_PAGES)
def test_the_python_blocks_of_the_page_run(page: str, plugin_env: Any) -> None:
    blocks = [b for b in python_blocks((DOCS / page).read_text()) if not b.startswith("# test_")]
    assert blocks, f"{page} has no python block"
    namespace: dict[str, Any] = {"__name__": f"docs_{page}"}
    for number, block in enumerate(blocks):
        exec(compile(block, f"{page} block {number}", "exec"), namespace)


def test_the_testing_example_passes_under_pytest(tmp_path: Path) -> None:
    blocks = python_blocks((DOCS / "writing-plugins.md").read_text())
    (test_module,) = [b for b in blocks if b.startswith("# test_")]
    (tmp_path / "samplehooks_pass_rate.py").write_text(blocks[0])
    (tmp_path / "test_pass_rate.py").write_text(test_module)
    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
    done = run_python(tmp_path, "-m", "pytest", *flags, "test_pass_rate.py", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_every_cli_command_is_documented() -> None:
    def paths(command: Any, prefix: str) -> list[str]:
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            return [prefix]
        itself = [prefix] if getattr(command, "invoke_without_command", False) else []
        return itself + [p for n, c in subcommands.items() for p in paths(c, f"{prefix} {n}")]

    commands = paths(typer.main.get_command(app), "samplehooks")
    assert "samplehooks plugins" in commands
    headings = " ".join(sections((DOCS / "cli.md").read_text()))
    missing = [c for c in commands if f"`{c}`" not in headings]
    assert not missing, f"commands without a section in docs/cli.md: {missing}"


def test_nav_hook_files_unlisted_pages_into_sections(tmp_path: Path) -> None:
    nav_hook = load(DOCS / "nav_hook.py", "nav_hook")
    for page in ("index.md", "cli.md", "guide.md", "plugins/b.md", "plugins/a.md", "x/y.md"):
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text("# t\n")
    config = {
        "docs_dir": str(tmp_path),
        "nav": [
            {"Home": "index.md"},
            {"Built-in plugins": []},
            {"Empty": []},
            {"Guides": []},
            {"CLI": "cli.md"},
        ],
    }
    assert nav_hook.on_config(config)["nav"] == [
        {"Home": "index.md"},
        {"Built-in plugins": ["plugins/a.md", "plugins/b.md"]},
        {"Guides": ["guide.md", "x/y.md"]},
        {"CLI": "cli.md"},
    ]


@pytest.mark.slow
def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    reference = (site / "hooks" / "index.html").read_text()
    for hook in HookName.per_call():
        assert f'id="{hook.value}"' in reference
    assert not list(site.rglob("*.py")), "scripts in docs/ must not be published"
    # the API reference is generated from the docstrings
    api = (site / "api" / "index.html").read_text()
    for name in ("Sampler", "concurrency_budget", "BudgetError", "OrderingChecker", "Raises"):
        assert name in api, name
    # the example plugin's files are shown as they are in examples/plugin-example
    example = (site / "example-plugin" / "index.html").read_text()
    assert "ExamplePlugin" in example and "--8&lt;--" not in example
    # the site works offline: diagrams are local files, nothing is fetched from elsewhere
    for diagram in ("subsample-grid", "attempt-hooks", "run-directory"):
        assert (site / "diagrams" / f"{diagram}.svg").is_file()
    for page in site.rglob("*.html"):
        fetched = re.findall(
            r'<(?:script|link|img)\b[^>]*?(?:src|href)="([^"]+)"', page.read_text()
        )
        remote = [url for url in fetched if url.startswith(("http:", "https:", "//"))]
        assert not remote, (page, remote)


def test_the_readme_quickstart_runs(plugin_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (DOCS.parent / "README.md").read_text()
    (block,) = python_blocks(readme)
    exec(compile(block, "README.md quickstart", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "passed=False" in out and out.rstrip().endswith("True Endless blue, restless, deep.")


def test_the_hooks_that_may_write_are_named_where_the_docs_list_them() -> None:
    """Every page that says how many hooks may write, and which, says what the contract
    derives (the concepts, writing plugins and hook delivery pages must say it)."""
    writable = sorted(hook.value for hook, cls in PAYLOAD_TYPES.items() if cls.writable)
    numbers = {3: "three", 4: "four", 5: "five", 6: "six"}
    found_in = set()
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for found in re.finditer(r"[Tt]he (\w+) hooks that\s+may write \(([^)]*)\)", text):
            found_in.add(page.name)
            assert found.group(1) == numbers[len(writable)], page.name
            assert sorted(re.findall(r"`(\w+)`", found.group(2))) == writable, page.name
    assert {"hook-delivery.md", "concepts.md", "writing-plugins.md"} <= found_in
    recorder = (DOCS / "plugins" / "recorder.md").read_text()
    assert f"for the {numbers[len(writable)]} hooks plugins may" in recorder
    providers = len([hook for hook in HookName if hook.is_provider])
    said = re.findall(r"(\w+) provider hooks", (DOCS / "writing-plugins.md").read_text())
    assert said and {word.lower() for word in said} == {numbers.get(providers, "?")}


_ELSEWHERE = re.compile(
    r"(?i)\bdesign(\.md)?('s)?\s+(section|example)|\bsection\s+\d+\s+of\s+the\s+design"
    r"|\bissues?\s+#?\d+|\bissue-\d+"
)


def test_no_doc_or_docstring_points_at_material_the_project_does_not_contain() -> None:
    """Readers have the repository, not the design notes or the issue tracker it was built
    from: no page, docstring or comment points at "DESIGN section N" or "issue N"."""
    root = DOCS.parent
    files = [*DOCS.rglob("*.md"), root / "README.md"]
    for folder in ("sampling_core", "hook_specs", "builtin_plugins", "benchmarks", "tests", "docs"):
        files += (root / folder).rglob("*.py")
    hits = []
    for path in files:
        if path.name == "test_docs.py":
            continue
        text = path.read_text(encoding="utf-8")
        hits += [f"{path.relative_to(root)}: {m.group()}" for m in _ELSEWHERE.finditer(text)]
        hits += [f"{path.relative_to(root)}: DESIGN" for _ in re.finditer(r"\bDESIGN\b", text)]
    assert hits == []
    assert _ELSEWHERE.search("as design section 6 says") and _ELSEWHERE.search("issue 11")
