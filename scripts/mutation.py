"""Mutation testing of the core with mutmut: ``python scripts/mutation.py [MODULE ...]``.

Each module is mutated with its own subset of the tests (``MODULES`` below), in a scratch
copy of the working tree, so a run stays minutes and the checkout is never touched. The
shared settings are ``[tool.mutmut]`` in ``pyproject.toml``; this script sets
``only_mutate`` and the test selection per module. With no argument it runs ``STABLE``.
A module may be narrowed to some functions: ``sampling_core/redaction.py:_scrub,scrub_data``.

Prints, per module, the mutants, how many were killed, survived or timed out, the score
(killed / mutants) and the time taken, then the diff of every survivor. Needs ``mutmut``
(``pip install -e ".[mutation]"``) and a system with ``fork``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Module (or module:function) -> the tests that exercise it.
MODULES: dict[str, list[str]] = {
    "sampling_core/engine/budgets.py": ["tests/engine/test_budgets.py"],
    "sampling_core/requirements/checks.py": [
        "tests/requirements/test_checks.py",
        "tests/reliability/test_hangs.py",
        "tests/engine/test_errors.py",
    ],
    "builtin_plugins/ordering.py": ["tests/plugins/test_ordering.py"],
    "sampling_core/redaction.py": [
        "tests/core/test_redaction.py",
        "tests/reliability/test_secrets.py",
        "tests/reliability/test_secrets_headers.py",
        "tests/reliability/test_secret_routes.py",
    ],
    "sampling_core/engine/loop.py": [
        "tests/engine/test_loop_exact.py",
        "tests/requirements/test_judge.py",
        "tests/engine/test_stops_exact.py",
        "tests/engine/test_exact.py",
        "tests/engine/test_cancellation.py",
        "tests/engine/test_errors.py",
        "tests/engine/test_iterations.py",
        "tests/engine/test_strategies.py",
        "tests/engine/test_budgets.py",
        "tests/engine/test_timeouts.py",
        "tests/hooks/test_delivery.py",
    ],
    "sampling_core/engine/tally.py": [
        "tests/engine/test_exact.py",
        "tests/engine/test_strategies.py",
        "tests/engine/test_cancellation.py",
        "tests/engine/test_errors.py",
        "tests/engine/test_iterations.py",
        "tests/engine/test_budgets.py",
        "tests/hooks/test_contract.py",
    ],
    "sampling_core/hooks/channel.py": [
        "tests/hooks/test_delivery_exact.py",
        "tests/hooks/test_delivery_faults_exact.py",
        "tests/hooks/test_monitoring.py",
        "tests/requirements/test_judge.py",
        "tests/engine/test_loop_exact.py",
        "tests/engine/test_stops_exact.py",
        "tests/engine/test_exact.py",
        "tests/hooks/test_channel.py",
        "tests/hooks/test_contract.py",
        "tests/hooks/test_delivery.py",
        "tests/hooks/test_delivery_direct.py",
        "tests/hooks/test_call_plugins_cache.py",
        "tests/reliability/test_plugin_isolation.py",
        "tests/reliability/test_base_exceptions.py",
    ],
    "sampling_core/runs/resume/resume.py": [
        "tests/runs/test_resume_units.py",
        "tests/runs/test_resume.py",
        "tests/runs/test_cli.py",
        "tests/reliability/test_run_integrity.py",
        "tests/reliability/test_run_dir.py",
    ],
    "sampling_core/runs/store/store.py": [
        "tests/runs/test_store_exact.py",
        "tests/runs/test_store.py",
        "tests/reliability/test_run_dir.py",
        "tests/reliability/test_run_integrity.py",
        "tests/runs/test_crash.py",
    ],
}
STABLE = [
    "sampling_core/engine/budgets.py",
    "sampling_core/requirements/checks.py",
    "builtin_plugins/ordering.py",
    "sampling_core/redaction.py",
    "sampling_core/runs/resume/resume.py",
]
COUNTED = ("killed", "survived", "timeout", "suspicious", "no tests", "skipped", "segfault")


def _toml_value(value: object) -> str:
    return json.dumps(value)  # strings, numbers, booleans and lists of them are valid TOML


def scratch_copy(destination: Path) -> None:
    """The working tree's files (tracked and new, not ignored) copied to ``destination``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, (n.decode() for n in listed)):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)


