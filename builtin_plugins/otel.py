"""OpenTelemetry spans for sampling calls, following the GenAI semantic conventions.

Needs the ``otel`` extra (``pip install 'samplehooks[otel]'``); the ``tracing`` plugin uses
this module when it can be imported. Use :class:`OtelPlugin` directly for spans without
structlog events.

Each ``sample()`` call becomes a tree of spans::

    invoke_workflow samplehooks        one per call (INTERNAL)
      samplehooks.attempt              one per attempt (INTERNAL)
        chat {model}                   one per backend call, retries included (CLIENT)

Spans are parented explicitly, never through the current span: attempts run in their own
tasks, and context variables do not cross tasks. Per-attempt state is keyed by
``(sampling_id, subsample_index, attempt)``. Attempts still in flight when the loop ends
never get their ``sampling_iteration`` event; their spans are ended at loop end, marked
``samplehooks.cancelled=true`` with an error status and ``error.type="cancelled"``.
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
of a call cut short at loop end, which no event measures, the time since this plugin's
``generation_pre_call``.
"""

from __future__ import annotations

import json
import threading
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from builtin_plugins.otel_metrics import GenAIMetrics
from hook_specs import (
    CallPayload,
    GenerationCancelledPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    Message,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    ValidationResult,
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

# Request options that map onto gen_ai.request.* attributes.
_REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}


