"""Token log-probabilities in OpenAI-compatible replies, read into ``TokenLogprob`` values.

Internal to :mod:`sampling_core.backends`. A request asks for them with the options
``logprobs: true`` and ``top_logprobs: N`` (sent as body fields; for ``/completions``,
whose API takes the number of top tokens as ``logprobs``, :func:`completions_options`
rewrites them). A choice (of a whole reply or of one streamed event) carries them in one
of two shapes, both read by :func:`logprobs_of`:

* chat (OpenAI, vLLM; llama.cpp for both endpoints): ``{"content": [{"token", "logprob",
  "top_logprobs": [{"token", "logprob"}, ...]}, ...]}``;
* legacy completions (OpenAI, vLLM): ``{"tokens": [...], "token_logprobs": [...],
  "top_logprobs": [{token: logprob, ...}, ...]}``.

What is not a number (or is missing) is left out, never guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hook_specs.records import TokenLogprob

__all__ = ["completions_options", "logprobs_of"]


def logprobs_of(choice: Mapping[str, Any]) -> tuple[TokenLogprob, ...] | None:
    """The tokens' log-probabilities of one choice, or ``None`` when it carries none."""
    given = choice.get("logprobs")
    if not isinstance(given, Mapping):
        return None
    content = given.get("content")
    if isinstance(content, list):
        return tuple(t for t in map(_chat_token, content) if t is not None)
    tokens = given.get("tokens")
    if isinstance(tokens, list):
        return _legacy(tokens, given.get("token_logprobs"), given.get("top_logprobs"))
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if not math.isnan(number) else None


def _chat_token(entry: Any) -> TokenLogprob | None:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("token"), str):
        return None
    logprob = _number(entry.get("logprob"))
    if logprob is None:
        return None
    top: list[tuple[str, float]] = []
    for alternative in entry.get("top_logprobs") or ():
        if isinstance(alternative, Mapping) and isinstance(alternative.get("token"), str):
            value = _number(alternative.get("logprob"))
            if value is not None:
                top.append((alternative["token"], value))
    return TokenLogprob(entry["token"], logprob, tuple(top))


def _legacy(tokens: list[Any], logprobs: Any, tops: Any) -> tuple[TokenLogprob, ...]:
    out = []
    logprobs = logprobs if isinstance(logprobs, list) else []
    tops = tops if isinstance(tops, list) else []
    for index, token in enumerate(tokens):
        logprob = _number(logprobs[index]) if index < len(logprobs) else None
        if not isinstance(token, str) or logprob is None:
            continue
        top_given = tops[index] if index < len(tops) else None
        top: list[tuple[str, float]] = []
        if isinstance(top_given, Mapping):
            for name, value in top_given.items():
                number = _number(value)
                if isinstance(name, str) and number is not None:
                    top.append((name, number))
            top.sort(key=lambda pair: -pair[1])
        out.append(TokenLogprob(token, logprob, tuple(top)))
    return tuple(out)


def completions_options(body: dict[str, Any]) -> None:
    """Rewrite ``logprobs: true`` / ``top_logprobs: N`` for ``/completions``, whose API
    takes the number of top tokens as ``logprobs`` (at least 1 to get any)."""
    asked = body.get("logprobs")
    if asked is True:
        top = body.pop("top_logprobs", None)
        body["logprobs"] = top if isinstance(top, int) and top > 0 else 1
    elif asked is False:
        body.pop("logprobs")
        body.pop("top_logprobs", None)
