"""Fuzzing the readers of user input: run configs, datasets, run directories, event files.

Each reader either accepts its input or raises the project's own error type with a message
that says where the problem is; never another exception. Inputs are random bytes, random
text, random YAML built from the config's own keys, and random JSON lines.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from builtin_plugins.recorder import EventFileError, read_events
from sampling_core.cli import app
from sampling_core.runs import (
    ConfigError,
    DatasetError,
    RunDirError,
    load_config,
    parse_config,
    run_batch_sync,
)
from sampling_core.runs.config.config import DatasetConfig, RunConfig
from sampling_core.runs.config.dataset import read_dataset
from sampling_core.runs.reports.summary import summarize
from sampling_core.runs.resume.resume import read_effective_config
from sampling_core.runs.store.store import RunDirectory

FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

# -- building blocks ---------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

# Keys the config knows (at every level), plus a few it does not.
CONFIG_KEYS = sorted(
    {
        *RunConfig.model_fields,
        "path",
        "prompt_field",
        "id_field",
        "kind",
        "model",
        "replies",
        "base_url",
        "api_key_env",
        "timeout_s",
        "name",
        "template",
        "keep_failures",
        "loop_budget",
        "concurrency_budget",
        "contains",
        "max_words",
        "matches",
        "is_json",
        "max_concurrent_prompts",
        "flush_every",
        "progress",
        "temperature",
        "stop",
        "api_key",
        "colour",
    }
)
config_like = st.recursive(
    json_scalars | st.sampled_from(["scripted", "openai", "local", "repair", "{reasons}", "("]),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(CONFIG_KEYS), inner, max_size=5),
    ),
    max_leaves=20,
)
BASE = {"dataset": {"path": "d.jsonl"}, "backend": {"kind": "scripted", "replies": ["hi"]}}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _dump(value: Any) -> str:
    return yaml.safe_dump(value, allow_unicode=True, sort_keys=False)


# -- the run config ----------------------------------------------------------------------


def _check_config_error(exc: ConfigError, where: str) -> None:
    lines = str(exc).splitlines()
    assert lines, "an error needs a message"
    assert all(line.startswith(f"{where}: ") and line[len(where) + 2 :] for line in lines)


@FUZZ
@given(text=st.text(max_size=300))
def test_random_text_is_a_config_or_a_config_error(text: str) -> None:
    try:
        parse_config(text)
    except ConfigError as exc:
        _check_config_error(exc, "the config")


@FUZZ
@given(data=config_like)
def test_random_yaml_built_from_config_keys_is_a_config_or_a_config_error(data: Any) -> None:
    for candidate in (data, {**BASE, **data} if isinstance(data, dict) else data):
        try:
            parse_config(_dump(candidate))
        except ConfigError as exc:
            _check_config_error(exc, "the config")


@FUZZ
@given(raw=st.binary(max_size=300))
def test_a_config_file_of_random_bytes_is_a_config_or_a_config_error(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder) / "run.yaml", raw)
        try:
            load_config(path)
        except ConfigError as exc:
            _check_config_error(exc, str(path))


# -- the dataset -------------------------------------------------------------------------

dataset_lines = st.lists(
    st.one_of(
        st.dictionaries(
            st.sampled_from(["id", "prompt", "require", "other"]), json_values, max_size=4
        ).map(json.dumps),
        st.fixed_dictionaries(
            {"id": st.text(max_size=4), "prompt": json_values | st.text(min_size=1)}
        ).map(json.dumps),
        json_values.map(json.dumps),
        st.text(max_size=30),
    ),
    max_size=6,
)


def _read_dataset(path: Path) -> None:
    try:
        read_dataset(DatasetConfig(path=path, id_field="id"))
    except DatasetError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith(str(path))


@FUZZ
@given(lines=dataset_lines)
def test_random_json_lines_are_a_dataset_or_a_dataset_error_naming_the_line(
    lines: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder) / "d.jsonl", "\n".join(lines).encode("utf-8", "surrogatepass"))
        try:
            read_dataset(DatasetConfig(path=path, id_field="id"))
        except DatasetError as exc:
            message = str(exc)
            assert "\n" not in message
            # a line's problem names the line: "PATH:N: ..."; else the file's
            number_given = message.startswith(f"{path}:") and message[len(str(path)) + 1].isdigit()
            assert number_given or message.startswith(f"{path}: the dataset has no prompts")


@FUZZ
@given(raw=st.binary(max_size=300))
def test_a_dataset_of_random_bytes_is_read_or_refused(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _read_dataset(_write(Path(folder) / "d.jsonl", raw))


# -- run directories ---------------------------------------------------------------------

record_like = st.one_of(
    st.fixed_dictionaries(
        {"key": json_values, "status": st.sampled_from(["ok", "failed", "error", "odd"])},
        optional={
            "seq": json_values,
            "attempts": st.one_of(json_values, st.fixed_dictionaries({"used": json_values})),
            "usage": st.one_of(json_values, st.fixed_dictionaries({"input_tokens": json_values})),
            "failed_requirements": json_values,
            "content_hash": json_values,
            "reason": json_values,
        },
    ),
    json_values,
)


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, finished run directory of two prompts."""
    folder = tmp_path_factory.mktemp("good")
    dataset = folder / "d.jsonl"
    dataset.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": "y"}\n')
    config = folder / "run.yaml"
    config.write_text(_dump({**BASE, "dataset": {"path": str(dataset), "id_field": "id"}}))
    run_batch_sync(config, folder / "run")
    return folder / "run"


