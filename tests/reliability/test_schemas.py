"""No ``format=`` schema ever causes network (or file) access, and a bad one is refused up front.

A reference outside the schema (a URL, a relative file name, ``file://``) is refused when
the schema is given, in Python, in a run's YAML and in ``samplehooks sample --format``; so
is a reference to a definition the schema does not hold, and a schema nested too deeply.
The tests point the references at a real server on 127.0.0.1 and check nothing arrived.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements.formats import schema_validator
from sampling_core.runs import ConfigError, load_config
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer
from tests.support.reliability_helpers import assert_refused, invoke

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[ScriptedHTTPServer]:
    """A server that would hand out a schema to anyone who asked: nobody may ask."""
    with ScriptedHTTPServer(lambda n, body: Reply(body={"type": "string"})) as running:
        yield running


def outside(url: str) -> dict[str, Any]:
    """Schemas whose references point outside themselves, each in another place."""
    return {
        "at the root": {"$ref": f"{url}/schema.json"},
        "in a property": {"type": "object", "properties": {"a": {"$ref": f"{url}/a.json"}}},
        "in a list": {"anyOf": [{"type": "null"}, {"$ref": f"{url}/b.json#/x"}]},
        "relative to a $id": {
            "$id": f"{url}/root.json",
            "properties": {"a": {"$ref": "sibling.json"}},
        },
        "a relative file": {"properties": {"a": {"$ref": "other.json"}}},
        "a file URL": {"items": {"$ref": "file:///etc/hostname"}},
        "a $dynamicRef": {"$dynamicRef": f"{url}/c.json#meta"},
        "draft 7": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "properties": {"a": {"$ref": f"{url}/d.json"}},
        },
    }


MISSING = {
    "a missing $defs entry": {"properties": {"a": {"$ref": "#/$defs/nothing"}}},
    "a pointer past a definition": {"$defs": {"a": {}}, "$ref": "#/$defs/a/b"},
    "a missing anchor": {"$ref": "#nowhere"},
    "a missing draft-7 definition": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"a": {}},
        "$ref": "#/definitions/b",
    },
}

FINE = {
    "local definitions": {
        "$defs": {"n": {"type": "integer"}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/n"}},
    },
    "a recursive schema": {"type": "array", "items": {"$ref": "#"}},
    "a subschema with its own $id": {
        "$id": "https://example.invalid/root.json",
        "$defs": {"s": {"$id": "s.json", "type": "string"}},
        "properties": {"a": {"$ref": "s.json"}},
    },
    "a $ref that is only data": {"default": {"$ref": "https://example.invalid/x"}},
}


def nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


async def test_a_reference_outside_the_schema_is_refused_before_any_call(
    server: ScriptedHTTPServer,
) -> None:
    backend = ScriptedBackend(['"a string"'])
    sampler = Sampler(backend, load_entrypoints=False)
    for where, schema in outside(f"http://127.0.0.1:{server.port}").items():
        with pytest.raises(ValueError, match="points outside the schema") as refused:
            await sampler.sample("q", format=schema)
        assert "$defs" in str(refused.value), where  # the way out
    assert backend.calls == 0 and server.arrivals == []


async def test_a_reference_to_a_missing_definition_is_refused_up_front() -> None:
    backend = ScriptedBackend(['{"a": 1}'])
    sampler = Sampler(backend, load_entrypoints=False)
    for schema in MISSING.values():
        with pytest.raises(ValueError, match="names no definition in the schema"):
            await sampler.sample("q", format=schema, loop_budget=3)
    assert backend.calls == 0


def test_schemas_that_refer_only_to_themselves_are_accepted() -> None:
    for schema in FINE.values():
        schema_validator(schema)


def test_a_schema_nested_too_deeply_is_refused_not_a_recursion_error() -> None:
    schema_validator(nested(20))
    with pytest.raises(ValueError, match="nested more than 64 levels"):
        schema_validator(nested(2_000))


def test_a_run_config_with_a_reference_outside_its_format_is_refused(
    tmp_path: Path, server: ScriptedHTTPServer
) -> None:
    (tmp_path / "d.jsonl").write_text('{"id": "a", "prompt": "q"}\n')
    for schema in [*outside(f"http://127.0.0.1:{server.port}").values(), *MISSING.values()]:
        config = {
            "dataset": {"path": "d.jsonl"},
            "backend": {"kind": "scripted", "replies": ["x"]},
            "format": schema,
        }
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(config))
        with pytest.raises(ConfigError, match=r"format: .*(points outside|names no definition)"):
            load_config(path)
    assert server.arrivals == []


def test_sample_format_refuses_each_bad_schema_in_one_line(
    tmp_path: Path, server: ScriptedHTTPServer
) -> None:
    schemas = {
        **outside(f"http://127.0.0.1:{server.port}"),
        **MISSING,
        "too deep for JSON": "[" * 100_000 + "]" * 100_000,
        "too deep for a schema": nested(100),
    }
    for name, schema in schemas.items():
        path = tmp_path / "schema.json"
        path.write_text(schema if isinstance(schema, str) else json.dumps(schema))
        result = invoke("sample", "q", "--backend", "scripted", "--reply", '"x"', "--format", path)
        line = assert_refused(result, "--format: ", str(path))
        assert "nested" in line or "definition" in line, (name, line)
    assert server.arrivals == []
