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
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import anyio
import pluggy
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from hook_specs.records import Attempt, Generation, IterationInfo, Message, ValidationResult
from sampling_core.errors import PluginError
from sampling_core.hooks.faults import PluginFault, PluginTimeout, describe, log_fault, not_awaited
from sampling_core.hooks.table import HookTable, Route

logger = structlog.get_logger("samplehooks")

H = HookName

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
        if not getattr(self.firing, hook.value):
            return None
        return await self._fire(getattr(self._routes, hook.value), fields)

    # -- behind every hook ---------------------------------------------------------------

    async def _fire(self, route: Route, fields: dict[str, Any]) -> Any:
        """Build the hook's payload, deliver it, and return it (as plugins left it).

        The hooks fired per attempt call :meth:`_fire_now` themselves for a direct route,
        which saves a coroutine per hook.
        """
        if route.direct:
            return self._fire_now(route, fields)
        payload = route.build(fields)
        await self._deliver(route, payload)
        return payload

    def _fire_now(self, route: Route, fields: dict[str, Any]) -> Any:
        """:meth:`_fire` for a direct route (every implementation a plain function, no
        monitor, no background observer): they are called right here, in a loop nothing
        can suspend."""
        payload = route.build(fields)
        writable = route.writable
        for impl in route.inline:
            if writable:
                payload.track_writes(impl.plugin_name)
            try:
                out = impl.function(payload) if impl.takes_payload else impl.function()
                if out is not None and inspect.isawaitable(out):
                    raise not_awaited(out)
            except Exception as exc:
                self._fault(route.hook, impl.plugin_name, exc, writable)
        if writable:  # a write made after the hook is nobody's
            payload.track_writes(None)
        return payload

    async def _deliver(self, route: Route, payload: HookPayload) -> None:
        """Deliver to every implementation, awaiting async ones, with monitors around the
        inline ones and background ones queued after them."""
        hook, table, writable = route.hook, self.table, route.writable
        monitored = self._before(route, payload) if table.monitors else None
        try:
            for impl in route.inline:
                if writable:
                    payload.track_writes(impl.plugin_name)
                try:
                    out = impl.function(payload) if impl.takes_payload else impl.function()
                    if impl.is_async:
                        await self._awaited(out)
                    elif out is not None and inspect.isawaitable(out):
                        raise not_awaited(out)
                except Exception as exc:
                    self._fault(hook, impl.plugin_name, exc, writable)
            if writable and route.inline:
                payload.track_writes(None)
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

    def _fault(self, hook: HookName, plugin_name: str, exc: Exception, writable: bool) -> None:
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
        if not getattr(self.firing, hook.value):
            return None
        fields["sampling_id"], fields["strategy_name"] = self._id, self._strategy
        fields["prompt_key"] = self._prompt_key
        return await self._fire(getattr(self._routes, hook.value), fields)

    # -- one method per hook, in the order they fire -----------------------------------

    async def pre_call(
        self,
        info: IterationInfo,
        messages: list[Message],
        options: dict[str, Any],
        retry: int,
        purpose: str = "sample",
    ) -> tuple[list[Message], dict[str, Any]]:
        """Fire ``generation_pre_call``; the messages and options to send."""
        if not self.firing.generation_pre_call:
            return messages, options
        fields = self._attempt_fields(info, None)
        fields["messages"] = list(messages)
        fields["options"] = dict(options)
        fields["retry"] = retry
        fields["purpose"] = purpose
        route = self._routes.generation_pre_call
        payload = self._fire_now(route, fields) if route.direct else await self._fire(route, fields)
        return payload.messages, payload.options

    async def post_call(
        self, info: IterationInfo, generation: Generation, retry: int, purpose: str = "sample"
    ) -> None:
        """Fire ``generation_post_call``."""
        if self.firing.generation_post_call:
            fields = self._attempt_fields(info, None)
            fields["generation"] = generation
            fields["latency_s"] = generation.latency_s
            fields["retry"] = retry
            fields["purpose"] = purpose
            route = self._routes.generation_post_call
            if route.direct:
                self._fire_now(route, fields)
            else:
                await self._fire(route, fields)

    async def chunk(
        self, info: IterationInfo, delta: str, text: str, index: int, retry: int
    ) -> None:
        """Fire ``generation_chunk`` for one piece of a streamed generation."""
        if self.firing.generation_chunk:
            fields = self._attempt_fields(info, None)
            fields["delta"] = delta
            fields["text"] = text
            fields["index"] = index
            fields["retry"] = retry
            route = self._routes.generation_chunk
            if route.direct:
                self._fire_now(route, fields)
            else:
                await self._fire(route, fields)

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
        if self.firing.generation_error:
            fields = self._attempt_fields(info, None)
            fields["exception"] = exc
            fields["error_type"] = type(exc).__name__
            fields["latency_s"] = latency_s
            fields["will_retry"] = will_retry
            fields["retry_in_s"] = retry_in_s
            fields["retry"] = retry
            fields["purpose"] = purpose
            await self._fire(self._routes.generation_error, fields)

    async def validate(
        self,
        info: IterationInfo,
        messages: list[Message],
        generation: Generation,
        validations: tuple[ValidationResult, ...],
    ) -> tuple[ValidationResult, ...]:
        """Fire ``sampling_validate``; the verdicts the attempt is judged by."""
        if not self.firing.sampling_validate:
            return validations
        fields = self._attempt_fields(info, None)
        fields["text"] = generation.text
        fields["messages"] = list(messages)
        fields["generation"] = generation
        fields["results"] = list(validations)
        route = self._routes.sampling_validate
        payload = self._fire_now(route, fields) if route.direct else await self._fire(route, fields)
        results = payload.well_formed_results()
        if results is None:
            writer = payload.written_by("results") or "a plugin"
            raise PluginError(
                writer,
                H.SAMPLING_VALIDATE.value,
                "payload.results must be a list of ValidationResult",
            )
        return tuple(results)

    async def iteration(
        self,
        info: IterationInfo,
        attempt: Attempt,
        shield: Callable[[], AbstractContextManager[object]],
    ) -> None:
        """Fire ``sampling_iteration`` for a recorded attempt.

        Events of one call are delivered one at a time, in ``sequence`` order, and shielded
        (``shield()``): the attempt is counted, so no cancellation may cut its delivery
        short. When no implementation is async nothing is awaited, so nothing can come
        between two events and there is nothing to shield.
        """
        if not self.firing.sampling_iteration:
            return
        validations = attempt.validations
        generation = attempt.generation
        fields = self._attempt_fields(info, attempt.sequence)
        fields["generation"] = generation
        fields["text"] = attempt.text
        fields["validations"] = list(validations)
        fields["passed"] = attempt.passed
        fields["valid_count"] = attempt.valid_count
        fields["total_count"] = len(validations)
        fields["latency_s"] = generation.latency_s
        fields["usage"] = generation.usage
        fields["cached"] = generation.cached
        fields["stopped_early"] = attempt.stopped_early
        route = self._routes.sampling_iteration
        if not self.table.awaits_iteration and not (
            self._delivery_lock is not None and self._delivery_lock.locked()
        ):
            if route.direct:
                self._fire_now(route, fields)
            else:
                await self._fire(route, fields)
            return
        if self._delivery_lock is None:
            self._delivery_lock = anyio.Lock(fast_acquire=True)
        with shield():
            async with self._delivery_lock:
                await self._fire(route, fields)

    async def repair(
        self, info: IterationInfo, failed: Attempt, messages: list[Message]
    ) -> list[Message]:
        """Fire ``sampling_repair``; the next attempt's messages."""
        if not self.firing.sampling_repair:
            return messages
        fields = self._attempt_fields(info, failed.sequence)
        fields["text"] = failed.text
        fields["validations"] = list(failed.validations)
        fields["failure_reasons"] = failed.failure_reasons
        fields["next_attempt"] = failed.attempt + 1
        fields["messages"] = list(messages)
        route = self._routes.sampling_repair
        payload = self._fire_now(route, fields) if route.direct else await self._fire(route, fields)
        repaired = payload.messages
        if not isinstance(repaired, list):
            writer = payload.written_by("messages") or "a plugin"
            raise PluginError(
                writer, H.SAMPLING_REPAIR.value, "payload.messages must be a list of messages"
            )
        return repaired

    def _attempt_fields(self, info: IterationInfo, sequence: int | None) -> dict[str, Any]:
        """The fields every attempt's payload starts with (the hook's own are added to it)."""
        return {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": sequence,
        }


def _outcome_of(exc: BaseException | None) -> pluggy.Result[list[Any]]:
    """What a hook call came to, for monitors' ``after``: made with pluggy's public
    ``Result.from_call``."""

    def ended() -> list[Any]:
        if exc is not None:
            raise exc
        return []

    return pluggy.Result.from_call(ended)
