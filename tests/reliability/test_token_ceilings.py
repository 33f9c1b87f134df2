"""``budget_guard`` token ceilings with an OpenAI-compatible server that is not llama.cpp.

Such a server says a stream's tokens only at its end, so an attempt stopped early or
cancelled in flight knows its output (what streamed) but not its input. Its input is its
request's, learned once for the call from an attempt of the same request that ran to its
end: the guard keeps counting, and later calls are not refused. When no attempt of the call
could say, the guard says what is unknown and why (never "model None").
"""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from builtin_plugins.budget_guard import BudgetGuard, Totals
from sampling_core import Sampler
from sampling_core.backends import OpenAIBackend
from sampling_core.requirements import max_words
from sampling_core.strategies import MajorityVote
from tests.support._servers.scripted_http import ScriptedHTTPServer, Stream, streamed

pytestmark = pytest.mark.anyio

WORDS = ("one", " two", " three", " four", " five", " six")


def guard() -> BudgetGuard:
    return BudgetGuard(max_tokens_total=1_000_000, max_tokens_per_call=1_000, totals=Totals())


def refusal(logs: list[dict[str, Any]]) -> str:
    """Why the guard stopped the last call it stopped, as the engine logged it."""
    stopped = [e for e in logs if e["event"] == "sampling.stopped_by_plugin"]
    return str(stopped[-1]["reason"])


async def calls(server: ScriptedHTTPServer, watching: BudgetGuard, n: int, **ask: Any) -> list:
    backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
    async with backend:
        sampler = Sampler(backend, plugins=[watching], load_entrypoints=False)
        return [await sampler.sample(f"q{i}", **ask) for i in range(n)]


async def test_attempts_cancelled_in_flight_count_their_requests_input() -> None:
    def script(number: int, body: Any) -> Stream:
        if number % 3 == 1:  # the first of each call answers; its siblings are cancelled
            return Stream(streamed("ok"))
        return Stream([], hang=True)

    watching = guard()
    with ScriptedHTTPServer(script) as server:
        results = await calls(server, watching, 3, concurrency_budget=3)
    assert [r.stop_reason for r in results] == ["success"] * 3
    assert [r.cancelled for r in results] == [2, 2, 2]
    assert watching.totals.unknown_tokens is None
    # each call: the answer (5 in, 1 out), two cancelled attempts (5 in each, 0 streamed)
    assert watching.totals.tokens == 3 * (6 + 2 * 5)


async def test_an_attempt_stopped_early_counts_its_requests_input() -> None:
    def script(number: int, body: Any) -> Stream:
        return Stream(streamed(*WORDS) if number % 2 else streamed("ok"))

    watching = guard()
    with ScriptedHTTPServer(script) as server:
        results = await calls(server, watching, 3, loop_budget=2, requirements=[max_words(3)])
    assert [r.stop_reason for r in results] == ["success"] * 3
    assert [r.attempts[0].stopped_early for r in results] == [True] * 3
    assert watching.totals.unknown_tokens is None
    # each call: stopped at the fourth word (5 in, 4 out), then the answer (5 in, 1 out)
    assert watching.totals.tokens == 3 * (9 + 6)


async def test_an_input_no_attempt_could_say_is_named_with_the_reason() -> None:
    watching = guard()
    with (
        ScriptedHTTPServer(lambda n, body: Stream(streamed(*WORDS))) as server,
        capture_logs() as logs,
    ):
        first, second = await calls(server, watching, 2, requirements=[max_words(3)])
    assert first.attempts[0].stopped_early and second.stop_reason == "stopped_by_plugin"
    reason = refusal(logs)
    assert "the input tokens of an attempt stopped early are unknown" in reason
    assert "reports a stream's tokens only at its end" in reason
    assert "cannot be checked" in reason
    assert "None" not in reason


async def test_a_reply_without_a_model_is_never_called_model_none() -> None:
    watching = guard()
    quiet = streamed("ok")
    quiet[-2] = b'data: {"choices": []}\n\n'  # no usage: the tokens are unknown
    quiet = [piece.replace(b'"model": "scripted-http", ', b"") for piece in quiet]
    with ScriptedHTTPServer(lambda n, body: Stream(quiet)) as server, capture_logs() as logs:
        backend = OpenAIBackend("", base_url=server.base_url, api_key_env=None)
        async with backend:
            sampler = Sampler(backend, plugins=[watching], load_entrypoints=False)
            await sampler.sample("q", requirements=[max_words(3)])
            refused = await sampler.sample("q", requirements=[max_words(3)])
    assert refused.stop_reason == "stopped_by_plugin"
    reason = refusal(logs)
    assert "a reply did not report its tokens" in reason and "None" not in reason


async def test_a_cached_answer_teaches_its_requests_input_as_it_was_generated(
    tmp_path: Any,
) -> None:
    # A cache hit adds no new tokens (its usage is 0 in, 0 out), but the input its request
    # takes is what it took when it was generated: a sibling of the same request (seed
    # aside) stopped early counts that input, never the hit's 0.
    def script(number: int, body: Any) -> Stream:
        return Stream(streamed("ok") if number == 1 else streamed(*WORDS))

    cache = tmp_path / "c.sqlite"
    watching = guard()
    ask: dict[str, Any] = {"seed": 1, "requirements": [max_words(3)]}
    with ScriptedHTTPServer(script) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
        async with backend:
            async with Sampler(backend, cache=cache, load_entrypoints=False) as first:
                await first.sample("q", **ask)
            async with Sampler(
                backend, cache=cache, plugins=[watching], load_entrypoints=False
            ) as sampler:
                result = await sampler.sample(
                    "q", strategy=MajorityVote(), concurrency_budget=2, **ask
                )
    hit, cut = result.attempts
    assert hit.cached and cut.stopped_early and not cut.cached
    assert watching.totals.unknown_tokens is None
    # the hit: no new tokens; the cut one: its request's input (5) and four words
    assert watching.totals.tokens == 5 + 4
