"""Command-line arguments that name kinds and plugins: ``--require``, ``--backend``, ``--plugin``.

Every kind comes from the kind registry (the built-ins and whatever installed plugins
register), so a plugin's requirement, backend or strategy is usable from the CLI exactly as
from Python and a run's YAML. Text from the command line is typed by what the option
accepts: a value the option takes as text stays text (``--require contains:42``), anything
else is read as a YAML scalar or flow value (``max_words:40``, ``replies=[a, b]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, TypeAdapter, ValidationError

from sampling_core.errors import exception_text
from sampling_core.hooks.entry_points import entry_point_object, installed_plugins
from sampling_core.hooks.options import options_model
from sampling_core.kinds import Area, Kind, KindError, KindRegistry
from sampling_core.requirements.checks import Requirement
from sampling_core.strategies import Strategy

__all__ = [
    "UsageError",
    "backend_arg",
    "parse_pairs",
    "plugin_arg",
    "requirement_arg",
    "requirement_spec_arg",
    "strategy_arg",
    "typed_options",
]

_ALIASES = {"regex": "matches", "json": "is_json"}


class UsageError(ValueError):
    """A mistake in the command line (exit status 2)."""


def _yaml_value(raw: str) -> Any:
    try:
        return yaml.safe_load(raw)
    except (yaml.YAMLError, ValueError, RecursionError):
        return raw


def _takes_text(model: type[BaseModel], name: str, raw: str) -> bool:
    """Whether option ``name`` of ``model`` takes the text ``raw`` as text (not as a number)."""
    info = model.model_fields.get(name)
    if info is None:
        return False
    annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    try:
        value = TypeAdapter(annotation).validate_python(raw)
    except Exception:  # not text, or a type pydantic cannot build a schema for (a Console)
        return False
    return isinstance(value, str)


def typed_options(model: type[BaseModel] | None, raw: Mapping[str, str]) -> dict[str, Any]:
    """Command-line text values typed for ``model``'s options (see the module docstring)."""
    out: dict[str, Any] = {}
    for name, text in raw.items():
        keep = model is not None and _takes_text(model, name, text)
        out[name] = text if keep else _yaml_value(text)
    return out


def parse_pairs(text: str, what: str) -> dict[str, str]:
    """``"a=1,b=x"`` -> ``{"a": "1", "b": "x"}``; a part without ``=`` or a name given twice
    is a UsageError."""
    pairs: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip():
            raise UsageError(
                f"{what}: cannot read {part!r}; write NAME=VALUE pairs joined by commas"
            )
        _once(pairs, name.strip(), what)
        pairs[name.strip()] = value.strip()
    return pairs


def _once(given: Mapping[str, Any], name: str, what: str) -> None:
    """A UsageError when option ``name`` was already given (the last would silently win)."""
    if name in given:
        raise UsageError(f"{what}: option {name!r} is given twice; give each option once")


def _named(spec: str, what: str, known: Iterable[str] = ()) -> tuple[str, dict[str, str]]:
    """``NAME`` or ``NAME:k=v,k=v``; ``module:attr`` (no ``=``, not a ``known`` name) is a name."""
    name, sep, rest = spec.partition(":")
    if not sep or ("=" not in rest and name.strip() not in known):
        return spec.strip(), {}
    return name.strip(), parse_pairs(rest, f"{what} {spec!r}")


def _kind(kinds: KindRegistry, area: Area, name: str) -> Kind:
    """The kind ``name``; ``max-words`` finds ``max_words``, ``regex`` and ``json`` their kinds."""
    name = _ALIASES.get(name, name) if area == "requirement" else name
    if name not in kinds.kinds[area] and name.replace("-", "_") in kinds.kinds[area]:
        name = name.replace("-", "_")
    return kinds.get(area, name)


def plugin_arg(spec: str) -> tuple[str, dict[str, Any]]:
    """``--plugin NAME[:k=v,...]`` -> ``(name, options)``, typed by the plugin class's signature."""
    name, raw = _named(spec, "--plugin", (entry.name for entry in installed_plugins()))
    if not name:
        raise UsageError(f"--plugin {spec!r}: give a plugin name, e.g. --plugin tracing")
    model = None
    if raw:
        try:
            obj = entry_point_object(name)
        except Exception:  # unknown or broken: the registry reports it when it loads the name
            obj = None
        model = options_model(name, obj) if isinstance(obj, type) else None
    return name, typed_options(model, raw)


