"""``budget_guard`` dollar ceilings when attempts are cut short (stopped early by a prefix
check, or cancelled in flight) on a priced provider that says a stream's tokens only at its
end: what is known is priced with :func:`sampling_core.pricing.price_usd` (the output as it
streamed, the input once the call learns it), so one such attempt no longer makes the guard
refuse every later call; a cost that really is unknown fails closed, saying what and why."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from builtin_plugins.budget_guard import BudgetGuard, Totals
from sampling_core import Sampler
from sampling_core.backends import OpenAIBackend
from sampling_core.pricing import price_usd
from sampling_core.requirements import max_words
from tests.support._servers.scripted_http import ScriptedHTTPServer, Stream, streamed

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOLLAR_TEST_KEY", "sk-test-dollars-0123456789")


OPENAI = "https://api.openai.com/v1"
WORDS = ("one", " two", " three", " four", " five", " six")


def gpt(n_in: int, n_out: int, model: str = "gpt-4o") -> float:
    cost = price_usd(model, n_in, n_out, api_url=OPENAI)
    assert cost is not None and (n_in + n_out == 0 or cost > 0)
    return cost


def of(model: str, events: list[bytes]) -> list[bytes]:
    return [e.replace(b'"model": "scripted-http"', f'"model": "{model}"'.encode()) for e in events]


def guard() -> BudgetGuard:
    return BudgetGuard(max_usd_per_call=1.0, max_usd_total=1.0, totals=Totals())


async def calls(
    server: ScriptedHTTPServer, watching: BudgetGuard, n: int, model: str = "gpt-4o", **ask: Any
) -> list:
    backend = OpenAIBackend(model, base_url=server.base_url, api_key_env="DOLLAR_TEST_KEY")
    backend.base_url = OPENAI  # priced as api.openai.com; requests still go to the server
    async with backend:
        sampler = Sampler(backend, plugins=[watching], load_entrypoints=False)
        return [await sampler.sample(f"q{i}", **ask) for i in range(n)]


def refusal(logs: list[dict[str, Any]]) -> str:
    stopped = [e for e in logs if e["event"] == "sampling.stopped_by_plugin"]
    return str(stopped[-1]["reason"])


async def test_an_attempt_stopped_early_is_priced_and_later_calls_go_on() -> None:
    def script(number: int, body: Any) -> Stream:
        return Stream(of("gpt-4o", streamed(*WORDS) if number % 2 else streamed("ok")))

    watching = guard()
    with ScriptedHTTPServer(script) as server:
        results = await calls(server, watching, 3, loop_budget=2, requirements=[max_words(3)])
    assert [r.stop_reason for r in results] == ["success"] * 3
    assert [r.attempts[0].stopped_early for r in results] == [True] * 3
    assert watching.totals.unknown_cost is None
    # each call: stopped at the fourth word (5 in, 4 out), then the answer (5 in, 1 out)
    assert watching.totals.cost_usd == pytest.approx(3 * (gpt(5, 4) + gpt(5, 1)))


async def test_attempts_cancelled_in_flight_are_priced_and_later_calls_go_on() -> None:
    def script(number: int, body: Any) -> Stream:
        if number % 3 == 1:  # the first of each call answers; its siblings are cancelled
            return Stream(of("gpt-4o", streamed("ok")))
        return Stream([], hang=True)

    watching = guard()
    with ScriptedHTTPServer(script) as server:
        results = await calls(server, watching, 3, concurrency_budget=3)
    assert [r.stop_reason for r in results] == ["success"] * 3
    assert [r.cancelled for r in results] == [2, 2, 2]
    assert watching.totals.unknown_cost is None
    # each call: the answer (5 in, 1 out), two cancelled attempts (their 5 in, 0 streamed)
    assert watching.totals.cost_usd == pytest.approx(3 * (gpt(5, 1) + 2 * gpt(5, 0)))


async def test_a_cost_whose_input_is_never_learned_fails_closed_saying_why() -> None:
    watching = guard()
    with (
        ScriptedHTTPServer(lambda n, body: Stream(of("gpt-4o", streamed(*WORDS)))) as server,
        capture_logs() as logs,
    ):
        first, second = await calls(server, watching, 2, requirements=[max_words(3)])
    assert first.attempts[0].stopped_early and second.stop_reason == "stopped_by_plugin"
    assert second.attempts == []
    reason = refusal(logs)
    assert "the input tokens of an attempt stopped early are unknown" in reason
    assert "so its cost is unknown" in reason and "max_usd_per_call=1.0 cannot be checked" in reason


async def test_a_model_without_a_price_fails_closed_naming_it() -> None:
    watching = guard()
    model = "no-such-model-here"

    def script(number: int, body: Any) -> Stream:
        return Stream(of(model, streamed(*WORDS) if number % 2 else streamed("ok")))

    with ScriptedHTTPServer(script) as server, capture_logs() as logs:
        results = await calls(
            server, watching, 2, model=model, loop_budget=2, requirements=[max_words(3)]
        )
    assert results[-1].stop_reason == "stopped_by_plugin"
    assert f"the price of model '{model}' at {OPENAI} is unknown" in refusal(logs)
