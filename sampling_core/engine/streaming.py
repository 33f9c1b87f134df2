"""One streamed backend call: its chunks, the prefix checks after each, and early stop.

The loop streams an attempt's generation when someone needs the pieces (a plugin
implementing ``generation_chunk``, or a requirement with a prefix check while early stop is
on) and the backend can (:func:`~sampling_core.backends.base.can_stream`). Then
:func:`read_stream` reads the backend's ``stream(request)`` into a :class:`Flight`: each
chunk's text is added, handed to ``on_chunk`` (the ``generation_chunk`` hook) and judged by
the prefix checks; at the first one that fails, the stream is closed (so the server stops
decoding) and the text so far is the generation, ``finish_reason="stopped_early"``.

A flight still open when the call ends was cancelled: :meth:`Flight.spent` is what it
spent, counted from what arrived.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from hook_specs.errors import StopSampling
from hook_specs.records import STOPPED_EARLY, Generation, IterationInfo, Usage, ValidationResult
from sampling_core.backends.base import AttemptTimeout, BadReply, Chunk, GenerationRequest
from sampling_core.errors import exception_text
from sampling_core.requirements.checks import Requirement

__all__ = ["Flight", "Prefixes", "prefixes_in_force", "read_stream", "unmet_early"]

Prefixes = tuple[tuple[int, Requirement], ...]
"""The requirements with a prefix check, with their position in the call's requirements."""

Failed = tuple[tuple[int, str | None], ...]
"""Requirements whose prefix failed: position, and a reason when the prefix raised."""


def prefixes_in_force(requirements: Sequence[Requirement], early_stop: bool) -> Prefixes:
    """The requirements whose prefix check may stop a generation in a call: those with one,
    while early stop is on."""
    if not early_stop:
        return ()
    return tuple((i, r) for i, r in enumerate(requirements) if r.prefix is not None)


class Flight:
    """A streamed backend call while it runs: the text and the tokens that arrived."""

    __slots__ = ("chunks", "info", "parts", "text", "usage")

    def __init__(self, info: IterationInfo) -> None:
        self.info = info
        self.parts: list[str] = []
        self.text = ""
        self.chunks = 0
        self.usage: Usage | None = None  # the server's count so far, when it gives one

    def add(self, chunk: Chunk) -> str:
        """Take one chunk in; its text (``""``: a chunk that only reports the usage)."""
        delta = chunk.text
        if not isinstance(delta, str):
            raise BadReply(f"backend streamed a chunk whose text is {type(delta).__name__}")
        if chunk.usage is not None:
            self.usage = chunk.usage
        if delta:
            self.parts.append(delta)
            self.text += delta
            self.chunks += 1
        return delta

    def spent(self, free: bool) -> Usage:
        """The tokens it spent so far: the server's count, or one output token per chunk
        (the input then unknown); cost 0 when the backend is free, else unknown."""
        cost = 0.0 if free else None
        if self.usage is not None:
            return Usage(self.usage.input_tokens, self.usage.output_tokens, cost)
        return Usage(None, self.chunks, cost)


async def read_stream(
    backend: Any,
    request: GenerationRequest,
    flight: Flight,
    prefixes: Prefixes,
    on_chunk: Callable[[Flight, str], Awaitable[None]] | None,
    free: bool,
) -> tuple[Generation, Failed]:
    """Read ``backend.stream(request)`` into ``flight``; the generation and the prefix
    checks that failed (none when it ran to its end).

    Closing the stream early (a failed prefix) or on a cancellation closes the request. A
    generation that arrives already stopped early (the response cache replaying one) is
    judged by the prefix checks as if it had streamed.
    """
    async with aclosing(backend.stream(request)) as pieces:
        async for item in pieces:
            if isinstance(item, Generation):
                if item.finish_reason == STOPPED_EARLY and prefixes:
                    return item, failing_prefixes(prefixes, item.text)
                return item, ()
            if not isinstance(item, Chunk):
                raise BadReply(
                    f"backend streamed {type(item).__name__}; stream() yields Chunk objects, "
                    "then one Generation"
                )
            delta = flight.add(item)
            if not delta:
                continue
            if on_chunk is not None:
                await on_chunk(flight, delta)
            if prefixes:
                failed = failing_prefixes(prefixes, flight.text)
                if failed:
                    generation = Generation(
                        flight.text, flight.spent(free), finish_reason=STOPPED_EARLY
                    )
                    return generation, failed
    raise BadReply("backend's stream() ended without a Generation (it must yield one last)")


async def read_stream_within(timeout: float, *args: Any) -> tuple[Generation, Failed]:
    """:func:`read_stream`, cut off after ``timeout`` seconds with ``AttemptTimeout``."""
    with anyio.move_on_after(timeout) as scope:
        return await read_stream(*args)
    if scope.cancelled_caught:
        raise AttemptTimeout(f"the backend call took longer than {timeout:g}s")
    raise AssertionError("unreachable")  # pragma: no cover


def failing_prefixes(prefixes: Prefixes, text: str) -> Failed:
    """The prefix checks that fail ``text``. One that raises (or answers anything but a
    bool) fails, with the reason, as a check that raises does; ``StopSampling`` propagates."""
    failed: list[tuple[int, str | None]] = []
    for position, requirement in prefixes:
        try:
            verdict = requirement.prefix(text)  # type: ignore[misc]
        except StopSampling:
            raise
        except Exception as exc:
            failed.append(
                (position, f"the prefix check raised {type(exc).__name__}: {exception_text(exc)}")
            )
            continue
        if verdict is True:
            continue
        if verdict is False:
            failed.append((position, None))
        else:
            if hasattr(verdict, "close"):
                verdict.close()  # a coroutine: never awaited
            failed.append(
                (
                    position,
                    f"the prefix check returned {type(verdict).__name__}, not a bool "
                    "(it must be a plain function returning True or False)",
                )
            )
    return tuple(failed)


def unmet_early(
    validations: tuple[ValidationResult, ...],
    failed: Failed,
    requirements: Sequence[Requirement],
) -> tuple[ValidationResult, ...]:
    """``validations`` of a stopped text, with each requirement whose prefix failed unmet:
    its check's own failure where it failed, else a failure saying why it stopped."""
    out = list(validations)
    for position, raised in failed:
        verdict = out[position]
        if raised is None and not verdict.passed:
            continue
        description = requirements[position].description
        reason = raised or (f"Stopped early: the answer so far can no longer meet {description!r}.")
        out[position] = ValidationResult(False, reason, verdict.score, description)
    return tuple(out)
