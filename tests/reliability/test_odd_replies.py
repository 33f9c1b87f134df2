"""Odd and hostile replies: text that cannot be encoded, OpenAI-style list content, and
custom backends returning the wrong types. Each is either repaired at the backend boundary
or ends that attempt with a clear error; none breaks a file, a resume or the output."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hook_specs.records import Generation, Usage
from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import OpenAIBackend
from sampling_core.backends.base import BadReply, as_generation
from sampling_core.runs import run_batch_sync
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer
from tests.support.reliability_helpers import invoke
from tests.support.runs_helpers import records, write_config, write_dataset

ODD = ["lone \ud800 high", "lone \udfff low", "pair \ud83d\ude00 split", "nul \x00 and \u2028"]


@pytest.mark.parametrize("text", ODD)
def test_unencodable_reply_text_is_written_recorded_resumed_and_printed(
    tmp_path: Path, text: str
) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(tmp_path / "c.yaml", data, backend={"kind": "scripted", "replies": ["x"]})
    backend = ScriptedBackend([text])
    summary = run_batch_sync(config, tmp_path / "out", backend=backend)
    assert summary.done == 3
    written = records(tmp_path / "out")
    assert all("\ufffd" in r["text"] or "\u2028" in r["text"] for r in written)
    (tmp_path / "out" / "records.jsonl").write_bytes(
        b"".join((tmp_path / "out" / "records.jsonl").read_bytes().splitlines(True)[:1])
    )
    again = run_batch_sync(config, tmp_path / "out", backend=backend, resume=True)
    assert again.done == 3 and invoke("report", tmp_path / "out").exit_code == 0
    shown = invoke("sample", "hi", "--backend", "scripted", "--reply", text)
    assert shown.exit_code == 0, shown.output
    assert "lone" in shown.stdout or "pair" in shown.stdout or "nul" in shown.stdout


def test_a_dataset_line_with_a_lone_surrogate_is_named(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": "bad \\ud800"}\n')
    config = write_config(tmp_path / "c.yaml", data)
    result = invoke("run", config, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "d.jsonl:2" in result.stderr and "surrogate" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_list_content_in_dataset_messages_is_read_as_text(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    message = {"role": "user", "content": [{"type": "text", "text": "part one"}]}
    data.write_text(json.dumps({"id": "a", "prompt": [message]}) + "\n")
    config = write_config(tmp_path / "c.yaml", data)
    seen: list[Any] = []
    backend = ScriptedBackend(lambda request: seen.append(request.messages) or "answer")
    assert run_batch_sync(config, tmp_path / "out", backend=backend).ok == 1
    assert seen[0][-1]["content"] == "part one"


def list_reply(number: int, body: Any) -> Reply:
    parts = [
        {"type": "text", "text": "blue"},
        {"type": "image_url"},
        {"type": "text", "text": "sky"},
    ]
    return Reply(body={"choices": [{"message": {"role": "assistant", "content": parts}}]})


@pytest.mark.anyio
async def test_openai_style_list_content_in_a_reply_is_joined_text() -> None:
    with ScriptedHTTPServer(list_reply) as server:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=None) as backend:
            result = await Sampler(backend, load_entrypoints=False).sample("hi")
    assert result.text == "blue\nsky"


def test_samplehooks_sample_prints_a_list_content_reply() -> None:
    with ScriptedHTTPServer(list_reply) as server:
        shown = invoke(
            "sample", "hi", "--backend", "openai", "--model", "m", "--base-url", server.base_url
        )
    assert shown.exit_code == 0, shown.output
    assert "blue" in shown.stdout and "sky" in shown.stdout


@pytest.mark.parametrize(
    ("usage", "latency", "expected"),
    [
        (Usage(3.0, 4.0), 0.5, (3, 4, 0.5)),  # type: ignore[arg-type]
        (Usage("5", 6), "0.25", (5, 6, 0.25)),  # type: ignore[arg-type]
        (Usage(1, 2), None, (1, 2, 9.0)),  # type: ignore[arg-type]
    ],
)
def test_whole_number_counts_and_number_latencies_are_coerced(
    usage: Usage, latency: Any, expected: tuple[int, int, float]
) -> None:
    generation = as_generation(Generation("t", usage=usage, latency_s=latency), 9.0)
    got = (generation.usage.input_tokens, generation.usage.output_tokens, generation.latency_s)
    assert got == expected and all(type(v) is int for v in got[:2])


class Returns:
    """A custom backend: ``reply`` for prompt p1, a good answer for the others."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply

    async def generate(self, request: Any) -> Any:
        return self.reply if request.prompt.endswith("1?") else "fine"


@pytest.mark.parametrize(
    "reply",
    [
        Generation("t", usage=Usage(1.5, 2)),  # type: ignore[arg-type]
        Generation("t", usage=Usage(-1, 2)),
        Generation("t", usage=Usage(True, 2)),  # type: ignore[arg-type]
        Generation("t", usage=Usage(math.inf, 2)),  # type: ignore[arg-type]
        Generation("t", usage=Usage("many", 2)),  # type: ignore[arg-type]
        Generation("t", usage=(1, 2)),  # type: ignore[arg-type]
        Generation("t", latency_s="fast"),  # type: ignore[arg-type]
        Generation("t", latency_s=math.nan),
        Generation("t", latency_s=-1.0),
        Generation(["a", "list"]),  # type: ignore[arg-type]
        42,
    ],
)
def test_a_bad_reply_is_a_clear_error_for_that_attempt(reply: Any, tmp_path: Path) -> None:
    with pytest.raises(BadReply, match="backend returned"):
        as_generation(reply, 0.1)
    backend = Returns(reply)
    data = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(tmp_path / "c.yaml", data)
    summary = run_batch_sync(config, tmp_path / "out", backend=backend)
    assert (summary.ok, summary.error) == (2, 1)
    (bad,) = [r for r in records(tmp_path / "out") if r["status"] == "error"]
    assert (
        bad["key"] == "p1" and "BadReply" in bad["reason"] and "backend returned" in bad["reason"]
    )
    assert invoke("report", tmp_path / "out").exit_code == 0
