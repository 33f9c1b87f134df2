"""What a registry compiles its plugins into: each hook's implementations in call order.

A :class:`HookTable` never changes once made; :mod:`sampling_core.hooks.channel` fires hooks
through it, one :class:`~sampling_core.hooks.channel.CallHooks` per ``sample()`` call.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pluggy

from hook_specs.contract import PAYLOAD_TYPES, may_write
from hook_specs.markers import is_background
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload

H = HookName


class Delivery(Protocol):
    """Where a table hands ``@background`` implementations' events (a ``BackgroundDelivery``)."""

    async def put(self, hook: HookName, impl: HookImplementation, payload: HookPayload) -> None:
        """Queue one event for ``impl``."""


Monitor = tuple[Callable[..., None], Callable[..., None]]
"""A ``(before, after)`` pair given to ``add_hookcall_monitoring``."""


@dataclass(frozen=True, slots=True)
class HookImplementation:
    """One plugin's implementation of one hook, ready to call."""

    plugin_name: str
    function: Callable[..., Any]
    takes_payload: bool
    is_async: bool
    order: int  # 0 trylast, 1 plain, 2 tryfirst: pluggy's grouping
    background: bool = False
    source: Any = None  # the pluggy HookImpl, handed to hook-call monitors

    @classmethod
    def from_pluggy(cls, impl: pluggy.HookImpl) -> HookImplementation:
        """Wrap a ``pluggy.HookImpl``."""
        return cls(
            plugin_name=impl.plugin_name,
            function=impl.function,
            takes_payload="payload" in impl.argnames,
            is_async=is_async_function(impl.function),
            order=2 if impl.tryfirst else 0 if impl.trylast else 1,
            background=is_background(impl.function),
            source=impl,
        )

    def call(self, payload: HookPayload) -> Any:
        """Call the implementation (what it returns may be awaitable). The channel inlines
        this, on its hot path."""
        return self.function(payload) if self.takes_payload else self.function()


BUILDERS = {hook: cls.builder() for hook, cls in PAYLOAD_TYPES.items()}
"""Each hook's payload builder, made once: the only place the engine builds payloads
(a table's routes take theirs from here when the table is made)."""

_ROUTED = {
    "loop_start": H.SAMPLING_LOOP_START,
    "validate": H.SAMPLING_VALIDATE,
    "pre_call": H.GENERATION_PRE_CALL,
    "post_call": H.GENERATION_POST_CALL,
    "error": H.GENERATION_ERROR,
    "iteration": H.SAMPLING_ITERATION,
    "repair": H.SAMPLING_REPAIR,
    "loop_end": H.SAMPLING_LOOP_END,
}
"""The attribute of :class:`Routes` (and of :class:`Firing`) that holds each per-call hook."""


def is_async_function(function: Callable[..., Any]) -> bool:
    """Whether calling ``function`` gives something to await: an ``async def``, also behind
    a ``functools.wraps`` decorator, or an object whose ``__call__`` is ``async def``.

    Decided once, when the implementation is registered; a plain function that returns an
    awaitable all the same is a fault of its plugin (the awaitable is closed, not run).
    """
    if inspect.iscoroutinefunction(function):
        return True
    if inspect.isfunction(function) or inspect.ismethod(function):
        if not hasattr(function, "__wrapped__"):
            return False
        try:
            inner = inspect.unwrap(function)
        except ValueError:  # a cycle of __wrapped__
            return False
        return inspect.iscoroutinefunction(inner)
    return inspect.iscoroutinefunction(type(function).__call__)  # an object's own __call__


def call_order(registered: Iterable[HookImplementation]) -> tuple[HookImplementation, ...]:
    """pluggy's call order for implementations given in registration order."""
    ordered = sorted(registered, key=lambda impl: impl.order)  # stable
    return tuple(reversed(ordered))


@dataclass(frozen=True, slots=True)
class Firing:
    """Which hooks do anything when fired (some plugin implements or monitors them).

    The loop reads the flag before it fires a hook (``if hooks.firing.pre_call:``), so a
    hook nobody implements costs one attribute read: no coroutine, no payload.
    """

    loop_start: bool
    validate: bool
    pre_call: bool
    post_call: bool
    error: bool
    iteration: bool
    repair: bool
    loop_end: bool


@dataclass(frozen=True, slots=True)
class Route:
    """How one hook is delivered with one table, worked out once when the table is made.

    ``direct`` holds when nothing can suspend the delivery: every inline implementation is
    a plain function, no monitor watches and no background observer waits. The channel then
    calls the implementations in a plain loop (see ``CallHooks._fire``).
    """

    hook: HookName
    build: Callable[[dict[str, Any]], Any]  # the payload class's builder
    inline: tuple[HookImplementation, ...]  # in call order
    background: tuple[HookImplementation, ...]
    writable: bool
    direct: bool


