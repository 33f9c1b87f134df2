"""What a registry compiles its plugins into: each hook's implementations in call order.

A :class:`HookTable` never changes once made; :mod:`sampling_core.hooks.channel` fires hooks
through it: one :class:`~sampling_core.hooks.call_hooks.CallHooks` per ``sample()`` call, and a
:class:`~sampling_core.hooks.channel.HookChannel` for a batch run's run hooks.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Protocol

import pluggy

from hook_specs.contract import PAYLOAD_TYPES, may_write
from hook_specs.markers import is_background
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload, credit_writes
from sampling_core.hooks.faults import not_awaited

FIRED = HookName.fired()
"""The hooks a table routes: every hook fired with a payload (per-call and run hooks)."""


class Delivery(Protocol):
    """Where a table hands ``@background`` implementations' events (a ``BackgroundDelivery``)."""

    async def put(self, hook: HookName, impl: HookImplementation, payload: HookPayload) -> None:
        """Queue one event for ``impl``."""


Monitor = tuple[Callable[..., None], Callable[..., None]]
"""A ``(before, after)`` pair given to ``add_hookcall_monitoring``."""


@dataclass(frozen=True, slots=True)
class HookImplementation:
    """One plugin's implementation of one hook, ready to call: ``call(payload)`` is how
    every delivery calls it (inline, in the background, around a call), made once here."""

    plugin_name: str
    function: Callable[..., Any]
    takes_payload: bool
    is_async: bool
    order: int  # 0 trylast, 1 plain, 2 tryfirst: pluggy's grouping
    background: bool = False
    source: Any = None  # what hook-call monitors are handed (pluggy's HookImpl if registered)
    wrapper: bool = False  # @hookimpl(wrapper=True) on a call hook (is_async: an async generator)
    call: Callable[[Any], Any] = field(init=False, repr=False, compare=False)
    """``call(payload)``: the function itself, or for one that leaves ``payload`` out, a
    function that calls it without (what it returns may be awaitable)."""

    def __post_init__(self) -> None:
        function = self.function
        if self.takes_payload:
            call = function
        else:

            def call(payload: Any) -> Any:
                return function()

        object.__setattr__(self, "call", call)

    @classmethod
    def from_pluggy(cls, impl: pluggy.HookImpl) -> HookImplementation:
        """Wrap a ``pluggy.HookImpl``."""
        wrapper, function = is_wrapper(impl.opts), impl.function
        return cls(
            plugin_name=impl.plugin_name,
            function=function,
            takes_payload="payload" in impl.argnames,
            is_async=is_async_wrapper(function) if wrapper else is_async_function(function),
            order=2 if impl.tryfirst else 0 if impl.trylast else 1,
            background=is_background(impl.function),
            source=impl,
            wrapper=wrapper,
        )


BUILDERS = {hook: cls.builder() for hook, cls in PAYLOAD_TYPES.items()}
"""Each hook's payload builder, made once: the only place the engine builds payloads
(a table's routes take theirs from here when the table is made)."""


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


ASYNC_WRAPPER = "samplehooks_async_wrapper"
"""The key the registry's pluggy manager adds to an async wrapper's ``@hookimpl`` options.

pluggy checks that a ``wrapper=True`` implementation is a (sync) generator function, and
runs wrappers itself; an async generator is run by the engine's call loop
(:mod:`sampling_core.hooks.around`), so the manager hands it to pluggy as a plain
implementation marked with this key (through ``parse_hookimpl_opts``, pluggy's public way
to read implementations)."""


def is_wrapper(opts: Mapping[str, Any]) -> bool:
    """Whether ``@hookimpl`` options (as the registry's manager parsed them) mark a wrapper."""
    return bool(opts.get("wrapper") or opts.get(ASYNC_WRAPPER))


def is_async_wrapper(function: Callable[..., Any]) -> bool:
    """Whether ``function`` is an async generator function (also behind ``functools.wraps``)."""
    try:
        inner = inspect.unwrap(function)
    except ValueError:
        return False
    return inspect.isasyncgenfunction(inner)


def required_arguments(function: Callable[..., Any]) -> tuple[str, ...]:
    """The arguments a call of ``function`` must be given (those without a default), as
    pluggy reads an implementation's ``argnames``."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(
        p.name
        for p in parameters
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    )


class FaultPolicy(Protocol):
    """What a delivery hands an implementation's exception to, and has an async
    implementation's work awaited by (a hook channel)."""

    def fault(self, hook: HookName, plugin_name: str, exc: Exception, writable: bool) -> None:
        """Raise or isolate ``exc``, as the hook's rules say."""

    async def awaited(self, pending: Any) -> None:
        """Await an async implementation's work (within the channel's timeout)."""


Deliver = Callable[..., Any]
"""A route's delivery, ``deliver(channel, fields)``: builds the payload from ``fields``,
calls the inline implementations in order and returns the payload as they left it, or,
once an async implementation's work must be awaited, an awaitable of it (never on a direct
route). ``deliver(channel, None, payload)`` delivers a payload already built."""


