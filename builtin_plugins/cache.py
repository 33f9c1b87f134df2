"""The built-in plugin ``cache``: the response cache, answering for the backend.

``Sampler(backend, cache="responses.sqlite")`` (``run.cache`` in a run's YAML, ``--cache`` on
the command line) opens the cache's file and registers this plugin with it, under the name
``cache``. It is an ordinary plugin on ``generation_call``, in two implementations:

- a plain one (``firstresult``) that answers a call whose answer is stored instead of the
  backend: a :class:`~hook_specs.records.CachedGeneration` naming its ``entry``, with no new
  tokens (``generation.answered_by`` is ``"cache"``). A stored answer that early stop cut is
  replayed only where the prefix checks that cut it are all in force
  (``payload.prefix_checks``), and the engine judges it by them as if it had streamed;
- a wrapper that keeps what the backend answered to a call the cache could not answer: a
  whole generation under the call's key, one early stop cut under the key and the prefix
  checks that cut it. What a cancellation cut short, what another plugin answered and what
  a check's raising cut are never kept.

Every backend call goes through it, a check's own (an LLM judge's, ``payload.purpose ==
"judge"``) too; a backend that says nothing of its model cannot be cached: the call's own
backend then fails its calls with :class:`~sampling_core.backends.cache_keys.CacheError`,
while a judge's is simply asked.

Both are ``trylast``: the cache stands in for the backend, innermost, so another plugin
that answers (a router, a mock) answers first and is not overruled by the backend's stored
answer. The key of a call is the body its backend sends for the request the payload
describes (``messages``, ``options``, ``json_schema``, the attempt), the
backend's identity and, without a seed, the attempt's place
(:mod:`sampling_core.backends.cache_keys`). A call that asks again (``payload.ask_again``:
``--resume --retry-failed``) is never answered from the file, and its answer replaces the
stored ones. A write that fails (a full disk, a file grown too large, an I/O error) is the
warning ``cache.write_failed``: the answer was generated and paid for, and it stands.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pluggy
import structlog

from hook_specs import GenerationCallPayload, hookimpl
from hook_specs.records import (
    NOTHING_SPENT,
    STOPPED_EARLY,
    CachedGeneration,
    Generation,
    IterationInfo,
)
from sampling_core.backends.base import GenerationRequest
from sampling_core.backends.cache_keys import (
    CacheError,
    check_identity,
    cut_by,
    identity_digest,
    request_key,
)
from sampling_core.backends.cache_store import ResponseCache
from sampling_core.errors import exception_text

__all__ = ["NO_NEW_TOKENS", "ResponseCachePlugin", "default_path"]

logger = structlog.get_logger("samplehooks")

NO_NEW_TOKENS = NOTHING_SPENT
"""The usage of an answer from the cache: nothing was spent (known, not unknown)."""

_IDENTITIES_KEPT = 64
"""How many backends' identities are remembered (a scripted backend's holds its replies)."""


def _request(fields: dict[str, Any]) -> GenerationRequest:
    """The request the backend is sent, as a ``generation_call`` payload's ``fields``
    describe it (the attempt's place only where the key reads it: a request without a
    seed)."""
    options = fields["options"]
    info = None
    if options.get("seed") is None:
        info = IterationInfo(
            fields["sampling_id"], fields["subsample_index"], fields["attempt"], fields["iteration"]
        )
    return GenerationRequest(fields["messages"], options, info, fields["json_schema"])


def default_path() -> Path:
    """Where the cache is kept when no path is given (``SAMPLEHOOKS_PLUGINS=cache``): the
    user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``), ``samplehooks/responses.sqlite``.
    Entries never cross models, so one file may serve every program of the user."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "samplehooks" / "responses.sqlite"


