"""Scorers: a number for an answer, higher is better, for strategies that rank or weigh.

A scorer is ``scorer(text)`` or ``scorer(text, context)`` (a
:class:`~sampling_core.requirements.context.CheckContext`, whose ``generation`` holds what
the backend returned), sync or async, returning a number. ``BestOfN(scorer=...)`` picks
the best-scored attempt (passing ones first); ``MajorityVote(weight=...)`` adds each
answer's scores instead of counting it once. The engine scores every completed attempt
of such a strategy and keeps the score on it (``Attempt.scored``), in records too.

The built-in kinds (``register_scorers``): ``mean_confidence`` (:func:`confidence_scorer`),
``llm_judge`` (:func:`judge_scorer`) and ``python`` (:func:`python_scorer`).
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

from hook_specs.records import Generation
from sampling_core.backends.base import Backend, GenerationRequest, content_text
from sampling_core.requirements.confidence import NO_LOGPROBS, NoLogprobs, mean_confidence
from sampling_core.requirements.context import CheckContext, takes_context

__all__ = ["Scorer", "confidence_scorer", "judge_scorer", "python_scorer", "score_of"]

Scorer = Callable[..., float | Awaitable[float]]
"""``scorer(text)`` or ``scorer(text, context)``, sync or async: a number, higher is better."""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def confidence_scorer() -> Scorer:
    """The answer's mean token confidence (DeepConf's; see
    :mod:`sampling_core.requirements.confidence`). Needs the backend's log-probabilities:
    ask with the options ``logprobs: true``, ``top_logprobs: N``."""

    def mean_token_confidence(text: str, context: CheckContext) -> float:
        generation = context.generation
        if generation is None or generation.logprobs is None:
            raise NoLogprobs(NO_LOGPROBS.replace("min_confidence", "the mean_confidence scorer"))
        return mean_confidence(generation.logprobs) or 0.0

    return mean_token_confidence


def judge_scorer(
    instruction: str = "Rate how well the answer answers the request, from 0 to 10.",
    *,
    backend: Backend | None = None,
    options: dict[str, Any] | None = None,
) -> Scorer:
    """Ask a model to rate the answer: the first number of its reply is the score (a reply
    without a number scores 0). The call goes through the engine's backend path, as
    ``llm_judge``'s (``backend=None``: the sampler's own)."""

    async def judged(text: str, context: CheckContext) -> float:
        asked = [content_text(m.get("content", "")) for m in context.messages]
        request_part = f"The request was:\n{asked[-1]}\n\n" if asked else ""
        prompt = (
            f"{instruction}\n\n{request_part}Answer to rate:\n{text}\n\n"
            "Reply with the number first."
        )
        request = GenerationRequest(
            [{"role": "user", "content": prompt}], dict(options or {"temperature": 0.0})
        )
        if context.generate is not None:
            reply: Any = await context.generate(request, backend)
        elif backend is not None:
            reply = await backend.generate(request)
        else:
            raise ValueError("judge_scorer() with no backend scores only inside sample()")
        said = reply.text if isinstance(reply, Generation) else str(reply)
        found = _NUMBER.search(said)
        return float(found.group()) if found else 0.0

    return judged


def python_scorer(function: str) -> Scorer:
    """The function named ``"package.module:name"`` (imported when the scorer is made)."""
    module_name, _, attribute = function.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"a python scorer is named 'package.module:function', not {function!r}")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"{function!r} is not callable")
    return found  # type: ignore[no-any-return]


async def score_of(scorer: Scorer, text: str, context: CheckContext) -> float:
    """What ``scorer`` gives the answer, as a finite float (``ValueError`` otherwise)."""
    score: Any = scorer(text, context) if takes_context(scorer) else scorer(text)
    if not isinstance(score, int | float) and inspect.isawaitable(score):  # (an ABC check)
        score = await score
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise ValueError(f"a scorer returned {score!r}; it must return a finite number")
    return float(score)
