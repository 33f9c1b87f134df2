"""Requirements: what an answer must satisfy, and the built-in checks.

A requirement is a description and a ``check(text)`` that is sync or async and returns a
``bool`` or a :class:`ValidationResult`. A bare callable is accepted wherever a
requirement is; its docstring's first line (or its name) becomes the description.

A requirement may also judge a prefix: ``prefix(text_so_far) -> bool`` is ``False`` when
the text so far already fails the requirement whatever may follow. While an answer streams
in, the engine asks it after each piece and stops the generation at the first ``False``
(early stop). ``max_words``, ``max_chars`` and ``not_contains`` have one, and a
``reader`` doing it with constant work per piece (:mod:`sampling_core.requirements.prefix`).
"""

from __future__ import annotations

import inspect
import json
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from hook_specs.errors import StopSampling
from hook_specs.records import ValidationResult
from sampling_core.errors import CheckCallFailed, exception_text
from sampling_core.requirements.context import CannotDecide, CheckContext, takes_context
from sampling_core.requirements.linear_regex import compile_linear
from sampling_core.requirements.prefix import CharCount, NeedleWatch, ReaderFactory, WordCount

M = TypeVar("M", bound=BaseModel)
CheckResult = bool | ValidationResult
Check = Callable[..., CheckResult | Awaitable[CheckResult]]
"""``check(text)`` or ``check(text, context)``, sync or async."""
Prefix = Callable[[str], bool]
"""``prefix(text_so_far)``: ``False`` when the text already fails, whatever may follow."""

__all__ = [
    "Check",
    "Prefix",
    "Requirement",
    "ValidationResult",
    "as_requirements",
    "contains",
    "is_json",
    "matches",
    "max_chars",
    "max_words",
    "min_words",
    "not_contains",
    "parse_json",
    "parse_model",
    "parses_as",
]


DEFAULT_CHECK_TIMEOUT_S = 60.0
"""Seconds one requirement check may take before it fails (``Sampler(check_timeout=...)``)."""


class Requirement:
    """A description of what an answer must satisfy, and the check that decides it.

    ``prefix``, when given, is a plain (not async) ``prefix(text_so_far) -> bool`` that
    returns ``False`` as soon as the text so far fails the requirement whatever follows
    (for "at most 40 words": more than 40 words already). It must never return ``False``
    for a text that could still pass: the engine stops the generation there, and the
    attempt fails with this requirement unmet (see ``docs/spending-fewer-tokens.md``).
    """

    __slots__ = (
        "_verdicts",
        "asks",
        "check",
        "description",
        "prefix",
        "reader",
        "row_fields",
        "wants_context",
    )

    def __init__(
        self,
        description: str,
        check: Check,
        prefix: Prefix | None = None,
        *,
        row_fields: Iterable[str] = (),
        reader: ReaderFactory | None = None,
        asks: Mapping[str, Any] | None = None,
    ) -> None:
        """``row_fields``: the dataset fields the check reads (``CheckContext.row``; a run
        refuses a dataset lacking one). ``reader``: a prefix check fed each piece
        (:mod:`sampling_core.requirements.prefix`), used instead of ``prefix``. ``asks``:
        backend options the check needs (``{"logprobs": True}``) unless the call sets them."""
        if not callable(check):
            raise TypeError(f"Requirement {description!r}: check must be callable, got {check!r}")
        for name, given in (("prefix", prefix), ("reader", reader)):
            if given is not None and not callable(given):
                raise TypeError(
                    f"Requirement {description!r}: {name} must be callable or None, got {given!r}"
                )
        self.description = description
        self.check = check
        self.prefix = prefix
        self.reader = reader
        self.asks = dict(asks or {})
        self.row_fields = tuple(row_fields)
        # decided once: a check taking (text, context) is given a CheckContext
        self.wants_context = takes_context(check)
        # The (failed, passed) verdicts of a check returning a bool: immutable, so shared.
        self._verdicts: tuple[ValidationResult, ValidationResult] | None = None

    def __repr__(self) -> str:
        return f"Requirement({self.description!r})"

    async def validate(self, text: str, context: CheckContext | None = None) -> ValidationResult:
        """Run the check on ``text`` and return its verdict, labelled with this description."""
        outcome: Any = (
            self.check(text, context or CheckContext()) if self.wants_context else self.check(text)
        )
        if not isinstance(outcome, bool | ValidationResult) and inspect.isawaitable(outcome):
            outcome = await outcome
        return _as_result(outcome, self.description)

    def validate_now(
        self, text: str, context: CheckContext | None = None
    ) -> ValidationResult | Awaitable[ValidationResult]:
        """Like :meth:`validate`, without a coroutine when the check is synchronous."""
        outcome: Any = (
            self.check(text, context or CheckContext()) if self.wants_context else self.check(text)
        )
        if outcome is True or outcome is False:  # the common case, checked first
            verdicts = self._verdicts
            if verdicts is None or verdicts[0].requirement is not self.description:
                description = self.description
                verdicts = self._verdicts = (
                    ValidationResult(False, None, None, description),
                    ValidationResult(True, None, None, description),
                )
            return verdicts[outcome]
        if not isinstance(outcome, ValidationResult) and inspect.isawaitable(outcome):
            return self._finish(outcome)  # (isawaitable's ABC check, skipped for a verdict)
        return _as_result(outcome, self.description)

    async def _finish(self, pending: Awaitable[Any]) -> ValidationResult:
        return _as_result(await pending, self.description)