def requirement_arg(kinds: KindRegistry, spec: str) -> Requirement:
    """``--require KIND:VALUE`` (or a bare ``KIND`` that takes no value) as a Requirement."""
    kind, value, takes_value = _requirement(kinds, spec)
    try:
        return kinds.requirement(kind, value) if takes_value else kinds.requirement(kind)
    except KindError as exc:
        raise UsageError(f"--require {spec!r}: {exception_text(exc)}") from None


def requirement_spec_arg(kinds: KindRegistry, spec: str) -> tuple[str, Any]:
    """``--require KIND:VALUE`` as the ``(kind, value)`` a run config's ``{KIND: VALUE}``
    holds (checked by building it once; ``value`` is ``None`` for a kind without one)."""
    requirement_arg(kinds, spec)
    kind, value, _ = _requirement(kinds, spec)
    return kind, value


def _requirement(kinds: KindRegistry, spec: str) -> tuple[str, Any, bool]:
    """The kind's name, its value typed, and whether the kind takes one."""
    name, sep, text = spec.partition(":")
    try:
        kind = _kind(kinds, "requirement", name.strip().lower())
    except KindError as exc:
        raise UsageError(f"--require {spec!r}: {exception_text(exc)}") from None
    if kind.value is None:
        if sep:
            raise UsageError(f"--require {spec!r}: {kind.name} takes no argument")
        return kind.name, None, False
    if not sep or not text:
        raise UsageError(f"--require {spec!r}: expected KIND:VALUE, e.g. max-words:40")
    try:
        as_text = isinstance(kind.value.validate_python(text), str)
    except ValidationError:
        as_text = False
    return kind.name, (text if as_text else _yaml_value(text)), True


def strategy_arg(kinds: KindRegistry, spec: str) -> Strategy:
    """``--strategy NAME[:k=v,...]`` as a Strategy."""
    name, raw = _named(spec, "--strategy")
    kind = _kind(kinds, "strategy", name)
    built: Strategy = kinds.strategy(kind.name, **typed_options(kind.options, raw))
    return built


def backend_arg(
    kinds: KindRegistry,
    name: str,
    pairs: Sequence[str],
    shortcuts: Mapping[str, tuple[str, Any]],
    defaults: Mapping[str, Any] | None = None,
) -> Any:
    """``--backend KIND --backend-option k=v ...`` as a backend.

    ``shortcuts`` maps a flag (``--reply``) to the option it sets and its value (``None``:
    not given); a flag the kind has no option for is a UsageError. ``--model`` sets
    ``model``, or ``model_path`` for a kind that has that instead.
    """
    kind = _kind(kinds, "backend", name)
    raw: dict[str, str] = {}
    for pair in pairs:  # one NAME=VALUE each: the value may hold commas
        option, sep, value = pair.partition("=")
        if not sep or not option.strip():
            raise UsageError(f"--backend-option {pair!r}: write NAME=VALUE")
        _once(raw, option.strip(), "--backend-option")
        raw[option.strip()] = value.strip()
    options = typed_options(kind.options, raw)
    fields = kind.options.model_fields
    for flag, (option, value) in shortcuts.items():
        if value is None or value == []:
            continue
        if option == "model" and option not in fields and "model_path" in fields:
            option = "model_path"
        if option not in fields:
            raise UsageError(
                f"{flag} is not for backend {kind.name!r} (its options: "
                f"{', '.join(fields) or 'none'}; set them with --backend-option NAME=VALUE)"
            )
        if option in raw:
            raise UsageError(
                f"{flag} and --backend-option {option}=... both set {option!r}; give one"
            )
        options[option] = value
    for option, value in (defaults or {}).items():
        if option in fields:
            options.setdefault(option, value)
    try:
        return kind.build(options=options)
    except KindError as exc:
        flag = _flag_for(exc.key, shortcuts, fields)
        if flag is None or exc.key in options:
            raise
        raise KindError(
            f"{exception_text(exc)} (give it with {flag} or --backend-option)", exc.key
        ) from None


def _flag_for(
    option: str | None, shortcuts: Mapping[str, tuple[str, Any]], fields: Mapping[str, Any]
) -> str | None:
    """The command-line flag that sets backend ``option`` (``--model`` for ``model_path``)."""
    for flag, (name, _) in shortcuts.items():
        if name == "model" and "model" not in fields and "model_path" in fields:
            name = "model_path"
        if name == option:
            return flag
    return None
