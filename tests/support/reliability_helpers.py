"""Helpers of the reliability tests: the CLI as a user runs it, and what a refusal looks like."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from sampling_core.cli import app

runner = CliRunner()


def invoke(*args: Any, env: dict[str, str] | None = None, input: str | None = None) -> Any:
    """Run ``samplehooks ARGS`` in this process, stdout and stderr apart (``input`` is stdin)."""
    return runner.invoke(app, [str(a) for a in args], env=env, input=input)


def assert_refused(result: Any, *fragments: str, prefix: str = "samplehooks: error: ") -> str:
    """Exit status 2, nothing on stdout, ONE line on stderr holding every fragment.

    ``result`` is an in-process run (:func:`invoke`) or a finished subprocess
    (``subprocess.CompletedProcess`` with text output). Returns that line.
    """
    if isinstance(result, subprocess.CompletedProcess):
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    else:
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(
            result.exception
        )
        assert result.exit_code == 2, (result.exit_code, result.output)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith(prefix), line
    assert "Traceback" not in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every file and folder under ``directory`` (files with their bytes): a "nothing
    written" check compares two of these."""
    if not directory.exists():
        return {}
    return {
        str(p.relative_to(directory)): p.read_bytes() if p.is_file() else None
        for p in sorted(directory.rglob("*"))
    }
