"""The input tokens of a call's streamed attempts cut short, for ``budget_guard`` (internal).

A server that is not llama.cpp says a stream's tokens only at its end (OpenAI's
``include_usage``): an attempt stopped early, or cancelled in flight, knows its output (one
token per chunk streamed) but not its input. Its input is the one of its request, which
the call learns once: from any attempt of the same call that sent the same messages and
options (seed aside) and ran to its end. :class:`RequestInputs` keeps, for one call, which
request each attempt in flight sent, the input each request is known to take, and the
attempts stopped early still waiting for theirs; at the call's end what is still unknown
is said, with the reason.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hook_specs.records import STOPPED_EARLY, Generation, Usage

__all__ = ["RequestInputs", "model_named"]

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

    def at_end(self, cancelled: Usage) -> tuple[int, str | None]:
        """At the call's end: the tokens not yet counted (the input of attempts stopped
        early, learned since; what attempts cancelled in flight spent) and why some are
        unknown (``None``: every token is known)."""
        tokens, unknown = 0, None
        for request in self.waiting:
            if request in self.known:
                tokens += self.known[request]
            else:
                unknown = f"the input tokens of an attempt stopped early are unknown ({_NO_INPUT})"
        if cancelled.total_tokens is not None:
            return tokens + cancelled.total_tokens, unknown
        if cancelled.output_tokens is None:
            reason = (
                "an attempt cancelled in flight did not report its tokens (a backend that "
                "streams reports them)"
            )
            return tokens, unknown or reason
        inputs = [self.known.get(request) for request in self.in_flight.values()]
        if None in inputs:
            return tokens + cancelled.output_tokens, unknown or (
                f"the input tokens of an attempt cancelled in flight are unknown ({_NO_INPUT})"
            )
        return tokens + cancelled.output_tokens + sum(i for i in inputs if i), unknown
