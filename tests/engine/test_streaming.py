"""Streaming: chunks to ``generation_chunk`` in order and complete, only when someone needs
them; prefix checks and early stop; a prefix check that raises is isolated."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from hook_specs import GenerationChunkPayload, HookName, StopSampling, Usage, background, hookimpl
from sampling_core import Generation, GenerationRequest, Requirement, Sampler, ScriptedBackend
from sampling_core.backends.base import BadReply, Chunk
from sampling_core.backends.scripted import word_pieces
from sampling_core.requirements.checks import contains, max_chars, max_words, not_contains

pytestmark = pytest.mark.anyio

RAMBLE = " ".join(f"word{i}" for i in range(40))


class Chunks:
    """Keeps every chunk event."""

    def __init__(self) -> None:
        self.seen: list[GenerationChunkPayload] = []

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.seen.append(payload)


class BackgroundChunks:
    """Keeps every chunk event, delivered in the background."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, str, str]] = []

    @hookimpl
    @background
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        self.seen.append((payload.index, payload.delta, payload.text))


def sampler(backend: Any, *plugins: Any) -> Sampler:
    return Sampler(backend, plugins=list(plugins), load_entrypoints=False)


async def test_chunks_arrive_in_order_and_join_to_the_text(hook_recorder: Any) -> None:
    backend = ScriptedBackend(["  The quick brown\nfox jumps.  "])
    chunks = Chunks()
    result = await sampler(backend, chunks, hook_recorder).sample("q", loop_budget=1)
    text = result.text
    assert text == "  The quick brown\nfox jumps.  "
    deltas = [p.delta for p in chunks.seen]
    assert "".join(deltas) == text and deltas == word_pieces(text)
    assert [p.index for p in chunks.seen] == list(range(len(deltas)))
    assert [p.text for p in chunks.seen] == ["".join(deltas[: i + 1]) for i in range(len(deltas))]
    assert {(p.subsample_index, p.attempt, p.iteration, p.retry) for p in chunks.seen} == {
        (0, 1, 1, 0)
    }
    assert all(p.sampling_id == result.sampling_id for p in chunks.seen)
    # every chunk within the backend call (its generation_call), before its post_call
    names = hook_recorder.names()
    first, last = (
        names.index("generation_chunk"),
        len(names) - names[::-1].index("generation_chunk"),
    )
    assert names[first - 2 : first] == ["generation_pre_call", "generation_call"]
    assert names[last] == "generation_post_call"
    assert backend.chunks_sent == len(deltas) and backend.streams_closed_early == 0
    assert result.usage.output_tokens == 5  # counted in words, as the scripted backend does


async def test_background_chunk_observers_get_every_chunk_in_order() -> None:
    chunks = BackgroundChunks()
    async with sampler(ScriptedBackend(["one two three"]), chunks) as s:
        result = await s.sample("q")
    assert [c[0] for c in chunks.seen] == [0, 1, 2]
    assert "".join(c[1] for c in chunks.seen) == result.text == chunks.seen[-1][2]


async def test_nobody_needing_chunks_means_no_stream() -> None:
    backend = ScriptedBackend([RAMBLE])
    result = await sampler(backend).sample("q", requirements=[contains("word3")])
    assert result.success and backend.chunks_sent == 0  # generate(), as always


async def test_a_backend_that_cannot_stream_is_called_as_always() -> None:
    class Plain:
        async def generate(self, request: GenerationRequest) -> str:
            return RAMBLE

    chunks = Chunks()
    result = await sampler(Plain(), chunks).sample("q", requirements=[max_words(3)])
    assert not result.success and result.text == RAMBLE and chunks.seen == []
    assert not result.attempts[0].stopped_early


async def test_a_failing_prefix_stops_the_generation_at_once_and_the_strategy_goes_on(
    hook_recorder: Any,
) -> None:
    backend = ScriptedBackend([RAMBLE, "short"])
    result = await sampler(backend, hook_recorder).sample(
        "Answer in at most 5 words.", requirements=[max_words(5)], loop_budget=2
    )
    assert result.success and result.text == "short"
    stopped, passed = result.attempts
    assert stopped.stopped_early and not passed.stopped_early
    assert stopped.text == " ".join(f"word{i}" for i in range(6))  # stopped at the 6th word
    assert stopped.generation.finish_reason == "stopped_early"
    assert stopped.failure_reasons == ["The answer has 6 words; it must have at most 5."]
    # the stream was closed there: the backend sent 6 chunks of 40 (then 1 for "short")
    assert backend.streams_closed_early == 1 and backend.chunks_sent == 6 + 1
    assert stopped.generation.usage.output_tokens == 6  # what arrived, not 40
    iteration = hook_recorder.payloads(HookName.SAMPLING_ITERATION)[0]
    assert iteration.stopped_early is True and iteration.passed is False
    assert len(hook_recorder.payloads(HookName.SAMPLING_REPAIR)) == 1


