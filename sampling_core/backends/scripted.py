"""``ScriptedBackend``: a deterministic, offline backend for tests, examples and benchmarks."""

from __future__ import annotations

import inspect
import math
import re
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from hook_specs.records import Generation, TokenLogprob, Usage
from sampling_core.backends.base import Chunk, GenerationRequest, request_fields

Reply = str | Generation
Script = Sequence[str] | Callable[[GenerationRequest], Reply | Awaitable[Reply]]
Latency = float | Callable[[GenerationRequest], float]


class ScriptedBackend:
    """Answers from a script instead of a model.

    ``replies`` is a list of strings, served in call order and cycling, or a callable taking
    the :class:`GenerationRequest` and returning a string (or a ``Generation``), sync or
    async. ``latency`` (seconds, or a callable of the request) is slept with
    ``anyio.sleep`` before answering, so attempts really overlap. ``failures`` injects
    errors: a mapping from 1-based call number to the exception to raise, or a callable of
    the request returning an exception (or ``None``). Usage is counted in words.

    The last ``keep_requests`` requests (default 1,000; ``None``: all) are kept in
    ``requests``, oldest first, so a long run does not keep every request forever;
    ``calls`` counts them all.

    It streams too (:meth:`stream`): the reply word by word (each word with the
    whitespace before it, and the words so far as its usage), after the same latency; a
    scripted ``Generation`` with ``logprobs`` (see :func:`scripted_logprobs`) streams token
    by token, each chunk with its token's log-probabilities.
    ``chunks_sent`` counts the chunks sent, ``streams_closed_early`` the streams their
    reader closed before the end.
    """

    provider_name: str = "samplehooks.scripted"
    """``gen_ai.provider.name`` in traces: "samplehooks.scripted": no model at all."""

    def __init__(
        self,
        replies: Script,
        *,
        latency: Latency = 0.0,
        failures: Mapping[int, BaseException] | Callable[..., BaseException | None] | None = None,
        model: str = "scripted",
        keep_requests: int | None = 1000,
    ) -> None:
        if isinstance(replies, str) or not (callable(replies) or isinstance(replies, Sequence)):
            raise TypeError(
                "ScriptedBackend(replies): give a list of strings or a callable(request), "
                f"not {type(replies).__name__}"
            )
        if not callable(replies) and len(replies) == 0:
            raise ValueError("ScriptedBackend(replies): the list of replies is empty")
        self._replies = replies
        self._latency = latency
        self._failures = failures
        self.model = model
        if keep_requests is not None and (
            isinstance(keep_requests, bool)
            or not isinstance(keep_requests, int)
            or keep_requests < 0
        ):
            raise ValueError("ScriptedBackend(keep_requests): an int >= 0, or None for all")
        self.requests: deque[GenerationRequest] = deque(maxlen=keep_requests)
        self.calls = 0
        self.chunks_sent = 0
        self.streams_closed_early = 0

    def build_body(self, request: GenerationRequest) -> dict[str, Any]:
        """What a call "sends": the model name and the request as the engine made it."""
        return {"model": self.model, **request_fields(request)}

    def cache_identity(self) -> dict[str, Any]:
        """The replies, for the response cache: the list itself, or the callable's
        qualified name (``module.qualname``: change what it answers under the same name and
        the cache still replays the old answers)."""
        replies = self._replies
        if callable(replies):
            named = replies if hasattr(replies, "__qualname__") else type(replies)
            return {"replies": f"{getattr(named, '__module__', '?')}.{named.__qualname__}"}
        return {"replies": list(replies)}

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """Answer ``request`` from the script as a stream: the words of the reply, one
        :class:`Chunk` each (a schedule point before each), then the whole reply."""
        generation = await self.generate(request)
        inputs = generation.usage.input_tokens
        words = 0
        ended = False
        try:
            for piece, logprobs in _pieces(generation):
                await anyio.lowlevel.checkpoint()
                self.chunks_sent += 1
                words += not piece.isspace()
                yield Chunk(piece, Usage(inputs, words), logprobs)
            ended = True
            yield generation
        finally:
            if not ended:
                self.streams_closed_early += 1

    async def generate(self, request: GenerationRequest) -> Generation:
        """Answer ``request`` from the script."""
        self.calls += 1
        call = self.calls
        self.requests.append(request)
        latency = self._latency(request) if callable(self._latency) else self._latency
        if latency > 0:
            await anyio.sleep(latency)
        failure = self._failure_for(call, request)
        if failure is not None:
            raise failure
        reply: Any
        if callable(self._replies):
            reply = self._replies(request)
            if not isinstance(reply, str | Generation) and inspect.isawaitable(reply):
                reply = await reply
        else:
            reply = self._replies[(call - 1) % len(self._replies)]
        if isinstance(reply, Generation):
            return reply
        text = str(reply)
        words_in = sum(len(str(m.get("content", "")).split()) for m in request.messages)
        return Generation(
            text=text,
            usage=Usage(words_in, len(text.split())),
            finish_reason="stop",
            model=self.model,
            latency_s=latency,
        )

    def _failure_for(self, call: int, request: GenerationRequest) -> BaseException | None:
        if self._failures is None:
            return None
        if callable(self._failures):
            return self._failures(request)
        return self._failures.get(call)


def _pieces(generation: Generation) -> list[tuple[str, tuple[TokenLogprob, ...]]]:
    tokens = generation.logprobs
    if tokens and "".join(t.token for t in tokens) == generation.text:
        return [(t.token, (t,)) for t in tokens]
    return [(piece, ()) for piece in word_pieces(generation.text)]


def scripted_logprobs(
    tokens: Sequence[str], logprobs: Sequence[float], top_k: int = 2
) -> tuple[TokenLogprob, ...]:
    """Log-probabilities to script: each token with its ``logprob``, and as its top
    tokens itself and ``top_k - 1`` others that share what is left of the probability."""
    out = []
    for token, logprob in zip(tokens, logprobs, strict=True):
        rest = max(1e-12, 1.0 - math.exp(logprob)) / max(1, top_k - 1)
        others = [(f"<alt{i}>", math.log(rest)) for i in range(1, top_k)]
        top = ((token, logprob), *others)
        out.append(TokenLogprob(token, logprob, top))
    return tuple(out)


_PIECE = re.compile(r"\s*\S+|\s+$")


def word_pieces(text: str) -> list[str]:
    """``text`` cut into words, each with the whitespace before it (trailing whitespace is
    a piece of its own): the pieces join to ``text``."""
    return _PIECE.findall(text)
