"""The record writer: an interrupt or a failed write never loses or tears a record."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from sampling_core.runs.store import store


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def writer_of(path: Path, count: int) -> store.RecordWriter:
    """A writer on a new records file at ``path`` holding ``count`` records not yet flushed."""
    path.touch()
    writer = store.RecordWriter(path, flush_every=100, fsync=False)
    for n in range(count):
        writer.append({"n": n})
    return writer


def test_sigterm_during_a_flush_lands_after_every_waiting_record_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    writer = writer_of(path, 3)
    real_write = os.write
    sent = []

    def write_then_signal(fd, data):
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)  # arrives in the middle of the flush
        return real_write(fd, data[:5])  # short writes: the flush must loop

    # Another thread alive, as in a real run: the signal may reach the process through it.
    stop = threading.Event()
    bystander = threading.Thread(target=stop.wait, daemon=True)
    bystander.start()
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        monkeypatch.setattr(store.os, "write", write_then_signal)
        with pytest.raises(KeyboardInterrupt):
            writer.flush()
    finally:
        signal.signal(signal.SIGTERM, previous)
        monkeypatch.undo()
        stop.set()
        bystander.join()
    writer.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_a_failed_write_keeps_only_what_was_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    writer = writer_of(path, 2)
    real_write = os.write
    calls = []

    def write_some_then_fail(fd, data):
        calls.append(len(data))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real_write(fd, data[:4])

    monkeypatch.setattr(store.os, "write", write_some_then_fail)
    with pytest.raises(OSError, match="No space"):
        writer.flush()
    monkeypatch.undo()
    writer.close()  # the disk has room again: the rest goes out, nothing twice
    assert [json.loads(x) for x in path.read_text().splitlines()] == [{"n": 0}, {"n": 1}]
