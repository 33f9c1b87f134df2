"""Text from a model never drives the terminal: ``--json`` escapes what ``printable`` escapes
(C1 controls, DEL, bidi overrides: ``json.dumps(ensure_ascii=False)`` leaves them raw) and
stays valid JSON; ``sample``'s answer on stdout is :func:`printable`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sampling_core.cli.app import app
from sampling_core.redaction import json_text, one_json_line, printable

runner = CliRunner()

# Every character printable() escapes that json.dumps(ensure_ascii=False) leaves raw.
RAW_IN_JSON = [chr(c) for c in range(0x7F, 0xA0)] + [
    "\u061c", "\u200e", "\u200f", "\u2028", "\u2029", "\u202e", "\u2066", "\u2069",
]  # fmt: skip


@pytest.mark.parametrize("char", RAW_IN_JSON, ids=lambda c: f"U+{ord(c):04X}")
@pytest.mark.parametrize("indent", [None, 2])
def test_json_text_escapes_every_character_printable_escapes(char: str, indent: int | None) -> None:
    data = {"answer": f"a{char}b\x1b[31mc", "é": ["ü"]}
    text = json_text(data, indent=indent)
    assert printable(text, lines=True) == text  # nothing left for a terminal to act on
    assert f"\\u{ord(char):04x}" in text
    assert json.loads(text) == data
    assert "é" in text  # still readable, not ASCII-escaped


def test_one_json_line_is_one_printable_line() -> None:
    line = one_json_line({"t": "x\x9b2J\u2028y\x85"})
    assert line.count("\n") == 1 and printable(line[:-1]) == line[:-1]


def sample(*args: str):
    return runner.invoke(app, ["sample", "q", "--backend", "scripted", *args])


@pytest.mark.parametrize("control", ["\x1b[2J", "\x9b2J", "\x90x\x9c", "\u202e"])
def test_samples_answer_on_stdout_is_printable(control: str) -> None:
    result = sample("--reply", f"blue{control}green\nline two")
    assert result.exit_code == 0, result.output
    assert result.stdout == printable(f"blue{control}green\nline two", lines=True) + "\n"
    assert "line two" in result.stdout and printable(result.stdout, lines=True) == result.stdout


@pytest.mark.parametrize("control", ["\x1b[2J", "\x9b2J", "\u202e"])
def test_samples_json_is_valid_and_printable(control: str) -> None:
    result = sample("--reply", f"blue{control}", "--json")
    assert result.exit_code == 0, result.output
    assert printable(result.stdout, lines=True) == result.stdout
    assert json.loads(result.stdout)["text"] == f"blue{control}"
