"""Package docstrings are true to the tree: every module a package's docstring names exists.

A package's ``__init__`` docstring names its modules where it says what it holds ("Its
modules: ``checks`` (...), ``fields`` ...", "the subpackages ``engine`` and ``hooks``"),
points at files (``view/page.py``) and at modules (:mod:`sampling_core.backends.transport`).
When a module is moved, renamed or deleted, the docstring is changed with it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sampling_core", "hook_specs", "builtin_plugins", "benchmarks")

_TOKEN = re.compile(r"``([a-z][a-z0-9_]*)``")
_FILE = re.compile(r"(?<![\w/.])([a-z_][\w/]*\.py)\b")
_MOD = re.compile(r":mod:`~?([\w.]+)`")
_LISTING = re.compile(r"\b(modules|subpackages)\b")


def _without_descriptions(text: str) -> str:
    """``text`` without the parenthesised description that follows a named module
    (``sampler`` (the public ``Sampler``, ``sample``; ...)): the names inside it are the
    module's contents, not modules. A parenthesis that follows anything else stays
    (its modules (``base``, ``scripted``) are internal)."""
    out, index = [], 0
    while index < len(text):
        opening = text.find("(", index)
        if opening < 0:
            out.append(text[index:])
            break
        out.append(text[index:opening])
        if not re.search(r"``\s*$", text[:opening]):
            out.append("(")
            index = opening + 1
            continue
        depth, index = 0, opening
        while index < len(text):
            depth += {"(": 1, ")": -1}.get(text[index], 0)
            index += 1
            if depth == 0:
                break
    return "".join(out)


def named_modules(doc: str) -> set[str]:
    """The modules of its package a docstring names: the ``name`` tokens of its sentences
    that list modules or subpackages (their descriptions left out), and every ``x.py``."""
    text = " ".join(doc.split())
    names = {match.removesuffix(".py") for match in _FILE.findall(text)}
    for sentence in re.split(r"\.(?:\s+|$)", _without_descriptions(text)):
        if _LISTING.search(sentence):
            names.update(_TOKEN.findall(sentence))
    return names


def missing_modules(init: Path, root: Path) -> list[str]:
    """What ``init``'s docstring names that is not there: a module or file of its package,
    or a ``:mod:`` of one of ours anywhere under ``root``."""
    package = init.parent
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    missing = []
    for name in sorted(named_modules(doc)):
        # a module of the package, or a file named from it or from a folder above it
        bases = [package, *package.relative_to(root).parents] if "/" in name else [package]
        if not any(_is_module(root / base / name) for base in bases):
            missing.append(f"{package.relative_to(root)}: {name}")
    for dotted in sorted(set(_MOD.findall(doc))):
        ours = dotted.split(".")[0] in PACKAGES
        if ours and not _is_module(root.joinpath(*dotted.split("."))):
            missing.append(f"{package.relative_to(root)}: :mod:`{dotted}`")
    return missing


def _is_module(target: Path) -> bool:
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def _inits() -> list[Path]:
    return sorted(init for package in PACKAGES for init in (ROOT / package).rglob("__init__.py"))


@pytest.mark.parametrize("init", _inits(), ids=lambda p: str(p.parent.relative_to(ROOT)))
def test_every_module_a_package_docstring_names_exists(init: Path) -> None:
    assert missing_modules(init, ROOT) == []


def test_the_scan_reads_the_ways_a_docstring_names_modules() -> None:
    doc = """The engine.

    Internal: import from :mod:`sampling_core`. Its modules, downhill: ``sampler`` (the
    public ``Sampler``, ``sample``; validates (once) the budgets) → ``loop`` and ``tally``.
    Retries are the backends' (:mod:`sampling_core.backends.transport`). This package's
    ``__all__`` is its surface; its modules (``base``, ``cache``) are internal; see
    ``view/page.py``. The ``plugins`` registry is a name, not a module.
    """
    assert named_modules(doc) == {"sampler", "loop", "tally", "base", "cache", "view/page"}


def test_a_docstring_naming_a_module_that_is_gone_fails(tmp_path: Path) -> None:
    package = tmp_path / "sampling_core" / "parts"
    package.mkdir(parents=True)
    (package / "kept.py").write_text("")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (package / "__init__.py").write_text(
        '"""Parts. Its modules: ``kept`` (here), ``sub`` and ``gone`` (moved away);\n'
        "also ``old.py``, ``parts/kept.py``, ``sampling_core/parts/sub/gone.py`` and\n"
        ':mod:`sampling_core.parts.vanished`, but not :mod:`json`."""\n'
    )
    assert missing_modules(package / "__init__.py", tmp_path) == [
        "sampling_core/parts: gone",
        "sampling_core/parts: old",
        "sampling_core/parts: sampling_core/parts/sub/gone",
        "sampling_core/parts: :mod:`sampling_core.parts.vanished`",
    ]
