"""How big one record may get: long texts and long attempt lists are cut, with a note.

One prompt at ``concurrency_budget=1024`` (or a model that does not stop) could otherwise
write a line of a hundred megabytes, which every later read of ``records.jsonl`` (resume,
``report``, ``view``) would have to hold. :func:`cap_record` is applied to every record just
before it is written (by :class:`~sampling_core.runs.store.store.RecordWriter`), whatever fields
the record format holds:

- a string longer than :data:`MAX_TEXT_CHARS` keeps its first that many characters;
- a list longer than :data:`MAX_LIST_ITEMS` (per-attempt entries) keeps its first that many;

and each cut is named in the record's ``capped`` list (``"text: 250000 chars, 100000
kept"``), so a reader knows the record is partial. Counts (``attempts.used``, usage) are
never cut: they are computed before the cap.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_LIST_ITEMS", "MAX_TEXT_CHARS", "cap_record"]

MAX_TEXT_CHARS = 100_000
MAX_LIST_ITEMS = 1_000


def cap_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with over-long strings and lists cut, and the cuts listed in ``capped``
    (the record itself when nothing is over a cap)."""
    notes: list[str] = []
    capped = _cap(record, "", notes)
    if not notes:
        return record
    capped["capped"] = [*record.get("capped", []), *notes]
    return capped


def _cap(value: Any, path: str, notes: list[str]) -> Any:
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            notes.append(f"{path}: {len(value)} chars, {MAX_TEXT_CHARS} kept")
            return value[:MAX_TEXT_CHARS]
        return value
    if isinstance(value, dict):
        return {k: _cap(v, f"{path}.{k}" if path else str(k), notes) for k, v in value.items()}
    if isinstance(value, list):
        if len(value) > MAX_LIST_ITEMS:
            notes.append(f"{path}: {len(value)} entries, the first {MAX_LIST_ITEMS} kept")
            value = value[:MAX_LIST_ITEMS]
        return [_cap(v, f"{path}[]", notes) for v in value]
    return value
