"""Requirements, exactly as a user reads them: the built-ins' descriptions, failure reasons
and scores, boundaries, sync and async checks and bare callables, and how ``validate_all``
runs a list of checks (raising, stopping, async, timed out). A judge inside a call:
``requirements/test_judge.py``."""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Awaitable

import anyio
import pytest
from pydantic import BaseModel

from hook_specs.errors import StopSampling
from sampling_core import CheckContext, Requirement, ScriptedBackend, ValidationResult
from sampling_core.requirements import CannotDecide
from sampling_core.requirements.checks import (
    as_requirements,
    contains,
    is_json,
    matches,
    max_chars,
    max_words,
    min_words,
    not_contains,
    parses_as,
    validate_all,
)
from sampling_core.requirements.judge import llm_judge

pytestmark = pytest.mark.anyio


def verdict(requirement: Requirement, text: str) -> ValidationResult:
    """The requirement's verdict on ``text``: the same asked at once or awaited."""
    found = requirement.validate_now(text)
    assert isinstance(found, ValidationResult)
    assert anyio.run(requirement.validate, text) == found
    return found


def test_text_checks_say_what_they_want_exactly() -> None:
    digits = matches(r"\d{3}")
    assert digits.description == r"matches /\d{3}/"
    assert verdict(digits, "code 12") == ValidationResult(
        False, r"The answer must match the pattern '\\d{3}'.", None, r"matches /\d{3}/"
    )
    assert verdict(digits, "code 123") == ValidationResult(True, None, None, r"matches /\d{3}/")
    assert matches("x", description="has an x").description == "has an x"
    assert verdict(matches("paris", flags=re.IGNORECASE), "PARIS").passed

    paris = contains("Paris")
    assert paris.description == "contains 'Paris'"
    assert verdict(paris, "in paris") == ValidationResult(True, None, None, "contains 'Paris'")
    assert verdict(paris, "in Lyon") == ValidationResult(
        False, "The answer must contain 'Paris'.", None, "contains 'Paris'"
    )
    assert not verdict(contains("Paris", case_sensitive=True), "in paris").passed
    assert verdict(contains("Paris", case_sensitive=True), "in Paris").passed

    sorry = not_contains("Sorry")
    assert sorry.description == "does not contain 'Sorry'"
    assert verdict(sorry, "sorry, no") == ValidationResult(
        False, "The answer must not contain 'Sorry'.", None, "does not contain 'Sorry'"
    )
    assert verdict(sorry, "yes") == ValidationResult(True, None, None, "does not contain 'Sorry'")
    assert not verdict(not_contains("sorry"), "Sorry, no").passed  # either side's case
    assert verdict(not_contains("Sorry", case_sensitive=True), "sorry, no").passed
    assert not verdict(not_contains("Sorry", case_sensitive=True), "Sorry, no").passed


def test_counts_say_the_count_and_the_limit_and_score_the_distance() -> None:
    most = max_words(3)
    assert most.description == "at most 3 words"
    assert verdict(most, "one two three") == ValidationResult(True, None, 1.0, "at most 3 words")
    assert verdict(most, "one two three four") == ValidationResult(
        False, "The answer has 4 words; it must have at most 3.", 0.75, "at most 3 words"
    )
    assert verdict(most, "one two three four five six").score < 0.75  # falls with length

    least = min_words(2)
    assert least.description == "at least 2 words"
    assert verdict(least, "one two") == ValidationResult(True, None, 1.0, "at least 2 words")
    assert verdict(least, "one") == ValidationResult(
        False, "The answer has 1 words; it must have at least 2.", 0.5, "at least 2 words"
    )

    chars = max_chars(4)
    assert chars.description == "at most 4 characters"
    assert verdict(chars, "abcd") == ValidationResult(True, None, 1.0, "at most 4 characters")
    assert verdict(chars, "abcdefgh") == ValidationResult(
        False, "The answer has 8 characters; it must have at most 4.", 0.5, "at most 4 characters"
    )


