"""The body of a request to an OpenAI-compatible server: one function, used to send it.

:class:`~sampling_core.backends.openai_compat.OpenAIBackend` sends what :func:`openai_body`
builds (and the local backend, which talks to llama.cpp's server through one, builds its
body with it too), so what the response cache keys by is what goes over the wire.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from hook_specs.records import Message
from sampling_core.backends.base import GenerationRequest, content_text
from sampling_core.backends.logprobs import completions_options

__all__ = ["Mode", "openai_body", "render_prompt"]

Mode = Literal["chat", "completions"]
_NOT_SENT = frozenset({"stream", "stream_options", "n"})


def render_prompt(messages: list[Message]) -> str:
    """Turn chat messages into one completion prompt (a lone user message is sent as is)."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return content_text(messages[0].get("content", ""))
    lines = [f"{m.get('role', 'user')}: {content_text(m.get('content', ''))}" for m in messages]
    return "\n".join([*lines, "assistant:"])


def openai_body(
    request: GenerationRequest, model: str, mode: Mode, default_options: Mapping[str, Any]
) -> dict[str, Any]:
    """The JSON body of ``request`` to an OpenAI-compatible server: model, messages (chat) or
    prompt (completions), the options over ``default_options`` (``None`` values and the
    streaming fields left out), and the request's schema as ``response_format``."""
    body: dict[str, Any] = {"model": model}
    if mode == "chat":
        body["messages"] = [dict(m) for m in request.messages]
    else:
        body["prompt"] = render_prompt(request.messages)
    for key, value in {**default_options, **request.options}.items():
        if value is not None and key not in _NOT_SENT:
            body[key] = value
    if mode == "completions":
        completions_options(body)  # logprobs: true -> the number of top tokens
    schema = request.json_schema
    if schema is not None and "response_format" not in body:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "answer"))[:64]
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema},
        }
    return body
