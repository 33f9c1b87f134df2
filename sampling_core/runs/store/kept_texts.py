"""Every attempt's whole text, kept beside the records in ``texts.jsonl``.

A record keeps the first :data:`TEXT_KEPT` characters of each attempt's text, so that
reading a run (resume, ``report``, ``view``) stays fast however long the answers are. The
whole texts go to ``texts.jsonl``, one line per record that has attempts, written just
before the record's own line::

    {"seq": 7, "key": "p3", "sampling_id": "9f2c...", "texts": [
        {"subsample": 0, "attempt": 1, "text": "..."},
        {"subsample": 0, "attempt": 2, "text": "...", "messages": [...]}]}

``seq`` and ``sampling_id`` are the record's; ``messages`` is the request an attempt sent
when it was not the prompt itself (a repaired attempt's). A text longer than
:data:`MAX_KEPT_CHARS` keeps that many characters and the cut is named in the line's
``capped`` list.

Crash safety follows the records': both files are appended in whole lines, the texts
first, so a record is never on disk before its texts. A run killed between the two writes
leaves text lines of records that were never written at the end of ``texts.jsonl``
(and possibly a torn last line); a resume cuts them off (:func:`repair_texts`) before it
appends, so every ``seq`` in the file belongs to the record of that ``seq``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store.files import after_last_newline

__all__ = [
    "MAX_KEPT_CHARS",
    "TEXTS_FILE",
    "TEXT_KEPT",
    "TextsJoin",
    "iter_texts",
    "repair_texts",
    "split_texts",
    "texts_of_calls",
]

TEXTS_FILE = "texts.jsonl"
MAX_KEPT_CHARS = 1_000_000
"""The characters of one attempt's text ``texts.jsonl`` keeps (a model that never stops)."""
TEXT_KEPT = 400
"""The characters of each attempt's text the record itself keeps (its preview)."""

_SEQ = re.compile(rb'^\{"seq": ?(\d+)')


def split_texts(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The record as written (each attempt's text cut to its preview, no messages) and its
    ``texts.jsonl`` line (``None`` when no attempt has a text)."""
    attempts = record.get("attempts")
    each = attempts.get("each") if isinstance(attempts, dict) else None
    if not each or not any(isinstance(e, dict) and "text" in e for e in each):
        return record, None
    kept: list[dict[str, Any]] = []
    capped: list[str] = []
    previews: list[Any] = []
    for entry in each:
        if not isinstance(entry, dict) or "text" not in entry:
            previews.append(entry)
            continue
        text = entry["text"]
        whole: dict[str, Any] = {
            "subsample": entry.get("subsample"),
            "attempt": entry.get("attempt"),
        }
        if isinstance(text, str) and len(text) > MAX_KEPT_CHARS:
            capped.append(
                f"subsample {whole['subsample']}, attempt {whole['attempt']}: "
                f"{len(text)} chars, {MAX_KEPT_CHARS} kept"
            )
            text = text[:MAX_KEPT_CHARS]
        whole["text"] = text
        if "messages" in entry:
            whole["messages"] = entry["messages"]
        kept.append(whole)
        preview = {k: v for k, v in entry.items() if k != "messages"}
        if isinstance(text, str) and len(text) > TEXT_KEPT:
            preview["text"] = text[:TEXT_KEPT]
        previews.append(preview)
    line: dict[str, Any] = {
        "seq": record.get("seq", 0),
        "key": record.get("key"),
        "sampling_id": record.get("sampling_id"),
        "texts": kept,
    }
    if capped:
        line["capped"] = capped
    written = {**record, "attempts": {**attempts, "each": previews}}
    return written, line


def iter_texts(
    path: Path, on_bad: Callable[[int, str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The complete lines of ``texts.jsonl``, a line at a time (none when it is missing).

    A torn last line (no newline: a run killed while writing it) is left out. A damaged
    complete line raises :class:`RunDirError` naming it, or is passed to ``on_bad(line
    number, why)`` and skipped when that is given.
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                return
            line = _parse(raw)
            if line is None:
                why = "not a line of kept texts"
                if on_bad is None:
                    raise RunDirError(
                        f"{path}:{number} is damaged ({why}); remove that line (the attempts "
                        "of its record then have no whole text) or restore the file"
                    )
                on_bad(number, why)
                continue
            yield line


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        line = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(line, dict) or not isinstance(line.get("seq"), int):
        return None
    texts = line.get("texts")
    if not isinstance(texts, list) or not all(
        isinstance(t, dict) and isinstance(t.get("text"), str) for t in texts
    ):
        return None
    return line


def by_attempt(line: dict[str, Any]) -> dict[tuple[int, int], dict[str, Any]]:
    """A texts line's entries by ``(subsample, attempt)``."""
    return {(t.get("subsample"), t.get("attempt")): t for t in line["texts"]}  # type: ignore[misc]


class TextsJoin:
    """The texts of records read in ``seq`` order, from one pass over ``texts.jsonl``.

    :meth:`get` must be asked with rising ``seq`` (the order records are written in).
    """

    def __init__(self, path: Path, on_bad: Callable[[int, str], None] | None = None) -> None:
        self._lines = iter_texts(path, on_bad)
        self._next: dict[str, Any] | None = next(self._lines, None)

    def get(self, seq: int, sampling_id: Any) -> dict[tuple[int, int], dict[str, Any]] | None:
        """The whole texts of the record ``seq`` (by ``(subsample, attempt)``), or ``None``
        when the file holds none for it."""
        while self._next is not None and self._next["seq"] < seq:
            self._next = next(self._lines, None)
        line = self._next
        if line is None or line["seq"] != seq or line.get("sampling_id") != sampling_id:
            return None
        return by_attempt(line)


def texts_of_calls(
    path: Path,
    sampling_ids: set[str],
    on_bad: Callable[[int, str], None] | None = None,
) -> dict[str, dict[tuple[int, int], dict[str, Any]]]:
    """The whole texts of the calls in ``sampling_ids``, by call and ``(subsample, attempt)``
    (damaged lines are skipped, and given to ``on_bad(line number, why)`` when it is given:
    readers that show a run tolerate them, and may say so)."""
    found: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    if not sampling_ids:
        return found
    for line in iter_texts(path, on_bad=on_bad or (lambda number, why: None)):
        sampling_id = line.get("sampling_id")
        if sampling_id in sampling_ids:
            found[sampling_id] = by_attempt(line)
    return found


def repair_texts(path: Path, last_seq: int) -> int:
    """End ``texts.jsonl`` at its last whole line of a record that was written (``seq`` at
    most ``last_seq``): a torn tail and the texts of records a crash kept from being
    written are dropped. Returns the bytes dropped (0 when there is nothing to drop or no
    file). Reads the end of the file only."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    end = after_last_newline(path, size)  # after it: a torn line
    with open(path, "rb") as handle:
        while end > 0:
            start = after_last_newline(path, end - 1)  # the last whole line's start
            handle.seek(start)
            found = _SEQ.match(handle.read(32))
            if found is None:  # not written by us: parsed whole, and kept if unreadable
                handle.seek(start)
                line = _parse(handle.read(end - start))
                if line is None or line["seq"] <= last_seq:
                    break
            elif int(found.group(1)) <= last_seq:
                break
            end = start
    if end < size:
        os.truncate(path, end)
    return size - end
