"""``OpenAIBackend`` against a real OpenAI-compatible server: llama.cpp's, on the embedded model.

The server (4 slots) is started once per session by the ``llama_server`` fixture. Answers
are checked for structure and counts, never for exact text.
"""

from __future__ import annotations

import time

import anyio
import pytest

from sampling_core import Generation, Sampler
from sampling_core.backends import GenerationRequest, OpenAIBackend
from sampling_core.backends.openai_compat import BackendError
from tests.support._servers.llama import SLOTS, busy_slots_per_decode, metrics

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SHORT = {"max_tokens": 8, "temperature": 0.0}


def ask(text: str, **options: object) -> GenerationRequest:
    return GenerationRequest([{"role": "user", "content": text}], {**SHORT, **options})


async def test_chat_completion_maps_text_usage_finish_reason_model_and_latency(
    llama_server,
) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        generation = await backend.generate(ask("Name a fruit.", max_tokens=6, seed=7))

    assert isinstance(generation, Generation)
    assert generation.text.strip()
    assert generation.usage.input_tokens > 0
    assert 1 <= generation.usage.output_tokens <= 6
    assert generation.finish_reason in ("stop", "length")
    assert generation.model  # the server names its model
    assert generation.latency_s > 0
    assert generation.raw["usage"]["completion_tokens"] == generation.usage.output_tokens


async def test_max_tokens_bounds_the_answer(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        generation = await backend.generate(ask("Write a long story about the sea.", max_tokens=3))
    assert generation.usage.output_tokens <= 3
    assert generation.finish_reason == "length"


async def test_plain_completions_mode(llama_server) -> None:
    backend = OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1", mode="completions")
    async with backend:
        generation = await backend.generate(ask("The capital of France is", max_tokens=4))
    assert generation.usage.input_tokens > 0
    assert 1 <= generation.usage.output_tokens <= 4
    assert generation.raw["object"] == "text_completion"


async def test_the_same_seed_gives_the_same_answer(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        # cache_prompt=False (llama.cpp): both runs evaluate the prompt the same way.
        request = ask("Say something about cats.", temperature=1.0, seed=1234, cache_prompt=False)
        first = await backend.generate(request)
        second = await backend.generate(request)
    assert first.text == second.text


async def test_concurrent_requests_overlap_on_the_server(llama_server) -> None:
    spans: list[tuple[float, float]] = []

    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:

        async def one(i: int) -> None:
            began = time.monotonic()
            await backend.generate(ask(f"Count to {i + 3}.", max_tokens=12))
            spans.append((began, time.monotonic()))

        before = await anyio.to_thread.run_sync(metrics, llama_server.base_url)
        async with anyio.create_task_group() as group:
            for i in range(SLOTS):
                group.start_soon(one, i)
        after = await anyio.to_thread.run_sync(metrics, llama_server.base_url)

    assert len(spans) == SLOTS
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # all open at once
    # Served one at a time, every decode step would serve exactly one slot.
    assert busy_slots_per_decode(before, after) > 1.5


async def test_sampling_through_the_engine(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        result = await Sampler(backend, load_entrypoints=False).sample(
            "Name a colour.", loop_budget=2, concurrency_budget=2, options=SHORT, seed=3
        )
    assert result.text is not None
    assert 1 <= result.iterations_used <= 4
    # the attempts' own counts; the call's are unknown when it cancelled one in flight
    assert sum(a.generation.usage.input_tokens for a in result.attempts) >= result.iterations_used
    assert result.usage.input_tokens is not None or result.cancelled


async def test_an_unknown_route_is_a_clear_non_transient_error(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/nowhere") as backend:
        with pytest.raises(BackendError) as caught:
            await backend.generate(ask("hi"))
    assert caught.value.status == 404
    assert "base_url" in str(caught.value)


def test_request_body_mapping() -> None:
    backend = OpenAIBackend(
        "my-model",
        base_url="http://127.0.0.1:9/v1",
        default_options={"temperature": 0.2, "top_p": 0.9},
    )
    request = GenerationRequest(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        {"temperature": 0.7, "max_tokens": 5, "seed": 3, "stop": ["\n"], "stream": True},
    )
    body = backend.build_body(request)
    assert body == {
        "model": "my-model",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 5,
        "seed": 3,
        "stop": ["\n"],
    }
    completions = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1", mode="completions")
    assert completions.build_body(request)["prompt"] == "system: Be brief.\nuser: Hi\nassistant:"
