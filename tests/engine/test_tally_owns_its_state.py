"""The call owns its state: a ``Tally`` is changed only through its methods.

Checked by reading the source: outside ``engine/tally.py`` no code assigns to an attribute
of a tally (``tally.x = ...``, ``tally.x += ...``), to an item of one
(``tally.flights[i] = ...``, ``del tally.flights[i]``), or calls a mutating method on one of
its containers (``tally.attempts.append(...)``). A tally is any name ``tally`` or an
attribute ``.tally``, or a name bound to one (``flights = self.tally.flights``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault"}


def _is_tally(node: ast.AST, aliases: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id == "tally" or node.id in aliases
    if isinstance(node, ast.Attribute):
        return node.attr == "tally" or _is_tally(node.value, aliases)
    if isinstance(node, ast.Subscript):
        return _is_tally(node.value, aliases)
    return False


def _writes(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    aliases: set[str] = set()
    for node in ast.walk(tree):  # names bound to a tally's attribute
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            value = node.value
            if _is_tally(value.value, set()) and value.value is not None:
                aliases.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found = []
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            if isinstance(target, ast.Attribute | ast.Subscript) and _is_tally(
                target.value if isinstance(target, ast.Attribute) else target, aliases
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and isinstance(node.func.value, ast.Attribute)
            and _is_tally(node.func.value.value, aliases)
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_a_tally_is_changed_only_through_its_methods() -> None:
    writes = []
    for package in ("sampling_core", "builtin_plugins"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "tally.py":
                writes += _writes(path)
    assert writes == []


def test_the_check_sees_each_way_of_writing(tmp_path: Path) -> None:
    source = tmp_path / "bad.py"
    source.write_text(
        "def f(self, tally):\n"
        "    tally.in_flight += 1\n"
        "    self.tally.stopped = True\n"
        "    flights = self.tally.flights\n"
        "    flights[3] = None\n"
        "    del self.tally.flights[3]\n"
        "    tally.attempts.append(None)\n"
        "    tally.began()\n"  # a method: fine
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        assert len(_writes(source)) == 5
    finally:
        ROOT = saved
