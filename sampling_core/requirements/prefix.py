"""Prefix checks read a streamed answer piece by piece, with constant work per piece.

A requirement judges a prefix in one of two ways:

* ``prefix(text_so_far) -> bool``, a plain function (the simple way, for plugin authors):
  the engine calls it with the whole text after each piece, so its work grows with the
  text (a check that scans the text makes a long answer cost the square of its length);
* ``reader``, a factory of :class:`PrefixReader` objects: the engine makes one reader per
  streamed generation and feeds it each piece's new text (and its tokens'
  log-probabilities) only; the reader keeps what it needs (a count, the last few
  characters), so its work per piece is the piece's length. The built-ins ``max_words``,
  ``max_chars``, ``not_contains`` and ``min_confidence`` are readers.

``reader(notes)`` gets ``notes``, a dict the engine keeps for that requirement for one
``sample()`` call (empty at first): what a reader learns from the call's other
generations (``min_confidence``'s calibration) lives there. A reader's
:meth:`~PrefixReader.finished` is called when its generation ran to its end (not cut).
Each built-in reader counts the characters it examined in ``scanned``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from hook_specs.records import Generation, TokenLogprob

__all__ = [
    "CharCount",
    "NeedleWatch",
    "PrefixReader",
    "ReaderFactory",
    "WholeText",
    "WordCount",
]


class PrefixReader(Protocol):
    """Judges one streamed generation as its pieces arrive."""

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        """Take one piece in: ``False`` once the text so far fails whatever may follow."""
        ...

    def finished(self, generation: Generation) -> None:
        """The generation ran to its end (it was not cut short)."""
        ...


ReaderFactory = Callable[[dict[str, Any]], PrefixReader]
"""``reader(notes)``: a reader for one streamed generation (``notes``: see the module)."""


class WholeText:
    """A plain ``prefix(text_so_far)`` function as a reader: it is given the whole text."""

    __slots__ = ("_prefix", "_text")

    def __init__(self, prefix: Callable[[str], Any]) -> None:
        self._prefix = prefix
        self._text = ""

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> Any:
        """The plain function's verdict on the text so far (checked by the engine)."""
        self._text += delta
        return self._prefix(self._text)

    def finished(self, generation: Generation) -> None:
        """Nothing to learn."""


class WordCount:
    """At most ``limit`` words so far (words split on white space, as ``str.split``)."""

    __slots__ = ("_in_word", "_limit", "scanned", "words")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._in_word = False
        self.words = 0
        self.scanned = 0

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        """Count the piece's words (one that goes on the last piece's word counts once)."""
        self.scanned += len(delta)
        pieces = delta.split()
        count = len(pieces)
        if count and self._in_word and not delta[0].isspace():
            count -= 1  # the last piece's word goes on
        self.words += count
        if delta:
            self._in_word = not delta[-1].isspace()
        return self.words <= self._limit

    def finished(self, generation: Generation) -> None:
        """Nothing to learn."""


class CharCount:
    """At most ``limit`` characters so far."""

    __slots__ = ("_limit", "chars", "scanned")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.chars = 0
        self.scanned = 0

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        """Add the piece's length."""
        self.chars += len(delta)
        return self.chars <= self._limit

    def finished(self, generation: Generation) -> None:
        """Nothing to learn."""


class NeedleWatch:
    """The text so far does not contain ``needle`` (case-insensitive unless asked):
    each piece is searched with the few characters before it that a match could span."""

    __slots__ = ("_case_sensitive", "_needle", "_tail", "scanned")

    def __init__(self, needle: str, case_sensitive: bool) -> None:
        self._needle = needle if case_sensitive else needle.lower()
        self._case_sensitive = case_sensitive
        self._tail = ""
        self.scanned = 0

    def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
        """Search the piece, and the end of the text before it."""
        piece = delta if self._case_sensitive else delta.lower()
        window = self._tail + piece
        self.scanned += len(window)
        if self._needle in window:
            return False
        keep = len(self._needle) - 1
        self._tail = window[-keep:] if keep > 0 else ""
        return True

    def finished(self, generation: Generation) -> None:
        """Nothing to learn."""