async def test_early_stop_false_lets_the_generation_finish() -> None:
    backend = ScriptedBackend([RAMBLE])
    result = await sampler(backend).sample("q", requirements=[max_words(5)], early_stop=False)
    assert result.text == RAMBLE and not result.attempts[0].stopped_early
    assert backend.chunks_sent == 0  # nobody needed chunks: not even streamed


async def test_a_requirement_that_a_prefix_failed_is_unmet_even_if_its_check_passes() -> None:
    lenient = Requirement(
        "no 'word2' (prefix only)", lambda text: True, lambda text: "word2" not in text
    )
    result = await sampler(ScriptedBackend([RAMBLE])).sample("q", requirements=[lenient])
    (attempt,) = result.attempts
    assert attempt.stopped_early and attempt.text == "word0 word1 word2"
    assert attempt.failure_reasons == [
        "Stopped early: the answer so far can no longer meet \"no 'word2' (prefix only)\"."
    ]


async def test_a_prefix_check_that_raises_is_isolated_like_any_check() -> None:
    def broken(text: str) -> bool:
        raise ValueError("prefix bug")

    async def not_a_plain_function(text: str) -> bool:
        return True

    for prefix, reason in [
        (broken, "the prefix check raised ValueError: prefix bug"),
        (not_a_plain_function, "the prefix check returned coroutine, not a bool"),
    ]:
        requirement = Requirement("anything", lambda text: True, prefix)
        result = await sampler(ScriptedBackend([RAMBLE])).sample("q", requirements=[requirement])
        (attempt,) = result.attempts  # the call went on and completed the attempt
        assert attempt.stopped_early and not result.success
        assert attempt.failure_reasons[0].startswith(reason)
        assert result.plugin_errors == [] and result.errors == []


async def test_stop_sampling_from_a_prefix_check_ends_the_loop() -> None:
    def stop(text: str) -> bool:
        raise StopSampling("enough")

    result = await sampler(ScriptedBackend([RAMBLE])).sample(
        "q", requirements=[Requirement("r", lambda t: True, stop)]
    )
    assert result.stop_reason == "stopped_by_plugin" and result.attempts == []
    assert result.cancelled == 1 and result.cancelled_usage.output_tokens == 1


def test_the_built_in_prefix_checks_fail_only_texts_that_cannot_pass() -> None:
    words = max_words(3)
    assert words.prefix is not None
    assert words.prefix("one two thr") and words.prefix("one two three ")
    assert not words.prefix("one two three f")
    chars = max_chars(5)
    assert chars.prefix is not None and chars.prefix("12345") and not chars.prefix("123456")
    never = not_contains("The")
    assert never.prefix is not None and never.prefix("a th") and not never.prefix("in the")
    assert contains("x").prefix is None  # a missing word may still come


async def test_a_plugin_kind_gives_a_prefix_with_its_check() -> None:
    from sampling_core.kinds import KindRegistry

    def no_digits_factory() -> Any:
        def check(text: str) -> bool:
            return not any(c.isdigit() for c in text)

        check.prefix = check  # type: ignore[attr-defined]  # a digit never goes away
        return check

    registry = KindRegistry()
    registry.register("requirement", "no_digits", no_digits_factory, plugin="mine")
    requirement = registry.requirement("no_digits")
    assert requirement.prefix is not None
    result = await sampler(ScriptedBackend(["a b 3 c d e"])).sample("q", requirements=[requirement])
    assert result.attempts[0].stopped_early and result.attempts[0].text == "a b 3"


