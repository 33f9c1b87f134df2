"""Plugin registration: naming, entry points, environment switches, and pluggy checks.

A plugin is an object with ``@hookimpl`` methods, a module with ``@hookimpl`` functions, or
the name of an installed plugin (an entry point of group ``samplehooks``; the built-ins
are entry points too, enabled only when named). Its name is the entry point's name, or for
an object its class name (a module: its ``__name__``), with ``-2``, ``-3``, ... added when
the name is already taken in the same registry.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pluggy

from hook_specs import specs
from hook_specs.contract import CALL_HOOKS
from hook_specs.markers import PROJECT_NAME
from hook_specs.names import HookName
from sampling_core.errors import PluginError, exception_text
from sampling_core.hooks.accepting import async_wrapper_opts, check_implementation
from sampling_core.hooks.entry_points import (
    InstalledPlugin,
    PluginSettings,
    PluginSpec,
    default_name,
    installed_plugins,
    instantiate,
    resolve_plugin,
    warn,
    warn_skipped,
)
from sampling_core.hooks.table import (
    CallTables,
    HookImplementation,
    HookTable,
    Monitor,
)

if TYPE_CHECKING:
    from sampling_core.hooks.background import BackgroundDelivery


class _Manager(pluggy.PluginManager):
    """pluggy's ``PluginManager`` for the samplehooks hooks, reading async wrappers too.

    A registry's manager is a :class:`_LiveManager`; a call given plugins of its own gets a
    scratch one, holding the registry's plugins and the call's, read by pluggy as any
    registration is (names, order, options) and never used to call a hook.
    """

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.add_hookspecs(specs)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        """pluggy's reading of an implementation; an async ``wrapper=True`` one is handed to
        pluggy as a plain implementation marked :data:`~sampling_core.hooks.table.ASYNC_WRAPPER`
        (pluggy accepts only sync generators as wrappers; the engine runs both kinds)."""
        return async_wrapper_opts(plugin, name, super().parse_hookimpl_opts(plugin, name))


class _LiveManager(_Manager):
    """pluggy's ``PluginManager``, telling its registry about every change made on it.

    Overrides only public methods, so a plugin registered or unregistered directly on
    ``sampler.plugins.manager`` (or monitoring added there) takes effect from the next call
    like one registered through the registry.
    """

    def __init__(self, registry: PluginRegistry) -> None:
        super().__init__()
        self._registry = weakref.ref(registry)

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """Register as pluggy does, then check the plugin by the engine's rules."""
        registered = super().register(plugin, name)
        registry = self._registry()
        if registry is not None and registered is not None:
            try:
                registry._check(registered, plugin)
            except PluginError:
                super().unregister(plugin)
                raise
            registry._changed()
        return registered

    def unregister(self, plugin: Any = None, name: str | None = None) -> Any:
        """Unregister as pluggy does."""
        removed = super().unregister(plugin, name)
        registry = self._registry()
        if registry is not None:
            registry._changed()
        return removed

    def add_hookcall_monitoring(
        self, before: Callable[..., None], after: Callable[..., None]
    ) -> Callable[[], None]:
        """Monitor every hook the engine fires (see ``PluginRegistry.add_hookcall_monitoring``)."""
        registry = self._registry()
        undo_pluggy = super().add_hookcall_monitoring(before, after)
        if registry is None:
            return undo_pluggy
        undo = registry.add_hookcall_monitoring(before, after)

        def undo_both() -> None:
            undo()
            undo_pluggy()

        return undo_both


