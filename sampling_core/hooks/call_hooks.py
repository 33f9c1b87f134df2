"""One ``sample()`` call's hook channel: the engine's way to fire each hook of an attempt.

:class:`CallHooks` is a :class:`~sampling_core.hooks.channel.HookChannel` that adds the
call's identity (``sampling_id``, ``strategy_name``, ``prompt_key``) to every payload, and
has a method for each hook whose delivery or reading-back the engine needs done its way
(``pre_call``, ``validate``, ``iteration``, ``repair``, ...). On a direct route (no
implementation to await) a method answers at once, with no coroutine made for the event;
else it returns an awaitable of its answer, which the loop awaits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

import anyio

from hook_specs.names import HookName
from hook_specs.records import (
    STOPPED_EARLY,
    Attempt,
    Generation,
    IterationInfo,
    Message,
    TokenLogprob,
    Usage,
    ValidationResult,
    count_passed,
    failure_reasons,
)
from sampling_core.errors import PluginError
from sampling_core.hooks.channel import HookChannel, Inner
from sampling_core.hooks.table import HookTable, Route

H = HookName
T = TypeVar("T")

Sent = tuple[list[Message], dict[str, Any]]
"""The messages and options a backend call sends, as ``generation_pre_call`` left them."""


class CallHooks(HookChannel):
    """One ``sample()`` call's hook channel: :meth:`fire` with the call's identity, and a
    method for each hook whose delivery or reading-back the engine needs done its way."""

    __slots__ = ("_ask_again", "_delivery_lock", "_id", "_prompt_key", "_strategy")

    def __init__(
        self,
        table: HookTable,
        sampling_id: str,
        strategy_name: str,
        prompt_key: str | None = None,
        ask_again: bool = False,
    ) -> None:
        """``ask_again``: the caller asks every backend call again (``generation_call``'s
        ``ask_again``: what replays earlier answers does not answer)."""
        super().__init__(table)
        self._id = sampling_id
        self._strategy = strategy_name
        self._prompt_key = prompt_key
        self._ask_again = ask_again
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

    async def _fire_then(self, route: Route, fields: dict[str, Any], then: Callable[[Any], T]) -> T:
        """:meth:`_fire`, then what ``then`` reads from the payload (a route that is not
        direct, for the methods that return at once on a direct one)."""
        return then(await self._fire(route, fields))

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
            messages, options = payload.messages, payload.options
            if type(options) is dict and _are_messages(messages):
                return messages, options
            return _sent(payload)
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
        self,
        info: IterationInfo,
        delta: str,
        text: str,
        index: int,
        retry: int,
        logprobs: tuple[TokenLogprob, ...] = (),
        answered_by: str | None = None,
    ) -> Awaitable[object] | None:
        """Fire ``generation_chunk`` for one piece of a streamed generation (``answered_by``:
        the plugin streaming it instead of the backend)."""
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
            "logprobs": logprobs,
            "answered_by": answered_by,
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

    def around_sampling(
        self, fields: dict[str, Any], inner: Inner[T], valid: Callable[[Any], bool]
    ) -> Awaitable[T]:
        """Fire ``sampling_call`` around ``inner`` (the call's subsamples and pick)."""
        fields["sampling_id"], fields["strategy_name"] = self._id, self._strategy
        fields["prompt_key"] = self._prompt_key
        return self.around(self._routes.sampling_call, fields, inner, valid)

    def around_generation(
        self,
        info: IterationInfo,
        request: Any,
        backend: Any,
        prefix_checks: frozenset[Any],
        streamed: bool,
        retry: int,
        purpose: str,
        inner: Inner[Generation],
    ) -> Awaitable[Generation]:
        """Fire ``generation_call`` around ``inner`` (the backend call, or the answer of the
        plain implementation that answered); the generation, as the wrappers left it.
        ``request`` is the ``GenerationRequest`` sent to ``backend`` (its fields are the
        payload's); ``prefix_checks`` the requirements whose prefix checks judge the call as
        it streams."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "messages": request.messages,
            "options": request.options,
            "streamed": streamed,
            "retry": retry,
            "purpose": purpose,
            "json_schema": request.json_schema,
            "backend": backend,
            "prefix_checks": prefix_checks,
            "ask_again": self._ask_again,
        }
        return self.around(self._routes.generation_call, fields, inner, _is_generation)

    def cancelled(
        self,
        info: IterationInfo,
        reason: str,
        text: str | None,
        usage: Usage,
        latency_s: float,
        retry: int,
        purpose: str = "sample",
        answered_by: str | None = None,
        backend_called: bool = True,
    ) -> Awaitable[object] | None:
        """Fire ``generation_cancelled`` for a backend call that began and was cancelled
        (``answered_by``: the plugin that was answering instead of the backend;
        ``backend_called``: whether the backend itself had been asked)."""
        fields = {
            "sampling_id": self._id,
            "strategy_name": self._strategy,
            "prompt_key": self._prompt_key,
            "subsample_index": info.subsample_index,
            "attempt": info.attempt,
            "iteration": info.iteration,
            "sequence": None,
            "reason": reason,
            "text": text,
            "usage": usage,
            "latency_s": latency_s,
            "retry": retry,
            "purpose": purpose,
            "answered_by": answered_by,
            "backend_called": backend_called,
        }
        route = self._routes.generation_cancelled
        if route.direct:
            route.deliver(self, fields)
            return None
        return self._fire(route, fields)

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
            "provenance": attempt.provenance,
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
            return repaired if _are_messages(repaired) else _repaired(payload)
        return self._fire_then(route, fields, _repaired)


def _is_generation(outcome: object) -> bool:
    return isinstance(outcome, Generation)


def _are_messages(value: object) -> bool:
    """Whether ``value`` is what a backend is sent as messages: a list of dicts."""
    if not isinstance(value, list):
        return False
    for message in value:  # noqa: SIM110 - a loop, not all(): no generator per attempt
        if not isinstance(message, dict):
            return False
    return True


def _sent(payload: Any) -> Sent:
    """What ``generation_pre_call`` left to send: ``PluginError`` naming the plugin that
    wrote something other than a list of messages (dicts) or a dict of options."""
    messages, options = payload.messages, payload.options
    for field, ok, what in (
        ("messages", _are_messages(messages), "a list of messages (dicts)"),
        ("options", isinstance(options, dict), "a dict of options"),
    ):
        if not ok:
            writer = payload.written_by(field) or "a plugin"
            raise PluginError(
                writer, H.GENERATION_PRE_CALL.value, f"payload.{field} must be {what}"
            )
    return messages, options


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
    something other than a list of messages (dicts)."""
    repaired = payload.messages
    if not _are_messages(repaired):
        writer = payload.written_by("messages") or "a plugin"
        raise PluginError(
            writer, H.SAMPLING_REPAIR.value, "payload.messages must be a list of messages (dicts)"
        )
    return repaired
