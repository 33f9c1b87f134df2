"""What a backend is: anything with ``async def generate(request) -> Generation``.

A backend that can also send its answer as it is generated has a ``stream(request)``
method (:class:`StreamingBackend`): an async iterator of :class:`Chunk` pieces, then the
whole :class:`Generation` last. The engine streams only when someone needs the pieces (a
plugin implementing ``generation_chunk``, or a requirement's prefix check with early stop
on) and the backend has ``stream``; otherwise it calls ``generate`` as always. It may stop
iterating at any chunk (an early stop, a cancellation): closing the iterator closes the
request, so the server stops generating.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import anyio

from hook_specs.records import Generation, IterationInfo, Message, TokenLogprob, Usage
from sampling_core.redaction import KNOWN_SECRETS, scrub, scrub_data


@dataclass(slots=True)
class GenerationRequest:
    """One call to a backend: the messages, the options, and the attempt it belongs to.

    ``json_schema``, when set, is the JSON schema the answer must follow (``sample(...,
    format=...)``): a backend that can constrain its decoding to a schema does so (the
    OpenAI-compatible and local backends send it as ``response_format``); others ignore
    it, and the engine checks the answer either way.
    """

    messages: list[Message]
    options: dict[str, Any] = field(default_factory=dict)
    iteration: IterationInfo | None = None
    json_schema: dict[str, Any] | None = None

    @property
    def prompt(self) -> str:
        """The content of the last user message (handy in scripted backends)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return content_text(message.get("content", ""))
        return ""


def content_text(content: Any) -> str:
    """A message's content as text: a string as is; OpenAI-style parts
    (``[{"type": "text", "text": ...}, ...]``) joined by newlines, other parts left out."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type", "text") == "text"
        )
    return "" if content is None else str(content)


@runtime_checkable
class Backend(Protocol):
    """A model the engine can call. It may return a plain ``str``; the engine wraps it.

    Optional attributes the engine reads: ``provider_name`` (for traces) and
    ``free_of_charge`` (``True`` when its calls cost nothing, e.g. a model run in this
    process: the cost of a call cut short is then known to be 0). Read by the response
    cache: ``build_body(request)``, the body the backend sends for a request (its calls
    must send with it: see :func:`request_body`), and ``cache_identity()``, a dict of JSON
    values naming the model and the server (see
    :func:`~sampling_core.backends.cache_keys.cache_identity`).
    """

    async def generate(self, request: GenerationRequest) -> Generation | str:
        """Generate one answer for ``request``."""
        ...


def request_body(backend: object, request: GenerationRequest) -> dict[str, Any]:
    """What ``backend`` sends for ``request``: its ``build_body(request)`` when it has one
    (the method its calls send with: defaults and mode merged, the schema as
    ``response_format``, the seed), else :func:`request_fields`."""
    build = getattr(backend, "build_body", None)
    if callable(build):
        return build(request)
    return request_fields(request)


def request_fields(request: GenerationRequest) -> dict[str, Any]:
    """The request as the engine made it: every field but the attempt's place
    (``iteration``), which is not sent."""
    return {name: getattr(request, name) for name in _SENT_FIELDS}


_SENT_FIELDS = tuple(f.name for f in fields(GenerationRequest) if f.name != "iteration")
"""A request's fields that are sent: every one but the attempt's place (read once)."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a streamed answer: its new ``text`` and, when the server says, the
    ``usage`` of the whole call so far (else each chunk counts as one output token). A
    chunk with empty ``text`` only reports the usage so far (e.g. while the server reads
    the prompt): no hook sees it. ``logprobs`` are its tokens' log-probabilities, when
    the request asked for them (options ``logprobs``, ``top_logprobs``)."""

    text: str
    usage: Usage | None = None
    logprobs: tuple[TokenLogprob, ...] = ()


@runtime_checkable
class StreamingBackend(Backend, Protocol):
    """A backend that can also send its answer piece by piece."""

    def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """Yield the answer's pieces as :class:`Chunk` objects while it is generated, then
        one :class:`Generation` (the whole text, usage, finish reason) last.

        The consumer may stop at any chunk and close the iterator (``aclose()``): the
        backend then closes its request, so that the server stops generating.
        """
        ...


class Answered:
    """A plugin's streamed answer for a backend call (``generation_call``), read as a
    backend's stream is: an iterable or async iterable of :class:`Chunk` pieces that ends
    with the whole :class:`Generation`."""

    __slots__ = ("pieces",)

    def __init__(self, pieces: Any) -> None:
        self.pieces = pieces

    async def generate(self, request: GenerationRequest) -> Generation:
        """Not used: the engine reads an answer that streams through :meth:`stream`."""
        raise TypeError("a streamed answer is read through stream()")

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """The answer's pieces, in order."""
        pieces = self.pieces
        if hasattr(pieces, "__aiter__"):
            async for piece in pieces:
                yield piece
        else:
            for piece in pieces:
                yield piece


