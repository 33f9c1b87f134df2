"""Hook dispatch: calling every implementation of a hook, in pluggy's order, with awaits.

pluggy's own call loop cannot await, so the engine calls the implementations pluggy
registered itself: same order (``tryfirst``, then the rest last-registered-first, then
``trylast``), same opt-in arguments, one at a time, each seeing the previous one's changes.
What happens when an implementation raises depends on the hook:

* ``StopSampling`` propagates (except from ``sampling_loop_end``, where the loop is over);
* in a hook whose payload plugins may change, any other exception fails closed as
  :class:`PluginError`;
* in an observe-only hook it is isolated: logged with the plugin's name and kept as a
  :class:`PluginFault`, unless the dispatcher is strict.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import structlog

from hook_specs.errors import StopSampling
from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from sampling_core.errors import PluginError

logger = structlog.get_logger("samplehooks")

_WRITABLE = frozenset(hook for hook in HookName if hook.may_change_payload)

Pending = Coroutine[Any, Any, None] | None
"""What a :data:`Caller` returns: the rest of the call to await, or ``None``."""
Caller = Callable[[HookPayload, list["PluginFault"]], Pending]
"""One hook's call (see :meth:`HookDispatcher.caller`)."""


@dataclass(frozen=True, slots=True)
class PluginFault:
    """A plugin's exception, isolated in an observe-only hook."""

    plugin_name: str
    hook: str
    exception: BaseException

    def __str__(self) -> str:
        return f"{self.plugin_name}, {self.hook}: {self.exception}"


@dataclass(frozen=True, slots=True)
class HookImplementation:
    """One plugin's implementation of one hook, ready to call."""

    plugin_name: str
    function: Callable[..., Any]
    takes_payload: bool
    is_async: bool
    order: int  # 0 trylast, 1 plain, 2 tryfirst: pluggy's grouping

    @classmethod
    def from_pluggy(cls, impl: Any) -> HookImplementation:
        """Wrap a ``pluggy.HookImpl``."""
        order = 2 if impl.tryfirst else 0 if impl.trylast else 1
        return cls(
            plugin_name=impl.plugin_name,
            function=impl.function,
            takes_payload="payload" in impl.argnames,
            is_async=inspect.iscoroutinefunction(impl.function),
            order=order,
        )


def call_order(registered: Iterable[HookImplementation]) -> tuple[HookImplementation, ...]:
    """pluggy's call order for implementations given in registration order."""
    ordered = sorted(registered, key=lambda impl: impl.order)  # stable: keeps registration order
    return tuple(reversed(ordered))


