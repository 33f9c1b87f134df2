"""Re-lay out ``sampling_core/runs/`` into subpackages and ``tests/`` into folders, once.

Run from a checkout's root, on a clean work tree::

    python scripts/relayout.py --plan    # check the mappings against the tree; change nothing
    python scripts/relayout.py           # move (git mv), rewrite every reference, ruff-fix
    git diff --cached --stat && python -m pytest -q && git commit -m "layout: ..."

What it does:

1. ``sampling_core/runs/<module>.py`` moves to ``sampling_core/runs/<part>/<module>.py`` as
   ``RUNS_PARTS`` says (``errors.py`` and ``__init__.py`` stay); each part gets an
   ``__init__.py`` whose docstring names its modules, downhill, with each one's summary line.
2. ``tests/test_*.py`` moves to ``tests/<folder>/test_*.py`` as ``TEST_FILES`` and
   ``TEST_PREFIXES`` say (a prefix naming the folder is dropped: ``test_runs_store.py`` becomes
   ``tests/runs/test_store.py``); the helpers move to ``tests/support/``. Every folder is a
   package under the package ``tests``: test modules are ``tests.<folder>.<name>`` (basenames
   may repeat) and helpers import as ``from tests.support.engine_helpers import strict``.
   ``conftest.py`` stays at ``tests/``.
3. Every reference in the tracked text files is rewritten: dotted names
   (``sampling_core.runs.store`` becomes ``sampling_core.runs.store.store``, in imports,
   monkeypatch targets and docs), ``from sampling_core.runs import store`` forms, paths
   (``runs/store.py``, ``tests/test_runs_store.py``, a test file named in backquotes), helper
   imports, and ``Path(__file__)`` climbs in moved tests (one folder deeper).
4. ``tests/design/test_layering.py`` draws each runs part as a layer, downhill in the order
   of ``RUNS_PARTS``; ``docs/architecture.md`` gets the tables of both layouts.

A module in ``runs/`` or a test file in ``tests/`` that no mapping names stops the script
before anything is changed: add it to the mapping. A mapped module that no longer exists is
skipped. The result is staged, with this script removed (its job is done; ``--keep-script``
keeps it). Standard library only (ruff is run afterwards when it is found next to the Python
running this script, or on ``PATH``).
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import io
import re
import shutil
import subprocess
import sys
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

RUNS = Path("sampling_core/runs")
RUNS_PACKAGE = "sampling_core.runs"
RUNS_STAY = {"__init__", "errors"}
"""``runs/`` modules that stay where they are: the public surface and the bottom layer."""

RUNS_PARTS: dict[str, tuple[str, str, list[str]]] = {
    "stats": (
        "estimators over a run's prompts",
        "Estimators over a run's prompts, pure arithmetic: pass@k and pass^k, maj@k, paired"
        " differences of two runs, and their bootstrap intervals.",
        ["bootstrap", "passk", "majk*", "paired"],
    ),
    "config": (
        "what a run is made from",
        "What a run is made from: the run config, how it is read and classified for resume, the"
        " labelled walk of what a run depends on, the engine objects it builds and the dataset.",
        ["config", "classification", "components", "loading", "labelled", "dataset"],
    ),
    "store": (
        "the run directory and its index",
        "The run directory on disk: its files, the records and their whole texts in whole"
        " lines, what the files must hold, and the index a run is read through.",
        [
            "files", "caps", "kept_texts", "record_writer", "shapes", "store", "meta_hashes",
            "rows", "index", "outcome", "votes", "record", "record_*", "attempt_entry",
        ],
    ),
    "resume": (
        "what may change when a run continues",
        "Continuing a run: whether the directory is what it says it is, and what may change.",
        ["integrity", "resume"],
    ),
    "reports": (
        "what a run's records say",
        "What a run's records say: a run read once at its end, the summary, the report, two"
        " runs compared, and the files a command writes.",
        ["summary", "report", "outputs", "compare*", "run_reading"],
    ),
    "execution": (
        "running a batch",
        "Running a batch: the runner, its sessions and prompts, the run hooks, the progress"
        " bar, the run's response cache and the Ray executor.",
        [
            "prompt_run", "progress", "run_hooks", "session", "ray_worker", "ray_executor",
            "run_cache", "runner",
        ],
    ),
    "rescoring": (
        "a finished run checked again",
        "A finished run's kept attempts checked against new requirements, with no generation.",
        ["rescore_record", "rescoring", "rescore*"],
    ),
}  # fmt: skip
"""Each part of ``runs/``, bottom to top (a part imports only parts before it, and
``errors``): its title, what it is, and its modules (``fnmatch`` patterns allowed). A part must not
be named like a public name of ``sampling_core.runs`` (``rescore`` is a function there). The
estimators sit below the store: the index keeps each prompt's votes for maj@k (``votes``)."""

