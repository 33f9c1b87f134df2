"""The response cache's key: the request as the backend sends it, the model and the server."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import GenerationRequest, LocalBackend, OpenAIBackend, cache_identity
from sampling_core.backends.cache_keys import (
    canonical,
    check_identity,
    cut_by,
    cut_identity,
    request_key,
)
from sampling_core.backends.cache_store import APPLICATION_ID, ResponseCache
from sampling_core.backends.local import LlamaServer
from sampling_core.requirements import Requirement, max_words, not_contains
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
OTHER_SCHEMA = {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]}
DEFAULTS = {"max_tokens": 5, "temperature": 0.0}


def answering(n: int, body: Any) -> Reply:
    return Reply(body=completion('{"a": 1}'))


def changed(one: dict[str, Any], other: dict[str, Any]) -> set[str]:
    return {k for k in one.keys() | other.keys() if one.get(k) != other.get(k)}


async def test_every_field_of_the_body_sent_is_in_the_key(tmp_path: Path) -> None:
    """Each variant changes one field of the body the server receives, and is a miss; the
    variants together change every field of the base request's body."""
    with ScriptedHTTPServer(answering) as server, ScriptedHTTPServer(answering) as elsewhere:

        def backend(model: str = "m", url: str = server.base_url, **kw: Any) -> OpenAIBackend:
            kw.setdefault("default_options", DEFAULTS)
            return OpenAIBackend(model, base_url=url, api_key_env=None, **kw)

        base: dict[str, Any] = {
            "seed": 1,
            "options": {"stop": ["\n"], "top_p": 0.9},
            "format": SCHEMA,
        }
        variants: dict[str, tuple[OpenAIBackend, dict[str, Any], str]] = {
            "model": (backend("m2"), {}, "q"),
            "messages": (backend(), {}, "another question"),
            "max_tokens": (backend(default_options={**DEFAULTS, "max_tokens": 60}), {}, "q"),
            "temperature": (backend(), {"options": {**base["options"], "temperature": 1.5}}, "q"),
            "stop": (backend(), {"options": {"stop": ["."], "top_p": 0.9}}, "q"),
            "top_p": (backend(), {"options": {"stop": ["\n"], "top_p": 0.5}}, "q"),
            "seed": (backend(), {"seed": 2}, "q"),
            "response_format": (backend(), {"format": OTHER_SCHEMA}, "q"),
        }
        cache = ResponseCache(tmp_path / "c.sqlite")
        async with Sampler(backend(), cache=cache, load_entrypoints=False) as sampler:
            first = await sampler.sample("q", **base)
            sent = server.arrivals[-1].body
            again = await sampler.sample("q", **base)
            assert (first.cached_calls, again.cached_calls, len(server.arrivals)) == (0, 1, 1)
            covered: set[str] = set()
            for field, (other, ask, prompt) in variants.items():
                result = await sampler.sample(prompt, backend=other, **{**base, **ask})
                assert result.cached_calls == 0, field
                assert changed(sent, server.arrivals[-1].body) == {field}, field
                covered.add(field)
                await other.aclose()
            assert covered == set(sent), "a field of the body that no variant changes"
            # the mode (the body's shape and the endpoint) and the server are in it too
            completions = backend(mode="completions")
            served = {"choices": [{"text": "x", "finish_reason": "stop"}]}
            server.script = lambda n, body: Reply(body=served)
            assert (await sampler.sample("q", backend=completions, **base)).cached_calls == 0
            assert server.arrivals[-1].path.endswith("/completions")
            moved = backend(url=elsewhere.base_url)
            assert (await sampler.sample("q", backend=moved, **base)).cached_calls == 0
            assert len(elsewhere.arrivals) == 1
            for each in (completions, moved):
                await each.aclose()
        cache.close()


async def test_what_a_backend_sends_is_what_its_key_is_made_of() -> None:
    """The HTTP backend and the local backend (through the HTTP backend it talks to) send
    the body their ``build_body`` makes: the key and the request cannot drift."""
    with ScriptedHTTPServer(answering) as server:
        request = GenerationRequest(
            [{"role": "user", "content": "q"}], {"seed": 3, "top_p": 0.5}, json_schema=SCHEMA
        )
        async with OpenAIBackend("m", base_url=server.base_url, api_key_env=None) as http:
            await http.generate(request)
            assert server.arrivals[-1].body == http.build_body(request)

        class Started:  # llama.cpp's server, as a LocalBackend sees one that is running
            model_path = Path(__file__)
            parallel = 1
            api_key = None
            running = False

            def start(self) -> str:
                return server.base_url.removesuffix("/v1")

        local = LocalBackend(server=Started(), default_options={"max_tokens": 7})  # type: ignore[arg-type]
        async with local:
            await local.generate(request)
            assert server.arrivals[-1].body == local.build_body(request)
            assert server.arrivals[-1].body["max_tokens"] == 7


