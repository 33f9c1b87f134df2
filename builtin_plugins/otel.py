"""OpenTelemetry spans for sampling calls, following the GenAI semantic conventions.

Needs the ``otel`` extra (``pip install 'samplehooks[otel]'``); the ``tracing`` plugin uses
this module when it can be imported. Use :class:`OtelPlugin` directly for spans without
structlog events.

Each ``sample()`` call becomes a tree of spans::

    invoke_workflow samplehooks        one per call (INTERNAL)
      samplehooks.attempt              one per attempt (INTERNAL)
        chat {model}                   one per backend call, retries included (CLIENT)

The call's span is opened at ``sampling_loop_start`` and made the current span, in a
``sampling_call`` wrapper, while the call's work runs; each backend-call span is opened
in a ``generation_call`` wrapper, current while the backend works (so spans an
instrumented HTTP client makes nest under it). What a call and an attempt have open is
carried in context variables (each subsample runs in a task of its own, which inherits
the call's), never in tables keyed by ids. A backend call cut short is ended by
``generation_cancelled`` with an error status, ``error.type="cancelled"`` and
``samplehooks.cancel_reason`` (``sibling_succeeded``, ``stopped_by_plugin``, ...), and so
is its attempt's span; an attempt cancelled after its backend call answered (while its
checks ran) is ended when the call's work ends, marked ``samplehooks.cancelled=true``.
Backend failures set ``error.type`` to the exception's class name. Inside a batch run the
call's span carries ``samplehooks.prompt_key``, the dataset prompt's key. Each attempt's span
gets one ``gen_ai.evaluation.result`` event per requirement verdict (:data:`EVALUATION_EVENT`).

The call's span follows the conventions' *invoke workflow* span: ``gen_ai.operation.name``
``invoke_workflow``, ``gen_ai.workflow.name`` ``samplehooks``, named
``invoke_workflow samplehooks``, kind INTERNAL. With a ``meter_provider`` (or a global
one), every backend call is also measured by the GenAI client metrics
``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``
(:mod:`builtin_plugins.otel_metrics`). The duration of a call that returned is
``generation_post_call``'s ``latency_s`` (the backend's reported latency when it gives one,
else the engine's measure of the call); of a failed call, ``generation_error``'s
``latency_s`` (the engine's measure, from just before the backend call to its exception);
of a call cut short, ``generation_cancelled``'s ``latency_s``.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from builtin_plugins.otel_attributes import (
    evaluation_attributes,
    messages_json,
    record_exception,
    request_attributes,
    usage_attributes,
)
from builtin_plugins.otel_metrics import GenAIMetrics
from hook_specs import (
    CallPayload,
    Generation,
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationErrorPayload,
    GenerationPreCallPayload,
    SamplingCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    hookimpl,
)
from sampling_core.errors import exception_text

__all__ = ["CANCELLED", "EVALUATION_EVENT", "OtelPlugin"]

CANCELLED = "cancelled"
"""The ``error.type`` of an attempt (or backend call) cut short because the loop ended."""

EVALUATION_EVENT = "gen_ai.evaluation.result"
"""The GenAI semantic conventions' event for one evaluation: one per requirement verdict, on
the attempt's span (attributes ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.label``
``pass`` / ``fail``, ``gen_ai.evaluation.score.value`` when the check gave a score, and
``gen_ai.evaluation.explanation`` with ``capture_content``)."""

_SCOPE = "samplehooks"


@dataclass(eq=False, slots=True)
class _Attempt:
    """An attempt's span, and its backend call's while one is open (``call``)."""

    sampling_id: str
    iteration: int
    span: Span
    context: Context
    call: Span | None = None
    call_attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False, slots=True)
class _Loop:
    """A call's span, and the attempts it has open."""

    sampling_id: str
    span: Span
    context: Context
    provider_name: str | None = None  # the backend's, from sampling_loop_start
    open: set[_Attempt] = field(default_factory=set)
    token: Token[Any] | None = None


