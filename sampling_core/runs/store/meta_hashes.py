"""``meta.json`` read without holding its per-prompt hashes: they are handed on as they are read.

A run's ``meta.json`` keeps the content hash of every prompt (``dataset.hashes``, one
``"key": "sha256:..."`` pair a prompt). Loaded as JSON, a 1,000,000-prompt run's hashes take
about 180 MB (two strings and a dict slot a prompt). :func:`read_meta_compact` reads the file
a chunk at a time instead, parses everything else as usual, and hands each ``(key, hash)``
pair to a callback (the run index stores them on disk: :mod:`sampling_core.runs.store.index`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store.shapes import is_dataset_meta
from sampling_core.runs.store.store import FORMAT, RunDirectory

__all__ = ["AddHash", "read_meta_compact", "read_run_meta"]

_CHUNK = 1 << 16
_WHITE = " \t\n\r"

AddHash = Callable[[str, str], None]
"""Called with each prompt's key and content hash, in the file's order."""


class _Reader:
    """A JSON text read a chunk at a time; values are decoded whole, objects member by member."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle = handle
        self._buffer = ""
        self._at = 0
        self._eof = False
        self._decoder = json.JSONDecoder()

    def _more(self) -> bool:
        if self._eof:
            return False
        chunk = self._handle.read(_CHUNK)
        if not chunk:
            self._eof = True
            return False
        self._buffer = self._buffer[self._at :] + chunk
        self._at = 0
        return True

    def peek(self) -> str:
        """The next character that is not white space ('' at the end)."""
        while True:
            while self._at < len(self._buffer) and self._buffer[self._at] in _WHITE:
                self._at += 1
            if self._at < len(self._buffer):
                return self._buffer[self._at]
            if not self._more():
                return ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at {self.peek()!r}")
        self._at += 1

    def value(self) -> Any:
        """The next JSON value, whole."""
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buffer, self._at)
            except json.JSONDecodeError:
                if self._more():
                    continue
                raise
            if end < len(self._buffer) or not self._more():  # a number may go on
                self._at = end
                return value

    def members(self) -> Iterator[str]:
        """The keys of the object that starts here; the caller reads each one's value."""
        self.expect("{")
        if self.peek() == "}":
            self._at += 1
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise ValueError("an object key is not a string")
            self.expect(":")
            yield key
            if self.peek() == ",":
                self._at += 1
                continue
            self.expect("}")
            return


def read_meta_compact(path: Path, add_hash: AddHash) -> tuple[Any, bool]:
    """``meta.json``'s content with ``dataset.hashes`` replaced by ``{}``, each of whose
    pairs went to ``add_hash``; and whether the file had a ``dataset.hashes`` object.

    Raises ``OSError``, ``ValueError`` (not JSON, or hashes that are not strings) or
    ``RecursionError`` as ``json.loads`` would.
    """
    with path.open(encoding="utf-8") as handle:
        reader = _Reader(handle)
        if reader.peek() != "{":
            data = reader.value()
            found = False
        else:
            data, found = _top(reader, add_hash)
        if reader.peek() != "":
            raise ValueError("extra data after the JSON value")
    return data, found


def read_run_meta(run_dir: RunDirectory, add_hash: AddHash) -> dict[str, Any]:
    """What :meth:`RunDirectory.read_meta` returns (``dataset.hashes`` left empty), checked
    the same way, each hash handed to ``add_hash``."""
    path = run_dir.meta_file
    try:
        meta, found = read_meta_compact(path, add_hash)
    except (OSError, ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise RunDirError(f"{path} is damaged: {detail}") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise RunDirError(f"{path}: unknown run directory format")
    if not found or not is_dataset_meta(meta.get("dataset")):
        raise RunDirError(
            f"{path} is damaged: its dataset entry (count, fingerprint, "
            "hashes) is missing or malformed"
        )
    return meta


def _top(reader: _Reader, add_hash: AddHash) -> tuple[dict[str, Any], bool]:
    data: dict[str, Any] = {}
    found = False
    for key in reader.members():
        if key != "dataset" or reader.peek() != "{":
            data[key] = reader.value()
            continue
        dataset: dict[str, Any] = {}
        for name in reader.members():
            if name != "hashes" or reader.peek() != "{":
                dataset[name] = reader.value()
                continue
            found = True
            for prompt in reader.members():
                value = reader.value()
                if not isinstance(value, str):
                    raise ValueError(f"the hash of {prompt!r} is not a string")
                add_hash(prompt, value)
            dataset[name] = {}
        data[key] = dataset
    return data, found
