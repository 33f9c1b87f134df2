"""In-flight, rate and adaptive limits, cancellation and usage, over a real HTTP server."""

from __future__ import annotations

import anyio
import pytest

from hook_specs import Usage
from sampling_core import Requirement, RetryPolicy, Sampler
from sampling_core.backends import GenerationRequest, OpenAIBackend
from sampling_core.backends.limits import AdaptiveConcurrency, RateLimiter
from tests.support._servers.scripted_http import Hang, Reply, ScriptedHTTPServer, completion

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RETRY = RetryPolicy(max_retries=30, base_delay=0.005, max_delay=0.05)


async def run_calls(sampler: Sampler, count: int) -> list:
    results: list = []

    async def one(i: int) -> None:
        results.append(await sampler.sample(f"request {i}"))

    async with anyio.create_task_group() as group:
        for i in range(count):
            group.start_soon(one, i)
    return results


async def test_the_in_flight_limit_holds_across_200_concurrent_calls() -> None:
    with ScriptedHTTPServer(lambda n, body: Reply(body=completion("ok"), delay=0.03)) as server:
        async with OpenAIBackend("m", base_url=server.base_url, max_in_flight=8) as backend:
            sampler = Sampler(backend, load_entrypoints=False)
            other = Sampler(backend, load_entrypoints=False)  # another sampler, same backend
            async with anyio.create_task_group() as group:
                group.start_soon(run_calls, sampler, 100)
                group.start_soon(run_calls, other, 100)
            assert backend.limits.gate().peak == 8

    assert len(server.arrivals) == 200
    assert 2 <= server.peak_in_flight <= 8


async def test_the_rate_limit_spaces_200_concurrent_requests() -> None:
    rpm = 6000  # one start every 10 ms
    with ScriptedHTTPServer(lambda n, body: Reply(body=completion("ok"))) as server:
        async with OpenAIBackend("m", base_url=server.base_url, rpm=rpm) as backend:
            results = await run_calls(Sampler(backend, load_entrypoints=False), 200)

    assert all(r.success for r in results)
    times = sorted(a.at for a in server.arrivals)
    assert len(times) == 200
    interval, window = 60.0 / rpm, 50
    # Any 51 consecutive arrivals span at least 50 intervals, less some delivery jitter.
    shortest = min(times[i + window] - times[i] for i in range(len(times) - window))
    assert shortest >= 0.8 * window * interval


async def test_a_429_holds_new_requests_for_its_retry_after() -> None:
    def answer(number: int, body: object) -> Reply:
        if number == 1:
            return Reply(429, {"error": "quota"}, {"retry-after-ms": "400"})
        return Reply(body=completion("ok"))

    with ScriptedHTTPServer(answer) as server:
        async with OpenAIBackend("m", base_url=server.base_url, max_in_flight=1) as backend:
            sampler = Sampler(backend, load_entrypoints=False, retry=RETRY)
            first = await sampler.sample("a")
            second = await sampler.sample("b")  # a new call waits out the server's pause too

    assert first.success and second.success
    starts = [a.at for a in server.arrivals]
    assert len(starts) == 3
    assert starts[2] - starts[0] >= 0.4 - 0.02


async def test_adaptive_concurrency_backs_off_a_server_that_rate_limits() -> None:
    capacity = 3

    def answer(number: int, body: object) -> Reply:
        if server.in_flight > capacity:
            return Reply(429, {"error": "too many requests"})
        return Reply(body=completion("ok"), delay=0.02)

    with ScriptedHTTPServer(answer) as server:
        backend = OpenAIBackend("m", base_url=server.base_url, max_in_flight=16, adaptive=True)
        async with backend:
            results = await run_calls(Sampler(backend, load_entrypoints=False, retry=RETRY), 120)

    assert all(r.success for r in results)
    adaptive = backend.limits.adaptive
    assert adaptive is not None and adaptive.cuts >= 1
    assert adaptive.limit < 16