class OtelPlugin:
    """Emits OpenTelemetry spans for every ``sample()`` call.

    ``tracer_provider``: where spans go (default: the global provider, so spans are
    no-ops until the application installs an SDK provider). ``gen_ai.provider.name`` of
    backend-call spans is ``options["provider"]``, else ``provider_name`` when given, else
    the backend's own ``provider_name`` (``openai``, ``llama.cpp``, ...), else ``unknown``;
    ``capture_content`` adds ``gen_ai.input.messages`` / ``gen_ai.output.messages``.
    ``meter_provider``: where the GenAI client metrics go (default: the global provider).
    """

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        provider_name: str | None = None,
        capture_content: bool = False,
        meter_provider: Any = None,
    ) -> None:
        try:
            version = metadata.version("samplehooks")
        except metadata.PackageNotFoundError:  # pragma: no cover - running from a checkout
            version = None
        self.tracer = trace.get_tracer(_SCOPE, version, tracer_provider=tracer_provider)
        self.provider_name = provider_name
        self.capture_content = capture_content
        self.metrics = GenAIMetrics(meter_provider)
        # What the running call and attempt have open, per task (each plugin its own).
        self._current_loop: ContextVar[_Loop | None] = ContextVar("otel_loop", default=None)
        self._current_attempt: ContextVar[_Attempt | None] = ContextVar(
            "otel_attempt", default=None
        )
        self._open: set[_Loop] = set()
        self._lock = threading.Lock()

    # -- state ----------------------------------------------------------------------------

    def _new_loop(self, payload: CallPayload) -> _Loop:
        """A span for the call, a child of the caller's current span."""
        attributes = {
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": "samplehooks",
            "samplehooks.sampling_id": payload.sampling_id,
            "samplehooks.strategy_name": payload.strategy_name,
        }
        if payload.prompt_key is not None:  # inside a batch run: the dataset prompt's key
            attributes["samplehooks.prompt_key"] = payload.prompt_key
        span = self.tracer.start_span(
            "invoke_workflow samplehooks", kind=SpanKind.INTERNAL, attributes=attributes
        )
        loop = _Loop(payload.sampling_id, span, trace.set_span_in_context(span))
        loop.token = self._current_loop.set(loop)
        with self._lock:
            self._open.add(loop)
        return loop

    def _loop(self, payload: CallPayload) -> _Loop:
        """The running call's state (made now if its start was not seen)."""
        loop = self._current_loop.get()
        if loop is None or loop.sampling_id != payload.sampling_id:
            loop = self._new_loop(payload)
        return loop

    def _attempt(self, payload: Any) -> _Attempt:
        """The running attempt's state (its span is opened by its first event)."""
        state = self._current_attempt.get()
        if (
            state is not None
            and state.sampling_id == payload.sampling_id
            and state.iteration == payload.iteration
        ):
            return state
        loop = self._loop(payload)
        span = self.tracer.start_span(
            "samplehooks.attempt",
            context=loop.context,
            kind=SpanKind.INTERNAL,
            attributes={
                "samplehooks.sampling_id": payload.sampling_id,
                "samplehooks.subsample_index": payload.subsample_index,
                "samplehooks.attempt": payload.attempt,
                "samplehooks.iteration": payload.iteration,
            },
        )
        state = _Attempt(
            payload.sampling_id, payload.iteration, span, trace.set_span_in_context(span)
        )
        loop.open.add(state)
        self._current_attempt.set(state)
        return state

    def _ended(self, state: _Attempt) -> None:
        """``state``'s attempt span is ended: forget it."""
        loop = self._current_loop.get()
        if loop is not None:
            loop.open.discard(state)
        if self._current_attempt.get() is state:
            self._current_attempt.set(None)

    def _call_attributes(self, payload: GenerationCallPayload) -> dict[str, Any]:
        loop = self._current_loop.get()
        backend_says = loop.provider_name if loop is not None else None
        messages = payload.messages if self.capture_content else None
        provider = self.provider_name or backend_says or "unknown"
        return request_attributes(payload.options, payload.retry, provider, messages)

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Open the call's span, as a child of the caller's current span."""
        loop = self._new_loop(payload)
        loop.provider_name = payload.provider_name
        span = loop.span
        if span.is_recording():
            span.set_attribute("samplehooks.selection", payload.selection)
            span.set_attribute("samplehooks.requirement_count", len(payload.requirements))
            if payload.seed is not None:  # the base seed: each attempt's request has its own
                span.set_attribute("samplehooks.seed", payload.seed)
            if self.capture_content:
                span.set_attribute("gen_ai.input.messages", messages_json(payload.messages))

    @hookimpl(wrapper=True)
    def sampling_call(self, payload: SamplingCallPayload) -> Any:
        """The call's span is the current span while its work runs; attempts the work left
        open (cancelled after their backend call answered) are ended as cancelled."""
        loop = self._loop(payload)
        try:
            with trace.use_span(
                loop.span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                return (yield)
        finally:
            for state in list(loop.open):
                self._end_cancelled(state, None, "the loop ended first")
            loop.open.clear()

    @hookimpl
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Open the attempt's span, on its first backend call."""
        self._attempt(payload)

    @hookimpl(wrapper=True)
    def generation_call(self, payload: GenerationCallPayload) -> Any:
        """A backend-call span around the call, current while the backend works; a call
        that raised or was cancelled is ended by ``generation_error`` or
        ``generation_cancelled``, which know whether it is retried and why it was cut."""
        state = self._attempt(payload)
        attributes = self._call_attributes(payload)
        model = attributes.get("gen_ai.request.model")
        span = self.tracer.start_span(
            f"chat {model}" if model else "chat",
            context=state.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )
        state.call, state.call_attributes = (
            span,
            {
                key: attributes[key]
                for key in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
                if key in attributes
            },
        )
        with trace.use_span(
            span, end_on_exit=False, record_exception=False, set_status_on_exception=False
        ):
            generation = yield
        state.call = None
        self._returned(span, state.call_attributes, generation)
        return generation

    def _returned(self, span: Span, attributes: dict[str, Any], generation: Generation) -> None:
        """End a backend-call span with the response's model, finish reason and usage (an
        answer the cache or another plugin gave is no backend call: not measured)."""
        if generation.answered_by is None:
            measured = dict(attributes)
            if generation.model:
                measured["gen_ai.response.model"] = generation.model
            self.metrics.record_call(
                measured,
                generation.latency_s,  # the backend's reported latency, else the engine's
                input_tokens=generation.usage.input_tokens,
                output_tokens=generation.usage.output_tokens,
            )
        if span.is_recording():
            if generation.model:
                span.set_attribute("gen_ai.response.model", generation.model)
            if generation.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [generation.finish_reason])
            span.set_attributes(usage_attributes(generation.usage))
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.output.messages",
                    messages_json(
                        [{"role": "assistant", "content": generation.text}],
                        finish_reason=generation.finish_reason,
                    ),
                )
        span.end()

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """End the backend-call span as failed; a call not retried also ends its attempt."""
        state = self._attempt(payload)
        span, state.call = state.call, None
        description = f"{payload.error_type}: {exception_text(payload.exception)}"
        if span is not None:
            self.metrics.record_call(
                state.call_attributes,
                payload.latency_s,  # the engine's measure of the failed call
                error_type=payload.error_type,
            )
            span.set_attribute("error.type", payload.error_type)
            span.set_attribute("samplehooks.will_retry", payload.will_retry)
            record_exception(span, payload.exception)
            span.set_status(Status(StatusCode.ERROR, description))
            span.end()
        if not payload.will_retry:
            self._ended(state)
            state.span.set_attribute("error.type", payload.error_type)
            state.span.set_status(Status(StatusCode.ERROR, description))
            state.span.end()

    @hookimpl
    def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
        """End the backend-call span and its attempt's span as cancelled, with the reason
        (one cancelled before the backend was asked, a plugin's answer cancelled midway
        among them, is no backend call: not measured)."""
        state = self._current_attempt.get()
        if state is None or state.iteration != payload.iteration:
            return  # no span of ours is open for it
        measured = payload.latency_s if payload.backend_called else None
        self._end_cancelled(state, measured, payload.reason)

    def _end_cancelled(self, state: _Attempt, latency_s: float | None, reason: str) -> None:
        """End ``state``'s spans as cancelled; ``latency_s``: the backend call's, measured
        (``None``: not measured)."""
        self._ended(state)
        if state.call is not None and latency_s is not None:
            self.metrics.record_call(state.call_attributes, latency_s, error_type=CANCELLED)
        status = Status(StatusCode.ERROR, f"cancelled: {reason}")
        for span in (state.call, state.span):
            if span is None:
                continue
            span.set_attribute("samplehooks.cancelled", True)
            span.set_attribute("samplehooks.cancel_reason", reason)
            span.set_attribute("error.type", CANCELLED)
            span.set_status(status)
            span.end()
        state.call = None

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """End the attempt's span with its verdict, one ``gen_ai.evaluation.result`` event
        per requirement."""
        state = self._attempt(payload)
        self._ended(state)
        span = state.span
        if span.is_recording():
            for index, verdict in enumerate(payload.validations):
                span.add_event(
                    EVALUATION_EVENT, evaluation_attributes(index, verdict, self.capture_content)
                )
            span.set_attribute("samplehooks.sequence", payload.sequence or 0)
            span.set_attribute("samplehooks.passed", payload.passed)
            span.set_attribute("samplehooks.valid_count", payload.valid_count)
            span.set_attribute("samplehooks.total_count", payload.total_count)
            span.set_attribute("samplehooks.latency_s", payload.latency_s)
            span.set_attributes(usage_attributes(payload.usage))
        span.end()

    @hookimpl
    def sampling_repair(self, payload: SamplingRepairPayload) -> None:
        """Record the repair as an event on the call's span."""
        span = self._loop(payload).span
        if span.is_recording():
            span.add_event(
                "samplehooks.repair",
                {
                    "samplehooks.subsample_index": payload.subsample_index,
                    "samplehooks.attempt": payload.attempt,
                    "samplehooks.next_attempt": payload.next_attempt,
                    "samplehooks.failed_checks": len(payload.failure_reasons),
                },
            )

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """End the call's span with its outcome (and any attempt left open, as cancelled)."""
        loop = self._current_loop.get()
        if loop is None or loop.sampling_id != payload.sampling_id:
            loop = self._new_loop(payload)  # the start was never seen: still leave a span
        for state in list(loop.open):
            self._end_cancelled(state, None, "the loop ended first")
        if loop.token is not None:
            try:
                self._current_loop.reset(loop.token)
            except ValueError:  # set in another context: nothing of ours to restore there
                self._current_loop.set(None)
        with self._lock:
            self._open.discard(loop)
        span = loop.span
        if span.is_recording():
            span.set_attributes(
                {
                    "samplehooks.success": payload.success,
                    "samplehooks.stop_reason": payload.stop_reason,
                    "samplehooks.iterations_used": payload.iterations_used,
                    "samplehooks.cancelled_attempts": payload.cancelled,
                    "samplehooks.error_count": payload.error_count,
                    "samplehooks.loop_budget": payload.loop_budget,
                    "samplehooks.concurrency_budget": payload.concurrency_budget,
                    **usage_attributes(payload.usage),
                }
            )
            if payload.picked is not None:
                span.set_attribute("samplehooks.picked", payload.picked)
            if payload.failure_reason is not None:
                span.set_attribute("samplehooks.failure_reason", payload.failure_reason)
            if self.capture_content and payload.text is not None:
                span.set_attribute(
                    "gen_ai.output.messages",
                    messages_json([{"role": "assistant", "content": payload.text}]),
                )
        if payload.exception is not None:
            span.set_attribute("error.type", type(payload.exception).__name__)
            record_exception(span, payload.exception)
            span.set_status(Status(StatusCode.ERROR, exception_text(payload.exception)))
        span.end()

    def open_spans(self) -> int:
        """How many call spans are open now (calls started and not yet ended)."""
        return len(self._open)
