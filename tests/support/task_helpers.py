"""Counting live tasks under asyncio or trio, to prove nothing outlives ``sample()``."""

from __future__ import annotations

import asyncio


def alive_tasks() -> set:
    """Every task alive now (asyncio or trio): compare a snapshot before and after."""
    try:
        return {t for t in asyncio.all_tasks() if not t.done()}
    except RuntimeError:
        pass
    import trio

    found = set()

    def walk(task) -> None:
        found.add(task)
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child)

    walk(trio.lowlevel.current_root_task())
    return found
