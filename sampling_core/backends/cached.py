"""A backend seen through the response cache, for one ``sample()`` call.

:func:`serving` wraps a call's backend: a request whose answer is stored
(:meth:`~sampling_core.backends.cache.ResponseCache.get`: a whole one, or one cut by prefix
checks that are all in force in this call) is answered from the file, a
:class:`~hook_specs.records.CachedGeneration` naming its entry; any other is asked of the
backend and its answer stored. A call that asks again (``--retry-failed``) is never
answered from the file, and its answer replaces the stored one.

A failed write (a full disk, a file grown too large, an I/O error) is logged as the warning
``cache.write_failed``: the answer was generated and paid for, and it stands.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Set
from contextlib import aclosing
from typing import Any

import structlog

from hook_specs.records import STOPPED_EARLY, CachedGeneration, Generation, Usage
from sampling_core.backends.base import (
    Backend,
    Chunk,
    GenerationRequest,
    as_generation,
    can_stream,
)
from sampling_core.backends.cache import ResponseCache
from sampling_core.backends.cache_keys import (
    check_identity,
    cut_identity,
    identity_digest,
    request_key,
)
from sampling_core.errors import exception_text

__all__ = ["CachedBackend", "CachedStreamingBackend", "serving"]

logger = structlog.get_logger("samplehooks")

NO_NEW_TOKENS = Usage(0, 0, 0.0)


def serving(
    cache: ResponseCache,
    backend: Backend,
    prefix_checks: Iterable[Any] = (),
    *,
    ask_again: bool = False,
) -> CachedBackend:
    """``backend`` seen through ``cache`` for one call whose prefix checks in force are
    ``prefix_checks`` (requirements); one that can stream still can
    (:class:`CachedStreamingBackend`). With ``ask_again`` nothing is answered from the file."""
    in_force = frozenset(map(check_identity, prefix_checks))
    kind = CachedStreamingBackend if can_stream(backend) else CachedBackend
    return kind(backend, cache, in_force, ask_again)


class CachedBackend:
    """A backend seen through the cache, for one ``sample()`` call."""

    def __init__(
        self,
        backend: Backend,
        cache: ResponseCache,
        in_force: Set[str] = frozenset(),
        ask_again: bool = False,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.identity = identity_digest(backend)
        self.in_force = in_force
        self.ask_again = ask_again
        # What the engine reads of the backend itself, seen through the cache as well.
        self.provider_name = getattr(backend, "provider_name", None)
        self.free_of_charge = bool(getattr(backend, "free_of_charge", False))

    async def generate(self, request: GenerationRequest) -> Generation:
        """The stored answer to ``request``, or the backend's (then stored)."""
        key = request_key(self.identity, self.backend, request)
        began = time.perf_counter()
        stored = await self._stored(key, began)
        if stored is not None:
            return stored
        reply = await self.backend.generate(request)
        generation = as_generation(reply, time.perf_counter() - began)
        if generation.finish_reason != STOPPED_EARLY:
            await self._store(key, generation)
        return generation

    async def keep_stopped_early(
        self, request: GenerationRequest, generation: Generation, checks: Iterable[Any]
    ) -> None:
        """The engine stopped this call's stream early, because the prefix checks of
        ``checks`` (requirements) failed: keep ``generation`` (the text so far) under the
        request and their identities."""
        key = request_key(self.identity, self.backend, request)
        await self._store(key, generation, cut_identity(map(check_identity, checks)))

    async def _stored(self, key: str, began: float) -> CachedGeneration | None:
        if self.ask_again:
            return None
        found = await self.cache.aget(key, self.identity, self.in_force)
        if found is None:
            return None
        return CachedGeneration(
            text=found.text,
            usage=NO_NEW_TOKENS,
            finish_reason=found.finish_reason,
            model=found.model,
            latency_s=max(time.perf_counter() - began, 1e-9),
            cached_usage=found.usage,
            entry=found.entry,
        )

    async def _store(self, key: str, generation: Generation, cut_by: str = "") -> None:
        """Store ``generation``; a write that fails is a warning (the answer stands)."""
        try:
            await self.cache.aput(key, self.identity, generation, cut_by, replace=self.ask_again)
        except Exception as exc:
            logger.warning(
                "cache.write_failed",
                path=str(self.cache.path),
                error_type=type(exc).__name__,
                error=exception_text(exc),
            )


class CachedStreamingBackend(CachedBackend):
    """A backend that streams, seen through the cache: a call still streams (so that early
    stop and ``generation_chunk`` work with a cache as without one).

    A stored answer arrives whole (one :class:`CachedGeneration`, no chunk; a cut one keeps
    its ``finish_reason``, and the engine judges it by the prefix checks as if it had
    streamed); any other is streamed from the backend, chunk by chunk, and stored once it
    arrived whole, or when the engine cut it (:meth:`keep_stopped_early`). A stream cut
    short by a cancellation is never stored.
    """

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """The stored answer to ``request``, or the backend's stream (its answer then stored)."""
        key = request_key(self.identity, self.backend, request)
        began = time.perf_counter()
        stored = await self._stored(key, began)
        if stored is not None:
            yield stored
            return
        async with aclosing(self.backend.stream(request)) as pieces:  # type: ignore[attr-defined]
            async for item in pieces:
                if isinstance(item, Generation):
                    generation = as_generation(item, time.perf_counter() - began)
                    if generation.finish_reason != STOPPED_EARLY:
                        await self._store(key, generation)
                    yield generation
                    return
                yield item
