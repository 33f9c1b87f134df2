"""Server-sent events of an OpenAI-compatible streamed reply, read one line at a time.

Internal to :mod:`sampling_core.backends`: :class:`StreamedReply` keeps what the events of
one reply said so far (model, finish reason, the final ``usage``, llama.cpp's per-token
``timings``) and gives each event's new text; :func:`usage_of` reads a reply's ``usage``
(streamed or whole), unknown counts as ``None``, never 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hook_specs.records import UNKNOWN_USAGE, TokenLogprob, Usage
from sampling_core.backends.base import content_text
from sampling_core.backends.logprobs import logprobs_of

__all__ = ["DONE", "StreamedReply", "token_count", "usage_of"]

DONE: Any = object()
"""What :meth:`StreamedReply.read` returns for the event that ends the stream."""


class StreamedReply:
    """What the events of one streamed reply said so far: model, finish reason, usage."""

    __slots__ = ("_logprobs_sent", "finish_reason", "logprobs", "model", "timings", "usage")

    def __init__(self) -> None:
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.timings: tuple[int, int] | None = None  # llama.cpp's (input, output) so far
        self.logprobs: list[TokenLogprob] | None = None  # every token's, once one came
        self._logprobs_sent = 0

    def read(self, line: str, mode: str) -> Any:
        """The text an event line brings (``""`` for none), or :data:`DONE` at the end."""
        if not line.startswith("data:"):
            return ""  # a blank separator, a comment, an ``event:`` line
        data_text = line[5:].strip()
        if data_text == "[DONE]":
            return DONE
        try:
            data = json.loads(data_text)
        except ValueError:
            return ""
        if not isinstance(data, Mapping):
            return ""
        if isinstance(data.get("model"), str):
            self.model = data["model"]
        if isinstance(data.get("usage"), Mapping):
            self.usage = usage_of(data["usage"])
        timings = data.get("timings")
        if isinstance(timings, Mapping):
            prompt, predicted = (
                token_count(timings.get("prompt_n")),
                token_count(timings.get("predicted_n")),
            )
            if prompt is not None and predicted is not None:
                self.timings = (prompt + (token_count(timings.get("cache_n")) or 0), predicted)
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            return ""
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])
        self._add_logprobs(logprobs_of(choice))
        if mode == "chat":
            delta = choice.get("delta")
            return content_text(delta.get("content")) if isinstance(delta, Mapping) else ""
        return content_text(choice.get("text"))

    def _add_logprobs(self, found: tuple[TokenLogprob, ...] | None) -> None:
        if found:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(found)

    def new_logprobs(self) -> tuple[TokenLogprob, ...]:
        """The tokens' log-probabilities that arrived since the last call (a chunk's)."""
        given = self.logprobs
        if given is None or self._logprobs_sent == len(given):
            return ()
        new = tuple(given[self._logprobs_sent :])
        self._logprobs_sent = len(given)
        return new

    def usage_so_far(self) -> Usage | None:
        """The tokens of the call so far, when the server says (llama.cpp's timings)."""
        return None if self.timings is None else Usage(*self.timings)


def usage_of(usage: Any) -> Usage:
    """The reply's token counts; a reply without ``usage`` (or a count that is not one) is
    unknown, never 0."""
    if not isinstance(usage, Mapping):
        return UNKNOWN_USAGE
    return Usage(
        token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))
    )


def token_count(value: Any) -> int | None:
    """A token count from a server's reply; what is not a count is unknown (``None``)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(number) or number < 0 or number != int(number):
        return None
    return int(number)