@dataclass(frozen=True, slots=True)
class Route:
    """How one hook is delivered with one table, worked out once when the table is made.

    ``direct`` holds when nothing can suspend the delivery: every inline implementation is
    a plain function, no monitor watches and no background observer waits. ``deliver``
    (made by :func:`delivery`) then returns the payload itself, with no coroutine made.
    """

    hook: HookName
    build: Callable[[dict[str, Any]], Any]  # the payload class's builder
    inline: tuple[HookImplementation, ...]  # in call order (a call hook's plain ones)
    background: tuple[HookImplementation, ...]
    writable: bool
    direct: bool
    deliver: Deliver
    wrappers: tuple[HookImplementation, ...] = ()  # a call hook's, in call order


def delivery(
    hook: HookName,
    build: Callable[[dict[str, Any]], Any],
    inline: tuple[HookImplementation, ...],
    writable: bool,
) -> Deliver:
    """The one place a hook's inline implementations are called, made once per route.

    What it reads per event (the builder, each implementation's call, its name, whether its
    work is awaited) is bound here, so an event costs the payload and the calls, little
    more. The implementations are called in a plain loop; at an async one whose work must
    be awaited, the loop hands back a coroutine that awaits it and then goes on with the
    same loop from the next implementation (so a hook whose implementations are all plain
    makes no coroutine). Writes to a writable payload are credited to the implementation
    making them (:func:`~hook_specs.payloads.credit_writes`); a write made after the hook
    is nobody's. Faults go to the channel's policy.
    """
    # (call, plugin name, where the loop goes on after this one's work when it is awaited,
    # 0 for a plain function)
    calls = tuple(
        (impl.call, impl.plugin_name, index + 1 if impl.is_async else 0)
        for index, impl in enumerate(inline)
    )
    isawaitable = inspect.isawaitable

    def deliver(
        channel: FaultPolicy, fields: dict[str, Any] | None, payload: Any = None, start: int = 0
    ) -> Any:
        if payload is None:
            payload = build(fields)  # type: ignore[arg-type]
        for call, name, goes_on_at in calls[start:] if start else calls:
            if writable:
                credit_writes(payload, name)
            try:
                out = call(payload)
                if out is not None and isawaitable(out):
                    if goes_on_at:
                        return resume(channel, payload, out, name, goes_on_at)
                    raise not_awaited(out)
            except Exception as exc:
                channel.fault(hook, name, exc, writable)
        if writable:
            credit_writes(payload, None)
        return payload

    async def resume(
        channel: FaultPolicy, payload: Any, pending: Any, name: str, goes_on_at: int
    ) -> Any:
        try:
            await channel.awaited(pending)
        except Exception as exc:
            channel.fault(hook, name, exc, writable)
        rest = deliver(channel, None, payload, goes_on_at)
        if rest is not payload:  # another async implementation further on
            await rest
        return payload

    return deliver


def _one_attribute_per_hook(name: str, kind: type, doc: str) -> type:
    """A frozen class with one attribute per fired hook, named by the hook's value
    (``sampling_iteration``, ...): read on the hot path as fast as any attribute."""
    cls = make_dataclass(name, [(hook.value, kind) for hook in FIRED], frozen=True, slots=True)
    cls.__doc__ = doc
    cls.__module__ = __name__
    return cls


Routes = _one_attribute_per_hook(
    "Routes", Route, "Every fired hook's :class:`Route`, by the hook's name."
)
Firing = _one_attribute_per_hook(
    "Firing",
    bool,
    """Which hooks do anything when fired (some plugin implements or monitors them), by the
    hook's name. The engine reads the flag before it fires a hook
    (``if hooks.firing.generation_pre_call:``), so a hook nobody implements costs one
    attribute read: no coroutine, no payload.""",
)


class HookTable:
    """Every hook's implementations in call order, the monitors, and the fault policy.

    ``registered`` holds each hook's implementations in the order a pluggy manager keeps
    them (``HookCaller.get_hookimpls()``: pluggy calls the last one first), as
    :func:`~sampling_core.hooks.registry.implementations_of` reads them: the order is
    pluggy's, never worked out here."""

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
        routes = {hook.value: self._route(hook, self.registered[hook]) for hook in FIRED}
        self.routes = Routes(**routes)
        # Whether firing a hook does anything at all; if not, no payload is built.
        self.firing = Firing(**{name: self._fires(route) for name, route in routes.items()})
        # Whether a sampling_iteration implementation is async (its delivery is then locked).
        self.awaits_iteration = any(impl.is_async for impl in self.routes.sampling_iteration.inline)

    def _fires(self, route: Route) -> bool:
        return bool(route.inline or route.background or route.wrappers or self.monitors)

    def _route(self, hook: HookName, registered: Iterable[HookImplementation]) -> Route:
        ordered = tuple(reversed(tuple(registered)))  # pluggy calls the last one kept first
        wrappers = tuple(impl for impl in ordered if impl.wrapper)
        inline = tuple(impl for impl in ordered if not impl.background and not impl.wrapper)
        background = tuple(impl for impl in ordered if impl.background)
        build, writable = BUILDERS[hook], may_write(hook)
        return Route(
            hook=hook,
            build=build,
            inline=inline,
            background=background,
            writable=writable,
            direct=not (self.monitors or background or any(i.is_async for i in inline)),
            deliver=delivery(hook, build, inline, writable),
            wrappers=wrappers,
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
