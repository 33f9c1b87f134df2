"""A run's records as tables on disk, so that reading a run takes memory bounded by what it shows.

``records.jsonl`` is read once, a line at a time, and each record becomes one row of a
private temporary SQLite database (a file SQLite deletes as it opens it, in the system's
temporary directory: nothing is left behind, even by a reader killed); ``meta.json``'s
per-prompt content hashes go in beside them, read a chunk at a time. Resume, ``report``,
the view and the summary ask their questions of these tables; a record itself is read again
(by its byte offset) only where it is shown whole, as a view's timelines show a few.

The tables (read them with :meth:`RunIndex.query`)::

    prompt(pos, key, hash)     the run's prompts, from meta.json, in dataset order
    rec(line, offset, ...)     one row a record: its line number (1-based) and byte offset;
                               key, hash, seq, session; own = 1 when its key and content
                               hash are a prompt's of the run, 0 when the key is not the
                               run's, 2 when the hash is another; the numbers of its report
                               row (status, sampling_id, attempts, passes, cancelled,
                               reason, unmet: a JSON list, input_tokens and output_tokens:
                               NULL when unknown, cost_usd, latency_s, elapsed_s); n, c:
                               its samples for pass@k, partial = 1 when they were counted
                               from a cut attempt list; cached_calls, cached_tokens: what
                               the response cache answered; not_run: a rescore's attempts
                               the source never ran; not_started, stopped_early: the
                               subsamples never started, the attempts stopped early;
                               votes: its samples' vote profile for maj@k (JSON
                               ``[[size, right], ...]``, NULL when answers are not known)
    reason(line, text)         what a record that is not ok missed, one row a reason
    latest(line, key)          the latest own record of each prompt: the one counted
    first(line, key)           each prompt's first own record that holds samples (n > 0):
                               the one pass@k counts

Rows are inserted in batches inside one transaction, and SQLite keeps a few megabytes of
pages in memory whatever the size of the run. Text that cannot be encoded as UTF-8 (a lone
surrogate escape in a hand-edited file) is stored with U+FFFD in its place.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sampling_core.redaction import clean_text
from sampling_core.runs.meta_hashes import read_run_meta
from sampling_core.runs.rows import prompt_row, usage_extras
from sampling_core.runs.store import RecordsScan, RunDirectory
from sampling_core.runs.votes import sample_votes

__all__ = ["RunIndex"]

_BATCH = 256
_SCHEMA = """
CREATE TABLE prompt(pos INTEGER PRIMARY KEY, key TEXT NOT NULL, hash TEXT NOT NULL);
CREATE TABLE rec(
    line INTEGER PRIMARY KEY, offset INTEGER NOT NULL, key TEXT NOT NULL, hash TEXT,
    seq INTEGER, session INTEGER, own INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL,
    sampling_id TEXT, attempts INTEGER, passes INTEGER, cancelled INTEGER, reason TEXT,
    unmet TEXT, input_tokens INTEGER, output_tokens INTEGER, cost_usd REAL, latency_s REAL,
    elapsed_s REAL, n INTEGER, c INTEGER, partial INTEGER, cached_calls INTEGER,
    cached_tokens INTEGER, not_run INTEGER, not_started INTEGER, stopped_early INTEGER,
    votes TEXT);
CREATE TABLE reason(line INTEGER NOT NULL, text TEXT NOT NULL);
"""
_LINKS = """
CREATE INDEX prompt_key ON prompt(key);
CREATE INDEX rec_key ON rec(key, line);
UPDATE rec SET own = COALESCE(
    (SELECT CASE WHEN p.hash = rec.hash THEN 1 ELSE 2 END FROM prompt p
     WHERE p.key = rec.key ORDER BY p.pos DESC LIMIT 1), 0);
