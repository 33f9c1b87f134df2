"""Streams that lie: a streamed reply that is not a whole answer is a failed call.

The OpenAI-compatible backend reads a real stream from a server on 127.0.0.1. An error
event after the ``200``, data that is not a JSON object, and a stream ending with neither
``[DONE]`` nor a ``finish_reason`` are transient failures: never an answer, never cached.
A frame may arrive in any number of network reads, and one line is never buffered without
bound.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from sampling_core import RetryPolicy, Sampler
from sampling_core.backends import AttemptTimeout, GenerationRequest, OpenAIBackend
from sampling_core.backends.openai_compat import BackendError
from sampling_core.backends.transport import TransientBackendError
from sampling_core.requirements import max_words
from sampling_core.runs import run_batch_sync
from tests.support._servers.scripted_http import (
    ScriptedHTTPServer,
    Stream,
    chunk_event,
    sse,
    streamed,
)

pytestmark = [pytest.mark.anyio]

NO_RETRY = RetryPolicy(max_retries=0, base_delay=0.0)


def split_everywhere(frames: list[bytes]) -> list[bytes]:
    """Each frame in two network writes, cut at a different place each time (inside
    ``data:``, the JSON, a multi-byte character, between ``\\r`` and ``\\n``)."""
    pieces = []
    for number, frame in enumerate(frames):
        cut = 1 + (number * 7) % (len(frame) - 1)
        pieces += [frame[:cut], frame[cut:]]
    return pieces


async def streamed_text(server: ScriptedHTTPServer, backend: OpenAIBackend | None = None) -> Any:
    """What ``stream()`` made of the server's reply: the final generation and the chunks."""
    backend = backend or OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
    async with backend:
        items = [item async for item in backend.stream(GenerationRequest([]))]
    *chunks, generation = items
    return generation, [chunk.text for chunk in chunks if chunk.text]


async def test_a_frame_that_arrives_in_two_reads_is_read_whole() -> None:
    frames = streamed("Hello", " wörld", " ✓", finish_reason="stop")
    frames.insert(1, b": keep-alive\r\n\r\n")
    frames[2] = frames[2].replace(b"\n", b"\r\n")  # a "\r\n" that may be cut between reads
    pieces = split_everywhere(frames)
    pieces[2:2] = [frames[1][:-2] + b"\r", b"\n\r\n"]  # a break cut between "\r" and "\n"
    with ScriptedHTTPServer(lambda n, body: Stream(pieces)) as server:
        generation, texts = await streamed_text(server)
    assert texts == ["Hello", " wörld", " ✓"]
    assert generation.text == "Hello wörld ✓" and generation.finish_reason == "stop"
    assert generation.usage.input_tokens == 5


async def test_data_in_many_lines_is_one_event() -> None:
    event = chunk_event("two lines", "stop")
    text = sse(event).decode().replace('"choices": ', '"choices":\ndata: ')
    # a byte order mark first, empty data and another event's name are no content
    frames = [("\ufeff" + text).encode(), b"data:\n\n", b"event: ping\ndata: {}\n\n"]
    frames.append(sse("[DONE]"))
    with ScriptedHTTPServer(lambda n, body: Stream(frames)) as server:
        generation, _ = await streamed_text(server)
    assert generation.text == "two lines"


BROKEN = {
    "an error event after the 200": [
        *streamed("Hello", finish_reason=None, done=False),
        sse({"error": {"message": "the engine died", "code": 500}}),
        sse("[DONE]"),
    ],
    "vLLM's error object": [
        *streamed("Hello", finish_reason=None, done=False),
        sse({"object": "error", "message": "out of memory", "type": "InternalServerError"}),
        *streamed(finish_reason="stop"),
    ],
    "an event named error": [
        *streamed("Hello", finish_reason=None, done=False),
        b'event: error\ndata: {"message": "overloaded"}\n\n',
        sse("[DONE]"),
    ],
    "an error event without data": [
        *streamed("Hello", finish_reason=None, done=False),
        b"event: error\n\n",
        *streamed(finish_reason="stop"),
    ],
    "data that is not JSON": [
        *streamed("Hello", finish_reason=None, done=False),
        b"data: world, as plain text\n\n",
        *streamed(finish_reason="stop"),
    ],
    "data that is not a JSON object": [
        *streamed("Hello", finish_reason=None, done=False),
        sse("[1, 2]"),
        *streamed(finish_reason="stop"),
    ],
    "a stream cut short": streamed("Hello", " world", finish_reason=None, done=False),
    "a stream cut inside an event": [
        *streamed("Hello", finish_reason=None, done=False),
        b'data: {"choices": [{"delta": {"content": " wor',
    ],
}


@pytest.mark.parametrize("frames", BROKEN.values(), ids=BROKEN.keys())
async def test_a_stream_that_is_not_a_whole_answer_is_a_transient_failure(
    frames: list[bytes],
) -> None:
    with (
        ScriptedHTTPServer(lambda n, body: Stream(frames)) as server,
        pytest.raises(TransientBackendError, match=r"127\.0\.0\.1"),
    ):
        await streamed_text(server)