def validate_all(
    requirements: Sequence[Requirement],
    text: str,
    context: CheckContext | None = None,
    check_timeout: float | None = None,
    undecided: set[int] | None = None,
) -> tuple[ValidationResult, ...] | Coroutine[Any, Any, tuple[ValidationResult, ...]]:
    """Every requirement's verdict on ``text``, in order (checks that want it get ``context``).

    Synchronous checks give the tuple at once; from the first async check on, the rest is a
    coroutine to await (so an attempt with only synchronous checks never awaits). A check
    that raises fails with the exception as its reason; ``StopSampling`` and
    :class:`~sampling_core.errors.CheckCallFailed` (its model call failed: nothing was
    graded) propagate.
    With ``check_timeout``, an async check still running after that many seconds is
    cancelled and fails with the reason; a sync check that took longer (it cannot be
    interrupted) fails the same way once it returns.
    A check raising :class:`~sampling_core.requirements.context.CannotDecide` fails with
    its message; with ``undecided`` (a rescore) its position is added there instead.
    """
    results: list[ValidationResult] = []
    for requirement in requirements:  # the position of this one is len(results)
        began = time.perf_counter() if check_timeout is not None else 0.0
        try:
            verdict = requirement.validate_now(text, context)
        except (StopSampling, CheckCallFailed):
            raise
        except Exception as exc:
            verdict = _check_raised(requirement, exc, undecided, len(results))
        if not isinstance(verdict, ValidationResult):
            rest = (verdict, context, check_timeout, undecided)
            return _validate_rest(requirements, text, results, len(results), *rest)
        if check_timeout is not None and time.perf_counter() - began > check_timeout:
            verdict = _timed_out(requirement, check_timeout)
        results.append(verdict)
    return tuple(results)


def _timed_out(requirement: Requirement, timeout: float) -> ValidationResult:
    return ValidationResult(
        False,
        f"the check took longer than check_timeout ({timeout:g}s)",
        None,
        requirement.description,
    )


async def _validate_rest(
    requirements: Sequence[Requirement],
    text: str,
    results: list[ValidationResult],
    position: int,
    pending: Any,
    context: CheckContext | None = None,
    check_timeout: float | None = None,
    undecided: set[int] | None = None,
) -> tuple[ValidationResult, ...]:
    for index in range(position, len(requirements)):
        requirement = requirements[index]
        verdict = None
        began = time.perf_counter()
        with anyio.move_on_after(math.inf if check_timeout is None else check_timeout):
            try:
                if pending is None:
                    pending = requirement.validate_now(text, context)
                verdict = pending if isinstance(pending, ValidationResult) else await pending
            except (StopSampling, CheckCallFailed):
                raise
            except Exception as exc:
                verdict = _check_raised(requirement, exc, undecided, index)
        if verdict is None:  # cut off by the timeout
            if inspect.iscoroutine(pending):
                pending.close()
            verdict = _timed_out(requirement, check_timeout or 0.0)
        elif check_timeout is not None and time.perf_counter() - began > check_timeout:
            verdict = _timed_out(requirement, check_timeout)  # a sync check, not cut off
        pending = None
        results.append(verdict)
    return tuple(results)


def _check_raised(
    requirement: Requirement, exc: Exception, undecided: set[int] | None, position: int
) -> ValidationResult:
    if not isinstance(exc, CannotDecide):
        reason = f"the check raised {type(exc).__name__}: {exception_text(exc)}"
    elif undecided is None:  # the attempt lacks what it needs: it fails, saying so
        reason = exception_text(exc)
    else:  # a rescore: the run did not keep it
        undecided.add(position)
        reason = exc.not_known
    return ValidationResult(False, reason, None, requirement.description)


def _as_result(outcome: Any, description: str) -> ValidationResult:
    if isinstance(outcome, ValidationResult):
        if outcome.requirement is None:
            return outcome.of(description)
        return outcome
    if isinstance(outcome, bool):
        return ValidationResult(outcome, None, None, description)
    raise TypeError(
        f"requirement {description!r} returned {type(outcome).__name__}; "
        "a check must return bool or ValidationResult"
    )


def as_requirements(items: Iterable[Requirement | Check]) -> tuple[Requirement, ...]:
    """Turn requirements and bare callables into a tuple of :class:`Requirement`."""
    out = []
    for item in items:
        if isinstance(item, Requirement):
            out.append(item)
        elif callable(item):
            doc = (inspect.getdoc(item) or "").strip().splitlines()
            name = doc[0] if doc else getattr(item, "__name__", type(item).__name__)
            out.append(Requirement(name, item))
        else:
            raise TypeError(
                f"a requirement must be a Requirement or a callable(text), got {item!r}"
            )
    return tuple(out)


