"""One streamed backend call: its chunks, the prefix checks after each, and early stop.

The loop streams an attempt's generation when someone needs the pieces (a plugin
implementing ``generation_chunk``, or a requirement with a prefix check while early stop is
on) and the backend can (:func:`~sampling_core.backends.base.can_stream`). Then
:func:`read_stream` reads the backend's ``stream(request)`` into a :class:`Flight`: each
chunk's text is added, handed to ``on_chunk`` (the ``generation_chunk`` hook) and to the
prefix checks' readers (:mod:`sampling_core.requirements.prefix`: one per requirement and
generation, fed the new text only; a plain ``prefix`` function is given the whole text);
at the first one that fails, the stream is closed (so the server stops decoding) and the
text so far is the generation, ``finish_reason="stopped_early"``. A generation that runs
to its end is shown to each reader (``finished``).

A flight still open when the call ends was cancelled: :meth:`Flight.spent` is what it
spent, counted from what arrived (nothing for a plugin's streamed answer: no backend call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from hook_specs.errors import StopSampling
from hook_specs.records import (
    STOPPED_EARLY,
    Generation,
    IterationInfo,
    TokenLogprob,
    Usage,
    ValidationResult,
    spending,
)
from sampling_core.backends.base import AttemptTimeout, BadReply, Chunk, GenerationRequest
from sampling_core.errors import exception_text
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.prefix import PrefixReader, WholeText

__all__ = [
    "Flight",
    "Notes",
    "Prefixes",
    "call_notes",
    "judge_whole",
    "prefixes_in_force",
    "read_stream",
    "readers_of",
    "stopped_names",
    "unmet_early",
]

Prefixes = tuple[tuple[int, Requirement], ...]
"""The requirements with a prefix check, with their position in the call's requirements."""

Failed = tuple[tuple[int, str | None], ...]
"""Requirements whose prefix failed: position, and a reason when the prefix raised."""

Notes = Sequence[dict[str, Any]]
"""Per prefix check (in the order of :data:`Prefixes`), the dict a call keeps for it: what
its readers learn from the call's other generations (see ``PrefixReader``)."""


def prefixes_in_force(requirements: Sequence[Requirement], early_stop: bool) -> Prefixes:
    """The requirements whose prefix check may stop a generation in a call: those with one
    (a ``prefix`` function or a ``reader``), while early stop is on."""
    if not early_stop:
        return ()
    found = []  # a loop, not a generator: one frame less, for every call
    for i, r in enumerate(requirements):
        if r.prefix is not None or r.reader is not None:
            found.append((i, r))
    return tuple(found) if found else ()


def call_notes(
    requirements: Sequence[Requirement], prefixes: Prefixes
) -> tuple[Notes, Prefixes, Notes]:
    """What a call's readers keep: the notes of ``prefixes`` (those that may stop a
    generation), and the requirements with a ``reader`` with their notes (the same dicts).

    A reader may judge what its requirement's whole check cannot (``min_confidence``
    calibrated per call: the threshold is in the call's notes), so a generation no reader
    read as it arrived (early stop off, a backend that does not stream) is read whole after
    it arrived (:func:`judge_whole`), by these."""
    readers: Prefixes = ()
    for i, r in enumerate(requirements):
        if r.reader is not None:
            readers += ((i, r),)
    if not prefixes and not readers:  # the common case: nothing to keep (and no frames made)
        return [], readers, []
    kept: dict[int, dict[str, Any]] = {}
    return (
        [kept.setdefault(i, {}) for i, _ in prefixes],
        readers,
        [kept.setdefault(i, {}) for i, _ in readers],
    )


def judge_whole(readers: Sequence[tuple[int, PrefixReader]], generation: Generation) -> Failed:
    """The prefix checks that fail ``generation``, read whole, in one piece (with its
    tokens' log-probabilities); when none fails, each reader is told it finished (a
    calibrating reader learns from it)."""
    failed = failing_readers(readers, generation.text, tuple(generation.logprobs or ()))
    if not failed:
        for _, reader in readers:
            reader.finished(generation)
    return failed


