"""Two runs side by side: the prompts whose outcome differs, matched by key.

Both runs' latest records are read in key order and merged as they come, so comparing two
runs of a million prompts holds only the differing prompts the page lists.
"""

from __future__ import annotations

import json
from typing import Any

from sampling_core.runs.index import RunIndex

__all__ = ["compare_runs"]

_BY_KEY = "SELECT rec.key, status, unmet FROM latest JOIN rec USING (line) ORDER BY rec.key"


def compare_runs(a: RunIndex, b: RunIndex, limit: int) -> dict[str, Any]:
    """How many prompts both runs have, how many only the first has, how many differ in
    outcome, and the first ``limit`` of those (by key)."""
    both = only_a = differ = 0
    shown: list[dict[str, Any]] = []
    rows_b = b.query(_BY_KEY)
    other = next(rows_b, None)
    for key, status, unmet in a.query(_BY_KEY):
        while other is not None and other[0] < key:
            other = next(rows_b, None)
        if other is None or other[0] != key:
            only_a += 1
            continue
        both += 1
        if other[1] != status:
            differ += 1
            if len(shown) < limit:
                shown.append(
                    {
                        "key": key,
                        "a": status,
                        "b": other[1],
                        "a_unmet": json.loads(unmet),
                        "b_unmet": json.loads(other[2]),
                    }
                )
    return {"both": both, "only_a": only_a, "differ": differ, "rows": shown}