@dataclass(slots=True)
class _Attempt:
    span: Span
    context: Context
    call: Span | None = None
    call_started: float = 0.0
    call_attributes: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class _Loop:
    span: Span
    context: Context
    attempts: dict[tuple[int, int], _Attempt] = field(default_factory=dict)
    provider_name: str | None = None  # the backend's, from sampling_loop_start


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
        self._loops: dict[str, _Loop] = {}
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
        return _Loop(span, trace.set_span_in_context(span))

    def _loop(self, payload: CallPayload) -> _Loop:
        loop = self._loops.get(payload.sampling_id)
        if loop is None:
            loop = self._new_loop(payload)
            with self._lock:
                self._loops[payload.sampling_id] = loop
        return loop

    def _provider(self, payload: CallPayload) -> str:
        loop = self._loops.get(payload.sampling_id)
        backend_says = loop.provider_name if loop is not None else None
        return self.provider_name or backend_says or "unknown"

    def _attempt(self, payload: Any) -> _Attempt:
        loop = self._loop(payload)
        key = (payload.subsample_index, payload.attempt)
        state = loop.attempts.get(key)
        if state is None:
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
            state = _Attempt(span, trace.set_span_in_context(span))
            loop.attempts[key] = state
        return state

    def _end_attempt(self, payload: Any) -> _Attempt | None:
        loop = self._loops.get(payload.sampling_id)
        if loop is None:
            return None
        return loop.attempts.pop((payload.subsample_index, payload.attempt), None)

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Open the call's span, as a child of the caller's current span."""
        loop = self._new_loop(payload)
        with self._lock:
            self._loops[payload.sampling_id] = loop
        loop.provider_name = payload.provider_name
        span = loop.span
        if span.is_recording():
            span.set_attribute("samplehooks.selection", payload.selection)
            span.set_attribute("samplehooks.requirement_count", len(payload.requirements))
            if payload.seed is not None:  # the base seed: each attempt's request has its own
                span.set_attribute("samplehooks.seed", payload.seed)
            if self.capture_content:
                span.set_attribute("gen_ai.input.messages", _messages_json(payload.messages))

    @hookimpl
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Open a backend-call span (and the attempt's span, on its first call)."""
        state = self._attempt(payload)
        if state.call is not None:  # a call that never reported back
            state.call.end()
        options = payload.options
        model = options.get("model")
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": str(options.get("provider") or self._provider(payload)),
            "samplehooks.retry": payload.retry,
        }
        if model:
            attributes["gen_ai.request.model"] = str(model)
        for option, attribute in _REQUEST_OPTIONS.items():
            value = options.get(option)
            if isinstance(value, int | float) and not isinstance(value, bool):
                attributes[attribute] = value
        stop = options.get("stop")
        if isinstance(stop, str):
            attributes["gen_ai.request.stop_sequences"] = [stop]
        elif isinstance(stop, list | tuple) and all(isinstance(s, str) for s in stop):
            attributes["gen_ai.request.stop_sequences"] = list(stop)
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _messages_json(payload.messages)
        state.call_attributes = {
            key: attributes[key]
            for key in ("gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model")
            if key in attributes
        }
        state.call_started = time.perf_counter()
        state.call = self.tracer.start_span(
            f"chat {model}" if model else "chat",
            context=state.context,
            kind=SpanKind.CLIENT,
            attributes=attributes,
        )

    @hookimpl
    def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
        """End the backend-call span with the response's model, finish reason and usage."""
        state = self._attempt(payload)
        span, state.call = state.call, None
        if span is None:
            return
        generation = payload.generation
        measured = dict(state.call_attributes)
        if generation.model:
            measured["gen_ai.response.model"] = generation.model
        self.metrics.record_call(
            measured,
            payload.latency_s,  # the backend's reported latency, else the engine's measure
            input_tokens=generation.usage.input_tokens,
            output_tokens=generation.usage.output_tokens,
        )
        if span.is_recording():
            if generation.model:
                span.set_attribute("gen_ai.response.model", generation.model)
            if generation.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [generation.finish_reason])
            span.set_attributes(_usage_attributes(generation.usage))
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.output.messages",
                    _messages_json(
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
            _record_exception(span, payload.exception)
            span.set_status(Status(StatusCode.ERROR, description))
            span.end()
        if not payload.will_retry:
            self._end_attempt(payload)
            state.span.set_attribute("error.type", payload.error_type)
            state.span.set_status(Status(StatusCode.ERROR, description))
            state.span.end()

    @hookimpl
    def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
        """End the backend-call span and its attempt's span as cancelled, with the reason."""
        state = self._end_attempt(payload)
        if state is None:
            return
        status = Status(StatusCode.ERROR, f"cancelled: {payload.reason}")
        if state.call is not None:
            self.metrics.record_call(state.call_attributes, payload.latency_s, error_type=CANCELLED)
        for span in (state.call, state.span):
            if span is None:
                continue
            span.set_attribute("samplehooks.cancelled", True)
            span.set_attribute("samplehooks.cancel_reason", payload.reason)
            span.set_attribute("error.type", CANCELLED)
            span.set_status(status)
            span.end()

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """End the attempt's span with its verdict, one ``gen_ai.evaluation.result`` event
        per requirement."""
        state = self._attempt(payload)
        self._end_attempt(payload)
        span = state.span
        if span.is_recording():
            for index, verdict in enumerate(payload.validations):
                span.add_event(EVALUATION_EVENT, self._evaluation(index, verdict))
            span.set_attribute("samplehooks.sequence", payload.sequence or 0)
            span.set_attribute("samplehooks.passed", payload.passed)
            span.set_attribute("samplehooks.valid_count", payload.valid_count)
            span.set_attribute("samplehooks.total_count", payload.total_count)
            span.set_attribute("samplehooks.latency_s", payload.latency_s)
            span.set_attributes(_usage_attributes(payload.usage))
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
        """End every span left open as cancelled, then the call's span with its outcome."""
        with self._lock:
            loop = self._loops.pop(payload.sampling_id, None)
        if loop is None:  # the start was never seen: still leave a span for the call
            loop = self._new_loop(payload)
        cancelled = Status(StatusCode.ERROR, "cancelled: the loop ended first")
        for state in loop.attempts.values():
            if state.call is not None:  # no event measured it: the time since our pre_call
                self.metrics.record_call(
                    state.call_attributes,
                    time.perf_counter() - state.call_started,
                    error_type=CANCELLED,
                )
            for span in (state.call, state.span):
                if span is None:
                    continue
                span.set_attribute("samplehooks.cancelled", True)
                span.set_attribute("error.type", CANCELLED)
                span.set_status(cancelled)
                span.end()
        loop.attempts.clear()
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
                    **_usage_attributes(payload.usage),
                }
            )
            if payload.picked is not None:
                span.set_attribute("samplehooks.picked", payload.picked)
            if payload.failure_reason is not None:
                span.set_attribute("samplehooks.failure_reason", payload.failure_reason)
            if self.capture_content and payload.text is not None:
                span.set_attribute(
                    "gen_ai.output.messages",
                    _messages_json([{"role": "assistant", "content": payload.text}]),
                )
        if payload.exception is not None:
            span.set_attribute("error.type", type(payload.exception).__name__)
            _record_exception(span, payload.exception)
            span.set_status(Status(StatusCode.ERROR, exception_text(payload.exception)))
        span.end()

    def _evaluation(self, index: int, verdict: ValidationResult) -> dict[str, Any]:
        """A requirement's verdict as the attributes of a ``gen_ai.evaluation.result`` event
        (the explanation, the check's reason, only with ``capture_content``)."""
        attributes: dict[str, Any] = {
            "gen_ai.evaluation.name": verdict.requirement or f"requirement {index + 1}",
            "gen_ai.evaluation.score.label": "pass" if verdict.passed else "fail",
        }
        score = verdict.score
        if isinstance(score, int | float) and not isinstance(score, bool):
            attributes["gen_ai.evaluation.score.value"] = float(score)
        if self.capture_content and verdict.reason:
            attributes["gen_ai.evaluation.explanation"] = verdict.reason
        return attributes

    def open_spans(self) -> int:
        """How many call spans are open now (calls started and not yet ended)."""
        return len(self._loops)


def _record_exception(span: Any, exc: BaseException) -> None:
    """``span.record_exception(exc)``, with the message made by ``exception_text`` (the SDK's
    own calls ``str(exc)``, which may raise for a backend's or a plugin's exception)."""
    kind = type(exc)
    module = kind.__module__
    span.add_event(
        "exception",
        {
            "exception.type": f"{module}.{kind.__qualname__}"
            if module and module != "builtins"
            else kind.__qualname__,
            "exception.message": exception_text(exc),
            "exception.stacktrace": "".join(traceback.format_exception(exc)),
            "exception.escaped": "False",
        },
    )


def _messages_json(messages: list[Message], finish_reason: str | None = None) -> str:
    """Chat messages in the GenAI conventions' shape (role + parts), as a JSON string."""
    out = []
    for message in messages:
        item: dict[str, Any] = {
            "role": message.get("role", "user"),
            "parts": [{"type": "text", "content": str(message.get("content", ""))}],
        }
        if finish_reason is not None:
            item["finish_reason"] = finish_reason
        out.append(item)
    return json.dumps(out, ensure_ascii=False)


def _usage_attributes(usage: Any) -> dict[str, int]:
    """The token counts as span attributes; an unknown count (``None``) is left out."""
    counts = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    return {name: count for name, count in counts.items() if count is not None}
