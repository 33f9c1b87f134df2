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
                               not_known, u: a rescore's attempts, and samples, it could
                               not decide (cut, or judged by a check that needs what the
                               run did not keep: u is not in n; a record that failed with
                               one has an outcome not known: :func:`outcome`); votes: its
                               samples' vote profile for maj@k (JSON ``[[size, right],
                               ...]``, NULL when answers are not known); best_score,
                               mean_score: its attempts' scores (NULL when none scored)
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
from sampling_core.runs.store.meta_hashes import read_run_meta
from sampling_core.runs.store.record import RunRecord, read_record
from sampling_core.runs.store.store import RecordsScan, RunDirectory
from sampling_core.runs.store.votes import sample_votes

__all__ = ["RunIndex", "outcome"]


def outcome(rec: str = "rec") -> str:
    """The outcome of a record of table alias ``rec``, as SQL: its ``status``, but
    ``'not_known'`` for one that failed with an attempt a rescore could not decide (none
    passed, and that one might have: neither ok nor failed)."""
    return (
        f"CASE WHEN {rec}.status = 'failed' AND {rec}.not_known > 0 THEN 'not_known' "
        f"ELSE {rec}.status END"
    )


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
    not_known INTEGER, u INTEGER, votes TEXT, best_score REAL, mean_score REAL);
CREATE TABLE reason(line INTEGER NOT NULL, text TEXT NOT NULL);
"""
_LINKS = """
CREATE INDEX prompt_key ON prompt(key);
CREATE INDEX rec_key ON rec(key, line);
CREATE INDEX reason_line ON reason(line);
"""
_OWN = """
UPDATE rec SET own = COALESCE(
    (SELECT CASE WHEN p.hash = rec.hash THEN 1 ELSE 2 END FROM prompt p
     WHERE p.key = rec.key ORDER BY p.pos DESC LIMIT 1), 0);