def test_the_local_model_is_its_file_before_and_after_its_server_starts(tmp_path: Path) -> None:
    one, other = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for path, size in ((one, 10), (other, 20)):
        path.parent.mkdir()
        path.write_bytes(b"x" * size)
    server = LlamaServer(one)
    local = LocalBackend(server=server)
    before = cache_identity(local)
    server.base_url = "http://127.0.0.1:41234"  # as it is once started, on some port
    assert local.base_url is not None and cache_identity(local) == before
    assert before["model_file"] == str(one.resolve()) and before["model_file_bytes"] == 10
    named_alike = LocalBackend(server=LlamaServer(other))
    assert named_alike.model == local.model and cache_identity(named_alike) != before
    # the defaults are in the body: 5 and 60 tokens are two requests
    request = GenerationRequest([{"role": "user", "content": "q"}], {"seed": 1})
    short = LocalBackend(server=server, default_options={"max_tokens": 5})
    long = LocalBackend(server=server, default_options={"max_tokens": 60})
    identity = canonical(before)
    assert request_key(identity, short, request) != request_key(identity, long, request)


async def test_a_scripted_backend_is_its_replies(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    async with Sampler(ScriptedBackend(["old reply"]), cache=path) as sampler:
        await sampler.sample("q", seed=1)
        changed_replies = await sampler.sample("q", seed=1, backend=ScriptedBackend(["new"]))
        assert (changed_replies.text, changed_replies.cached_calls) == ("new", 0)
        same = await sampler.sample("q", seed=1, backend=ScriptedBackend(["old reply"]))
        assert (same.text, same.cached_calls) == ("old reply", 1)

    def reply(request: GenerationRequest) -> str:
        return "from a function"

    identity = cache_identity(ScriptedBackend(reply))
    assert identity["replies"] == f"{__name__}.{reply.__qualname__}"
    assert cache_identity(ScriptedBackend(["a", "b"]))["replies"] == ["a", "b"]


def test_a_cache_of_the_earlier_format_is_emptied_and_used(tmp_path: Path) -> None:
    """Its keys left parts of the request out (its answers may belong to other requests)."""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE entries (key TEXT PRIMARY KEY, identity TEXT NOT NULL, text TEXT"
            " NOT NULL, finish_reason TEXT, model TEXT, input_tokens INTEGER, output_tokens"
            " INTEGER, cost_usd REAL, created TEXT NOT NULL)"
        )
        db.execute("CREATE TABLE probes (token TEXT PRIMARY KEY, created TEXT NOT NULL)")
        db.execute("INSERT INTO entries VALUES ('k', 'i', 't', NULL, NULL, 1, 1, NULL, 'now')")
        db.execute("PRAGMA user_version = 1")
        db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.close()
    cache = ResponseCache(path)
    try:
        assert len(cache) == 0
        again = ResponseCache(path)  # and it is of this format now
        assert len(again) == 0
        again.close()
    finally:
        cache.close()


def test_which_checks_cut_a_text_is_told_only_when_every_check_answers_for_it() -> None:
    three, no_z = max_words(3), not_contains("z")
    assert cut_by([three, no_z], "one two three four") == cut_identity([check_identity(three)])
    assert cut_by([three, no_z], "one two three four z") == cut_identity(
        [check_identity(three), check_identity(no_z)]
    )
    assert cut_by([three], "one two") is None  # nothing fails it: not a cut this check made

    def raises(text: str) -> bool:
        raise RuntimeError("no verdict")

    unknown = Requirement("raises", bool, raises)
    assert cut_by([three, unknown], "one two three four") is None
    not_bool = Requirement("answers a string", bool, lambda text: "no")
    assert cut_by([not_bool], "x") is None
    by_other_means = Requirement("no plain prefix", bool)  # (a reader, say): not told by text
    assert cut_by([three, by_other_means], "one two three four") is None
