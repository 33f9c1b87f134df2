"""Installed plugins: entry points, the environment's switches, making a plugin with options.

Which entry points load, what a name resolves to, and how a plugin class is called with its
options live here (one place for those rules); :mod:`sampling_core.hooks.registry` registers what
this module makes.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from importlib import metadata
from typing import Any

from hook_specs.markers import PROJECT_NAME
from sampling_core.errors import PluginError
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
            f"importing plugin {name!r} ({ep.value}) raised {type(exc).__name__}({exc})"
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
    return obj(**kwargs)


def affects_results(name: str) -> bool:
    """Whether the installed plugin ``name`` may change results (unknown ones: yes).

    A plugin class that sets ``affects_results = False`` (tracing, progress, recorder) may
    be added, removed or reconfigured when a run is resumed.
    """
    try:
        obj = entry_point_object(name)
    except Exception:
        return True
    return getattr(obj, "affects_results", True) is not False


def split_spec(plugin: PluginSpec) -> tuple[PluginSpec, dict[str, Any] | None]:
    """``("name", {options})`` or ``{"name": ..., "options": ...}`` -> name and options."""
    if isinstance(plugin, tuple) and len(plugin) == 2 and isinstance(plugin[0], str):
        options = plugin[1]
        if not isinstance(options, Mapping):
            raise PluginError(plugin[0], "options", f"options must be a mapping, not {options!r}")
        return plugin[0], dict(options)
    if isinstance(plugin, Mapping) and isinstance(plugin.get("name"), str):
        return plugin["name"], dict(plugin.get("options") or {})
    return plugin, None


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
    warn(f"plugin {name!r} could not be loaded and was skipped: {type(exc).__name__}: {exc}")


def default_name(plugin: Any) -> str:
    """The name an object is registered under when none is given."""
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    if isinstance(plugin, type):
        return plugin.__name__
    return type(plugin).__name__