def configure(copy: Path, module: str, tests: list[str]) -> None:
    """Rewrite the copy's ``[tool.mutmut]``: the shared settings plus this module's."""
    path = copy / "pyproject.toml"
    text = path.read_text(encoding="utf-8")
    settings = dict(tomllib.loads(text).get("tool", {}).get("mutmut", {}))
    settings["only_mutate"] = [module]
    settings["pytest_add_cli_args_test_selection"] = tests
    text = re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", "", text)
    section = "".join(f"{key} = {_toml_value(value)}\n" for key, value in settings.items())
    path.write_text(f"{text.rstrip()}\n\n[tool.mutmut]\n{section}", encoding="utf-8")


def mutmut(copy: Path, *args: str) -> str:
    """Run mutmut in the copy; its output."""
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=copy,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def run_module(target: str, tests: list[str], children: int) -> dict[str, object]:
    """Mutate one module (or some of its functions); return its counts and survivors."""
    module, _, functions = target.partition(":")
    dotted = module.removesuffix(".py").replace("/", ".")
    with tempfile.TemporaryDirectory(prefix="samplehooks-mutation-") as folder:
        copy = Path(folder)
        scratch_copy(copy)
        configure(copy, module, tests)
        names = [f"{dotted}.*{name}__mutmut_*" for name in functions.split(",") if name]
        began = time.perf_counter()
        mutmut(copy, "run", "--max-children", str(children), *names)
        seconds = time.perf_counter() - began
        results = mutmut(copy, "results", "--all", "true")
        verdicts: dict[str, str] = {}
        for line in results.splitlines():
            name, _, verdict = line.strip().rpartition(": ")
            if name.startswith(dotted) and (not names or _wanted(name, functions)):
                verdicts[name] = verdict
        survivors = {
            name: mutmut(copy, "show", name)
            for name, verdict in verdicts.items()
            if verdict == "survived"
        }
    counts = {kind: sum(v == kind for v in verdicts.values()) for kind in COUNTED}
    total = len(verdicts)
    return {
        "module": target,
        "mutants": total,
        **{kind: n for kind, n in counts.items() if n},
        "score": round(counts["killed"] / total, 3) if total else None,
        "seconds": round(seconds),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "survivors": survivors,
    }


def _wanted(name: str, functions: str) -> bool:
    return any(re.search(rf"{re.escape(f)}__mutmut_\d+$", name) for f in functions.split(","))


def main(argv: list[str] | None = None) -> int:
    """Run the named modules (default: the stable ones) and print the summary."""
    parser = argparse.ArgumentParser(prog="python scripts/mutation.py", description=__doc__)
    parser.add_argument("modules", nargs="*", help=f"among: {', '.join(MODULES)}")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once")
    args = parser.parse_args(argv)
    chosen = args.modules or STABLE
    unknown = [m for m in chosen if m.partition(":")[0] not in MODULES]
    if unknown:
        parser.error(f"no test subset for {unknown}; add it to MODULES in scripts/mutation.py")
    reports = [run_module(m, MODULES[m.partition(":")[0]], args.children) for m in chosen]
    print("| module | mutants | killed | survived | no tests | timeout | score | seconds | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in reports:
        print(
            f"| `{r['module']}` | {r['mutants']} | {r.get('killed', 0)} | "
            f"{r.get('survived', 0)} | {r.get('no tests', 0)} | {r.get('timeout', 0)} | "
            f"{r['score']} | {r['seconds']} | {r['load']} |"
        )
    for r in reports:
        for name, diff in r["survivors"].items():
            print(f"\n## survived: {name}\n{diff}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
