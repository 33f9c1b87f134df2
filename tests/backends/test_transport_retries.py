"""Transport retries through a real HTTP server that answers with scripted 429s and 500s.

Retries are the engine's (``Sampler(retry=RetryPolicy(...))``); the backend turns 429/5xx
into ``TransientBackendError`` with the server's ``Retry-After``. These tests check the
waits, the retry budget, the ``generation_error`` reports, and that retries never spend
``loop_budget``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from hook_specs import HookName
from sampling_core import RetryPolicy, Sampler, TransientBackendError
from sampling_core.backends import OpenAIBackend
from sampling_core.backends.openai_compat import BackendError, parse_retry_after
from sampling_core.requirements.checks import contains
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FAST = RetryPolicy(max_retries=3, base_delay=0.01, max_delay=0.05)
CLOCK_SLACK = 0.02  # asyncio may wake a timer up to its clock resolution early


def sampler(backend: OpenAIBackend, hook_recorder: object, retry: RetryPolicy = FAST) -> Sampler:
    return Sampler(backend, plugins=[hook_recorder], load_entrypoints=False, retry=retry)


async def test_a_429_is_retried_after_the_servers_retry_after(hook_recorder) -> None:
    script = [Reply(429, {"error": {"message": "slow down"}}, {"retry-after-ms": "300"})]

    def answer(number: int, body: object) -> Reply:
        return script[number - 1] if number <= len(script) else Reply(body=completion("fine"))

    with ScriptedHTTPServer(answer) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            result = await sampler(backend, hook_recorder).sample("hi", loop_budget=3)

    assert result.success and result.text == "fine"
    assert [a.attempt for a in result.attempts] == [1]  # the retry was not an attempt
    errors = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert [(e.will_retry, e.retry, e.attempt) for e in errors] == [(True, 0, 1)]
    assert isinstance(errors[0].exception, TransientBackendError)
    assert errors[0].exception.status == 429 and errors[0].exception.retry_after == 0.3
    assert errors[0].retry_in_s >= 0.3
    first, second = server.arrivals
    assert second.at - first.at >= 0.3 - CLOCK_SLACK


async def test_retry_after_in_seconds_is_honoured_over_a_shorter_backoff(hook_recorder) -> None:
    def answer(number: int, body: object) -> Reply:
        if number == 1:
            return Reply(503, {"error": "warming up"}, {"Retry-After": "1"})
        return Reply(body=completion("up"))

    with ScriptedHTTPServer(answer) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            result = await sampler(backend, hook_recorder).sample("hi")

    assert result.text == "up"
    (error,) = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert error.exception.status == 503 and error.retry_in_s >= 1.0
    assert server.arrivals[1].at - server.arrivals[0].at >= 1.0 - CLOCK_SLACK


async def test_500s_stop_at_the_retry_budget_and_spend_no_loop_budget(hook_recorder) -> None:
    with ScriptedHTTPServer(lambda n, body: Reply(500, {"error": "boom"})) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            retry = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.02)
            with pytest.raises(TransientBackendError) as caught:
                await sampler(backend, hook_recorder, retry).sample("hi", loop_budget=4)

    assert caught.value.status == 500
    assert len(server.arrivals) == 3  # one call and its 2 retries; no new attempt
    errors = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert [(e.will_retry, e.retry) for e in errors] == [(True, 0), (True, 1), (False, 2)]
    assert {e.attempt for e in errors} == {1}
    assert errors[-1].retry_in_s is None
    (end,) = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)
    assert end.iterations_used == 0 and end.error_count == 1


async def test_retries_between_attempts_leave_the_loop_budget_to_the_attempts(
    hook_recorder,
) -> None:
    script = [
        Reply(500, {"error": "boom"}),
        Reply(429, {"error": "busy"}, {"retry-after-ms": "10"}),
        Reply(body=completion("bad answer")),
        Reply(502, {"error": "gateway"}),
        Reply(body=completion("good answer")),
    ]
    with ScriptedHTTPServer(lambda n, body: script[n - 1]) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            result = await sampler(backend, hook_recorder).sample(
                "hi", loop_budget=2, requirements=[contains("good")]
            )

    assert result.success and result.text == "good answer"
    assert [a.attempt for a in result.attempts] == [1, 2]
    assert result.iterations_used == 2
    assert len(server.arrivals) == 5
    errors = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert [(e.attempt, e.retry, e.will_retry) for e in errors] == [
        (1, 0, True),
        (1, 1, True),
        (2, 0, True),
    ]


async def test_client_errors_are_not_retried_and_never_show_the_key(
    hook_recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-not-a-real-key-8f3a"
    monkeypatch.setenv("SAMPLEHOOKS_TEST_KEY", secret)

    def answer(number: int, body: object) -> Reply:
        return Reply(401, {"error": {"message": f"Incorrect API key provided: {secret}"}})

    with ScriptedHTTPServer(answer) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env="SAMPLEHOOKS_TEST_KEY")
        async with backend:
            with pytest.raises(BackendError) as caught:
                await sampler(backend, hook_recorder).sample("hi", loop_budget=3)

    assert caught.value.status == 401
    assert secret not in str(caught.value) and "SAMPLEHOOKS_TEST_KEY" in str(caught.value)
    assert secret not in repr(backend)
    assert len(server.arrivals) == 1  # not retried, and the subsample ended
    assert server.arrivals[0].headers["authorization"] == f"Bearer {secret}"
    (error,) = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert error.will_retry is False


async def test_a_refused_connection_is_transient() -> None:
    with ScriptedHTTPServer(lambda n, body: Reply()) as server:
        base_url = server.base_url  # the port is closed once the server has stopped
    retry = RetryPolicy(max_retries=1, base_delay=0.01, max_delay=0.01)
    async with OpenAIBackend("m", base_url=base_url) as backend:
        seen: list[bool] = []

        class Errors:
            from hook_specs import hookimpl

            @hookimpl
            def generation_error(self, payload):
                seen.append(payload.will_retry)

        with pytest.raises(TransientBackendError):
            await Sampler(backend, plugins=[Errors()], load_entrypoints=False, retry=retry).sample(
                "hi"
            )
    assert seen == [True, False]


async def test_a_missing_key_for_a_remote_server_says_which_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SAMPLEHOOKS_ABSENT_KEY", raising=False)
    backend = OpenAIBackend(
        "m", base_url="https://api.example.invalid/v1", api_key_env="SAMPLEHOOKS_ABSENT_KEY"
    )
    with pytest.raises(BackendError, match="SAMPLEHOOKS_ABSENT_KEY"):
        await Sampler(backend, load_entrypoints=False).sample("hi")


def test_retry_after_parsing() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    date = format_datetime(now + timedelta(seconds=7), usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now.timestamp()) == pytest.approx(7.0)
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now.timestamp()) == 0.0
