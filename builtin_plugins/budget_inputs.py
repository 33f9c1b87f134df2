"""The input tokens of a call's streamed attempts cut short, for ``budget_guard`` (internal).

A server that is not llama.cpp says a stream's tokens only at its end (OpenAI's
``include_usage``): an attempt stopped early, or cancelled in flight, knows its output (one
token per chunk streamed) but not its input. Its input is the one of its request, which
the call learns once: from any attempt of the same call that sent the same messages and
options (seed aside) and ran to its end. :class:`RequestInputs` keeps, for one call, which
request each attempt in flight sent, the input each request is known to take, and the
attempts stopped early still waiting for theirs; at the call's end what is still unknown
is said, with the reason.

:class:`CallPrice` prices what such attempts spent with :func:`sampling_core.pricing.price_usd`
(the function the backends price their replies with), at the model and URL of the backend
the call's attempts went to: what is known is priced (the output streamed now, the input
once learned), and a price that really is unknown is said, with the reason.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hook_specs.records import STOPPED_EARLY, Generation, Usage
from sampling_core.pricing import price_usd

__all__ = ["CallPrice", "RequestInputs", "model_named"]

_NO_INPUT = (
    "the server reports a stream's tokens only at its end, and no attempt of the call "
    "with the same request ran to its end"
)


def request_of(messages: Any, options: Any) -> str:
    """What makes a request's input: its messages and options but the seed (a digest)."""
    kept = {k: v for k, v in dict(options or {}).items() if k != "seed"}
    text = json.dumps([messages, kept], sort_keys=True, default=repr)
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=16).hexdigest()


def model_named(generation: Generation | None) -> str:
    """`` of model 'NAME'`` when the reply names its model, else nothing (never "None")."""
    model = getattr(generation, "model", None)
    return f" of model {model!r}" if model else ""


def _input_of_request(generation: Generation) -> int | None:
    """The input tokens ``generation``'s request takes at the backend, when it says: the
    backend's own reply says it in its usage; a cached answer in what it took when it was
    generated (``cached_usage``: its usage counts no new tokens, 0 is not its request's
    input); an answer another plugin made for the backend does not say."""
    if generation.answered_by is None:
        return generation.usage.input_tokens
    if generation.cached:
        return getattr(generation, "cached_usage", generation.usage).input_tokens
    return None


class RequestInputs:
    """One call's requests: the input tokens each takes, once known."""

    __slots__ = ("in_flight", "known", "waiting")

    def __init__(self) -> None:
        self.known: dict[str, int] = {}  # request -> its input tokens
        self.in_flight: dict[int, str] = {}  # iteration -> the request it sent
        self.waiting: list[str] = []  # requests of attempts stopped early, input unknown

    def sent(self, iteration: int, messages: Any, options: Any) -> None:
        """An attempt's backend call began with ``messages`` and ``options``."""
        self.in_flight[iteration] = request_of(messages, options)

    def failed(self, iteration: int) -> None:
        """An attempt's backend call raised: it is no longer in flight."""
        self.in_flight.pop(iteration, None)

    def returned(self, iteration: int, generation: Generation) -> int | None:
        """The tokens a returned call spent, as far as known now (``None``: unknown).

        A reply that says its input teaches the call the input of its request (see
        :func:`_input_of_request`); a reply stopped early that does not counts its output
        now and its input when the call learns it (:meth:`at_end`).
        """
        request = self.in_flight.pop(iteration, None)
        usage = generation.usage
        taught = _input_of_request(generation)
        if taught is not None and request is not None:
            self.known[request] = taught
        if (
            usage.input_tokens is None
            and usage.output_tokens is not None
            and request is not None
            and generation.finish_reason == STOPPED_EARLY
        ):
            if request in self.known:
                return self.known[request] + usage.output_tokens
            self.waiting.append(request)
            return usage.output_tokens
        return usage.total_tokens

    def at_end(self, cancelled: Usage) -> tuple[Usage, str | None]:
        """At the call's end: the input and output tokens not yet counted (the input of
        attempts stopped early, learned since; what attempts cancelled in flight spent) and
        why some are unknown (``None``: every token is known)."""
        inputs, unknown = 0, None
        for request in self.waiting:
            if request in self.known:
                inputs += self.known[request]
            else:
                unknown = f"the input tokens of an attempt stopped early are unknown ({_NO_INPUT})"
        if cancelled.total_tokens is not None:
            return Usage(inputs + (cancelled.input_tokens or 0), cancelled.output_tokens), unknown
        if cancelled.output_tokens is None:
            reason = (
                "an attempt cancelled in flight did not report its tokens (a backend that "
                "streams reports them)"
            )
            return Usage(inputs, 0), unknown or reason
        known = [self.known.get(request) for request in self.in_flight.values()]
        if None in known:
            return Usage(inputs, cancelled.output_tokens), unknown or (
                f"the input tokens of an attempt cancelled in flight are unknown ({_NO_INPUT})"
            )
        return Usage(inputs + sum(i for i in known if i), cancelled.output_tokens), unknown


class CallPrice:
    """How one call's backend calls are priced: the model and URL of its backend.

    Pricing is per token, so what an attempt cut short spent is priced in parts as they
    become known (its output when it stops, its input once the call learns it)."""

    __slots__ = ("api_url", "free", "model", "seen")

    def __init__(self) -> None:
        self.seen = False  # whether a backend call of the call was seen
        self.free = False
        self.model: str | None = None
        self.api_url: str | None = None

    def learn(self, backend: Any) -> None:
        """The backend the call's attempts go to (its ``model``, ``base_url`` and
        ``free_of_charge``)."""
        if not self.seen:
            self.seen = True
            self.free = getattr(backend, "free_of_charge", False) is True
            model, api_url = getattr(backend, "model", None), getattr(backend, "base_url", None)
            self.model = model if isinstance(model, str) and model else None
            self.api_url = api_url if isinstance(api_url, str) and api_url else None

    def cost(self, usage: Usage, model: str | None = None) -> tuple[float | None, str | None]:
        """The price of ``usage``'s tokens in US dollars, or ``None`` and why it is unknown."""
        model = model or self.model
        if self.free:
            return 0.0, None
        if usage.input_tokens is None or usage.output_tokens is None:
            return None, "the cost of an attempt cut short is unknown (its tokens are)"
        if usage.input_tokens == usage.output_tokens == 0:
            return 0.0, None
        if not self.seen or not model:
            return None, "the cost of an attempt cut short is unknown (its model is not named)"
        cost = price_usd(model, usage.input_tokens, usage.output_tokens, api_url=self.api_url)
        if cost is None:
            where = f" at {self.api_url}" if self.api_url else ""
            return None, f"the price of model {model!r}{where} is unknown"
        return cost, None
