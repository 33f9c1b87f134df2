"""Hook delivery: the engine fires each hook with one call and gets back what it needs.

The loop never builds a payload or calls a plugin itself. It holds one :class:`CallHooks`
per ``sample()`` call and fires any hook with ``await hooks.fire(HookName.X, fields)``
(the hooks whose delivery or read-back is the engine's own business have a method each:
``pre_call``, ``validate``, ``iteration``, ``repair``, ...). A :class:`HookChannel` fires
hooks outside a call the same way. Behind that one call live:

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

import inspect
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import anyio
import pluggy
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload, credit_writes
from hook_specs.records import (
    STOPPED_EARLY,
    Attempt,
    Generation,
    IterationInfo,
    Message,
    ValidationResult,
    count_passed,
    failure_reasons,
)
from sampling_core.errors import PluginError
from sampling_core.hooks.faults import PluginFault, PluginTimeout, describe, log_fault, not_awaited
from sampling_core.hooks.table import HookTable, Route

logger = structlog.get_logger("samplehooks")

H = HookName
T = TypeVar("T")

Sent = tuple[list[Message], dict[str, Any]]
"""The messages and options a backend call sends, as ``generation_pre_call`` left them."""

_STOPS_SAMPLING = frozenset(HookName.per_call()) - {H.SAMPLING_LOOP_END}
"""Where ``StopSampling`` ends the call; anywhere else (the loop's end, the run hooks) it is
a fault like any other."""


class HookChannel:
    """Fires hooks through one :class:`~sampling_core.hooks.table.HookTable`: any hook, with
    one call (:meth:`fire`), and the faults it isolated (:attr:`faults`)."""

    __slots__ = ("_routes", "faults", "firing", "table")

    def __init__(self, table: HookTable) -> None:
        self.table = table
        self.faults: list[PluginFault] = []
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

        A direct route is delivered by its ``deliver`` (the hooks fired per attempt call it
        themselves, which saves a coroutine per event).
        """
        if route.direct:
            return route.deliver(self, fields)
        payload = route.build(fields)
        await self._deliver(route, payload)
        return payload

    async def _fire_then(self, route: Route, fields: dict[str, Any], then: Callable[[Any], T]) -> T:
        """:meth:`_fire`, then what ``then`` reads from the payload (a route that is not
        direct, for the methods that return at once on a direct one)."""
        return then(await self._fire(route, fields))

    async def _deliver(self, route: Route, payload: HookPayload) -> None:
        """Deliver to every implementation, awaiting async ones, with monitors around the
        inline ones and background ones queued after them."""
        hook, table, writable = route.hook, self.table, route.writable
        monitored = self._before(route, payload) if table.monitors else None
        try:
            for impl in route.inline:
                if writable:
                    credit_writes(payload, impl.plugin_name)
                try:
                    out = impl.function(payload) if impl.takes_payload else impl.function()
                    if impl.is_async:
                        await self._awaited(out)
                    elif out is not None and inspect.isawaitable(out):
                        raise not_awaited(out)
                except Exception as exc:
                    self.fault(hook, impl.plugin_name, exc, writable)
            if writable and route.inline:
                credit_writes(payload, None)
        except BaseException as exc:
            if monitored is not None:
                self._after(hook, monitored, _outcome_of(exc))
            raise
        if monitored is not None:
            self._after(hook, monitored, _outcome_of(None))
        if route.background and table.delivery is not None:
            for impl in route.background:
                await table.delivery.put(hook, impl, payload)

    async def _awaited(self, pending: Any) -> None:
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
        impls = [impl.source for impl in reversed((*route.inline, *route.background))]
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
        self.faults.append(PluginFault(plugin_name, hook.value, exc))
        log_fault(plugin_name, hook.value, exc)


class CallHooks(HookChannel):
    """One ``sample()`` call's hook channel: :meth:`fire` with the call's identity, and a
    method for each hook whose delivery or reading-back the engine needs done its way."""

    __slots__ = ("_delivery_lock", "_id", "_prompt_key", "_strategy")

    def __init__(
        self,
        table: HookTable,
        sampling_id: str,
        strategy_name: str,
        prompt_key: str | None = None,
    ) -> None:
        super().__init__(table)
        self._id = sampling_id
        self._strategy = strategy_name
        self._prompt_key = prompt_key
        self._delivery_lock: anyio.Lock | None = None

    async def fire(self, hook: HookName, fields: dict[str, Any]) -> Any:
        """:meth:`HookChannel.fire`, the call's ``sampling_id``, ``strategy_name`` and
        ``prompt_key`` added."""
        if not getattr(self.firing, hook):
            return None
        fields["sampling_id"], fields["strategy_name"] = self._id, self._strategy
        fields["prompt_key"] = self._prompt_key
        route = getattr(self._routes, hook)
        if route.direct:
            return route.deliver(self, fields)
        return await self._fire(route, fields)

    # -- one method per hook, in the order they fire -----------------------------------
    #
    # The loop calls each only when its hook fires (``firing``). On a direct route the
    # plugins are called before the method returns, and it returns its answer itself; else
    # it returns an awaitable of the answer (``None`` when there is none to give). An
    # attempt's events thus create no coroutine when no implementation is async.
    # Each builds its payload's fields in one dict, in the order the payload declares them.

    def pre_call(
        self,
        info: IterationInfo,
        messages: list[Message],
        options: dict[str, Any],
        retry: int,
        purpose: str = "sample",
    ) -> Sent | Awaitable[Sent]:
        """Fire ``generation_pre_call``; the messages and options to send."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "messages": list(messages),
            "options": dict(options),
            "retry": retry,
            "purpose": purpose,
        }
        route = self._routes.generation_pre_call
        if route.direct:
            payload = route.deliver(self, fields)
            return payload.messages, payload.options
        return self._fire_then(route, fields, _sent)

    def post_call(
        self, info: IterationInfo, generation: Generation, retry: int, purpose: str = "sample"
    ) -> Awaitable[object] | None:
        """Fire ``generation_post_call``."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "generation": generation,
            "latency_s": generation.latency_s,
            "retry": retry,
            "purpose": purpose,
        }
        route = self._routes.generation_post_call
        if route.direct:
            route.deliver(self, fields)
            return None
        return self._fire(route, fields)

    def chunk(
        self, info: IterationInfo, delta: str, text: str, index: int, retry: int
    ) -> Awaitable[object] | None:
        """Fire ``generation_chunk`` for one piece of a streamed generation."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "delta": delta,
            "text": text,
            "index": index,
            "retry": retry,
        }
        route = self._routes.generation_chunk
        if route.direct:
            route.deliver(self, fields)
            return None
        return self._fire(route, fields)

    async def error(
        self,
        info: IterationInfo,
        exc: Exception,
        latency_s: float,
        will_retry: bool,
        retry_in_s: float | None,
        retry: int,
        purpose: str = "sample",
    ) -> None:
        """Fire ``generation_error``; ``latency_s``: how long the failed call ran."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "exception": exc,
            "error_type": type(exc).__name__,
            "latency_s": latency_s,
            "will_retry": will_retry,
            "retry_in_s": retry_in_s,
            "retry": retry,
            "purpose": purpose,
        }
        await self._fire(self._routes.generation_error, fields)

    def validate(
        self,
        info: IterationInfo,
        messages: list[Message],
        generation: Generation,
        validations: tuple[ValidationResult, ...],
    ) -> tuple[ValidationResult, ...] | Awaitable[tuple[ValidationResult, ...]]:
        """Fire ``sampling_validate``; the verdicts the attempt is judged by."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "text": generation.text,
            "messages": list(messages),
            "generation": generation,
            "results": list(validations),
        }
        route = self._routes.sampling_validate
        if route.direct:
            payload = route.deliver(self, fields)
            results = payload.well_formed_results()
            return tuple(results) if results is not None else _verdicts(payload)
        return self._fire_then(route, fields, _verdicts)

    def iteration(
        self,
        info: IterationInfo,
        attempt: Attempt,
        shield: Callable[[int], AbstractContextManager[object]],
    ) -> Awaitable[None] | None:
        """Fire ``sampling_iteration`` for a recorded attempt.

        Events of one call are delivered one at a time, in ``sequence`` order, and shielded
        (``shield(subsample_index)``): the attempt is counted, so no cancellation may cut
        its delivery short. When no implementation is async nothing is awaited, so nothing
        can come between two events and there is nothing to shield.
        """
        validations = attempt.validations
        generation = attempt.generation
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": attempt.sequence,
            "generation": generation,
            "text": attempt.text,
            "validations": list(validations),
            "passed": attempt.passed,
            "valid_count": len(validations) if attempt.passed else count_passed(validations),
            "total_count": len(validations),
            "latency_s": generation.latency_s,
            "usage": generation.usage,
            "cached": generation.cached,
            "stopped_early": generation.finish_reason == STOPPED_EARLY,
        }
        route = self._routes.sampling_iteration
        if self.table.awaits_iteration:  # an implementation may suspend: one at a time
            return self._iteration_in_order(route, fields, shield(info.subsample_index))
        if route.direct:
            route.deliver(self, fields)
            return None
        return self._fire(route, fields)

    async def _iteration_in_order(
        self, route: Route, fields: dict[str, Any], shielded: AbstractContextManager[object]
    ) -> None:
        if self._delivery_lock is None:
            self._delivery_lock = anyio.Lock(fast_acquire=True)
        with shielded:
            async with self._delivery_lock:
                await self._fire(route, fields)

    def repair(
        self, info: IterationInfo, failed: Attempt, messages: list[Message]
    ) -> list[Message] | Awaitable[list[Message]]:
        """Fire ``sampling_repair``; the next attempt's messages."""
        validations = failed.validations
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": failed.sequence,
            "text": failed.text,
            "validations": list(validations),
            "failure_reasons": failure_reasons(validations),
            "next_attempt": failed.attempt + 1,
            "messages": list(messages),
        }
        route = self._routes.sampling_repair
        if route.direct:
            payload = route.deliver(self, fields)
            repaired = payload.messages
            return repaired if isinstance(repaired, list) else _repaired(payload)
        return self._fire_then(route, fields, _repaired)