TEST_FOLDERS: dict[str, str] = {
    "engine": "``sampling_core.engine``: one ``sample()`` call, its loop, tally, budgets,"
    " launch and streaming.",
    "hooks": "hook delivery (``sampling_core.hooks``), plugin specs and the hook contract"
    " (``hook_specs``).",
    "requirements": "``sampling_core.requirements``: the built-in checks, the dataset-field"
    " checks and the judge.",
    "backends": "``sampling_core.backends``: the real backends, transport retries and limits,"
    " the response cache.",
    "events": "``sampling_core.events``: recorded hook events read back.",
    "runs": "``sampling_core.runs``: batch runs, their directory, resume, reports, rescore.",
    "plugins": "``builtin_plugins``, and plugins installed the way users install them.",
    "cli": "the ``samplehooks`` command line (``sampling_core.cli``).",
    "view": "``samplehooks view`` (``sampling_core.view``).",
    "core": "``sampling_core``'s top-level modules: prices and secret scrubbing.",
    "testing": "the pytest kit for plugin authors (``sampling_core.testing`` and"
    " ``sampling_core.pytest_plugin``).",
    "benchmarks": "``benchmarks``: each one runs and reports numbers (speed is never asserted).",
    "docs": "the docs site: the hook reference, the examples in the pages, the strict build.",
    "design": "the project's rules, checked across the tree: one-way layering, the public"
    " surface, exception text, package docstrings, test isolation.",
    "reliability": "cross-cutting reliability suites: bad input, hangs, secrets, damaged runs,"
    " hostile plugins and replies.",
    "seams": "features together (the response cache, early stop, confidence, scorers, votes,"
    " rescore, retries, cancelled calls): the numbers each gives are right with the others.",
    "properties": "property tests: the engine's invariants over random scenarios and faults.",
}
"""Folders of test files under ``tests/``, with what each one tests."""

SUPPORT = "support"
SUPPORT_DOC = (
    "What the tests share, and no test: helpers (``from tests.support.engine_helpers import"
    " strict``), the result invariants, installed plugin sites, the plugins Ray workers import"
    " (by module name: the workers get the checkout on ``PYTHONPATH``) and the test servers"
    " (``_servers``)."
)
HELPERS = ["*_helpers.py", "invariants.py", "plugin_site.py", "ray_test_plugins.py"]
"""Files of ``tests/`` that move to ``tests/support/`` as they are (and ``_servers/``)."""
HELPER_PACKAGES = ["_servers"]

