"""The ``kinds`` plugin: samplehooks' own requirements, backends and strategies.

An ordinary plugin (entry point ``kinds``) that registers the built-in kinds through the
provider hooks, exactly as a third-party plugin registers its own; nothing in
``sampling_core`` knows these names. Options are the factories' keyword parameters; an
option annotated with ``THROUGHPUT`` (or ``LOCATION``) may change when a run is resumed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from hook_specs import hookimpl
from sampling_core.errors import exception_text
from sampling_core.kinds import LOCATION, THROUGHPUT, default_kinds
from sampling_core.requirements.checks import (
    Requirement,
    contains,
    is_json,
    matches,
    max_chars,
    max_words,
    min_words,
    not_contains,
)
from sampling_core.requirements.confidence import min_confidence
from sampling_core.requirements.fields import contains_field, equals_field
from sampling_core.requirements.scorers import confidence_scorer, judge_scorer, python_scorer
from sampling_core.strategies import (
    BestOfN,
    MajorityVote,
    MultiTurn,
    RejectionSampling,
    RepairTemplate,
    Strategy,
)

__all__ = [
    "register_backends",
    "register_requirements",
    "register_scorers",
    "register_strategies",
]

Count = Annotated[int, Field(ge=1, strict=True)]
# A call timeout decides which prompts end as errors: a result setting (not THROUGHPUT).
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]
KeepFailures = Annotated[int, Field(ge=1, strict=True)]
_VARIABLE = r"^[A-Za-z_][A-Za-z0-9_]*$"


# -- requirements ---------------------------------------------------------------------------


def _counted(build: Callable[[int], Requirement]) -> Callable[[Count], Requirement]:
    def factory(limit: Count) -> Requirement:
        return build(limit)

    return factory


def _min_confidence(
    threshold: float | Literal["calibrated"],
    *,
    window: Count = 16,
    warmup: Count = 4,
    keep: Annotated[float, Field(gt=0, le=1)] = 0.9,
    top_k: Count = 5,
) -> Requirement:
    """Token confidence (DeepConf's) never below ``threshold``, a number or ``calibrated``
    (per call, from its first ``warmup`` whole generations, keeping ``keep`` of them)."""
    fixed = None if threshold == "calibrated" else float(threshold)
    return min_confidence(fixed, window=window, warmup=warmup, keep=keep, top_k=top_k)


def _matches(pattern: str) -> Requirement:
    """The answer contains a match of the regular expression (RE2: linear time)."""
    return matches(pattern)  # a bad pattern: ValueError "not a valid regular expression ..."


@hookimpl
def register_requirements(register: Callable[..., None]) -> None:
    """matches, contains, not_contains, max_words, min_words, max_chars, is_json,
    equals_field, contains_field, min_confidence."""
    register("matches", _matches)
    register("contains", contains)
    register("not_contains", not_contains)
    register("max_words", _counted(max_words))
    register("min_words", _counted(min_words))
    register("max_chars", _counted(max_chars))
    register("is_json", is_json)
    register("equals_field", equals_field)
    register("min_confidence", _min_confidence)
    register("contains_field", contains_field)


# -- backends -------------------------------------------------------------------------------


def scripted_backend(
    replies: Annotated[list[str], Field(min_length=1)],
    latency_s: Annotated[float, Field(ge=0), THROUGHPUT] = 0.0,
) -> Any:
    """The replies, served in order and cycling (offline, deterministic)."""
    from sampling_core.backends import ScriptedBackend

    return ScriptedBackend(list(replies), latency=latency_s)


def local_backend(
    model_path: str | None = None,
    parallel: Annotated[int | None, Field(ge=1), THROUGHPUT] = None,
    timeout_s: Seconds = 120.0,
) -> Any:
    """The embedded llama.cpp server (default model: the bundled SmolLM2-135M).

    ``parallel`` (server slots) left unset is, in a run, the prompts at once times the
    concurrency budget, and 4 elsewhere.
    """
    from sampling_core.backends import LocalBackend

    return LocalBackend(model_path, parallel=parallel or 4, timeout=timeout_s)


def _no_credentials(url: str | None) -> str | None:
    if url is not None and re.match(r"^[a-z][a-z0-9+.-]*://[^/@]*@", url, re.I):
        raise ValueError(
            "the URL carries credentials; put the key in an environment variable and "
            "give its NAME as api_key_env"
        )
    return url


def openai_backend(
    model: str,
    base_url: Annotated[str | None, AfterValidator(_no_credentials)] = None,
    api_key_env: Annotated[str, Field(pattern=_VARIABLE), LOCATION] = "OPENAI_API_KEY",
    max_in_flight: Annotated[int | None, Field(ge=1), THROUGHPUT] = None,
    rpm: Annotated[float | None, Field(gt=0), THROUGHPUT] = None,
    timeout_s: Seconds = 120.0,
) -> Any:
    """An OpenAI-compatible server (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio)."""
    from sampling_core.backends import OpenAIBackend

    return OpenAIBackend(
        model,
        base_url=base_url,
        api_key_env=api_key_env,
        max_in_flight=max_in_flight,
        rpm=rpm,
        timeout=timeout_s,
    )


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    """scripted, local, openai."""
    register("scripted", scripted_backend)
    register("local", local_backend)
    register("openai", openai_backend)


# -- strategies -----------------------------------------------------------------------------


def _template(template: str | None) -> str | None:
    if template is None:
        return None
    if "{reasons}" not in template:
        raise ValueError("template must contain the placeholder {reasons}")
    try:
        template.format(reasons="")
    except (KeyError, IndexError, ValueError, AttributeError) as exc:
        raise ValueError(
            "template may hold no placeholder but {reasons} (write a literal brace as {{ or "
            f"}}}}); formatting it failed: {type(exc).__name__}: {exception_text(exc)}"
        ) from None
    return template


def rejection(keep_failures: KeepFailures = 3) -> Strategy:
    """Sample again with the same prompt."""
    return RejectionSampling(keep_failures=keep_failures)


def repair(template: str | None = None, keep_failures: KeepFailures = 3) -> Strategy:
    """Append the failures' reasons to the instruction (``template`` has ``{reasons}``)."""
    return RepairTemplate(_template(template), keep_failures=keep_failures)


def multiturn(template: str | None = None, keep_failures: KeepFailures = 3) -> Strategy:
    """Continue the conversation with the feedback (``template`` has ``{reasons}``)."""
    return MultiTurn(_template(template), keep_failures=keep_failures)


ScorerSpec = str | dict[str, Any] | None
"""A scorer in a config: ``KIND`` or ``{kind: KIND, ...options}`` (see register_scorers)."""


def _scorer(spec: ScorerSpec) -> Any:
    return None if spec is None else default_kinds().scorer_spec(spec)


def best_of_n(scorer: ScorerSpec = None, keep_failures: KeepFailures = 3) -> Strategy:
    """Run the whole budget, pick the best score (``scorer``'s when given)."""
    return BestOfN(_scorer(scorer), keep_failures=keep_failures)


def majority(
    consensus: Annotated[float | None, Field(gt=0, le=1)] = None,
    normalize: Literal["text", "last_number"] = "text",
    weight: ScorerSpec = None,
    keep_failures: KeepFailures = 3,
) -> Strategy:
    """Pick the most common answer (compared as ``normalize`` says; each counted as its
    ``weight`` scorer's score when given); with ``consensus`` (1.0: exactly; below: the
    posterior probability that the leader stays), stop once the pick is settled."""
    return MajorityVote(
        normalize, consensus=consensus, weight=_scorer(weight), keep_failures=keep_failures
    )


# -- scorers --------------------------------------------------------------------------------


def mean_confidence_scorer() -> Any:
    """The answer's mean token confidence (needs options logprobs, top_logprobs)."""
    return confidence_scorer()


def llm_judge_scorer(
    instruction: str = "Rate how well the answer answers the request, from 0 to 10.",
) -> Any:
    """A model (the sampler's) rates the answer: the first number of its reply."""
    return judge_scorer(instruction)


def python_function_scorer(function: str) -> Any:
    """The function ``package.module:name`` scores the answer."""
    return python_scorer(function)


@hookimpl
def register_scorers(register: Callable[..., None]) -> None:
    """mean_confidence, llm_judge, python."""
    register("mean_confidence", mean_confidence_scorer)
    register("llm_judge", llm_judge_scorer)
    register("python", python_function_scorer)


@hookimpl
def register_strategies(register: Callable[..., None]) -> None:
    """rejection, repair, multiturn, best_of_n, majority."""
    for factory in (rejection, repair, multiturn, best_of_n, majority):
        register(factory.__name__, factory)
