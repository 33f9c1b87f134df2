"""The labelled walk: every value a run's answers or files depend on, each with its resume label.

:func:`labelled_settings` is the one place that decides what may change when a run is
resumed. Both rules built on it read the same labels:

- the resume comparison (:func:`sampling_core.runs.resume.resume.compare_configs`) walks the run's
  config and the resume's, and refuses a ``result`` difference;
- the settings recorded in ``meta.json`` (:func:`sampling_core.runs.resume.integrity.settings_meta`)
  are its ``result`` values, compared again on resume (they catch what the config file
  cannot show: a hand-edited effective config, the environment).

The walk yields the config's fields (:func:`~sampling_core.runs.config.classification.walk_config`),
the options of the backend, the strategy and each requirement (labelled by their kind), each
plugin (labelled by :func:`plugin_label`, the rule for plugins), the plugin objects a run was
given from Python, and the environment variables those plugins read (labelled as the
plugin that reads them).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sampling_core.hooks.entry_points import default_name, entry_point_object, installed_plugins
from sampling_core.kinds import KindRegistry
from sampling_core.runs.config.classification import as_json, option_label, walk_config
from sampling_core.runs.config.config import STRICTNESS, Label, RunConfig

__all__ = [
    "ENGINE_ENVIRONMENT",
    "PLUGIN_RULES",
    "Setting",
    "environment_table",
    "kind_options_table",
    "labelled_settings",
    "plugin_label",
    "plugin_label_of",
    "plugin_rules_table",
]


@dataclass(frozen=True, slots=True)
class Setting:
    """One value of a run, by its path, with its resume label and, for a plugin or an
    environment variable, why it has that label (``note``). ``value`` is JSON data;
    ``rank`` is its place in the walk (settings of two configs merge in this order)."""

    path: str
    label: Label
    value: Any
    note: str | None = None
    rank: tuple[int, int, str] = (0, 0, "")


PLUGIN_RULES: tuple[tuple[str, Label, str], ...] = (
    (
        "writes_artifacts = True",
        "result",
        "an artifact writer (it writes into the run directory): it may not change",
    ),
    (
        "affects_results = False",
        "throughput",
        "an observer: it may be added, removed or reconfigured",
    ),
    ("anything else", "result", "it may change results: it may not change"),
)
"""How a resume treats a plugin, by the class attributes it sets (the first rule that
applies): the table in ``docs/batch-runs.md`` is made from it."""


def plugin_label(plugin: Any) -> tuple[Label, str]:
    """The resume label of a plugin (an object, its class or a module), and why.

    The one rule for plugins (:data:`PLUGIN_RULES`): an *artifact writer* (a plugin that
    sets ``writes_artifacts = True``: it writes into the run directory, as the recorder
    writes ``events.jsonl``) is a result setting; an *observer* (``affects_results =
    False`` and no artifact) may be added, removed or reconfigured; any other plugin may
    change results.
    """
    if getattr(plugin, "writes_artifacts", False) is True:
        return PLUGIN_RULES[0][1], PLUGIN_RULES[0][2]
    if getattr(plugin, "affects_results", True) is False:
        return PLUGIN_RULES[1][1], PLUGIN_RULES[1][2]
    return PLUGIN_RULES[2][1], PLUGIN_RULES[2][2]


def plugin_label_of(name: str) -> tuple[Label, str]:
    """:func:`plugin_label` of the installed plugin ``name`` (not installed, or broken:
    ``result``)."""
    try:
        obj = entry_point_object(name)
    except Exception:
        return "result", "not installed here: it may change results"
    return plugin_label(obj)


ENGINE_ENVIRONMENT: dict[str, tuple[str, Label, str]] = {
    "SAMPLEHOOKS_PLUGINS": (
        "samplehooks",
        "result",
        "its names are added to the run's `plugins` (recorded and compared there)",
    ),
    "SAMPLEHOOKS_DISABLE_PLUGINS": (
        "samplehooks",
        "result",
        "its names are removed from the run's `plugins` (recorded and compared there)",
    ),
    "SAMPLEHOOKS_TRACE_HOOKS": ("samplehooks", "throughput", "prints hook calls on stderr only"),
    "SAMPLEHOOKS_RECORDER_PATH": (
        "`recorder`",
        "location",
        "its file outside a run; in a run it writes the run's `events.jsonl`",
    ),
}
"""The environment variables a run takes care of itself, by who reads them, their label and
why. The other variables a plugin reads are named by its ``reads_environment`` and labelled
as the plugin is; a test finds every ``SAMPLEHOOKS_`` variable in the code in one of the
two."""


def labelled_settings(
    config: RunConfig,
    kinds: KindRegistry | None = None,
    *,
    objects: Iterable[Any] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, Setting]:
    """Every value of ``config`` by its path, labelled, in the walk's order.

    ``kinds`` label the kinds' options (and give their defaults, so an option left to its
    default equals the default written out); without them every option is ``result``.
    ``objects``: plugin objects given from Python (``run_batch(plugins=[...])``).
    ``environ``: also the environment variables the run's plugins read (each present, its
    value ``None`` when unset). Raises ``TypeError`` for a config field without a label.
    """
    out: dict[str, Setting] = {}
    readers: list[tuple[str, Any, Label]] = []  # (name, plugin or its name, label)
    pending: tuple[str, Any] | None = None  # a block whose options follow its fields
    place = 0
    for place, field in enumerate(walk_config(type(config), (config,))):
        path, value = field.path, field.values[0]
        if pending is not None and not path.startswith(f"{pending[0]}."):
            _put(out, _block_options(*pending, kinds, last=place - 1))
            pending = None
        if field.label is None:
            raise TypeError(f"config field {path} has no resume label")
        if path == "plugins":
            for entry in value:
                label, note = plugin_label_of(entry.name)
                rank = (place, 0, entry.name)
                _put(out, [Setting(f"plugins[{entry.name}]", label, as_json(entry), note, rank)])
                readers.append((entry.name, entry.name, label))
        elif path == "requirements":
            identity = [{spec.kind: as_json(spec.value)} for spec in value]
            _put(out, [Setting(path, "result", identity, None, (place, 0, ""))])
            _put(out, _requirement_options(value, kinds, place))
        elif field.descends:
            if path in ("backend", "strategy"):
                pending = (path, value)
        else:
            _put(out, [Setting(path, field.label, as_json(value), None, (place, 0, ""))])
    if pending is not None:
        _put(out, _block_options(*pending, kinds, last=place))
    place += 1
    for obj in objects:
        name = default_name(obj)
        label, note = plugin_label(obj)
        path = f"plugins[{name}] (object)"
        _put(out, [Setting(path, label, _qualified_name(obj), note, (place, 0, name))])
        readers.append((name, obj, label))
    if environ is not None:
        _put(out, _environment(readers, environ, place + 1))
    return out


def _put(out: dict[str, Setting], settings: Iterable[Setting]) -> None:
    for setting in settings:
        out[setting.path] = setting


def _qualified_name(obj: Any) -> str:
    """A plugin object's class (or a module's name), as ``module.Class``."""
    if isinstance(obj, types.ModuleType):
        return obj.__name__
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def _block_options(
    area: str, block: Any, kinds: KindRegistry | None, last: int
) -> Iterator[Setting]:
    """The options of the ``backend`` or ``strategy`` block, labelled by its kind, ranked
    after the block's own fields."""
    kind = block.kind if area == "backend" else block.name
    options = dict(block.options)
    if kinds is not None and kind in kinds.kinds[area]:  # resolved: defaults written out
        for name, info in kinds.kinds[area][kind].options.model_fields.items():
            if not info.is_required():
                options.setdefault(name, info.get_default(call_default_factory=True))
    for option in sorted(options):
        label = option_label(kinds, area, kind, option)
        rank = (last, 1, option)
        yield Setting(f"{area}.{option}", label, as_json(options[option]), None, rank)  # type: ignore[arg-type]