TEST_FILES: dict[str, str] = {
    # engine
    "test_attempt_path_attributes.py": "engine/test_attempt_path_attributes.py",
    "test_launch_matrix.py": "engine/test_launch_matrix.py",
    "test_tally_owns_its_state.py": "engine/test_tally_owns_its_state.py",
    "test_call_garbage.py": "engine/test_call_garbage.py",
    "test_loop_end_payload.py": "engine/test_loop_end_payload.py",
    "test_sampling_ids.py": "engine/test_sampling_ids.py",
    "test_subsample_tasks.py": "engine/test_subsample_tasks.py",
    "test_tokens_launch.py": "engine/test_launch.py",
    "test_tokens_streaming.py": "engine/test_streaming.py",
    # hooks (``dispatch.py`` is gone: its tests are named for what they test)
    "test_call_plugins_cache.py": "hooks/test_call_plugins_cache.py",
    "test_fault_bounds.py": "hooks/test_fault_bounds.py",
    "test_read_only_views.py": "hooks/test_read_only_views.py",
    "test_dispatch_exact.py": "hooks/test_delivery_exact.py",
    "test_dispatch_faults_exact.py": "hooks/test_delivery_faults_exact.py",
    "test_plugins_dispatch.py": "hooks/test_channel.py",
    "test_plugin_specs.py": "hooks/test_plugin_specs.py",
    "test_plugins_entrypoints.py": "hooks/test_entry_points.py",
    # requirements
    "test_requirements.py": "requirements/test_checks.py",
    "test_field_checks.py": "requirements/test_field_checks.py",
    "test_judge_through_engine.py": "requirements/test_judge.py",
    "test_confidence.py": "requirements/test_confidence.py",
    # backends
    "test_local_backend.py": "backends/test_local.py",
    "test_openai_backend.py": "backends/test_openai.py",
    "test_real_sampling.py": "backends/test_real_sampling.py",
    "test_tokens_local.py": "backends/test_tokens_local.py",
    # events
    "test_event_attempts.py": "events/test_attempts.py",
    # runs
    "test_eval_example.py": "runs/test_eval_example.py",
    "test_kept_texts.py": "runs/test_kept_texts.py",
    "test_prompt_key.py": "runs/test_prompt_key.py",
    "test_rescore.py": "runs/test_rescore.py",
    "test_run_hooks.py": "runs/test_run_hooks.py",
    "test_run_record.py": "runs/test_record.py",
    "test_read_once.py": "runs/test_read_once.py",
    "test_tokens_runs.py": "runs/test_tokens.py",
    # plugins
    "test_builtins_cover_every_hook.py": "plugins/test_builtins_cover_every_hook.py",
    "test_example_plugin.py": "plugins/test_example_plugin.py",
    "test_llm_bridge.py": "plugins/test_llm_bridge.py",
    "test_recorder_background.py": "plugins/test_recorder_background.py",
    # cli, view, core, testing, docs
    "test_plugin_template.py": "cli/test_plugin_template.py",
    "test_view.py": "view/test_view.py",
    "test_pricing.py": "core/test_pricing.py",
    "test_redaction.py": "core/test_redaction.py",
    "test_testing_kit.py": "testing/test_kit.py",
    "test_pytest_plugin_modes.py": "testing/test_pytest_plugin_modes.py",
    "test_docs.py": "docs/test_docs.py",
    # design
    "test_layering.py": "design/test_layering.py",
    "test_exported_members.py": "design/test_exported_members.py",
    "test_exception_text.py": "design/test_exception_text.py",
    "test_package_docstrings.py": "design/test_package_docstrings.py",
    "test_structlog_isolation.py": "design/test_structlog_isolation.py",
    # cross-cutting
    "test_engine_properties.py": "properties/test_engine.py",
    "test_reliability_properties.py": "properties/test_faults.py",
    "test_reliability_docs.py": "reliability/test_page.py",  # not a second test_docs.py
    "test_unknown_is_not_zero.py": "reliability/test_unknown_is_not_zero.py",
}
"""Test files placed one by one (checked before ``TEST_PREFIXES``)."""

TEST_PREFIXES: list[tuple[str, str, bool]] = [
    ("test_engine_", "engine", True),
    ("test_hook_", "hooks", True),
    ("test_hooks_", "hooks", True),
    ("test_plugins_", "hooks", True),
    ("test_plugin_", "plugins", True),
    ("test_runs_", "runs", True),
    ("test_reliability_", "reliability", True),
    ("test_seams_", "seams", True),
    ("test_cli_", "cli", True),
    ("test_view_", "view", True),
    ("test_benchmarks_", "benchmarks", True),
    ("test_transport_", "backends", False),
    ("test_response_cache", "backends", False),
    ("test_compare", "runs", False),
    ("test_rescore", "runs", False),
    ("test_record", "runs", False),
    ("test_ttc_", "engine", False),
    ("test_consensus", "engine", False),
    ("test_scorer", "engine", False),
    ("test_logprobs", "backends", False),
    ("test_around_hooks", "hooks", False),
    ("test_call_hooks", "hooks", False),
    ("test_generation_call", "hooks", False),
    ("test_sampling_call", "hooks", False),
    ("test_cache", "backends", False),
]
"""``(prefix, folder, drop the prefix)``, first match wins: ``test_runs_store.py`` ->
``runs/test_store.py``; ``test_transport_limits.py`` -> ``backends/test_transport_limits.py``."""

PROTECTED = ["httpx's ``tests/test_exported_members.py``"]
"""Text that names someone else's file: never rewritten."""

EXACT_EDITS: list[tuple[str, str, str]] = [
    (  # Ray workers import tests.support.ray_test_plugins: the checkout on their path
        "tests/runs/test_ray.py",
        "TESTS = Path(__file__).parents[1]",
        "CHECKOUT = Path(__file__).resolve().parents[2]  # workers import tests.support.*",
    ),
    ("tests/runs/test_ray.py", '"PYTHONPATH": str(TESTS)', '"PYTHONPATH": str(CHECKOUT)'),
    (
        "tests/runs/test_ray.py",
        "workers import this directory's plugins",
        "workers import our test plugins",
    ),
    (
        "tests/support/ray_test_plugins.py",
        "puts this directory on the workers'",
        "puts the checkout on the workers'",
    ),
    (  # the page names tests by their path under tests/
        "tests/reliability/test_page.py",
        r'r"`(test_\w+\.py)::(test_\w+)`"',
        r'r"`((?:\w+/)*test_\w+\.py)::(test_\w+)`"',
    ),
    (
        "docs/testing.md",
        "tests import small modules from `tests/` by name",
        "tests import small modules from `tests/support/`",
    ),
    ("docs/testing.md", "(`tests/test_plugin_*.py`)", "(`tests/plugins/test_*.py`)"),
    (
        "tests/design/test_layering.py",
        '    ("sampling_core.runs", "sampling_core.testing"),\n',
        "{layers}",
    ),
    (
        "tests/design/test_layering.py",
        "def _part(module: str) -> str:\n    parts = module.split(\".\")\n",
        "{part}",
    ),
]  # fmt: skip
"""``(file after the move, text, replacement)`` made after the generic rewrites; each is
expected exactly once (one that does not apply is listed for checking by hand)."""

TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini", ".json"}
TEXT_NAMES = {".ci/run"}
SELF = Path("scripts/relayout.py")


class Refused(SystemExit):
    """The tree is not what the mappings describe: nothing was changed."""


@dataclass
class Plan:
    """What moves where, and the names that change with it."""

    runs_moves: dict[str, str] = field(default_factory=dict)  # module -> part
    test_moves: dict[Path, Path] = field(default_factory=dict)  # old path -> new path
    helper_moves: dict[Path, Path] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)

    def moves(self) -> dict[Path, Path]:
        runs = {
            RUNS / f"{module}.py": RUNS / part / f"{module}.py"
            for module, part in self.runs_moves.items()
        }
        return {**runs, **self.test_moves, **self.helper_moves}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def tracked() -> list[Path]:
    return [Path(line) for line in git("ls-files").splitlines() if line]


def plan_moves(files: list[Path]) -> Plan:
    """The moves the mappings make of ``files`` (the tracked files), or ``Refused``."""
    plan = Plan()
    problems: list[str] = []
    runs_modules = sorted(p.stem for p in files if p.parent == RUNS and p.suffix == ".py")
    if any(p.parent.parent == RUNS for p in files):
        raise Refused("sampling_core/runs/ has subpackages already: was this script run?")
    public = _bound_names(RUNS / "__init__.py")
    for part in RUNS_PARTS:
        if part in public or part in RUNS_STAY:
            problems.append(f"runs part {part!r} is also a name of sampling_core.runs: rename it")
    for module in runs_modules:
        if module in RUNS_STAY:
            continue
        parts = [
            part
            for part, (_, _, patterns) in RUNS_PARTS.items()
            if any(fnmatch.fnmatchcase(module, p) for p in patterns)
        ]
        if not parts:
            problems.append(f"sampling_core/runs/{module}.py is in no part: add it to RUNS_PARTS")
        else:
            plan.runs_moves[module] = parts[0]
    for part, (_, _, patterns) in RUNS_PARTS.items():
        for pattern in patterns:
            if not any(fnmatch.fnmatchcase(m, pattern) for m in runs_modules):
                plan.skipped.append(f"runs part {part}: no module {pattern!r} (skipped)")
    tests = Path("tests")
    for path in files:
        if path.parts[0] != "tests" or (path.name == "conftest.py" and path.parent == tests):
            continue
        relative = path.relative_to(tests)
        if relative.parts[0] in HELPER_PACKAGES or (
            len(relative.parts) == 1 and any(fnmatch.fnmatch(path.name, h) for h in HELPERS)
        ):
            plan.helper_moves[path] = tests / SUPPORT / relative
        elif len(relative.parts) > 1:
            problems.append(f"{path}: tests/ has folders already (was this script run?)")
        elif path.name.startswith("test_") and path.suffix == ".py":
            target = _test_target(path.name)
            if target is None:
                problems.append(f"{path} is in no folder: add it to TEST_FILES or TEST_PREFIXES")
            else:
                plan.test_moves[path] = tests / target
        else:
            problems.append(f"{path}: neither a test nor a known helper: add it to HELPERS")
    for name, target in TEST_FILES.items():
        if tests / name not in plan.test_moves:
            plan.skipped.append(f"TEST_FILES: no {name} (skipped)")
        if target.split("/")[0] not in TEST_FOLDERS:
            problems.append(f"TEST_FILES[{name!r}]: {target} is in no folder of TEST_FOLDERS")
    targets: dict[Path, Path] = {}
    for old, new in plan.moves().items():
        if new in targets:
            problems.append(f"{old} and {targets[new]} would both be {new}")
        targets[new] = old
    if problems:
        raise Refused("relayout: nothing changed.\n  " + "\n  ".join(problems))
    return plan


