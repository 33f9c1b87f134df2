"""The response cache shared by several connections and processes: SQLite's locks."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import sampling_core
from hook_specs.records import Generation, Usage
from sampling_core.backends import CacheError, ResponseCache
from sampling_core.backends import cache_store as cache_module

WRITER = """
import sys
from sampling_core.backends.cache_store import ResponseCache
from hook_specs.records import Generation, Usage
sys.stdin.readline()  # every process opens the new file at the same moment
cache = ResponseCache(sys.argv[1])
print("ready", flush=True)
sys.stdin.readline()
for i in range(200):
    cache.put(f"{sys.argv[2]}-{i}", "identity", Generation(f"text {i}", Usage(1, 2)))
print(len(cache), flush=True)
"""


def writers(path: Path, names: list[str]) -> list[subprocess.Popen[str]]:
    root = str(Path(sampling_core.__file__).resolve().parent.parent)
    return [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
        )
        for name in names
    ]


def say_go(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()


def test_four_processes_open_a_new_cache_and_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    names = ["a", "b", "c", "d"]
    procs = writers(path, names)
    say_go(procs)  # open
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line != "ready\n":  # it died opening the file: show why
            _, errors = proc.communicate(timeout=60)
            pytest.fail(f"a process could not open the new cache: {errors}")
    say_go(procs)  # write
    for proc in procs:
        _, errors = proc.communicate(timeout=60)
        assert proc.returncode == 0, errors
    cache = ResponseCache(path)
    assert len(cache) == 200 * len(names)
    found = cache.get("b-199", "identity")
    assert found is not None and (found.text, found.usage.output_tokens) == ("text 199", 2)
    assert cache.get("b-199", "another model") is None
    cache.close()


def a_cache_not_yet_in_wal_mode(path: Path) -> None:
    """The file as it is between one process making it a cache and putting it in WAL mode."""
    ResponseCache(path).close()
    with sqlite3.connect(path, isolation_level=None) as db:
        assert db.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
    db.close()


def test_opening_waits_while_another_connection_holds_the_write_lock(tmp_path: Path) -> None:
    # SQLite answers "busy" at once (it does not wait) when the switch to WAL mode meets
    # another connection's write lock: the race of two processes opening a new cache.
    path = tmp_path / "new.sqlite"
    a_cache_not_yet_in_wal_mode(path)
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    released = threading.Timer(0.3, other.execute, ("COMMIT",))
    released.start()
    began = time.monotonic()
    try:
        cache = ResponseCache(path)
    finally:
        released.join()
        other.close()
    assert time.monotonic() - began >= 0.25  # it waited for the lock, then went on
    cache.put("k", "identity", Generation("kept", Usage(1, 1)))
    found = cache.get("k", "identity")
    assert found is not None and found.text == "kept"
    cache.close()


def test_a_lock_held_too_long_is_named_as_such_not_as_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "held.sqlite"
    a_cache_not_yet_in_wal_mode(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(CacheError) as caught:
            ResponseCache(path)
    finally:
        other.execute("COMMIT")
        other.close()
    message = str(caught.value)
    assert f"{path} stayed locked by another process for more than 0.2 s" in message
    assert "damaged" not in message
    ResponseCache(path).close()  # and the file is fine once the lock is let go


def test_an_error_that_is_not_damage_is_not_called_damage(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = ResponseCache(path)
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("DROP TABLE entries")  # a reason SQLite gives that is neither
    db.close()
    with pytest.raises(CacheError, match=f"cannot use the response cache {path}: .*entries"):
        len(cache)
    with pytest.raises(CacheError, match=f"cannot use the response cache {path}: .*entries"):
        cache.put("k", "identity", Generation("x", Usage(1, 1)))
    cache.close()