def can_stream(backend: object) -> bool:
    """Whether ``backend`` has a ``stream(request)`` method (see :class:`StreamingBackend`)."""
    return callable(getattr(backend, "stream", None))


class AttemptTimeout(TimeoutError):
    """A backend call ran longer than the sampler's ``attempt_timeout`` (a transient failure)."""


async def generate_within(timeout: float, backend: Backend, request: GenerationRequest) -> Any:
    """``backend.generate(request)``, cut off after ``timeout`` seconds with AttemptTimeout."""
    with anyio.move_on_after(timeout) as scope:
        return await backend.generate(request)
    if scope.cancelled_caught:
        raise AttemptTimeout(f"the backend call took longer than {timeout:g}s")
    raise AssertionError("unreachable")  # pragma: no cover


class BadReply(TypeError):
    """A backend returned something that is not a generation (ends that attempt as an error)."""


def as_generation(reply: Any, latency: float) -> Generation:
    """What a backend returned, checked, as a :class:`Generation` (a plain ``str`` is wrapped).

    The boundary between any backend and the engine: ``latency`` (measured by the engine)
    fills in a generation that reports none; token counts that are whole numbers (``3.0``,
    ``"3"``) become ints, a count that is ``None`` stays unknown (a plain ``str`` reply's
    usage is :data:`~hook_specs.records.UNKNOWN_USAGE`: unknown, never zero); a latency
    that is a number string becomes a float; anything
    else (a negative, fractional or non-numeric count, a non-numeric or non-finite latency,
    text that is not a string) raises :class:`BadReply` naming the field. Text that cannot
    be written as UTF-8 is repaired and secrets are scrubbed
    (:mod:`sampling_core.redaction`), in the text and in ``raw``.
    """
    if isinstance(reply, str):
        return Generation(text=scrub(reply), latency_s=latency)
    if not isinstance(reply, Generation):
        raise BadReply(
            f"backend returned {type(reply).__name__}; generate() must return a Generation or a str"
        )
    text = reply.text
    if not isinstance(text, str):
        raise BadReply(f"backend returned a Generation whose text is {type(text).__name__}")
    secrets = KNOWN_SECRETS.whole  # read, not called: once per reply
    if secrets or not text.isascii():  # else there is nothing to scrub or repair
        reply.text = scrub(text)
    if secrets and reply.raw is not None:
        reply.raw = scrub_data(reply.raw)
    usage = reply.usage
    if not isinstance(usage, Usage):
        raise BadReply(f"backend returned usage of type {type(usage).__name__}, not Usage")
    inputs, outputs = usage.input_tokens, usage.output_tokens
    if not (
        (inputs is None or (type(inputs) is int and inputs >= 0))
        and (outputs is None or (type(outputs) is int and outputs >= 0))
    ):  # else the counts are whole numbers or unknown, as they must be: kept as they are
        reply.usage = Usage(_count(inputs, "input"), _count(outputs, "output"), usage.cost_usd)
    reported = reply.latency_s
    if not (type(reported) is float and 0.0 < reported < math.inf):  # else: kept as it is
        reply.latency_s = _latency(reported, latency)
    return reply


def _count(value: Any, which: str) -> int | None:
    if value is None:  # the backend did not say: unknown, never 0
        return None
    if isinstance(value, bool):
        raise BadReply(f"backend returned {which}_tokens={value!r}, not a number of tokens")
    if isinstance(value, int) and value >= 0:
        return value
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = -1.0
    if math.isfinite(number) and number >= 0 and number == int(number):
        return int(number)
    raise BadReply(
        f"backend returned {which}_tokens={value!r}; a token count is a whole number >= 0"
    )


def _latency(value: Any, measured: float) -> float:
    if value is None or (not isinstance(value, str | bool) and value == 0):
        return measured
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number < 0:
        raise BadReply(f"backend returned latency_s={value!r}; it must be seconds (a number >= 0)")
    return number


async def aclose_backend(backend: object) -> None:
    """Free what ``backend`` holds (its ``aclose()``, if it has one), even while cancelled."""
    close = getattr(backend, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()