def readers_of(prefixes: Prefixes, notes: Notes) -> list[tuple[int, PrefixReader]]:
    """One reader per prefix check for one generation (a plain ``prefix`` function is
    given the whole text so far: :class:`~sampling_core.requirements.prefix.WholeText`)."""
    readers: list[tuple[int, PrefixReader]] = []
    for (position, requirement), kept in zip(prefixes, notes, strict=True):
        if requirement.reader is not None:
            readers.append((position, requirement.reader(kept)))
        else:
            readers.append((position, WholeText(requirement.prefix)))  # type: ignore[arg-type]
    return readers


class Flight:
    """A streamed backend call while it runs: the text and the tokens that arrived, and
    the plugin streaming them instead of the backend (``answered_by``), if one does."""

    __slots__ = ("answered_by", "chunks", "info", "logprobs", "parts", "text", "usage")

    def __init__(self, info: IterationInfo, answered_by: str | None = None) -> None:
        self.info = info
        self.answered_by = answered_by
        self.parts: list[str] = []
        self.text = ""
        self.chunks = 0
        self.usage: Usage | None = None  # the server's count so far, when it gives one
        self.logprobs: list[TokenLogprob] | None = None  # once a chunk brought some

    def add(self, chunk: Chunk) -> str:
        """Take one chunk in; its text (``""``: a chunk that only reports the usage)."""
        delta = chunk.text
        if not isinstance(delta, str):
            raise BadReply(f"backend streamed a chunk whose text is {type(delta).__name__}")
        if chunk.usage is not None:
            self.usage = chunk.usage
        if chunk.logprobs:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(chunk.logprobs)
        if delta:
            self.parts.append(delta)
            self.text += delta
            self.chunks += 1
        return delta

    def spent(self, free: bool) -> Usage:
        """The tokens it spent so far: the server's count, or one output token per chunk
        (the input then unknown); cost 0 when the backend is free, else unknown. Nothing
        when a plugin streams instead of the backend (:func:`~hook_specs.records.spending`)."""
        cost = 0.0 if free else None
        if self.usage is not None:
            streamed = Usage(self.usage.input_tokens, self.usage.output_tokens, cost)
        else:
            streamed = Usage(None, self.chunks, cost)
        return spending(streamed, self.answered_by)


async def read_stream(
    backend: Any,
    request: GenerationRequest,
    flight: Flight,
    prefixes: Prefixes,
    notes: Notes,
    on_chunk: Callable[[Flight, str, tuple[TokenLogprob, ...]], Awaitable[None]] | None,
    free: bool,
) -> tuple[Generation, Failed]:
    """Read ``backend.stream(request)`` into ``flight``; the generation and the prefix
    checks that failed (none when it ran to its end).

    Closing the stream early (a failed prefix) or on a cancellation closes the request. A
    generation that arrives in one piece, with no chunk before it (a plugin answering for
    the backend: the response cache replaying one, whole or stopped early), is judged by
    the prefix checks as if it had streamed, in one piece, and a whole one they pass counts
    as finished (a calibrating reader learns from it).
    """
    readers = readers_of(prefixes, notes) if prefixes else []
    async with aclosing(backend.stream(request)) as pieces:
        async for item in pieces:
            if isinstance(item, Generation):
                if readers and (item.finish_reason == STOPPED_EARLY or not flight.chunks):
                    return item, judge_whole(readers, item)  # arrived in one piece
                for _, reader in readers:
                    reader.finished(item)
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
                await on_chunk(flight, delta, item.logprobs)
            if readers:
                failed = failing_readers(readers, delta, item.logprobs)
                if failed:
                    logprobs = flight.logprobs
                    generation = Generation(
                        flight.text,
                        flight.spent(free),
                        finish_reason=STOPPED_EARLY,
                        logprobs=None if logprobs is None else tuple(logprobs),
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


def failing_readers(
    readers: Sequence[tuple[int, PrefixReader]], delta: str, logprobs: tuple[TokenLogprob, ...]
) -> Failed:
    """The prefix checks that fail once ``delta`` is read. One that raises (or answers
    anything but a bool) fails, with the reason, as a check that raises does;
    ``StopSampling`` propagates."""
    failed: list[tuple[int, str | None]] = []
    for position, reader in readers:
        try:
            verdict = reader.feed(delta, logprobs)
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


def stopped_names(failed: Failed, requirements: Sequence[Requirement]) -> tuple[str, ...]:
    """The descriptions of the requirements whose prefix check stopped a generation."""
    return tuple(requirements[position].description for position, _ in failed)


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
