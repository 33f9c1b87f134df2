"""The run directory: its files, the append-only records, progress, and the run lock.

::

    RUN_DIR/
      effective_config.yaml   the resolved config, under a provenance header and lineage notes
      meta.json               format, samplehooks version, dataset fingerprint and per-key hashes
      records.jsonl           one JSON line per finished prompt, appended, never rewritten
      texts.jsonl             each record's whole attempt texts (runs/store/kept_texts.py)
      progress.json           counts and sessions, replaced atomically
      events.jsonl            hook events, when the ``recorder`` plugin is on
      .lock                   held (``filelock``) while a process runs the batch

None of these files may be a symbolic link: a run directory that holds one is refused, so
samplehooks never reads, truncates or writes a file outside the run directory.

A new run directory is built under a temporary name beside ``RUN_DIR`` and renamed into
place, so a run killed while starting leaves either nothing or a complete directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from sampling_core.errors import exception_text
from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store.files import after_last_newline, remove_stale_staging
from sampling_core.runs.store.kept_texts import TEXTS_FILE
from sampling_core.runs.store.record import RunRecord, read_record
from sampling_core.runs.store.record_writer import RecordWriter, interrupts_deferred
from sampling_core.runs.store.shapes import is_dataset_meta, is_progress

__all__ = [
    "CONFIG_FILE",
    "META_FILE",
    "PROGRESS_FILE",
    "RECORDS_FILE",
    "RUN_FILES",
    "RecordVisitor",
    "RecordWriter",
    "RecordsScan",
    "RunDirectory",
    "utc_now",
]

CONFIG_FILE = "effective_config.yaml"
META_FILE = "meta.json"
RECORDS_FILE = "records.jsonl"
PROGRESS_FILE = "progress.json"
EVENTS_FILE = "events.jsonl"
LOCK_FILE = ".lock"
FORMAT = 1
_OWN = (CONFIG_FILE, META_FILE, RECORDS_FILE, TEXTS_FILE, PROGRESS_FILE, EVENTS_FILE, LOCK_FILE)
RUN_FILES = frozenset(_OWN) | frozenset(f".{name}.tmp" for name in _OWN)
"""The names of a run directory's own files and of their temporary twins: samplehooks
reads and writes them only as the run's, never through a link, and no other output
replaces them (:mod:`sampling_core.runs.reports.outputs`)."""


def utc_now() -> str:
    """The current UTC time, to the second, as ``2025-01-31T12:00:00Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(slots=True)
class RecordsScan:
    """What a pass over ``records.jsonl`` found besides the records (which are handed to a
    visitor as they are read, never kept): how many, where the good part ends, a torn tail."""

    count: int = 0
    good_size: int = 0
    torn: bytes = b""
    unterminated: bool = False
    """The last record is whole but lacks its final newline (kept; resume adds it)."""
    last_seq: int = 0
    """The highest sequence number written so far (0 for none)."""


RecordVisitor = Callable[[int, int, RunRecord], None]
"""Called with each record's line number (1-based), its byte offset, and the record."""


