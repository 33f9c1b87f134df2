"""What the files of a run directory must hold to be read back: records, meta, progress.

A run reads these files back (to resume, to report); a line or file that does not have
the fields it reads, of the types it writes, is damaged and is reported as such instead of
failing somewhere later with a ``KeyError`` or ``AttributeError``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_dataset_meta", "is_progress", "is_record"]

_STATUSES = frozenset({"ok", "failed", "error"})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_record(record: Any) -> bool:
    """Whether ``record`` has the fields a run reads back, of the types it writes."""
    if not isinstance(record, dict):
        return False
    if not isinstance(record.get("key"), str) or record.get("status") not in _STATUSES:
        return False
    if not _is_int(record.get("seq", 0)) or not isinstance(record.get("content_hash", ""), str):
        return False
    attempts, usage = record.get("attempts", {}), record.get("usage", {})
    if not isinstance(attempts, dict) or not _is_int(attempts.get("used", 0)):
        return False
    if not isinstance(usage, dict):
        return False
    counts = (usage.get(k, 0) for k in ("input_tokens", "output_tokens"))
    if not all(count is None or _is_int(count) for count in counts):  # None: unknown
        return False
    failed = record.get("failed_requirements") or []
    return isinstance(failed, list) and all(isinstance(r, str) for r in failed)


def is_dataset_meta(dataset: Any) -> bool:
    """Whether ``meta.json``'s ``dataset`` entry has its count, fingerprint and hashes."""
    if not isinstance(dataset, dict) or not _is_int(dataset.get("count")):
        return False
    hashes = dataset.get("hashes")
    return (
        isinstance(dataset.get("fingerprint"), str)
        and isinstance(hashes, dict)
        and all(isinstance(v, str) for v in hashes.values())
    )


def is_progress(data: Any) -> bool:
    """Whether ``progress.json`` holds a mapping whose sessions each carry their time."""
    if not isinstance(data, dict):
        return False
    sessions = data.get("sessions", [])
    return isinstance(sessions, list) and all(
        isinstance(s, dict)
        and isinstance(s.get("elapsed_s", 0.0), int | float)
        and not isinstance(s.get("elapsed_s", 0.0), bool)
        for s in sessions
    )
