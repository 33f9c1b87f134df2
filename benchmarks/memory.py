"""This process's memory, as the operating system counts it (Linux)."""

from __future__ import annotations

import os
import resource

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """Resident memory now, in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 1e6


def peak_rss_mb() -> float:
    """The highest resident memory so far, in MB (``ru_maxrss`` is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6
