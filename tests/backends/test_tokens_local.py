"""On the real llama.cpp server (the session's ``llama_server``): a failing prefix closes
the request and the server stops decoding; the tokens counted for cancelled streams agree
with the server's own counters; ``format=`` constrains the decoding.

The server's ``/metrics`` counters are read once its slots are known to be idle: a request
pinned to a slot (``id_slot``) waits for that slot's earlier work, cancelled or not, to end.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest
from pydantic import BaseModel

from hook_specs import GenerationChunkPayload, hookimpl
from sampling_core import Sampler
from sampling_core.backends import LocalBackend
from sampling_core.requirements.checks import max_words
from tests.support._servers.llama import SLOTS, metrics

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RAMBLE = "Tell me a long story about a dragon, a knight and a wizard."


async def settled(base_url: str, slots: range) -> tuple[dict[str, float], int, int]:
    """The server's counters once every slot in ``slots`` is idle, and the input and output
    tokens the pinned requests that waited for them spent."""

    async def pin(client: httpx.AsyncClient, slot: int, spent: list[dict[str, int]]) -> None:
        reply = await client.post(
            "/v1/chat/completions",
            json={
                "messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 1,
                "id_slot": slot,
            },
        )
        spent.append(reply.json()["usage"])

    spent: list[dict[str, int]] = []
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=60) as client,
        anyio.create_task_group() as group,
    ):
        for slot in slots:
            group.start_soon(pin, client, slot, spent)
    counters = await anyio.to_thread.run_sync(metrics, base_url)
    return (
        counters,
        sum(u["prompt_tokens"] for u in spent),
        sum(u["completion_tokens"] for u in spent),
    )


def decoded(before: dict[str, float], after: dict[str, float]) -> tuple[float, float]:
    """Input tokens (processed or taken from the cache) and output tokens, between two readings."""
    inputs = (after["prompt_tokens_total"] + after["prompt_tokens_cached_total"]) - (
        before["prompt_tokens_total"] + before["prompt_tokens_cached_total"]
    )
    return inputs, after["tokens_predicted_total"] - before["tokens_predicted_total"]


class Listens:
    """Someone needs the chunks: the backend streams."""

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        pass


async def test_a_failing_prefix_closes_the_request_and_the_server_stops_decoding(
    llama_server: Any,
) -> None:
    base = llama_server.base_url
    async with LocalBackend(server=llama_server) as backend:
        before, _, _ = await settled(base, range(SLOTS))
        result = await Sampler(backend, load_entrypoints=False).sample(
            RAMBLE,
            requirements=[max_words(5)],
            options={"max_tokens": 200, "temperature": 0.0, "id_slot": 0},
        )
        after, _, pinned_out = await settled(base, range(1))
    (attempt,) = result.attempts
    assert attempt.stopped_early and not result.success
    assert len(attempt.text.split()) == 6  # stopped at the word that broke the limit
    arrived = attempt.generation.usage.output_tokens
    _, server_out = decoded(before, after)
    server_out -= pinned_out
    # The server decoded what arrived, and at most a few tokens more while the close
    # reached it: nowhere near the 200 it was allowed.
    assert arrived <= server_out <= arrived + 3, (arrived, server_out)
    assert after["requests_processing"] == 0
    assert llama_server.running  # the backend was lent the server: it left it running


class FirstIsShort:
    """Subsample 0 asks for 4 tokens, the others for 200: it answers first and its pass
    cancels siblings still decoding (with equal lengths the slots, decoded in step, could
    all finish before the cancellation lands)."""

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        payload.options = {
            **payload.options,
            "max_tokens": 4 if payload.subsample_index == 0 else 200,
        }


async def test_cancelled_streams_count_what_the_server_decoded(llama_server: Any) -> None:
    base = llama_server.base_url
    async with LocalBackend(server=llama_server) as backend:
        sampler = Sampler(backend, plugins=[Listens(), FirstIsShort()], load_entrypoints=False)
        before, _, _ = await settled(base, range(SLOTS))
        result = await sampler.sample(
            RAMBLE,
            requirements=[lambda text: True],
            concurrency_budget=SLOTS,
            seed=3,
        )
        after, pinned_in, pinned_out = await settled(base, range(SLOTS))
    assert result.success and result.cancelled >= 1  # the first answer cancelled the others
    # a streamed attempt's output is known as it arrived
    assert result.cancelled_usage.output_tokens is not None
    server_in, server_out = decoded(before, after)
    counted_out = result.usage.output_tokens
    assert counted_out is not None
    assert counted_out <= server_out - pinned_out <= counted_out + 3 * result.cancelled
    # llama.cpp's per-token timings and prompt progress give the input tokens; a sibling
    # cancelled before the server even began its prompt (a rare race) leaves them unknown
    if result.usage.input_tokens is not None:
        assert result.usage.input_tokens == server_in - pinned_in
    else:
        assert result.cancelled_usage.input_tokens is None


async def test_without_streaming_cancelled_work_is_unknown_not_zero(llama_server: Any) -> None:
    async with LocalBackend(server=llama_server) as backend:
        result = await Sampler(backend, plugins=[FirstIsShort()], load_entrypoints=False).sample(
            RAMBLE,
            requirements=[lambda text: True],
            concurrency_budget=SLOTS,
            seed=3,
        )
        await settled(llama_server.base_url, range(SLOTS))
    assert result.success and result.cancelled >= 1
    assert result.usage.output_tokens is None and result.usage.input_tokens is None


class City(BaseModel):
    name: str
    country: str


async def test_format_constrains_the_local_model_so_the_first_attempt_parses(
    llama_server: Any,
) -> None:
    async with LocalBackend(server=llama_server) as backend:
        result = await Sampler(backend, load_entrypoints=False).sample(
            "Name a large city.", format=City, options={"max_tokens": 64}, seed=7
        )
    assert result.success and result.iterations_used == 1
    assert isinstance(result.value, City) and result.value.name