def test_is_json_allows_a_fence_and_says_what_json_said() -> None:
    check = is_json()
    assert check.description == "is valid JSON"
    for good in ('{"a": 1}', "```json\n[1, 2]\n```", "  ```json\n[1, 2]\n```  ", "```\n3\n```"):
        assert verdict(check, good) == ValidationResult(True, None, None, "is valid JSON"), good
    with pytest.raises(ValueError) as raised:
        json.loads("{a: 1}")
    assert verdict(check, "{a: 1}") == ValidationResult(
        False, f"The answer must be valid JSON ({raised.value}).", None, "is valid JSON"
    )
    fenced = [
        "``` json\n[1]\n```",  # an info string after a space
        '```json\n{\n  "a": 1\n}\n```',  # several lines inside the fence
        '```json\n{"code": "```x```"}\n```',  # a fence inside the JSON
    ]
    for good in fenced:
        assert verdict(check, good).passed, good
    assert not verdict(check, "```[1]```").passed  # a fence opens a line
    assert verdict(check, "```json\n[1, 2]\n``` a note after the fence").passed


class Inner(BaseModel):
    z: int


class Point(BaseModel):
    x: int
    y: int
    inner: Inner | None = None


class Six(BaseModel):
    a: int
    b: int
    c: int
    d: int
    e: int
    f: int


def test_parses_as_names_each_failing_field_up_to_five() -> None:
    point = parses_as(Point)
    assert point.description == "is JSON matching Point"
    assert verdict(point, '{"x": 1}') == ValidationResult(
        False,
        "The answer must be JSON matching Point: y: Field required.",
        None,
        "is JSON matching Point",
    )
    empty = verdict(point, "```{}```").reason  # no line after the fence: nothing to parse
    assert empty.startswith("The answer must be JSON matching Point: (root): Invalid JSON: EOF")
    assert verdict(point, '{"x": 1, "y": 2, "inner": {}}').reason == (
        "The answer must be JSON matching Point: inner.z: Field required."
    )
    root = verdict(point, "[1]").reason
    assert root.startswith("The answer must be JSON matching Point: (root): ")
    assert verdict(point, '```\n{"x": 1, "y": 2}\n```') == ValidationResult(
        True, None, None, "is JSON matching Point"
    )
    assert verdict(point, '{"x": 1, "y": 2}').passed
    six = verdict(parses_as(Six), "{}").reason
    assert six == (
        "The answer must be JSON matching Six: a: Field required; b: Field required; "
        "c: Field required; d: Field required; e: Field required."
    )


async def test_llm_judge_asks_exactly_and_quotes_the_verdict() -> None:
    asked = []

    def reply(request) -> str:
        asked.append(request)
        return "  Yes, blue is." if "blue" in request.prompt else "  NO, a table is not.  "

    judge = llm_judge(ScriptedBackend(reply), "Is it a colour?", options={"temperature": 0})
    assert judge.description == "judge: Is it a colour?"
    assert await judge.validate("blue") == ValidationResult(
        True, None, None, "judge: Is it a colour?"
    )
    assert asked[0].messages == [
        {
            "role": "user",
            "content": "Is it a colour?\n\nAnswer to judge:\nblue\n\n"
            "Reply with YES or NO first, then one sentence saying why.",
        }
    ]
    assert asked[0].options == {"temperature": 0}
    assert await judge.validate("table") == ValidationResult(
        False,
        "A judge answered 'Is it a colour?' with: NO, a table is not.",
        None,
        "judge: Is it a colour?",
    )


class TextBackend:
    """A backend that answers with a bare string instead of a Generation."""

    async def generate(self, request) -> str:
        return "yes."


async def test_llm_judge_reads_a_bare_string_reply() -> None:
    assert (await llm_judge(TextBackend(), "q?").validate("a")).passed  # type: ignore[arg-type]


