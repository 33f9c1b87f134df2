"""Reading a JSONL dataset: keys, content hashes, and errors that name the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sampling_core.runs import DatasetError
from sampling_core.runs.config.config import DatasetConfig
from sampling_core.runs.config.dataset import _DigestSet, read_dataset


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def two_prompts(tmp_path: Path, needle: str) -> Path:
    """Prompt "a", a blank line, and prompt 7, which requires ``needle``."""
    return write(
        tmp_path,
        json.dumps({"id": "a", "prompt": "one"}),
        "",
        json.dumps({"id": 7, "prompt": "two", "require": [{"contains": needle}]}),
    )


def test_keys_hashes_and_per_line_requirements(tmp_path: Path) -> None:
    path = two_prompts(tmp_path, "x")
    data = read_dataset(DatasetConfig(path=path, id_field="id"))
    items = data.items  # a Dataset reads its file again on each pass
    assert data.count == 2
    assert [(i.key, i.line) for i in items] == [("a", 1), ("7", 3)]
    assert items[1].requirements[0].kind == "contains"
    by_line = read_dataset(DatasetConfig(path=path))
    assert [i.key for i in by_line.items] == ["line:1", "line:3"]

    changed = two_prompts(tmp_path, "y")  # prompt 7's requirement changed, prompt a's not
    again = read_dataset(DatasetConfig(path=changed, id_field="id"))
    assert again.items[0].content_hash == items[0].content_hash
    assert again.items[1].content_hash != items[1].content_hash
    assert again.fingerprint != data.fingerprint


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"prompt": "ok"}', "{not json"], r"d\.jsonl:2: not valid JSON"),
        (['{"prompt": "ok"}', "[1, 2]"], r"d\.jsonl:2: each line must be a JSON object"),
        (['{"prompt": "ok"}', '{"text": "no prompt"}'], r"d\.jsonl:2: 'prompt' must be"),
        (['{"prompt": [{"role": "user"}]}'], r"d\.jsonl:1: 'prompt' must be"),
        (
            ['{"prompt": "a", "require": [{"max_words": 2}, {"max_wrds": 3}]}'],
            r"d\.jsonl:1: require\[1\]\.max_wrds: unknown requirement kind .max_wrds.",
        ),
        ([], r"the dataset has no prompts"),
    ],
)
def test_malformed_lines_are_named(tmp_path: Path, lines: list[str], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        read_dataset(DatasetConfig(path=write(tmp_path, *lines)))


def test_ids_must_be_present_and_unique(tmp_path: Path) -> None:
    path = write(tmp_path, '{"id": "a", "prompt": "x"}', '{"id": "a", "prompt": "y"}')
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: id 'a' was already used on line 1"):
        read_dataset(DatasetConfig(path=path, id_field="id"))
    path = write(tmp_path, '{"prompt": "x"}')
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: 'id' must be a string or an integer"):
        read_dataset(DatasetConfig(path=path, id_field="id"))
    with pytest.raises(DatasetError, match=r"cannot read the dataset"):
        read_dataset(DatasetConfig(path=tmp_path / "missing.jsonl"))


def test_the_ids_seen_take_a_few_bytes_each() -> None:
    seen = _DigestSet()
    values = [(i * 0x9E3779B97F4A7C15) % (1 << 64) for i in range(1, 100_001)]
    assert all(seen.add(v) for v in values)
    assert not any(seen.add(v) for v in values[::997])  # a repeat is found
    assert seen.add(0) and not seen.add(0) and not seen.add(1)  # 0 is kept as 1
    assert len(seen._slots) * seen._slots.itemsize <= 32 * 100_000  # a set: about 70 bytes
