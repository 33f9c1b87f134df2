"""Bad input through the CLI: one line saying what and where, exit status 2, nothing written.

Config errors, malformed dataset lines (with their line number), bad requirement specs
(config and ``--require``), bad flags, unknown plugins, and an ``--out`` that cannot be made.
Damaged run directories are in ``reliability/test_run_dir.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.reliability_helpers import assert_refused, invoke, tree

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text('{"id": "a", "prompt": "one?"}\n{"id": "b", "prompt": "two?"}\n')
    return path


def config_text(dataset: Path, **blocks: object) -> str:
    config: dict[str, object] = {
        "dataset": {"path": str(dataset), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": ["an answer"]},
    }
    config.update(blocks)
    return yaml.safe_dump(config, sort_keys=False)


def write_run_config(tmp_path: Path, dataset: Path, extra: str = "") -> Path:
    """``run.yaml`` with :func:`config_text` over ``dataset``, then ``extra`` YAML lines."""
    config = tmp_path / "run.yaml"
    config.write_text(config_text(dataset) + extra)
    return config


def run_refused(tmp_path: Path, config: Path, *fragments: str) -> str:
    """``samplehooks run CONFIG --out OUT`` is refused and OUT is not created."""
    out = tmp_path / "out"
    line = assert_refused(invoke("run", config, "--out", out), *fragments)
    assert not out.exists()
    return line


# -- the config ----------------------------------------------------------------------------

CONFIG_CASES = {
    "not YAML": ("seed: [\n", "not valid YAML (line "),
    "a value YAML cannot build": ("seed: 2020-13-45\n", "not valid YAML: month must be in 1..12"),
    "nested too deeply": (f"seed: {DEEP[:5000]}{DEEP[-5000:]}\n", "nested too deeply"),
    "not a mapping": ("- dataset\n- backend\n", "must be a YAML mapping"),
    "an unknown key": ("colour: red\n", "colour: unknown key"),
    "a misspelt nested key": (
        "run: {max_concurent_prompts: 2}\n",
        "run.max_concurent_prompts: unknown key (did you mean 'max_concurrent_prompts'?)",
    ),
    "a wrong type": (
        "budgets: {loop_budget: lots}\n",
        "budgets.loop_budget: must be a whole number",
    ),
    "a boolean budget": ("budgets: {loop_budget: true}\n", "budgets.loop_budget: must be an int"),
    "a budget over the engine's cap": (
        "budgets: {concurrency_budget: 5000}\n",
        "budgets.concurrency_budget: Input should be less than or equal to 4096",
    ),
    "an out-of-range option": ("options: {temperature: -1}\n", "options.temperature"),
    "an unknown strategy": ("strategy: sideways\n", "strategy.name"),
    "a template without {reasons}": (
        "strategy: {name: repair, template: fix it}\n",
        "template must contain the placeholder {reasons}",
    ),
    "a template with another placeholder": (
        "strategy: {name: repair, template: 'fix {reasons} in {field}'}\n",
        "KeyError: 'field'",
    ),
    "an unknown requirement": ("requirements: [{max_lines: 3}]\n", "requirements[0].max_lines"),
    "a requirement out of range": ("requirements: [{max_words: 0}]\n", "requirements[0].max_words"),
    "an empty requirement": ("requirements: [{}]\n", "requirements[0]: a requirement is"),
    "a requirement with two kinds": (
        "requirements: [{contains: a, max_words: 3}]\n",
        "requirements[0].max_words: requirement 'contains' (plugin 'kinds'): unknown option",
    ),
    "a bad regular expression": (
        "requirements: [{matches: '(unclosed'}]\n",
        "requirements[0]: requirement 'matches' (plugin 'kinds'): cannot be set up: "
        "ValueError: not a valid regular expression",
    ),
    "a secret in the config": (
        "backend: {kind: openai, model: m, api_key: sk-x}\n",
        "backend.api_key: backend 'openai' (plugin 'kinds'): unknown option 'api_key' (secrets "
        "never go in options",
    ),
    "a key in the URL": (
        "backend: {kind: openai, model: m, base_url: 'https://u:pw@example.com/v1'}\n",
        "the URL carries credentials",
    ),
    "an option of another backend": (
        "backend: {kind: openai, model: m, replies: [x]}\n",
        "backend.replies: backend 'openai' (plugin 'kinds'): unknown option 'replies'",
    ),
    "an unknown plugin": ("plugins: [nosuch]\n", "plugins: ", "'nosuch'"),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_each_config_error_is_one_line_naming_the_file_and_key(
    case: str, tmp_path: Path, dataset: Path
) -> None:
    extra, *fragments = CONFIG_CASES[case]
    base = config_text(dataset)
    body = extra if extra.lstrip().startswith("-") else base + extra
    if extra.startswith(("dataset:", "backend:")):  # replaces the block
        key = extra.split(":", 1)[0]
        kept = {k: v for k, v in yaml.safe_load(base).items() if k != key}
        body = yaml.safe_dump(kept) + extra
    config = tmp_path / "run.yaml"
    config.write_text(body)
    run_refused(tmp_path, config, f"{config}: ", *fragments)


def test_a_config_that_is_not_utf8_text_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_bytes(b"dataset: {path: d.jsonl}\nseed: \xff\xfe\n")
    run_refused(tmp_path, config, f"{config}: not UTF-8 text (byte ")


def test_a_missing_or_unreadable_config_is_refused(tmp_path: Path) -> None:
    run_refused(tmp_path, tmp_path / "nowhere.yaml", "cannot read the config", "nowhere.yaml")
    run_refused(tmp_path, tmp_path, "cannot read the config", "Is a directory")


def test_a_config_with_several_problems_gets_one_line_for_each(
    tmp_path: Path, dataset: Path
) -> None:
    config = write_run_config(tmp_path, dataset, "colour: red\nbudgets: {loop_budget: 0}\n")
    result = invoke("run", config, "--out", tmp_path / "out")
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all(
        line.startswith("samplehooks: error: ") or line.startswith(f"{config}: ") for line in lines
    )
    assert "budgets.loop_budget" in result.stderr and "colour: unknown key" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_refused_run_leaves_an_existing_empty_out_directory_empty(
    tmp_path: Path, dataset: Path
) -> None:
    config = write_run_config(tmp_path, dataset, "plugins: [nosuch]\n")
    out = tmp_path / "out"
    out.mkdir()
    assert_refused(invoke("run", config, "--out", out), "nosuch")
    assert list(out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging


# -- the dataset ---------------------------------------------------------------------------

DATASET_CASES = {
    "not JSON": ('{"id": "c", "prompt": "x"', 3, "not valid JSON"),
    "not an object": ('["c", "x"]', 3, "each line must be a JSON object, got list"),
    "no prompt": ('{"id": "c"}', 3, "'prompt' must be a non-empty string"),
    "an empty prompt": ('{"id": "c", "prompt": "  "}', 3, "'prompt' must be a non-empty string"),
    "a message without a role": ('{"id": "c", "prompt": [{"content": "x"}]}', 3, "'prompt'"),
    "a message whose content is not text": (
        '{"id": "c", "prompt": [{"role": "user", "content": null}]}',
        3,
        "both strings",
    ),
    "no id": ('{"prompt": "x"}', 3, "'id' must be a string or an integer id"),
    "a boolean id": ('{"id": true, "prompt": "x"}', 3, "'id' must be a string or an integer id"),
    "a repeated id": ('{"id": "a", "prompt": "x"}', 3, "id 'a' was already used on line 1"),
    "a bad requirement": ('{"id": "c", "prompt": "x", "require": "short"}', 3, "require"),
    "a requirement out of range": (
        '{"id": "c", "prompt": "x", "require": [{"max_words": -2}]}',
        3,
        "require[0].max_words",
    ),
    "nested too deeply": ('{"id": "c", "prompt": ' + DEEP + "}", 3, "nested too deeply"),
}


@pytest.mark.parametrize("case", DATASET_CASES)
def test_a_malformed_dataset_line_is_named_by_its_number(
    case: str, tmp_path: Path, dataset: Path
) -> None:
    line, number, fragment = DATASET_CASES[case]
    dataset.write_text(dataset.read_text() + line + "\n" + '{"id": "z", "prompt": "last"}\n')
    config = write_run_config(tmp_path, dataset)
    run_refused(tmp_path, config, f"{dataset}:{number}: ", fragment)


def test_a_dataset_line_that_is_not_utf8_is_named(tmp_path: Path, dataset: Path) -> None:
    dataset.write_bytes(dataset.read_bytes() + b'{"id": "c", "prompt": "\xff"}\n')
    config = write_run_config(tmp_path, dataset)
    run_refused(tmp_path, config, f"{dataset}:3: not valid JSON")


def test_an_empty_or_missing_dataset_is_refused(tmp_path: Path, dataset: Path) -> None:
    config = write_run_config(tmp_path, dataset)
    dataset.write_text("\n  \n")
    run_refused(tmp_path, config, f"{dataset}: the dataset has no prompts")
    dataset.unlink()
    run_refused(tmp_path, config, f"cannot read the dataset {dataset}")


# -- --out that cannot be made ---------------------------------------------------------------


def test_an_out_directory_that_cannot_be_created_is_refused(tmp_path: Path, dataset: Path) -> None:
    config = write_run_config(tmp_path, dataset)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    before = tree(tmp_path)
    assert_refused(
        invoke("run", config, "--out", blocker / "out"), "cannot create the run directory"
    )
    assert_refused(invoke("report", blocker), f"{blocker} is a file, not a run directory")
    assert_refused(invoke("run", config, "--out", blocker, "--resume"), "is a file")
    assert tree(tmp_path) == before


# -- flags, commands and names -----------------------------------------------------------------

FLAG_CASES = {
    "an unknown option": (["run", "c.yaml", "--out", "o", "--bogus"], "No such option: --bogus"),
    "an unknown command": (["smaple"], "No such command 'smaple'"),
    "a missing argument": (["report"], "Missing argument"),
    "a value that is not a number": (
        ["sample", "q", "--loop-budget", "many"],
        "Invalid value for '--loop-budget'",
    ),
    "an option missing its value": (["sample", "q", "--require"], "--require"),
    "an unknown trace command": (["trace", "replay"], "No such command 'replay'"),
}


@pytest.mark.parametrize("case", FLAG_CASES)
def test_a_bad_flag_or_command_is_one_line(case: str) -> None:
    argv, fragment = FLAG_CASES[case]
    line = assert_refused(invoke(*argv), fragment)
    assert "--help" in line  # and says where to look


SCRIPTED = ["--backend", "scripted", "--reply", "an answer"]
REQUIRE_CASES = {
    "no kind": ("short", "unknown requirement kind 'short'"),
    "an unknown kind": ("max-lines:3", "unknown requirement kind 'max-lines'"),
    "no value": ("contains:", "expected KIND:VALUE"),
    "a number that is not one": ("max-words:lots", "valid integer"),
    "a number out of range": ("max-chars:0", "greater than or equal to 1"),
    "a bad regular expression": ("regex:(", "not a valid regular expression"),
    "json with an argument": ("json:strict", "is_json takes no argument"),
}


@pytest.mark.parametrize("case", REQUIRE_CASES)
def test_a_bad_require_spec_is_one_line(case: str) -> None:
    spec, fragment = REQUIRE_CASES[case]
    result = invoke("sample", "q", *SCRIPTED, "--require", spec)
    assert_refused(result, repr(spec) if "json" not in spec else "json", fragment)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--plugin", "nosuch"], "no installed plugin is named 'nosuch'"),
        (["--loop-budget", "0"], "loop_budget=0 set by the caller is invalid"),
        (["--concurrency", "100000"], "exceeds the sampler's cap"),
        (["--strategy", "sideways"], "unknown strategy kind 'sideways'"),
        (["--backend", "gpt"], "unknown backend kind 'gpt'"),
    ],
)
def test_a_bad_plugin_name_or_budget_in_sample_is_one_line(args: list[str], fragment: str) -> None:
    assert_refused(invoke("sample", "q", *SCRIPTED, *args), fragment)


def test_trace_show_refuses_a_file_that_is_not_recorded_events(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    good = {"hook": "sampling_iteration", "payload": {"subsample_index": 0, "attempt": 1}}
    cases = {
        b"not json\n": "line 1 is not JSON",
        b'{"hook": 1}\n': 'line 1 is not a recorded hook event (needs "hook" and "payload")',
        b"\xff\xfe\n": "line 1 is not UTF-8 text",
        (json.dumps(good) + "\n" + '{"hook": "x", "payload": ' + DEEP + "}\n").encode(): (
            "line 2 is not JSON (nested too deeply)"
        ),
        json.dumps({**good, "payload": {**good["payload"], "attempt": "1"}}).encode(): (
            "attempt must be an integer"
        ),
        json.dumps({"hook": "sampling_loop_end", "payload": {"elapsed_s": "slow"}}).encode(): (
            "elapsed_s must be a number"
        ),
    }
    for data, fragment in cases.items():
        events.write_bytes(data)
        assert_refused(invoke("trace", "show", events), str(events), fragment)
    assert_refused(invoke("trace", "show", tmp_path / "none.jsonl"), "cannot read")