class ResponseCachePlugin:
    """The response cache as a plugin (see the module's docstring).

    ``path`` is the cache's file (opened on first use, and closed by :meth:`close`; default
    :func:`default_path`), or a
    :class:`~sampling_core.backends.cache_store.ResponseCache` already open (its opener
    closes it: ``Sampler(cache=...)`` opens the file itself, so that an unusable one is
    refused at once). An unusable file raises
    :class:`~sampling_core.backends.cache_keys.CacheError` naming it.
    """

    affects_results = False  # an answer from the cache is the one the model gave

    def __init__(self, path: str | os.PathLike[str] | ResponseCache | None = None) -> None:
        self._store: ResponseCache | None = None
        self._path: Path | None = None
        if isinstance(path, ResponseCache):
            self._store = path
        else:
            self._path = Path(path) if path is not None else default_path()
        self._identities: dict[int, tuple[object, str]] = {}  # id(backend) -> it, its digest
        self._asked: dict[int, tuple[str, str]] = {}  # id(payload) -> key, identity: a miss
        self._last_in_force: tuple[object, frozenset[str]] = (None, frozenset())

    @property
    def cache(self) -> ResponseCache:
        """The cache's file, opened on first use."""
        store = self._store
        if store is None:
            assert self._path is not None
            store = self._store = ResponseCache(self._path)
        return store

    @hookimpl(trylast=True)
    async def generation_call(self, payload: GenerationCallPayload) -> Generation | None:
        """The stored answer to the call, or ``None`` (the call is then asked of the
        backend, and :meth:`keep_answers` keeps its answer)."""
        began = time.perf_counter()
        # The payload's values as the engine made them, read without making the read-only
        # views a plugin's reads get (this one only reads them, to make the key).
        fields = vars(payload)
        backend = fields["backend"]
        try:
            identity = self._identity(backend)
        except CacheError:
            if fields["purpose"] == "judge":  # a check's own backend: asked, not kept
                return None
            raise  # the call's backend: the cache cannot tell its models apart
        key = request_key(identity, backend, _request(fields))
        if not fields["ask_again"]:
            found = await self.cache.aget(key, identity, self._in_force(fields["prefix_checks"]))
            if found is not None:
                return CachedGeneration(
                    text=found.text,
                    usage=NO_NEW_TOKENS,
                    finish_reason=found.finish_reason,
                    model=found.model,
                    latency_s=max(time.perf_counter() - began, 1e-9),
                    cached_usage=found.usage,
                    entry=found.entry,
                    logprobs=found.logprobs,
                )
        self._asked[id(payload)] = (key, identity)
        return None

    @hookimpl(specname="generation_call", wrapper=True, trylast=True)
    async def keep_answers(
        self, payload: GenerationCallPayload
    ) -> AsyncGenerator[None, pluggy.Result[Generation]]:
        """Around the call: keep the backend's answer to a call the cache could not answer."""
        try:
            outcome = yield
        finally:
            asked = self._asked.pop(id(payload), None)
        if asked is None:  # answered from the cache, or by a plugin before it was asked
            return
        generation = outcome.get_result()
        if generation.answered_by is not None:  # another plugin's answer: not the model's
            return
        cut = ""
        if generation.finish_reason == STOPPED_EARLY:
            found = cut_by(payload.prefix_checks, generation.text)
            if found is None:  # which checks cut it cannot be told: not kept
                return
            cut = found
        key, identity = asked
        try:
            await self.cache.aput(key, identity, generation, cut, replace=payload.ask_again)
        except Exception as exc:
            logger.warning(
                "cache.write_failed",
                path=str(self.cache.path),
                error_type=type(exc).__name__,
                error=exception_text(exc),
            )

    def _in_force(self, checks: frozenset[Any]) -> frozenset[str]:
        """The identities of the prefix checks ``checks`` (a call's, the same set for each
        of its backend calls: worked out once for the last set seen)."""
        last = self._last_in_force
        if last[0] is checks:
            return last[1]
        in_force = frozenset(map(check_identity, checks))
        self._last_in_force = (checks, in_force)
        return in_force

    def _identity(self, backend: object) -> str:
        """The :func:`~sampling_core.backends.cache_keys.identity_digest` of ``backend``,
        worked out once for each of the last backends seen."""
        known = self._identities.get(id(backend))
        if known is not None and known[0] is backend:
            return known[1]
        digest = identity_digest(backend)
        if len(self._identities) >= _IDENTITIES_KEPT:
            self._identities.clear()
        self._identities[id(backend)] = (backend, digest)
        return digest

    def close(self) -> None:
        """Close the cache's file, when this plugin opened it."""
        if self._path is not None and self._store is not None:
            self._store.close()
            self._store = None
