"""Text from a model, a dataset or a server never drives the terminal.

Control sequences in answers and dataset ids (an escape that clears the screen or sets the
window title, ``\\r`` that overwrites a line, a one-byte C1 CSI, a bidi override) are shown
as escapes (``\\x1b``) by ``run`` (its log lines too), ``report``, ``trace show --text`` and
every error line.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from sampling_core.redaction import printable
from tests.support.reliability_helpers import invoke

CONTROLS = ("\x1b", "\x9b", "\r", "\x07", "\x08", "\u202e")
KEY = "id\x1b[2J\u202eevil"
REPLY = "an answer\x1b]0;pwned\x07 \x9b31mthat\r goes on and on"


def assert_inert(text: str) -> None:
    found = [c for c in CONTROLS if c in text]
    assert not found, (found, text)


def test_control_sequences_reach_no_terminal(tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps({"id": KEY, "prompt": "q"}) + "\n")
    config = {
        "dataset": {"path": str(dataset), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": [REPLY]},
        "requirements": [{"max_words": 3}],  # fails: the prompt is listed with its reason
        "plugins": [
            {"name": "recorder", "options": {"capture_content": True}},
            {"name": "tracing", "options": {"capture_content": True}},  # logs the text
        ],
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    ran = invoke("run", tmp_path / "run.yaml", "--out", out)
    assert ran.exit_code == 0, ran.stderr
    reported = invoke("report", out)
    traced = invoke("trace", "show", out / "events.jsonl", "--text")
    assert traced.exit_code == 0, traced.stderr
    for result in (ran, reported, traced):
        assert_inert(result.stdout + result.stderr)
    assert "id\\x1b[2J\\u202eevil" in reported.stdout  # shown, as escapes
    assert "prompt_key=id\\x1b[2J\\u202eevil" in ran.stderr  # the tracing plugin's lines
    assert "\\x1b]0;pwned\\x07 \\x9b31mthat\\x0d goes" in traced.stdout  # stopped early there


def test_an_error_line_shows_control_characters_as_escapes(tmp_path: Path) -> None:
    refused = invoke("report", tmp_path / "no\x1b[2Jsuch")
    assert refused.exit_code == 2
    assert_inert(refused.stderr)
    assert "no\\x1b[2Jsuch" in refused.stderr


def test_printable_keeps_text_and_escapes_what_a_terminal_acts_on() -> None:
    assert printable("plain é ✓ 你好") == "plain é ✓ 你好"
    assert printable("a\x1b[31mb\r\x9b\u2066") == "a\\x1b[31mb\\x0d\\x9b\\u2066"
    assert printable("two\nlines\tand\x1b", lines=True) == "two\nlines\tand\\x1b"
    assert printable("two\nlines") == "two\\x0alines"  # one line unless asked
