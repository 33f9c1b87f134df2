"""File helpers of the run directory: finding the last whole line, clearing stale staging."""

from __future__ import annotations

import contextlib
import os
import shutil
from glob import escape as glob_escape
from pathlib import Path

from filelock import FileLock, Timeout

__all__ = ["after_last_newline", "remove_stale_staging"]


def after_last_newline(path: Path, size: int) -> int:
    """The offset just after the last newline of the file (0 when it has none)."""
    with open(path, "rb") as handle:
        end = size
        while end > 0:
            start = max(0, end - 65536)
            handle.seek(start)
            found = handle.read(end - start).rfind(b"\n")
            if found >= 0:
                return start + found + 1
            end = start
    return 0


def remove_stale_staging(parent: Path, name: str, tag: str = "init") -> None:
    """Remove staging folders of ``name`` (``.NAME.TAG-PID``) left by a process killed
    while it built them: a run creating its directory (``init``), a rescore (``rescore``).
    A staging folder is in use while its ``.lock`` is held; those are left alone."""
    for staging in parent.glob(f".{glob_escape(name)}.{tag}-*"):
        if staging.name.endswith(".lock"):
            staging = staging.with_name(staging.name.removesuffix(".lock"))
        if staging.is_symlink() or (staging.exists() and not staging.is_dir()):
            continue
        lock = FileLock(f"{staging}.lock", timeout=0, thread_local=False)
        try:
            lock.acquire()
        except Timeout:
            continue  # another process is building it right now
        try:
            shutil.rmtree(staging, ignore_errors=True)
        finally:
            lock.release()
            with contextlib.suppress(OSError):
                os.unlink(f"{staging}.lock")
