"""Regular expressions that cannot hang: user patterns run on RE2, in time linear in the text.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` on a long line of ``a`` followed by
``b`` runs for hours, holding the event loop (every subsample, every plugin, the flush
timer) the whole time. Patterns given by users (the ``matches`` requirement, in Python, in a
run config or on the command line) are compiled with RE2 (the ``google-re2`` package),
which never backtracks. RE2 has no lookaround and no backreferences; a pattern using them is
refused when it is given, with a message saying so (write such a check as a function).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import re2

from sampling_core.errors import exception_text

__all__ = ["LinearPattern", "compile_linear"]

_INLINE = {re.IGNORECASE: "i", re.MULTILINE: "m", re.DOTALL: "s"}
_SUPPORTED = re.IGNORECASE | re.MULTILINE | re.DOTALL | re.UNICODE


class LinearPattern(Protocol):
    """What :func:`compile_linear` returns: ``search`` as ``re.Pattern.search``."""

    def search(self, text: str) -> Any:
        """The first match in ``text``, or ``None``."""
        ...


def compile_linear(pattern: str, flags: int = 0) -> LinearPattern:
    """``pattern`` compiled for linear-time matching; ``flags``: ``re.I``, ``re.M``, ``re.S``.

    Raises ``ValueError`` naming the problem for a pattern RE2 cannot run.
    """
    if flags & ~_SUPPORTED:
        raise ValueError(
            "only the flags re.IGNORECASE, re.MULTILINE and re.DOTALL are supported "
            "(patterns run on RE2, in linear time)"
        )
    inline = "".join(letter for flag, letter in _INLINE.items() if flags & flag)
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(f"(?{inline}){pattern}" if inline else pattern, options)
    except re2.error as exc:
        detail = (
            exc.args[0].decode("utf-8", "replace")
            if exc.args and isinstance(exc.args[0], bytes)
            else exception_text(exc)
        )
        hint = ""
        if any(token in pattern for token in ("(?=", "(?!", "(?<=", "(?<!")) or re.search(
            r"\\[1-9]", pattern
        ):
            hint = "; lookaround and backreferences are not supported: write a check function"
        raise ValueError(f"not a valid regular expression for RE2 ({detail}){hint}") from None
