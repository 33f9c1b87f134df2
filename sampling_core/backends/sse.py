"""Server-sent events of an OpenAI-compatible streamed reply, read one line at a time.

Internal to :mod:`sampling_core.backends`: :func:`event_lines` cuts the reply's bytes into
lines (a line may arrive in many network reads; one longer than ``limit`` characters is
:class:`EventTooLong`, never buffered without bound); :class:`StreamedReply` keeps what the
events of one reply said so far (model, finish reason, the final ``usage``, llama.cpp's
per-token ``timings``) and gives each event's new text; :func:`usage_of` reads a reply's
``usage`` (streamed or whole), unknown counts as ``None``, never 0.

A stream that does not bring a whole answer is :class:`BrokenStream`, never an answer: an
``error`` event (OpenAI and vLLM send one after the ``200``), an event whose data is not a
JSON object, and a stream that ends with neither ``[DONE]`` nor a ``finish_reason``
(:meth:`StreamedReply.end`).
"""

from __future__ import annotations

import codecs
import json
import math
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any

from hook_specs.records import UNKNOWN_USAGE, TokenLogprob, Usage
from sampling_core.backends.base import content_text
from sampling_core.backends.logprobs import logprobs_of

__all__ = [
    "DONE",
    "MAX_EVENT_CHARS",
    "BrokenStream",
    "EventTooLong",
    "StreamedReply",
    "event_lines",
    "token_count",
    "usage_of",
]

DONE: Any = object()
"""What :meth:`StreamedReply.read` returns for the event that ends the stream."""

MAX_EVENT_CHARS = 8 * 1024 * 1024
"""The longest line of a stream read (8 MiB): one event of a chat completion is far shorter."""

_BREAK = re.compile(r"\r\n|\r|\n")


class BrokenStream(ValueError):
    """A stream that is not a whole answer (an error event, an event that is not JSON, a
    stream cut short): the call failed, and what arrived is no answer. ``detail`` is what
    the server sent (unscrubbed: whoever shows it scrubs it first, then cuts it)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class EventTooLong(BrokenStream):
    """A line of the stream longer than the limit (it is not buffered further)."""


async def event_lines(chunks: AsyncIterator[bytes], limit: int = MAX_EVENT_CHARS) -> Any:
    """The lines of a UTF-8 event stream, whatever network reads they arrive in.

    Lines end at ``\\r\\n``, ``\\r`` or ``\\n`` (as server-sent events define); a ``\\r\\n``
    split between two reads is one break; a byte order mark opening the stream is dropped.
    A line longer than ``limit`` characters raises :class:`EventTooLong` as soon as it is,
    before more of it is kept. The last line is given even when the stream ends without a
    break.
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    held: list[str] = []  # the start of a line whose end has not arrived
    size = 0
    after_cr = False  # the last read ended with "\r": a "\n" opening the next is its pair
    first = True
    async for raw in chunks:
        text = decoder.decode(raw)
        if not text:
            continue
        if first:
            first, text = False, text.removeprefix("\ufeff")
            if not text:
                continue
        if after_cr and text[0] == "\n":
            text = text[1:]
        after_cr = text.endswith("\r")
        start = 0
        for found in _BREAK.finditer(text):
            line = text[start : found.start()]
            if held:
                line = "".join(held) + line
                held.clear()
                size = 0
            if len(line) > limit:
                raise EventTooLong(_too_long(limit))
            yield line
            start = found.end()
        if start < len(text):
            held.append(text[start:])
            size += len(text) - start
            if size > limit:
                raise EventTooLong(_too_long(limit))
    held.append(decoder.decode(b"", final=True))
    last = "".join(held)
    if len(last) > limit:
        raise EventTooLong(_too_long(limit))
    if last:
        yield last


def _too_long(limit: int) -> str:
    return (
        f"the server sent an event line longer than {limit:,} characters; it was not read "
        "further (a stream of a chat completion has far shorter events)"
    )


class StreamedReply:
    """What the events of one streamed reply said so far: model, finish reason, usage."""

    __slots__ = (
        "_event",
        "_held",
        "_logprobs_sent",
        "done",
        "finish_reason",
        "logprobs",
        "model",
        "timings",
        "usage",
    )

    def __init__(self) -> None:
        self.model: str | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.timings: tuple[int, int] | None = None  # llama.cpp's (input, output) so far
        self.done = False  # ``data: [DONE]`` arrived
        self._event: str | None = None  # the ``event:`` name of the event being read
        self._held: list[str] = []  # data lines of an event not yet whole JSON
        self.logprobs: list[TokenLogprob] | None = None  # every token's, once one came
        self._logprobs_sent = 0

    def read(self, line: str, mode: str) -> Any:
        """The text a line of the stream brings (``""`` for none), or :data:`DONE` at the end.

        An event's data is read when its line is whole JSON, else when the event ends (a
        blank line: data in many lines is joined by newlines, as server-sent events define).
        Raises :class:`BrokenStream` for an error event and for data that is not a JSON object.
        """
        if not line:  # the end of an event
            try:
                text = self._read_held(mode)
                if self._event == "error":  # an error event that brought no data
                    raise BrokenStream("the server reported an error mid-stream")
                return text
            finally:
                self._event = None
        if line.startswith(":"):
            return ""  # a comment: a keep-alive
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
            return ""
        if name != "data":
            return ""  # ``id:``, ``retry:``, a field nobody defined
        if self._held:
            self._held.append(value)
            return ""
        if not value.strip():
            return ""  # no data: a keep-alive
        if value.strip() == "[DONE]":
            self.done = True
            return DONE
        try:
            data = json.loads(value)
        except ValueError:
            self._held.append(value)  # perhaps the first line of data in many lines
            return ""
        return self._take(data, value, mode)

    def end(self, mode: str) -> str:
        """The text of an event the stream ended in (``""`` for none), once the stream
        ended; raises :class:`BrokenStream` when it brought no whole answer (neither
        ``[DONE]`` nor a ``finish_reason``: the stream was cut short)."""
        text = self._read_held(mode)
        if not self.done and self.finish_reason is None:
            raise BrokenStream(
                "the stream ended before the answer did (neither [DONE] nor a finish_reason)"
            )
        return text

    def _read_held(self, mode: str) -> str:
        if not self._held:
            return ""
        value = "\n".join(self._held)
        self._held = []
        try:
            data = json.loads(value)
        except ValueError:
            raise BrokenStream("the server sent an event that is not JSON", value) from None
        return self._take(data, value, mode)

    def _take(self, data: Any, value: str, mode: str) -> str:
        if not isinstance(data, Mapping):
            raise BrokenStream("the server sent an event that is not a JSON object", value)
        error = data.get("error")
        if error is None and data.get("object") == "error":  # vLLM's error, unwrapped
            error = data.get("message") or "error"
        if error is not None or self._event == "error":
            if isinstance(error, Mapping) and error.get("message") is not None:
                error = error["message"]
            raise BrokenStream("the server reported an error mid-stream", str(error or value))
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
