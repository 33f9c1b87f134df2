"""Installed plugins: entry points, the environment's switches, making a plugin with options.

Which entry points load, what a name resolves to, and how a plugin class is called with its
options live here (one place for those rules); :mod:`sampling_core.hooks.registry` registers what
this module makes.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any

from hook_specs.markers import PROJECT_NAME
from sampling_core.errors import PluginError, exception_text
from sampling_core.hooks.options import options_model, validate_options

ENTRY_POINT_GROUP = PROJECT_NAME
BUILTIN_DISTRIBUTION = "samplehooks"

PluginSpec = Any
"""A plugin object, a module, the name of an installed plugin, or ``(name, {options})``."""


@dataclass(frozen=True, slots=True)
class PluginSettings:
    """What the environment says about plugins, read when a ``Sampler`` is created.

    ``only``: ``SAMPLEHOOKS_PLUGINS`` (``None`` when unset: load every third-party entry
    point; an empty set: load none). ``disabled``: ``SAMPLEHOOKS_DISABLE_PLUGINS``.
    ``trace_hooks``: ``SAMPLEHOOKS_TRACE_HOOKS`` is set to a true value.
    """

    only: frozenset[str] | None = None
    disabled: frozenset[str] = frozenset()
    trace_hooks: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PluginSettings:
        """Read the three variables from ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        only_raw = env.get("SAMPLEHOOKS_PLUGINS")
        return cls(
            only=None if only_raw is None else _names(only_raw),
            disabled=_names(env.get("SAMPLEHOOKS_DISABLE_PLUGINS", "")),
            trace_hooks=env.get("SAMPLEHOOKS_TRACE_HOOKS", "").strip().lower()
            in {"1", "true", "yes", "on"},
        )

    def loads(self, entry: InstalledPlugin) -> bool:
        """Whether a ``Sampler`` loads this entry point without being asked (the one rule).

        Disabled: never; with ``SAMPLEHOOKS_PLUGINS`` set: exactly those named; otherwise
        every third-party entry point and no built-in.
        """
        if entry.name in self.disabled:
            return False
        if self.only is not None:
            return entry.name in self.only
        return not entry.builtin


def _names(raw: str) -> frozenset[str]:
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


