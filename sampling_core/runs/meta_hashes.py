"""``meta.json`` read without holding its per-prompt hashes: a few bytes a prompt, never the text.

A run's ``meta.json`` keeps the content hash of every prompt (``dataset.hashes``, one
``"key": "sha256:..."`` pair a prompt). Loaded as JSON, a 1,000,000-prompt run's hashes take
about 180 MB (two strings and a dict slot a prompt). :func:`read_meta_compact` reads the file
a chunk at a time instead, parses everything else as usual, and keeps the hashes as
:class:`RunHashes`: sorted 64-bit digests of each key and of each ``(key, hash)`` pair,
16 bytes a prompt. That answers what the summary and the integrity checks ask: is this key
one of the run's, and is this its content hash.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from sampling_core.runs.errors import RunDirError
from sampling_core.runs.shapes import is_dataset_meta
from sampling_core.runs.store import FORMAT, RunDirectory

__all__ = ["RunHashes", "read_meta_compact", "read_run_meta"]

_CHUNK = 1 << 16
_SORTED_RUN = 1 << 16  # digests sorted a run at a time, then merged: no list of them all
_WHITE = " \t\n\r"


def _digest(*parts: str) -> int:
    data = "\u0000".join(parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest())


class _SortedDigests:
    """A set of 64-bit digests: sorted arrays merged at the end (8 bytes each)."""

    def __init__(self) -> None:
        self._runs: list[array[int]] = []
        self._open: array[int] = array("Q")
        self.values: array[int] = array("Q")

    def add(self, digest: int) -> None:
        self._open.append(digest)
        if len(self._open) >= _SORTED_RUN:
            self._close_run()

    def _close_run(self) -> None:
        if self._open:
            self._runs.append(array("Q", sorted(self._open)))
            self._open = array("Q")

    def seal(self) -> None:
        self._close_run()
        self.values = array("Q", heapq.merge(*self._runs))
        self._runs = []

    def __contains__(self, digest: int) -> bool:
        index = bisect_left(self.values, digest)
        return index < len(self.values) and self.values[index] == digest


class RunHashes:
    """The run's prompts, as digests: which keys are the run's, and each one's content hash.

    Two different keys (or pairs) share a 64-bit digest with odds of about one in 10^7 for
    a 1,000,000-prompt run; such a collision could only make a foreign record count.
    """

    def __init__(self) -> None:
        self._keys = _SortedDigests()
        self._pairs = _SortedDigests()
        self.count = 0

    def add(self, key: str, content_hash: str) -> None:
        """Note one prompt (while reading ``meta.json``)."""
        self._keys.add(_digest(key))
        self._pairs.add(_digest(key, content_hash))
        self.count += 1

    def seal(self) -> RunHashes:
        """Done adding: sort for look-ups."""
        self._keys.seal()
        self._pairs.seal()
        return self

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _digest(key) in self._keys

    def __len__(self) -> int:
        return self.count

    def matches(self, key: str, content_hash: Any) -> bool:
        """Whether ``content_hash`` is the run's hash of the prompt ``key``."""
        return isinstance(content_hash, str) and _digest(key, content_hash) in self._pairs

    @classmethod
    def of(cls, pairs: Iterator[tuple[str, str]]) -> RunHashes:
        """From ``(key, hash)`` pairs."""
        hashes = cls()
        for key, value in pairs:
            hashes.add(key, value)
        return hashes.seal()


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


def read_meta_compact(path: Path) -> tuple[Any, RunHashes | None]:
    """``meta.json``'s content with ``dataset.hashes`` replaced by ``{}``, and the hashes
    as :class:`RunHashes` (``None`` when the file has no ``dataset.hashes`` object).

    Raises ``OSError``, ``ValueError`` (not JSON, or hashes that are not strings) or
    ``RecursionError`` as ``json.loads`` would.
    """
    with path.open(encoding="utf-8") as handle:
        reader = _Reader(handle)
        if reader.peek() != "{":
            data = reader.value()
            hashes = None
        else:
            data, hashes = _top(reader)
        if reader.peek() != "":
            raise ValueError("extra data after the JSON value")
    return data, hashes


def read_run_meta(run_dir: RunDirectory) -> tuple[dict[str, Any], RunHashes]:
    """What :meth:`RunDirectory.read_meta` returns (``dataset.hashes`` left empty), checked
    the same way, with the hashes as :class:`RunHashes`."""
    path = run_dir.meta_file
    try:
        meta, hashes = read_meta_compact(path)
    except (OSError, ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise RunDirError(f"{path} is damaged: {detail}") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise RunDirError(f"{path}: unknown run directory format")
    if hashes is None or not is_dataset_meta(meta.get("dataset")):
        raise RunDirError(
            f"{path} is damaged: its dataset entry (count, fingerprint, "
            "hashes) is missing or malformed"
        )
    return meta, hashes


def _top(reader: _Reader) -> tuple[dict[str, Any], RunHashes | None]:
    data: dict[str, Any] = {}
    hashes: RunHashes | None = None
    for key in reader.members():
        if key != "dataset" or reader.peek() != "{":
            data[key] = reader.value()
            continue
        dataset: dict[str, Any] = {}
        for name in reader.members():
            if name != "hashes" or reader.peek() != "{":
                dataset[name] = reader.value()
                continue
            hashes = RunHashes()
            for prompt in reader.members():
                value = reader.value()
                if not isinstance(value, str):
                    raise ValueError(f"the hash of {prompt!r} is not a string")
                hashes.add(prompt, value)
            hashes.seal()
            dataset[name] = {}
        data[key] = dataset
    return data, hashes