class Broken:
    """A backend whose stream does not keep the protocol."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    async def generate(self, request: GenerationRequest) -> str:
        return "whole"

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Any]:
        for item in self.items:
            yield item


async def test_a_stream_that_breaks_the_protocol_is_a_bad_reply() -> None:
    for items, message in [
        (["text"], "backend streamed str"),
        ([Chunk("a")], "ended without a Generation"),
    ]:
        result_error = None
        try:
            await sampler(Broken(items), Chunks()).sample("q")
        except BadReply as exc:
            result_error = exc
        assert result_error is not None and message in str(result_error)
    good = await sampler(Broken([Chunk("a"), Generation("a")]), Chunks()).sample("q")
    assert good.text == "a"


async def test_a_cancelled_call_closes_its_stream_and_counts_what_arrived() -> None:
    closed = anyio.Event()

    class Endless:
        async def generate(self, request: GenerationRequest) -> str:
            return "never"

        async def stream(self, request: GenerationRequest) -> AsyncIterator[Any]:
            try:
                for i in range(3):
                    yield Chunk(f" w{i}")
                await anyio.sleep_forever()
                yield Generation("unreachable")
            finally:
                closed.set()

    class GiveUp:
        """The caller gives up once the third chunk arrived."""

        def __init__(self, scope: anyio.CancelScope) -> None:
            self.scope = scope
            self.ends: list[Any] = []

        @hookimpl
        def generation_chunk(self, payload: GenerationChunkPayload) -> None:
            if payload.index == 2:
                self.scope.cancel()

        @hookimpl
        def sampling_loop_end(self, payload: Any) -> None:
            self.ends.append(payload)

    with anyio.CancelScope() as scope:
        giving_up = GiveUp(scope)
        await sampler(Endless(), giving_up).sample("q")
    assert scope.cancelled_caught and closed.is_set()
    (end,) = giving_up.ends
    assert end.cancelled == 1 and end.cancelled_usage.output_tokens == 3  # what arrived
    assert end.cancelled_usage.input_tokens is None  # not said: unknown, never 0
    assert end.usage.output_tokens == 3 and end.usage.input_tokens is None


def test_server_sent_events_are_read_as_text_usage_and_counts() -> None:
    from sampling_core.backends.sse import DONE, StreamedReply

    chat = StreamedReply()
    events = [
        ": a comment",
        "",
        'data: {"model": "m", "choices": [{"delta": {"role": "assistant", "content": null}}]}',
        'data: {"choices": [{"delta": {"content": "Hel"}}], '
        '"timings": {"prompt_n": 3, "cache_n": 7, "predicted_n": 1}}',
        'data: {"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}',
        "id: 7",
        'data: {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2}}',
    ]
    assert [chat.read(line, "chat") for line in events] == ["", "", "", "Hel", "lo", "", ""]
    assert chat.read("data: [DONE]", "chat") is DONE
    assert (chat.model, chat.finish_reason) == ("m", "stop")
    assert chat.usage == Usage(10, 2) and chat.usage_so_far() == Usage(10, 1)
    plain = StreamedReply()
    assert plain.read('data: {"choices": [{"text": "Hi"}]}', "completions") == "Hi"
    assert plain.usage is None and plain.usage_so_far() is None


def test_a_schema_is_sent_as_response_format() -> None:
    from sampling_core.backends import OpenAIBackend

    backend = OpenAIBackend("m", base_url="http://127.0.0.1:1/v1")
    schema = {"title": "My City!", "type": "object"}
    body = backend.build_body(GenerationRequest([], json_schema=schema))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "My_City_", "schema": schema},
    }
    own = {"type": "json_object"}  # the caller's own response_format wins
    asked = GenerationRequest([], {"response_format": own}, json_schema=schema)
    assert backend.build_body(asked)["response_format"] == own
    assert "response_format" not in backend.build_body(GenerationRequest([]))


async def test_format_as_a_schema_checks_parses_and_is_sent() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    backend = ScriptedBackend(['{"n": "x"}', '{"n": 2}'])
    result = await sampler(backend).sample("q", format=schema, loop_budget=2)
    assert result.success and result.value == {"n": 2}
    assert result.attempts[0].failure_reasons == [
        "The answer must be JSON matching the schema: n: 'x' is not of type 'integer'."
    ]
    assert [r.json_schema for r in backend.requests] == [schema, schema]
    with pytest.raises(ValueError, match="not a valid JSON schema"):
        await sampler(backend).sample("q", format={"type": 12})
    with pytest.raises(TypeError, match="format must be a pydantic model class or a JSON"):
        await sampler(backend).sample("q", format=int)


async def test_format_as_a_model_sends_its_schema() -> None:
    from pydantic import BaseModel

    class Point(BaseModel):
        x: int

    backend = ScriptedBackend(['{"x": 1}'])
    result = await sampler(backend).sample("q", format=Point)
    assert result.value == Point(x=1)
    assert backend.requests[0].json_schema == Point.model_json_schema()
