"""The attributes of the OpenTelemetry plugin's spans, following the GenAI semantic
conventions: a backend call's request, a verdict's evaluation event, token counts, chat
messages, an exception (internal to :mod:`builtin_plugins.otel`)."""

from __future__ import annotations

import json
import traceback
from typing import Any

from hook_specs import Message, ValidationResult
from sampling_core.errors import exception_text

_REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
"""Request options that map onto ``gen_ai.request.*`` attributes."""


def request_attributes(
    options: dict[str, Any], retry: int, provider: str, messages: list[Message] | None
) -> dict[str, Any]:
    """A backend call's span attributes, from the options it sends (``messages`` given:
    with content captured)."""
    model = options.get("model")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": str(options.get("provider") or provider),
        "samplehooks.retry": retry,
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
    if messages is not None:
        attributes["gen_ai.input.messages"] = messages_json(messages)
    return attributes


def evaluation_attributes(
    index: int, verdict: ValidationResult, capture_content: bool
) -> dict[str, Any]:
    """A requirement's verdict as the attributes of a ``gen_ai.evaluation.result`` event
    (the explanation, the check's reason, only with ``capture_content``)."""
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": verdict.requirement or f"requirement {index + 1}",
        "gen_ai.evaluation.score.label": "pass" if verdict.passed else "fail",
    }
    score = verdict.score
    if isinstance(score, int | float) and not isinstance(score, bool):
        attributes["gen_ai.evaluation.score.value"] = float(score)
    if capture_content and verdict.reason:
        attributes["gen_ai.evaluation.explanation"] = verdict.reason
    return attributes


def record_exception(span: Any, exc: BaseException) -> None:
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


def messages_json(messages: list[Message], finish_reason: str | None = None) -> str:
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


def usage_attributes(usage: Any) -> dict[str, int]:
    """The token counts as span attributes; an unknown count (``None``) is left out."""
    counts = {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    return {name: count for name, count in counts.items() if count is not None}