def _requirement_options(
    specs: list[Any], kinds: KindRegistry | None, place: int
) -> Iterator[Setting]:
    for index, spec in enumerate(specs):
        for option in sorted(spec.options):
            label = option_label(kinds, "requirement", spec.kind, option)
            rank = (place, 1, f"{index:09d}.{option}")
            path = f"requirements[{index}].{option}"
            yield Setting(path, label, as_json(spec.options[option]), None, rank)  # type: ignore[arg-type]


def _environment(
    readers: list[tuple[str, Any, Label]], environ: Mapping[str, str], place: int
) -> Iterator[Setting]:
    """The variables the run's plugins read (``reads_environment``), each labelled as the
    strictest plugin reading it is."""
    labels: dict[str, tuple[Label, str]] = {}
    for name, plugin, label in readers:
        obj = plugin
        if isinstance(plugin, str):
            try:
                obj = entry_point_object(plugin)
            except Exception:
                continue
        for variable in getattr(obj, "reads_environment", ()) or ():
            known = labels.get(variable)
            if known is None or STRICTNESS[label] > STRICTNESS[known[0]]:
                labels[variable] = (label, f"read by the plugin {name}")
    for variable in sorted(labels):
        label, note = labels[variable]
        path = f"environment.{variable}"
        yield Setting(path, label, environ.get(variable), note, (place, 0, variable))


