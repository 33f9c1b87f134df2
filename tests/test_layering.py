"""Public APIs only, and one-way layering: checked by reading the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("sampling_core", "hook_specs", "builtin_plugins")
LIBRARIES = ("pydantic", "asyncio", "structlog", "pluggy", "anyio")
KNOWN_PRIVATE = {
    "_fut_waiter",
    "__pydantic_private__",
    "__pydantic_fields_set__",
    "__pydantic_extra__",
    "__pydantic_validator__",
    "_context_vars",
    "_CONTEXT_VARS",
    "_inner_hookexec",
    "_hookexec",
    "_hookimpls",
    "_must_cancel",
}


def _modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _private_uses(path: Path) -> list[str]:
    """Private attributes read from the four libraries (or known private names anywhere)."""
    tree = ast.parse(path.read_text(), str(path))
    library_names = set(LIBRARIES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in LIBRARIES:
                    library_names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            for alias in node.names:
                if alias.name.startswith("_"):
                    return [f"{path.name}: from {node.module} import {alias.name}"]
                library_names.add(alias.asname or alias.name)
    found = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            name = node.attr
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            from_library = isinstance(base, ast.Name) and base.id in library_names
            if name.startswith("_") and not name.endswith("__") and from_library:
                found.append(f"{path.name}:{node.lineno}: {name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        if name in KNOWN_PRIVATE:
            found.append(f"{path.name}:{node.lineno}: {name}")
    return found


def test_no_module_reads_a_private_attribute_of_pydantic_asyncio_structlog_or_pluggy():
    found = [
        use for package in PACKAGES for path in _modules(package) for use in _private_uses(path)
    ]
    assert found == []


def test_the_scan_finds_what_it_looks_for(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import asyncio\nfrom pydantic import BaseModel\n"
        "w = getattr(task, '_fut_waiter', None)\nasyncio._get_running_loop()\n"
        "BaseModel.__dict__['__pydantic_private__']\n"
    )
    assert len(_private_uses(bad)) == 3


def test_sampling_core_never_imports_or_names_builtin_plugins():
    offenders = [
        str(path.relative_to(ROOT))
        for path in _modules("sampling_core")
        if "builtin_plugins" in path.read_text()
    ]
    assert offenders == []
