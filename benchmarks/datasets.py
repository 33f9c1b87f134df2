"""The synthetic datasets the run benchmarks sample: short prompts, written in chunks."""

from __future__ import annotations

from pathlib import Path


def write_prompts(path: Path, count: int, *, ids: bool) -> Path:
    """``count`` short prompts, one JSON line each; with ``ids`` each has an ``id`` field
    (``q0``, ``q1``, ...), else they are keyed by line number (no id to check twice)."""
    with path.open("w", encoding="utf-8") as out:
        for start in range(0, count, 10_000):
            out.writelines(
                "{"
                + (f'"id": "q{i}", ' if ids else "")
                + f'"prompt": "Question number {i}: name a colour."}}\n'
                for i in range(start, min(start + 10_000, count))
            )
    return path
