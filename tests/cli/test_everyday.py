"""The CLI's everyday edges: terminal widths, --json, stdin, completion, help, error lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from sampling_core.cli.app import app
from tests.support.reliability_helpers import assert_refused, invoke

SCRIPTED = ("--backend", "scripted")
LONG = " ".join(["word"] * 80)
KEY_COLUMNS = ("iteration", "subsample", "attempt", "passed", "latency", "tokens", "answer")


@pytest.mark.parametrize("width", [80, 100, 140])
def test_long_answers_shrink_the_answer_column_never_the_key_columns(width: int) -> None:
    result = invoke(
        "sample", "Say ok.", *SCRIPTED, "--reply", LONG, "--reply", "ok",
        "--require", "max-words:3", "--loop-budget", "2", "--no-early-stop",
        env={"COLUMNS": str(width)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    header = next(line for line in lines if "iteration" in line)
    assert header.split() == list(KEY_COLUMNS)
    rows = [line for line in lines if line.split()[:1] in (["1"], ["2"])]
    assert len(rows) == 2
    for line in [header, *rows]:
        assert len(line.rstrip()) <= width, line
    first, second = (row.split() for row in rows)
    assert first[3] == "no" and first[6] == "2/80"  # passed and tokens are all there
    assert second[3] == "yes" and second[6] == "2/1"
    assert rows[0].rstrip().endswith("…")  # the long answer was cut, not the table


def test_sample_json_prints_the_whole_result_on_stdout() -> None:
    result = invoke(
        "sample", "Name a colour.", *SCRIPTED, "--reply", "red", "--reply", "blue",
        "--require", "contains:blue", "--loop-budget", "2", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["success"] is True and data["text"] == "blue"
    assert data["stop_reason"] == "success" and data["iterations_used"] == 2
    assert [a["passed"] for a in data["attempts"]] == [False, True]
    assert data["attempts"][0]["validations"][0]["passed"] is False
    assert "attempts" not in result.stderr  # no table with --json


def test_sample_json_on_failure_still_prints_json_and_exits_1() -> None:
    result = invoke("sample", "q", *SCRIPTED, "--reply", "red", "-r", "contains:blue", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["success"] is False


@pytest.mark.parametrize("args", [["-"], []], ids=["dash", "piped"])
def test_sample_reads_the_prompt_from_stdin(args: list[str]) -> None:
    result = invoke("sample", *args, *SCRIPTED, "--reply", "ok", "--json", input="Say ok.\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["text"] == "ok"


def test_the_prompt_read_from_stdin_reaches_the_backend(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    result = invoke(
        "sample", "-", *SCRIPTED, "--reply", "ok", "--plugin", "recorder",
        input="a prompt\nof two lines\n",
        env={"SAMPLEHOOKS_RECORDER_PATH": str(events), "SAMPLEHOOKS_TRACE_CONTENT": "1"},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = events.read_text()
    assert "a prompt\\nof two lines" in text


def test_an_empty_stdin_prompt_is_refused() -> None:
    assert_refused(invoke("sample", "-", *SCRIPTED, "--reply", "ok", input=""), "empty")


def test_selection_is_passed_on_and_checked() -> None:
    result = invoke(
        "sample", "q", *SCRIPTED, "--reply", "ok", "--selection", "ordered",
        "--concurrency", "2", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["success"] is True
    assert_refused(invoke("sample", "q", *SCRIPTED, "--reply", "ok", "--selection", "best"))


def test_trace_show_json(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    done = invoke(
        "sample", "q", *SCRIPTED, "--reply", "no", "--reply", "yes", "-r", "contains:yes",
        "--plugin", "recorder", "--json",
        env={"SAMPLEHOOKS_RECORDER_PATH": str(events)},
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    sampling_id = json.loads(done.stdout)["sampling_id"]
    shown = invoke("trace", "show", str(events), "--json")
    assert shown.exit_code == 0, shown.output
    (call,) = json.loads(shown.stdout)
    assert call["sampling_id"] == sampling_id
    assert call["end"]["stop_reason"] == "success"
    assert [(a["attempt"], a["passed"], a["outcome"]) for a in call["attempts"]] == [
        (1, False, "completed"),
        (2, True, "completed"),
    ]
    assert all(a["t_s"] >= 0 for a in call["attempts"])


def test_a_completion_script_is_generated() -> None:
    # The script bash's completion sources, asked for by name: `--show-completion` guesses the
    # shell from the process tree, which a background job or CI's runner may not have.
    script = Path(sys.executable).with_name("samplehooks")
    env = {**os.environ, "_SAMPLEHOOKS_COMPLETE": "source_bash"}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "_samplehooks_completion" in done.stdout and "complete " in done.stdout


def test_completion_answers_with_commands_and_options() -> None:
    script = Path(sys.executable).with_name("samplehooks")

    def complete(words: str) -> list[str]:
        env = {
            **os.environ,
            "_SAMPLEHOOKS_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        done = subprocess.run([script], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("samplehooks sa") == ["sample"]
    assert complete("samplehooks sample --sel") == ["--selection"]
    assert complete("samplehooks sample --strategy r") == ["rejection", "repair"]


def _commands(group, path=("samplehooks",)):
    """Every command path of the CLI, groups included."""
    yield list(path[1:])
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*path, name))


ALL_COMMANDS = list(_commands(typer.main.get_command(app)))


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=lambda c: " ".join(c) or "samplehooks")
def test_help_shows_readable_placeholders(command: list[str]) -> None:
    result = invoke(*command, "--help", env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout
    for python_type in ("<bool>", "<str>", "<int>", "<path>", "<list", "<float>", "{"):
        assert python_type not in result.stdout, (python_type, result.stdout)


def test_every_command_is_covered_by_the_help_test() -> None:
    assert {" ".join(c) for c in ALL_COMMANDS} >= {
        "", "sample", "run", "report", "plugins", "trace", "trace show",
    }  # fmt: skip


ERROR_CASES = {
    "unknown command": (["sampel"], "No such command"),
    "unknown option": (["sample", "q", "--nope"], "--nope"),
    "bad int": (["sample", "q", "--loop-budget", "x"], "loop-budget"),
    "bad requirement": (["sample", "q", *SCRIPTED, "--reply", "x", "-r", "colour:blue"], "colour"),
    "scripted without replies": (["sample", "q", *SCRIPTED], "--reply"),
    "reply without scripted": (["sample", "q", "--reply", "x"], "--reply"),
    "openai without model": (["sample", "q", "--backend", "openai"], "--model"),
    "bad budget": (["sample", "q", *SCRIPTED, "--reply", "x", "-l", "0"], "loop_budget"),
    "misspelled plugin": (
        ["sample", "q", *SCRIPTED, "--reply", "x", "--plugin", "tracng"],
        "did you mean 'tracing'?",
    ),
    "run: missing config": (["run", "no-such.yaml", "--out", "x"], "no-such.yaml"),
    "run: retry without resume": (["run", "c.yaml", "--retry-failed"], "--resume"),
    "run: resume without out": (["run", "c.yaml", "--resume"], "--out"),
    "report: missing dir": (["report", "no-such-dir"], "no-such-dir"),
    "trace show: missing file": (["trace", "show", "no-such.jsonl"], "no-such.jsonl"),
    "trace: unknown command": (["trace", "shw"], "No such command"),
}


@pytest.mark.parametrize("case", ERROR_CASES)
def test_every_error_has_the_one_prefix(case: str, tmp_path: Path, monkeypatch) -> None:
    args, fragment = ERROR_CASES[case]
    monkeypatch.chdir(tmp_path)  # a run that got further would write here, not in the checkout
    assert_refused(invoke(*args), fragment)
