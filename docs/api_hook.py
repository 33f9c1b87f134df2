"""MkDocs hook: Sphinx cross-reference roles in docstrings, shown as plain code.

The docstrings use ``:class:`Sampler``` and ``:meth:`~Sampler.sample``` (read by Python's
help and by IDEs); mkdocstrings renders Markdown, where the role's name would be printed
as text before the code. This keeps the code and drops the role (and a leading ``~``
keeps only the last dotted part, as Sphinx does).
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|mod|attr|exc|data|obj):<code>(~?)([^<]+)</code>")


def _plain(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"<code>{target.rsplit('.', 1)[-1] if tilde else target}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    """Replace ``:role:<code>target</code>`` with ``<code>target</code>``."""
    return _ROLE.sub(_plain, html)