def _test_target(name: str) -> str | None:
    if name in TEST_FILES:
        return TEST_FILES[name]
    for prefix, folder, drop in TEST_PREFIXES:
        if name.startswith(prefix):
            return f"{folder}/test_{name.removeprefix(prefix)}" if drop else f"{folder}/{name}"
    return None


def _bound_names(init: Path) -> set[str]:
    tree = ast.parse(init.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            names.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


# -- rewriting references ------------------------------------------------------------------


def _alternatives(names: list[str]) -> str:
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))


class Rewriter:
    """Every reference to a moved module or file, rewritten in one pass per pattern."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.runs = plan.runs_moves
        mods = _alternatives(list(self.runs)) or r"(?!x)x"
        self.dotted = re.compile(rf"\bsampling_core\.runs\.({mods})\b")
        self.short_dotted = re.compile(rf"(?<![\w.])runs\.({mods})\b(?!\.py)")
        self.runs_path = re.compile(rf"(?<![\w.-])((?:sampling_core/)?runs/)({mods})\.py\b")
        self.from_runs = re.compile(
            r"from sampling_core\.runs import "
            r"(?:\(\s*(?P<group>[^)]*)\)|(?P<plain>\w+(?: as \w+)?(?:, *\w+(?: as \w+)?)*))"
        )
        tests = {old.name: new.relative_to("tests") for old, new in plan.test_moves.items()}
        self.tests = tests
        names = _alternatives([n.removesuffix(".py") for n in tests]) or r"(?!x)x"
        self.test_path = re.compile(rf"(?<![\w/.-])tests/({names})\.py\b")
        self.test_bare = re.compile(rf"(?<=`)({names})(\.py\b|(?=`))")
        self.test_import = re.compile(rf"(?<![\w.])(from|import) ({names})\b")
        helpers = sorted({_top(old.relative_to("tests")) for old in plan.helper_moves})
        h = _alternatives(helpers) or r"(?!x)x"
        self.helper_path = re.compile(rf"(?<![\w/.-])tests/((?:{h})(?:\.py\b|/))")
        self.helper_import = re.compile(rf"(?<![\w.])from ({h})((?:\.\w+)*) import\b")
        self.helper_plain_import = re.compile(rf"(?m)^(\s*)import ({h})\s*$")
        self.warnings: list[str] = []

    def text(self, path: Path, text: str) -> str:
        kept = {f"\0{i}\0": p for i, p in enumerate(PROTECTED) if p in text}
        for marker, protected in kept.items():
            text = text.replace(protected, marker)
        # dotted names first: what the next line writes is already the new dotted name
        text = self.dotted.sub(lambda m: f"sampling_core.runs.{self._part(m)}.{m[1]}", text)
        text = self.from_runs.sub(lambda m: self._from_runs(path, text, m), text)
        text = self.short_dotted.sub(lambda m: f"runs.{self._part(m)}.{m[1]}", text)
        text = self.runs_path.sub(lambda m: f"{m[1]}{self.runs[m[2]]}/{m[2]}.py", text)
        text = self.test_path.sub(lambda m: f"tests/{self.tests[m[1] + '.py']}", text)
        if not str(path).startswith("examples/"):
            text = self.test_bare.sub(lambda m: self._bare_test(m[1], m[2]), text)
        text = self.test_import.sub(lambda m: f"{m[1]} tests.{self._dotted_test(m[2])}", text)
        text = self.helper_path.sub(lambda m: f"tests/{SUPPORT}/{m[1]}", text)
        text = self.helper_import.sub(lambda m: f"from tests.{SUPPORT}.{m[1]}{m[2]} import", text)
        text = self.helper_plain_import.sub(rf"\1from tests.{SUPPORT} import \2", text)
        for marker, protected in kept.items():
            text = text.replace(marker, protected)
        return text

    def _part(self, match: re.Match[str]) -> str:
        return self.runs[match[1]]

    def _bare_test(self, name: str, suffix: str) -> str:
        return str(self.tests[name + ".py"].with_suffix(suffix))

    def _dotted_test(self, name: str) -> str:
        return ".".join(self.tests[name + ".py"].with_suffix("").parts)

    def _from_runs(self, path: Path, text: str, match: re.Match[str]) -> str:
        """``from sampling_core.runs import a, store`` -> the public names from the package,
        each moved module from its part (one statement per line, indented alike)."""
        listed = match["group"] or match["plain"]
        names = [n.split("#")[0].strip() for n in listed.split(",")]
        names = [n for n in names if n]
        public, modules = [], []
        for name in names:
            module = name.split(" as ")[0].strip()
            if module in self.runs:
                modules.append(f"from sampling_core.runs.{self.runs[module]} import {name}")
            else:
                public.append(name)
        if not modules:
            return match[0]
        if "#" in listed:
            self.warnings.append(f"{path}: comments dropped from {match[0]!r}")
        statements = [f"from sampling_core.runs import {', '.join(public)}"] if public else []
        statements += modules
        line_start = text.rfind("\n", 0, match.start()) + 1
        indent = text[line_start : match.start()]
        if indent.strip():  # inside a string or after code: one statement fits only
            if len(statements) > 1:
                self.warnings.append(f"{path}: split {match[0]!r} by hand")
                return match[0]
            return statements[0]
        return f"\n{indent}".join(statements)


def _top(relative: Path) -> str:
    return relative.parts[0].removesuffix(".py")


CLIMB = re.compile(
    r"Path\(__file__\)(?P<resolve>\.resolve\(\))?"
    r"(?:(?P<parents>(?:\.parent)+)(?!\w)|\.parents\[(?P<index>\d+)\])"
)


def deeper(text: str, levels: int) -> str:
    """``Path(__file__)`` climbs of a file moved ``levels`` folders deeper, still reaching the
    same folder (``Path(__file__).parent.parent`` -> ``Path(__file__).parents[2]``)."""

    def climb(match: re.Match[str]) -> str:
        index = int(match["index"]) if match["index"] else match["parents"].count(".parent") - 1
        return f"Path(__file__){match['resolve'] or ''}.parents[{index + levels}]"

    return CLIMB.sub(climb, text)


# -- generated text --------------------------------------------------------------------------


def summary_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def downhill(part_dir: Path, modules: list[str]) -> list[str]:
    """``modules`` ordered so that each imports only modules after it (importers first)."""
    imports: dict[str, set[str]] = {}
    for module in modules:
        tree = ast.parse((part_dir / f"{module}.py").read_text(encoding="utf-8"))
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(RUNS_PACKAGE):
                found.update(
                    name
                    for name in modules
                    if node.module.endswith(f".{name}")
                    or any(alias.name == name for alias in node.names)
                )
        imports[module] = found - {module}
    order: list[str] = []
    placed: set[str] = set()
    while len(order) < len(modules):
        # the modules no unplaced module imports go first
        ready = [
            m
            for m in modules
            if m not in placed and not any(m in imports[o] for o in modules if o not in placed)
        ]
        if not ready:
            raise Refused(f"{part_dir}: an import cycle among {sorted(set(modules) - placed)}")
        order += ready
        placed.update(ready)
    return order


def wrap(text: str, indent: str = "", hanging: str = "") -> str:
    return textwrap.fill(
        text, width=96, initial_indent=indent, subsequent_indent=hanging, break_on_hyphens=False
    )


def part_docstring(part: str, modules: list[str]) -> str:
    _, what, _ = RUNS_PARTS[part]
    order = downhill(RUNS / part, modules)
    names = ", ".join(f"``{m}``" for m in order)
    lines = [
        wrap(what),
        "",
        wrap(
            "Internal: a part of batch runs, whose public surface is"
            " ``sampling_core.runs.__all__``; each module's ``__all__`` is what it offers the"
            f" others. Its modules, downhill (each imports only those after it): {names}."
        ),
        "",
    ]
    for module in order:
        lines.append(
            wrap(f"- ``{module}`` — {summary_line(RUNS / part / f'{module}.py')}", "", "  ")
        )
    return '"""' + "\n".join(lines) + '\n"""\n'


def runs_paragraph(parts: list[str]) -> str:
    listed = ", ".join(f"``{p}`` ({RUNS_PARTS[p][0]})" for p in reversed(parts))
    return wrap(
        f"Its subpackages, downhill (each imports only those after it): {listed}; below them"
        " all, the module ``errors`` (the errors a run raises on purpose)."
    )


def layering_layers(parts: list[str]) -> str:
    rows = ['    ("sampling_core.runs", "sampling_core.testing"),  # runs: its __init__\n']
    rows += [f'    ("sampling_core.runs.{p}",),\n' for p in reversed(parts)]
    rows.append('    ("sampling_core.runs.errors",),\n')
    return "".join(rows)


LAYERING_PART = '''SUBDIVIDED = ("sampling_core.runs",)
"""Parts whose subpackages and modules are parts of the design of their own (drawn in
``LAYERS``): ``sampling_core.runs.store.index`` is in part ``sampling_core.runs.store``."""


def _part(module: str) -> str:
    parts = module.split(".")
    for whole in SUBDIVIDED:
        if module.startswith(whole + "."):
            return ".".join(parts[: whole.count(".") + 2])
'''

LAYERING_TEST = """

