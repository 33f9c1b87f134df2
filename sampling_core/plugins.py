"""Plugin registration: naming, entry points, environment switches, and pluggy checks.

A plugin is an object with ``@hookimpl`` methods, a module with ``@hookimpl`` functions, or
the name of an installed plugin (an entry point of group ``samplehooks``; the built-ins
are entry points too, enabled only when named). Its name is the entry point's name, or for
an object its class name (a module: its ``__name__``), with ``-2``, ``-3``, ... added when
the name is already taken in the same registry.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from hook_specs import specs
from hook_specs.markers import PROJECT_NAME
from hook_specs.names import HookName
from sampling_core.dispatch import HookDispatcher, HookImplementation
from sampling_core.errors import PluginError
from sampling_core.options import options_model, validate_options

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


def installed_plugins() -> list[InstalledPlugin]:
    """Every entry point of group ``samplehooks``, built-ins included, sorted by name."""
    found: dict[str, InstalledPlugin] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else None
        found.setdefault(
            ep.name,
            InstalledPlugin(
                name=ep.name,
                value=ep.value,
                distribution=dist_name,
                version=dist.version if dist is not None else None,
                builtin=_canonical(dist_name) == BUILTIN_DISTRIBUTION,
            ),
        )
    return sorted(found.values(), key=lambda p: p.name)


def _canonical(name: str | None) -> str | None:
    return None if name is None else name.lower().replace("_", "-")


def entry_point_object(name: str) -> Any:
    """The object behind entry point ``name``, imported but not instantiated."""
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP, name=name):
        return ep.load()
    raise LookupError(f"no installed plugin is named {name!r} (see `samplehooks plugins`)")


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


def default_name(plugin: Any) -> str:
    """The name an object is registered under when none is given."""
    if isinstance(plugin, types.ModuleType):
        return plugin.__name__
    if isinstance(plugin, type):
        return plugin.__name__
    return type(plugin).__name__


class PluginRegistry:
    """The plugins of one ``Sampler`` (or one call), on a pluggy ``PluginManager``."""

    def __init__(
        self,
        *,
        strict: bool = False,
        settings: PluginSettings | None = None,
        reserved_names: Iterable[str] = (),
        timeout: float | None = None,
    ) -> None:
        self.strict = strict
        self.timeout = timeout
        self.settings = settings or PluginSettings()
        self.manager = pluggy.PluginManager(PROJECT_NAME)
        self.manager.add_hookspecs(specs)
        self._reserved = set(reserved_names)
        self._dispatcher: HookDispatcher | None = None

    # -- registration -------------------------------------------------------------------

    def add(self, plugin: PluginSpec, name: str | None = None) -> str | None:
        """Register ``plugin`` (an object, a module, or an installed plugin's name).

        Returns the name it was registered under, or ``None`` when the environment
        disables it.
        """
        plugin, options = split_spec(plugin)
        if isinstance(plugin, str):
            if plugin in self.settings.disabled:
                return None
            try:
                resolved = _resolve_name(plugin, options)
            except PluginError:
                raise
            except Exception as exc:
                raise PluginError(plugin, "load", str(exc)) from exc
            return self.register(resolved, name or plugin)
        return self.register(plugin, name)

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plugin object under ``name`` (or its default name), checked as pluggy does.

        Unknown hook names (without ``optionalhook``) and wrapper implementations are
        refused with :class:`PluginError`.
        """
        final = self._unique(name or default_name(plugin))
        try:
            self.manager.register(plugin, final)
        except pluggy.PluginValidationError as exc:
            raise PluginError(final, "register", str(exc)) from exc
        except ValueError as exc:  # the same object registered twice
            raise PluginError(final, "register", str(exc)) from exc
        try:
            self._check(final, plugin)
        except PluginError:
            self.manager.unregister(plugin)
            raise
        self._dispatcher = None
        return final

    def _unique(self, base: str) -> str:
        taken = self._reserved | {n for n, _ in self.manager.list_name_plugin()}
        if base not in taken:
            return base
        n = 2
        while f"{base}-{n}" in taken:
            n += 1
        return f"{base}-{n}"

    def _check(self, name: str, plugin: Any) -> None:
        known = {hook.value for hook in HookName}
        for caller in self.manager.get_hookcallers(plugin) or []:
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                if impl.wrapper or impl.hookwrapper:
                    raise PluginError(
                        name,
                        caller.name,
                        "wrapper/hookwrapper implementations cannot span awaited hooks; "
                        "pair sampling_loop_start with sampling_loop_end (or "
                        "generation_pre_call with generation_post_call) instead",
                    )
                if caller.name not in known and not impl.optionalhook:
                    raise PluginError(
                        name,
                        caller.name,
                        f"unknown hook {caller.name!r}; hooks are: {', '.join(sorted(known))} "
                        "(mark it @hookimpl(optionalhook=True) if that is intended)",
                    )

    def load_entrypoints(self) -> list[InstalledPlugin]:
        """Load the entry points the environment asks for, one at a time.

        Third-party plugins load by default; built-ins only when named in
        ``SAMPLEHOOKS_PLUGINS``. A plugin that fails to load is reported by name on stderr
        and skipped (strict: :class:`PluginError`).
        """
        only, disabled = self.settings.only, self.settings.disabled
        report = []
        wanted = set(only) if only is not None else set()
        for entry in installed_plugins():
            wanted.discard(entry.name)
            if entry.name in disabled:
                continue
            if only is not None and entry.name not in only:
                continue
            if only is None and entry.builtin:
                continue
            try:
                plugin = load_entry_point(entry.name)
                self.register(plugin, entry.name)
            except Exception as exc:
                entry.error = f"{type(exc).__name__}: {exc}"
                if self.strict:
                    raise PluginError(entry.name, "load", entry.error) from exc
                warn(f"plugin {entry.name!r} could not be loaded and was skipped: {entry.error}")
            else:
                entry.loaded = True
                entry.hooks = self.hooks_of(entry.name)
            report.append(entry)
        for missing in sorted(wanted - disabled):
            message = f"SAMPLEHOOKS_PLUGINS names {missing!r}, but no such plugin is installed"
            if self.strict:
                raise PluginError(missing, "load", message)
            warn(message)
        return report

    # -- reading ------------------------------------------------------------------------

    def names(self) -> list[str]:
        """The names of the registered plugins, in registration order."""
        return [name for name, _ in self.manager.list_name_plugin()]

    def get(self, name: str) -> Any:
        """The plugin object registered under ``name``, or ``None``."""
        return self.manager.get_plugin(name)

    def hooks_of(self, name: str) -> list[str]:
        """The hooks the plugin named ``name`` implements."""
        plugin = self.manager.get_plugin(name)
        if plugin is None:
            return []
        return sorted(c.name for c in self.manager.get_hookcallers(plugin) or [])

    def implementations(self) -> dict[HookName, tuple[HookImplementation, ...]]:
        """Every hook's implementations, in registration order (pluggy's grouping kept)."""
        found: dict[HookName, tuple[HookImplementation, ...]] = {}
        for hook in HookName.per_call():
            caller = getattr(self.manager.hook, hook.value)
            found[hook] = tuple(HookImplementation.from_pluggy(i) for i in caller.get_hookimpls())
        return found

    def dispatcher(self) -> HookDispatcher:
        """The dispatcher for the plugins registered now (cached until the next change)."""
        if self._dispatcher is None:
            self._dispatcher = HookDispatcher(
                self.implementations(),
                strict=self.strict,
                trace=self.settings.trace_hooks,
                timeout=self.timeout,
            )
        return self._dispatcher


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
            f"no installed plugin is named {name!r}, and it cannot be imported: {exc}"
        ) from exc
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return instantiate(name, obj, options)