async def test_a_requirement_labels_every_verdict_with_its_description() -> None:
    with pytest.raises(TypeError) as raised:
        Requirement("r", "not callable")  # type: ignore[arg-type]
    assert str(raised.value) == "Requirement 'r': check must be callable, got 'not callable'"
    assert repr(Requirement("short", bool)) == "Requirement('short')"

    async def slow(text: str) -> bool:
        return "a" in text

    checks = as_requirements(
        [lambda t: True, slow, Requirement("r", lambda t: ValidationResult(False, "why"))]
    )
    assert [await r.validate("abc") for r in checks] == [
        ValidationResult(True, None, None, "<lambda>"),
        ValidationResult(True, None, None, "slow"),  # awaited; named by its name
        ValidationResult(False, "why", None, "r"),
    ]

    own = Requirement("r", lambda t: ValidationResult(False, "why", 0.3, "named"))
    assert await own.validate("x") == ValidationResult(False, "why", 0.3, "named")
    bare = Requirement("r", lambda t: ValidationResult(False, "why", 0.3))
    assert await bare.validate("x") == ValidationResult(False, "why", 0.3, "r")
    assert bare.validate_now("x") == ValidationResult(False, "why", 0.3, "r")

    flag = Requirement("old", lambda t: t == "yes")
    assert flag.validate_now("yes") == ValidationResult(True, None, None, "old")
    assert flag.validate_now("no") == ValidationResult(False, None, None, "old")
    flag.description = "new"  # the cached verdicts follow a renamed requirement
    assert flag.validate_now("no") == ValidationResult(False, None, None, "new")

    with pytest.raises(TypeError) as raised:
        await Requirement("bad", lambda t: "yes").validate("x")
    assert str(raised.value) == (
        "requirement 'bad' returned str; a check must return bool or ValidationResult"
    )

    seen = []
    with_context = Requirement("ctx", lambda t, context: seen.append(context) or t == "x")
    row_context = CheckContext(row={"a": 1})
    assert (await with_context.validate("x", row_context)).passed
    assert with_context.validate_now("x") == ValidationResult(True, None, None, "ctx")
    assert seen[0] is row_context and isinstance(seen[1], CheckContext)


def test_bare_callables_are_named_by_docstring_name_or_type() -> None:
    def undocumented(text: str) -> bool:
        return True

    class Callable:
        def __call__(self, text: str) -> bool:
            return True

    def polite(text: str) -> bool:
        """says please

        more text
        """
        return "please" in text

    named, typed, documented = as_requirements([undocumented, Callable(), polite])
    assert (named.description, typed.description) == ("undocumented", "Callable")
    assert documented.description == "says please"  # the docstring's first line
    kept = Requirement("kept", bool)
    assert as_requirements([kept])[0] is kept
    for item in (3, "not callable"):
        with pytest.raises(TypeError) as raised:
            as_requirements([item])
        assert str(raised.value) == (
            f"a requirement must be a Requirement or a callable(text), got {item!r}"
        )


def boom(text: str) -> bool:
    """boom"""
    raise ValueError("no good")


def stop(text: str) -> bool:
    """stop"""
    raise StopSampling("enough")


async def late(text: str) -> bool:
    """late"""
    return True


async def late_boom(text: str) -> bool:
    """late boom"""
    raise KeyError("k")


async def late_stop(text: str) -> bool:
    """late stop"""
    raise StopSampling("enough")