CREATE TABLE latest(line INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
INSERT INTO latest SELECT MAX(line), key FROM rec WHERE own = 1 GROUP BY key;
CREATE TABLE first(line INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
INSERT INTO first SELECT MIN(line), key FROM rec WHERE own = 1 AND n > 0 GROUP BY key;
CREATE INDEX reason_line ON reason(line);
"""


class RunIndex:
    """The index of one run directory: :meth:`build` it, :meth:`query` it, :meth:`close` it
    (or use it as a context manager)."""

    def __init__(self, run_dir: RunDirectory) -> None:
        self.run_dir = run_dir
        self.meta: dict[str, Any] = {}
        """``meta.json``, its ``dataset.hashes`` left empty (they are in ``prompt``)."""
        self.scan = RecordsScan()
        self._db = sqlite3.connect("", isolation_level=None)  # "": private, on disk
        for pragma in (
            "journal_mode = OFF",
            "synchronous = OFF",
            "temp_store = FILE",
            "cache_size = -4096",  # KiB: the pages SQLite keeps in memory
        ):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.executescript(_SCHEMA)

    @classmethod
    def open(cls, path: str | Path) -> RunIndex:
        """The index of the run in ``path`` (raises ``RunDirError`` when it is not a run)."""
        run_dir = RunDirectory(Path(path))
        run_dir.check_is_run(resuming=False)
        return cls.build(run_dir)

    @classmethod
    def build(cls, run_dir: RunDirectory) -> RunIndex:
        """Read ``meta.json`` and ``records.jsonl`` of ``run_dir`` into a new index.

        Raises :class:`~sampling_core.runs.errors.RunDirError` when either is damaged.
        """
        index = cls(run_dir)
        try:
            index._load()
        except BaseException:
            index.close()
            raise
        return index

    def _load(self) -> None:
        self._db.execute("BEGIN")
        prompts = _Batches(self._db, "INSERT INTO prompt(key, hash) VALUES (?, ?)")
        self.meta = read_run_meta(
            self.run_dir, lambda key, value: prompts.add((clean_text(key), clean_text(value)))
        )
        prompts.flush()
        records = _Batches(self._db, _INSERT_REC)
        reasons = _Batches(self._db, "INSERT INTO reason VALUES (?, ?)")

        def add(line: int, offset: int, record: dict[str, Any]) -> None:
            records.add(_rec_values(line, offset, record))
            for text in _reasons(record):
                reasons.add((line, clean_text(text)))

        self.scan = self.run_dir.scan_records(add)
        records.flush()
        reasons.flush()
        self._db.execute("COMMIT")
        self._db.executescript(f"BEGIN; {_LINKS} COMMIT;")

    def query(self, sql: str, params: Iterable[Any] = ()) -> Iterator[tuple[Any, ...]]:
        """The rows of a read-only query over the tables, as they come (never all at once)."""
        cursor = self._db.execute(sql, tuple(params))
        while True:
            rows = cursor.fetchmany(_BATCH)
            if not rows:
                return
            yield from rows

    def value(self, sql: str, params: Iterable[Any] = ()) -> Any:
        """The first column of the first row of a query (``None`` when there is none)."""
        row = self._db.execute(sql, tuple(params)).fetchone()
        return None if row is None else row[0]

    def load_pairs(self, table: str, pairs: Iterable[tuple[str, str]]) -> None:
        """A new table ``table(pos, key, hash)`` holding ``pairs`` (a dataset's, to compare
        with the run's: :func:`~sampling_core.runs.resume.check_dataset`)."""
        if not table.isidentifier():
            raise ValueError(f"not a table name: {table!r}")
        self._db.execute("BEGIN")
        self._db.execute(f"CREATE TABLE {table}(pos INTEGER PRIMARY KEY, key TEXT, hash TEXT)")
        batches = _Batches(self._db, f"INSERT INTO {table}(key, hash) VALUES (?, ?)")
        for pair in pairs:
            batches.add(pair)
        batches.flush()
        self._db.execute(f"CREATE INDEX {table}_key ON {table}(key)")
        self._db.execute("COMMIT")

    def read_record(self, line: int) -> dict[str, Any]:
        """The record on line ``line`` of ``records.jsonl``, read again from the file."""
        offset = self.value("SELECT offset FROM rec WHERE line = ?", (line,))
        if offset is None:
            raise KeyError(line)
        return self.run_dir.read_record_at(offset)

    def close(self) -> None:
        """Close the database (its file goes with it)."""
        self._db.close()

    def __enter__(self) -> RunIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Batches:
    """Rows for one ``INSERT``, executed ``_BATCH`` at a time."""

    def __init__(self, db: sqlite3.Connection, sql: str) -> None:
        self._db, self._sql = db, sql
        self._rows: list[tuple[Any, ...]] = []

    def add(self, row: tuple[Any, ...]) -> None:
        self._rows.append(row)
        if len(self._rows) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self._db.executemany(self._sql, self._rows)
            self._rows.clear()


_REC_COLUMNS = (
    "line, offset, key, hash, seq, session, status, sampling_id, attempts, passes, cancelled, "
    "reason, unmet, input_tokens, output_tokens, cost_usd, latency_s, elapsed_s, n, c, partial, "
    "cached_calls, cached_tokens, not_run, not_started, stopped_early, votes"
)
_INSERT_REC = f"INSERT INTO rec({_REC_COLUMNS}) VALUES ({', '.join('?' * 27)})"


def _rec_values(line: int, offset: int, record: dict[str, Any]) -> tuple[Any, ...]:
    row = prompt_row(record)
    n, c, partial = row.samples
    votes = sample_votes(record)
    session = record.get("session")
    hash_ = record.get("content_hash")
    return (
        line,
        offset,
        clean_text(row.key),
        clean_text(hash_) if isinstance(hash_, str) else None,
        int(record.get("seq", 0)),
        session if isinstance(session, int) and not isinstance(session, bool) else None,
        row.status,
        clean_text(row.sampling_id) if isinstance(row.sampling_id, str) else None,
        row.attempts,
        row.passes,
        row.cancelled,
        None if row.reason is None else clean_text(str(row.reason)),
        json.dumps(row.unmet),  # ASCII: a lone surrogate is written as an escape
        row.input_tokens,
        row.output_tokens,
        row.cost_usd,
        row.latency_s,
        row.elapsed_s,
        n,
        c,
        int(partial),
        *usage_extras(record),
        row.not_started,
        row.stopped_early,
        None if votes is None else json.dumps(votes, separators=(",", ":")),
    )


def _reasons(record: dict[str, Any]) -> list[str]:
    """What the summary counts of a record not ok: each unmet requirement, or its error."""
    status = record.get("status")
    if status == "failed":
        return list(record.get("failed_requirements") or ["(no requirement named)"])
    if status == "error":
        return [f"error: {str(record.get('reason'))[:100]}"]
    return []
