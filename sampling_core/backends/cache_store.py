"""The response cache's store: generations kept in an SQLite file, reused for the same request.

``Sampler(backend, cache="responses.sqlite")`` (``run.cache`` in a run's YAML, ``--cache``
on the command line) opens a :class:`ResponseCache` and enables the built-in plugin
``cache`` with it, on the ``generation_call`` hook:

- the **key** of a call is the request as the backend sends it, the model and the server
  (:mod:`sampling_core.backends.cache_keys`);
- a **hit** answers with the stored generation instead of the backend, a
  ``CachedGeneration`` naming its ``entry``, with no new tokens in its ``usage`` (what it
  took when it was generated is its ``cached_usage``, counted apart in
  ``SamplingResult.cached_usage``);
- a **miss** is asked of the backend and its answer stored: a whole one under the request's
  key, one cut by early stop under the key and the prefix checks that cut it (replayed only
  where they are in force).

The file is an SQLite database in WAL mode: safe for concurrent calls (a connection per
cache, used from worker threads under a lock, so the event loop never waits on the disk)
and for several processes (SQLite's own locking, with a generous busy timeout). A file
that is not a samplehooks cache (damaged, or another program's database) is refused with
one :class:`CacheError` naming it; one of an earlier format (whose keys crossed requests,
or whose answers lost their token log-probabilities) is emptied. An entry is only ever
returned for the identity it was stored under: entries never cross models; a hit keeps the
generation's token log-probabilities (``min_confidence`` and confidence scorers read them).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import anyio

from hook_specs.records import Generation, TokenLogprob, Usage
from sampling_core.backends.cache_keys import CacheError, cache_identity
from sampling_core.errors import exception_text

__all__ = ["CacheError", "CachedAnswer", "ResponseCache", "cache_identity", "probe_problem"]

APPLICATION_ID = 0x53484B43  # "SHKC" in the SQLite header: this file is a samplehooks cache
FORMAT = 3  # PRAGMA user_version
BUSY_TIMEOUT_S = 60.0  # how long a write waits for another process's

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " entry TEXT PRIMARY KEY, key TEXT NOT NULL, cut_by TEXT NOT NULL,"  # '': a whole answer
    " identity TEXT NOT NULL, text TEXT NOT NULL, finish_reason TEXT, model TEXT,"
    " input_tokens INTEGER, output_tokens INTEGER,"  # NULL: the backend did not say
    " cost_usd REAL, created TEXT NOT NULL,"
    " logprobs TEXT)",  # JSON [[token, logprob, [[top, logprob], ...]], ...]; NULL: none
    "CREATE INDEX IF NOT EXISTS entries_by_key ON entries (key)",
    "CREATE TABLE IF NOT EXISTS probes (token TEXT PRIMARY KEY, created TEXT NOT NULL)",
)
# 1: keys that crossed requests; 2: answers kept without their token log-probabilities
# (a check or scorer that reads them failed on a hit). Their entries are dropped.
_EARLIER_FORMATS = (1, 2)


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """One stored generation, and its entry's id (``entry``)."""

    entry: str
    text: str
    finish_reason: str | None
    model: str | None
    usage: Usage
    logprobs: tuple[TokenLogprob, ...] | None = None


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
            if version in _EARLIER_FORMATS:
                version = self._upgrade()
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

    def _upgrade(self) -> int:
        """Empty a cache of an earlier format (under the write lock) and make it this one's:
        its entries may answer other requests (format 1) or lack what checks read (2)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version in _EARLIER_FORMATS:  # else another process upgraded it meanwhile
                self._db.execute("DROP TABLE IF EXISTS entries")
                for statement in _SCHEMA:
                    self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {FORMAT}")
                version = FORMAT
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return int(version)

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

    def get(self, key: str, identity: str, in_force: Set[str] = frozenset()) -> CachedAnswer | None:
        """The answer stored under ``key`` for ``identity``, or ``None``: a whole one, else
        one cut by prefix checks that are all ``in_force`` (their identities)."""
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT entry, cut_by, text, finish_reason, model, input_tokens,"
                    " output_tokens, cost_usd, logprobs FROM entries WHERE key = ? AND identity = ?"
                    " ORDER BY cut_by != '', created, entry",
                    (key, identity),
                ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc
        for entry, cut_by, text, finish_reason, model, tokens_in, tokens_out, cost, probs in rows:
            if not cut_by or in_force.issuperset(json.loads(cut_by)):
                usage = Usage(tokens_in, tokens_out, cost)
                logprobs = None if probs is None else _logprobs_from(probs)
                return CachedAnswer(entry, text, finish_reason, model, usage, logprobs)
        return None

    def put(
        self,
        key: str,
        identity: str,
        generation: Generation,
        cut_by: str = "",
        *,
        replace: bool = False,
    ) -> str:
        """Store ``generation`` under ``key`` (and ``cut_by``, the
        :func:`~sampling_core.backends.cache_keys.cut_identity` of the checks that cut it);
        returns its entry's id. The first answer stored for a key stays, unless ``replace``:
        then the key's answers are replaced by this one (a call asked again)."""
        usage = generation.usage
        digest = hashlib.sha256(f"{key}\n{cut_by}".encode()).hexdigest()[:32]
        row = (
            digest,
            key,
            cut_by,
            identity,
            generation.text,
            generation.finish_reason,
            generation.model,
            usage.input_tokens,
            usage.output_tokens,
            usage.cost_usd,
            _now(),
            None if generation.logprobs is None else _logprobs_text(generation.logprobs),
        )
        try:
            with self._lock:
                if replace:
                    self._db.execute("BEGIN IMMEDIATE")
                    try:
                        self._db.execute(
                            "DELETE FROM entries WHERE key = ? AND identity = ?", (key, identity)
                        )
                        self._db.execute(_INSERT, row)
                        self._db.execute("COMMIT")
                    except BaseException:
                        self._db.execute("ROLLBACK")
                        raise
                else:
                    self._db.execute(_INSERT, row)
        except sqlite3.DatabaseError as exc:
            raise self._failure(exc) from exc
        except (sqlite3.Error, OverflowError, UnicodeError) as exc:  # a value SQLite refuses
            raise CacheError(
                f"cannot store an answer in the response cache {self.path}: {exception_text(exc)}"
            ) from exc
        return digest

    async def aget(
        self, key: str, identity: str, in_force: Set[str] = frozenset()
    ) -> CachedAnswer | None:
        """:meth:`get` in a worker thread."""
        return await anyio.to_thread.run_sync(self.get, key, identity, in_force)

    async def aput(
        self,
        key: str,
        identity: str,
        generation: Generation,
        cut_by: str = "",
        *,
        replace: bool = False,
    ) -> str:
        """:meth:`put` in a worker thread."""
        return await anyio.to_thread.run_sync(
            lambda: self.put(key, identity, generation, cut_by, replace=replace)
        )

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


_INSERT = "INSERT OR IGNORE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_HELD = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # another connection has the lock


def _code(exc: sqlite3.Error) -> int:
    """SQLite's primary result code for ``exc`` (0 for an error of Python's module)."""
    return (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _logprobs_text(logprobs: tuple[TokenLogprob, ...]) -> str:
    """A generation's token log-probabilities as the cache keeps them (JSON)."""
    return json.dumps([[t.token, t.logprob, [list(pair) for pair in t.top]] for t in logprobs])


def _logprobs_from(text: str) -> tuple[TokenLogprob, ...]:
    """The token log-probabilities :func:`_logprobs_text` kept."""
    return tuple(
        TokenLogprob(token, logprob, tuple((alt, alt_logprob) for alt, alt_logprob in top))
        for token, logprob, top in json.loads(text)
    )
