"""The run config: validation with full key paths, and every field classified for resume."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from sampling_core.runs import ConfigError, parse_config
from sampling_core.runs.config.classification import (
    classification_table,
    classified_fields,
    inconsistent_blocks,
    unclassified_fields,
)
from sampling_core.runs.config.config import RunConfig, _field

DOCS = Path(__file__).resolve().parents[2] / "docs" / "batch-runs.md"
BASE = "dataset: {path: d.jsonl}\nbackend: {kind: scripted, replies: [hi]}\n"


def test_every_config_field_nested_ones_included_is_classified() -> None:
    paths = {f.path for f in classified_fields()}
    # the walk reaches nested blocks and the models inside lists
    assert {
        "backend.kind",
        "run.max_concurrent_prompts",
        "requirements[].kind",
    } <= paths
    assert unclassified_fields() == []
    assert inconsistent_blocks() == []


def test_the_walk_finds_an_unclassified_nested_field() -> None:
    class Inner(BaseModel):
        labelled: int = _field("result", 1, description="x")
        bare: int = 2

    class Outer(BaseModel):
        inner: Inner = _field("result", Inner(), description="x")
        items: list[Inner] = _field("result", [], description="x")
        loose: str = "x"

    assert unclassified_fields(Outer) == ["inner.bare", "items[].bare", "loose"]


def test_a_block_must_carry_the_strictest_label_of_its_fields() -> None:
    class Inner(BaseModel):
        speed: int = _field("throughput", 1, description="x")
        answer: int = _field("result", 1, description="x")

    class Outer(BaseModel):
        inner: Inner = _field("throughput", Inner(), description="x")

    assert inconsistent_blocks(Outer) == ["inner is 'throughput' but holds 'result' fields"]


def test_docs_page_holds_the_table_generated_from_the_model() -> None:
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- classification-table:start -->\n(.*?)<!-- classification-table:end -->",
        text,
        re.S,
    )
    assert found, "docs/batch-runs.md lacks the classification-table markers"
    assert found.group(1) == classification_table(), (
        "the table in docs/batch-runs.md is out of date; paste the output of "
        "sampling_core.runs.config.classification.classification_table() between the markers"
    )
    for f in classified_fields():
        assert f"`{f.path}`" in found.group(1)


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ("colour: red\n", "colour"),
        ("run: {max_concurent_prompts: 2}\n", "run.max_concurent_prompts"),
        ("options: {temprature: 0.5}\n", "options.temprature"),
        ("requirements: [{max_words: 3}, {max_word: 4}]\n", "requirements[1].max_word"),
        ("strategy: {name: repair, templat: x}\n", "strategy.templat"),
    ],
)
def test_unknown_keys_are_rejected_with_their_full_path(extra: str, path: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + extra)
    message = str(info.value)
    # keys of the config's own blocks, kinds and options of kinds: each named by its path
    assert (
        f"{path}: unknown key" in message
        or f"{path}: unknown requirement kind" in message
        or (
            f"{path}: strategy 'repair' (plugin 'kinds'): unknown option 'templat' "
            "(did you mean 'template'?)" in message
        )
    )


def test_unknown_key_suggests_the_close_one() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'max_concurrent_prompts'"):
        parse_config(BASE + "run: {max_concurent_prompts: 2}\n")


def test_secrets_are_refused_and_the_variable_name_is_asked_for() -> None:
    text = "dataset: {path: d.jsonl}\nbackend: {kind: openai, model: m, api_key: sk-123}\n"
    with pytest.raises(ConfigError, match=r"backend\.api_key: .*secrets never go in options"):
        parse_config(text)
    text = "dataset: {path: d.jsonl}\nbackend: {kind: openai, model: m, base_url: 'https://u:sk@h/v1'}\n"
    with pytest.raises(ConfigError, match=r"backend\.base_url: .*the URL carries credentials"):
        parse_config(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            BASE + "requirements: [{max_words: 3, contains: a}]",
            r"requirements\[0\]\.contains: .*takes no option 'contains'",
        ),
        (BASE + "requirements: [{matches: '('}]", r"requirements\[0\]: .*not a valid regular"),
        (BASE + "budgets: {loop_budget: 0}", r"budgets\.loop_budget: .*greater than or equal"),
        (BASE + "budgets: {loop_budget: true}", r"budgets\.loop_budget: .*not a boolean"),
        (
            BASE + "strategy: {name: rejection, template: 'x {reasons}'}",
            r"strategy\.template: .*unknown option 'template'",
        ),
        (
            "dataset: {path: d.jsonl}\nbackend: {kind: openai}",
            r"backend\.model: .*option 'model' is required",
        ),
        (
            "dataset: {path: d.jsonl}\nbackend: {kind: local, replies: [x]}",
            r"backend\.replies: .*unknown option 'replies'",
        ),
        ("backend: {kind: scripted, replies: [x]}", r"dataset: required key is missing"),
        ("- just a list", r"must be a YAML mapping"),
        ("dataset: [unclosed", r"not valid YAML \(line"),
    ],
)
def test_invalid_configs_say_where_and_what(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(text)


def test_shorthands_and_relative_dataset_path(tmp_path: Path) -> None:
    source = tmp_path / "conf" / "run.yaml"
    source.parent.mkdir()
    source.write_text(BASE + "strategy: repair\n", encoding="utf-8")
    from sampling_core.runs import load_config

    config = load_config(source)
    assert config.strategy.name == "repair"
    assert config.dataset.path == (tmp_path / "conf" / "d.jsonl").resolve()
    assert isinstance(config, RunConfig)
