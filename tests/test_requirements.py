"""Requirements: sync and async checks, bare callables, and the built-in checks."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from sampling_core import Requirement, ScriptedBackend, ValidationResult
from sampling_core.requirements import (
    as_requirements,
    contains,
    is_json,
    llm_judge,
    matches,
    max_chars,
    max_words,
    min_words,
    not_contains,
    parses_as,
)

pytestmark = pytest.mark.anyio


async def test_sync_async_bool_and_result_checks():
    async def slow(text: str) -> bool:
        return "a" in text

    checks = as_requirements(
        [lambda t: True, slow, Requirement("r", lambda t: ValidationResult(False, "why"))]
    )
    results = [await r.validate("abc") for r in checks]
    assert [v.passed for v in results] == [True, True, False]
    assert results[2].reason == "why" and results[2].requirement == "r"
    assert results[1].requirement == "slow"


def test_bare_callables_take_their_docstring_as_description():
    def polite(text: str) -> bool:
        """says please

        more text
        """
        return "please" in text

    (req,) = as_requirements([polite])
    assert req.description == "says please"


async def test_a_check_returning_something_else_is_a_type_error():
    with pytest.raises(TypeError, match="must return bool or ValidationResult"):
        await Requirement("bad", lambda t: "yes").validate("x")
    with pytest.raises(TypeError):
        as_requirements(["not callable"])


@pytest.mark.parametrize(
    ("requirement", "text", "passed"),
    [
        (matches(r"\d{3}"), "code 123", True),
        (matches(r"\d{3}"), "code 12", False),
        (contains("Paris"), "it is paris", True),
        (contains("Paris"), "it is Lyon", False),
        (not_contains("sorry"), "Sorry, no", False),
        (not_contains("sorry"), "Yes", True),
        (max_words(3), "one two three", True),
        (max_words(3), "one two three four", False),
        (min_words(2), "one", False),
        (max_chars(5), "abcdef", False),
        (is_json(), '{"a": 1}', True),
        (is_json(), "```json\n[1, 2]\n```", True),
        (is_json(), "{a: 1}", False),
    ],
)
async def test_builtin_checks(requirement, text, passed):
    verdict = await requirement.validate(text)
    assert verdict.passed is passed
    if not passed:
        assert verdict.reason  # every built-in says why, for repair


async def test_max_words_scores_fall_with_length():
    short = await max_words(2).validate("a b c")
    longer = await max_words(2).validate("a b c d e f")
    assert short.score > longer.score


class Point(BaseModel):
    x: int
    y: int


async def test_parses_as_reports_the_failing_fields():
    verdict = await parses_as(Point).validate('{"x": 1}')
    assert not verdict.passed and "y" in verdict.reason
    assert (await parses_as(Point).validate('{"x": 1, "y": 2}')).passed


async def test_llm_judge_asks_a_backend():
    judge = ScriptedBackend(lambda r: "YES, it is" if "blue" in r.prompt else "NO, it is not")
    req = llm_judge(judge, "Is the answer a colour?")
    assert (await req.validate("blue")).passed
    verdict = await req.validate("table")
    assert not verdict.passed and "NO, it is not" in verdict.reason
