"""Writing a file a command makes (a view page, a report): never through a link, never over a
run's own files, never half-written.

:func:`write_output` (or :func:`output_file`, to write a piece at a time) is the one way a
samplehooks command writes a file the user named or that it names itself (``view``'s
``RUN/view.html``, ``rescore``'s ``NEW_DIR/report.json``). Before anything is written it
refuses, with one line saying what to do:

- a path that is a symbolic link (it would write wherever the link points, perhaps outside
  the run): samplehooks neither writes through one nor replaces it;
- a file of a run directory (``records.jsonl``, ``meta.json``, ``events.jsonl``,
  ``effective_config.yaml``, ``progress.json``, the lock, their temporary twins) in any
  directory that holds a run;
- an existing file that is not of the kind written (not an ``.html`` page for the view): a
  dataset, a config or a record file named by mistake is never overwritten;
- an existing directory, device or pipe.

Then it writes the whole text to a new temporary file beside the target (created
exclusively, never through a link) and renames it over the target: a reader sees the old
file or the new one, never a part, and a failure leaves the old file as it was.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from sampling_core.errors import exception_text
from sampling_core.runs.errors import RunError
from sampling_core.runs.store.store import RUN_FILES

__all__ = ["OutputRefused", "check_output", "output_file", "write_output"]


class OutputRefused(RunError):
    """A command was asked to write where it must not (the message says where and why)."""


def write_output(path: Path, text: str, *, suffixes: Sequence[str], what: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically, or refuse (:class:`OutputRefused`).

    ``suffixes``: the file names an existing file may have to be replaced (``(".html",)``);
    ``what``: the kind of output, for messages (``"view page"``). Missing parent directories
    are made. ``OSError`` (no permission, a full disk) is raised as :class:`OutputRefused`
    naming the path; the target is left as it was.
    """
    with output_file(path, suffixes=suffixes, what=what) as handle:
        handle.write(text)


@contextlib.contextmanager
def output_file(path: Path, *, suffixes: Sequence[str], what: str) -> Iterator[TextIO]:
    """A text file (UTF-8) to write ``path``'s content to, a piece at a time: a new temporary
    file beside ``path``, renamed over it when the block ends without an error (else removed,
    ``path`` left as it was). Refuses as :func:`write_output` does."""
    check_output(path, suffixes=suffixes, what=what)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        check_output(path, suffixes=suffixes, what=what)  # again, just before writing
        with _replacing(path) as handle:
            yield handle
    except OSError as exc:
        raise OutputRefused(f"cannot write {path}: {exc.strerror or exception_text(exc)}") from exc


def check_output(path: Path, *, suffixes: Sequence[str], what: str) -> None:
    """Raise :class:`OutputRefused` when :func:`write_output` would refuse ``path`` (to
    refuse before the work of making the output)."""
    if path.is_symlink():
        raise OutputRefused(
            f"{path} is a symbolic link (to {os.readlink(path)}); samplehooks does not write "
            f"a {what} through or over a link: remove it, or give another path with -o "
            "(nothing was written)"
        )
    if path.name in RUN_FILES and _holds_a_run(path.parent):
        raise OutputRefused(
            f"{path} is a file of the run in {path.parent}; a {what} never replaces a run's "
            "own files: give another path with -o (nothing was written)"
        )
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputRefused(f"cannot write {path}: {exc.strerror or exception_text(exc)}") from exc
    if not stat.S_ISREG(mode):
        raise OutputRefused(
            f"{path} exists and is not a file; give the path of a {what} to write with -o "
            "(nothing was written)"
        )
    if path.suffix.lower() not in {s.lower() for s in suffixes}:
        kinds = " or ".join(suffixes)
        raise OutputRefused(
            f"{path} exists and is not a {what} ({kinds}); samplehooks does not overwrite "
            "it: give another path with -o (nothing was written)"
        )


def _holds_a_run(directory: Path) -> bool:
    return any((directory / name).is_file() for name in RUN_FILES)


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[TextIO]:
    """A fresh temporary file beside ``path``, renamed over ``path`` at the end."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with open(fd, "w", encoding="utf-8", newline="") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)  # a link planted at `path` meanwhile is replaced, not followed
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
