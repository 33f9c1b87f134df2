"""``usage.cost_usd``: priced from genai-prices where the model is known, else ``None``."""

from __future__ import annotations

import pytest

from hook_specs.records import Usage
from sampling_core import Sampler, ScriptedBackend
from sampling_core.backends import OpenAIBackend
from sampling_core.pricing import price_usd, priced
from tests.support._servers.scripted_http import Reply, ScriptedHTTPServer, completion

OPENAI = "https://api.openai.com/v1"


def test_a_known_model_at_its_provider_is_priced_from_the_table() -> None:
    # gpt-4o-mini's published price: $0.15 per million input tokens, $0.60 per million output
    assert price_usd("gpt-4o-mini", 1_000_000, 0, api_url=OPENAI) == pytest.approx(0.15)
    assert price_usd("gpt-4o-mini", 1000, 100, api_url=OPENAI) == pytest.approx(0.00021)


@pytest.mark.parametrize(
    ("model", "url"),
    [
        ("gpt-4o-mini", "http://127.0.0.1:8080/v1"),  # a local server: never a cloud's price
        ("SmolLM2-135M-Instruct", OPENAI),  # a model the provider does not sell
        (None, OPENAI),
        ("", None),
    ],
)
def test_an_unknown_price_is_none(model: str | None, url: str | None) -> None:
    assert price_usd(model, 10, 10, api_url=url) is None


def test_usage_sums_cost_and_an_unknown_part_makes_the_sum_unknown() -> None:
    assert (Usage(1, 2, 0.5) + Usage(3, 4, 0.25)) == Usage(4, 6, 0.75)
    assert (Usage(1, 2, 0.5) + Usage(3, 4)).cost_usd is None
    assert sum([Usage(1, 1, 0.25), Usage(2, 2, 0.5)], Usage()) == Usage(3, 3, 0.75)
    assert sum([], Usage()).cost_usd is None  # nothing spent, nothing priced
    assert priced(Usage(1, 1, 0.1), "gpt-4o-mini", api_url=OPENAI).cost_usd == 0.1  # kept
    assert priced(Usage(1000, 100), "gpt-4o-mini", api_url=OPENAI).cost_usd == pytest.approx(
        0.00021
    )


@pytest.mark.anyio
async def test_backends_report_cost_and_results_sum_it() -> None:
    with ScriptedHTTPServer(lambda n, body: Reply(body=completion("ok"))) as server:
        async with OpenAIBackend("gpt-4o-mini", base_url=server.base_url) as backend:
            result = await Sampler(backend, load_entrypoints=False).sample("q")
        assert result.usage.cost_usd is None  # a local URL: the price is unknown
        async with OpenAIBackend(
            "gpt-4o-mini", base_url=server.base_url, free_of_charge=True
        ) as backend:
            result = await Sampler(backend, load_entrypoints=False).sample(
                "q", concurrency_budget=3, early_exit=False
            )
        assert result.iterations_used == 3
        assert result.usage.cost_usd == 0.0
        assert all(a.generation.usage.cost_usd == 0.0 for a in result.attempts)
    scripted = await Sampler(ScriptedBackend(["x"]), load_entrypoints=False).sample("q")
    assert scripted.usage.cost_usd is None
