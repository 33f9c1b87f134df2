"""Rows, checks against the targets, the printed table and the JSON line."""

from __future__ import annotations

import json
import math
import operator
import os
import platform
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

IMPLEMENTATIONS = ("engine", "bare", "mellea")
HEADERS = {"engine": "engine", "bare": "bare loop", "mellea": "Mellea 0.8"}
FLOOR = "floor"
"""Where a scenario measures it: the least that one asyncio task per subsample can take."""
_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, "==": operator.eq}


@dataclass(slots=True)
class Check:
    """One target: ``label`` (the measured quantity) ``op`` ``bound``."""

    label: str
    value: float | None
    op: str
    bound: float

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None`` when the value could not be measured)."""
        if self.value is None or math.isnan(self.value):
            return None
        return bool(_OPS[self.op](self.value, self.bound))

    def render(self) -> str:
        """E.g. ``Mellea/engine 9.10 >= 8 ok``."""
        verdict = {True: "ok", False: "MISSED", None: "n/a"}[self.met]
        value = "n/a" if self.value is None else _number(self.value)
        return f"{self.label} {value} {self.op} {_number(self.bound)} {verdict}"


@dataclass(slots=True)
class Row:
    """One line of the table: a scenario's setting, one metric, one value per implementation."""

    scenario: str
    setting: str
    metric: str
    values: dict[str, float | None]
    checks: list[Check] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    paired: dict[str, float | None] = field(default_factory=dict)
    """Medians of per-repetition ratios (``"engine/bare"``, ``"mellea/engine"``), where the
    implementations were timed back to back; beside :meth:`ratio`, the ratio of medians."""

    def ratio(self, top: str, bottom: str) -> float | None:
        """``values[top] / values[bottom]``, or ``None`` when either is missing."""
        a, b = self.values.get(top), self.values.get(bottom)
        if a is None or b is None or b == 0:
            return None
        return a / b


def _number(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _paired(row: Row, name: str) -> str:
    return _number(row.paired[name]) if name in row.paired else "-"


def render_table(rows: list[Row]) -> str:
    """The rows as a Markdown table (also readable in a terminal).

    Each ratio column (the ratio of the two medians) is followed by a "paired" one: the
    median of the per-repetition ratios ("-" where the row has none).
    """
    header = [
        "scenario",
        "setting",
        "metric",
        *(HEADERS[i] for i in IMPLEMENTATIONS),
        "engine/bare",
        "paired",
        "Mellea/engine",
        "paired ",
        "asyncio floor",
        "targets",
    ]
    lines = [header]
    for row in rows:
        lines.append(
            [
                row.scenario,
                row.setting,
                row.metric,
                *(_number(row.values.get(i)) for i in IMPLEMENTATIONS),
                _number(row.ratio("engine", "bare")),
                _paired(row, "engine/bare"),
                _number(row.ratio("mellea", "engine")),
                _paired(row, "mellea/engine"),
                _number(row.values[FLOOR]) if FLOOR in row.values else "-",
                "; ".join(c.render() for c in row.checks) or "-",
            ]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    out = [fmt(lines[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(fmt(line) for line in lines[1:])
    return "\n".join(out)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "versions": {name: _version(name) for name in ("samplehooks", "anyio", "pluggy", "mellea")},
    }


def summary(rows: list[Row]) -> dict[str, int]:
    """How many targets were met, missed, or could not be measured."""
    counts = {"met": 0, "missed": 0, "n/a": 0}
    for row in rows:
        for check in row.checks:
            counts[{True: "met", False: "missed", None: "n/a"}[check.met]] += 1
    return counts


def json_line(rows: list[Row], settings: dict[str, Any], started: dict[str, Any]) -> str:
    """Everything as one line of JSON."""
    payload = {
        "benchmark": "samplehooks",
        "machine": started,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "settings": settings,
        "summary": summary(rows),
        "rows": [
            {**asdict(row), "checks": [{**asdict(c), "met": c.met} for c in row.checks]}
            for row in rows
        ],
    }
    return json.dumps(payload, separators=(",", ":"), default=str)