def _copy(run: Path, folder: str) -> Path:
    return Path(shutil.copytree(run, Path(folder) / "run"))


@FUZZ
@given(lines=st.lists(record_like.map(json.dumps) | st.text(max_size=20), max_size=5))
def test_random_record_lines_are_reported_or_refused(good_run: Path, lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(good_run, folder)
        text = "".join(f"{line}\n" for line in lines)
        (run / "records.jsonl").write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            summarize(run)
        except RunDirError as exc:
            assert "\n" not in str(exc) and "records.jsonl:" in str(exc)


@FUZZ
@given(raw=st.binary(max_size=200), target=st.sampled_from(["records", "meta", "progress"]))
def test_a_run_file_of_random_bytes_is_read_or_refused(
    good_run: Path, raw: bytes, target: str
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(good_run, folder)
        name = {"records": "records.jsonl", "meta": "meta.json", "progress": "progress.json"}
        _write(run / name[target], raw)
        try:
            summarize(run)
        except RunDirError as exc:
            assert "\n" not in str(exc) and name[target] in str(exc)


@FUZZ
@given(body=config_like | st.text(max_size=200))
def test_a_random_effective_config_is_read_or_refused(good_run: Path, body: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run = _copy(good_run, folder)
        text = (run / "effective_config.yaml").read_text()
        header = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        shown = body if isinstance(body, str) else _dump(body)
        (run / "effective_config.yaml").write_text(header + shown, encoding="utf-8")
        try:
            read_effective_config(RunDirectory(run))
        except RunDirError as exc:
            assert "\n" not in str(exc) and "effective_config.yaml" in str(exc)


# -- recorded event files ----------------------------------------------------------------

event_like = st.fixed_dictionaries(
    {
        "hook": st.sampled_from(
            [
                "sampling_loop_start",
                "sampling_iteration",
                "sampling_loop_end",
                "generation_pre_call",
                "generation_post_call",
                "generation_error",
                "other",
            ]
        ),
        "payload": st.fixed_dictionaries(
            {},
            optional={
                "sampling_id": json_values,
                "subsample_index": json_values | st.integers(0, 2),
                "attempt": json_values | st.integers(1, 2),
                "iteration": json_values,
                "sequence": json_values,
                "passed": json_values,
                "latency_s": json_values,
                "retry": json_values,
                "elapsed_s": json_values,
                "generation": json_values
                | st.fixed_dictionaries({"usage": json_values}, optional={}),
                "usage": json_values,
                "will_retry": json_values,
            },
        ),
    },
    optional={"time": json_values},
)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_an_event_file_of_random_bytes_is_read_or_refused(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder) / "events.jsonl", raw)
        try:
            read_events(path)
        except EventFileError as exc:
            assert re.fullmatch(
                r"line \d+ is (not UTF-8 text \(byte \d+ of the line\)|not JSON \(.+\)"
                r'|not a recorded hook event \(needs "hook" and "payload"\))',
                str(exc),
            ), str(exc)


@settings(FUZZ, max_examples=60)  # rendering the tables is the slow part
@given(events=st.lists(event_like, max_size=6))
def test_trace_show_prints_random_events_or_says_one_line_why_not(events: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        result = CliRunner().invoke(app, ["trace", "show", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code in (0, 2)
    if result.exit_code == 2:
        assert result.stdout == ""
        (line,) = result.stderr.strip().splitlines()
        prefix = f"samplehooks: error: {path}: "
        assert line.startswith(prefix) and line[len(prefix) :].strip(), line  # says what is wrong
