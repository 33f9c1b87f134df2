"""Hook delivery: the engine fires each hook with one call and gets back what it needs.

The loop never builds a payload or calls a plugin itself. It holds one
:class:`~sampling_core.hooks.call_hooks.CallHooks` per ``sample()`` call and fires any hook
with ``await hooks.fire(HookName.X, fields)`` (the hooks whose delivery or read-back is the
engine's own business have a method each there: ``pre_call``, ``validate``, ``iteration``,
``repair``, ...). A :class:`HookChannel` fires hooks outside a call the same way. Behind
that one call live:

* the fast path: when nothing implements or monitors a hook, no payload is built;
* payload building (each payload class's :meth:`~hook_specs.HookPayload.builder`);
* calling the implementations in pluggy's order (``tryfirst``, the rest last-registered
  first, ``trylast``), awaiting async ones, each seeing the previous one's changes, with
  writes credited through the payload's :meth:`~hook_specs.HookPayload.track_writes`;
* the fault policy: ``StopSampling`` propagates (except from ``sampling_loop_end`` and the
  run hooks); in a
  hook that may write, any other exception fails closed as :class:`PluginError`; in an
  observe-only hook it is isolated as a :class:`PluginFault` (strict: raised);
* hook-call monitoring with pluggy's meaning (``before(hook_name, hook_impls, kwargs)``,
  ``after(outcome, hook_name, hook_impls, kwargs)``);
* in-order, shielded delivery of ``sampling_iteration``;
* handing ``@background`` implementations' events to the sampler's
  :class:`~sampling_core.hooks.background.BackgroundDelivery`.

A :class:`~sampling_core.hooks.table.HookTable` is what a registry compiles its plugins into
(cached until a plugin is registered or unregistered); it never changes once made.

**Adding a hook** is three edits, all in :mod:`hook_specs`: its ``HookName`` member, its
payload model (``hook`` set to that member; ``writable`` naming what plugins may change)
and its spec (``payload`` annotated with that model). Whether it may be written, its
route and firing flag, the fault policy, monitoring, background delivery and the fast
path are derived from those; the engine then fires it where it happens with
``await hooks.fire(HookName.X, {...})``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import pluggy
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from sampling_core.errors import PluginError
from sampling_core.hooks.around import Inner, call_around
from sampling_core.hooks.faults import Faults, PluginTimeout, describe
from sampling_core.hooks.table import HookTable, Route

logger = structlog.get_logger("samplehooks")

H = HookName
T = TypeVar("T")

_STOPS_SAMPLING = frozenset(HookName.per_call()) - {H.SAMPLING_LOOP_END, H.GENERATION_CANCELLED}
"""Where ``StopSampling`` ends the call; anywhere else (the loop's end, a cancelled call's
end, the run hooks) it is a fault like any other."""


class HookChannel:
    """Fires hooks through one :class:`~sampling_core.hooks.table.HookTable`: any hook, with
    one call (:meth:`fire`), and the faults it isolated (:attr:`faults`)."""

    __slots__ = ("_routes", "faults", "firing", "table")

    def __init__(self, table: HookTable) -> None:
        self.table = table
        self.faults = Faults()
        self.firing = table.firing
        self._routes = table.routes

    async def fire(self, hook: HookName, fields: dict[str, Any]) -> Any:
        """Fire ``hook`` with a payload built from ``fields``: the payload as the plugins
        left it, or ``None`` (and no payload built) when nothing implements or monitors it."""
        if not getattr(self.firing, hook):  # a HookName is its own value: the attribute's name
            return None
        return await self._fire(getattr(self._routes, hook), fields)

    # -- behind every hook ---------------------------------------------------------------

    async def _fire(self, route: Route, fields: dict[str, Any]) -> Any:
        """Build the hook's payload, deliver it, and return it (as plugins left it).

        The route's ``deliver`` calls the implementations (the hooks fired per attempt call
        it themselves on a direct route, which saves a coroutine per event). A table with
        monitors has them wrap each delivery (:meth:`_monitored`); the delivery itself
        knows nothing of them.
        """
        if route.direct:
            return route.deliver(self, fields)
        payload = route.build(fields)
        if self.table.monitors:
            await self._monitored(route, payload)
        else:
            pending = route.deliver(self, None, payload)
            if pending is not payload:
                await pending
        delivery = self.table.delivery
        if route.background and delivery is not None:
            for impl in route.background:
                await delivery.put(route.hook, impl, payload)
        return payload

    async def _monitored(self, route: Route, payload: HookPayload) -> None:
        """The delivery with the monitors around it, as pluggy has them around a hook call
        (``before``, then ``after`` with the outcome)."""
        monitored = self._before(route, payload)
        try:
            pending = route.deliver(self, None, payload)
            if pending is not payload:
                await pending
        except BaseException as exc:
            self._after(route.hook, monitored, _outcome_of(exc))
            raise
        self._after(route.hook, monitored, _outcome_of(None))

    def around(
        self,
        route: Route,
        fields: dict[str, Any],
        inner: Inner[T],
        valid: Callable[[Any], bool],
    ) -> Awaitable[T]:
        """Fire a call hook around ``inner`` (see :mod:`sampling_core.hooks.around`): its
        wrappers, its plain implementations (the first answer stands), then ``inner``; the
        outcome as the wrappers left it. Monitors see the call as one hook call."""
        payload = route.build(fields)
        if self.table.monitors:
            return self._monitored_around(route, payload, inner, valid)
        # a HookName is a str: its value, without the enum's slow property
        return call_around(route.hook, route.wrappers, route.inline, payload, inner, valid)

    async def _monitored_around(
        self, route: Route, payload: HookPayload, inner: Inner[T], valid: Callable[[Any], bool]
    ) -> T:
        monitored = self._before(route, payload)
        try:
            outcome = await call_around(
                route.hook, route.wrappers, route.inline, payload, inner, valid
            )
        except BaseException as exc:
            self._after(route.hook, monitored, _outcome_of(exc))
            raise
        self._after(route.hook, monitored, pluggy.Result.from_call(lambda: outcome))
        return outcome

    async def awaited(self, pending: Any) -> None:
        """Await an async implementation's work, cancelled after the table's timeout
        (:class:`PluginTimeout`)."""
        timeout = self.table.timeout
        if timeout is None:
            await pending
            return
        with anyio.move_on_after(timeout) as scope:
            await pending
        if scope.cancelled_caught:
            raise PluginTimeout(f"took longer than {timeout:g}s and was cancelled")

    def _before(self, route: Route, payload: HookPayload) -> tuple[list[Any], dict[str, Any]]:
        """Tell every monitor a hook call begins (pluggy's ``before``); what ``after`` takes."""
        # pluggy's order: the last one listed is called first.
        every = (*route.wrappers, *route.inline, *route.background)
        impls = [impl.source for impl in reversed(every)]
        kwargs = {"payload": payload}
        for before, _ in self.table.monitors:
            before(route.hook.value, impls, kwargs)
        return impls, kwargs

    def _after(
        self,
        hook: HookName,
        monitored: tuple[list[Any], dict[str, Any]],
        outcome: pluggy.Result[list[Any]],
    ) -> None:
        """Tell every monitor how the hook call ended (pluggy's ``after``)."""
        impls, kwargs = monitored
        for _, after in self.table.monitors:
            after(outcome, hook.value, impls, kwargs)

    def fault(self, hook: HookName, plugin_name: str, exc: Exception, writable: bool) -> None:
        """Raise or isolate what an implementation raised, as the hook's rules say."""
        if isinstance(exc, StopSampling):
            if hook in _STOPS_SAMPLING:
                if exc.plugin_name is None:
                    exc.plugin_name = plugin_name
                raise exc
        elif writable:
            raise PluginError(plugin_name, hook.value, describe(exc)) from exc
        if self.table.strict:
            if isinstance(exc, PluginError):
                raise exc
            raise PluginError(plugin_name, hook.value, describe(exc)) from exc
        self.faults.add(plugin_name, hook.value, exc)


def _outcome_of(exc: BaseException | None) -> pluggy.Result[list[Any]]:
    """What a hook call came to, for monitors' ``after``: made with pluggy's public
    ``Result.from_call``."""

    def ended() -> list[Any]:
        if exc is not None:
            raise exc
        return []

    return pluggy.Result.from_call(ended)
