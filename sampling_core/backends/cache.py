"""The response cache: generations kept in an SQLite file, reused for the same request.

``Sampler(backend, cache="responses.sqlite")`` (``run.cache`` in a run's YAML, ``--cache``
on the command line) sends each backend call of a call through :class:`CachedBackend`:

- the **key** of a call is the backend's kind and model identity (:func:`cache_identity`:
  its class, model name, server URL or model file), the messages and the options as they
  were sent (the seed included); without a seed, the attempt's place (subsample, attempt),
  so that n samples of one prompt stay n different samples;
- a **hit** returns the stored generation with no backend call, a ``CachedGeneration``,
  with no new tokens in its ``usage`` (what it took when it was generated is its
  ``cached_usage``, counted apart in ``SamplingResult.cached_usage``);
- a **miss** calls the backend and stores its answer (not one stopped early: it is not the
  whole answer).

The file is an SQLite database in WAL mode: safe for concurrent calls (a connection per
cache, used from worker threads under a lock, so the event loop never waits on the disk)
and for several processes (SQLite's own locking, with a generous busy timeout). A file
that is not a samplehooks cache (damaged, or another program's database) is refused with
one :class:`CacheError` naming it. An entry is only ever returned for the identity it was
stored under: entries never cross models.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from hook_specs.records import STOPPED_EARLY, CachedGeneration, Generation, Usage
from sampling_core.backends.base import (
    Backend,
    Chunk,
    GenerationRequest,
    as_generation,
    can_stream,
)
from sampling_core.errors import SamplehooksError, exception_text

__all__ = [
    "CacheError",
    "CachedBackend",
    "CachedStreamingBackend",
    "ResponseCache",
    "cache_identity",
    "request_key",
]

APPLICATION_ID = 0x53484B43  # "SHKC" in the SQLite header: this file is a samplehooks cache
FORMAT = 1  # PRAGMA user_version
BUSY_TIMEOUT_S = 60.0  # how long a write waits for another process's
NO_NEW_TOKENS = Usage(0, 0, 0.0)

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " key TEXT PRIMARY KEY, identity TEXT NOT NULL, text TEXT NOT NULL,"
    " finish_reason TEXT, model TEXT, input_tokens INTEGER,"  # NULL: the backend did not say
    " output_tokens INTEGER, cost_usd REAL, created TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS probes (token TEXT PRIMARY KEY, created TEXT NOT NULL)",
)


class CacheError(SamplehooksError, ValueError):
    """The response cache file cannot be used (the message names it and says what to do)."""


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """One stored generation."""

    text: str
    finish_reason: str | None
    model: str | None
    usage: Usage


class ResponseCache:
    """An SQLite file of generations by request key (see the module's docstring).

    Opening checks the file at once: a damaged or foreign file raises :class:`CacheError`.
    The folder is made when missing. One connection, used under a lock; the ``a``-methods
    run it in a worker thread.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser().resolve()
        if self.path.is_dir():
            raise CacheError(f"the response cache {self.path} is a folder; give a file path")
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_S,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,
            )
        except (OSError, sqlite3.Error) as exc:
            raise CacheError(
                f"cannot open the response cache {self.path}: {exception_text(exc)}"
            ) from exc
        try:
            self._prepare()
        except BaseException:
            self._db.close()
            raise

    def _prepare(self) -> None:
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            if self._db.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
                self._db.execute("BEGIN IMMEDIATE")  # one process makes a new file a cache
                try:
                    self._claim()
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version != FORMAT:
                raise CacheError(
                    f"the response cache {self.path} is of format {version}, which this "
                    f"version of samplehooks does not read (it reads {FORMAT}); give "
                    "another path, or delete the file to start an empty cache"
                )
            mode = self._into_wal()
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc
        if str(mode).lower() != "wal":
            raise CacheError(
                f"the response cache {self.path} cannot use SQLite's WAL mode here "
                f"(journal mode {mode!r}); put it on a local disk"
            )

    def _claim(self) -> None:
        """Make a new, empty database a cache (under the write lock); refuse anything else."""
        if self._db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID:
            return  # another process made it one meanwhile
        tables = [row[0] for row in self._db.execute("SELECT name FROM sqlite_master")]
        if tables or self._db.execute("PRAGMA application_id").fetchone()[0] != 0:
            shown = ", ".join(tables[:5]) or "none"
            raise CacheError(
                f"{self.path} is an SQLite database of another program (tables: {shown}), "
                "not a samplehooks response cache; give another path (nothing was changed)"
            )
        for statement in _SCHEMA:
            self._db.execute(statement)
        self._db.execute(f"PRAGMA user_version = {FORMAT}")
        self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    def _into_wal(self) -> str:
        """Put the file in WAL mode (it stays so) and say the mode it is in.

        SQLite does not wait for the lock this needs when another connection holds the
        write lock: it answers "busy" at once. That happens whenever several processes open
        a new cache together (one converts it while another is in :meth:`_claim`), so a
        busy answer is tried again until :data:`BUSY_TIMEOUT_S` is spent.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        pause = 0.005
        while True:
            try:
                return str(self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0])
            except sqlite3.OperationalError as exc:
                if _code(exc) not in _HELD or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.25)

    def _failure(self, exc: sqlite3.Error) -> CacheError:
        """What an SQLite error means for the cache, as a :class:`CacheError`."""
        code = _code(exc)
        if code in _HELD:
            return CacheError(
                f"the response cache {self.path} stayed locked by another process for more "
                f"than {BUSY_TIMEOUT_S:g} s ({exception_text(exc)}); let that process "
                "finish, or give another path"
            )
        if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
            return CacheError(
                f"the response cache {self.path} is damaged or not an SQLite file "
                f"({exception_text(exc)}); delete it (or give another path) to start an "
                "empty cache"
            )
        return CacheError(f"cannot use the response cache {self.path}: {exception_text(exc)}")

    # -- entries ----------------------------------------------------------------------

    def get(self, key: str, identity: str) -> CachedAnswer | None:
        """The answer stored under ``key`` for ``identity``, or ``None``."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text, finish_reason, model, input_tokens, output_tokens, cost_usd"
                    " FROM entries WHERE key = ? AND identity = ?",
                    (key, identity),
                ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc
        if row is None:
            return None
        text, finish_reason, model, tokens_in, tokens_out, cost = row
        return CachedAnswer(text, finish_reason, model, Usage(tokens_in, tokens_out, cost))

    def put(self, key: str, identity: str, generation: Generation) -> None:
        """Store ``generation`` under ``key`` (the first answer stored for a key stays)."""
        usage = generation.usage
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        identity,
                        generation.text,
                        generation.finish_reason,
                        generation.model,
                        usage.input_tokens,
                        usage.output_tokens,
                        usage.cost_usd,
                        _now(),
                    ),
                )
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc

    async def aget(self, key: str, identity: str) -> CachedAnswer | None:
        """:meth:`get` in a worker thread."""
        return await anyio.to_thread.run_sync(self.get, key, identity)

    async def aput(self, key: str, identity: str, generation: Generation) -> None:
        """:meth:`put` in a worker thread."""
        await anyio.to_thread.run_sync(self.put, key, identity, generation)

    def __len__(self) -> int:
        try:
            with self._lock:
                return int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc

    # -- is it the same file elsewhere? -------------------------------------------------

    def new_probe(self) -> str:
        """A random token stored in the file, by which another process (a Ray worker on
        another node) can tell it opens this very file (:func:`probe_problem`)."""
        token = os.urandom(16).hex()
        try:
            with self._lock:
                self._db.execute("INSERT INTO probes VALUES (?, ?)", (token, _now()))
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc
        return token

    def serving(self, backend: Backend) -> CachedBackend:
        """``backend`` seen through this cache (what a ``sample()`` call sends its calls to);
        one that can stream still can (:class:`CachedStreamingBackend`)."""
        if can_stream(backend):
            return CachedStreamingBackend(backend, self)
        return CachedBackend(backend, self)

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def probe_problem(path: str | os.PathLike[str], token: str) -> str | None:
    """``None`` when the file at ``path`` holds ``token`` (it is the cache the token was
    made in), else why not, in one line. Never creates or changes the file."""
    where = Path(path)
    if not where.is_file():
        return f"there is no file {where}"
    try:
        db = sqlite3.connect(f"{where.as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            row = db.execute("SELECT 1 FROM probes WHERE token = ?", (token,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error as exc:
        return f"{where} cannot be read as the cache ({exception_text(exc)})"
    return None if row is not None else f"{where} is another file than the driver's"


_HELD = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # another connection has the lock


def _code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code for ``exc`` (0 for an error of Python's module)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- keys ------------------------------------------------------------------------------


def cache_identity(backend: object) -> dict[str, Any]:
    """What identifies the model behind ``backend``: its class (the backend's kind), and
    what its own ``cache_identity()`` returns when it has one; else its model file (with
    its size) when it has one, else its model name (``model`` or ``model_id``) and server
    URL (``base_url``).

    Raises :class:`CacheError` for a backend that says none of these: the cache could not
    tell its models apart.
    """
    cls = type(backend)
    kind = f"{cls.__module__}.{cls.__qualname__}"
    identity: dict[str, Any] = {"kind": kind}
    own = getattr(backend, "cache_identity", None)
    if callable(own):
        identity.update(own())
        return identity
    model_path = getattr(backend, "model_path", None)
    if isinstance(model_path, str | os.PathLike):
        file = Path(model_path).expanduser().resolve()
        identity["model_file"] = str(file)
        with contextlib.suppress(OSError):
            identity["model_file_bytes"] = file.stat().st_size
        return identity  # a local server's URL is a new port every start: not the model
    for name in ("model", "model_id", "base_url"):
        value = getattr(backend, name, None)
        if isinstance(value, str | int | float | bool):
            identity[name] = value
    if len(identity) == 1:
        raise CacheError(
            f"the response cache cannot tell the models of backend {kind} apart: it has no "
            "model, model_id, base_url or model_path attribute and no cache_identity() "
            "method; give it one (see the response cache's docs), or use no cache"
        )
    return identity


def request_key(identity: str, request: GenerationRequest) -> str:
    """The cache key of ``request`` to the model ``identity`` (:func:`cache_identity` as
    canonical JSON): a SHA-256 of the identity, the messages and the options, and of the
    attempt's place when the options carry no seed."""
    data: dict[str, Any] = {
        "identity": identity,
        "messages": request.messages,
        "options": request.options,
    }
    if "seed" not in request.options and request.iteration is not None:
        data["place"] = [request.iteration.subsample_index, request.iteration.attempt]
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=_stable)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _stable(value: Any) -> Any:
    """A JSON stand-in for an option JSON cannot hold (a pydantic model class: its schema)."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"schema": schema()}
    return repr(value)


def canonical(identity: dict[str, Any]) -> str:
    """An identity as the text entries are stored under."""
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))


class CachedBackend:
    """A backend seen through the cache, for one ``sample()`` call."""

    def __init__(self, backend: Backend, cache: ResponseCache) -> None:
        self.backend = backend
        self.cache = cache
        self.identity = canonical(cache_identity(backend))
        # What the engine reads of the backend itself, seen through the cache as well.
        self.provider_name = getattr(backend, "provider_name", None)
        self.free_of_charge = bool(getattr(backend, "free_of_charge", False))

    async def generate(self, request: GenerationRequest) -> Generation:
        """The stored answer to ``request``, or the backend's (then stored)."""
        key = request_key(self.identity, request)
        began = time.perf_counter()
        stored = await self._stored(key, began)
        if stored is not None:
            return stored
        reply = await self.backend.generate(request)
        generation = as_generation(reply, time.perf_counter() - began)
        if generation.finish_reason != STOPPED_EARLY:  # a part of an answer is not kept
            await self.cache.aput(key, self.identity, generation)
        return generation

    async def _stored(self, key: str, began: float) -> CachedGeneration | None:
        found = await self.cache.aget(key, self.identity)
        if found is None:
            return None
        return CachedGeneration(
            text=found.text,
            usage=NO_NEW_TOKENS,
            finish_reason=found.finish_reason,
            model=found.model,
            latency_s=max(time.perf_counter() - began, 1e-9),
            cached_usage=found.usage,
        )


class CachedStreamingBackend(CachedBackend):
    """A backend that streams, seen through the cache: a call still streams (so that early
    stop and ``generation_chunk`` work with a cache as without one).

    A stored answer arrives whole (one :class:`CachedGeneration`, no chunk); any other is
    streamed from the backend, chunk by chunk, and stored once it arrived whole. An answer
    cut short (a prefix check stopped it, or a cancellation) never reaches its last piece,
    so a part of an answer is never stored.
    """

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Chunk | Generation]:
        """The stored answer to ``request``, or the backend's stream (its answer then stored)."""
        key = request_key(self.identity, request)
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
                        await self.cache.aput(key, self.identity, generation)
                    yield generation
                    return
                yield item