class PluginRegistry:
    """The plugins of one ``Sampler``, on a pluggy ``PluginManager`` (:attr:`manager`).

    Registration is live: :meth:`register`, :meth:`unregister` and registration directly on
    :attr:`manager` all take effect from the next ``sample()`` call. The compiled
    :class:`~sampling_core.hooks.channel.HookTable` is cached until the next change.
    """

    def __init__(
        self,
        *,
        strict: bool = False,
        settings: PluginSettings | None = None,
        reserved_names: Iterable[str] = (),
        timeout: float | None = None,
        delivery: BackgroundDelivery | None = None,
    ) -> None:
        self.strict = strict
        self.timeout = timeout
        self.settings = settings or PluginSettings()
        self.delivery = delivery
        self.manager: pluggy.PluginManager = _LiveManager(self)
        self._reserved = set(reserved_names)
        self._monitors: list[Monitor] = []
        self._table: HookTable | None = None
        self._call_tables = CallTables()  # tables of recent calls' own plugins
        if self.settings.trace_hooks:
            self.add_hookcall_monitoring(_trace_before, _trace_after)

    # -- registration -------------------------------------------------------------------

    def add(self, plugin: PluginSpec, name: str | None = None) -> str | None:
        """Register ``plugin``: any spec :func:`~sampling_core.hooks.entry_points.resolve_plugin`
        reads (an object, a module, a name, ``(name, options)``, ``{"name", "options"}``).

        Returns the name it was registered under, or ``None`` when the environment
        disables it.
        """
        resolved = resolve_plugin(plugin, self.settings.disabled)
        if resolved is None:
            return None
        return self.register(resolved.plugin, name or resolved.name)

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plugin object under ``name`` (or its default name), checked as pluggy does.

        Unknown hook names (without ``optionalhook``), wrapper implementations and
        ``@background`` on a hook that may write are refused with :class:`PluginError`.
        Takes effect from the next call.
        """
        final = self._unique(name or default_name(plugin))
        _register_on(self.manager, plugin, final)
        return final

    def unregister(self, plugin: Any) -> Any:
        """Unregister a plugin, given by its name or itself; returns it (``None`` if absent).

        Takes effect from the next call.
        """
        if isinstance(plugin, str):
            found = self.manager.get_plugin(plugin)
            return None if found is None else self.manager.unregister(found)
        if not self.manager.is_registered(plugin):
            return None
        return self.manager.unregister(plugin)

    def add_hookcall_monitoring(
        self, before: Callable[..., None], after: Callable[..., None]
    ) -> Callable[[], None]:
        """Call ``before``/``after`` around every hook the engine fires, as pluggy does.

        ``before(hook_name, hook_impls, kwargs)`` runs before the first implementation;
        ``after(outcome, hook_name, hook_impls, kwargs)`` after the last, with a
        ``pluggy.Result`` (its exception set when the hook raised). ``hook_impls`` are
        pluggy's ``HookImpl`` objects, ``kwargs`` is ``{"payload": payload}``. Hooks that
        nothing implements fire too while a monitor is set. Returns a function that
        removes the monitor. Takes effect from the next call.
        """
        monitor = (before, after)
        self._monitors.append(monitor)
        self._changed()

        def undo() -> None:
            if monitor in self._monitors:
                self._monitors.remove(monitor)
                self._changed()

        return undo

    def _changed(self) -> None:
        self._table = None

    def _unique(self, base: str) -> str:
        return _unique_in(base, self._reserved | {n for n, _ in self.manager.list_name_plugin()})

    def _check(self, name: str, plugin: Any) -> None:
        _check_on(self.manager, name, plugin)

    def load_entrypoints(self) -> list[InstalledPlugin]:
        """Load the entry points the environment asks for, one at a time.

        Third-party plugins load by default; built-ins only when named in
        ``SAMPLEHOOKS_PLUGINS``. A plugin that fails to load is reported by name on stderr
        and skipped (strict: :class:`PluginError`).
        """
        only, disabled = self.settings.only, self.settings.disabled
        report: list[InstalledPlugin] = []
        wanted = set(only) if only is not None else set()
        for entry in installed_plugins():
            wanted.discard(entry.name)
            if not self.settings.loads(entry):
                continue
            try:
                plugin = instantiate(entry.name, entry.load())
                self.register(plugin, entry.name)
            except Exception as exc:
                entry.error = f"{type(exc).__name__}: {exception_text(exc)}"
                if self.strict:
                    raise PluginError(entry.name, "load", entry.error) from exc
                warn_skipped(entry.name, exc)
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
        """Every hook's implementations, in pluggy's order (see :func:`implementations_of`)."""
        return implementations_of(self.manager)

    def hooks(self) -> HookTable:
        """The hook table for the plugins registered now (cached until the next change)."""
        table = self._table
        if table is None:
            table = self._table = HookTable(
                self.implementations(),
                strict=self.strict,
                timeout=self.timeout,
                monitors=self._monitors,
                delivery=self.delivery,
            )
        return table

    def with_call_plugins(self, plugins: Iterable[PluginSpec]) -> HookTable:
        """This registry's table plus ``plugins``, for one call only: they are not
        registered. The table is kept for the next call given the same plugin objects
        (:class:`~sampling_core.hooks.table.CallTables`) until the registry changes.

        The table is read from a scratch pluggy manager holding the registry's plugins, then
        the call's (registered after them, as pluggy orders a later registration), checked
        as :meth:`register` checks them; a call plugin that is registered on the sampler
        already is not added twice.
        """
        plugins = tuple(plugins)
        registered = self.hooks()
        # a spec naming a plugin makes a new object each call: only objects are kept
        reusable = not any(isinstance(plugin, str | tuple | Mapping) for plugin in plugins)
        if reusable:
            table = self._call_tables.get(registered, plugins)
            if table is not None:
                return table
        scratch = _Manager()
        for name, plugin in self.manager.list_name_plugin():
            if plugin is not None:  # None: a name pluggy blocks
                scratch.register(plugin, name)
        taken = set(self.names()) | self._reserved
        for plugin in plugins:
            resolved = resolve_plugin(plugin, self.settings.disabled)
            if resolved is None or scratch.is_registered(resolved.plugin):
                continue
            name = _unique_in(resolved.name, taken)
            taken.add(name)
            _register_on(scratch, resolved.plugin, name)
            _check_on(scratch, name, resolved.plugin)
        table = HookTable(
            implementations_of(scratch),
            strict=self.strict,
            timeout=self.timeout,
            monitors=self._monitors,
            delivery=self.delivery,
        )
        if reusable:
            self._call_tables.put(registered, plugins, table)
        return table


def implementations_of(
    manager: pluggy.PluginManager,
) -> dict[HookName, tuple[HookImplementation, ...]]:
    """Every hook's implementations on ``manager``, in the order pluggy keeps them.

    pluggy keeps a hook's wrappers after its other implementations, and is handed async
    wrappers as plain ones (see :func:`~sampling_core.hooks.accepting.async_wrapper_opts`):
    a call hook's are put back in the one order pluggy keeps (``trylast`` ones latest
    registered first, then the plain ones, then ``tryfirst`` ones, each in registration
    order), so that sync and async wrappers nest by pluggy's rule.
    """
    found: dict[HookName, tuple[HookImplementation, ...]] = {}
    registered = {name: i for i, (name, _) in enumerate(manager.list_name_plugin())}
    for hook in HookName.fired():
        caller = getattr(manager.hook, hook.value)
        impls = tuple(HookImplementation.from_pluggy(i) for i in caller.get_hookimpls())
        if hook in CALL_HOOKS:

            def stored(impl: HookImplementation) -> tuple[int, int]:
                index = registered.get(impl.plugin_name, 0)
                return (impl.order, -index if impl.order == 0 else index)

            impls = tuple(sorted(impls, key=stored))
        found[hook] = impls
    return found


def _register_on(manager: pluggy.PluginManager, plugin: Any, name: str) -> None:
    """Register ``plugin`` as ``name`` on ``manager``; what pluggy refuses is a PluginError."""
    try:
        manager.register(plugin, name)
    except pluggy.PluginValidationError as exc:
        raise PluginError(name, "register", exception_text(exc)) from exc
    except ValueError as exc:  # the same object registered twice
        raise PluginError(name, "register", exception_text(exc)) from exc


def _check_on(manager: pluggy.PluginManager, name: str, plugin: Any) -> None:
    """Check ``plugin``'s implementations on ``manager`` by the engine's rules."""
    for caller in manager.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin:
                check_implementation(name, caller.name, impl.function, impl.opts)


def _unique_in(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    n = 2
    while f"{base}-{n}" in taken:
        n += 1
    return f"{base}-{n}"


_TRACED_FIELDS = (
    "sampling_id",
    "prompt_key",
    "iteration",
    "subsample_index",
    "attempt",
    "sequence",
    "run_dir",
    "session",
    "key",
)
"""The payload fields a ``SAMPLEHOOKS_TRACE_HOOKS`` line shows, where the payload has them."""


def _trace_before(hook_name: str, hook_impls: list[Any], kwargs: dict[str, Any]) -> None:
    """``SAMPLEHOOKS_TRACE_HOOKS``: one stderr line per implementation about to run."""
    payload = kwargs["payload"]
    where = []
    for field_name in _TRACED_FIELDS:
        value = getattr(payload, field_name, None)
        if value is not None:
            where.append(f"{field_name}={value}")
    for impl in reversed(hook_impls):  # pluggy lists them last-called first
        print(
            f"samplehooks: {hook_name} -> {impl.plugin_name} ({' '.join(where)})", file=sys.stderr
        )


def _trace_after(outcome: Any, hook_name: str, hook_impls: list[Any], kwargs: Any) -> None:
    exc = outcome.exception
    if exc is not None:
        print(
            f"samplehooks: {hook_name} raised {type(exc).__name__}: {exception_text(exc)}",
            file=sys.stderr,
        )
