"""Public APIs only, and one-way layering: checked by reading the source."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
# Private attributes of those libraries' objects whose names are too plain to forbid on our
# own objects too (``self._lock`` is fine): forbidden when read from any other value.
LIBRARY_OBJECT_PRIVATE = {
    # structlog: PrintLogger(Factory), WriteLogger, BytesLogger, BoundLoggerBase, config
    "_file",
    "_write",
    "_flush",
    "_logger",
    "_processors",
    "_context",
    "_CONFIG",
    # pluggy: PluginManager, HookCaller
    "_name2plugin",
    "_plugin_distinfo",
    "_nonwrappers",
    "_wrappers",
    "_call_history",
    # asyncio: Task, Future, loops
    "_coro",
    "_callbacks",
    "_state",
    "_result",
    "_exception",
    "_ready",
    "_scheduled",
    "_loop",
}
# Calls that read an attribute named by a string: getattr(obj, "_file", None), and calls
# that write one (our own read-only views set their slots with object.__setattr__).
READ_BY_NAME = {"getattr", "hasattr", "getattr_static", "attrgetter", "__getattribute__"}
WRITE_BY_NAME = {"setattr", "delattr", "__setattr__", "__delattr__"}
OWN = ("self", "cls")


def _modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _private_uses(path: Path) -> list[str]:
    """Private attributes read from the four libraries, known private names anywhere, known
    private names of their objects on any value but ``self``/``cls``, and private names read
    by name (``getattr(obj, "_file")``) from any value but ``self``/``cls``."""
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
            of_library_object = name in LIBRARY_OBJECT_PRIVATE and not _own(node.value)
            if (_private(name) and from_library) or of_library_object:
                found.append(f"{path.name}:{node.lineno}: {name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            name = node.value
        elif isinstance(node, ast.Call):
            found += [f"{path.name}:{node.lineno}: {name}" for name in _named_privately(node)]
        if name in KNOWN_PRIVATE:
            found.append(f"{path.name}:{node.lineno}: {name}")
    return list(dict.fromkeys(found))  # a use found by two rules is one use


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _own(value: ast.expr) -> bool:
    """Whether ``value`` is the object whose method this is (``self`` or ``cls``)."""
    return isinstance(value, ast.Name) and value.id in OWN


def _named_privately(call: ast.Call) -> list[str]:
    """Private names a ``getattr``-like call reads from a value that is not ``self``/``cls``
    (whose attribute it is cannot be told from the source, so none is allowed), and known
    private names of the libraries' objects a ``setattr``-like call writes."""
    func = call.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if called not in READ_BY_NAME | WRITE_BY_NAME or (call.args and _own(call.args[0])):
        return []
    names = [
        arg.value
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _private(arg.value)
    ]
    if called in WRITE_BY_NAME:
        return [name for name in names if name in LIBRARY_OBJECT_PRIVATE]
    return names


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


def test_the_scan_finds_private_attributes_read_by_name_or_from_library_objects(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import operator\nimport structlog\n"
        "factory = structlog.get_config()['logger_factory']\n"
        "a = getattr(factory, '_file', None)\n"  # any private name, read by name
        "b = hasattr(factory, '_anything')\n"
        "c = operator.attrgetter('_file')(factory)\n"
        "d = factory._file\n"  # a known private name of a structlog object
        "e = object.__getattribute__(factory, '_file')\n"
        "setattr(factory, '_file', None)\n"  # a known one, written by name
    )
    assert [use.split(": ")[1] for use in _private_uses(bad)] == [
        "_file",
        "_anything",
        "_file",
        "_file",
        "_file",
        "_file",
    ]
    own = tmp_path / "own.py"
    own.write_text(
        "class Mine:\n"
        "    def __init__(self, file):\n"
        "        self._file = file\n"
        "        self._lock = None\n"
        "    def file(self):\n"
        "        return getattr(self, '_file', None), self._file\n"
        "    def name(self):\n"
        "        return getattr(type(self), '__name__')\n"
        "view = object.__new__(Mine)\n"
        "object.__setattr__(view, '_ro_path', 'payload')\n"  # our own slot, written
    )
    assert _private_uses(own) == []


def test_sampling_core_never_imports_or_names_builtin_plugins():
    offenders = [
        str(path.relative_to(ROOT))
        for path in _modules("sampling_core")
        if "builtin_plugins" in path.read_text()
    ]
    assert offenders == []


# -- imports flow one way ------------------------------------------------------------------

GRAPHED = (*PACKAGES, "benchmarks")


