"""``samplehooks view``: one self-contained HTML page of one run, or of two side by side.

The page is ``template.html`` (a data file of this package: markup, styles and a small
script that draws its charts as SVG) with the runs' data embedded as JSON. Nothing in it
loads anything from anywhere: no script, style, font or image comes from the network,
so the file opens offline, from a mail attachment or a CI artifact alike.
"""

from __future__ import annotations

import contextlib
import html
import json
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sampling_core.runs.reports.compare import FLIPPED_SHOWN
from sampling_core.runs.store.index import RunIndex
from sampling_core.view.compare import compare_data
from sampling_core.view.data import charts, indexed_run_data

__all__ = ["build_page", "indexed_page_data", "page_data", "render_page"]


def _template() -> str:
    return resources.files("sampling_core.view").joinpath("template.html").read_text("utf-8")


def page_data(paths: list[str | Path], *, whole_texts: bool = False) -> dict[str, Any]:
    """What the page embeds for the run directories in ``paths`` (one, or two to compare):
    each run's data, the histograms (the same bins for both), and the comparison; with
    ``whole_texts`` each embedded attempt's whole text, else its first 400 characters.

    Raises ``RunDirError`` naming the directory when one is not a readable run.
    """
    with contextlib.ExitStack() as stack:
        indexes = [stack.enter_context(RunIndex.open(path)) for path in paths]
        return indexed_page_data(indexes, whole_texts=whole_texts)


def indexed_page_data(indexes: list[RunIndex], *, whole_texts: bool = False) -> dict[str, Any]:
    """:func:`page_data` of runs already indexed (read once by whoever indexed them)."""
    return {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": [indexed_run_data(index, whole_texts=whole_texts) for index in indexes],
        "charts": charts(indexes),
        "compare": compare_data(*indexes, FLIPPED_SHOWN) if len(indexes) == 2 else None,
    }


def render_page(data: dict[str, Any]) -> str:
    """The page for ``data`` (as :func:`page_data` makes it)."""
    # JSON inside <script>: no "<" may appear raw, or "</script>" in an answer would end it.
    embedded = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")
    title = " vs ".join(run["name"] for run in data["runs"])
    page = _template()
    safe_title = html.escape(f"samplehooks: {title}").replace("{", "&#123;")
    page = page.replace("{{TITLE}}", safe_title)
    return page.replace("{{DATA}}", embedded)


def build_page(paths: list[str | Path], *, whole_texts: bool = False) -> str:
    """The page for the run directories in ``paths`` (one, or two to compare); with
    ``whole_texts`` each attempt's whole text, else its first 400 characters.

    Raises ``RunDirError`` naming the directory when one is not a readable run.
    """
    return render_page(page_data(paths, whole_texts=whole_texts))