def test_the_runs_subpackages_import_only_those_below_them(tmp_path):
    index = tmp_path / "index.py"
    index.write_text("from sampling_core.runs.reports.report import report_of\\n")
    report = tmp_path / "report.py"
    report.write_text("from sampling_core.runs.store import index\\n")
    known = {"sampling_core.runs.store.index": index, "sampling_core.runs.reports.report": report}
    assert upward_imports(known) == [
        "sampling_core.runs.store.index -> sampling_core.runs.reports.report"
    ]
"""


def architecture_tables(plan: Plan, parts: list[str]) -> str:
    rows = [
        "## `runs/`, top to bottom",
        "",
        "`runs/__init__.py` is the public surface (`sampling_core.runs.__all__`); below it each",
        "subpackage imports only those drawn below it (`tests/design/test_layering.py`).",
        "",
        "| part | what it is | modules |",
        "|---|---|---|",
    ]
    for part in reversed(parts):
        modules = sorted(m for m, p in plan.runs_moves.items() if p == part)
        order = downhill(RUNS / part, modules)
        listed = ", ".join(f"`{m}`" for m in order)
        rows.append(f"| `{part}/` | {RUNS_PARTS[part][1]} | {listed} |")
    rows.append("| `errors.py` | the errors a batch run raises on purpose | `errors` |")
    rows += [
        "",
        "## `tests/`, one folder per part",
        "",
        "Each folder is a package under `tests` (test modules are `tests.<folder>.<name>`, so",
        "basenames may repeat); `conftest.py` stays at `tests/`. Helpers import as",
        "`from tests.support.engine_helpers import strict`.",
        "",
        "| folder | tests of |",
        "|---|---|",
    ]
    used = {new.parts[1] for new in plan.test_moves.values()}
    for folder, what in TEST_FOLDERS.items():
        if folder in used:
            rows.append(f"| `tests/{folder}/` | {what.replace('``', '`')} |")
    rows.append(f"| `tests/{SUPPORT}/` | {SUPPORT_DOC.replace('``', '`')} |")
    return "\n".join(rows) + "\n\n"


# -- the run ---------------------------------------------------------------------------------


def is_text(path: Path) -> bool:
    return (path.suffix in TEXT_SUFFIXES or str(path) in TEXT_NAMES) and path != SELF


def apply(plan: Plan) -> list[str]:
    """Moves, rewrites and generates; returns what to check by hand."""
    check: list[str] = []
    moves = plan.moves()
    for old, new in moves.items():
        new.parent.mkdir(parents=True, exist_ok=True)
        git("mv", str(old), str(new))
    parts = [p for p in RUNS_PARTS if p in set(plan.runs_moves.values())]
    for part in parts:
        modules = sorted(m for m, p in plan.runs_moves.items() if p == part)
        (RUNS / part / "__init__.py").write_text(part_docstring(part, modules), encoding="utf-8")
    tests = Path("tests")
    (tests / "__init__.py").write_text(
        '"""The test suite: one folder per part of the code, cross-cutting suites, and\n'
        '``support`` (what the tests share). Each folder is a package of ``tests``."""\n',
        encoding="utf-8",
    )
    for folder in {new.parts[1] for new in plan.test_moves.values()}:
        doc = wrap(f"Tests of {TEST_FOLDERS[folder]}")
        (tests / folder / "__init__.py").write_text(f'"""{doc}"""\n', encoding="utf-8")
    (tests / SUPPORT / "__init__.py").write_text(f'"""{wrap(SUPPORT_DOC)}"""\n', encoding="utf-8")
    git("add", "-A")

    rewriter = Rewriter(plan)
    changed: list[Path] = []
    for path in tracked():
        if not is_text(path) or not path.is_file():
            continue
        try:
            before = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        after = rewriter.text(path, before)
        if path in moves.values() and path.parts[0] == "tests":
            after = deeper(after, len(path.parts) - len(_old_of(moves, path).parts))
        if after != before:
            path.write_text(after, encoding="utf-8")
            changed.append(path)
    check += rewriter.warnings

    init = RUNS / "__init__.py"
    text = init.read_text(encoding="utf-8")
    end = text.index('"""', 3)
    init.write_text(text[:end].rstrip() + "\n\n" + runs_paragraph(parts) + "\n" + text[end:])
    generated = {"{layers}": layering_layers(parts), "{part}": LAYERING_PART}
    for file, old, new in EXACT_EDITS:
        path = Path(file)
        new = generated.get(new, new)
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.count(old) != 1:
            check.append(f"{file}: expected {old!r} once, found it {text.count(old)} times")
            continue
        path.write_text(text.replace(old, new), encoding="utf-8")
    layering = Path("tests/design/test_layering.py")
    if layering.is_file():
        layering.write_text(layering.read_text(encoding="utf-8") + LAYERING_TEST)
    architecture = Path("docs/architecture.md")
    text = architecture.read_text(encoding="utf-8")
    anchor = "## Where each rule lives"
    tables = architecture_tables(plan, parts)
    if anchor in text:
        architecture.write_text(text.replace(anchor, tables + anchor, 1), encoding="utf-8")
    else:
        architecture.write_text(text.rstrip() + "\n\n" + tables, encoding="utf-8")
        check.append(f"docs/architecture.md: no {anchor!r}; the tables went at the end")
    git("add", "-A")
    for old in moves:  # a folder left with nothing but bytecode caches goes
        folder = old.parent
        if folder.is_dir() and all(p.name == "__pycache__" for p in folder.iterdir()):
            shutil.rmtree(folder)
    return check


