"""Appending records to ``records.jsonl`` (and their whole texts to ``texts.jsonl``) in whole
lines, and holding interrupts meanwhile."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sampling_core.redaction import one_json_line, refresh_environment, scrub_data
from sampling_core.runs.store.caps import cap_record
from sampling_core.runs.store.kept_texts import split_texts

__all__ = ["RecordWriter", "interrupts_deferred"]


class RecordWriter:
    """Appends records as whole lines; flushes every ``flush_every`` records and on demand.

    Waiting lines are kept in memory and handed to the OS together, in one ``write`` of
    whole lines, so the file only ever ends in the middle of a line if the process dies
    inside that call; a resume then drops the torn tail.

    With ``texts_path``, each record's whole attempt texts go to that file
    (:mod:`sampling_core.runs.store.kept_texts`), written before the records of the same flush,
    and the record keeps a preview of each.
    """

    def __init__(
        self, path: Path, *, flush_every: int, fsync: bool, texts_path: Path | None = None
    ) -> None:
        refresh_environment()
        flags = os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
        flags |= getattr(os, "O_NOFOLLOW", 0)
        self._fd: int | None = os.open(path, flags)
        self._texts_fd: int | None = None
        if texts_path is not None:
            try:
                self._texts_fd = os.open(texts_path, flags | os.O_CREAT, 0o644)
            except BaseException:
                os.close(self._fd)
                raise
        self._waiting: list[bytes] = []
        self._waiting_texts: list[bytes] = []
        self.flush_every = flush_every
        self.fsync = fsync

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Append one record; flush when ``flush_every`` records are waiting. Returns the
        record as written to ``records.jsonl`` (texts kept apart, capped and scrubbed)."""
        return self.append_sized(record)[0]

    def append_sized(self, record: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """:meth:`append`, and the size in bytes of the record's line (newline included)."""
        if self._texts_fd is not None:
            record, texts = split_texts(record)
            if texts is not None:
                self._waiting_texts.append(one_json_line(scrub_data(texts)).encode("utf-8"))
        written = scrub_data(cap_record(record))
        encoded = one_json_line(written).encode("utf-8")
        self._waiting.append(encoded)
        if len(self._waiting) >= self.flush_every:
            self.flush()
        return written, len(encoded)

    @property
    def waiting(self) -> int:
        """Records appended and not yet handed to the file."""
        return len(self._waiting)

    def flush(self) -> None:
        """Write waiting records to the file (and to the disk, with ``fsync``); their texts
        first, so that no record is on disk before its texts."""
        if self._waiting and self._fd is not None:
            # Ctrl-C / SIGTERM wait until the waiting records are written whole: an
            # interrupt between clearing the buffer and the write would lose them.
            with interrupts_deferred():
                if self._texts_fd is not None:
                    self._write(self._texts_fd, self._waiting_texts)
                self._write(self._fd, self._waiting)

    def _write(self, fd: int, waiting: list[bytes]) -> None:
        if not waiting:
            return
        view = memoryview(b"".join(waiting))
        try:
            while view:
                view = view[os.write(fd, view) :]
        finally:  # what a failed write left unwritten is kept, and only that
            waiting[:] = [bytes(view)] if view else []
        if self.fsync:
            os.fsync(fd)

    def close(self) -> None:
        """Flush and close."""
        if self._fd is not None:
            try:
                self.flush()
            finally:
                os.close(self._fd)
                self._fd = None
                if self._texts_fd is not None:
                    os.close(self._texts_fd)
                    self._texts_fd = None


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back until the block is done, then act on them.

    Python runs signal handlers in the main thread between bytecodes, wherever it is; for
    the block, the handlers only take note, and the ones noted run once it is over.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, lambda n, f: noted.append(n)) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(noted):
            handler = previous[signum]
            if callable(handler):
                handler(signum, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)
