"""``docs/reliability.md`` names a test for every guarantee: each one it names must exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reliability.md"


def test_every_test_the_reliability_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:\w+/)*test_\w+\.py)::(test_\w+)`", text))
    assert len(named) >= 30
    missing = []
    for filename, test in sorted(named):
        source = ROOT / "tests" / filename
        found = source.is_file() and re.search(
            rf"^(async )?def {test}\(", source.read_text(encoding="utf-8"), re.M
        )
        if not found:
            missing.append(f"{filename}::{test}")
    assert missing == []


def test_every_guarantee_row_names_a_test() -> None:
    rows = [
        line
        for line in PAGE.read_text(encoding="utf-8").splitlines()
        if line.startswith("| ") and not line.startswith(("| Guarantee", "|---"))
    ]
    assert rows
    unproved = [row for row in rows if "test" not in row.rsplit("|", 2)[-2]]
    assert unproved == []
