"""``samplehooks view``: a run (or two, compared) as one self-contained offline HTML page.

This package's ``__all__`` is its public surface; its modules are internal.
"""

from sampling_core.view.data import run_data
from sampling_core.view.page import build_page, page_data, render_page

__all__ = ["build_page", "page_data", "render_page", "run_data"]
