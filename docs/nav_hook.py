"""MkDocs hook: put every page that ``mkdocs.yml``'s nav does not list into the nav.

Pages under ``docs/plugins/`` go into the "Built-in plugins" section and every other
unlisted page into "Guides", sorted by path, so a new page needs no edit to ``mkdocs.yml``.
Sections left empty are dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

SECTIONS = {"plugins": "Built-in plugins"}
DEFAULT_SECTION = "Guides"


def _listed(nav: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(nav, str):
        found.add(nav)
    elif isinstance(nav, list):
        for item in nav:
            found |= _listed(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            found |= _listed(value)
    return found


def on_config(config: Any) -> Any:
    """Fill the nav's sections with the pages it does not list yet."""
    nav = config.get("nav")
    if not nav:
        return config
    docs = Path(config["docs_dir"])
    listed = _listed(nav)
    extra: dict[str, list[str]] = {}
    for page in sorted(docs.rglob("*.md")):
        path = page.relative_to(docs).as_posix()
        if path in listed:
            continue
        section = SECTIONS.get(path.split("/", 1)[0], DEFAULT_SECTION) if "/" in path else None
        extra.setdefault(section or DEFAULT_SECTION, []).append(path)
    filled = []
    for item in nav:
        if isinstance(item, dict) and len(item) == 1:
            ((title, children),) = item.items()
            if isinstance(children, list):
                children = [*children, *extra.pop(title, [])]
                if not children:
                    continue
                item = {title: children}
        filled.append(item)
    for title, pages in extra.items():  # a section mkdocs.yml does not name
        filled.append({title: pages})
    config["nav"] = filled
    return config