def test_aimd_cuts_once_per_wave_and_grows_back_slowly() -> None:
    limit = AdaptiveConcurrency(16)
    wave = limit.epoch
    for _ in range(5):  # five 429s answering requests of the same wave: one cut
        limit.on_overload(wave)
    assert limit.limit == 8 and limit.cuts == 1
    limit.on_overload(limit.epoch)
    assert limit.limit == 4
    for _ in range(3):  # about one more place per window of successes: not yet
        limit.on_success()
    assert limit.limit == 4
    limit.on_success()
    limit.on_success()
    assert limit.limit == 5
    for _ in range(1000):
        limit.on_success()
    assert limit.limit == 16  # never above the maximum
    for _ in range(10):
        limit.on_overload(limit.epoch)
    assert limit.limit == 1  # never below the minimum


def test_rate_limiter_schedule_with_a_burst() -> None:
    now = [100.0]
    limiter = RateLimiter(60, per=60.0, burst=3, clock=lambda: now[0])
    assert [limiter.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]
    now[0] += 10.0  # idle: the burst is available again
    assert [limiter.reserve() for _ in range(4)] == [0.0, 0.0, 0.0, 1.0]
    limiter.pause(5.0)
    assert limiter.reserve() >= 5.0


def test_a_late_start_moves_the_rest_of_the_schedule() -> None:
    now = [0.0]
    limiter = RateLimiter(60, per=60.0, clock=lambda: now[0])
    tickets = [limiter._reserve() for _ in range(3)]  # starts due at 0, 1, 2
    assert limiter._admit(*tickets[0]) == 0.0
    now[0] = 3.5  # the event loop was stuck: the second starts 2.5 s late
    assert limiter._admit(*tickets[1]) == 0.0
    assert limiter._admit(*tickets[2]) == pytest.approx(1.0)  # not at once: 1 s after it
    assert limiter.reserve() == pytest.approx(2.0)  # new requests queue behind


async def test_cancelling_an_attempt_closes_its_http_request() -> None:
    def answer(number: int, body: object) -> Reply | Hang:
        return Hang() if number == 1 else Reply(body=completion("winner"))

    with ScriptedHTTPServer(answer) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            result = await Sampler(backend, load_entrypoints=False).sample(
                "hi", concurrency_budget=2
            )
            assert result.success and result.text == "winner"
            assert result.cancelled == 1
            closed = await anyio.to_thread.run_sync(
                lambda: server.wait_for(lambda s: s.disconnects == 1, 30)
            )
    assert closed, "the server never saw the cancelled request's connection close"


async def test_cancelling_a_direct_call_closes_its_request() -> None:
    with ScriptedHTTPServer(lambda n, body: Hang()) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            request = GenerationRequest([{"role": "user", "content": "hi"}])
            async with anyio.create_task_group() as group:
                group.start_soon(backend.generate, request)
                arrived = await anyio.to_thread.run_sync(
                    lambda: server.wait_for(lambda s: len(s.arrivals) == 1, 30)
                )
                group.cancel_scope.cancel()
            assert arrived
            closed = await anyio.to_thread.run_sync(
                lambda: server.wait_for(lambda s: s.disconnects == 1, 30)
            )
    assert closed


async def test_usage_includes_cancelled_attempts_the_server_reported() -> None:
    def answer(number: int, body: object) -> Reply:
        if number == 1:
            return Reply(body=completion("slow", prompt_tokens=11, completion_tokens=7))
        return Reply(body=completion("good", prompt_tokens=5, completion_tokens=3))

    slow_checking = anyio.Event()

    async def check(text: str) -> bool:
        if text == "slow":  # answered by the server, then cancelled while being checked
            slow_checking.set()
            await anyio.sleep_forever()
        await slow_checking.wait()
        return True

    with ScriptedHTTPServer(answer) as server:
        async with OpenAIBackend("m", base_url=server.base_url) as backend:
            result = await Sampler(backend, load_entrypoints=False).sample(
                "hi", concurrency_budget=2, requirements=[Requirement("checked", check)]
            )

    assert result.text == "good" and result.cancelled == 1 and result.iterations_used == 1
    assert result.usage == Usage(16, 10)
