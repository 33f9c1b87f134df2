"""Two runs compared on the page: the paired comparison, and the flipped prompts side by side.

The comparison is :func:`~sampling_core.runs.reports.compare.compare_indexes` (the same numbers as
``samplehooks compare``: both runs' prompts merged by key as they are read). The prompts
that flipped (ok in one run only) are embedded with both runs' attempts, one lane per
subsample each, so the page shows them side by side whether or not they are among the
prompts its table lists.
"""

from __future__ import annotations

from typing import Any

from sampling_core.errors import exception_text
from sampling_core.runs.errors import RunError
from sampling_core.runs.reports.compare import compare_indexes
from sampling_core.runs.reports.report import row_columns, row_from
from sampling_core.runs.store.index import RunIndex
from sampling_core.view.timeline import TEXT_SHOWN, lanes_from_record

__all__ = ["compare_data"]


def compare_data(a: RunIndex, b: RunIndex, flipped: int) -> dict[str, Any]:
    """The comparison as the page embeds it: ``samplehooks compare --json``'s data plus
    ``sides``, each flipped prompt's row and attempts in both runs (the first ``flipped``
    each way, by key); ``error`` says why there is none (no prompt in both runs)."""
    try:
        comparison = compare_indexes(a, b, flipped=flipped)
    except RunError as exc:  # no prompt in common: the page still shows both runs
        return {"error": exception_text(exc), "measures": [], "sides": {}}
    data = comparison.as_dict()
    keys = [*comparison.better_in_b, *comparison.better_in_a]
    data["sides"] = {key: {"a": _side(a, key), "b": _side(b, key)} for key in keys}
    return data


def _side(index: RunIndex, key: str) -> dict[str, Any] | None:
    """One prompt's row in a run (its latest record), with its attempts as lanes."""
    found = list(
        index.query(
            f"SELECT line, {row_columns('rec')} FROM latest JOIN rec USING (line) "
            "WHERE latest.key = ?",
            (key,),
        )
    )
    if not found:
        return None
    line, *values = found[0]
    record = index.read_record(line)
    item = row_from(values).as_dict()
    text = record.text
    item["text"] = text[:TEXT_SHOWN] if text is not None else None
    item["lanes"] = lanes_from_record(record)
    return item
