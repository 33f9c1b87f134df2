"""Text from a model never drives the terminal: ``--json`` escapes what ``printable`` escapes
(C1 controls, DEL, bidi overrides: ``json.dumps(ensure_ascii=False)`` leaves them raw) and
stays valid JSON; ``sample``'s answer on stdout is :func:`printable`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sampling_core.cli.app import app
from sampling_core.redaction import json_text, one_json_line, printable
from sampling_core.runs import run_batch_sync

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


def _run(tmp_path: Path, name: str, reply: str) -> Path:
    ids = [f"q{i}{c}" for i, c in enumerate(["\x9b2J", "\u202e", "\x1b[31m", "\x85"])]
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"id": k, "prompt": "q", "answer": "7"}) + "\n" for k in ids)
    )
    config = {
        "dataset": {"path": str(data), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": [reply]},
        "requirements": [{"equals_field": "answer", "extract": "last_number"}],
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    run_batch_sync(path, tmp_path / name)
    return tmp_path / name


def test_every_commands_json_is_valid_and_printable(tmp_path: Path) -> None:
    a, b = _run(tmp_path, "a", "5\x9b"), _run(tmp_path, "b", "7\u202e")
    for args in (["compare", str(a), str(b), "--json"], ["report", str(b), "--json"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert printable(result.stdout, lines=True) == result.stdout, args
        assert json.loads(result.stdout), args