def _old_of(moves: dict[Path, Path], new: Path) -> Path:
    return next(old for old, moved in moves.items() if moved == new)


LINE = 100
"""The line length of ``[tool.ruff]``: a docstring or comment the rewrite made longer is
folded at a space before it."""


def prose_lines(source: str) -> set[int]:
    """The numbers of the lines of ``source`` that are docstrings (any bare string
    statement) or only a comment: folding them changes no value."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    readline = io.StringIO(source).readline
    for token in tokenize.generate_tokens(readline):
        if token.type == tokenize.COMMENT and not token.line[: token.start[1]].strip():
            lines.add(token.start[0])  # a line that is only a comment
    return lines


def fold(path: Path) -> bool:
    """Fold the docstring and comment lines of ``path`` longer than ``LINE`` at their last
    space that fits (a comment goes on as a comment); whether anything was folded."""
    source = path.read_text(encoding="utf-8")
    prose = prose_lines(source)
    out: list[str] = []
    folded = False
    for number, line in enumerate(source.split("\n"), start=1):
        while number in prose and len(line) > LINE:
            indent = line[: len(line) - len(line.lstrip())]
            comment = line.lstrip().startswith("#")
            at = line.rfind(" ", len(indent) + 12, LINE + 1)
            if at < 0:
                break
            out.append(line[:at].rstrip())
            line = indent + ("# " if comment else "") + line[at + 1 :].lstrip()
            folded = True
        out.append(line)
    if folded:
        path.write_text("\n".join(out), encoding="utf-8")
    return folded


def ruff() -> list[str]:
    """Imports sorted and files formatted after the rewrite; what ``ruff check`` still says."""
    changed = [p for p in git("diff", "--cached", "--name-only", "HEAD").splitlines()]
    python = [p for p in changed if p.endswith(".py") and Path(p).is_file()]
    python = [p for p in python if Path(p) != SELF]
    for name in python:
        fold(Path(name))
    here = Path(sys.executable).parent / "ruff"
    found = str(here) if here.is_file() else shutil.which("ruff")
    if not found:
        git("add", "-A")
        return ["ruff not found: run `ruff check --fix --select I . && ruff format .`"]
    subprocess.run([found, "check", "--fix", "--select", "I", "--quiet", *python], check=False)
    subprocess.run([found, "format", "--quiet", *python], check=False)
    git("add", "-A")
    done = subprocess.run([found, "check", "."], capture_output=True, text=True, check=False)
    return [] if done.returncode == 0 else ["ruff check . says:\n" + done.stdout[-3000:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="check and print the moves only")
    parser.add_argument("--keep-script", action="store_true", help="do not git rm this script")
    args = parser.parse_args(argv)
    if not Path("sampling_core/runs/__init__.py").is_file():
        raise Refused("run this from the checkout's root (no sampling_core/runs/ here)")
    plan = plan_moves(tracked())
    for old, new in plan.moves().items():
        print(f"{old} -> {new}")
    for note in plan.skipped:
        print(f"note: {note}")
    if args.plan:
        return 0
    if git("status", "--porcelain").strip():
        raise Refused("the work tree has changes: commit or stash them first (nothing changed)")
    check = apply(plan) + ruff()
    if not args.keep_script:
        git("rm", "-q", str(SELF))
    print(f"\nmoved {len(plan.moves())} files; the result is staged (git diff --cached).")
    print("check by hand:" if check else "nothing to check by hand.")
    for item in check:
        print(f"  - {item}")
    return 1 if check else 0


if __name__ == "__main__":
    sys.exit(main())