def _module_names() -> dict[str, Path]:
    names = {}
    for package in GRAPHED:
        for path in _modules(package):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            names[".".join(parts)] = path
    return names


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module of ours that ``name`` imports anywhere: at the top, under
    ``TYPE_CHECKING``, inside functions. A package's ``__init__`` counts as a module too,
    except for its own submodules (Python runs it before any of them: that is loading, not
    a dependency)."""
    base = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                up = base.split(".")[: len(base.split(".")) - node.level + 1]
                module = ".".join([*up, module] if module else up)
            targets = [f"{module}.{alias.name}" for alias in node.names] + [module]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def import_cycles(known: dict[str, Path]) -> list[list[str]]:
    """The import cycles among ``known`` modules (Tarjan's strongly connected components)."""
    graph = {name: _imports(name, path, known) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return cycles


def test_no_import_cycle_anywhere_counting_type_checking_and_function_local_imports():
    assert import_cycles(_module_names()) == []


def test_the_cycle_finder_finds_a_cycle_hidden_under_type_checking(tmp_path):
    (tmp_path / "pkg").mkdir()
    a = tmp_path / "pkg" / "a.py"
    b = tmp_path / "pkg" / "b.py"
    c = tmp_path / "pkg" / "c.py"
    a.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    b.write_text("def f():\n    from pkg import c\n")
    c.write_text("import pkg.a\n")
    known = {"pkg.a": a, "pkg.b": b, "pkg.c": c}
    assert import_cycles(known) == [["pkg.a", "pkg.b", "pkg.c"]]


PLUGGY_PRIVATE_CONSTRUCTORS = {"HookImpl", "Result", "HookCaller", "HookRelay"}
"""pluggy documents these classes' constructors as private: it makes them, we only read."""


def _pluggy_constructions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "pluggy"
        for alias in node.names
        if alias.name in PLUGGY_PRIVATE_CONSTRUCTORS
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in PLUGGY_PRIVATE_CONSTRUCTORS
            and isinstance(func.value, ast.Name)
            and func.value.id == "pluggy"
        ) or (isinstance(func, ast.Name) and func.id in imported):
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_nothing_constructs_pluggy_objects_whose_constructors_are_private(tmp_path):
    offenders = [
        hit for package in PACKAGES for p in _modules(package) for hit in _pluggy_constructions(p)
    ]
    assert offenders == []
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pluggy\nfrom pluggy import Result as R\npluggy.HookImpl(1, 2, 3, {})\nR([], None)\n"
    )
    assert _pluggy_constructions(bad) == ["bad.py:3", "bad.py:4"]


LAYERS = (
    ("benchmarks",),
    ("builtin_plugins",),
    ("sampling_core.cli", "sampling_core.pytest_plugin"),
    ("sampling_core.view",),
    ("sampling_core.runs", "sampling_core.testing"),  # runs: its __init__
    ("sampling_core.runs.rescoring",),
    ("sampling_core.runs.execution",),
    ("sampling_core.runs.reports",),
    ("sampling_core.runs.resume",),
    ("sampling_core.runs.store",),
    ("sampling_core.runs.config",),
    ("sampling_core.runs.stats",),
    ("sampling_core.runs.errors",),
    ("sampling_core.kinds",),
    ("sampling_core",),  # the public surface: its __init__ names what users import
    ("sampling_core.engine",),
    ("sampling_core.hooks",),
    ("sampling_core.requirements",),
    ("sampling_core.backends", "sampling_core.events"),
    (
        "sampling_core.strategies",
        "sampling_core.pricing",
        "sampling_core.redaction",
        "sampling_core.errors",
    ),
    ("sampling_core.voting",),
    ("hook_specs",),
)
"""The design, top to bottom: a part imports only parts drawn below it."""


SUBDIVIDED = ("sampling_core.runs",)
"""Parts whose subpackages and modules are parts of the design of their own (drawn in
``LAYERS``): ``sampling_core.runs.store.index`` is in part ``sampling_core.runs.store``."""


def _part(module: str) -> str:
    parts = module.split(".")
    for whole in SUBDIVIDED:
        if module.startswith(whole + "."):
            return ".".join(parts[: whole.count(".") + 2])
    return ".".join(parts[:2]) if parts[0] == "sampling_core" and len(parts) > 1 else parts[0]


def upward_imports(known: dict[str, Path]) -> list[str]:
    """Imports from one part of the design to a part drawn level with it or above it."""
    level = {part: depth for depth, parts in enumerate(LAYERS) for part in parts}
    found = []
    for name, path in sorted(known.items()):
        for target in sorted(_imports(name, path, known)):
            source, goal = _part(name), _part(target)
            if source != goal and level[goal] <= level[source]:
                found.append(f"{name} -> {target}")
    return found


def test_every_part_of_the_package_is_drawn_in_the_layers():
    assert {_part(name) for name in _module_names()} == {p for ps in LAYERS for p in ps}


def test_imports_flow_downhill_through_the_layers(tmp_path):
    assert upward_imports(_module_names()) == []
    engine = tmp_path / "loop.py"
    engine.write_text("from sampling_core.runs.store import store\n")
    store = tmp_path / "store.py"
    known = {"sampling_core.engine.loop": engine, "sampling_core.runs.store.store": store}
    store.write_text("")
    assert upward_imports(known) == ["sampling_core.engine.loop -> sampling_core.runs.store.store"]


def test_the_runs_subpackages_import_only_those_below_them(tmp_path):
    index = tmp_path / "index.py"
    index.write_text("from sampling_core.runs.reports.report import report_of\n")
    report = tmp_path / "report.py"
    report.write_text("from sampling_core.runs.store import index\n")
    known = {"sampling_core.runs.store.index": index, "sampling_core.runs.reports.report": report}
    assert upward_imports(known) == [
        "sampling_core.runs.store.index -> sampling_core.runs.reports.report"
    ]