def _words(text: str) -> int:
    return len(text.split())


def matches(pattern: str, *, flags: int = 0, description: str | None = None) -> Requirement:
    """The text contains a match of the regular expression ``pattern``.

    The pattern runs on RE2 (:mod:`sampling_core.requirements.linear_regex`): in linear
    time, so it cannot hang a run; lookaround and backreferences are refused here with a
    ``ValueError``.
    """
    compiled = compile_linear(pattern, flags)

    def check(text: str) -> ValidationResult:
        if compiled.search(text):
            return ValidationResult(True)
        return ValidationResult(False, f"The answer must match the pattern {pattern!r}.")

    return Requirement(description or f"matches /{pattern}/", check)


def contains(needle: str, *, case_sensitive: bool = False) -> Requirement:
    """The text contains ``needle`` (case-insensitive by default)."""

    def check(text: str) -> ValidationResult:
        found = needle in text if case_sensitive else needle.lower() in text.lower()
        return (
            ValidationResult(True)
            if found
            else ValidationResult(False, f"The answer must contain {needle!r}.")
        )

    return Requirement(f"contains {needle!r}", check)


def not_contains(needle: str, *, case_sensitive: bool = False) -> Requirement:
    """The text does not contain ``needle`` (case-insensitive by default); a text that
    already contains it fails whatever follows (its prefix check)."""

    def found(text: str) -> bool:
        return needle in text if case_sensitive else needle.lower() in text.lower()

    def check(text: str) -> ValidationResult:
        return (
            ValidationResult(False, f"The answer must not contain {needle!r}.")
            if found(text)
            else (ValidationResult(True))
        )

    def prefix(text: str) -> bool:
        return not found(text)

    return Requirement(
        f"does not contain {needle!r}",
        check,
        prefix,
        reader=lambda notes: NeedleWatch(needle, case_sensitive),
    )


def max_words(limit: int) -> Requirement:
    """At most ``limit`` words; the score falls as the answer grows past it. A text with
    more words already fails (its prefix check: more text never has fewer words)."""

    def check(text: str) -> ValidationResult:
        n = _words(text)
        if n <= limit:
            return ValidationResult(True, score=1.0)
        return ValidationResult(
            False, f"The answer has {n} words; it must have at most {limit}.", score=limit / n
        )

    def prefix(text: str) -> bool:
        return _words(text) <= limit

    return Requirement(
        f"at most {limit} words", check, prefix, reader=lambda notes: WordCount(limit)
    )


def min_words(limit: int) -> Requirement:
    """At least ``limit`` words."""

    def check(text: str) -> ValidationResult:
        n = _words(text)
        if n >= limit:
            return ValidationResult(True, score=1.0)
        return ValidationResult(
            False, f"The answer has {n} words; it must have at least {limit}.", score=n / limit
        )

    return Requirement(f"at least {limit} words", check)


def max_chars(limit: int) -> Requirement:
    """At most ``limit`` characters (a longer text already fails: its prefix check)."""

    def check(text: str) -> ValidationResult:
        n = len(text)
        if n <= limit:
            return ValidationResult(True, score=1.0)
        return ValidationResult(
            False,
            f"The answer has {n} characters; it must have at most {limit}.",
            score=limit / n,
        )

    def prefix(text: str) -> bool:
        return len(text) <= limit

    return Requirement(
        f"at most {limit} characters", check, prefix, reader=lambda notes: CharCount(limit)
    )


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        stripped = stripped.rsplit("```", 1)[0]
    return stripped.strip()


def parse_json(text: str) -> Any:
    """``text`` as one JSON document (a surrounding Markdown code fence is allowed);
    ``ValueError`` when it is not."""
    return json.loads(_strip_fence(text))


def is_json() -> Requirement:
    """The text is one JSON document (a surrounding Markdown code fence is allowed)."""

    def check(text: str) -> ValidationResult:
        try:
            parse_json(text)
        except ValueError as exc:
            return ValidationResult(
                False, f"The answer must be valid JSON ({exception_text(exc)})."
            )
        return ValidationResult(True)

    return Requirement("is valid JSON", check)


def parse_model(model: type[M], text: str) -> M:
    """Parse ``text`` (optionally in a Markdown code fence) as JSON into ``model``."""
    return model.model_validate_json(_strip_fence(text))


def parses_as(model: type[BaseModel]) -> Requirement:
    """The text is JSON that validates as the pydantic ``model``."""

    def check(text: str) -> ValidationResult:
        try:
            parse_model(model, text)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(root)'}: {err['msg']}"
                for err in exc.errors()[:5]
            )
            return ValidationResult(
                False, f"The answer must be JSON matching {model.__name__}: {problems}."
            )
        return ValidationResult(True)

    return Requirement(f"is JSON matching {model.__name__}", check)
