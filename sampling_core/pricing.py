"""What a backend call cost in US dollars, from the ``genai-prices`` package's price table.

``genai-prices`` (by the pydantic team) ships a snapshot of providers' published prices and
matches a model name and an API URL to one of them. A call is priced only when both are
known: a model served by a local server (llama.cpp, vLLM, Ollama on your machine) matches
no provider and stays unpriced (``None``) rather than being given some cloud's price; the
embedded local model costs ``0.0``. The table is the one in the installed package: nothing
is fetched over the network.
"""

from __future__ import annotations

from functools import lru_cache

from hook_specs.records import Usage

__all__ = ["price_usd", "priced"]


@lru_cache(maxsize=256)
def _known(model: str, api_url: str | None) -> bool:
    """Whether ``genai-prices`` has a price for ``model`` at ``api_url`` (cached)."""
    return _calc(model, api_url, 1, 1) is not None


def _calc(model: str, api_url: str | None, input_tokens: int, output_tokens: int) -> float | None:
    try:
        from genai_prices import Usage as PriceUsage
        from genai_prices import calc_price
    except ImportError:  # pragma: no cover - a base dependency, but never fail a call over it
        return None
    try:
        price = calc_price(
            PriceUsage(input_tokens=input_tokens, output_tokens=output_tokens),
            model_ref=model,
            provider_api_url=api_url,
        )
    except (LookupError, ValueError):
        return None
    return float(price.total_price)


def price_usd(
    model: str | None, input_tokens: int, output_tokens: int, *, api_url: str | None = None
) -> float | None:
    """The price of one call in US dollars, or ``None`` when the model's price is unknown.

    ``api_url`` is the provider's base URL (``https://api.openai.com/v1``, ...); a URL that
    belongs to no known provider (a local server) gives ``None``.
    """
    if not model or not _known(model, api_url):
        return None
    return _calc(model, api_url, input_tokens, output_tokens)


def priced(usage: Usage, model: str | None, *, api_url: str | None = None) -> Usage:
    """``usage`` with its ``cost_usd`` filled in (left as it is when already set).

    Tokens nobody counted cannot be priced: with a count unknown the cost stays ``None``
    (unknown), never the price of zero tokens."""
    if usage.cost_usd is not None or usage.input_tokens is None or usage.output_tokens is None:
        return usage
    cost = price_usd(model, usage.input_tokens, usage.output_tokens, api_url=api_url)
    if cost is None:
        return usage
    return Usage(usage.input_tokens, usage.output_tokens, cost)