@dataclass(frozen=True, slots=True)
class Routes:
    """Every per-call hook's :class:`Route`, one attribute per hook (read on the hot path)."""

    loop_start: Route
    validate: Route
    pre_call: Route
    post_call: Route
    error: Route
    iteration: Route
    repair: Route
    loop_end: Route


class HookTable:
    """Every hook's implementations in call order, the monitors, and the fault policy."""

    __slots__ = (
        "awaits_iteration",
        "delivery",
        "firing",
        "monitors",
        "registered",
        "routes",
        "strict",
        "timeout",
    )

    def __init__(
        self,
        registered: Mapping[HookName, Iterable[HookImplementation]],
        *,
        strict: bool = False,
        timeout: float | None = None,
        monitors: Sequence[Monitor] = (),
        delivery: Delivery | None = None,
    ) -> None:
        self.registered = {hook: tuple(registered.get(hook, ())) for hook in HookName}
        self.strict = strict
        self.timeout = timeout
        self.monitors = tuple(monitors)
        self.delivery = delivery
        self.routes = Routes(
            **{attr: self._route(hook, self.registered[hook]) for attr, hook in _ROUTED.items()}
        )
        # Whether firing a hook does anything at all; if not, no payload is built.
        self.firing = Firing(**{attr: self._fires(getattr(self.routes, attr)) for attr in _ROUTED})
        # Whether a sampling_iteration implementation is async (its delivery is then locked).
        self.awaits_iteration = any(impl.is_async for impl in self.routes.iteration.inline)

    def _fires(self, route: Route) -> bool:
        return bool(route.inline or route.background or self.monitors)

    def _route(self, hook: HookName, registered: Iterable[HookImplementation]) -> Route:
        ordered = call_order(registered)
        inline = tuple(impl for impl in ordered if not impl.background)
        background = tuple(impl for impl in ordered if impl.background)
        return Route(
            hook=hook,
            build=BUILDERS[hook],
            inline=inline,
            background=background,
            writable=may_write(hook),
            direct=not (self.monitors or background or any(i.is_async for i in inline)),
        )

    def merged(self, extra: Mapping[HookName, Iterable[HookImplementation]]) -> HookTable:
        """A table with ``extra`` implementations registered after these (pluggy's rule:
        a later ``trylast`` one goes before the earlier ones, so it is called after them)."""
        combined = {}
        for hook in HookName.per_call():
            more = tuple(extra.get(hook, ()))
            late = tuple(impl for impl in more if impl.order == 0)
            rest = tuple(impl for impl in more if impl.order != 0)
            combined[hook] = late + self.registered[hook] + rest
        return HookTable(
            combined,
            strict=self.strict,
            timeout=self.timeout,
            monitors=self.monitors,
            delivery=self.delivery,
        )


class CallTables:
    """The tables made for recent calls' own plugins, reused while the registry stands.

    A call given plugin objects (``sample(..., plugins=[...])``) runs with the registry's
    table merged with theirs. Making that table reads every plugin's hooks; when the next
    call passes the same objects (a collector handed to every call) and no plugin was
    registered, unregistered or monitored meanwhile, the table made then is used again.
    At most ``size`` tables are kept, most recent first; each keeps its plugin objects
    alive (its implementations are their bound methods), so an object's ``id`` cannot be
    taken by another while its table is kept.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._tables: OrderedDict[tuple[int, ...], tuple[HookTable, tuple[Any, ...], HookTable]]
        self._tables = OrderedDict()
        self._lock = threading.Lock()

    def get(self, base: HookTable, plugins: tuple[Any, ...]) -> HookTable | None:
        """The table made for ``plugins`` on top of ``base``, if it is kept."""
        key = tuple(map(id, plugins))
        with self._lock:
            kept = self._tables.get(key)
            if kept is None:
                return None
            if kept[0] is not base:  # the registry changed since
                del self._tables[key]
                return None
            self._tables.move_to_end(key)
            return kept[2]

    def put(self, base: HookTable, plugins: tuple[Any, ...], table: HookTable) -> None:
        """Keep ``table``, made for ``plugins`` on top of ``base``."""
        with self._lock:
            key = tuple(map(id, plugins))
            self._tables[key] = (base, plugins, table)
            self._tables.move_to_end(key)
            while len(self._tables) > self.size:
                self._tables.popitem(last=False)