async def test_a_broken_stream_is_never_an_answer_nor_cached(tmp_path: Path) -> None:
    replies = [*BROKEN.values(), streamed("fine", finish_reason="stop")]

    def script(number: int, body: Any) -> Stream:
        return Stream(replies[min(number, len(replies)) - 1])

    with ScriptedHTTPServer(script) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
        async with backend:
            sampler = Sampler(
                backend, cache=tmp_path / "c.sqlite", retry=NO_RETRY, load_entrypoints=False
            )
            for _ in BROKEN:  # streamed (a prefix check needs chunks): each one fails
                with pytest.raises(TransientBackendError):
                    await sampler.sample("q", requirements=[max_words(50)], seed=1)
            result = await sampler.sample("q", requirements=[max_words(50)], seed=1)
            again = await sampler.sample("q", requirements=[max_words(50)], seed=1)
            await sampler.aclose()
    assert result.success and result.text == "fine" and not result.attempts[0].cached
    assert again.text == "fine" and again.attempts[0].cached  # only the whole answer kept
    assert len(server.arrivals) == len(BROKEN) + 1


async def test_with_retries_a_broken_stream_is_asked_again() -> None:
    replies = [BROKEN["a stream cut short"], streamed("whole", finish_reason="length")]
    with ScriptedHTTPServer(lambda n, body: Stream(replies[min(n, 2) - 1])) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
        async with backend:
            sampler = Sampler(
                backend, retry=RetryPolicy(max_retries=1, base_delay=0.0), load_entrypoints=False
            )
            result = await sampler.sample("q", requirements=[max_words(50)])
    assert result.text == "whole" and len(server.arrivals) == 2


async def test_one_line_is_never_buffered_without_bound() -> None:
    endless = [b"data: " + b"x" * 1000] * 200  # one line of 200 kB, never ended
    with ScriptedHTTPServer(lambda n, body: Stream(endless, gap=0.0)) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
        backend.max_event_chars = 10_000
        with pytest.raises(BackendError, match="longer than 10,000 characters"):
            await streamed_text(server, backend)


def test_lines_are_cut_at_every_break_whatever_the_reads() -> None:
    import anyio

    from sampling_core.backends.sse import EventTooLong, event_lines

    async def lines(reads: list[bytes], limit: int = 100) -> list[str]:
        async def chunks() -> Any:
            for read in reads:
                yield read

        return [line async for line in event_lines(chunks(), limit)]

    text = "a\r\nb\rc\nd\r\n\r\né✓\nlast".encode()
    whole = anyio.run(lines, [text])
    assert whole == ["a", "b", "c", "d", "", "é✓", "last"]
    assert anyio.run(lines, [text[i : i + 1] for i in range(len(text))]) == whole
    with pytest.raises(EventTooLong):
        anyio.run(lines, [b"y" * 60, b"y" * 60])


KEPT_ALIVE = {
    "by comments": [b": ping\n\n"] * 100,
    "by empty chunks": [sse(chunk_event(""))] * 100,
}


@pytest.mark.parametrize("pieces", KEPT_ALIVE.values(), ids=KEPT_ALIVE.keys())
async def test_a_stream_kept_alive_ends_at_the_calls_deadline(pieces: list[bytes]) -> None:
    with ScriptedHTTPServer(lambda n, body: Stream(pieces, gap=0.05)) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None, timeout=2)
        async with backend:
            sampler = Sampler(backend, attempt_timeout=0.5, retry=NO_RETRY, load_entrypoints=False)
            with pytest.raises(AttemptTimeout, match=r"longer than 0\.5s"):
                await sampler.sample("q", requirements=[max_words(50)])


def test_a_run_configs_call_deadline_ends_a_stream_kept_alive(tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text('{"id": "a", "prompt": "q"}\n')
    with ScriptedHTTPServer(lambda n, body: Stream(KEPT_ALIVE["by comments"], gap=0.05)) as s:
        config = {
            "dataset": {"path": str(dataset)},
            "backend": {
                "kind": "openai",
                "model": "m",
                "base_url": s.base_url,
                "timeout_s": 2,
                "retries": {"max_retries": 0},
            },
            "requirements": [{"max_words": 50}],
            "attempt_timeout_s": 0.5,
        }
        (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
        summary = run_batch_sync(tmp_path / "run.yaml", tmp_path / "run")
    assert summary.error == 1
    (record,) = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").open()]
    assert "longer than 0.5s" in json.dumps(record)


def test_a_wait_that_would_last_forever_is_refused(tmp_path: Path) -> None:
    import anyio

    from sampling_core import ScriptedBackend
    from sampling_core.runs import ConfigError, load_config

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    for stagger in (1e308, 3601, -1):
        ask = partial(sampler.sample, "q", launch="staggered", stagger_s=stagger)
        with pytest.raises(ValueError, match="stagger_s must be a number of seconds from 0 to"):
            anyio.run(ask)
    (tmp_path / "d.jsonl").write_text('{"id": "a", "prompt": "q"}\n')
    config = "dataset: {path: d.jsonl}\nbackend: {kind: scripted, replies: [x]}\n"
    for where, setting in {
        r"budgets\.stagger_s": "budgets: {stagger_s: 1e308}",
        r"backend\.retries\.base_delay_s": "backend: {kind: scripted, replies: [x], "
        "retries: {base_delay_s: 1e308, max_delay_s: 1e308}}",
    }.items():
        body = config if setting.startswith("budgets") else "dataset: {path: d.jsonl}\n"
        (tmp_path / "run.yaml").write_text(body + setting + "\n")
        with pytest.raises(ConfigError, match=where):
            load_config(tmp_path / "run.yaml")
    for name in ("base_delay", "max_delay", "max_retry_after"):
        with pytest.raises(ValueError, match=f"RetryPolicy.{name} must be a number of seconds"):
            RetryPolicy(**{name: 1e308})