# -- the tables in docs/batch-runs.md (tests/runs/test_resume_plugins.py holds the page to them)

_SHOWN = {
    "throughput": "may change",
    "result": "must match",
    "location": "not compared",
}


def plugin_rules_table() -> str:
    """A Markdown table of :data:`PLUGIN_RULES`, with the built-in plugins under each."""
    builtins: dict[int, list[str]] = {}
    for entry in installed_plugins():
        if not entry.builtin:
            continue
        try:
            obj = entry_point_object(entry.name)
        except Exception:
            continue
        if not isinstance(obj, type):  # a module of provider hooks: no per-call plugin
            continue
        label, note = plugin_label(obj)
        place = next(i for i, rule in enumerate(PLUGIN_RULES) if rule[1:] == (label, note))
        builtins.setdefault(place, []).append(f"`{entry.name}`")
    lines = ["| the plugin's class sets | on resume | why | built-ins |", "|---|---|---|---|"]
    for place, (sets, label, note) in enumerate(PLUGIN_RULES):
        shown = ", ".join(builtins.get(place, [])) or "—"
        what = f"`{sets}`" if "=" in sets else sets
        lines.append(f"| {what} | {label} ({_SHOWN[label]}) | {note} | {shown} |")
    return "\n".join(lines) + "\n"


def environment_table() -> str:
    """A Markdown table of every ``SAMPLEHOOKS_`` variable: who reads it, how a run treats it."""
    rows: list[tuple[str, str, str]] = []
    for variable, (reader, label, note) in ENGINE_ENVIRONMENT.items():
        rows.append((variable, reader, f"{label} ({_SHOWN[label]}): {note}"))
    for entry in installed_plugins():
        if not entry.builtin:
            continue
        try:
            obj = entry_point_object(entry.name)
        except Exception:
            continue
        label, _ = plugin_label(obj)
        for variable in getattr(obj, "reads_environment", ()) or ():
            how = (
                "recorded in `meta.json` and compared on resume when the plugin is in the run"
                if label == "result"
                else "not recorded (the plugin is an observer)"
            )
            rows.append((variable, f"`{entry.name}`", f"{label} ({_SHOWN[label]}): {how}"))
    lines = ["| variable | read by | in a run |", "|---|---|---|"]
    lines += [f"| `{v}` | {who} | {how} |" for v, who, how in sorted(rows)]
    return "\n".join(lines) + "\n"


def kind_options_table(kinds: KindRegistry, plugin: str = "kinds") -> str:
    """A Markdown table of the options of ``plugin``'s kinds that a resume does not hold to
    their value: ``throughput`` (may change) and ``location`` (not compared); every other
    option is a result setting."""
    lines = ["| kind | option | on resume |", "|---|---|---|"]
    for area in ("backend", "strategy", "requirement"):
        for name, kind in sorted(kinds.kinds[area].items()):  # type: ignore[index]
            if kind.plugin != plugin:
                continue
            for option in kind.options.model_fields:
                label = kind.label(option)
                if label != "result":
                    lines.append(f"| {area} `{name}` | `{option}` | {label} ({_SHOWN[label]}) |")
    return "\n".join(lines) + "\n"
