"""Backend kind ``llm``: `llm`'s models through samplehooks, tested with ``llm-echo`` (offline).

``llm-echo`` answers with a JSON description of the prompt it got (prompt, system, options)
and reports usage in words. llm loads every installed llm plugin unless
``LLM_LOAD_PLUGINS`` names the ones to load (an installed llm plugin whose own dependencies
are missing would fail to import), so these tests name ``llm-echo``.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LLM_LOAD_PLUGINS", "llm-echo")  # read by llm when it is imported

from hook_specs import hookimpl
from sampling_core import Sampler
from sampling_core.backends import cache_identity
from sampling_core.hooks.entry_points import PluginSettings
from sampling_core.kinds import KindError, collect_kinds
from sampling_core.runs import run_batch_sync
from tests.support.runs_helpers import records, write_config, write_dataset


@pytest.fixture(scope="module")
def kinds() -> Any:
    return collect_kinds(PluginSettings(only=None, disabled=frozenset()))


def test_the_kind_comes_from_the_llm_plugin_through_register_backends(kinds: Any) -> None:
    assert kinds.provided["llm"] == [("backend", "llm")]
    assert kinds.get("backend", "llm").plugin == "llm"


def test_its_options_come_from_the_backends_parameters(kinds: Any) -> None:
    kind = kinds.get("backend", "llm")
    assert set(kind.options.model_fields) == {"model", "options", "key_env", "prefer_async"}
    labels = {option: kind.label(option) for option in kind.options.model_fields}
    assert labels == {
        "model": "result",
        "options": "result",
        "key_env": "location",  # where the key is: may change on resume
        "prefer_async": "throughput",
    }
    assert all(info.description for info in kind.options.model_fields.values())


class Calls:
    """Which of the model's APIs were used, and on which thread."""

    def __init__(self, backend: Any) -> None:
        self.seen: list[tuple[str, str]] = []
        for api in ("sync_model", "async_model"):
            model = getattr(backend, api)
            original = model.prompt

            def spy(*args: Any, _api: str = api, _original: Any = original, **kw: Any) -> Any:
                self.seen.append((_api, threading.current_thread().name))
                return _original(*args, **kw)

            model.prompt = spy


@pytest.mark.anyio
async def test_samples_through_llm_without_blocking_the_loop(
    kinds: Any, anyio_backend: str
) -> None:
    backend = kinds.backend("llm", model="echo", options={"example_bool": True})
    calls = Calls(backend)
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    providers: list[str | None] = []

    class Provider:
        @hookimpl
        def sampling_loop_start(self, payload: Any) -> None:
            providers.append(payload.provider_name)

    async with Sampler(backend, plugins=[Provider()], load_entrypoints=False) as sampler:
        result = await sampler.sample(
            prompt,
            requirements=[lambda text: '"prompt": "Hi there"' in text],
            options={"max_tokens": 20, "temperature": 0.1},  # echo takes neither: not passed
        )
    assert result.success, result.errors
    shown = json.loads(result.text)
    assert shown["system"] == "Be brief." and shown["options"] == {"example_bool": True}
    # usage as the model reports it: words of prompt + system in, words of the answer out
    assert result.usage.input_tokens == 4
    assert result.usage.output_tokens == len(result.text.split())
    assert result.attempts[0].generation.model == "echo"
    assert result.attempts[0].generation.raw["provider"] == "llm"
    assert providers == ["llm"]  # what spans and metrics are labelled with
    ((api, thread),) = calls.seen
    if anyio_backend == "asyncio":
        assert api == "async_model"  # awaited on the loop
    else:
        assert api == "sync_model" and thread != threading.main_thread().name  # a worker


@pytest.mark.anyio
async def test_earlier_turns_are_written_into_the_prompt(kinds: Any) -> None:
    backend = kinds.backend("llm", model="echo")
    messages = [
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Red."},
        {"role": "user", "content": "Another one."},
    ]
    async with Sampler(backend, load_entrypoints=False) as sampler:
        result = await sampler.sample(messages)
    shown = json.loads(result.text)
    assert shown["prompt"] == "User: Name a colour.\n\nAssistant: Red.\n\nUser: Another one."
    assert shown["system"] == ""


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"model": "no-such-model"}, "llm has no model 'no-such-model'"),
        ({"model": "echo", "options": {"example_bool": "perhaps"}}, "options.example_bool"),
        ({"model": "echo", "key_env": "sk-123 456"}, "option 'key_env'"),
        ({"modle": "echo"}, "did you mean 'model'?"),
        ({}, "option 'model' is required"),
    ],
)
def test_bad_options_are_one_line(kinds: Any, options: dict[str, Any], says: str) -> None:
    with pytest.raises(KindError) as caught:
        kinds.backend("llm", **options)
    message = str(caught.value)
    assert says in message and "\n" not in message
    assert message.startswith("backend 'llm' (plugin 'llm')")


def test_a_run_on_an_llm_model(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 3)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "llm", "model": "echo"},
        requirements=[{"contains": "Question number"}],
    )
    summary = run_batch_sync(config, tmp_path / "out")
    assert summary.as_dict()["ok"] == 3
    for record in records(tmp_path / "out"):
        assert record["usage"]["input_tokens"] == 3  # "Question number N?"
        assert record["usage"]["output_tokens"] > 0


def test_the_cache_tells_llm_models_and_their_options_apart(kinds: Any) -> None:
    plain = cache_identity(kinds.backend("llm", model="echo"))
    other = cache_identity(kinds.backend("llm", model="echo", options={"example_bool": True}))
    assert plain["model"] == other["model"] == "echo"
    assert plain != other and other["options"] == {"example_bool": True}
