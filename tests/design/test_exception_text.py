"""Every exception shown or recorded goes through ``exception_text``, closed as a class.

An exception's ``str()`` may raise (a backend's or a plugin's exception class is anyone's
code): formatting it with an f-string, ``str()`` or ``repr()`` then raises inside the
handler meant to report it. A scan of the package finds every such formatting of an
exception caught by ``except ... as NAME`` or held in an ``exception`` attribute; a
behavioural test shows a batch run surviving a backend exception that cannot be printed.
"""

from __future__ import annotations

import ast
import json
import textwrap
from pathlib import Path

import builtin_plugins
import hook_specs
import sampling_core
from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.errors import exception_text
from sampling_core.runs import run_batch_sync
from tests.support.runs_helpers import records, write_config, write_dataset

PACKAGES = [Path(p.__file__).parent for p in (sampling_core, hook_specs, builtin_plugins)]
FORMATTERS = {"str", "repr", "format"}


def _formats(node: ast.AST, is_exception: object) -> list[int]:
    """Lines where ``node`` formats an expression ``is_exception`` accepts."""
    found = []
    for inner in ast.walk(node):
        if (
            (isinstance(inner, ast.FormattedValue) and is_exception(inner.value))
            or (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Name)
                and inner.func.id in FORMATTERS
                and len(inner.args) == 1
                and is_exception(inner.args[0])
            )
            or (
                isinstance(inner, ast.Call)
                and isinstance(inner.func, ast.Attribute)
                and inner.func.attr == "record_exception"  # OpenTelemetry's: it calls str()
            )
        ):
            found.append(inner.lineno)
    return found


def unguarded_formatting(source: str) -> list[int]:
    """Lines of ``source`` that format an exception without ``exception_text``."""
    tree = ast.parse(source)
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.name:
            name = node.name
            for statement in node.body:
                lines += _formats(
                    statement, lambda e, n=name: isinstance(e, ast.Name) and e.id == n
                )
    lines += _formats(tree, lambda e: isinstance(e, ast.Attribute) and e.attr == "exception")
    return sorted(set(lines))


def test_no_module_formats_an_exception_without_exception_text() -> None:
    offenders = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            if path.name == "errors.py" and path.parent.name == "hook_specs":
                continue  # exception_text itself
            for line in unguarded_formatting(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(package.parent)}:{line}")
    assert offenders == []


def test_the_scan_finds_each_way_of_formatting_an_exception() -> None:
    source = textwrap.dedent(
        """
        try:
            pass
        except ValueError as exc:
            a = f"failed: {exc}"
            b = str(exc)
            c = f"{exc!r}"
            d = f"{exception_text(exc)}"
        e = f"{payload.exception}"
        f = repr(fault.exception)
        g = f"{payload.exception_type}"
        span.record_exception(error)
        """
    )
    assert unguarded_formatting(source) == [5, 6, 7, 9, 10, 12]


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("cannot print this one")


def test_exception_text_of_an_unprintable_exception() -> None:
    assert exception_text(Unprintable()) == "<unprintable Unprintable>"
    assert exception_text(ValueError("plain")) == "plain"


def test_a_batch_run_records_a_backend_exception_that_cannot_be_printed(
    tmp_path: Path,
) -> None:
    def reply(request: GenerationRequest) -> str:
        if "number 1?" in request.messages[-1]["content"]:
            raise Unprintable()
        return "a short answer"

    dataset = write_dataset(tmp_path / "prompts.jsonl", 3)
    config = write_config(tmp_path / "run.yaml", dataset)
    summary = run_batch_sync(config, tmp_path / "out", backend=ScriptedBackend(reply))
    assert (summary.ok, summary.error) == (2, 1)
    [failed] = [r for r in records(tmp_path / "out") if r["status"] == "error"]
    assert (failed["key"], failed["reason"]) == ("p1", "Unprintable: <unprintable Unprintable>")
    json.dumps(failed)  # a plain record