CREATE TABLE latest(line INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
INSERT INTO latest SELECT MAX(line), key FROM rec WHERE own = 1 GROUP BY key;
CREATE TABLE first(line INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
INSERT INTO first SELECT MIN(line), key FROM rec WHERE own = 1 AND n > 0 GROUP BY key;
"""
_RELINK = f"DROP TABLE latest; DROP TABLE first; {_OWN}"
"""After records were appended (:meth:`RunIndex.append`): which are the run's, and the latest
and first of each prompt, made again."""


class RunIndex:
    """The index of one run directory: :meth:`build` it, :meth:`query` it, :meth:`close` it
    (or use it as a context manager)."""

    def __init__(self, run_dir: RunDirectory, *, keep_records: bool = False) -> None:
        self.run_dir = run_dir
        self.keep_records = keep_records
        """Whether each record is kept whole too (:meth:`records`), for a command that
        goes through every record after its checks (a rescore) without reading the file
        again."""
        self.meta: dict[str, Any] = {}
        """``meta.json``, its ``dataset.hashes`` left empty (they are in ``prompt``)."""
        self.scan = RecordsScan()
        # "": private, on disk; one thread at a time may use it (a run's end hands it to
        # its run_end observers, which may be delivered on a worker thread meanwhile)
        self._db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in (
            "journal_mode = OFF",
            "synchronous = OFF",
            "temp_store = FILE",
            "cache_size = -4096",  # KiB: the pages SQLite keeps in memory
        ):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.executescript(_SCHEMA)
        if keep_records:
            self._db.execute("CREATE TABLE body(line INTEGER PRIMARY KEY, json TEXT NOT NULL)")

    @classmethod
    def open(cls, path: str | Path) -> RunIndex:
        """The index of the run in ``path`` (raises ``RunDirError`` when it is not a run)."""
        run_dir = RunDirectory(Path(path))
        run_dir.check_is_run(resuming=False)
        return cls.build(run_dir)

    @classmethod
    def build(cls, run_dir: RunDirectory, *, keep_records: bool = False) -> RunIndex:
        """Read ``meta.json`` and ``records.jsonl`` of ``run_dir`` into a new index (with
        ``keep_records``, each record whole too: :meth:`records`).

        Raises :class:`~sampling_core.runs.errors.RunDirError` when either is damaged.
        """
        index = cls(run_dir, keep_records=keep_records)
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
        bodies = _Batches(self._db, "INSERT INTO body VALUES (?, ?)")
        keep = self.keep_records

        def add(line: int, offset: int, record: RunRecord) -> None:
            records.add(_rec_values(line, offset, record))
            for text in _reasons(record):
                reasons.add((line, clean_text(text)))
            if keep:  # ASCII JSON: a lone surrogate is written as an escape
                bodies.add((line, json.dumps(record.as_json())))

        self.scan = self.run_dir.scan_records(add)
        records.flush()
        reasons.flush()
        bodies.flush()
        self._db.execute("COMMIT")
        self._db.executescript(f"BEGIN; {_LINKS} {_OWN} COMMIT;")
        self._end: int | None = None  # where appended records start (see start_appending)
        self._appended = False

    def start_appending(self, size: int) -> None:
        """Records will be appended to ``records.jsonl``, whose size is ``size`` now (after
        a resume dropped a torn tail): :meth:`append` each as it is written."""
        self._end = size

    def append(self, record: RunRecord, size: int) -> None:
        """Add a record just appended to ``records.jsonl`` (its line ``size`` bytes long,
        newline included): the index then answers for the run as it is now, with no new
        reading of the file, once :meth:`refresh` made the latest records again. Until
        then ``latest`` and ``first`` are as they were (what came before this session)."""
        if self._end is None:
            raise ValueError("start_appending() first: the file's size is not known")
        line = self.scan.count + 1
        self._db.execute(_INSERT_REC, _rec_values(line, self._end, record))
        for text in _reasons(record):
            self._db.execute("INSERT INTO reason VALUES (?, ?)", (line, clean_text(text)))
        if self.keep_records:
            self._db.execute("INSERT INTO body VALUES (?, ?)", (line, json.dumps(record.as_json())))
        self.scan.count = line
        self.scan.last_seq = max(self.scan.last_seq, record.seq)
        self._end += size
        self._appended = True

    def refresh(self) -> None:
        """Make ``latest`` and ``first`` again over the records appended so far."""
        if self._appended:
            self._db.executescript(f"BEGIN; {_RELINK} COMMIT;")
            self._appended = False

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
        with the run's: :func:`~sampling_core.runs.resume.resume.check_dataset`)."""
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

    def read_record(self, line: int) -> RunRecord:
        """The record on line ``line`` of ``records.jsonl``, read again from the file."""
        offset = self.value("SELECT offset FROM rec WHERE line = ?", (line,))
        if offset is None:
            raise KeyError(line)
        return self.run_dir.read_record_at(offset)

    def records(self) -> Iterator[RunRecord]:
        """Every record, whole, in the order of the file (an index built with
        ``keep_records``: the file is not read again)."""
        if not self.keep_records:
            raise ValueError("this index keeps no records: build it with keep_records=True")
        for (text,) in self.query("SELECT json FROM body ORDER BY line"):
            record = read_record(json.loads(text))
            if record is not None:  # it was one when it was read
                yield record

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
    "cached_calls, cached_tokens, not_run, not_started, stopped_early, not_known, u, votes, "
    "best_score, mean_score"
)
_INSERT_REC = f"INSERT INTO rec({_REC_COLUMNS}) VALUES ({', '.join('?' * 31)})"


def _rec_values(line: int, offset: int, record: RunRecord) -> tuple[Any, ...]:
    row = record.row()
    n, c, partial, unknown = record.samples()
    votes = sample_votes({"attempts": record.attempts})
    return (
        line,
        offset,
        clean_text(row.key),
        clean_text(record.content_hash),
        record.seq,
        record.session,
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
        *record.cached(),
        record.not_run(),
        row.not_started,
        row.stopped_early,
        row.not_known,
        unknown,
        None if votes is None else json.dumps(votes, separators=(",", ":")),
        *(row.score or (None, None)),
    )


def _reasons(record: RunRecord) -> list[str]:
    """What the summary counts of a record not ok: each unmet requirement, or its error."""
    if record.status == "failed":
        return record.failed_requirements or ["(no requirement named)"]
    if record.status == "error":
        return [f"error: {str(record.reason)[:100]}"]
    return []
