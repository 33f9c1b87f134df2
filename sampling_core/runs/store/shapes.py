"""What a run directory's meta and progress files must hold to be read back (records:
:func:`sampling_core.runs.store.record.read_record`).

A run reads these files back (to resume, to report); a line or file that does not have
the fields it reads, of the types it writes, is damaged and is reported as such instead of
failing somewhere later with a ``KeyError`` or ``AttributeError``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_dataset_meta", "is_progress"]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
