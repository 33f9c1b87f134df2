"""``samplehooks view``: one self-contained HTML page of one run, or of two side by side.

The page is ``template.html`` (a data file of this package: markup, styles and a small
script that draws its charts as SVG) with the runs' data embedded as JSON. Nothing in it
loads anything from anywhere: no script, style, font or image comes from the network,
so the file opens offline, from a mail attachment or a CI artifact alike.
"""

from __future__ import annotations

import html
import json
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from sampling_core.view.data import run_data

__all__ = ["build_page", "render_page"]


def _template() -> str:
    return resources.files("sampling_core.view").joinpath("template.html").read_text("utf-8")


def render_page(runs: list[dict[str, Any]]) -> str:
    """The page for ``runs`` (the data of :func:`~sampling_core.view.data.run_data`)."""
    data = {
        "generated": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
    }
    # JSON inside <script>: no "<" may appear raw, or "</script>" in an answer would end it.
    embedded = json.dumps(data, ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")
    title = " vs ".join(run["name"] for run in runs)
    page = _template()
    safe_title = html.escape(f"samplehooks: {title}").replace("{", "&#123;")
    page = page.replace("{{TITLE}}", safe_title)
    return page.replace("{{DATA}}", embedded)


def build_page(paths: list[str | Path], *, whole_texts: bool = False) -> str:
    """The page for the run directories in ``paths`` (one, or two to compare); with
    ``whole_texts`` each attempt's whole text, else its first 400 characters.

    Raises ``RunDirError`` naming the directory when one is not a readable run.
    """
    return render_page([run_data(path, whole_texts=whole_texts) for path in paths])