@dataclass(slots=True)
class InstalledPlugin:
    """One entry point of group ``samplehooks``, and what happened when it was loaded."""

    name: str
    value: str
    distribution: str | None
    version: str | None
    builtin: bool
    loaded: bool = False
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    entry_point: Any = field(default=None, repr=False, compare=False)  # what load() imports

    def load(self) -> Any:
        """The object behind the entry point, imported (see :func:`entry_point_object`)."""
        return _load(self.name, self.entry_point)

    def report(self) -> dict[str, Any]:
        """The fields ``samplehooks plugins`` reports (the entry point object left out)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "entry_point"}


def installed_plugins() -> list[InstalledPlugin]:
    """Every entry point of group ``samplehooks``, built-ins included, sorted by name.

    The entry points are read once. Where another distribution's entry point takes a
    built-in's name, the built-in wins that name (with a warning naming the other
    distribution); see :func:`_chosen`.
    """
    by_name: dict[str, list[Any]] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        by_name.setdefault(ep.name, []).append(ep)
    found = []
    for name, eps in by_name.items():
        ep = _chosen(name, eps)
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        found.append(
            InstalledPlugin(
                name=name,
                value=ep.value,
                distribution=dist_name,
                version=dist.version if dist is not None else None,
                builtin=_canonical(dist_name) == BUILTIN_DISTRIBUTION,
                entry_point=ep,
            )
        )
    return sorted(found, key=lambda p: p.name)


def _dist_name(ep: Any) -> str | None:
    dist = getattr(ep, "dist", None)
    return dist.metadata["Name"] if dist is not None else None


_warned_clashes: set[tuple[str, str]] = set()


def _entry_point(name: str) -> Any:
    """The entry point named ``name`` (see :func:`_chosen`), or ``None``."""
    eps = list(metadata.entry_points(group=ENTRY_POINT_GROUP, name=name))
    return _chosen(name, eps) if eps else None


def _chosen(name: str, eps: list[Any]) -> Any:
    """Of the entry points named ``name``, the one used: when several distributions use the
    name, the built-in's (a third-party plugin cannot replace a built-in), with a warning
    once."""
    builtin = [ep for ep in eps if _canonical(_dist_name(ep)) == BUILTIN_DISTRIBUTION]
    if not builtin:
        return eps[0]
    for other in eps:
        if other is builtin[0] or _canonical(_dist_name(other)) == BUILTIN_DISTRIBUTION:
            continue
        clash = (name, str(_dist_name(other)))
        if clash not in _warned_clashes:
            _warned_clashes.add(clash)
            warn(
                f"the distribution {_dist_name(other)!r} declares a plugin named {name!r}, the "
                f"name of a built-in; the built-in {name!r} is used (rename that entry point "
                "to use the other plugin)"
            )
    return builtin[0]


def _canonical(name: str | None) -> str | None:
    return None if name is None else name.lower().replace("_", "-")


class PluginImportError(RuntimeError):
    """Importing (or making) a plugin raised; whatever it raised, even ``SystemExit``."""


def entry_point_object(name: str) -> Any:
    """The object behind entry point ``name``, imported but not instantiated.

    When several distributions use the name, the built-in's (see :func:`_entry_point`).
    Anything raised while importing it (``SystemExit``, ``KeyboardInterrupt`` included: a
    plugin must not end the program it is loaded into) is raised as
    :class:`PluginImportError` naming it.
    """
    ep = _entry_point(name)
    if ep is None:
        known = sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise LookupError(
            f"no installed plugin is named {name!r} ({hint}see `samplehooks plugins`)"
        )
    return _load(name, ep)


def _load(name: str, ep: Any) -> Any:
    try:
        return ep.load()
    except Exception:
        raise
    except BaseException as exc:  # SystemExit & co.: isolated on purpose, reported by name
        raise PluginImportError(
            f"importing plugin {name!r} ({ep.value}) raised "
            f"{type(exc).__name__}({exception_text(exc)})"
        ) from exc


def load_entry_point(name: str, options: Mapping[str, Any] | None = None) -> Any:
    """Import the plugin object behind entry point ``name``; a class is called with ``options``."""
    return instantiate(name, entry_point_object(name), options)


def instantiate(name: str, obj: Any, options: Mapping[str, Any] | None = None) -> Any:
    """A class called with ``options`` as keyword arguments (checked first); else ``obj``.

    A bad option raises :class:`PluginError` naming the plugin and the option.
    """
    if not isinstance(obj, type):
        if options:
            raise PluginError(name, "options", "takes no options (its entry point is no class)")
        return obj
    kwargs, problem = validate_options(options_model(name, obj), dict(options or {}))
    if kwargs is None:
        raise PluginError(name, "options", problem)
    try:
        return obj(**kwargs)
    except Exception as exc:  # a value the class itself refuses
        raise PluginError(name, "options" if kwargs else "load", exception_text(exc)) from exc


@dataclass(frozen=True, slots=True)
class ResolvedPlugin:
    """What a plugin spec names: the object to register and the name to register it under
    (before ``-2``, ``-3``, ... is added to a name already taken). ``made``: the object was
    made from a name for this resolution (a new one each time), not given by the caller."""

    name: str
    plugin: Any
    made: bool


_SPEC_FORMS = (
    "a plugin is an object, a module, an installed plugin's name, (name, {options}) or "
    '{"name": name, "options": {options}}'
)


def resolve_plugin(
    spec: PluginSpec, disabled: frozenset[str] | set[str] = frozenset()
) -> ResolvedPlugin | None:
    """The one resolver of plugin specs, used by ``Sampler(plugins=...)``, per-call
    ``sample(..., plugins=...)``, run configs and the CLI (``--plugin NAME:k=v``).

    ``spec`` is a plugin object or module (registered as it is, under its default name), the
    name of an installed plugin or an importable ``module[:attr]`` (a class is called with
    the options), ``(name, {options})`` or ``{"name": name, "options": {options}}``. A name
    in ``disabled`` (``SAMPLEHOOKS_DISABLE_PLUGINS``) resolves to ``None``. Anything wrong
    (a malformed spec, an unknown name, a bad option, an import that raises) is one
    :class:`PluginError` naming the plugin (and the option).
    """
    target, options = split_spec(spec)
    if not isinstance(target, str):
        return ResolvedPlugin(default_name(target), target, made=False)
    if not target.strip():
        raise PluginError(repr(target), "load", f"a plugin name is empty; {_SPEC_FORMS}")
    if target in disabled:
        return None
    try:
        return ResolvedPlugin(target, _resolve_name(target, options), made=True)
    except PluginError:
        raise
    except Exception as exc:
        raise PluginError(target, "load", exception_text(exc)) from exc


def _resolve_name(name: str, options: Mapping[str, Any] | None = None) -> Any:
    """An installed plugin by entry-point name, else an importable ``module[:attr]``."""
    try:
        return load_entry_point(name, options)
    except LookupError:
        if "." not in name and ":" not in name:
            raise
    module_name, _, attr = name.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise LookupError(
            f"no installed plugin is named {name!r}, and it cannot be imported: "
            f"{exception_text(exc)}"
        ) from exc
    except Exception:
        raise
    except BaseException as exc:  # SystemExit & co. from the module's code
        raise PluginImportError(
            f"importing plugin module {module_name!r} raised "
            f"{type(exc).__name__}({exception_text(exc)})"
        ) from exc
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return instantiate(name, obj, options)


def split_spec(plugin: PluginSpec) -> tuple[PluginSpec, dict[str, Any] | None]:
    """``("name", {options})`` or ``{"name": ..., "options": ...}`` -> name and options;
    anything else is an object, given back with ``None``.

    A tuple or a mapping that is neither form (options that are no mapping, a key other
    than ``name`` and ``options``, a name that is no string) raises :class:`PluginError`.
    """
    if isinstance(plugin, tuple):
        if len(plugin) != 2 or not isinstance(plugin[0], str):
            raise PluginError(repr(plugin)[:60], "load", f"cannot read this spec: {_SPEC_FORMS}")
        return plugin[0], _options_of(plugin[0], plugin[1])
    if isinstance(plugin, Mapping):
        name = plugin.get("name")
        if not isinstance(name, str):
            raise PluginError(
                repr(plugin)[:60], "load", f"the spec has no string 'name'; {_SPEC_FORMS}"
            )
        unknown = sorted(str(key) for key in plugin if key not in ("name", "options"))
        if unknown:
            raise PluginError(
                name,
                "options",
                f"unknown key(s) {unknown} in its spec: give options as "
                '{"name": ..., "options": {...}}',
            )
        return name, _options_of(name, plugin.get("options"))
    return plugin, None


def _options_of(name: str, options: Any) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise PluginError(
            name, "options", f"options must be a mapping, not {type(options).__name__}"
        )
    return dict(options)


def warn(message: str) -> None:
    """Print a one-line warning about plugins on stderr."""
    print(f"samplehooks: warning: {message}", file=sys.stderr)


_skipped: set[str] = set()


def warn_skipped(name: str, exc: BaseException) -> None:
    """Warn (once per process and plugin) that plugin ``name`` could not be loaded.

    The kind collector and the sampler both load entry points; a broken one is reported once.
    """
    if name in _skipped:
        return
    _skipped.add(name)
    warn(
        f"plugin {name!r} could not be loaded and was skipped: "
        f"{type(exc).__name__}: {exception_text(exc)}"
    )


def default_name(plugin: Any) -> str:
    """The name an object is registered under when none is given."""
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    if isinstance(plugin, type):
        return plugin.__name__
    return type(plugin).__name__
