"""Running a benchmark module the way its tests do: ``python -m benchmarks.X --quick``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def quick_report(module: str) -> dict[str, Any]:
    """Run ``python -m <module> --quick`` from the checkout; the JSON of its last line
    (the report the benchmark prints after its table). Fails the test when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])