@dataclass(slots=True)
class RunDirectory:
    """A run directory on disk (which may not exist yet)."""

    path: Path
    _lock: FileLock | None = field(default=None, repr=False)

    @property
    def config_file(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def meta_file(self) -> Path:
        return self.path / META_FILE

    @property
    def records_file(self) -> Path:
        return self.path / RECORDS_FILE

    @property
    def texts_file(self) -> Path:
        return self.path / TEXTS_FILE

    @property
    def progress_file(self) -> Path:
        return self.path / PROGRESS_FILE

    @property
    def events_file(self) -> Path:
        return self.path / EVENTS_FILE

    # -- states ------------------------------------------------------------------------

    def is_empty_or_missing(self) -> bool:
        """True when nothing would be overwritten by starting a run here."""
        if not self.path.exists():
            return True
        return self.path.is_dir() and not any(self.path.iterdir())

    def check_is_run(self, *, resuming: bool = True) -> None:
        """Raise :class:`RunDirError` unless this holds a run (config, meta and records)."""
        if self.path.exists() and not self.path.is_dir():
            raise RunDirError(f"{self.path} is a file, not a run directory")
        if not self.path.is_dir():
            if resuming:
                raise RunDirError(
                    f"{self.path} does not exist: there is no run to resume "
                    "(leave out --resume to start one)"
                )
            raise RunDirError(f"{self.path} does not exist (give a run directory)")
        self.refuse_symlinks()
        missing = [
            p.name for p in (self.config_file, self.meta_file, self.records_file) if not p.is_file()
        ]
        if missing:
            raise RunDirError(
                f"{self.path} is not a samplehooks run directory (missing {', '.join(missing)})"
            )

    # -- creating ----------------------------------------------------------------------

    def create(self, config_text: str, meta: dict[str, Any]) -> None:
        """Build the directory under a temporary name, then rename it into place.

        Raises :class:`RunDirError` when it cannot be made (its parent is a file, no
        permission, a full disk); nothing is left behind then.
        """
        try:
            self._build(config_text, meta)
        except OSError as exc:
            raise RunDirError(
                f"cannot create the run directory {self.path}: {exc.strerror or exc}"
            ) from exc

    def _build(self, config_text: str, meta: dict[str, Any]) -> None:
        parent = self.path.parent
        parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(parent, self.path.name)
        staging = parent / f".{self.path.name}.init-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        # held while building: a later run knows a staging folder without it is stale
        building = FileLock(f"{staging}.lock", timeout=0, thread_local=False)
        with interrupts_deferred():  # Ctrl-C / SIGTERM: finish (or clean up) first
            building.acquire()
            try:
                self._build_in(staging, parent, config_text, meta)
            finally:
                building.release()
                with contextlib.suppress(OSError):
                    os.unlink(f"{staging}.lock")

    def _build_in(
        self, staging: Path, parent: Path, config_text: str, meta: dict[str, Any]
    ) -> None:
        try:
            (staging / CONFIG_FILE).write_text(config_text, encoding="utf-8")
            _write_meta(staging / META_FILE, meta)
            (staging / RECORDS_FILE).touch()
            _fsync_dir(staging)
            if self.path.exists():
                self.path.rmdir()  # empty, checked by the caller
            os.rename(staging, self.path)
            _fsync_dir(parent)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    # -- the lock ----------------------------------------------------------------------

    def lock(self) -> None:
        """Take the run lock, or raise if another process holds it (works on every OS)."""
        self.refuse_symlinks()
        lock = FileLock(self.path / LOCK_FILE, timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            raise RunDirError(
                f"{self.path} is in use by another samplehooks process; wait for it to end"
            ) from None
        self._lock = lock

    def unlock(self) -> None:
        """Release the run lock."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def refuse_symlinks(self) -> None:
        """Raise :class:`RunDirError` when a run file (or its temporary twin) is a symlink."""
        for name in _OWN:
            for path in (self.path / name, self.path / f".{name}.tmp"):
                if path.is_symlink():
                    raise RunDirError(
                        f"{path} is a symbolic link; samplehooks never reads or writes a run "
                        "file through one: replace it by the file itself (nothing was written)"
                    )

    # -- reading -----------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """``meta.json``, checked to be of a format this version reads."""
        try:
            meta = json.loads(self.meta_file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise RunDirError(f"{self.meta_file} is damaged: {detail}") from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise RunDirError(f"{self.meta_file}: unknown run directory format")
        if not is_dataset_meta(meta.get("dataset")):
            raise RunDirError(
                f"{self.meta_file} is damaged: its dataset entry (count, fingerprint, "
                "hashes) is missing or malformed"
            )
        return meta

    def read_progress(self) -> dict[str, Any]:
        """``progress.json``; an empty mapping when it is missing.

        A run killed between the creation of its directory and its first progress save
        has none; its counts are rebuilt from the records. A file that is there but
        damaged raises :class:`RunDirError`.
        """
        try:
            text = self.progress_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise RunDirError(f"cannot read {self.progress_file}: {exception_text(exc)}") from exc
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            data = None
        if not is_progress(data):
            raise RunDirError(
                f"{self.progress_file} is damaged; it holds only counts and session "
                "history: delete it to go on (the counts are rebuilt from the records)"
            )
        return data

    def scan_records(self, visit: RecordVisitor | None = None) -> RecordsScan:
        """Read ``records.jsonl`` a line at a time, handing each record to ``visit``; a torn
        last line is returned apart, never parsed as a record.

        Records are written as whole lines, newline included, so only what follows the
        last newline can be a write cut short. Any complete line that is not a record
        raises :class:`RunDirError` naming it. Memory holds one line at a time.
        """
        scan = RecordsScan()
        for number, offset, record in self._read_records(scan):
            if visit is not None:
                visit(number, offset, record)
        return scan

    def iter_records(self) -> Iterator[RunRecord]:
        """The records of ``records.jsonl`` as :meth:`scan_records` reads them, one at a time."""
        for _, _, record in self._read_records(RecordsScan()):
            yield record

    def _read_records(self, scan: RecordsScan) -> Iterator[tuple[int, int, RunRecord]]:
        """``(line number, byte offset, record)`` of each record; ``scan`` is kept up to date."""
        try:
            handle = self.records_file.open("rb")
        except OSError as exc:
            raise RunDirError(f"cannot read {self.records_file}: {exception_text(exc)}") from exc
        with handle:
            for number, line in enumerate(handle, start=1):
                record = _parse_record(line)
                if not line.endswith(b"\n"):
                    if record is None:  # cut off when a run was killed
                        scan.torn = line
                        return
                    scan.unterminated = True  # whole, only the newline is missing
                elif record is None:
                    raise RunDirError(
                        f"{self.records_file}:{number} is damaged (not a record); "
                        "repair or remove that line, or start a new run"
                    )
                yield number, scan.good_size, record
                scan.count += 1
                scan.good_size += len(line)
                scan.last_seq = max(scan.last_seq, record.seq)

    def read_record_at(self, offset: int) -> RunRecord:
        """The record whose line starts at byte ``offset`` (as :meth:`scan_records` gave it)."""
        try:
            with self.records_file.open("rb") as handle:
                handle.seek(offset)
                line = handle.readline()
        except OSError as exc:
            raise RunDirError(f"cannot read {self.records_file}: {exception_text(exc)}") from exc
        record = _parse_record(line)
        if record is None:
            raise RunDirError(
                f"{self.records_file} changed while it was read (no record at byte {offset})"
            )
        return record

    # -- writing -----------------------------------------------------------------------

    def drop_torn_tail(self, scan: RecordsScan) -> None:
        """Cut a torn last line off ``records.jsonl`` (or end a whole last record's line)
        before appending."""
        self.refuse_symlinks()
        if scan.torn:
            os.truncate(self.records_file, scan.good_size)
        elif scan.unterminated:
            with open(self.records_file, "ab") as handle:
                handle.write(b"\n")

    def repair_events(self) -> int:
        """End ``events.jsonl`` at its last whole line (a crash may have torn the last one);
        returns the number of bytes dropped (0 when there is no file or nothing torn)."""
        self.refuse_symlinks()
        try:
            size = self.events_file.stat().st_size
        except FileNotFoundError:
            return 0
        end = after_last_newline(self.events_file, size)
        if end < size:
            os.truncate(self.events_file, end)
        return size - end

    def write_progress(self, progress: dict[str, Any]) -> None:
        """Replace ``progress.json`` atomically."""
        _write_json(self.progress_file, progress)

    def write_config(self, text: str) -> None:
        """Replace ``effective_config.yaml`` atomically."""
        tmp = self.config_file.with_name(f".{CONFIG_FILE}.tmp")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.config_file)

    def open_writer(self, *, flush_every: int, fsync: bool) -> RecordWriter:
        """An appender on ``records.jsonl`` (and ``texts.jsonl``)."""
        return RecordWriter(
            self.records_file, flush_every=flush_every, fsync=fsync, texts_path=self.texts_file
        )


def _parse_record(line: bytes) -> RunRecord | None:
    """A record, or ``None`` when ``line`` is not one (:func:`read_record`)."""
    try:
        return read_record(json.loads(line))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()  # never written through: a link planted there is removed, not followed
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    """``meta.json``, whose ``dataset.hashes`` may be an iterator of ``(key, hash)`` pairs:
    they are written as they come, so a large dataset's hashes are never all in memory."""
    dataset = meta.get("dataset")
    if not isinstance(dataset, dict) or "hashes" not in dataset:
        _write_json(path, meta)
        return
    hashes = dataset["hashes"]
    pairs = hashes.items() if isinstance(hashes, dict) else hashes
    marker = "\u0000hashes\u0000"
    text = json.dumps(
        {**meta, "dataset": {**dataset, "hashes": marker}}, indent=2, ensure_ascii=False
    )
    head, tail = text.split(json.dumps(marker, ensure_ascii=False))
    with path.open("w", encoding="utf-8") as out:
        out.write(head + "{")
        for index, (key, value) in enumerate(pairs):
            pair = f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
            out.write(f"{',' if index else ''}\n      {pair}")
        out.write("\n    }" + tail + "\n")


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