async def test_validate_all_runs_every_check_in_order() -> None:
    synchronous = as_requirements([lambda t: True, boom, contains("x")])
    verdicts = validate_all(synchronous, "x")
    assert isinstance(verdicts, tuple)  # no async check: no coroutine
    assert verdicts == (
        ValidationResult(True, None, None, "<lambda>"),
        ValidationResult(False, "the check raised ValueError: no good", None, "boom"),
        ValidationResult(True, None, None, "contains 'x'"),
    )
    mixed = as_requirements([contains("x"), late, boom, late_boom, lambda t: False])
    pending = validate_all(mixed, "x")
    assert inspect.iscoroutine(pending)
    assert await pending == (
        ValidationResult(True, None, None, "contains 'x'"),
        ValidationResult(True, None, None, "late"),
        ValidationResult(False, "the check raised ValueError: no good", None, "boom"),
        ValidationResult(False, "the check raised KeyError: 'k'", None, "late boom"),
        ValidationResult(False, None, None, "<lambda>"),
    )
    calls = []

    def counted(text: str) -> Awaitable[bool]:
        """counted"""
        calls.append(text)  # a check may do work before it hands back an awaitable
        return late(text)

    def row_says(text: str, context: CheckContext) -> bool:
        """row says"""
        return context.row == {"answer": text}

    row = CheckContext(row={"answer": "x"})
    checks = as_requirements([row_says, counted, contains("x"), row_says])
    assert await validate_all(checks, "x", row) == (
        ValidationResult(True, None, None, "row says"),
        ValidationResult(True, None, None, "counted"),
        ValidationResult(True, None, None, "contains 'x'"),
        ValidationResult(True, None, None, "row says"),
    )
    assert calls == ["x"]
    for checks in ([stop, late], [late, stop], [late, late_stop]):
        with pytest.raises(StopSampling, match="enough"):
            outcome = validate_all(as_requirements(checks), "x")
            if inspect.iscoroutine(outcome):
                await outcome


def lacks_logprobs(text: str) -> bool:
    """lacks"""
    raise CannotDecide("no log-probabilities came", "token log-probabilities")


async def late_lacks(text: str) -> bool:
    """late lacks"""
    raise CannotDecide("no model here", "a model's reply")


async def test_a_check_that_cannot_decide_fails_in_a_call_and_is_undecided_in_a_rescore() -> None:
    checks = as_requirements([lacks_logprobs, contains("x"), late, late_lacks, boom])
    in_a_call = await validate_all(checks, "x")  # type: ignore[misc]
    assert in_a_call[0] == ValidationResult(False, "no log-probabilities came", None, "lacks")
    assert in_a_call[3] == ValidationResult(False, "no model here", None, "late lacks")
    undecided: set[int] = set()
    rescored = await validate_all(checks, "x", undecided=undecided)  # type: ignore[misc]
    assert undecided == {0, 3}  # a check that raised anything else failed: it decided
    assert rescored[0].reason == (
        "(not known: the check needs token log-probabilities, which the run did not keep)"
    )
    assert rescored[3].reason == (
        "(not known: the check needs a model's reply, which the run did not keep)"
    )
    assert [v.passed for v in rescored] == [False, True, True, False, False]
    assert rescored[4].reason == "the check raised ValueError: no good"


async def test_validate_all_fails_checks_slower_than_check_timeout() -> None:
    async def slow(text: str) -> bool:
        """slow"""
        await anyio.sleep(5)
        return True

    def slow_sync(text: str) -> bool:
        """slow sync"""
        time.sleep(0.06)
        return True

    reason = "the check took longer than check_timeout (0.05s)"
    checks = as_requirements([slow_sync, late, slow, slow_sync, lambda t: True])
    assert await validate_all(checks, "x", check_timeout=0.05) == (
        ValidationResult(False, reason, None, "slow sync"),
        ValidationResult(True, None, None, "late"),
        ValidationResult(False, reason, None, "slow"),
        ValidationResult(False, reason, None, "slow sync"),
        ValidationResult(True, None, None, "<lambda>"),
    )
    quick = validate_all(as_requirements([lambda t: True]), "x", check_timeout=5)
    assert quick == (ValidationResult(True, None, None, "<lambda>"),)
    assert await validate_all(as_requirements([late, lambda t: True]), "x", check_timeout=5) == (
        ValidationResult(True, None, None, "late"),
        ValidationResult(True, None, None, "<lambda>"),
    )


def test_a_verdict_named_for_its_requirement_keeps_every_other_field() -> None:
    import dataclasses

    verdict = ValidationResult(False, "why", 0.25, None, "42")
    named = verdict.of("the answer is right")
    assert named == dataclasses.replace(verdict, requirement="the answer is right")
    # every field is set to a value other than its default, so a field added later and
    # left out of ``of`` fails this
    assert all(
        getattr(verdict, f.name) != f.default
        for f in dataclasses.fields(ValidationResult)
        if f.name not in ("passed", "requirement")
    )
