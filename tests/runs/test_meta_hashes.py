"""meta.json read a chunk at a time: the same content as json.loads, the hashes handed on."""

from __future__ import annotations

import json

import pytest

from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store import meta_hashes
from sampling_core.runs.store.meta_hashes import read_meta_compact, read_run_meta
from sampling_core.runs.store.store import RunDirectory, _write_meta

PAIRS = [(f"line:{i}", f"sha256:{i:032x}") for i in range(1, 300)] + [
    ('ké"y\\ \u2028 {}', "sha256:odd"),
    ("\U0001f600", "sha256:emoji"),
]


def _meta(tmp_path, *, streamed: bool = True):
    meta = {
        "format": 1,
        "created": "2025-01-01T00:00:00Z",
        "dataset": {
            "path": "d.jsonl",
            "count": len(PAIRS),
            "fingerprint": "sha256:f",
            "hashes": iter(PAIRS) if streamed else dict(PAIRS),
        },
        "settings": {"values": {"a.b": [1, 2.5, None, {"x": "}"}]}, "fingerprint": "s"},
        "big_number": 12345678901234567890,
    }
    path = tmp_path / "meta.json"
    _write_meta(path, meta)
    return path


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 16])
def test_same_content_as_json_loads_at_any_chunk_size(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr(meta_hashes, "_CHUNK", chunk)
    path = _meta(tmp_path)
    whole = json.loads(path.read_text(encoding="utf-8"))
    pairs: list[tuple[str, str]] = []
    data, found = read_meta_compact(path, lambda key, value: pairs.append((key, value)))
    assert whole["dataset"].pop("hashes") == dict(PAIRS)
    assert data["dataset"].pop("hashes") == {}
    assert data == whole
    assert found and pairs == PAIRS  # every pair, in the file's order


def test_a_plain_json_dump_reads_too(tmp_path):
    path = tmp_path / "meta.json"
    meta = {
        "format": 1,
        "dataset": {"count": 2, "fingerprint": "f", "hashes": {"a": "1", "b": "2"}},
    }
    path.write_text(json.dumps(meta), encoding="utf-8")
    pairs: list[tuple[str, str]] = []
    data, found = read_meta_compact(path, lambda key, value: pairs.append((key, value)))
    assert data["dataset"] == {"count": 2, "fingerprint": "f", "hashes": {}}
    assert found and pairs == [("a", "1"), ("b", "2")]


@pytest.mark.parametrize(
    "text",
    [
        '{"format": 1, "dataset": {"count": 1, "fingerprint": "f", "hashes": {"a": 3}}}',
        '{"format": 1, "dataset": {"count": 1, "fingerprint": "f", "hashes": {"a": "1"}}',
        '{"format": 1, "dataset": {"count": 1, "fingerprint": "f", "hashes": {"a": "1"}}} x',
        '{"format": 1, "dataset": {"count": 1, "fingerprint": "f"}}',
        "[1, 2]",
        "",
    ],
)
def test_damaged_meta_is_refused(tmp_path, text):
    (tmp_path / "meta.json").write_text(text, encoding="utf-8")
    with pytest.raises(RunDirError):
        read_run_meta(RunDirectory(tmp_path), lambda key, value: None)