def _sent(payload: Any) -> Sent:
    """What ``generation_pre_call`` left to send."""
    return payload.messages, payload.options


def _verdicts(payload: Any) -> tuple[ValidationResult, ...]:
    """The verdicts ``sampling_validate`` left: ``PluginError`` naming the plugin that
    wrote something other than a list of ``ValidationResult``."""
    results = payload.well_formed_results()
    if results is not None:
        return tuple(results)
    writer = payload.written_by("results") or "a plugin"
    raise PluginError(
        writer, H.SAMPLING_VALIDATE.value, "payload.results must be a list of ValidationResult"
    )


def _repaired(payload: Any) -> list[Message]:
    """The messages ``sampling_repair`` left: ``PluginError`` naming the plugin that wrote
    something other than a list."""
    repaired = payload.messages
    if not isinstance(repaired, list):
        writer = payload.written_by("messages") or "a plugin"
        raise PluginError(
            writer, H.SAMPLING_REPAIR.value, "payload.messages must be a list of messages"
        )
    return repaired


def _outcome_of(exc: BaseException | None) -> pluggy.Result[list[Any]]:
    """What a hook call came to, for monitors' ``after``: made with pluggy's public
    ``Result.from_call``."""

    def ended() -> list[Any]:
        if exc is not None:
            raise exc
        return []

    return pluggy.Result.from_call(ended)
