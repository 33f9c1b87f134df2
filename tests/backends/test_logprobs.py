"""Token log-probabilities: asked for by option, parsed from streams and whole replies, and
carried on chunks, ``generation_chunk`` payloads and the generation."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from hook_specs import GenerationChunkPayload, TokenLogprob, hookimpl
from sampling_core import Generation, GenerationRequest, Sampler, ScriptedBackend
from sampling_core.backends import OpenAIBackend
from sampling_core.backends.base import Chunk
from sampling_core.backends.scripted import scripted_logprobs
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer

pytestmark = pytest.mark.anyio

ASK = {"logprobs": True, "top_logprobs": 2}


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data)}\n\n"


def _token(token: str, logprob: float, *top: tuple[str, float]) -> dict[str, Any]:
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in top],
    }


# An OpenAI chat-completions stream with logprobs, as recorded (ids and bytes shortened).
RECORDED_CHAT_STREAM = "".join(
    [
        _event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": {"content": [], "refusal": None},
                        "finish_reason": None,
                    }
                ],
            }
        ),
        _event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "Par"},
                        "logprobs": {
                            "content": [_token("Par", -0.02, ("Par", -0.02), ("The", -4.1))],
                            "refusal": None,
                        },
                        "finish_reason": None,
                    }
                ],
            }
        ),
        _event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": "is."},
                        "logprobs": {
                            "content": [
                                _token("is", -0.001, ("is", -0.001), ("ma", -7.0)),
                                _token(".", -0.7, (".", -0.7), ("!", -0.9)),
                            ],
                            "refusal": None,
                        },
                        "finish_reason": None,
                    }
                ],
            }
        ),
        _event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}],
            }
        ),
        _event(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [],
                "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
            }
        ),
        "data: [DONE]\n\n",
    ]
)


async def test_a_recorded_openai_stream_carries_each_tokens_logprobs() -> None:
    with ScriptedHTTPServer(
        lambda n, body: Reply(body=RECORDED_CHAT_STREAM, content_type="text/event-stream")
    ) as server:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=None) as backend:
            items = [i async for i in backend.stream(GenerationRequest([], dict(ASK)))]
    sent = server.arrivals[0].body
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2
    chunks = [i for i in items if isinstance(i, Chunk)]
    assert [c.text for c in chunks] == ["Par", "is."]
    assert [[t.token for t in c.logprobs] for c in chunks] == [["Par"], ["is", "."]]
    whole = items[-1]
    assert isinstance(whole, Generation) and whole.text == "Paris."
    assert whole.logprobs == (
        TokenLogprob("Par", -0.02, (("Par", -0.02), ("The", -4.1))),
        TokenLogprob("is", -0.001, (("is", -0.001), ("ma", -7.0))),
        TokenLogprob(".", -0.7, ((".", -0.7), ("!", -0.9))),
    )


async def test_a_whole_reply_carries_logprobs_and_none_when_not_asked() -> None:
    body = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "4"},
                "finish_reason": "stop",
                "logprobs": {"content": [_token("4", -0.5, ("4", -0.5), ("5", -1.5))]},
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    with ScriptedHTTPServer(lambda n, b: Reply(body=body)) as server:
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=None) as backend:
            asked = await backend.generate(GenerationRequest([], dict(ASK)))
            body["choices"][0].pop("logprobs")
            plain = await backend.generate(GenerationRequest([]))
    assert asked.logprobs == (TokenLogprob("4", -0.5, (("4", -0.5), ("5", -1.5))),)
    assert plain.logprobs is None


async def test_legacy_completions_are_asked_and_read_in_their_own_shape() -> None:
    body = {
        "model": "m",
        "choices": [
            {
                "index": 0,
                "text": " 4",
                "finish_reason": "stop",
                "logprobs": {
                    "tokens": [" 4"],
                    "token_logprobs": [-0.25],
                    "top_logprobs": [{" 5": -2.0, " 4": -0.25}],
                },
            }
        ],
    }
    with ScriptedHTTPServer(lambda n, b: Reply(body=body)) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None, mode="completions")
        async with backend:
            generation = await backend.generate(GenerationRequest([], dict(ASK)))
    assert server.arrivals[0].body["logprobs"] == 2  # the number of top tokens
    assert "top_logprobs" not in server.arrivals[0].body
    assert generation.logprobs == (TokenLogprob(" 4", -0.25, ((" 4", -0.25), (" 5", -2.0))),)


class ChunkLog:
    def __init__(self) -> None:
        self.seen: list[GenerationChunkPayload] = []

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.seen.append(payload)


async def test_scripted_logprobs_reach_chunk_payloads_and_the_attempt() -> None:
    tokens = scripted_logprobs(["4", "2"], [math.log(0.9), math.log(0.6)])
    backend = ScriptedBackend(lambda r: Generation("42", logprobs=tokens))
    log = ChunkLog()
    result = await Sampler(backend, plugins=[log], load_entrypoints=False).sample("q")
    assert [p.delta for p in log.seen] == ["4", "2"]
    assert [[(t.token, t.logprob) for t in p.logprobs] for p in log.seen] == [
        [("4", math.log(0.9))],
        [("2", math.log(0.6))],
    ]
    assert result.attempts[0].generation.logprobs == tokens


@pytest.mark.slow
async def test_a_real_llama_cpp_stream_carries_logprobs(llama_server: Any) -> None:
    log = ChunkLog()
    backend = OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1")
    async with backend:
        result = await Sampler(backend, plugins=[log], load_entrypoints=False).sample(
            "What is 2 + 2? Answer with a number.",
            options={"max_tokens": 8, "temperature": 0.0, **ASK},
        )
    generation = result.attempts[0].generation
    assert generation.logprobs is not None and len(generation.logprobs) >= 1
    assert "".join(t.token for t in generation.logprobs) == generation.text
    for token in generation.logprobs:
        assert token.logprob <= 0.0 and len(token.top) == 2
        assert token.top[0][1] >= token.top[1][1]  # most likely first
    streamed = [(t.token, t.logprob) for p in log.seen for t in p.logprobs]
    assert streamed == [(t.token, t.logprob) for t in generation.logprobs]


async def test_a_run_keeps_logprobs_in_its_records_only_when_asked(tmp_path: Any) -> None:
    from sampling_core.runs import run_batch
    from tests.support.runs_helpers import write_config, write_dataset

    tokens = scripted_logprobs(["4", "2"], [math.log(0.9), math.log(0.6)])

    def reply(request: GenerationRequest) -> Any:
        return Generation("42", logprobs=tokens) if request.options.get("logprobs") else "42"

    dataset = write_dataset(tmp_path / "d.jsonl", 1)
    for asked, out in ((True, tmp_path / "asked"), (False, tmp_path / "plain")):
        options = {"logprobs": True, "top_logprobs": 2} if asked else {}
        config = write_config(tmp_path / f"{asked}.yaml", dataset, options=options)
        await run_batch(config, out, backend=ScriptedBackend(reply))
        record = json.loads((out / "records.jsonl").read_text().splitlines()[0])
        (entry,) = record["attempts"]["each"]
        if asked:
            first = entry["logprobs"][0]
            assert (first["token"], first["logprob"]) == ("4", math.log(0.9))
            assert [name for name, _ in first["top"]] == ["4", "<alt1>"]
            assert math.isclose(first["top"][1][1], math.log(0.1))
        else:
            assert "logprobs" not in entry
