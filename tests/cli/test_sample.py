"""``samplehooks sample``: the answer on stdout, the attempts table and errors on stderr."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from sampling_core.cli.app import app

runner = CliRunner()


def sample(*args: str):
    return runner.invoke(app, ["sample", *args])


def table_rows(stderr: str) -> list[list[str]]:
    """The attempts table's rows: iteration, subsample, attempt, passed, N, "ms", tokens, ..."""
    rows = []
    for line in stderr.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0].isdigit() and cells[3] in ("yes", "no"):
            rows.append(cells)
    return rows


def test_prints_the_chosen_answer_and_one_row_per_attempt() -> None:
    result = sample(
        "Name a colour.",
        "--backend", "scripted",
        "--reply", "a long answer that fails",
        "--reply", "blue",
        "--require", "max-words:2",
        "--require", "contains:blue",
        "--loop-budget", "3",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == "blue\n"
    rows = table_rows(result.stderr)
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("1", "0", "1", "no"),
        ("2", "0", "2", "yes"),
    ]
    # tokens in/out (words, scripted): the long answer was stopped at its third word
    assert rows[0][6] == "3/3" and rows[1][6] == "3/1"
    assert all(r[4].isdigit() and r[5] == "ms" for r in rows)  # latency
    assert "stop: success" in result.stderr and "attempts: 2" in result.stderr


def test_no_passing_answer_exits_1_with_the_best_attempt() -> None:
    result = sample(
        "Name a colour.",
        "--backend", "scripted",
        "--reply", "red is nice",
        "--reply", "green",
        "--require", "contains:blue",
        "--loop-budget", "2",
        "--concurrency", "2",
    )  # fmt: skip
    assert result.exit_code == 1
    assert result.stdout.strip() in ("red is nice", "green")
    assert len(table_rows(result.stderr)) == 4
    assert "budget_exhausted" in result.stderr


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("max-words:zero", "valid integer"),
        ("max-words:0", "greater than or equal to 1"),
        ("regex:([", "regular expression"),
        ("colour:blue", "unknown requirement kind 'colour'"),
        ("max-wrods:3", "did you mean 'max_words'?"),
        ("contains:", "KIND:VALUE"),
        ("json:strict", "no argument"),
    ],
)
def test_a_bad_requirement_is_one_line_and_exit_2(spec: str, says: str) -> None:
    result = sample("hi", "--backend", "scripted", "--reply", "x", "--require", spec)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("samplehooks: error: ") and says in lines[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--loop-budget", "0"], "loop_budget"),
        (["--concurrency", "0"], "concurrency_budget"),
        (["--plugin", "no-such-plugin"], "no-such-plugin"),
    ],
)
def test_bad_budgets_and_unknown_plugins_exit_2(args: list[str], says: str) -> None:
    result = sample("hi", "--backend", "scripted", "--reply", "x", *args)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0]


def test_backend_options_are_checked() -> None:
    assert sample("hi", "--backend", "openai").exit_code == 2  # no --model
    assert sample("hi", "--backend", "scripted").exit_code == 2  # no --reply
    assert sample("hi", "--reply", "x").exit_code == 2  # --reply is for scripted only


def test_strategies_and_plugins_by_name() -> None:
    result = sample(
        "Name a colour.",
        "--backend", "scripted",
        "--reply", "one two three",
        "--reply", "blue",
        "--require", "max-words:1",
        "--strategy", "repair",
        "--plugin", "ordering",
        "--loop-budget", "2",
        "--require", "json",
    )  # fmt: skip
    assert result.exit_code == 1  # "blue" is not JSON
    assert [r[3] for r in table_rows(result.stderr)] == ["no", "no"]
    json_ok = sample(
        "A number.", "--backend", "scripted", "--reply", "42", "--require", "json",
        "--strategy", "best-of-n",
    )  # fmt: skip
    assert json_ok.exit_code == 0 and json_ok.stdout == "42\n"


@pytest.mark.slow
def test_samples_the_local_model() -> None:
    result = sample(
        "Say hello.",
        "--require", "max-words:10",
        "--loop-budget", "2",
        "--concurrency", "2",
        "--max-tokens", "20",
        "--seed", "11",
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    rows = table_rows(result.stderr)
    assert 1 <= len(rows) <= 4
    assert (result.exit_code == 0) == any(r[3] == "yes" for r in rows)
    assert result.stdout.strip()  # an answer was chosen and printed
    assert all(int(r[6].split("/")[0]) > 0 for r in rows)  # the model reported tokens


def test_log_lines_of_plugins_go_to_stderr_and_stdout_keeps_the_answer_alone() -> None:
    result = sample("hi", "--backend", "scripted", "--reply", "blue", "--plugin", "tracing")
    assert result.exit_code == 0
    assert result.stdout == "blue\n"
    assert "sampling.loop.start" in result.stderr and "sampling.iteration" in result.stderr


def test_stdout_keeps_the_answer_alone_after_structlog_was_configured() -> None:
    # capture_logs() leaves structlog marked as configured (as an application would).
    import structlog
    from structlog.testing import capture_logs

    with capture_logs():
        pass
    assert structlog.is_configured()
    try:
        result = sample("hi", "--backend", "scripted", "--reply", "blue", "--plugin", "tracing")
        assert result.exit_code == 0
        assert result.stdout == "blue\n"
        assert "sampling.iteration" in result.stderr
    finally:
        structlog.reset_defaults()


def test_a_log_file_the_application_chose_is_left_alone() -> None:
    """Only structlog's starting factory (it prints on stdout) is redirected: a factory an
    application configured keeps its lines, and is back in place after the command."""
    import io

    import structlog

    chosen = io.StringIO()
    factory = structlog.PrintLoggerFactory(chosen)
    structlog.configure(logger_factory=factory)
    try:
        result = sample("hi", "--backend", "scripted", "--reply", "blue", "--plugin", "tracing")
        assert result.exit_code == 0
        assert result.stdout == "blue\n"
        assert "sampling.iteration" in chosen.getvalue()
        assert "sampling.iteration" not in result.stderr
        assert structlog.get_config()["logger_factory"] is factory
    finally:
        structlog.reset_defaults()


def test_an_unconfigured_structlog_is_left_unconfigured_after_a_command() -> None:
    import structlog

    structlog.reset_defaults()
    result = sample("hi", "--backend", "scripted", "--reply", "blue", "--plugin", "tracing")
    assert result.exit_code == 0 and result.stdout == "blue\n"
    assert "sampling.iteration" in result.stderr
    assert not structlog.is_configured()