class HookDispatcher:
    """Calls the implementations of each hook; immutable once built."""

    __slots__ = ("_callers", "_impls", "_strict", "_timeout", "_trace", "registered")

    def __init__(
        self,
        registered: Mapping[HookName, Iterable[HookImplementation]],
        *,
        strict: bool = False,
        trace: bool = False,
        timeout: float | None = None,
    ) -> None:
        self.registered = {hook: tuple(impls) for hook, impls in registered.items()}
        self._impls = {hook: call_order(impls) for hook, impls in self.registered.items()}
        self._strict = strict
        self._trace = trace
        self._timeout = timeout
        self._callers: dict[HookName, Caller] = {
            hook: self._make_caller(hook, impls) for hook, impls in self._impls.items() if impls
        }

    def merged(self, extra: Mapping[HookName, Iterable[HookImplementation]]) -> HookDispatcher:
        """A dispatcher with ``extra`` implementations registered after these.

        As in pluggy, a later ``trylast`` implementation goes before the earlier ones in
        registration order (so it is called after them); the others go after.
        """
        combined = {}
        for hook in HookName.per_call():
            more = tuple(extra.get(hook, ()))
            late = tuple(impl for impl in more if impl.order == 0)
            rest = tuple(impl for impl in more if impl.order != 0)
            combined[hook] = late + self.registered.get(hook, ()) + rest
        return HookDispatcher(
            combined, strict=self._strict, trace=self._trace, timeout=self._timeout
        )

    async def call(self, hook: HookName, payload: HookPayload, faults: list[PluginFault]) -> None:
        """Call every implementation of ``hook`` with ``payload``.

        Isolated faults are appended to ``faults``.
        """
        caller = self._callers.get(hook)
        rest = None if caller is None else caller(payload, faults)
        if rest is not None:
            await rest

    def caller(self, hook: HookName) -> Caller | None:
        """``hook``'s :meth:`call` as far as it goes without awaiting, made once.

        ``caller(payload, faults)`` calls the implementations in order until one returns an
        awaitable (an ``async`` one, or a plain one returning an awaitable). ``None`` means
        every implementation has run and nothing was awaited; otherwise the coroutine
        returned must be awaited: it awaits that implementation and calls the rest. A lone
        plain implementation is called without going through the general loop. ``None``
        when no plugin implements ``hook`` (then build no payload).
        """
        return self._callers.get(hook)

    def _make_caller(self, hook: HookName, impls: tuple[HookImplementation, ...]) -> Caller:
        if len(impls) > 1 or impls[0].is_async or self._trace:

            def call_all(payload: HookPayload, faults: list[PluginFault]) -> Pending:
                return self._call_from(hook, impls, 0, payload, faults)

            return call_all
        impl = impls[0]
        function, name, takes_payload = impl.function, impl.plugin_name, impl.takes_payload
        writable = hook in _WRITABLE

        def call_one(payload: HookPayload, faults: list[PluginFault]) -> Pending:
            if writable:
                payload.__pydantic_private__["_active_plugin"] = name
            try:
                out = function(payload) if takes_payload else function()
            except Exception as exc:
                self._fault(hook, name, exc, writable, faults)
                return None
            if out is not None and inspect.isawaitable(out):
                return self._await_from(hook, impls, 0, out, payload, faults)
            if writable:  # a write made after the hook is nobody's
                payload.__pydantic_private__["_active_plugin"] = None
            return None

        return call_one

    def _call_from(
        self,
        hook: HookName,
        impls: tuple[HookImplementation, ...],
        start: int,
        payload: HookPayload,
        faults: list[PluginFault],
    ) -> Coroutine[Any, Any, None] | None:
        """Call ``impls[start:]`` until one returns an awaitable (see :meth:`caller`)."""
        writable = hook in _WRITABLE
        private = payload.__pydantic_private__ if writable else None
        for position in range(start, len(impls)):
            impl = impls[position]
            if self._trace:
                _trace_call(hook, impl.plugin_name, payload)
            if private is not None:
                private["_active_plugin"] = impl.plugin_name
            try:
                out = impl.function(payload) if impl.takes_payload else impl.function()
            except Exception as exc:
                self._fault(hook, impl.plugin_name, exc, writable, faults)
                continue
            if impl.is_async or (out is not None and inspect.isawaitable(out)):
                return self._await_from(hook, impls, position, out, payload, faults)
        if private is not None:  # a write made after the hook is nobody's
            private["_active_plugin"] = None
        return None

    async def _await_from(
        self,
        hook: HookName,
        impls: tuple[HookImplementation, ...],
        position: int,
        pending: Any,
        payload: HookPayload,
        faults: list[PluginFault],
    ) -> None:
        """Await implementation ``position`` (already called), then call the rest."""
        writable = hook in _WRITABLE
        try:
            if self._timeout is None:
                await pending
            else:
                await _within(self._timeout, pending)
        except Exception as exc:
            self._fault(hook, impls[position].plugin_name, exc, writable, faults)
        rest = self._call_from(hook, impls, position + 1, payload, faults)
        if rest is not None:
            await rest

    def _fault(
        self,
        hook: HookName,
        plugin_name: str,
        exc: Exception,
        writable: bool,
        faults: list[PluginFault],
    ) -> None:
        """Raise or isolate what an implementation raised, as the hook's rules say."""
        if isinstance(exc, StopSampling):
            if hook is not HookName.SAMPLING_LOOP_END:
                raise exc
        elif writable:
            raise PluginError(plugin_name, hook.value, _describe(exc)) from exc
        self._isolate(hook, plugin_name, exc, faults)

    def _isolate(
        self, hook: HookName, plugin_name: str, exc: Exception, faults: list[PluginFault]
    ) -> None:
        if self._strict:
            if isinstance(exc, PluginError):
                raise exc
            raise PluginError(plugin_name, hook.value, _describe(exc)) from exc
        faults.append(PluginFault(plugin_name, hook.value, exc))
        logger.warning(
            "plugin.error",
            plugin=plugin_name,
            hook=hook.value,
            error_type=type(exc).__name__,
            error=str(exc),
        )


class PluginTimeout(TimeoutError):
    """An async hook implementation ran longer than the dispatcher's timeout."""


async def _within(timeout: float, pending: Any) -> None:
    with anyio.move_on_after(timeout) as scope:
        await pending
    if scope.cancelled_caught:
        raise PluginTimeout(f"took longer than {timeout:g}s and was cancelled")


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _trace_call(hook: HookName, plugin_name: str, payload: HookPayload) -> None:
    where = [f"sampling_id={payload.sampling_id}"]
    for field in ("iteration", "subsample_index", "attempt", "sequence"):
        value = getattr(payload, field, None)
        if value is not None:
            where.append(f"{field}={value}")
    print(f"samplehooks: {hook.value} -> {plugin_name} ({' '.join(where)})", file=sys.stderr)
